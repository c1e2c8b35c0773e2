//! mcpguard: a security sidecar for one local MCP server. This package is the binary and the
//! two folders that need every other crate of the workspace:
//!
//! - `process` — everything that runs or talks to a process: the proxy driver (the reader
//!   threads that move each message's bytes and carry out what the gate decided), the child,
//!   the synchronous client and the capture procedure, diagnostics on stderr.
//! - `cli` — flags, subcommands, `wrap`, the demo and the documentation generator; the only
//!   folder that knows every other.
//!
//! The other names below are not this package's own: they are `pub use` of the workspace's
//! other crates (ARCHITECTURE.md, "Crates"), kept under the paths the binary, the examples and
//! the tests have always used. `protocol`, `wire`, `snapshot`, `policy`, `audit` and `gate` are
//! `mcpguard-core` (every decision on the message path, no `unsafe`); `sandbox` is
//! `mcpguard-sandbox` (the confinement); `approvals` is `mcpguard-approvals` (out-of-band
//! confirmation).

// Every module is denied `unsafe` but those that say `#![allow(unsafe_code)]` (or, for one
// function, `#[allow(unsafe_code)]`), so the compiler keeps the list of places that hold it.
#![deny(unsafe_code)]

pub mod cli;
pub mod process;

// The crates of the workspace, under the paths the binary, the examples and the tests have
// always used (`mcpguard::gate::…`, `crate::policy::…`).
pub use mcpguard_approvals::approvals;
pub use mcpguard_core::{audit, gate, policy, protocol, snapshot, wire};
pub use mcpguard_sandbox::sandbox;
