//! The local policy: a TOML file owned by the person who runs mcpguard (SPEC §1.2).
//!
//! The snapshot says what a human reviewed; the policy says what this machine accepts of it and
//! how calls are handled: review acceptance, write classification and confirmation, which MCP
//! capabilities pass, error hygiene, output, limits, audit and the sandbox profile.
//! `docs/policy.md` is the reference for every key; this module is the one place that parses and
//! validates them, so the gate, the audit log and the sandbox read typed values and never TOML.
//!
//! Architecture invariants:
//! - The policy can only take away. There is no key that adds a tool, widens a pinned Tool object or
//!   turns an unreviewed name into a reviewed one: `[writes.tools.<name>]` classifies a tool the
//!   snapshot already contains (an entry for any other name is inert), and `review.refused_tools`
//!   hides reviewed tools. Admission is decided by the snapshot alone.
//! - Every default is the fail-closed choice, so a missing section never loosens anything: an
//!   unclassified tool is a write, writes need confirmation, excluded capabilities stay blocked and
//!   the sandbox is required.
//! - Parsing is strict: every table rejects unknown keys (a misspelt key that silently kept its
//!   default would be a hole), and every error names `FILE:LINE:COLUMN`.
//! - A managed floor (`/etc/mcpguard/policy.toml`, `floor`) is read first; a user's policy can only
//!   tighten the keys it writes.
//! - Nothing here performs IO except [`load`], which reads the one file it is given,
//!   [`load_layered`], which reads the floor and the user's file, [`floor_path`] and
//!   [`PathContext::from_process`], which read this process's environment; resolving paths and
//!   classifying calls are pure functions of their arguments.

mod check;
mod classify;
mod document;
mod floor;
mod load;
mod sandbox;

pub use classify::*;
pub use document::*;
pub use floor::*;
pub use load::*;
pub use sandbox::*;

use check::duplicates;
use load::Problem;
#[cfg(test)]
use {document::RawToolClass, load::line_column, sandbox::env_pattern_problem};

#[cfg(test)]
mod tests;
