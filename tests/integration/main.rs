//! One integration-test binary for mcpguard, a module per capability. Every test here drives
//! the real `mcpguard` binary with real child processes.

mod support;

mod audit_policy;
mod docs;
mod gate;
mod gate_interop;
mod interop;
mod lifecycle;
mod relay;
mod snapshot;
mod wrap;
