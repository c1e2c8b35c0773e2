//! A terminal program driven the way a person drives it: run in a detached tmux session on a
//! tmux server of its own, read back as the screen a person would see (`capture-pane`, which
//! renders cursor movement and redraws the way a terminal does) and typed at with `send-keys`.
//! The host tests use it for the hosts' full-screen terminal interfaces, where a plain
//! pseudo-terminal transcript is a stream of escape sequences rather than a screen.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// One program in a tmux session; the tmux server ends with it (and on drop).
pub struct Tmux {
    socket: PathBuf,
    /// Where every screen read is also written, so that a failing test leaves the last one.
    dump: PathBuf,
}

/// A shell command line that runs `cmd` as given: its working directory, the variables it sets
/// and removes, its program and arguments, each quoted.
fn script_of(cmd: &Command) -> String {
    use mcpguard::cli::wrap::shell_quote;
    let mut lines = vec!["#!/bin/sh".to_string(), "set -e".to_string()];
    if let Some(dir) = cmd.get_current_dir() {
        lines.push(format!("cd {}", shell_quote(&dir.to_string_lossy())));
    }
    for (k, v) in cmd.get_envs() {
        let k = k.to_string_lossy();
        match v {
            Some(v) => lines.push(format!("export {k}={}", shell_quote(&v.to_string_lossy()))),
            None => lines.push(format!("unset {k}")),
        }
    }
    let mut exec = vec![
        "exec".to_string(),
        shell_quote(&cmd.get_program().to_string_lossy()),
    ];
    exec.extend(cmd.get_args().map(|a| shell_quote(&a.to_string_lossy())));
    lines.push(exec.join(" "));
    lines.join("\n") + "\n"
}

impl Tmux {
    /// Starts `cmd` in a 200×50 terminal (`TERM=xterm-256color`) on a tmux server whose socket
    /// is in `dir`. The server's own environment is the test's; `cmd`'s variables are set by the
    /// script it runs, so the program sees exactly what `cmd` says.
    pub fn start(dir: &Path, cmd: &Command) -> Tmux {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("tmux-program.sh");
        std::fs::write(&script, script_of(cmd)).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let tmux = Tmux {
            socket: dir.join("tmux.sock"),
            dump: dir.join("tmux-screen.txt"),
        };
        // On a loaded machine tmux's freshly forked server sometimes dies before the client
        // attaches ("server exited unexpectedly"), which says nothing about the program under
        // test: that start is tried again, a bounded number of times.
        let mut attempts = 0;
        let out = loop {
            attempts += 1;
            let out = tmux
                .command()
                .args(["new-session", "-d", "-s", "t", "-x", "200", "-y", "50"])
                .arg(&script)
                .env("TERM", "xterm-256color")
                .output()
                .expect("tmux runs (scripts/install-peers.sh installs it)");
            let lost = String::from_utf8_lossy(&out.stderr).contains("server exited unexpectedly");
            if out.status.success() || !lost || attempts == 3 {
                break out;
            }
            let _ = std::fs::remove_file(&tmux.socket);
            std::thread::sleep(std::time::Duration::from_millis(200));
        };
        assert!(
            out.status.success(),
            "tmux new-session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The pane stays after the program ends, so that its last screen can still be read.
        let _ = tmux
            .command()
            .args(["set-option", "-t", "t", "remain-on-exit", "on"])
            .output();
        tmux
    }

    fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(&self.socket);
        c
    }

    /// The screen as it is now, with the scrollback: a line per row, trailing blanks cut.
    pub fn screen(&self) -> String {
        let out = self
            .command()
            .args(["capture-pane", "-p", "-J", "-S", "-200", "-t", "t"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default();
        let _ = std::fs::write(&self.dump, &out);
        out
    }

    /// Waits until the screen holds every one of `needles`; returns the screen, or an error with
    /// the last screen after `timeout`.
    pub fn wait_for(&self, needles: &[&str], timeout: Duration) -> Result<String, String> {
        self.wait_until(&format!("{needles:?}"), timeout, |screen| {
            needles.iter().all(|n| screen.contains(n))
        })
    }

    /// Waits until `ready` holds for the screen (`what` names it in the error); returns the
    /// screen, or an error with the last screen after `timeout`.
    pub fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        ready: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        let until = Instant::now() + timeout;
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return Ok(screen);
            }
            if Instant::now() > until {
                return Err(format!(
                    "after {timeout:?} the screen does not show {what}:\n{screen}"
                ));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Types `keys` (tmux key names such as `Enter`, `Space`, `Down`, `Escape`, or literal
    /// text), each as its own keystroke with a short pause, as a person types them.
    pub fn keys(&self, keys: &[&str]) {
        for key in keys {
            let out = self
                .command()
                .args(["send-keys", "-t", "t", key])
                .output()
                .expect("tmux send-keys");
            assert!(out.status.success(), "tmux send-keys {key}");
            std::thread::sleep(Duration::from_millis(300));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").output();
    }
}
