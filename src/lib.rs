//! mcpguard: a security sidecar for one local MCP server.
//!
//! The crate is laid out in data-flow order; ARCHITECTURE.md has the map and the invariants.

pub mod canonical;
pub mod child;
pub mod cli;
pub mod diag;
pub mod frame;
pub mod message;
pub mod proxy;
pub mod sanitize;
pub mod session;
pub mod strict;
