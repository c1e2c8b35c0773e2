//! Shared helpers: start mcpguard (or a server directly) with piped stdio and talk to it line by
//! line with timeouts, so that a broken build fails a test instead of hanging it.

#![allow(dead_code)]

pub mod polkit_rig;
pub mod reviews;
pub mod tmux;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

pub const TIMEOUT: Duration = Duration::from_secs(20);

/// Upper bound on any one whole run of a command (each normally takes seconds).
pub const RUN_BOUND: Duration = Duration::from_secs(90);

/// The mcpguard binary under test.
pub fn mcpguard() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcpguard"))
}

/// The digest `mcpguard hash FILE` prints, asserted to succeed: what a person pins after editing
/// a snapshot by hand.
pub fn hash(file: &std::path::Path) -> String {
    let out = run_bounded(Command::new(mcpguard()).arg("hash").arg(file));
    assert!(
        out.status.success(),
        "mcpguard hash {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The policy of tests that are not about write confirmation: the tools they call are reads.
pub fn reads_policy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/policies/reads.toml")
}

/// A policy file's text: the reads policy followed by `extra` (other sections).
pub fn reads_policy_with(extra: &str) -> String {
    let reads = std::fs::read_to_string(reads_policy()).expect("tests/data/policies/reads.toml");
    format!("{reads}\n{extra}")
}

/// The reads policy with the fixture's `echo` made a write (`side_effect = "create"`), followed
/// by `extra`: a write whose only argument is data, so that it may get a standing approval
/// (`write_note`'s path is an authority, so it never may).
pub fn echo_as_write_policy_with(extra: &str) -> String {
    let reads = reads_policy_with("");
    let as_write = reads.replace(
        "[writes.tools.echo]\nside_effect = \"read\"",
        "[writes.tools.echo]\nside_effect = \"create\"",
    );
    assert_ne!(
        reads, as_write,
        "the reads policy no longer classifies echo"
    );
    format!("{as_write}\n{extra}")
}

/// The in-tree fixture server (built by `cargo test` as the example `fixture_server`).
pub fn fixture() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/integration-<hash> -> target/<profile>/examples/fixture_server
    let profile_dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let path = profile_dir.join("examples").join("fixture_server");
    assert!(
        path.exists(),
        "fixture server not built at {}: run the tests with `cargo test` (it builds examples)",
        path.display()
    );
    path
}

/// A running process with line-oriented access to its stdout and a capture of its stderr.
pub struct Peer {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Vec<u8>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Set by the stderr reader once it has seen end-of-file.
    stderr_done: Arc<std::sync::atomic::AtomicBool>,
}

impl Peer {
    /// Starts `program args...`.
    pub fn start<S: AsRef<OsStr>>(program: impl AsRef<OsStr>, args: &[S]) -> Peer {
        Self::start_with(Command::new(program).args(args))
    }

    /// Starts `mcpguard <args...>`.
    pub fn guard<S: AsRef<OsStr>>(args: &[S]) -> Peer {
        Self::start(mcpguard(), args)
    }

    pub fn start_with(cmd: &mut Command) -> Peer {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let stdin = child.stdin.take();
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut stderr_pipe = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || loop {
            let mut line = Vec::new();
            match stdout.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    if line.last() == Some(&b'\n') {
                        line.pop();
                    }
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = stderr.clone();
        let stderr_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let done = stderr_done.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr_pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        });
        Peer {
            child,
            stdin,
            lines,
            stderr,
            stderr_done,
        }
    }

    /// Writes `bytes` followed by a newline.
    pub fn send(&mut self, bytes: impl AsRef<[u8]>) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes.as_ref()).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    /// Writes raw bytes with no newline added.
    pub fn send_raw(&mut self, bytes: impl AsRef<[u8]>) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes.as_ref()).expect("write");
        stdin.flush().expect("flush");
    }

    pub fn send_json(&mut self, v: &serde_json::Value) {
        self.send(serde_json::to_vec(v).unwrap());
    }

    /// The next stdout line, or None after `timeout`.
    pub fn recv_timeout(&self, timeout: Duration) -> Option<Vec<u8>> {
        self.lines.recv_timeout(timeout).ok()
    }

    /// The next stdout line; panics with the stderr so far if none comes in time.
    pub fn recv(&self) -> Vec<u8> {
        match self.lines.recv_timeout(TIMEOUT) {
            Ok(l) => l,
            Err(_) => panic!(
                "no line from the process within {TIMEOUT:?}; stderr:\n{}",
                self.stderr()
            ),
        }
    }

    pub fn recv_json(&self) -> serde_json::Value {
        let line = self.recv();
        serde_json::from_slice(&line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&line)))
    }

    /// Receives lines until one is a response with `id`, returning it; notifications and server
    /// requests seen on the way are returned too.
    pub fn recv_response(
        &self,
        id: &serde_json::Value,
    ) -> (serde_json::Value, Vec<serde_json::Value>) {
        let mut other = Vec::new();
        loop {
            let v = self.recv_json();
            if v.get("id") == Some(id) && v.get("method").is_none() {
                return (v, other);
            }
            other.push(v);
        }
    }

    /// Sends a request and waits for its response.
    pub fn request(
        &mut self,
        id: i64,
        method: &str,
        params: serde_json::Value,
    ) -> serde_json::Value {
        self.send_json(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        self.recv_response(&serde_json::json!(id)).0
    }

    /// Performs the legacy-era handshake and returns the initialize result.
    pub fn initialize(&mut self) -> serde_json::Value {
        self.initialize_with(serde_json::json!({}))
    }

    /// The same handshake by a host that declares `capabilities` (`{"elicitation": {}}`, …).
    pub fn initialize_with(&mut self, capabilities: serde_json::Value) -> serde_json::Value {
        let r = self.request(
            0,
            "initialize",
            serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "itest", "version": "0"}}),
        );
        self.send_json(
            &serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        r
    }

    /// Hands over the stdin pipe, e.g. to write a huge message from another thread.
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().expect("stdin open")
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Everything the process wrote on stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Waits for exit; panics if the process is still running after `timeout`. After the exit it
    /// also waits (briefly) for the stderr reader to reach end-of-file, so that `stderr()` then
    /// holds everything the process wrote: the reader thread can lag behind the exit.
    pub fn wait_timeout(&mut self, timeout: Duration) -> ExitStatus {
        let until = Instant::now() + timeout;
        loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                // A grandchild that inherited stderr could hold it open; the bound keeps a test
                // from hanging on that, and the assertions then see what arrived.
                let drained = Instant::now() + Duration::from_secs(5);
                while !self.stderr_done.load(std::sync::atomic::Ordering::Acquire)
                    && Instant::now() < drained
                {
                    thread::sleep(Duration::from_millis(5));
                }
                return s;
            }
            if Instant::now() > until {
                let _ = self.child.kill();
                panic!(
                    "process did not exit within {timeout:?}; stderr:\n{}",
                    self.stderr()
                );
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn wait(&mut self) -> ExitStatus {
        self.wait_timeout(TIMEOUT)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until stderr contains `needle` and returns the stderr.
    pub fn wait_stderr(&self, needle: &str) -> String {
        let until = Instant::now() + TIMEOUT;
        loop {
            let s = self.stderr();
            if s.contains(needle) {
                return s;
            }
            assert!(
                Instant::now() < until,
                "stderr never contained {needle:?}:\n{s}"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a process with this pid exists (and is not a zombie).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next());
            !matches!(state, Some("Z") | Some("X") | None)
        }
        Err(_) => false,
    }
}

/// Waits up to `timeout` for the process to be gone.
pub fn wait_gone(pid: u32, timeout: Duration) -> bool {
    let until = Instant::now() + timeout;
    while Instant::now() < until {
        if !process_alive(pid) {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    !process_alive(pid)
}

/// The host pid of a descendant of `ancestor` that reported `reported` as its own pid: under the
/// sandbox the server runs in a PID namespace, so the pids it prints (`$!`, `getpid`) are that
/// namespace's. Returns `reported` when no descendant is in a namespace with that pid.
pub fn host_pid(ancestor: u32, reported: u32) -> u32 {
    let parent_of = |pid: u32| -> Option<u32> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))?
            .trim()
            .parse()
            .ok()
    };
    let descends = |mut pid: u32| {
        while let Some(p) = parent_of(pid) {
            if p == ancestor {
                return true;
            }
            if p <= 1 {
                return false;
            }
            pid = p;
        }
        false
    };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return reported;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let ids: Vec<&str> = status
            .lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .map(|l| l.split_whitespace().collect())
            .unwrap_or_default();
        if ids.len() > 1 && ids.last() == Some(&reported.to_string().as_str()) && descends(pid) {
            return pid;
        }
    }
    reported
}

/// Reads `key=<number>` from a stderr capture (the fixture prints `fixture-pid=N`).
pub fn marker(stderr: &str, key: &str) -> Option<u32> {
    let start = stderr.find(&format!("{key}="))? + key.len() + 1;
    stderr[start..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// A finished command's status, stdout and stderr, for an assertion's message.
pub fn show(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs `cmd` with stdin closed and collects its output; kills it and fails when it (or a
/// descendant holding its stdout or stderr open) is not done within `RUN_BOUND`.
pub fn run_bounded(cmd: &mut Command) -> Output {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let drain = |mut pipe: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = pipe.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
        rx
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let until = Instant::now() + RUN_BOUND;
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {RUN_BOUND:?}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let collect = |rx: mpsc::Receiver<Vec<u8>>, which: &str| {
        let left = until.saturating_duration_since(Instant::now());
        rx.recv_timeout(left.max(Duration::from_secs(5)))
            .unwrap_or_else(|_| panic!("the {which} of {what} stayed open after it exited"))
    };
    Output {
        status,
        stdout: collect(out, "stdout"),
        stderr: collect(err, "stderr"),
    }
}

/// The `--sandbox-write` options a host configuration would add for a server started with
/// `server_args`: the directories it is given (server-filesystem's root) and the directory of
/// the fixture's `--log FILE`. The sandbox grants nothing else outside the system paths.
pub fn sandbox_grants<S: AsRef<str>>(server_args: &[S]) -> Vec<String> {
    let mut out = Vec::new();
    let mut grant = |dir: &std::path::Path| {
        out.push("--sandbox-write".to_string());
        out.push(dir.display().to_string());
    };
    let mut args = server_args.iter().map(AsRef::as_ref);
    while let Some(a) = args.next() {
        let p = std::path::Path::new(a);
        if a == "--log" {
            if let Some(dir) = args.next().and_then(|f| std::path::Path::new(f).parent()) {
                grant(dir);
            }
        } else if let Some(f) = a.strip_prefix("--log=") {
            if let Some(dir) = std::path::Path::new(f).parent() {
                grant(dir);
            }
        } else if p.is_absolute() && p.is_dir() {
            grant(p);
        }
    }
    out
}

/// Runs `mcpguard ARGS` the way a person at a terminal does: a pseudo-terminal as its standard
/// input and error (`mcpguard approvals approve` refuses without one), its stdout on a pipe.
/// Returns its status, its stdout, and what the terminal showed as its stderr.
pub fn at_terminal(args: &[&str], env: &[(&str, &std::path::Path)]) -> Output {
    let args: Vec<std::ffi::OsString> = args.iter().map(std::ffi::OsString::from).collect();
    let env: Vec<(&str, String)> = env
        .iter()
        .map(|(k, v)| (*k, v.display().to_string()))
        .collect();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let t = mcpguard::cli::pty::Session::spawn(&mcpguard(), &args, &env).expect("a terminal");
    let (status, stdout, screen) = t.wait_with_screen(RUN_BOUND).expect("it ends");
    Output {
        status,
        stdout: stdout.into_bytes(),
        stderr: screen.into_bytes(),
    }
}
