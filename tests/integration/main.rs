//! One integration-test binary for mcpguard, a module per capability. Every test here drives
//! the real `mcpguard` binary with real child processes.

mod support;

mod audit_policy;
mod confirm;
mod content;
mod demo;
mod docs;
mod escape;
mod gate;
mod gate_interop;
mod hosts;
mod interop;
mod layering;
mod lifecycle;
mod modern;
mod relay;
mod sandbox;
mod shapes;
mod snapshot;
mod wrap;
