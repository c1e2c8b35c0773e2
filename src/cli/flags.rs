//! The command line: every flag is defined once here, and `--help`, the man page and the shell
//! completions are generated from these definitions.
//!
//! Definitions only: no behaviour, nothing run from here.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// mcpguard sits between an MCP host and one local MCP server and lets through only what a
/// person reviewed.
/// How diagnostics on stderr are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

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

    /// Diagnostics on stderr as text lines or as one JSON object per line (levels from
    /// MCPGUARD_LOG=error|warn|info|debug).
    #[arg(long, value_enum, default_value = "text", global = true)]
    pub log_format: LogFormat,

    #[command(flatten)]
    pub proxy: ProxyArgs,
}

/// Options of the proxy itself (`mcpguard [OPTIONS] -- <server command...>`).
#[derive(Debug, clap::Args)]
pub struct ProxyArgs {
    /// Largest accepted JSON-RPC message, in bytes, in either direction (default: the policy's
    /// limits.max_message_bytes, 16 MiB unless changed).
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u64).range(1024..=(1u64 << 32)))]
    pub max_message_bytes: Option<u64>,

    /// The local policy (TOML); without it the built-in default policy applies.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,

    /// Append the hash-chained audit log here (overrides the policy's audit.path).
    #[arg(long, value_name = "FILE")]
    pub audit_log: Option<PathBuf>,

    /// How long to wait after closing the server's stdin before SIGTERM, and after SIGTERM
    /// before SIGKILL (e.g. 2s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration)]
    pub grace: Duration,

    /// The reviewed snapshot to enforce (with --sha256 and --server).
    #[arg(long, value_name = "FILE", requires_all = ["sha256", "server_key"])]
    pub manifest: Option<PathBuf>,

    /// The digest the snapshot must have (`mcpguard hash FILE`); checked before the server starts.
    #[arg(long, value_name = "HEX", requires = "manifest")]
    pub sha256: Option<String>,

    /// Which server of the snapshot this is.
    #[arg(long = "server", value_name = "KEY", requires = "manifest")]
    pub server_key: Option<String>,

    #[command(flatten)]
    pub grants: SandboxGrants,

    /// Without a snapshot, relay tools unpinned instead of serving none. Handshake ordering,
    /// capability blocking and error hygiene still apply.
    #[arg(long, conflicts_with = "manifest")]
    pub allow_unpinned: bool,

    /// Check, classify and (for writes) confirm calls exactly as usual, but never dispatch them:
    /// the host gets {dryRun, validatedInput, operationPolicy, operationSummary} instead.
    #[arg(long)]
    pub dry_run: bool,

    /// The MCP server to run, after `--`.
    #[arg(last = true, value_name = "SERVER_COMMAND")]
    pub server: Vec<OsString>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Write the RFC 8785 canonical form of a JSON document to stdout.
    Canonicalize {
        /// The document; `-` or nothing reads standard input.
        file: Option<PathBuf>,
    },
    /// Print the lowercase SHA-256 of a JSON document's RFC 8785 canonical form.
    Hash { file: PathBuf },
    /// Capture a live server's tool catalogue into a new snapshot.
    Capture {
        /// Symbolic key of the server in the snapshot (the host config names it with --server).
        #[arg(long)]
        server: String,
        /// The snapshot file to write.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
        /// How long the snapshot stays valid (at most the policy's maximum, 30 days by default).
        #[arg(long, value_name = "DURATION", default_value = "7d", value_parser = parse_duration)]
        expires_in: Duration,
        /// The protocol version to capture at: up to 2025-11-25 through the initialize
        /// handshake, 2026-07-28 through server/discover and per-request envelopes.
        #[arg(long, value_name = "VERSION", default_value = crate::protocol::DEFAULT_PROTOCOL_VERSION)]
        protocol_version: String,
        /// Replace FILE if it exists (its reviews are lost).
        #[arg(long)]
        force: bool,
        /// The local policy whose sandbox the server is captured in (default: the built-in
        /// policy), so that an untrusted server is confined from its very first run.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// A PyPI package (a dependency of a `uvx` server) that is built from its source
        /// distribution (even when it also publishes a wheel), for packages that publish none.
        /// Building runs the package's own build script outside the sandbox with your rights,
        /// so each such package is named by you; every other package is installed from wheels
        /// only. Recorded in the snapshot's package record (`builtFromSource`), but never
        /// carried over: give it again to every later `update` (a new release's build is new code).
        #[arg(long, value_name = "PACKAGE")]
        build_from_source: Vec<String>,
        #[command(flatten)]
        live: LiveArgs,
        /// The MCP server to capture, after `--`.
        #[arg(last = true, required = true, value_name = "SERVER_COMMAND")]
        server_command: Vec<OsString>,
    },
    /// Record a reviewer's assertions and input-channel classification for a tool.
    Review {
        /// The snapshot file (rewritten atomically).
        file: PathBuf,
        /// The server of the snapshot (needed only when it has several).
        #[arg(long)]
        server: Option<String>,
        /// The tool reviewed (or use --from for many tools at once). On a terminal, without
        /// --assert, --channel and --side-effect, the questions are asked one at a time: about
        /// this tool (its current review giving the defaults), or without --tool about every
        /// unreviewed tool.
        #[arg(long)]
        tool: Option<String>,
        /// Who reviewed (an e-mail address or another stable identity).
        #[arg(long, value_name = "ID")]
        reviewer: Option<String>,
        /// An assertion: headless, independentCalls, modelBacked, referenceBasedIO = true|false;
        /// sideEffects = comma list (empty for none); concurrency = safe|serialize.
        #[arg(long = "assert", value_name = "NAME=VALUE")]
        asserts: Vec<String>,
        /// An input channel: an RFC 6901 pointer into the arguments = data|instruction|authority.
        #[arg(long = "channel", value_name = "POINTER=CLASS")]
        channels: Vec<String>,
        /// What the tool does, in seed 004's operation classes: read, create, update or delete
        /// (recorded as the review's sideEffect). With `[writes] trust_reviews` (the default)
        /// the policy classifies the tool by it; anything but read is a write, and a read with
        /// an authority channel is a write too.
        #[arg(long, value_name = "CLASS", value_parser = ["read", "create", "update", "delete"])]
        side_effect: Option<String>,
        /// The review time (RFC 3339); now by default.
        #[arg(long, value_name = "INSTANT")]
        reviewed_at: Option<String>,
        /// A file of reviews to record at once: the TOML that --template writes (edited), or
        /// JSON {tool: {reviewer?, sideEffect?, assertions, inputChannels}}; a top-level
        /// reviewer string applies to every tool. Every review is checked; one bad review
        /// records nothing.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["tool", "asserts", "channels", "side_effect"])]
        from: Option<PathBuf>,
        /// Record nothing: write to stdout a TOML review of every unreviewed tool with each
        /// answer proposed (from the tool's name, annotations, argument names and formats) and
        /// a comment saying where it came from; edit it, then record it with --from. Answers
        /// that rest on the server's own claims are marked `!!`, and a class the server's claims
        /// contradict is left for you to write.
        #[arg(long, conflicts_with_all = ["tool", "asserts", "channels", "side_effect", "from", "sign", "signed_data", "signature", "reviewed_at"])]
        template: bool,
        /// Sign each recorded review with this SSH private key (Ed25519, without a passphrase;
        /// SSH signature format, namespace mcpguard-review). The signature covers the Tool
        /// object, the server entry (identity, package record, instructions, capabilities) and
        /// the review, and is stored in the review.
        #[arg(long, value_name = "KEY")]
        sign: Option<PathBuf>,
        /// Record nothing: write the bytes that a signature of the existing review of --tool
        /// covers to stdout, for `ssh-keygen -Y sign -n mcpguard-review`.
        #[arg(long, requires = "tool", conflicts_with_all = ["from", "asserts", "channels", "sign", "signature", "reviewer"])]
        signed_data: bool,
        /// Add a signature made elsewhere (`ssh-keygen -Y sign` over --signed-data) to the
        /// existing review of --tool; it is checked before it is recorded.
        #[arg(long, value_name = "SIG", requires = "tool", conflicts_with_all = ["from", "asserts", "channels", "sign", "reviewer"])]
        signature: Option<PathBuf>,
    },
    /// Capture a reviewed server again and write a new snapshot in which every tool that did not
    /// change (RFC 8785-identical) keeps its review and every changed or new tool is
    /// unreviewed; print what changed, tool by tool. On a terminal it then asks about the
    /// changed tools only. The old snapshot is kept as FILE.prev; the new digest is printed.
    Update {
        /// The reviewed snapshot (rewritten atomically; the old one is kept as FILE.prev).
        file: PathBuf,
        /// Which server of the snapshot the command runs (needed when there are several).
        #[arg(long)]
        server: Option<String>,
        /// Never ask: carry the reviews of identical tools and leave the rest unreviewed (what
        /// happens anyway without a terminal).
        #[arg(long)]
        yes: bool,
        /// A host configuration written by `mcpguard wrap`: pin the new digest into the entry
        /// that uses FILE, atomically and with a backup, as `wrap --pin` does.
        #[arg(long, value_name = "HOST.json")]
        config: Option<PathBuf>,
        /// How long the new snapshot stays valid (default: as long as the old one was, at most
        /// the policy's maximum).
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        expires_in: Option<Duration>,
        /// Who reviews the changed tools on a terminal (asked when not given).
        #[arg(long, value_name = "ID")]
        reviewer: Option<String>,
        /// The local policy whose sandbox the server runs in (default: the built-in policy).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// A PyPI package (a dependency of a `uvx` server) that is built from its source
        /// distribution (even when it also publishes a wheel), for packages that publish none.
        /// Building runs the package's own build script outside the sandbox with your rights,
        /// so each such package is named by you; every other package is installed from wheels
        /// only. Recorded in the snapshot's package record (`builtFromSource`), but never
        /// carried over: give it again to every later `update` (a new release's build is new code).
        #[arg(long, value_name = "PACKAGE")]
        build_from_source: Vec<String>,
        #[command(flatten)]
        live: LiveArgs,
        /// The MCP server to capture again, after `--`.
        #[arg(last = true, required = true, value_name = "SERVER_COMMAND")]
        server_command: Vec<OsString>,
    },
    /// The reviewer's view: every field the model will see, hidden characters made visible.
    Show {
        file: PathBuf,
        #[arg(long)]
        server: Option<String>,
        #[arg(long)]
        tool: Option<String>,
        /// Print the content-trust report instead: each reviewed tool's input-channel map and
        /// the value capability of each output location (free_text, constrained_scalar,
        /// composite, unknown).
        #[arg(long, conflicts_with = "tool")]
        report: bool,
        /// Check review signatures against this policy's review.allowed_signers (default: the
        /// built-in policy, which names none).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
    },
    /// Validate a snapshot offline and, with a server command, against the live server.
    Check {
        file: PathBuf,
        /// The digest the snapshot must have.
        #[arg(long, value_name = "HEX")]
        sha256: Option<String>,
        /// Which server of the snapshot the command runs (needed when there are several).
        #[arg(long)]
        server: Option<String>,
        /// Judge the reviews by this local policy (default: the built-in policy).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        #[command(flatten)]
        live: LiveArgs,
        /// The live server to compare with, after `--`.
        #[arg(last = true, value_name = "SERVER_COMMAND")]
        server_command: Vec<OsString>,
    },
    /// The semantic difference between two snapshots (exit 1 when they differ).
    Diff { old: PathBuf, new: PathBuf },
    /// Work with local policy files.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Work with audit logs.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// List and answer the writes your running mcpguard processes hold for a person's approval
    /// (the terminal confirmation channel; see `[confirmation] channels`).
    #[command(subcommand)]
    Approvals(ApprovalsCommand),
    /// Work with a team's lock file (mcpguard.lock): servers, launch commands, reviewed
    /// snapshots and their digests, package pins.
    #[command(subcommand)]
    Lock(LockCommand),
    /// Show the whole story on a bundled example server, with no set-up: capture, review, a
    /// guarded call, an unreviewed tool refused, a write held for the person's approval, the
    /// sandbox, a rug pull caught before dispatch, and the audit log verified.
    Demo,
    /// The bundled example server that `mcpguard demo` guards (an MCP server on stdio).
    #[command(hide = true)]
    DemoServer {
        /// Where save_note writes its notes.
        #[arg(long, value_name = "DIR")]
        notes: PathBuf,
        /// After this many tools/list answers, change a tool's description (a rug pull).
        #[arg(long, value_name = "N")]
        rug_pull_after: Option<u64>,
        /// Serve the next release (1.1.0), in which save_note accepts longer notes.
        #[arg(long)]
        next_release: bool,
    },
    /// Rewrite a host's MCP configuration (Claude Desktop, Claude Code, Cursor, VS Code, Zed,
    /// Gemini CLI, Windsurf, Codex, fast-agent, Goose) so that every local server runs under
    /// mcpguard, changing only each wrapped entry's command and arguments (comments and layout
    /// are kept). A wrapped server refuses to start until its snapshot is captured, reviewed and
    /// pinned (`wrap --pin`). Keeps a backup; idempotent.
    Wrap {
        /// The host's configuration file (claude_desktop_config.json, Claude Code's .mcp.json or
        /// ~/.claude.json, .cursor/mcp.json, Gemini CLI's settings.json, Windsurf's
        /// mcp_config.json, .vscode/mcp.json, VS Code's or Zed's settings.json (JSONC), Codex's
        /// config.toml, fast-agent's fastagent.config.yaml, or Goose's config.yaml).
        config: PathBuf,
        /// Print the changes as a diff and write nothing.
        #[arg(long)]
        dry_run: bool,
        /// Where the wrapped servers' snapshots live (default: a folder per host configuration,
        /// $XDG_CONFIG_HOME/mcpguard/snapshots/STEM-HASH, else under ~/.config, so that two host
        /// configurations with a server of the same name never share a snapshot; a DIR given
        /// here is used as it is, so give each host configuration its own).
        #[arg(long, value_name = "DIR")]
        snapshot_dir: Option<PathBuf>,
        /// The mcpguard the host should run (default: this executable).
        #[arg(long, value_name = "PATH")]
        mcpguard: Option<PathBuf>,
        /// A policy file every wrapped server is started with (--policy).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        /// Instead of wrapping: pin the digest of each wrapped server's reviewed snapshot.
        #[arg(long, conflicts_with_all = ["snapshot_dir", "mcpguard", "policy"])]
        pin: bool,
        /// The server the sandbox options below are for (needed when the configuration has
        /// more than one local server). On an entry already wrapped, they are added to its
        /// mcpguard options.
        #[arg(long, value_name = "NAME", conflicts_with = "pin")]
        entry: Option<String>,
        /// Grants for that one server, written into its wrapped command and into the capture
        /// command wrap prints. Each variable the entry's `env` sets is passed by name
        /// (--sandbox-env) without being asked for.
        #[command(flatten)]
        grants: SandboxGrants,
        /// Instead of wrapping: write an entry for every server of this lock file, pinned to the
        /// lock's snapshot and digest (entries of the same name are replaced, others kept).
        #[arg(long, value_name = "LOCK", conflicts_with_all = ["snapshot_dir", "pin", "policy"])]
        from_lock: Option<PathBuf>,
        /// Apply the grants wrap proposes without asking: each existing path in a server's
        /// arguments or `env` values, read-write when its flag or variable names data
        /// (db, data, dir, storage, ...), else read-only. Without it wrap asks on a terminal,
        /// and otherwise prints the proposal and the command that applies it.
        #[arg(long, conflicts_with_all = ["pin", "from_lock"])]
        yes: bool,
    },
    /// Show the kernel's Landlock ABI, what the policy's sandbox asks and what this kernel will
    /// enforce; with a command, run it under that sandbox (stdio inherited, its exit status
    /// becomes mcpguard's). Exit 1 when sandbox.mode = "require" would refuse to start.
    SandboxCheck {
        /// The local policy (default: the built-in policy).
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        #[command(flatten)]
        grants: SandboxGrants,
        /// Run the command as an MCP server under the sandbox: initialize it, list its tools,
        /// make the calls --call names, then print the grants the sandbox refused it (as
        /// --sandbox-read/--sandbox-write/--sandbox-connect flags and as a policy).
        #[arg(long)]
        learn: bool,
        /// With --learn: call tool NAME with the JSON object ARGUMENTS. Repeatable.
        #[arg(long = "call", num_args = 2, value_names = ["NAME", "ARGUMENTS"], requires = "learn")]
        call: Vec<String>,
        /// The command to examine and run, after `--`.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<OsString>,
    },
}

/// Paths granted to the sandboxed server for this run, on top of the policy's lists.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SandboxGrants {
    /// Let the server read PATH (a file, or a directory and everything beneath it). Repeatable.
    #[arg(long = "sandbox-read", value_name = "PATH", value_parser = absolute_path)]
    pub read: Vec<PathBuf>,
    /// Let the server read, write, create and remove under PATH (for example the one directory
    /// a filesystem server is given). Repeatable.
    #[arg(long = "sandbox-write", value_name = "PATH", value_parser = absolute_path)]
    pub write: Vec<PathBuf>,
    /// Pass the environment variable NAME to the server (by exact name; its value is never
    /// logged), on top of the policy's sandbox.env. `mcpguard wrap` writes one for each variable
    /// a host configuration sets for the server. Repeatable.
    #[arg(long = "sandbox-env", value_name = "NAME", value_parser = env_name)]
    pub env: Vec<String>,
    /// Let the server connect to the TCP destination HOST:PORT (127.0.0.1:5432,
    /// localhost:8080, [::1]:80), on top of the policy's sandbox.connect. Address and port are
    /// enforced: mcpguard makes each connect to that port itself, to that address only (a host
    /// name: the addresses mcpguard's resolver gives for it). Repeatable.
    #[arg(long = "sandbox-connect", value_name = "HOST:PORT", value_parser = crate::policy::Destination::parse)]
    pub connect: Vec<crate::policy::Destination>,
}

/// A variable name for `--sandbox-env`: one exact name, so that no pattern passes more than the
/// user named.
pub fn env_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !ok {
        return Err(format!(
            "{s:?} is not a variable name (letters, digits and `_`; one exact name, no pattern)"
        ));
    }
    if s == "TMPDIR" {
        return Err("TMPDIR is always the run's private directory and cannot be passed".into());
    }
    Ok(s.to_string())
}

/// A path for the sandbox: relative paths are taken from the current directory, because that
/// is what the user sees when typing them; the rule records the absolute path.
fn absolute_path(s: &str) -> Result<PathBuf, String> {
    let p = PathBuf::from(s);
    if s.is_empty() {
        return Err("an empty path".into());
    }
    if p.is_absolute() {
        Ok(p)
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .map_err(|e| format!("cannot resolve {s:?}: {e}"))
    }
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Validate a policy file and print the effective policy (every default filled in), layered
    /// over the managed floor (/etc/mcpguard/policy.toml, or $MCPGUARD_SYSTEM_POLICY where that does not exist), with the
    /// file and line each value came from. Without FILE: the floor alone, or the built-in default.
    Check { file: Option<PathBuf> },
}

#[derive(Debug, Subcommand)]
pub enum LockCommand {
    /// Add a server to the lock file, or replace its entry: the launch command, the reviewed
    /// snapshot and its digest (computed now), and optionally the package pin, the policy and
    /// sandbox grants. The file is rewritten (comments are not kept); run `lock check` after.
    Add {
        /// The server key (the snapshot's server key; the host configuration names it).
        key: String,
        /// The reviewed snapshot of this server.
        #[arg(long, value_name = "FILE")]
        snapshot: PathBuf,
        /// The lock file (default: mcpguard.lock in the current directory; created if missing).
        #[arg(long, value_name = "FILE")]
        lock: Option<PathBuf>,
        /// The package and version the command runs: npm:NAME@VERSION or pypi:NAME==VERSION
        /// (then the command must name it exactly), or any other SCHEME:TEXT to record.
        #[arg(long, value_name = "PIN")]
        package: Option<String>,
        /// The policy this server runs under.
        #[arg(long, value_name = "FILE")]
        policy: Option<PathBuf>,
        #[command(flatten)]
        grants: SandboxGrants,
        /// The server's launch command, after `--`.
        #[arg(last = true, required = true, value_name = "SERVER_COMMAND")]
        command: Vec<String>,
    },
    /// Run every server of the lock live under the sandbox and compare it with its reviewed
    /// snapshot: current, drifted (with the difference) or failed. Exit 0 when all are current,
    /// 1 when some drifted, 2 when some failed or the lock file is unusable.
    Check {
        /// The lock file (default: mcpguard.lock in the current directory).
        file: Option<PathBuf>,
        /// The report on stdout: text lines, one JSON object, or JUnit XML for CI.
        #[arg(long, value_enum, default_value = "text")]
        format: ReportFormat,
        /// How long to wait for each answer of a server.
        #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
        timeout: Duration,
    },
}

/// The report formats of `lock check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReportFormat {
    Text,
    Json,
    Junit,
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Verify an audit log's hash chain; names the first edited, removed or reordered line.
    Verify { file: PathBuf },
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Show each pending approval: its id, the server and tool, the readable argument summary
    /// and the time left.
    List {
        /// Print one JSON document (`{"pending": [...], "problems": [...]}`) instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Approve the one call waiting under ID; it then goes on (after the usual live check).
    /// Only at a terminal: a program without one (an agent's shell tool) cannot approve.
    Approve {
        /// The approval's id, as `mcpguard approvals list` shows it (for example 1234-1).
        id: String,
        /// What the approval covers: `once` (this call), `identical` (identical calls, same tool
        /// and arguments, for `confirmation.identical_for`) or `tool` (every call of the tool
        /// until that mcpguard ends). The policy must allow a standing one
        /// (`confirmation.allow_identical`, `allow_tool_for_session`); otherwise it is this call
        /// only, and the answer says so.
        #[arg(long, value_name = "SCOPE", default_value = "once", value_parser = ["once", "identical", "tool"])]
        scope: String,
    },
    /// Refuse the one call waiting under ID; it never reaches the server.
    Deny {
        /// The approval's id, as `mcpguard approvals list` shows it.
        id: String,
    },
    /// Ask about each approval as it arrives (a for approve, d for deny, s to skip) until
    /// standard input ends. Only at a terminal.
    Watch,
}

/// Options for talking to a live server during capture and check.
#[derive(Debug, clap::Args)]
pub struct LiveArgs {
    /// How long to wait for each answer of the server.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// The most tools/list pages followed before giving up.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_pages: usize,
    /// Largest accepted message from the server, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 16 << 20)]
    pub max_message_bytes: usize,
    /// The server runs under the policy's sandbox here too, with these extra grants.
    #[command(flatten)]
    pub grants: SandboxGrants,
}

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
