//! The tamper-evident audit log: one JSON object per line for every decision mcpguard makes.
//!
//! # Format
//!
//! Each line is one record, written as compact JSON followed by `\n`:
//!
//! ```text
//! {"seq":1,"time":"2026-05-01T09:30:00.123456Z","event":"call_allowed","server":"fs",
//!  "snapshot":"<hex>","tool":"read_file","argsSha256":"<hex>","outcome":"allowed",
//!  "durationMs":12,"prev":"<hex>","hash":"<hex>"}
//! ```
//!
//! (shown wrapped; a real record is a single line). `seq` counts records from 1; `time` is the
//! UTC instant in RFC 3339 with microseconds; `event` is a stable code from [`EventKind`];
//! `server` is the server key and `snapshot` the pinned snapshot digest, or `null` when there is
//! none. The optional members are described on [`Event`]. `hash` is the lowercase hex SHA-256 of
//! the RFC 8785 canonical JSON of the record without its `hash` member, and `prev` is the `hash` of
//! the record before it (64 zeros for the first record of a file). Editing, removing, inserting or
//! reordering a line therefore breaks either the line's own hash or the link from the line after
//! it, and [`verify`] reports the first such break with its line number.
//!
//! # What the chain cannot prove
//!
//! The chain has no secret key. Someone who can rewrite the file can also recompute every hash
//! after the line they changed, and a file whose last N lines were removed is itself a valid
//! chain, so neither is detectable from the file alone. Both are detected by comparing the head
//! hash (the last record's `hash`, returned by [`verify`] and by [`AuditLog::head`]) with a copy
//! kept somewhere the attacker cannot reach: mcpguard prints it on stderr at exit so that the
//! host's own log keeps one.
//!
//! # Durability and where records go
//!
//! [`AuditLog::record`] hands each record to the kernel with one `write_all` before it returns,
//! and nothing is buffered in the process, so a process that exits (or is killed) after
//! `record()` returned loses nothing. Surviving a power loss or kernel crash additionally needs
//! [`AuditLog::sync`]. Records never go to stdout, which carries JSON-RPC: [`AuditLog::open`]
//! refuses anything but a regular file, and refuses the file that stdout is writing to.
//!
//! # System-log sinks
//!
//! `audit.sink` may add the systemd journal and the local syslog socket ([`system`]). Each record
//! is chained and hashed once, written to the file (when there is a file sink), then sent to each
//! system-log sink with the same `seq`, `prev` and `hash`, so the chain covers every record in
//! every sink. [`AuditLog::record`] returns an error when any sink failed, and the proxy then does
//! not let the decision take effect (fail closed). Without a file sink the chain is kept in memory
//! and starts from the genesis at each start.
//!
//! # Several writers
//!
//! Threads share one [`AuditLog`] (it locks a mutex). Several processes may append to the same
//! file, for example every server of one host configured with the same `--audit-log`: each record
//! is written under an exclusive `flock`, and a writer that finds the file grew since its own last
//! write continues the chain from the new last line, so the file stays a single valid chain.
//!
//! # Payloads
//!
//! By default ([`Payload::Digests`]) no argument or result value is written, only `argsSha256`.
//! A digest is not encryption: anyone who reads the log can confirm a guessed argument (a short
//! path, a yes/no flag) by hashing the guess. [`Payload::Full`] also writes `arguments` and
//! `result`. The one place raw text from the server is written regardless of the mode is the
//! [`EventKind::ErrorTextRaw`] record, which keeps the server's own error message for the auditor
//! while the model only ever sees mcpguard's sanitized error.

#![forbid(unsafe_code)]

/// The `prev` of the first record in a file: no record came before it.
pub const GENESIS_PREV: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The longest line [`verify`] and [`AuditLog::open`] read. A record is bounded by the message
/// size limit (only [`Payload::Full`] makes records large), so a longer line means the file is not
/// an audit log; the bound keeps a mistaken path from being read into memory whole.
/// [`AuditLog::record`] never writes a longer line: it drops the payload values instead.
pub const MAX_RECORD_BYTES: usize = 256 * 1024 * 1024;

/// How much of the server's raw error text an [`EventKind::ErrorTextRaw`] record keeps. The
/// text comes from the server, so its size is the server's choice; `errorTextBytes` always gives
/// the original length so that a cut is visible.
pub const MAX_ERROR_TEXT_BYTES: usize = 64 * 1024;

/// How much of an [`Event::detail`] is kept; longer text is cut and ends with `…`. Details are
/// meant to be a short phrase, and a bound keeps a mistake from turning every record into a page.
pub const MAX_DETAIL_BYTES: usize = 1024;

/// Block size for reading the end of the file backwards to find its last line.
const TAIL_CHUNK: usize = 8 * 1024;

pub mod event;
mod log;
pub mod system;
mod verify;

pub use event::*;
pub use log::*;
pub use verify::*;

#[cfg(test)]
mod tests;
