//! One integration-test binary for mcpguard, a module per capability. Every test here drives
//! the real `mcpguard` binary with real child processes.

mod support;

mod approvals;
mod audit_policy;
mod claims;
mod confirm;
mod content;
mod demo;
mod desktop;
mod docs;
mod envelope;
mod errors;
mod escape;
mod first_hour;
mod floor;
mod gate;
mod gate_interop;
mod held;
mod hosts;
mod interop;
mod layering;
mod lifecycle;
mod lock;
mod modern;
mod packages;
mod polkit;
mod relay;
mod sandbox;
mod shapes;
mod signed;
mod snapshot;
mod syslog;
mod update;
mod wrap;
