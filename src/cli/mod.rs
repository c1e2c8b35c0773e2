//! The command line: every flag (`flags`), the snapshot subcommands (`commands`),
//! `mcpguard approvals` (`approvals`), `mcpguard wrap` (`wrap`), the guided demo and its
//! built-in server (`demo`) and the generated man pages and completions (`docgen`).
//!
//! The top of the house: the only folder that may know every other one. Nothing below imports it.

pub mod approvals;
pub mod commands;
pub mod demo;
pub mod docgen;
pub mod flags;
pub mod wrap;
