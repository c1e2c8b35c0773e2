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

use std::borrow::Cow;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use jiff::Timestamp;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};

use crate::snapshot::canonical::{canonical_bytes, digest, sha256_hex};
use crate::snapshot::strict::{parse_strict, StrictError};

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

/// The stable code of each kind of audit record. The codes are a public interface (auditors grep
/// and alert on them), so they never change once released; new kinds get new codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// mcpguard started for a server.
    Start,
    /// The snapshot's digest, strict parse, expiry and reviews were checked before the spawn.
    SnapshotVerified,
    /// The handshake matched the pinned protocol version and server identity.
    HandshakePinned,
    /// A `tools/list` was answered from the snapshot.
    ListServed,
    /// A `tools/call` was forwarded to the server.
    CallAllowed,
    /// A `tools/call` was refused by the gate or the policy.
    CallRefused,
    /// A human approved a write through the host.
    CallConfirmed,
    /// A human declined (or did not answer) the confirmation of a write.
    CallDeniedByUser,
    /// The outcome of a forwarded call is unknown (the server went away, a timeout).
    CallIndeterminate,
    /// The review stopped holding (for example a list change) and calls are refused until it does.
    ReviewInvalidated,
    /// A capability (sampling, elicitation, roots, ...) was removed or a request for it refused.
    CapabilityBlocked,
    /// The sandbox was applied to the child.
    SandboxApplied,
    /// The server process ended.
    ChildExit,
    /// The raw error text of the server, kept for the auditor and never shown to the model.
    ErrorTextRaw,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [EventKind; 14] = [
        EventKind::Start,
        EventKind::SnapshotVerified,
        EventKind::HandshakePinned,
        EventKind::ListServed,
        EventKind::CallAllowed,
        EventKind::CallRefused,
        EventKind::CallConfirmed,
        EventKind::CallDeniedByUser,
        EventKind::CallIndeterminate,
        EventKind::ReviewInvalidated,
        EventKind::CapabilityBlocked,
        EventKind::SandboxApplied,
        EventKind::ChildExit,
        EventKind::ErrorTextRaw,
    ];

    /// The stable code written in the record's `event` member.
    pub fn code(self) -> &'static str {
        match self {
            EventKind::Start => "start",
            EventKind::SnapshotVerified => "snapshot_verified",
            EventKind::HandshakePinned => "handshake_pinned",
            EventKind::ListServed => "list_served",
            EventKind::CallAllowed => "call_allowed",
            EventKind::CallRefused => "call_refused",
            EventKind::CallConfirmed => "call_confirmed",
            EventKind::CallDeniedByUser => "call_denied_by_user",
            EventKind::CallIndeterminate => "call_indeterminate",
            EventKind::ReviewInvalidated => "review_invalidated",
            EventKind::CapabilityBlocked => "capability_blocked",
            EventKind::SandboxApplied => "sandbox_applied",
            EventKind::ChildExit => "child_exit",
            EventKind::ErrorTextRaw => "error_text_raw",
        }
    }

    /// The kind with this code, if there is one.
    pub fn from_code(code: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|kind| kind.code() == code)
    }

    /// The `outcome` written when the caller does not name one, so that every record has an
    /// outcome an auditor can filter on without knowing each call site.
    pub fn default_outcome(self) -> &'static str {
        match self {
            EventKind::Start => "started",
            EventKind::SnapshotVerified => "verified",
            EventKind::HandshakePinned => "pinned",
            EventKind::ListServed => "served",
            EventKind::CallAllowed => "allowed",
            EventKind::CallRefused => "refused",
            EventKind::CallConfirmed => "confirmed",
            EventKind::CallDeniedByUser => "denied",
            EventKind::CallIndeterminate => "indeterminate",
            EventKind::ReviewInvalidated => "invalidated",
            EventKind::CapabilityBlocked => "blocked",
            EventKind::SandboxApplied => "applied",
            EventKind::ChildExit => "exited",
            EventKind::ErrorTextRaw => "recorded",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Whether argument and result values are written, or only the digest of the arguments.
///
/// The policy's `audit.payload` (`crate::policy::AuditPayload`) is what users set; this is the
/// writer's own copy so that the log does not depend on how the policy is parsed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Payload {
    /// Only `argsSha256`; no argument or result value. Arguments can hold secrets and personal
    /// data, and a log is read by more people than the conversation was, so this is the default.
    #[default]
    Digests,
    /// `argsSha256` plus the `arguments` and `result` values, for a policy that asks for them.
    Full,
}

/// The SHA-256 (lowercase hex) of the RFC 8785 canonical JSON of a call's arguments: the same
/// arguments give the same digest whatever member order or number spelling the host used.
pub fn args_digest(arguments: &Value) -> String {
    digest(arguments)
}

/// One decision to record. Build it with [`Event::new`] (or [`Event::error_text_raw`]) and the
/// chained setters; [`AuditLog::record`] adds `seq`, `time`, `server`, `snapshot`, `prev` and
/// `hash`.
///
/// The optional members, in the order they appear in a record: `tool`, `argsSha256` (from
/// [`Event::arguments`]), `outcome` (always present), `code` (the refusal code), `durationMs`,
/// `detail`, then in [`Payload::Full`] only `arguments` and `result`, and for
/// [`EventKind::ErrorTextRaw`] only `errorText` and `errorTextBytes`. A record that would be longer
/// than [`MAX_RECORD_BYTES`] with its payload values is written without them and with
/// `"payloadOmitted": "record too long"` instead.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    kind: EventKind,
    outcome: Option<Cow<'a, str>>,
    tool: Option<Cow<'a, str>>,
    code: Option<Cow<'a, str>>,
    duration: Option<Duration>,
    detail: Option<Cow<'a, str>>,
    arguments: Option<&'a Value>,
    result: Option<&'a Value>,
    error_text: Option<Cow<'a, str>>,
}

impl<'a> Event<'a> {
    /// An event of `kind` with its default outcome and no optional members.
    pub fn new(kind: EventKind) -> Self {
        Event {
            kind,
            outcome: None,
            tool: None,
            code: None,
            duration: None,
            detail: None,
            arguments: None,
            result: None,
            error_text: None,
        }
    }

    /// An [`EventKind::ErrorTextRaw`] event carrying the server's raw error text. This is the only
    /// way to put server-written text into the log, so that it cannot end up in other records by
    /// accident.
    pub fn error_text_raw(text: impl Into<Cow<'a, str>>) -> Self {
        let mut event = Event::new(EventKind::ErrorTextRaw);
        event.error_text = Some(text.into());
        event
    }

    /// The kind of this event.
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// Replaces the default outcome.
    pub fn outcome(mut self, outcome: impl Into<Cow<'a, str>>) -> Self {
        self.outcome = Some(outcome.into());
        self
    }

    /// The tool the event is about.
    pub fn tool(mut self, name: impl Into<Cow<'a, str>>) -> Self {
        self.tool = Some(name.into());
        self
    }

    /// The call's arguments: their digest is always written as `argsSha256`, the value itself only
    /// in [`Payload::Full`].
    pub fn arguments(mut self, arguments: &'a Value) -> Self {
        self.arguments = Some(arguments);
        self
    }

    /// The call's result: written only in [`Payload::Full`].
    pub fn result(mut self, result: &'a Value) -> Self {
        self.result = Some(result);
        self
    }

    /// The refusal code (the `code` of mcpguard's error contract).
    pub fn code(mut self, code: impl Into<Cow<'a, str>>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// How long the decision or the call took, written in whole milliseconds.
    pub fn duration(mut self, duration: Duration) -> Self {
        self.duration = Some(duration);
        self
    }

    /// A short explanation, cut to [`MAX_DETAIL_BYTES`].
    pub fn detail(mut self, detail: impl Into<Cow<'a, str>>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// The members between `snapshot` and `prev`, in record order. `include_payload` is false in
    /// [`Payload::Digests`] and when a full record would be too long to verify.
    fn fields(&self, include_payload: bool) -> Map<String, Value> {
        let mut map = Map::new();
        if let Some(tool) = &self.tool {
            map.insert("tool".into(), Value::from(tool.as_ref()));
        }
        if let Some(arguments) = self.arguments {
            map.insert("argsSha256".into(), Value::from(args_digest(arguments)));
        }
        let outcome = self
            .outcome
            .as_deref()
            .unwrap_or(self.kind.default_outcome());
        map.insert("outcome".into(), Value::from(outcome));
        if let Some(code) = &self.code {
            map.insert("code".into(), Value::from(code.as_ref()));
        }
        if let Some(duration) = self.duration {
            let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
            map.insert("durationMs".into(), Value::from(millis));
        }
        if let Some(detail) = &self.detail {
            map.insert(
                "detail".into(),
                Value::from(cut(detail, MAX_DETAIL_BYTES, "…")),
            );
        }
        if include_payload {
            if let Some(arguments) = self.arguments {
                map.insert("arguments".into(), arguments.clone());
            }
            if let Some(result) = self.result {
                map.insert("result".into(), result.clone());
            }
        }
        if let Some(text) = &self.error_text {
            map.insert(
                "errorText".into(),
                Value::from(cut(text, MAX_ERROR_TEXT_BYTES, "")),
            );
            map.insert("errorTextBytes".into(), Value::from(text.len()));
        }
        map
    }
}

/// Returns `text` cut to at most `max` bytes on a character boundary, with `marker` appended when
/// something was cut (the marker's own bytes count towards `max`).
fn cut<'t>(text: &'t str, max: usize, marker: &str) -> Cow<'t, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max.saturating_sub(marker.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}{marker}", &text[..end]))
}

/// The end of a chain: the last record's `seq` and `hash` (seq 0 and [`GENESIS_PREV`] for an
/// empty file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainHead {
    pub seq: u64,
    pub hash: String,
}

impl ChainHead {
    fn genesis() -> Self {
        ChainHead {
            seq: 0,
            hash: GENESIS_PREV.to_owned(),
        }
    }
}

/// What is wrong with one line of an audit log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The file does not end with a newline: it was cut short or the last write was interrupted.
    #[error(
        "the line is incomplete (the file does not end with a newline): the log was truncated or \
         its last write was interrupted"
    )]
    Truncated,

    /// The line is longer than [`MAX_RECORD_BYTES`].
    #[error("the line is longer than {MAX_RECORD_BYTES} bytes, so it is not an audit record")]
    TooLong,

    /// The line is not one strict JSON document (duplicate member names are refused too, because
    /// two readers could disagree about which value counts).
    #[error("the line is not valid JSON: {0}")]
    Malformed(StrictError),

    /// The line is JSON but lacks a member of a record or has one of the wrong type.
    #[error("the line is not an audit record: {0}")]
    NotARecord(String),

    /// The stored `hash` is not the hash of the line's content: the line was changed after it was
    /// written.
    #[error(
        "the line was edited: its content hashes to {computed}, but its \"hash\" member says \
         {stored}"
    )]
    Edited { stored: String, computed: String },

    /// `seq` jumped forward and the skipped records appear nowhere later in the file.
    #[error(
        "{count} record(s) were removed before this line: its seq is {found}, but {expected} was \
         expected and no later line has it",
        count = found.saturating_sub(*expected)
    )]
    Removed { expected: u64, found: u64 },

    /// `seq` is not the next number, and the expected record is elsewhere (or this one repeats an
    /// earlier number): lines were moved, copied or inserted.
    #[error(
        "the lines are out of order: this line's seq is {found}, but {expected} was expected (a \
         line was moved, or copied or inserted here)"
    )]
    OutOfOrder { expected: u64, found: u64 },

    /// `seq` is right but `prev` is not the previous record's hash: the line was not written after
    /// the one before it (it was inserted, or the line before it was replaced).
    #[error(
        "the chain is broken: \"prev\" is {found}, but the previous record's hash is {expected} \
         (this line was forged and inserted, or the line before it was replaced)"
    )]
    ChainBroken { expected: String, found: String },
}

/// Why [`verify`] could not confirm a log.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("cannot read the audit log {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },

    /// The first problem found; `line` counts from 1.
    #[error("audit log {}, line {line}: {problem}", path.display())]
    Invalid {
        path: PathBuf,
        line: usize,
        problem: Problem,
    },
}

/// What [`verify`] found in a log whose chain is intact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The number of records.
    pub records: usize,
    /// The `time` of the first record, if there is one.
    pub first_time: Option<Timestamp>,
    /// The `time` of the last record, if there is one.
    pub last_time: Option<Timestamp>,
    /// The last record's `hash` ([`GENESIS_PREV`] for an empty log). Compare it with a copy kept
    /// elsewhere to detect removed trailing lines, which the file alone cannot show.
    pub head: String,
}

/// Why [`AuditLog::open`] refused a file.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the audit log {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },

    /// Pipes, terminals and devices are refused: the log must be a file that can be verified, and
    /// stdout in particular carries JSON-RPC.
    #[error(
        "the audit log {} is not a regular file; audit records are only written to a regular \
         file, never to a terminal, pipe or device (stdout carries JSON-RPC)",
        path.display()
    )]
    NotARegularFile { path: PathBuf },

    #[error(
        "the audit log {} is the file stdout writes to; stdout carries JSON-RPC, so name another \
         file",
        path.display()
    )]
    IsStdout { path: PathBuf },

    /// The existing file's last line is not an intact record, so the chain cannot be continued.
    #[error(
        "refusing to append to the audit log {}: its last line is damaged ({problem}); run \
         `mcpguard audit verify` on it, then move it aside and start a new log",
        path.display()
    )]
    Damaged { path: PathBuf, problem: Problem },
}

/// The appending writer of one audit log file. See the module documentation for the format.
pub struct AuditLog {
    path: PathBuf,
    payload: Payload,
    server: String,
    state: Mutex<State>,
}

/// Everything that changes with each record, behind the mutex.
struct State {
    file: File,
    snapshot: Option<String>,
    head: ChainHead,
    /// The file length right after this writer's last write (or the open). A different length at
    /// the next record means another process appended (or the file was cut), so the chain must be
    /// re-read from the file.
    end: u64,
}

impl fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .field("payload", &self.payload)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl AuditLog {
    /// Opens (creating with mode 0600 if needed) the log at `path` for appending. An existing log
    /// is continued: its last line must be an intact record (it is parsed and its hash checked;
    /// the rest of the file is not read, which is what [`verify`] is for), and the next record
    /// follows it in `seq` and `prev`. A damaged last line is refused rather than repaired,
    /// because appending would hide the damage behind a valid-looking continuation.
    ///
    /// `server` is the server key written in every record; `snapshot` the pinned snapshot digest,
    /// if known yet (see [`AuditLog::set_snapshot`]).
    pub fn open(
        path: &Path,
        server: impl Into<String>,
        snapshot: Option<String>,
        payload: Payload,
    ) -> Result<AuditLog, OpenError> {
        let io_err = |source| OpenError::Io {
            path: path.to_owned(),
            source,
        };
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .read(true)
            .mode(0o600)
            .open(path)
            .map_err(io_err)?;
        let meta = file.metadata().map_err(io_err)?;
        if !meta.is_file() {
            return Err(OpenError::NotARegularFile {
                path: path.to_owned(),
            });
        }
        if is_stdout(&meta) {
            return Err(OpenError::IsStdout {
                path: path.to_owned(),
            });
        }
        let (head, end) = {
            let guard = lock_file(&file).map_err(io_err)?;
            let end = guard.metadata().map_err(io_err)?.len();
            let head = read_head(&guard, end).map_err(|err| match err {
                TailError::Io(source) => io_err(source),
                TailError::Damaged(problem) => OpenError::Damaged {
                    path: path.to_owned(),
                    problem,
                },
            })?;
            (head, end)
        };
        Ok(AuditLog {
            path: path.to_owned(),
            payload,
            server: server.into(),
            state: Mutex::new(State {
                file,
                snapshot,
                head,
                end,
            }),
        })
    }

    /// The file this log appends to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether argument and result values are written.
    pub fn payload(&self) -> Payload {
        self.payload
    }

    /// Sets the snapshot digest written in later records (`None` writes `null`), for a log that is
    /// opened before the snapshot is loaded, or a run without one.
    pub fn set_snapshot(&self, snapshot: Option<String>) {
        self.lock_state().snapshot = snapshot;
    }

    /// The last record this writer wrote or found at open. Printing it at exit lets removed
    /// trailing lines be detected later (see the module documentation). Another process may have
    /// appended since.
    pub fn head(&self) -> ChainHead {
        self.lock_state().head.clone()
    }

    /// Appends one record. When this returns `Ok`, the whole line is in the kernel: process exit
    /// loses nothing (a power loss still can, see [`AuditLog::sync`]).
    ///
    /// On error nothing is appended: a partly written line is cut off again (under the file
    /// lock, so no other writer's line is touched), and the chain continues from the last intact
    /// record. Errors are also returned when the file no longer ends with an intact record (it
    /// was damaged or cut since the last write); the caller decides whether to fail closed.
    pub fn record(&self, event: Event<'_>) -> io::Result<()> {
        // The digest and payload copies are the expensive part; they are made before taking the
        // locks so that concurrent callers wait only for the write itself.
        let fields = event.fields(self.payload == Payload::Full);
        let mut state = self.lock_state();
        let state = &mut *state;
        let guard = lock_file(&state.file)?;
        let len = guard.metadata()?.len();
        if len < state.end {
            return Err(io::Error::other(format!(
                "the audit log {} shrank from {} to {len} bytes while mcpguard was writing it: it \
                 was cut or rotated underneath; records are not appended to a cut chain (restart \
                 mcpguard to start a new log after rotating)",
                self.path.display(),
                state.end
            )));
        }
        if len > state.end {
            // Another process appended since our last write; continue after its last record.
            state.head = read_head(&guard, len).map_err(|err| match err {
                TailError::Io(err) => err,
                TailError::Damaged(problem) => io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the last line of the audit log {} is damaged ({problem}); not appending",
                        self.path.display()
                    ),
                ),
            })?;
            state.end = len;
        }
        let seq = state.head.seq.checked_add(1).ok_or_else(|| {
            io::Error::other("the audit log's seq cannot grow any further; start a new log")
        })?;
        let time = format!("{:.6}", Timestamp::now());
        let build = |fields: Map<String, Value>| {
            self.build_line(seq, &time, event.kind, &state.snapshot, fields, &state.head)
        };
        let (mut line, mut hash) = build(fields)?;
        if line.len() > MAX_RECORD_BYTES {
            // Only payload values can make a record this long. A line verify would refuse is worse
            // than a record without its values, so they are dropped and the drop is recorded.
            let mut fields = event.fields(false);
            fields.insert("payloadOmitted".into(), Value::from("record too long"));
            (line, hash) = build(fields)?;
        }
        let mut writer: &File = &guard;
        if let Err(err) = writer.write_all(line.as_bytes()) {
            // A partial line would break the chain for every later record; cutting it off leaves
            // the file as it was. If even that fails, the next record finds a damaged last line
            // and reports it.
            let _ = guard.set_len(len);
            return Err(err);
        }
        // `File` has no buffer, so this does nothing today; it is here so that wrapping the file
        // in a buffered writer later cannot silently start losing lines at exit.
        writer.flush()?;
        state.end = len + line.len() as u64;
        state.head = ChainHead { seq, hash };
        Ok(())
    }

    /// Forces the records written so far to the disk (`fdatasync`), so that they also survive a
    /// power loss or kernel crash. Process exit alone never needs this.
    pub fn sync(&self) -> io::Result<()> {
        self.lock_state().file.sync_data()
    }

    /// Serializes one record and returns the line (with its `\n`) and the record's hash.
    fn build_line(
        &self,
        seq: u64,
        time: &str,
        kind: EventKind,
        snapshot: &Option<String>,
        fields: Map<String, Value>,
        head: &ChainHead,
    ) -> io::Result<(String, String)> {
        let mut record = Map::new();
        record.insert("seq".into(), Value::from(seq));
        record.insert("time".into(), Value::from(time));
        record.insert("event".into(), Value::from(kind.code()));
        record.insert("server".into(), Value::from(self.server.as_str()));
        record.insert(
            "snapshot".into(),
            snapshot.as_deref().map_or(Value::Null, Value::from),
        );
        record.extend(fields);
        record.insert("prev".into(), Value::from(head.hash.as_str()));
        let mut record = Value::Object(record);
        let hash = sha256_hex(&canonical_bytes(&record));
        if let Value::Object(map) = &mut record {
            map.insert("hash".into(), Value::from(hash.as_str()));
        }
        let mut line = serde_json::to_string(&record).map_err(io::Error::other)?;
        line.push('\n');
        Ok((line, hash))
    }

    /// Locks the state; a poisoned mutex is still usable because the state is only changed after
    /// a write succeeded, so a panic elsewhere cannot leave it half-updated.
    fn lock_state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Tells whether `meta` is the file stdout writes to.
fn is_stdout(meta: &std::fs::Metadata) -> bool {
    let Ok(fd) = io::stdout().as_fd().try_clone_to_owned() else {
        // Without a stdout there is nothing to confuse the log with.
        return false;
    };
    match File::from(fd).metadata() {
        Ok(out) => out.dev() == meta.dev() && out.ino() == meta.ino(),
        Err(_) => false,
    }
}

/// Takes an exclusive `flock` on the open file description behind `file`, released when the
/// returned guard is dropped. The lock is on a duplicate descriptor so that the guard owns it
/// while the log keeps `file`.
fn lock_file(file: &File) -> io::Result<Flock<File>> {
    let mut dup = file.try_clone()?;
    loop {
        match Flock::lock(dup, FlockArg::LockExclusive) {
            Ok(guard) => return Ok(guard),
            // A signal handler installed without SA_RESTART interrupts the wait; keep waiting.
            Err((file, Errno::EINTR)) => dup = file,
            Err((_, errno)) => return Err(io::Error::from(errno)),
        }
    }
}

enum TailError {
    Io(io::Error),
    Damaged(Problem),
}

impl From<io::Error> for TailError {
    fn from(err: io::Error) -> Self {
        TailError::Io(err)
    }
}

/// Reads the last line of a file of length `len` and returns the chain head it records.
fn read_head(file: &File, len: u64) -> Result<ChainHead, TailError> {
    if len == 0 {
        return Ok(ChainHead::genesis());
    }
    let mut last = [0_u8; 1];
    file.read_exact_at(&mut last, len - 1)?;
    if last[0] != b'\n' {
        return Err(TailError::Damaged(Problem::Truncated));
    }
    let end = len - 1;
    let max = MAX_RECORD_BYTES as u64;
    let mut start = end;
    let mut chunk = vec![0_u8; TAIL_CHUNK];
    while start > 0 {
        let n = start.min(TAIL_CHUNK as u64);
        let from = start - n;
        // `n` is at most TAIL_CHUNK, so it fits a usize.
        let buf = &mut chunk[..n as usize];
        file.read_exact_at(buf, from)?;
        if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            start = from + i as u64 + 1;
            break;
        }
        start = from;
        if end - start > max {
            return Err(TailError::Damaged(Problem::TooLong));
        }
    }
    if end - start > max {
        return Err(TailError::Damaged(Problem::TooLong));
    }
    // Bounded by MAX_RECORD_BYTES just above, so it fits a usize.
    let mut line = vec![0_u8; (end - start) as usize];
    file.read_exact_at(&mut line, start)?;
    let checked = check_record(&line).map_err(TailError::Damaged)?;
    Ok(ChainHead {
        seq: checked.seq,
        hash: checked.hash,
    })
}

/// The members of a record that the chain checks use.
struct Checked {
    seq: u64,
    time: Timestamp,
    prev: String,
    hash: String,
}

/// Checks one line on its own: strict JSON, the members of a record, and the hash. The hash is
/// compared before the other members are examined, so that any change to a written line is
/// reported as an edit rather than as whatever the change happened to break.
fn check_record(line: &[u8]) -> Result<Checked, Problem> {
    let value = parse_strict(line).map_err(Problem::Malformed)?;
    let Value::Object(mut record) = value else {
        return Err(Problem::NotARecord("the line is not a JSON object".into()));
    };
    let hash = match record.shift_remove("hash") {
        Some(Value::String(hash)) if is_hex_digest(&hash) => hash,
        _ => return Err(not_a_record("hash", "a SHA-256 in lowercase hex")),
    };
    let computed = canonical_digest(&record);
    if computed != hash {
        return Err(Problem::Edited {
            stored: hash,
            computed,
        });
    }
    let seq = record
        .get("seq")
        .and_then(Value::as_u64)
        .ok_or_else(|| not_a_record("seq", "a non-negative integer"))?;
    let time = record
        .get("time")
        .and_then(Value::as_str)
        .and_then(|text| text.parse::<Timestamp>().ok())
        .ok_or_else(|| not_a_record("time", "an RFC 3339 instant"))?;
    if !record.get("event").is_some_and(Value::is_string) {
        return Err(not_a_record("event", "a string"));
    }
    let prev = match record.get("prev") {
        Some(Value::String(prev)) if is_hex_digest(prev) => prev.clone(),
        _ => return Err(not_a_record("prev", "a SHA-256 in lowercase hex")),
    };
    Ok(Checked {
        seq,
        time,
        prev,
        hash,
    })
}

/// The record hash: SHA-256 over the canonical JSON of the record's members other than `hash`.
fn canonical_digest(record: &Map<String, Value>) -> String {
    // Canonical bytes need a `Value`; the clone is only made while verifying, not while writing.
    digest(&Value::Object(record.clone()))
}

fn not_a_record(member: &str, what: &str) -> Problem {
    Problem::NotARecord(format!("\"{member}\" is missing or is not {what}"))
}

fn is_hex_digest(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// How reading one line ended.
enum LineRead {
    Eof,
    /// A line ending in `\n` (removed from the buffer).
    Complete,
    /// The file ended inside a line.
    Unterminated,
    TooLong,
}

fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<LineRead> {
    buf.clear();
    let limit = MAX_RECORD_BYTES as u64 + 1;
    let n = reader.by_ref().take(limit).read_until(b'\n', buf)?;
    Ok(if n == 0 {
        LineRead::Eof
    } else if buf.last() == Some(&b'\n') {
        buf.pop();
        LineRead::Complete
    } else if n as u64 >= limit {
        LineRead::TooLong
    } else {
        LineRead::Unterminated
    })
}

/// Verifies a whole audit log: every line strict JSON and an intact record, `seq` counting up from
/// 1 by exactly 1, and every `prev` equal to the previous record's `hash` ([`GENESIS_PREV`] for
/// the first). Returns the first problem with its line number.
///
/// Limitation: removing the last N lines leaves a valid, shorter chain, and so does rewriting the
/// file with recomputed hashes; neither can be detected from the file alone. Compare
/// [`VerifyReport::head`] with a head hash recorded elsewhere (mcpguard prints its head on stderr
/// at exit) to detect them.
///
/// The file is read as a stream, so its size does not matter. A log that is being written while
/// it is verified may show its newest line as incomplete.
pub fn verify(path: &Path) -> Result<VerifyReport, VerifyError> {
    let io_err = |source| VerifyError::Io {
        path: path.to_owned(),
        source,
    };
    let invalid = |line, problem| VerifyError::Invalid {
        path: path.to_owned(),
        line,
        problem,
    };
    let mut reader = BufReader::new(File::open(path).map_err(io_err)?);
    let mut head = ChainHead::genesis();
    let mut report = VerifyReport {
        records: 0,
        first_time: None,
        last_time: None,
        head: head.hash.clone(),
    };
    let mut buf = Vec::new();
    let mut line_no = 0_usize;
    loop {
        let read = read_line(&mut reader, &mut buf).map_err(io_err)?;
        line_no += 1;
        match read {
            LineRead::Eof => break,
            LineRead::Complete => {}
            LineRead::Unterminated => return Err(invalid(line_no, Problem::Truncated)),
            LineRead::TooLong => return Err(invalid(line_no, Problem::TooLong)),
        }
        let record = check_record(&buf).map_err(|problem| invalid(line_no, problem))?;
        let Some(expected) = head.seq.checked_add(1) else {
            let problem =
                Problem::NotARecord("the seq before this line is the largest possible".into());
            return Err(invalid(line_no, problem));
        };
        if record.seq != expected {
            let found = record.seq;
            let problem = if found > expected
                && !seq_appears(&mut reader, expected, found).map_err(io_err)?
            {
                Problem::Removed { expected, found }
            } else {
                Problem::OutOfOrder { expected, found }
            };
            return Err(invalid(line_no, problem));
        }
        if record.prev != head.hash {
            let problem = Problem::ChainBroken {
                expected: head.hash,
                found: record.prev,
            };
            return Err(invalid(line_no, problem));
        }
        report.records += 1;
        report.first_time.get_or_insert(record.time);
        report.last_time = Some(record.time);
        head = ChainHead {
            seq: record.seq,
            hash: record.hash,
        };
    }
    report.head = head.hash;
    Ok(report)
}

/// Tells whether any remaining line holds a `seq` in `from..to`, which distinguishes records that
/// were moved further down from records that were removed. Lines are looked at on their own here;
/// damaged ones are skipped because the first problem has already been found.
fn seq_appears(reader: &mut impl BufRead, from: u64, to: u64) -> io::Result<bool> {
    let mut buf = Vec::new();
    loop {
        match read_line(reader, &mut buf)? {
            LineRead::Eof | LineRead::TooLong => return Ok(false),
            LineRead::Complete | LineRead::Unterminated => {}
        }
        let seq = parse_strict(&buf)
            .ok()
            .and_then(|value| value.get("seq").and_then(Value::as_u64));
        if seq.is_some_and(|seq| (from..to).contains(&seq)) {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests;
