//! The binary edge: parse the command line, run, and turn the outcome into an exit status.

use std::process::ExitCode;

use clap::Parser;
use mcpguard::capture::Limits;
use mcpguard::cli::{Cli, Command, LiveArgs};
use mcpguard::commands;
use mcpguard::diag;
use mcpguard::proxy::{self, Outcome};
use mcpguard::session::Level;

fn main() -> ExitCode {
    diag::init_from_env();
    let cli = Cli::parse();
    match cli.command {
        Some(cmd) => run_command(cmd),
        None => run_proxy(cli.proxy),
    }
}

fn run_command(cmd: Command) -> ExitCode {
    let limits = |live: &LiveArgs| Limits {
        max_pages: live.max_pages,
        ..Limits::default()
    };
    let result = match &cmd {
        Command::Canonicalize { file } => commands::canonicalize(file.as_deref()),
        Command::Hash { file } => commands::hash(file),
        Command::Capture {
            server,
            out,
            expires_in,
            protocol_version,
            force,
            live,
            server_command,
        } => commands::capture(commands::CaptureArgs {
            server,
            out,
            expires_in: *expires_in,
            protocol_version,
            force: *force,
            limits: limits(live),
            timeout: live.timeout,
            max_message_bytes: live.max_message_bytes,
            command: server_command,
        }),
        Command::Review {
            file,
            server,
            tool,
            reviewer,
            asserts,
            channels,
            reviewed_at,
            from,
        } => commands::review(commands::ReviewArgs {
            file,
            server,
            tool: tool.as_deref(),
            reviewer: reviewer.as_deref(),
            asserts,
            channels,
            reviewed_at: reviewed_at.as_deref(),
            from: from.as_deref(),
        }),
        Command::Show { file, server, tool } => {
            commands::show(file, server.as_deref(), tool.as_deref())
        }
        Command::Check {
            file,
            sha256,
            server,
            live,
            server_command,
        } => commands::check(commands::CheckArgs {
            file,
            sha256: sha256.as_deref(),
            server: server.as_deref(),
            command: server_command,
            timeout: live.timeout,
            max_message_bytes: live.max_message_bytes,
            limits: limits(live),
        }),
        Command::Diff { old, new } => commands::diff(old, new),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(msg) => {
            diag::emit(Level::Error, &msg);
            ExitCode::from(1)
        }
    }
}

fn run_proxy(args: mcpguard::cli::ProxyArgs) -> ExitCode {
    if args.server.is_empty() {
        diag::emit(
            Level::Error,
            "no server command given: run `mcpguard [OPTIONS] -- <server command...>` (see --help)",
        );
        return ExitCode::from(2);
    }
    let opts = proxy::Options {
        command: args.server,
        max_message_bytes: usize::try_from(args.max_message_bytes).unwrap_or(usize::MAX),
        grace: args.grace,
    };
    match proxy::run(opts) {
        Ok(Outcome::Child(status)) => mirror_exit(status),
        Ok(Outcome::SpawnFailed(code)) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            diag::emit(Level::Error, &format!("the proxy failed: {e}"));
            ExitCode::from(1)
        }
    }
}

/// Ends mcpguard the way the server ended: the same exit code, or death by the same signal.
fn mirror_exit(status: std::process::ExitStatus) -> ExitCode {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1));
    }
    if let Some(sig) = status.signal() {
        // Restores the default action (our handler replaced it) and raises the signal. For
        // signals whose default is to be ignored it returns, and the shell convention applies.
        let _ = signal_hook::low_level::emulate_default_handler(sig);
        return ExitCode::from(u8::try_from(128 + sig).unwrap_or(1));
    }
    ExitCode::from(1)
}
