//! Out-of-band confirmation: the per-user approval sockets through which `mcpguard approvals`
//! (in a terminal) lists the writes waiting for a person and answers them, in every running
//! mcpguard of the user.
//!
//! Each proxy listens on `<dir>/<pid>.sock`, where `<dir>` is `$XDG_RUNTIME_DIR/mcpguard` (the
//! per-user runtime directory of the login session). Hosts often start servers with a filtered
//! environment (the Python SDK passes only HOME, LOGNAME, PATH, SHELL, TERM and USER), so
//! without `XDG_RUNTIME_DIR` the proxy uses `/run/user/<uid>/mcpguard` when `/run/user/<uid>` is
//! the user's own private directory (where systemd puts the runtime directory, so a terminal
//! that has the variable finds the same sockets), else `/tmp/mcpguard-<uid>`; `mcpguard
//! approvals` looks in its own choice and in `/tmp/mcpguard-<uid>`. The directory is created
//! 0700 and must be a real directory owned by the user with no access for anyone else; a
//! directory that is not is refused, never repaired, because someone else made it. Every connection's peer is checked with
//! `SO_PEERCRED`: only the same uid is answered. There is no network listener.
//!
//! The protocol is one JSON line each way per connection: `{"op": "list"}` is answered with
//! the pending approvals, `{"op": "answer", "id": ID, "approve": BOOL}` with what happened.
//!
//! It knows nothing of sessions or policies: the proxy hands `serve` a function that answers
//! each request, and decides everything there.

pub mod client;
pub mod desktop;
pub mod polkit;
pub mod server;

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The longest request or answer line, so a peer cannot make either side buffer without bound.
pub const MAX_LINE: usize = 1 << 20;

/// This process's effective uid.
#[allow(unsafe_code)]
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail (POSIX).
    unsafe { libc::geteuid() }
}

/// Where this process keeps its approval socket, without creating anything.
pub fn socket_dir() -> PathBuf {
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(run).join("mcpguard");
    }
    let run = PathBuf::from(format!("/run/user/{}", euid()));
    if check_private(&run).is_ok() {
        return run.join("mcpguard");
    }
    fallback_dir()
}

/// The directory used when no runtime directory is known.
pub fn fallback_dir() -> PathBuf {
    PathBuf::from(format!("/tmp/mcpguard-{}", euid()))
}

/// Where `mcpguard approvals` looks: this process's own choice, then the fallback (a proxy
/// started without `XDG_RUNTIME_DIR` on a machine without `/run/user` is there).
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![socket_dir()];
    if !dirs.contains(&fallback_dir()) {
        dirs.push(fallback_dir());
    }
    dirs
}

/// The socket directory, created 0700 when missing, after checking that it is this user's own:
/// a real directory (not a symbolic link), owned by the effective uid, with no permission for
/// group or others.
pub fn private_dir(create: bool) -> io::Result<PathBuf> {
    let dir = socket_dir();
    if create {
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "cannot create the approval directory {}: {e}",
                        dir.display()
                    ),
                ))
            }
        }
    }
    check_private(&dir)?;
    Ok(dir)
}

/// Refuses `dir` unless it is a directory of this user that nobody else may enter.
pub fn check_private(dir: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(dir).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "the approval directory {} cannot be read: {e}",
                dir.display()
            ),
        )
    })?;
    let me = euid();
    if !meta.file_type().is_dir() {
        return Err(io::Error::other(format!(
            "refused the approval directory {}: it is not a directory (a symbolic link or a file); remove it, or set XDG_RUNTIME_DIR to your own runtime directory",
            dir.display()
        )));
    }
    if meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refused the approval directory {}: it belongs to uid {}, not to you (uid {me}); approvals of another user can be neither listed nor answered",
                dir.display(),
                meta.uid()
            ),
        ));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "refused the approval directory {}: its mode is {:o}, so other users could reach the sockets in it; run `chmod 700 {}`",
                dir.display(),
                meta.permissions().mode() & 0o777,
                dir.display()
            ),
        ));
    }
    Ok(())
}

/// The uid of the process at the other end of a connected Unix socket.
#[allow(unsafe_code)]
pub fn peer_uid(sock: &std::os::unix::net::UnixStream) -> io::Result<u32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: the descriptor is a live socket owned by `sock`; `cred` and `len` are valid for
    // writes of the size passed, which is the size of `ucred` that SO_PEERCRED fills.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}
