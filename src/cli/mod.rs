//! The command line: every flag (`flags`), the snapshot subcommands (`commands`),
//! `mcpguard approvals` (`approvals`), `mcpguard wrap` (`wrap`), the server command with package
//! runners replaced by their pinned installs (`launch`), `mcpguard update` (`update`), the
//! interactive review on a terminal (`interactive`), signed reviews (`signed`), the team lock
//! file (`lock`), the guided demo and its built-in server (`demo`) and the generated man pages
//! and completions (`docgen`).
//!
//! The top of the house: the only folder that may know every other one. Nothing below imports it.

pub mod approvals;
pub mod commands;
pub mod demo;
pub mod docgen;
pub mod flags;
pub mod interactive;
pub mod launch;
pub mod lock;
pub mod pty;
pub mod signed;
pub mod template;
pub mod update;
pub mod wrap;
