//! Naming what the sandbox refused, whatever the server prints (issue 33): a seccomp
//! user-notification filter on `open`, `openat`, `openat2`, `connect` and `bind` whose listener
//! mcpguard holds. For each such call the observer reads the path or address from the server's
//! memory, compares it with the grants of the run (as Landlock will), answers
//! `SECCOMP_USER_NOTIF_FLAG_CONTINUE`, and — when the grants do not cover it — says at the
//! default level, once per path or address, what was refused and the flag or policy key that
//! allows it.
//!
//! It owns the filter, the hand-over of its listener from the child, and the reading and
//! wording of the calls. It never decides: every call it sees continues to the kernel, where
//! Landlock (and the other filters) decide as they would without it. `CONTINUE` has a
//! time-of-check gap (another thread of the server may change the path after the observer read
//! it and before the kernel reads it again), which is why it is used only for the explanation:
//! a server that races it can at worst get a wrong or missing explanation, never a grant.
//!
//! It also sees `execve` and `execveat`, for one refusal of its own: a package install a
//! descendant of the server starts while the run grants neither port 443 nor 80 fails at once with
//! `EACCES` instead of waiting for the registry until the call times out
//! (`sandbox::installers`, which words it). Refusing is the fail-closed direction: a race can
//! only turn it into `CONTINUE`, which leaves the exec to the sandbox as before.
//!
//! Cost: every observed call waits for one round trip to mcpguard's observer thread (a few
//! microseconds to tens of them; measured in ARCHITECTURE.md). Other calls (read, write,
//! stat, mmap …) never reach it: the filter returns ALLOW for them in the kernel.
//!
//! Why not Landlock's audit records (Linux 6.15 and later): they go to the kernel's audit
//! log, which only a process with `CAP_AUDIT_READ` in the initial user namespace can read, so
//! an ordinary user's mcpguard could not see them.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

use super::Access;

/// `SECCOMP_RET_USER_NOTIF`.
const RET_USER_NOTIF: u32 = 0x7fc0_0000;
const RET_ALLOW: u32 = super::seccomp::RET_ALLOW;
/// `SECCOMP_FILTER_FLAG_NEW_LISTENER`.
const FLAG_NEW_LISTENER: libc::c_ulong = 1 << 3;
/// `SECCOMP_USER_NOTIF_FLAG_CONTINUE` (Linux 5.5).
const FLAG_CONTINUE: u32 = 1;
/// `SECCOMP_IOCTL_NOTIF_RECV`, `_SEND` and `_ID_VALID` (`_IOWR('!', 0, struct seccomp_notif)` …).
const IOCTL_RECV: libc::c_ulong = 0xc050_2100;
const IOCTL_SEND: libc::c_ulong = 0xc018_2101;
const IOCTL_ID_VALID: libc::c_ulong = 0x4008_2102;

/// At most this many denials are named per run, so that a server looping over ungranted paths
/// cannot flood the log or grow mcpguard's memory.
const MAX_NAMED: usize = 64;

/// `struct seccomp_data`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct Data {
    nr: i32,
    arch: u32,
    ip: u64,
    args: [u64; 6],
}

/// `struct seccomp_notif`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct Notif {
    id: u64,
    pid: u32,
    flags: u32,
    data: Data,
}

/// `struct seccomp_notif_resp`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct Resp {
    id: u64,
    val: i64,
    error: i32,
    flags: u32,
}

/// The calls observed, by number on this architecture.
#[cfg(target_arch = "x86_64")]
const OPEN: Option<i64> = Some(libc::SYS_open);
#[cfg(not(target_arch = "x86_64"))]
const OPEN: Option<i64> = None;

/// Whether this kernel can hand a notification filter's listener to mcpguard and let the call
/// continue (Linux 5.5 and later).
pub fn available() -> bool {
    super::seccomp::action_available(RET_USER_NOTIF)
}

/// The notification filter: the observed calls go to the listener, everything else is allowed
/// (the other filters still apply: the kernel takes the strictest verdict, and a refusal by
/// them is never seen here).
fn program() -> Vec<libc::sock_filter> {
    let i = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    const LD_W_ABS: u32 = 0x20;
    const JEQ_K: u32 = 0x15;
    const RET_K: u32 = 0x06;
    let mut calls: Vec<i64> = vec![
        libc::SYS_openat,
        libc::SYS_openat2,
        libc::SYS_connect,
        libc::SYS_bind,
        // For `sandbox::installers`: a package install started at run time.
        libc::SYS_execve,
        libc::SYS_execveat,
    ];
    calls.extend(OPEN);
    let mut p = vec![
        // A foreign architecture's numbers mean other calls: allow here, the guard kills it.
        i(LD_W_ABS, 0, 0, 4),
        i(JEQ_K, 1, 0, super::seccomp::AUDIT_ARCH),
        i(RET_K, 0, 0, RET_ALLOW),
        i(LD_W_ABS, 0, 0, 0),
    ];
    let n = calls.len();
    for (k, nr) in calls.iter().enumerate() {
        // Jump to the USER_NOTIF return after the remaining comparisons and the ALLOW.
        p.push(i(JEQ_K, (n - k) as u8, 0, *nr as u32));
    }
    p.push(i(RET_K, 0, 0, RET_ALLOW));
    p.push(i(RET_K, 0, 0, RET_USER_NOTIF));
    p
}

/// What the observer compares a call with: the grants of the run, made real paths (Landlock
/// follows a granted symlink to what it names).
#[derive(Debug, Clone, Default)]
pub struct Grants {
    pub paths: Vec<(Access, PathBuf)>,
    pub tcp_connect: Vec<u16>,
    pub tcp_bind: Vec<u16>,
    pub allow_udp: bool,
    /// Whether Landlock confines TCP ports on this kernel (ABI 4); without it no connect is
    /// refused for its port, and none is named.
    pub ports_enforced: bool,
    /// The names of `presets::OWN_PROC`, which the server process has on itself.
    pub own_proc: Vec<String>,
}

/// The observer of one sandbox: the filter the child installs, the socket pair its listener
/// crosses, and what the thread compares calls with.
pub struct Observer {
    program: Vec<libc::sock_filter>,
    /// The child's end (close-on-exec): the raw number is what the child uses; the parent keeps
    /// the descriptor open for as long as the sandbox exists, so the number stays valid for
    /// every spawn.
    child_fd: RawFd,
    _child: OwnedFd,
    parent: Mutex<Option<OwnedFd>>,
    grants: Grants,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("child_fd", &self.child_fd)
            .finish_non_exhaustive()
    }
}

impl Observer {
    /// Prepares the observer in the parent: the filter and a socket pair whose parent end
    /// receives the sender's credentials (the server's pid as mcpguard sees it).
    pub fn new(grants: Grants) -> io::Result<Observer> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: socketpair writes two descriptors into the live array.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just returned by the kernel and nothing else owns them.
        let (parent, child) =
            unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let one: libc::c_int = 1;
        // SAFETY: setsockopt reads one live int.
        let r = unsafe {
            libc::setsockopt(
                parent.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_PASSCRED,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Observer {
            program: program(),
            child_fd: child.as_raw_fd(),
            _child: child,
            parent: Mutex::new(Some(parent)),
            grants,
        })
    }

    /// Installs the notification filter and sends its listener to mcpguard. Runs in the forked
    /// child between fork and exec, last of all (every call after it that the filter names
    /// waits for mcpguard): raw system calls on memory prepared in the parent, no allocation.
    pub fn install_in_child(&self) -> io::Result<()> {
        let prog = libc::sock_fprog {
            len: self.program.len() as libc::c_ushort,
            filter: self.program.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: `prog` points at the program, which outlives the call; no_new_privs is set.
        let listener = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                FLAG_NEW_LISTENER,
                &prog as *const libc::sock_fprog,
            )
        };
        if listener < 0 {
            return Err(io::Error::last_os_error());
        }
        let listener = listener as libc::c_int;
        // One byte of data and the listener as SCM_RIGHTS; the control buffer is on the stack,
        // u64-aligned as cmsghdr requires.
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        let mut control = [0u64; 4];
        // SAFETY: msghdr is plain data; zeroed is a valid empty value.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is arithmetic.
        msg.msg_controllen =
            unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as _;
        // SAFETY: the control buffer (32 bytes) holds one cmsghdr with one int; the CMSG
        // macros compute offsets within it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), listener);
        }
        // SAFETY: sendmsg reads the live msghdr and what it points at.
        let sent = unsafe { libc::sendmsg(self.child_fd, &msg, libc::MSG_NOSIGNAL) };
        let err = io::Error::last_os_error();
        // SAFETY: closes the listener this process got, once; mcpguard holds its own copy.
        unsafe { libc::close(listener) };
        if sent != 1 {
            return Err(err);
        }
        Ok(())
    }

    /// Starts the observer thread (once per sandbox). `say` prints one line at the default
    /// level. The thread ends when the sandbox is dropped.
    pub fn start(self: &Arc<Self>, say: Arc<dyn Fn(&str) + Send + Sync>) {
        let Some(parent) = self.parent.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let weak = Arc::downgrade(self);
        let grants = self.grants.clone();
        let said = say.clone();
        if let Err(e) = std::thread::Builder::new()
            .name("sandbox-observer".into())
            .spawn(move || run(parent, weak, grants, say))
        {
            // Without the thread the queued listeners close, and every observed call of the
            // server then fails with ENOSYS: say so, since nothing else would.
            said(&format!(
                "the sandbox's denial observer could not start ({e}): the server's open, connect and bind calls fail with ENOSYS in this run, so restart the server (the host restarts it when its entry is started again)"
            ));
        }
    }
}

/// Waits for listeners from the children of this sandbox and serves each until its server is
/// gone; ends when the sandbox is dropped.
fn run(
    parent: OwnedFd,
    alive: Weak<Observer>,
    grants: Grants,
    say: Arc<dyn Fn(&str) + Send + Sync>,
) {
    let mut named = Named::default();
    loop {
        if alive.upgrade().is_none() {
            return;
        }
        if !readable(parent.as_raw_fd(), 1000) {
            continue;
        }
        let Some((listener, server)) = receive(&parent) else {
            continue;
        };
        serve(&listener, server, &grants, &mut named, &*say);
    }
}

/// Polls `fd` for input for up to `ms`; true when something is there (or it hung up).
fn readable(fd: RawFd, ms: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: poll reads and writes one live pollfd.
    let r = unsafe { libc::poll(&mut pfd, 1, ms) };
    r > 0
}

/// Receives one listener and the sender's pid (mcpguard's view of the server process).
fn receive(parent: &OwnedFd) -> Option<(OwnedFd, u32)> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; zeroed is a valid empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: recvmsg writes into the live buffers msghdr points at.
    let n = unsafe { libc::recvmsg(parent.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    if n <= 0 {
        return None;
    }
    let mut listener = None;
    let mut pid = 0u32;
    // SAFETY: the CMSG macros walk the control buffer the kernel filled, within its length.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET {
                if (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                    listener = Some(OwnedFd::from_raw_fd(fd));
                } else if (*cmsg).cmsg_type == libc::SCM_CREDENTIALS {
                    let cred =
                        std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::ucred>());
                    pid = cred.pid as u32;
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    listener.map(|l| (l, pid))
}

/// The denials already named, so that each path or address is named once.
#[derive(Default)]
struct Named {
    seen: HashSet<String>,
    full: bool,
}

impl Named {
    fn first(&mut self, key: String, say: &dyn Fn(&str)) -> bool {
        if self.seen.contains(&key) {
            return false;
        }
        if self.seen.len() >= MAX_NAMED {
            if !self.full {
                self.full = true;
                say(&format!(
                    "the sandbox denied more than {MAX_NAMED} paths or addresses; the others are not named"
                ));
            }
            return false;
        }
        self.seen.insert(key);
        true
    }
}

/// Answers every notification of one listener with CONTINUE, naming the calls the grants do not
/// cover, until the server and its descendants are gone (the listener hangs up).
fn serve(listener: &OwnedFd, server: u32, grants: &Grants, named: &mut Named, say: &dyn Fn(&str)) {
    let fd = listener.as_raw_fd();
    loop {
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll reads and writes one live pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, -1) };
        if r < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if pfd.revents & libc::POLLIN == 0 {
            // Hung up: no process of this filter is left.
            return;
        }
        let mut n = Notif::default();
        // SAFETY: the kernel fills the zeroed, live notification.
        if unsafe { libc::ioctl(fd, IOCTL_RECV as _, &mut n as *mut Notif) } != 0 {
            // ENOENT: the caller died before it was received; EINTR: try again.
            continue;
        }
        // Read what the call names before letting it continue (the decision is Landlock's
        // either way; see the module documentation for the gap this leaves).
        let call = read_call(&n);
        let valid = {
            let id = n.id;
            // SAFETY: the ioctl reads one live u64.
            unsafe { libc::ioctl(fd, IOCTL_ID_VALID as _, &id as *const u64) == 0 }
        };
        // The one call refused here: a package install a descendant starts while the run
        // cannot reach a registry (`sandbox::installers`, which says why a race cannot loosen it).
        let installer = match &call {
            // The server's own exec (a `uvx` or `npx` entry) is its launch shape, which
            // `sandbox::explain` speaks of; only what it starts later is judged here.
            Some(Call::Exec { path, argv }) if valid => super::installers::recognise(path, argv)
                .filter(|_| tgid_of(n.pid).is_some_and(|p| p != server))
                .map(|i| {
                    let refuse = i.installs && super::installers::registry_unreachable(grants);
                    (i, refuse)
                }),
            _ => None,
        };
        let refuse = installer.as_ref().is_some_and(|(_, r)| *r);
        let resp = Resp {
            id: n.id,
            val: 0,
            error: if refuse { -libc::EACCES } else { 0 },
            flags: if refuse { 0 } else { FLAG_CONTINUE },
        };
        // SAFETY: the ioctl reads the live response. A failure means the caller is gone.
        unsafe { libc::ioctl(fd, IOCTL_SEND as _, &resp as *const Resp) };
        // The comparison with the grants runs after the call went on, so the server waits
        // only for the read of its arguments. (A file the call creates exists by then only
        // if it was allowed, and then it is covered.)
        let refused = if valid {
            call.and_then(|c| refusal(&c, n.pid, server, grants))
        } else {
            None
        };
        if let Some((key, line)) = refused {
            if named.first(key, say) {
                say(&line);
            }
        }
        if let Some((i, refuse)) = installer {
            let line = if refuse {
                Some(i.refused(n.pid))
            } else if !i.installs && super::installers::registry_unreachable(grants) {
                Some(i.named(n.pid))
            } else {
                None
            };
            if let Some(line) = line {
                if named.first(format!("exec {}", i.shown), say) {
                    say(&line);
                }
            }
        }
    }
}

/// One observed call, as read from the server's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Call {
    /// An open: the path as the server wrote it, made absolute, and whether it writes or
    /// creates.
    Open { path: PathBuf, write: bool },
    /// A connect or bind to an internet address, on socket `fd`.
    Net {
        bind: bool,
        addr: std::net::SocketAddr,
        fd: i32,
    },
    /// An exec: the path as the caller wrote it and the first arguments.
    Exec { path: String, argv: Vec<String> },
}

fn read_call(n: &Notif) -> Option<Call> {
    let a = n.data.args;
    let pid = n.pid;
    let nr = i64::from(n.data.nr);
    let open = |dirfd: i64, path_ptr: u64, flags: u64| -> Option<Call> {
        if flags & libc::O_PATH as u64 != 0 {
            // Landlock does not check O_PATH opens.
            return None;
        }
        let raw = read_cstr(pid, path_ptr)?;
        let raw = PathBuf::from(OsStr::from_bytes(&raw));
        let path = if raw.is_absolute() {
            raw
        } else {
            let base = if dirfd as i32 == libc::AT_FDCWD {
                std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?
            } else {
                std::fs::read_link(format!("/proc/{pid}/fd/{}", dirfd as i32)).ok()?
            };
            if !base.is_absolute() {
                return None;
            }
            base.join(raw)
        };
        let acc = flags & libc::O_ACCMODE as u64;
        let write = acc == libc::O_WRONLY as u64
            || acc == libc::O_RDWR as u64
            || flags & (libc::O_CREAT | libc::O_TRUNC) as u64 != 0;
        Some(Call::Open { path, write })
    };
    if Some(nr) == OPEN {
        return open(libc::AT_FDCWD as i64, a[0], a[1]);
    }
    if nr == libc::SYS_openat {
        return open(a[0] as i64, a[1], a[2]);
    }
    if nr == libc::SYS_openat2 {
        // struct open_how { u64 flags; u64 mode; u64 resolve; }: the flags come first.
        let how = read_mem(pid, a[2], 8)?;
        let flags = u64::from_ne_bytes(how.get(..8)?.try_into().ok()?);
        return open(a[0] as i64, a[1], flags);
    }
    if nr == libc::SYS_execve || nr == libc::SYS_execveat {
        let (path, argv) = if nr == libc::SYS_execve {
            (a[0], a[1])
        } else {
            (a[1], a[2])
        };
        let path = read_cstr(pid, path).unwrap_or_default();
        return Some(Call::Exec {
            path: String::from_utf8_lossy(&path).into_owned(),
            argv: read_argv(pid, argv),
        });
    }
    if nr == libc::SYS_connect || nr == libc::SYS_bind {
        let len = (a[2] as usize).min(128);
        let raw = read_mem(pid, a[1], len)?;
        let addr = sockaddr(&raw)?;
        return Some(Call::Net {
            bind: nr == libc::SYS_bind,
            addr,
            fd: a[0] as i32,
        });
    }
    None
}

/// An internet socket address from its bytes (`sockaddr_in` or `sockaddr_in6`).
fn sockaddr(raw: &[u8]) -> Option<std::net::SocketAddr> {
    let family = u16::from_ne_bytes(raw.get(..2)?.try_into().ok()?);
    let port = u16::from_be_bytes(raw.get(2..4)?.try_into().ok()?);
    match i32::from(family) {
        libc::AF_INET => {
            let ip: [u8; 4] = raw.get(4..8)?.try_into().ok()?;
            Some((std::net::Ipv4Addr::from(ip), port).into())
        }
        libc::AF_INET6 => {
            let ip: [u8; 16] = raw.get(8..24)?.try_into().ok()?;
            Some((std::net::Ipv6Addr::from(ip), port).into())
        }
        _ => None,
    }
}

/// Reads up to `len` bytes at `addr` of process `pid`, page by page, so that a string that ends
/// before an unmapped page is still read.
fn read_mem(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    const PAGE: u64 = 4096;
    let mut out = vec![0u8; len];
    let mut remote = Vec::new();
    let mut at = addr;
    let end = addr.checked_add(len as u64)?;
    while at < end {
        let next = ((at / PAGE) + 1) * PAGE;
        let stop = next.min(end);
        remote.push(libc::iovec {
            iov_base: at as *mut libc::c_void,
            iov_len: (stop - at) as usize,
        });
        at = stop;
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: len,
    };
    // SAFETY: the local iovec covers `out`, which is live and `len` bytes long; the remote ones
    // are only read by the kernel, in the other process.
    let n = unsafe {
        libc::process_vm_readv(
            pid as libc::pid_t,
            &local,
            1,
            remote.as_ptr(),
            remote.len() as libc::c_ulong,
            0,
        )
    };
    if n <= 0 {
        return None;
    }
    out.truncate(n as usize);
    Some(out)
}

/// The NUL-terminated string at `addr` (at most `PATH_MAX` bytes): the first 256 bytes, and
/// the rest only when they hold no NUL (most paths are short).
fn read_cstr(pid: u32, addr: u64) -> Option<Vec<u8>> {
    let mut bytes = read_mem(pid, addr, 256)?;
    if !bytes.contains(&0) && bytes.len() == 256 {
        bytes = read_mem(pid, addr, libc::PATH_MAX as usize)?;
    }
    let end = bytes.iter().position(|b| *b == 0)?;
    bytes.truncate(end);
    Some(bytes)
}

/// The first arguments of an exec (as many as recognising an installer needs), from the
/// caller's NULL-terminated array of pointers at `addr`.
fn read_argv(pid: u32, addr: u64) -> Vec<String> {
    const MAX: usize = 8;
    let Some(raw) = read_mem(pid, addr, MAX * 8) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in raw.chunks_exact(8) {
        let p = u64::from_ne_bytes(p.try_into().unwrap_or_default());
        if p == 0 {
            break;
        }
        match read_cstr(pid, p) {
            Some(s) => out.push(String::from_utf8_lossy(&s).into_owned()),
            None => break,
        }
    }
    out
}

/// The thread group (process) of thread `tid`.
fn tgid_of(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Removes `.` and resolves `..` by the words alone (for a path that does not exist yet).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Whether the grants refuse `call` made by thread `tid` (server process `server`), and if so
/// the key it is named under and the line that names it with its flag.
fn refusal(call: &Call, tid: u32, server: u32, grants: &Grants) -> Option<(String, String)> {
    match call {
        Call::Open { path, write } => open_refusal(path, *write, tid, server, grants),
        Call::Net { bind, addr, fd } => net_refusal(*bind, *addr, *fd, tid, grants),
        Call::Exec { .. } => None,
    }
}

fn open_refusal(
    path: &Path,
    write: bool,
    tid: u32,
    server: u32,
    grants: &Grants,
) -> Option<(String, String)> {
    // /proc/self and /proc/thread-self mean the caller's own entries, not mcpguard's.
    let mut path = path.to_path_buf();
    if let Ok(rest) = path.strip_prefix("/proc/self") {
        path = Path::new("/proc")
            .join(tgid_of(tid)?.to_string())
            .join(rest);
    } else if let Ok(rest) = path.strip_prefix("/proc/thread-self") {
        path = Path::new("/proc")
            .join(tgid_of(tid)?.to_string())
            .join("task")
            .join(tid.to_string())
            .join(rest);
    }
    // What Landlock will see: the real path of what exists; for a file to be created, its
    // folder's real path. A missing file that is not created fails with ENOENT, not a denial.
    let real = match std::fs::canonicalize(&path) {
        Ok(real) => real,
        Err(_) if write => {
            let lex = lexical(&path);
            let dir = std::fs::canonicalize(lex.parent()?).ok()?;
            dir.join(lex.file_name()?)
        }
        Err(_) => return None,
    };
    if let Ok(rest) = real.strip_prefix("/proc") {
        let mut parts = rest.components();
        if let Some(Component::Normal(first)) = parts.next() {
            if let Some(pid) = first.to_str().and_then(|s| s.parse::<u32>().ok()) {
                let name = parts.as_path();
                let own = pid == server
                    && !write
                    && grants
                        .own_proc
                        .iter()
                        .any(|n| name == Path::new(n.as_str()));
                if own {
                    return None;
                }
                let what = if pid == server {
                    "of its own /proc entries the server may read only the runtime facts (cgroup, mountinfo, status, stat, statm, maps, limits, cmdline, auxv), and no flag grants more"
                } else if pid == tgid_of(tid).unwrap_or(0) {
                    "the /proc entries of the programs the server starts are not granted (only the server process's own /proc/self entries are), and no flag grants them"
                } else {
                    "another process's /proc entries are never granted"
                };
                return Some((
                    format!("proc:{}", name.display()),
                    format!(
                        "sandbox denied open of /proc/{pid}/{} ({}): {what}",
                        name.display(),
                        if write { "write" } else { "read" }
                    ),
                ));
            }
        }
    }
    let covered = grants.paths.iter().any(|(access, g)| {
        real.starts_with(g)
            && (!write || matches!(access, Access::ReadWrite | Access::ReadWriteExecute))
    });
    if covered {
        return None;
    }
    let shown = real.display();
    let line = if write {
        let readable = grants.paths.iter().any(|(_, g)| real.starts_with(g));
        format!(
            "sandbox denied open of {shown} (write{}); allow it with --sandbox-write {shown} or sandbox.read_write = [\"{shown}\"] in the policy",
            if readable { ": it is granted for reading only" } else { "" }
        )
    } else {
        format!(
            "sandbox denied open of {shown} (read); allow it with --sandbox-read {shown} or sandbox.read = [\"{shown}\"] in the policy"
        )
    };
    Some((format!("open:{}:{}", real.display(), write), line))
}

fn net_refusal(
    bind: bool,
    addr: std::net::SocketAddr,
    fd: i32,
    tid: u32,
    grants: &Grants,
) -> Option<(String, String)> {
    if !grants.ports_enforced {
        return None;
    }
    let port = addr.port();
    let allowed = if bind {
        &grants.tcp_bind
    } else {
        &grants.tcp_connect
    };
    if allowed.contains(&port) {
        return None;
    }
    // Landlock confines TCP only; a UDP socket exists only with sandbox.allow_udp, and then its
    // destinations are not refused.
    if grants.allow_udp && socket_type(tid, fd) != Some(libc::SOCK_STREAM) {
        return None;
    }
    if bind {
        return Some((
            format!("bind:{port}"),
            format!(
                "sandbox denied bind of TCP port {port} ({addr}); allow it with sandbox.tcp_bind = [{port}] in the policy"
            ),
        ));
    }
    Some((
        format!("connect:{addr}"),
        format!(
            "sandbox denied connect to {addr} (TCP); allow it with --sandbox-connect {addr} or sandbox.connect = [\"{addr}\"] in the policy"
        ),
    ))
}

/// The type of socket `fd` of thread `tid` (a copy of the descriptor is taken with
/// `pidfd_getfd` and closed at once).
fn socket_type(tid: u32, fd: i32) -> Option<i32> {
    // SAFETY: pidfd_open takes integers and returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, 0u32) };
    if pidfd < 0 {
        return None;
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    // SAFETY: pidfd_getfd takes integers and returns a new descriptor or -1.
    let sock = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0u32) };
    if sock < 0 {
        return None;
    }
    // SAFETY: as above.
    let sock = unsafe { OwnedFd::from_raw_fd(sock as RawFd) };
    let mut ty: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one int and its length into live memory.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut ty as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(ty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sockaddr_is_read_for_both_families() {
        let mut v4 = vec![0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&5432u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[127, 0, 0, 1]);
        assert_eq!(sockaddr(&v4), Some("127.0.0.1:5432".parse().unwrap()));
        let mut v6 = vec![0u8; 28];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&80u16.to_be_bytes());
        v6[23] = 1;
        assert_eq!(sockaddr(&v6), Some("[::1]:80".parse().unwrap()));
        let mut unix = vec![0u8; 16];
        unix[..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
        assert_eq!(sockaddr(&unix), None);
        assert_eq!(sockaddr(&[1]), None);
    }

    #[test]
    fn an_open_outside_the_grants_is_named_with_its_flag_and_one_inside_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let granted = std::fs::canonicalize(dir.path()).unwrap();
        let inside = granted.join("in.txt");
        std::fs::write(&inside, "x").unwrap();
        let grants = Grants {
            paths: vec![(Access::Read, granted.clone())],
            ..Grants::default()
        };
        let me = std::process::id();
        assert_eq!(open_refusal(&inside, false, me, me, &grants), None);
        let (_, line) = open_refusal(&inside, true, me, me, &grants).unwrap();
        assert!(
            line.contains("--sandbox-write") && line.contains("reading only"),
            "{line}"
        );
        let (_, line) = open_refusal(Path::new("/etc/hostname"), false, me, me, &grants)
            .or_else(|| open_refusal(Path::new("/etc/passwd"), false, me, me, &grants))
            .unwrap();
        assert!(line.contains("--sandbox-read /etc/"), "{line}");
        // A missing file that is not created is ENOENT, not a denial.
        assert_eq!(
            open_refusal(&granted.join("nope/x"), false, me, me, &Grants::default()),
            None
        );
    }

    #[test]
    fn the_filter_notifies_the_observed_calls_only() {
        let p = program();
        // The last two instructions are ALLOW and USER_NOTIF, and each comparison jumps to
        // the last one.
        let n = p.len();
        assert_eq!(p[n - 1].k, RET_USER_NOTIF);
        assert_eq!(p[n - 2].k, RET_ALLOW);
        for (k, ins) in p.iter().enumerate().skip(4).take(n - 6) {
            assert_eq!(k + 1 + ins.jt as usize, n - 1, "instruction {k}");
        }
    }
}
