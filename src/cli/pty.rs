//! A pseudo-terminal to play the person at a terminal: the demo answers the interactive review
//! through it, and the integration tests drive `mcpguard review` and `mcpguard update` with it.
//!
//! The program runs with the terminal as its stdin and stderr (where the interactive review asks)
//! and its stdout on a pipe (where the digest goes). The driver waits for a prompt with
//! [`Session::expect`] and types with [`Session::send_line`]. The terminal echoes what is typed,
//! as a real one does.

// This module's `unsafe`: openpty and the child's controlling terminal (each block with its `// SAFETY:`).
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A program running on a pseudo-terminal.
pub struct Session {
    master: File,
    child: Child,
    seen: Arc<Mutex<Vec<u8>>>,
    stdout: Arc<Mutex<Vec<u8>>>,
    mark: usize,
}

/// Opens a pseudo-terminal pair, both ends close-on-exec.
fn open_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut master: libc::c_int = -1;
    let mut slave: libc::c_int = -1;
    // SAFETY: openpty writes two descriptors into the integers it is given; the name, termios
    // and window-size arguments may be null, which leaves them unset.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: openpty succeeded, so both are open descriptors that nothing else owns.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    for fd in [&master, &slave] {
        use std::os::fd::AsRawFd;
        // SAFETY: F_SETFD on a descriptor this function owns; the child gets the terminal only
        // as the standard streams it is given.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((master, slave))
}

impl Session {
    /// Starts `program args...` with the terminal as stdin and stderr, stdout piped, and `env`
    /// added to the environment.
    pub fn spawn(
        program: &Path,
        args: &[OsString],
        env: &[(&str, &str)],
    ) -> std::io::Result<Session> {
        let (master, slave) = open_pair()?;
        let slave = File::from(slave);
        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::from(slave.try_clone()?))
            .stderr(Stdio::from(slave))
            .stdout(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn()?;
        // The command's copies of the terminal end go with it, so the master sees the end of
        // output when the program exits.
        drop(cmd);
        let master = File::from(master);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let mut reader = master.try_clone()?;
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            // Ends with EIO once the program and its descendants have closed the terminal.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = sink.lock() {
                    s.extend_from_slice(&buf[..n]);
                }
            }
        });
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let out_sink = stdout.clone();
        if let Some(mut pipe) = child.stdout.take() {
            thread::spawn(move || {
                let mut all = Vec::new();
                let _ = pipe.read_to_end(&mut all);
                if let Ok(mut s) = out_sink.lock() {
                    *s = all;
                }
            });
        }
        Ok(Session {
            master,
            child,
            seen,
            stdout,
            mark: 0,
        })
    }

    /// Everything the terminal showed so far.
    pub fn screen(&self) -> String {
        let seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
        String::from_utf8_lossy(&seen).into_owned()
    }

    /// Waits until `needle` appears after what earlier calls consumed; returns the text up to
    /// and including it, and consumes it.
    pub fn expect(&mut self, needle: &str, timeout: Duration) -> Result<String, String> {
        let until = Instant::now() + timeout;
        loop {
            let seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
            let rest = &seen[self.mark.min(seen.len())..];
            if let Some(at) = find(rest, needle.as_bytes()) {
                let end = at + needle.len();
                let text = String::from_utf8_lossy(&rest[..end]).into_owned();
                self.mark += end;
                return Ok(text);
            }
            if Instant::now() > until {
                return Err(format!(
                    "the terminal never showed {needle:?}; it showed:\n{}",
                    String::from_utf8_lossy(rest)
                ));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until one of `needles` appears after what earlier calls consumed; returns its index
    /// and consumes up to the end of the earliest match.
    pub fn expect_any(&mut self, needles: &[&str], timeout: Duration) -> Result<usize, String> {
        let until = Instant::now() + timeout;
        loop {
            let seen = self.seen.lock().map(|s| s.clone()).unwrap_or_default();
            let rest = &seen[self.mark.min(seen.len())..];
            let first = needles
                .iter()
                .enumerate()
                .filter_map(|(i, n)| find(rest, n.as_bytes()).map(|at| (at, i, n.len())))
                .min();
            if let Some((at, i, len)) = first {
                self.mark += at + len;
                return Ok(i);
            }
            if Instant::now() > until {
                return Err(format!(
                    "the terminal never showed any of {needles:?}; it showed:\n{}",
                    String::from_utf8_lossy(rest)
                ));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Types `line` and Enter.
    pub fn send_line(&mut self, line: &str) -> std::io::Result<()> {
        self.master.write_all(line.as_bytes())?;
        self.master.write_all(b"\r")?;
        self.master.flush()
    }

    /// Waits for the program to end; returns its status and stdout.
    pub fn wait(mut self, timeout: Duration) -> Result<(ExitStatus, String), String> {
        let until = Instant::now() + timeout;
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < until => thread::sleep(Duration::from_millis(10)),
                Ok(None) => {
                    let _ = self.child.kill();
                    let _ = self.child.wait();
                    return Err(format!(
                        "the program did not end in time; the terminal showed:\n{}",
                        self.screen()
                    ));
                }
                Err(e) => return Err(format!("waiting for the program: {e}")),
            }
        };
        // The stdout reader finishes right after the exit.
        let drained = Instant::now() + Duration::from_secs(5);
        loop {
            let done = Arc::strong_count(&self.stdout) == 1;
            if done || Instant::now() > drained {
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        let out = self.stdout.lock().map(|s| s.clone()).unwrap_or_default();
        Ok((status, String::from_utf8_lossy(&out).into_owned()))
    }
}

impl Session {
    /// [`Session::wait`], and also everything the terminal showed (the program's stderr).
    pub fn wait_with_screen(
        self,
        timeout: Duration,
    ) -> Result<(ExitStatus, String, String), String> {
        let seen = self.seen.clone();
        let (status, stdout) = self.wait(timeout)?;
        // The terminal's reader ends once the last holder of the terminal closed it.
        let drained = Instant::now() + Duration::from_secs(2);
        while Arc::strong_count(&seen) > 1 && Instant::now() < drained {
            thread::sleep(Duration::from_millis(10));
        }
        let screen = seen.lock().map(|s| s.clone()).unwrap_or_default();
        Ok((
            status,
            stdout,
            String::from_utf8_lossy(&screen).into_owned(),
        ))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}
