//! The asking side, used by `mcpguard approvals`: every approval socket of this user, one
//! request each.

// This module's `unsafe`: the polkit agent child's start (pre_exec), its pipe, poll and kill (each block with its `// SAFETY:`).
#![allow(unsafe_code)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

/// The sockets of this user's running mcpguard processes, by pid, in pid order. A socket whose
/// process is gone (mcpguard was killed before it could remove it) is removed here. A search
/// directory that is not this user's private one is refused: an error for the first (this
/// process's own choice), a problem report for the fallback.
pub fn sockets(problems: &mut Vec<String>) -> io::Result<Vec<(u32, PathBuf)>> {
    let mut found = Vec::new();
    for (i, dir) in super::search_dirs().into_iter().enumerate() {
        if std::fs::symlink_metadata(&dir).is_err() {
            continue;
        }
        match super::check_private(&dir) {
            Ok(()) => sockets_in(&dir, &mut found)?,
            Err(e) if i == 0 => return Err(e),
            Err(e) => problems.push(e.to_string()),
        }
    }
    found.sort();
    found.dedup_by_key(|(pid, _)| *pid);
    Ok(found)
}

fn sockets_in(dir: &Path, found: &mut Vec<(u32, PathBuf)>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(pid) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".sock"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        found.push((pid, path));
    }
    Ok(())
}

/// Sends `request` on the socket at `path` and reads the one answer line.
pub fn request(path: &Path, request: &Value) -> io::Result<Value> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut line = serde_json::to_vec(request).unwrap_or_default();
    line.push(b'\n');
    stream.write_all(&line)?;
    let mut answer = String::new();
    BufReader::new((&stream).take(super::MAX_LINE as u64)).read_line(&mut answer)?;
    serde_json::from_str(&answer).map_err(|e| {
        io::Error::other(format!(
            "{} answered something that is not JSON: {e}",
            path.display()
        ))
    })
}

/// Every pending approval of every running mcpguard of this user, each with the `pid` of the
/// mcpguard that holds it. A process that cannot be asked is reported in `problems`.
pub fn list_all() -> io::Result<(Vec<Value>, Vec<String>)> {
    let mut pending = Vec::new();
    let mut problems = Vec::new();
    for (pid, path) in sockets(&mut problems)? {
        match request(&path, &json!({"op": "list"})) {
            Ok(v) if v["ok"] == true => {
                for mut item in v["pending"].as_array().cloned().unwrap_or_default() {
                    item["pid"] = json!(pid);
                    pending.push(item);
                }
            }
            Ok(v) => problems.push(format!(
                "mcpguard {pid}: {}",
                v["error"].as_str().unwrap_or("refused the request")
            )),
            Err(e) => problems.push(format!("mcpguard {pid} cannot be asked: {e}")),
        }
    }
    Ok((pending, problems))
}

/// The mcpguard process that holds approval `id` (`<pid>-<n>`) and its socket.
fn holder(id: &str) -> Result<(u32, PathBuf), String> {
    let pid = id
        .split_once('-')
        .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<u32>().ok()))
        .ok_or_else(|| {
            format!("{id:?} is not an approval id (they look like 1234-1; `mcpguard approvals list` shows them)")
        })?;
    let mut problems = Vec::new();
    let found = sockets(&mut problems).map_err(|e| e.to_string())?;
    found.into_iter().find(|(p, _)| *p == pid).ok_or_else(|| {
        format!(
            "no mcpguard with pid {pid} is waiting for approvals (it ended, or it runs as another user or with another XDG_RUNTIME_DIR); `mcpguard approvals list` shows what is pending"
        )
    })
}

/// Denies approval `id` in the mcpguard that holds it. A denial needs no proof: it can only
/// stop a call.
pub fn deny(id: &str) -> Result<String, String> {
    let (pid, path) = holder(id)?;
    let reply = request(&path, &json!({"op": "answer", "id": id, "approve": false}))
        .map_err(|e| format!("mcpguard {pid} cannot be asked: {e}"))?;
    if reply["ok"] == true {
        Ok(reply["message"].as_str().unwrap_or("done").to_string())
    } else {
        Err(reply["error"]
            .as_str()
            .unwrap_or("the answer was refused")
            .to_string())
    }
}

/// Asks the mcpguard that holds approval `id` to approve it, which it does only after the
/// person authenticates through polkit (`approvals::polkit`). A terminal agent (`pkttyagent`)
/// is registered for that mcpguard process first, so the password prompt appears in this
/// terminal; `told` gets each line for the person. Waits until the authentication ended.
pub fn approve(id: &str, scope: &str, told: &mut dyn FnMut(&str)) -> Result<String, String> {
    let (pid, path) = holder(id)?;
    let _agent = match tty_agent(pid) {
        Ok(a) => Some(a),
        Err(e) => {
            told(&format!(
                "no password prompt in this terminal ({e}); a desktop authentication agent may ask instead"
            ));
            None
        }
    };
    let reply = request(
        &path,
        &json!({"op": "answer", "id": id, "approve": true, "scope": scope}),
    )
    .map_err(|e| format!("mcpguard {pid} cannot be asked: {e}"))?;
    if reply["authenticating"] != true {
        return Err(reply["error"]
            .as_str()
            .unwrap_or("the approval was refused")
            .to_string());
    }
    told(reply["error"].as_str().unwrap_or_default());
    // The authentication ends when the person answers, or when mcpguard withdraws it (the
    // question expired or was answered elsewhere); the bound only guards against a lost mcpguard.
    let until = std::time::Instant::now() + Duration::from_secs(30 * 60);
    // The check's slot is freed a moment before the proxy records what it did with the verdict,
    // so an ended authentication without an outcome yet is asked about again for a while.
    let mut ended: Option<std::time::Instant> = None;
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let status = request(&path, &json!({"op": "status", "id": id})).map_err(|e| {
            if path.exists() {
                format!("mcpguard {pid} cannot be asked: {e}")
            } else {
                // The proxy ended meanwhile: its host finished with the session, often right
                // after an approved call's result reached it.
                format!("mcpguard {pid} ended before it said what became of approval {id} (its host closed the session); the host shows the call's result")
            }
        })?;
        if status["authenticating"] == true && std::time::Instant::now() < until {
            continue;
        }
        let first_end = *ended.get_or_insert_with(std::time::Instant::now);
        if status["outcome"].is_null() && first_end.elapsed() < Duration::from_secs(5) {
            continue;
        }
        let outcome = status["outcome"]
            .as_str()
            .unwrap_or("the authentication ended without an outcome")
            .to_string();
        return if outcome.starts_with("approved ") {
            Ok(outcome)
        } else {
            Err(outcome)
        };
    }
}

/// A `pkttyagent` registered for one mcpguard process, ended when dropped.
pub struct TtyAgent {
    child: std::process::Child,
}

impl Drop for TtyAgent {
    fn drop(&mut self) {
        // SIGTERM first: pkttyagent then restores the terminal's echo it turned off for the
        // password; SIGKILL only if it does not end.
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: kill has no memory preconditions; the pid is our own unreaped child.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        for _ in 0..20 {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `pkttyagent --process PID` in this terminal and waits (bounded) until polkitd has it
/// registered, which it says by closing `--notify-fd`.
pub fn tty_agent(pid: u32) -> Result<TtyAgent, String> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two descriptors for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!(
            "no pipe for pkttyagent: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let w = write.as_raw_fd();
    let mut cmd = std::process::Command::new("pkttyagent");
    cmd.args(["--process", &pid.to_string(), "--notify-fd", "3"]);
    // SAFETY: between fork and exec the child only calls dup2 and fcntl, which are
    // async-signal-safe; descriptor 3 becomes the pipe's write end without close-on-exec.
    unsafe {
        cmd.pre_exec(move || {
            if w == 3 {
                if libc::fcntl(3, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
            } else if libc::dup2(w, 3) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .map_err(|e| format!("pkttyagent cannot be started ({e}); it comes with polkitd"))?;
    drop(write);
    let mut agent = TtyAgent { child };
    let mut pfd = libc::pollfd {
        fd: read.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is one valid pollfd for a descriptor owned by `read`.
    let ready = unsafe { libc::poll(&mut pfd, 1, 10_000) };
    if ready <= 0 {
        return Err("pkttyagent did not register within 10 s".into());
    }
    // Registered (the descriptor closed), or pkttyagent ended, which closes it too.
    std::thread::sleep(Duration::from_millis(50));
    if let Ok(Some(status)) = agent.child.try_wait() {
        return Err(format!(
            "pkttyagent could not register for mcpguard {pid} ({status})"
        ));
    }
    Ok(agent)
}
