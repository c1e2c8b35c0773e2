//! mcpguard: a security sidecar for one local MCP server.
//!
//! The crate is laid out in folders that follow the data flow; ARCHITECTURE.md has the map, the
//! rule of which folder may import which (checked by `tests/integration/layering.rs`) and the
//! invariants. From the bottom up:
//!
//! - `protocol` — facts of the protocol (versions, eras, error codes, `_meta` keys) and the
//!   diagnostics `Level`; imports nothing of ours.
//! - `wire` — framing, the lossless message view, sinks, sanitizing untrusted text.
//! - `snapshot` — the reviewed snapshot: format, canonical JSON, strict parsing, diff, views.
//! - `policy` — the local policy file and what it decides.
//! - `audit` — the hash-chained audit log.
//! - `gate` — the IO-free decision core: the session state machine and what it enforces.
//! - `sandbox` — the server's confinement.
//! - `approvals` — out-of-band confirmation: the per-user approval sockets behind
//!   `mcpguard approvals`, and the desktop notification channel.
//! - `process` — everything that runs or talks to a process: the proxy driver, the child, the
//!   synchronous client and the capture procedure, diagnostics on stderr.
//! - `cli` — flags, subcommands, `wrap`, the demo and the documentation generator; the only
//!   folder that knows every other.

pub mod cli;
pub mod process;

// The crates of the workspace, under the paths the binary, the examples and the tests have
// always used (`mcpguard::gate::…`, `crate::policy::…`).
pub use mcpguard_approvals::approvals;
pub use mcpguard_core::{audit, gate, policy, protocol, snapshot, wire};
pub use mcpguard_sandbox::sandbox;
