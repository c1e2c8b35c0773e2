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

/// Quotes a word for a POSIX shell when it needs quoting: the commands `wrap`, `review
/// --template` and the refusals print for the person to paste.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./=:@%+,-~".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}
