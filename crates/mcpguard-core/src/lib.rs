//! mcpguard-core: every decision on the message path. What each message between the host and
//! the server is checked against, and how, lives here; the IO driver that moves the bytes and
//! carries out the decisions (`process::proxy`, in the `mcpguard` binary) decides nothing of
//! its own. From the bottom up:
//!
//! - `protocol` — facts of the protocol (versions, eras, error codes, `_meta` keys) and the
//!   diagnostics `Level`; imports nothing of ours.
//! - `wire` — framing, the lossless message view, sinks, sanitizing untrusted text, the secret
//!   and injection scanners.
//! - `snapshot` — the reviewed snapshot: format, canonical JSON, strict parsing, diff, views,
//!   signed reviews.
//! - `policy` — the local policy file and what it decides.
//! - `audit` — the hash-chained audit log.
//! - `gate` — the IO-free decision core: the session state machine and what it enforces.
//!
//! What it must never do: use `unsafe` (forbidden below), spawn a process, confine one (that is
//! `mcpguard-sandbox`), ask a person out of band (`mcpguard-approvals`) or parse a command line
//! (the `mcpguard` binary). None of those crates is a dependency of this one, so the compiler
//! holds that rule, and the crate's `clippy.toml` refuses the standard library's own
//! `std::process::Command` and TCP/UDP sockets (CI runs clippy with `-D warnings`); `tests/integration/layering.rs` holds the rules between its folders
//! (ARCHITECTURE.md, "Layers").

#![forbid(unsafe_code)]

pub mod audit;
pub mod gate;
pub mod policy;
pub mod protocol;
pub mod snapshot;
pub mod wire;
