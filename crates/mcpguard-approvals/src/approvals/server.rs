//! The listening side, run by each proxy: one socket, `<dir>/<pid>.sock`, answered by a thread.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

/// A listening approval socket; dropping it removes the socket file, so a stopped mcpguard
/// leaves nothing for `mcpguard approvals` to find.
#[derive(Debug)]
pub struct Listener {
    path: PathBuf,
}

impl Listener {
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A bound socket that does not answer yet: binding first lets the proxy know whether the
/// terminal channel runs before its session starts, and serving later hands it the session.
#[derive(Debug)]
pub struct Bound {
    listener: UnixListener,
    path: PathBuf,
}

/// Binds this process's approval socket, `<dir>/<pid>.sock`.
pub fn bind() -> io::Result<Bound> {
    let dir = super::private_dir(true)?;
    let path = dir.join(format!("{}.sock", std::process::id()));
    // A file of this name is left over from an earlier process with the same pid: nothing
    // listens on it any more.
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot listen on {}: {e}", path.display()),
        )
    })?;
    // The directory already keeps other users out; the socket itself is private too.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(Bound { listener, path })
}

impl Bound {
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Answers every request of the same user with `handler` (one JSON value in, one out), on a
    /// thread of its own.
    pub fn serve(self, handler: impl Fn(&Value) -> Value + Send + 'static) -> io::Result<Listener> {
        let Bound { listener, path } = self;
        // From here on the socket file is removed when the listener is dropped.
        let kept = Listener { path };
        let me = super::euid();
        thread::Builder::new()
            .name("approvals".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    match conn {
                        Ok(stream) => {
                            let _ = answer(stream, me, &handler);
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(_) => break,
                    }
                }
            })?;
        Ok(kept)
    }
}

/// One connection: the peer's uid checked, one request line read (bounded, with a deadline, so
/// a stuck peer cannot stop the others), one answer written.
fn answer(mut stream: UnixStream, me: u32, handler: &impl Fn(&Value) -> Value) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let reply = match super::peer_uid(&stream) {
        Ok(uid) if uid == me => {
            let mut line = String::new();
            let read = BufReader::new((&stream).take(super::MAX_LINE as u64)).read_line(&mut line);
            match read.map_err(|e| e.to_string()).and_then(|_| {
                serde_json::from_str::<Value>(&line).map_err(|e| format!("not a JSON request: {e}"))
            }) {
                Ok(request) => handler(&request),
                Err(e) => json!({"ok": false, "error": format!("refused the request: {e}")}),
            }
        }
        Ok(uid) => json!({"ok": false, "error": format!(
            "refused: the connecting process runs as uid {uid}, and only uid {me}, who runs this mcpguard, may list or answer its approvals"
        )}),
        Err(e) => {
            json!({"ok": false, "error": format!("refused: the peer's credentials cannot be read ({e})")})
        }
    };
    let mut bytes = serde_json::to_vec(&reply).unwrap_or_default();
    bytes.push(b'\n');
    stream.write_all(&bytes)
}
