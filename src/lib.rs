//! mcpguard: a security sidecar for one local MCP server.
//!
//! The crate is laid out in data-flow order; ARCHITECTURE.md has the map and the invariants.

pub mod audit;
pub mod canonical;
pub mod capture;
pub mod child;
pub mod cli;
pub mod client;
pub mod commands;
pub mod demo;
pub mod diag;
pub mod diff;
pub mod docgen;
pub mod frame;
pub mod gate;
pub mod manifest;
pub mod message;
pub mod modern;
pub mod policy;
pub mod proxy;
pub mod reviewview;
pub mod sandbox;
pub mod sanitize;
pub mod schema;
pub mod session;
pub mod sink;
pub mod strict;
pub mod trust;
pub mod wrap;
