//! The command line: every flag is defined once here, and `--help`, the man page and the shell
//! completions are generated from these definitions.

use std::ffi::OsString;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// mcpguard sits between an MCP host and one local MCP server and lets through only what a
/// person reviewed.
#[derive(Debug, Parser)]
#[command(
    name = "mcpguard",
    version,
    about = "A security sidecar for one local MCP server",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true,
    after_help = "Run a server behind mcpguard:\n  mcpguard [OPTIONS] -- <server command...>"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub proxy: ProxyArgs,
}

/// Options of the proxy itself (`mcpguard [OPTIONS] -- <server command...>`).
#[derive(Debug, clap::Args)]
pub struct ProxyArgs {
    /// Largest accepted JSON-RPC message, in bytes, in either direction.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20, value_parser = clap::value_parser!(u64).range(1024..=(1u64 << 32)))]
    pub max_message_bytes: u64,

    /// How long to wait after closing the server's stdin before SIGTERM, and after SIGTERM
    /// before SIGKILL (e.g. 2s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub grace: Duration,

    /// The MCP server to run, after `--`.
    #[arg(last = true, value_name = "SERVER_COMMAND")]
    pub server: Vec<OsString>,
}

#[derive(Debug, Subcommand)]
pub enum Command {}

/// Parses `500ms`, `2s`, `3m`, `1h` or `2d`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration like 500ms, 2s, 3m, 1h or 30d"))?;
    let secs = |k: u64| n.checked_mul(k).map(Duration::from_secs);
    let d = match unit {
        "ms" => Some(Duration::from_millis(n)),
        "s" | "" => secs(1),
        "m" => secs(60),
        "h" => secs(3600),
        "d" => secs(86_400),
        _ => None,
    };
    d.ok_or_else(|| format!("`{s}` is not a duration like 500ms, 2s, 3m, 1h or 30d"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let cases = [
            ("500ms", Some(Duration::from_millis(500))),
            ("2s", Some(Duration::from_secs(2))),
            ("3", Some(Duration::from_secs(3))),
            ("1h", Some(Duration::from_secs(3600))),
            ("30d", Some(Duration::from_secs(30 * 86_400))),
            ("2 weeks", None),
            ("", None),
            ("-1s", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_duration(input).ok(), want, "{input}");
        }
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
