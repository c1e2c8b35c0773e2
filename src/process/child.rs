//! Starting the MCP server as a child process and ending it cleanly.
//!
//! The child runs in a session (and process group) of its own, so that signals reach the server
//! and whatever it started and it has no controlling terminal; it inherits no descriptor but its
//! three standard streams; and it gets a parent-death signal so that a SIGKILLed mcpguard does
//! not leave the server running. (Under the sandbox a PID namespace also ends the descendants
//! that leave the group: `sandbox::isolate`.) The parent-death signal fires when the *thread* that forked exits, so the
//! child must be spawned from a thread that lives as long as mcpguard: the main thread.
//!
//! It knows nothing of MCP, the gate or the command line.

// This module's `unsafe`: the async-signal-safe calls between fork and exec (each block with its `// SAFETY:`).
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use crate::sandbox::Prepared;
use crate::wire::sanitize::{self, Clean};

/// Why the server could not be started, with the exit code a shell would use.
#[derive(Debug, thiserror::Error)]
#[error("cannot start the MCP server `{program}`: {reason}")]
pub struct SpawnError {
    pub program: String,
    pub reason: String,
    pub exit_code: i32,
}

/// How the child's standard streams are connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// Pipes to mcpguard (the proxy and the snapshot client).
    Piped,
    /// mcpguard's own stdin, stdout and stderr (`mcpguard sandbox-check -- CMD`).
    Inherit,
}

/// Finds the server program the way the spawn would (PATH lookup for a bare name), so that the
/// sandbox can grant its directory and the exec runs exactly the file that was examined.
pub fn resolve_program(command: &[OsString]) -> Result<std::path::PathBuf, SpawnError> {
    let Some(program) = command.first() else {
        return Err(SpawnError {
            program: String::new(),
            reason: "no server command was given (put it after `--`)".into(),
            exit_code: 2,
        });
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| "/".into());
    let path_var = std::env::var_os("PATH");
    crate::sandbox::presets::find_program(program, path_var.as_deref(), &cwd).ok_or_else(|| {
        SpawnError {
            program: program.to_string_lossy().into_owned(),
            reason: "no such file or command (check the path and PATH), or it is not executable"
                .into(),
            exit_code: 127,
        }
    })
}

/// Spawns `command` with piped stdio in a new session. Must be called from the main thread.
pub fn spawn(command: &[OsString]) -> Result<Child, SpawnError> {
    spawn_with(command, None, Io::Piped)
}

/// Spawns `command` in a new session, confined by `sandbox` when one is given (its
/// resolved program is executed, with its environment only). Must be called from the main
/// thread.
pub fn spawn_with(
    command: &[OsString],
    sandbox: Option<&Arc<Prepared>>,
    io: Io,
) -> Result<Child, SpawnError> {
    let program_name = command
        .first()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some(program) = command.first() else {
        return Err(SpawnError {
            program: program_name,
            reason: "no server command was given (put it after `--`)".into(),
            exit_code: 2,
        });
    };
    let mut cmd = match sandbox {
        Some(s) => {
            let mut cmd = Command::new(&s.program);
            // argv[0] stays what the user wrote (unless a shim was replaced); the file executed
            // is the one examined.
            cmd.arg0(s.argv0.as_deref().unwrap_or(program))
                .env_clear()
                .envs(s.env.iter().cloned());
            cmd
        }
        None => Command::new(program),
    };
    let stdio = || match io {
        Io::Piped => Stdio::piped(),
        Io::Inherit => Stdio::inherit(),
    };
    cmd.args(&command[1..])
        .stdin(stdio())
        .stdout(stdio())
        .stderr(stdio());
    let parent = std::process::id();
    let confinement = sandbox.cloned();
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed; `arm_parent_death`, the `isolate` helpers and
    // `Prepared::apply_in_child` make raw system calls only, on memory prepared before the fork
    // (see there). The `Arc` is only read.
    unsafe {
        cmd.pre_exec(move || {
            arm_parent_death(parent)?;
            crate::sandbox::isolate::new_session()?;
            crate::sandbox::isolate::close_inherited_at_exec()?;
            match &confinement {
                Some(s) => s.apply_in_child(),
                None => Ok(()),
            }
        });
    }
    let sandboxed = sandbox.is_some();
    if let Some(observer) = sandbox.and_then(|s| s.observer.as_ref()) {
        // What the sandbox refuses is named at the default level (`sandbox::observe`); the
        // path or address comes from the server, so it is made harmless like its stderr.
        // Started before the spawn: the observer sees the server's own exec, and `spawn`
        // returns only once that exec is done, so a thread started after it would never be
        // there to let the exec continue.
        observer.start(
            Arc::new(|line: &str| {
                crate::process::diag::emit(
                    crate::protocol::Level::Warn,
                    &sanitize::clean(line, Clean::LINE),
                )
            }),
            Arc::new(|line: &str| {
                crate::process::diag::emit(
                    crate::protocol::Level::Debug,
                    &sanitize::clean(line, Clean::LINE),
                )
            }),
        );
    }
    let spawned = cmd.spawn();
    spawned.map_err(|e| {
        let (reason, exit_code) = match e.kind() {
            io::ErrorKind::NotFound => (
                "no such file or command (check the path and PATH)".to_string(),
                127,
            ),
            // Under the sandbox, EACCES at exec usually means Landlock refused to run the
            // program (or its interpreter): say so, the fix is in the policy.
            io::ErrorKind::PermissionDenied if sandboxed => (
                format!("{e}: the sandbox does not let it run (its directory, or its interpreter's, is not in sandbox.execute), or it is not executable; `mcpguard sandbox-check -- <command>` shows what is granted"),
                126,
            ),
            io::ErrorKind::PermissionDenied => {
                ("permission denied (is it executable?)".to_string(), 126)
            }
            _ if sandboxed => (format!("{e} (while applying the sandbox or starting the program)"), 1),
            _ => (e.to_string(), 1),
        };
        SpawnError {
            program: program_name,
            reason,
            exit_code,
        }
    })
}

/// Sends `signal` to the child's whole process group. Errors (the group is already gone) are
/// returned for the caller to ignore or report.
pub fn signal_group(pgid: u32, signal: Signal) -> nix::Result<()> {
    killpg(Pid::from_raw(pgid as i32), signal)
}

/// Whether any process of the group still exists.
pub fn group_alive(pgid: u32) -> bool {
    killpg(Pid::from_raw(pgid as i32), None).is_ok()
}

/// Runs in the forked child between fork and exec: asks the kernel to SIGKILL the child when
/// mcpguard's main thread dies. Only raw syscalls: no allocation, no locks, no panics
/// (`io::Error::last_os_error` only reads errno).
fn arm_parent_death(parent: u32) -> io::Result<()> {
    // SAFETY: prctl(PR_SET_PDEATHSIG) takes integer arguments and touches no memory of ours.
    if unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // If mcpguard died between fork and prctl, the signal was never armed and the child has been
    // re-parented already: it must not start the server at all.
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } as u32 != parent {
        // SAFETY: _exit is async-signal-safe and ends only this forked child.
        unsafe { libc::_exit(125) };
    }
    Ok(())
}

/// The permission errors a sandboxed server's stderr reported, shared with the thread that
/// relays it, so that a failure can be explained (`sandbox::explain`).
pub type DenialWatch = Arc<std::sync::Mutex<crate::sandbox::explain::Watch>>;

/// Relays the server's stderr line by line, with terminal escapes and invisible characters made
/// harmless, so a server cannot repaint the user's terminal or hide text in mcpguard's log.
/// With a `watch`, each line is also read for permission errors.
pub fn relay_stderr(mut src: impl Read, watch: Option<DenialWatch>) {
    const MAX_LINE: usize = 16 << 10;
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    let emit = |line: &[u8]| {
        let text = String::from_utf8_lossy(line);
        let text = text.strip_suffix('\r').unwrap_or(&text);
        let clean = sanitize::clean(text, Clean::LINE);
        if let Some(w) = &watch {
            w.lock().unwrap_or_else(|p| p.into_inner()).observe(&clean);
        }
        crate::process::diag::server_line(&clean);
    };
    loop {
        let n = match src.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        pending.extend_from_slice(&chunk[..n]);
        while let Some(i) = memchr::memchr(b'\n', &pending) {
            emit(&pending[..i]);
            pending.drain(..=i);
        }
        if pending.len() > MAX_LINE {
            emit(&pending);
            pending.clear();
        }
    }
    if !pending.is_empty() {
        emit(&pending);
    }
}

/// Says at the default level the sandbox denials noted at the debug level since the last call
/// (`sandbox::observe::take_held`): called when the server then failed — a tool call answered
/// with an error, a failed exit — so that a denial is named when it mattered and a server
/// that handled it itself stays quiet.
pub fn name_held_denials() {
    for line in crate::sandbox::observe::take_held() {
        crate::process::diag::emit(
            crate::protocol::Level::Warn,
            &sanitize::clean(&line, Clean::LINE),
        );
    }
}
