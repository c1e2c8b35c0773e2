//! A small synchronous MCP client over a child process, for `capture` and `check`.
//!
//! It reuses the proxy's framing and message view, answers every server→client request with an
//! error (a capture must not grant the server sampling, elicitation or roots), and bounds every
//! wait, so a server that hangs or lies produces a clear error instead of a stuck command.
//!
//! It knows nothing of the gate's state machine or the command line.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ExitStatus};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use nix::sys::signal::Signal;
use serde_json::{json, Value};

use crate::process::child;
use crate::snapshot::strict;
use crate::wire::frame::{Frame, LineDecoder};
use crate::wire::message::{self, Kind};

/// Errors of one client operation, phrased for the person running the command.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Spawn(#[from] child::SpawnError),
    #[error("the server did not answer {method} within {timeout:?}{hint}")]
    Timeout {
        method: String,
        timeout: Duration,
        /// For a sandboxed server, what the sandbox may have denied (starts with a line break),
        /// else empty.
        hint: String,
    },
    #[error("the server {why} before answering {method}{hint}")]
    Closed {
        method: String,
        /// What happened, e.g. "exited with status 3" or "closed its output".
        why: String,
        /// As for `Timeout`.
        hint: String,
    },
    #[error("the server answered {method} with error {code}: {message}")]
    Rpc {
        method: String,
        code: i64,
        message: String,
    },
    #[error("the server's answer to {method} is not acceptable: {reason}")]
    BadAnswer { method: String, reason: String },
    #[error("writing to the server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// A running server with a JSON-RPC conversation over its stdio.
pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    frames: Receiver<Frame>,
    next_id: i64,
    pub timeout: Duration,
    /// Notification methods received so far, in order (e.g. to notice `list_changed`).
    pub notifications: Vec<String>,
    /// The modern protocol version to stamp into every request's `_meta` (2026-07-28 has no
    /// handshake: each request carries the envelope); `None` in the legacy era.
    pub envelope: Option<String>,
    /// For a sandboxed server: the command, the sandbox and the denials its stderr reported, so
    /// that a failure says what the sandbox may have denied.
    sandboxed: Option<Sandboxed>,
}

struct Sandboxed {
    command: Vec<OsString>,
    prepared: std::sync::Arc<crate::sandbox::Prepared>,
    watch: child::DenialWatch,
    /// Signalled when the stderr relay has read the last line.
    stderr_done: Receiver<()>,
}

impl Client {
    /// Starts `command` (in `sandbox`, when given); its stderr is relayed (sanitized) to ours.
    pub fn start(
        command: &[OsString],
        max_message_bytes: usize,
        timeout: Duration,
        sandbox: Option<&std::sync::Arc<crate::sandbox::Prepared>>,
    ) -> Result<Client, ClientError> {
        let mut child = child::spawn_with(command, sandbox, child::Io::Piped)?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let watch = sandbox.map(|_| child::DenialWatch::default());
        let (done_tx, stderr_done) = mpsc::channel();
        if let Some(err) = stderr {
            let watch = watch.clone();
            thread::spawn(move || {
                child::relay_stderr(err, watch);
                let _ = done_tx.send(());
            });
        }
        let sandboxed = sandbox.zip(watch).map(|(prepared, watch)| Sandboxed {
            command: command.to_vec(),
            prepared: prepared.clone(),
            watch,
            stderr_done,
        });
        let (tx, frames) = mpsc::channel();
        if let Some(mut out) = stdout {
            thread::spawn(move || {
                let mut dec = LineDecoder::new(max_message_bytes);
                let mut buf = BytesMut::new();
                let mut chunk = vec![0u8; 64 << 10];
                loop {
                    match out.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            buf.extend_from_slice(&chunk[..n]);
                            while let Some(f) = dec.decode(&mut buf) {
                                if tx.send(f).is_err() {
                                    return;
                                }
                            }
                        }
                    }
                }
                while let Some(f) = dec.decode_eof(&mut buf) {
                    let _ = tx.send(f);
                }
            });
        }
        Ok(Client {
            child,
            stdin,
            frames,
            next_id: 0,
            timeout,
            notifications: Vec::new(),
            envelope: None,
            sandboxed,
        })
    }

    fn write(&mut self, v: &Value) -> Result<(), ClientError> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin closed"))?;
        let mut bytes = serde_json::to_vec(v).unwrap_or_default();
        bytes.push(b'\n');
        stdin.write_all(&bytes)?;
        stdin.flush()?;
        Ok(())
    }

    pub fn notify(&mut self, method: &str, params: Option<Value>) -> Result<(), ClientError> {
        let mut n = json!({"jsonrpc": "2.0", "method": method});
        if let Some(p) = params {
            n["params"] = p;
        }
        self.write(&n).map_err(|e| self.gone(method, e))
    }

    /// A server that exited before reading what we wrote makes the write fail with a broken
    /// pipe, or closes its output before answering: which one is seen first is a race, so both
    /// become the same `Closed` error, naming the server's exit status when it has one.
    fn gone(&mut self, method: &str, e: ClientError) -> ClientError {
        match e {
            ClientError::Io(io) if io.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed(method, "closed its input")
            }
            e => e,
        }
    }

    fn closed(&mut self, method: &str, pipe: &str) -> ClientError {
        // The pipes close as the process exits; give the exit a moment to become visible.
        let until = Instant::now() + Duration::from_millis(500);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() < until => thread::sleep(Duration::from_millis(5)),
                _ => break None,
            }
        };
        use crate::sandbox::explain::Ending;
        let ending = status.as_ref().map_or(Ending::Closed, Ending::of);
        let why = match ending {
            Ending::Exited(code) => format!("exited with status {code}"),
            Ending::Signalled(signal) => format!("was killed by signal {signal}"),
            _ => pipe.to_string(),
        };
        ClientError::Closed {
            method: method.to_string(),
            why,
            hint: self.hint(&ending, true),
        }
    }

    /// What the sandbox may have denied a server that failed with `ending` (a line break, then
    /// the explanation), or nothing for an unsandboxed server. `exited`: wait briefly for the
    /// stderr relay to read the last lines, which name the denial.
    fn hint(&self, ending: &crate::sandbox::explain::Ending, exited: bool) -> String {
        let Some(s) = &self.sandboxed else {
            return String::new();
        };
        if exited {
            let _ = s.stderr_done.recv_timeout(Duration::from_millis(500));
        }
        crate::process::child::name_held_denials();
        let watch = s.watch.lock().unwrap_or_else(|p| p.into_inner());
        format!(
            "\n  {}",
            crate::sandbox::explain::explain(
                &s.prepared.explain,
                ending,
                watch.denials(),
                &s.command
            )
        )
    }

    /// Sends a request and returns its `result`, strictly parsed (duplicate member names in
    /// the answer are an error: the snapshot must be exactly what the server said).
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let params = match &self.envelope {
            Some(version) => crate::gate::modern::stamp(Some(params), version),
            None => params,
        };
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .map_err(|e| self.gone(method, e))?;
        let deadline = Instant::now() + self.timeout;
        let bad = |reason: String| ClientError::BadAnswer {
            method: method.to_string(),
            reason,
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = match self.frames.recv_timeout(left) {
                Ok(f) => f,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let ending = crate::sandbox::explain::Ending::TimedOut {
                        method: method.to_string(),
                        after: self.timeout,
                    };
                    return Err(ClientError::Timeout {
                        method: method.to_string(),
                        timeout: self.timeout,
                        hint: self.hint(&ending, false),
                    });
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(self.closed(method, "closed its output"))
                }
            };
            let line = match frame {
                Frame::Line(l) => l,
                Frame::TooLong { len, .. } => {
                    return Err(bad(format!(
                        "a {len}-byte message exceeds the limit (raise --max-message-bytes)"
                    )))
                }
            };
            let msg = match message::parse(&line) {
                Ok(m) => m,
                Err(e) => {
                    crate::process::diag::emit(
                        crate::protocol::Level::Warn,
                        &format!("ignored a line from the server: {}", e.reason),
                    );
                    continue;
                }
            };
            match msg.kind {
                Kind::Notification => {
                    self.notifications
                        .push(msg.method.as_deref().unwrap_or_default().to_string());
                }
                Kind::Request => {
                    // A capture grants the server nothing: no sampling, elicitation or roots.
                    let reply = message::error_response(
                        msg.id.as_ref(),
                        message::METHOD_NOT_FOUND,
                        "mcpguard does not serve server requests while capturing or checking",
                        None,
                    );
                    let reply: Value = serde_json::from_slice(&reply).unwrap_or(Value::Null);
                    self.write(&reply).map_err(|e| self.gone(method, e))?;
                }
                Kind::Response | Kind::ErrorResponse if msg.id == Some(message::Id::Int(id)) => {
                    if let Some(err) = msg.error {
                        let e: Value = serde_json::from_str(err.get()).unwrap_or(Value::Null);
                        return Err(ClientError::Rpc {
                            method: method.to_string(),
                            code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                            message: e
                                .get("message")
                                .and_then(Value::as_str)
                                .map(|m| {
                                    crate::wire::sanitize::clean(
                                        m,
                                        crate::wire::sanitize::Clean::LINE,
                                    )
                                })
                                .unwrap_or_default(),
                        });
                    }
                    let raw = msg.result.map(|r| r.get()).unwrap_or("null");
                    return strict::parse_strict_str(raw).map_err(|e| bad(e.to_string()));
                }
                Kind::Response | Kind::ErrorResponse => {}
            }
        }
    }

    /// Closes the server's stdin and waits for it to exit, escalating to SIGTERM and SIGKILL of
    /// its process group after `grace` each.
    pub fn shutdown(mut self, grace: Duration) -> Option<ExitStatus> {
        self.stdin = None;
        let pgid = self.child.id();
        for signal in [None, Some(Signal::SIGTERM), Some(Signal::SIGKILL)] {
            if let Some(s) = signal {
                let _ = child::signal_group(pgid, s);
            }
            let until = Instant::now() + grace;
            while Instant::now() < until {
                if let Ok(Some(status)) = self.child.try_wait() {
                    if child::group_alive(pgid) {
                        let _ = child::signal_group(pgid, Signal::SIGKILL);
                    }
                    return Some(status);
                }
                thread::sleep(Duration::from_millis(10));
            }
        }
        self.child.wait().ok()
    }
}
