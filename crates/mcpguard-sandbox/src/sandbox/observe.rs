//! Naming what the sandbox refused, whatever the server prints, and making the connects whose
//! address the sandbox enforces (issue 33): a seccomp user-notification filter on `open`,
//! `openat`, `openat2`, `connect` and `bind` whose listener mcpguard holds.
//!
//! It owns the filter, the hand-over of its listener from the child, the reading and wording of
//! the calls, and the connects to the destinations enforced by address.
//!
//! Explaining: for an open, bind, or connect to a port Landlock decides, the observer reads the
//! path or address from the server's memory, answers `SECCOMP_USER_NOTIF_FLAG_CONTINUE`, then
//! compares it with the grants of the run (as Landlock will) and — when they do not cover it —
//! says at the default level, once per path or address, what was refused and the flag or
//! policy key that allows it. It does not decide these calls: Landlock (and the other filters)
//! decide as they would without it. `CONTINUE` has a time-of-check gap (another thread of the
//! server may change the path after the observer read it and before the kernel reads it
//! again), which is why it is used only for the explanation: a server that races it can at
//! worst get a wrong or missing explanation, never a grant.
//!
//! Enforcing: Landlock confines TCP by port, not by address, so the ports of the destinations
//! of `sandbox.connect`/`--sandbox-connect` are left out of its rules, and a connect to one of
//! them is never continued: the observer copies the address once, takes the socket with
//! `pidfd_getfd`, checks that the notification is still pending (both came from the caller),
//! and connects its copy of the socket to its copy of the address when a destination has that
//! address, answering the call with the result; otherwise `EACCES`, named. What the server does
//! to its memory or descriptors afterwards changes nothing.
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

// This module's `unsafe`: the seccomp user-notification ioctls, pidfd_getfd and SCM_RIGHTS (each block with its `// SAFETY:`).
#![allow(unsafe_code)]

use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::Access;
use crate::policy::Destination;

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

/// The calls the filter sends to the listener: connect whenever a destination's address is
/// enforced, and the opens and bind too when denials are explained.
fn observed_calls(grants: &Grants) -> Vec<i64> {
    let mut calls = Vec::new();
    if grants.explain {
        calls.extend([libc::SYS_openat, libc::SYS_openat2, libc::SYS_bind]);
        calls.extend(OPEN);
        // For `sandbox::installers`: a package install started at run time.
        calls.extend([libc::SYS_execve, libc::SYS_execveat]);
    }
    if grants.explain || !grants.by_address.is_empty() {
        calls.push(libc::SYS_connect);
    }
    calls
}

/// The notification filter: the observed calls go to the listener, everything else is allowed
/// (the other filters still apply: the kernel takes the strictest verdict, and a refusal by
/// them is never seen here).
fn program(calls: &[i64]) -> Vec<libc::sock_filter> {
    let i = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    const LD_W_ABS: u32 = 0x20;
    const JEQ_K: u32 = 0x15;
    const RET_K: u32 = 0x06;
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
    /// The destinations whose address the observer enforces (`Request::by_address`): Landlock
    /// does not open their ports, so a connect to one of these ports succeeds only when the
    /// observer makes it, and it makes it only to their addresses.
    pub by_address: Vec<Destination>,
    /// Whether opens and binds are observed, to name what the sandbox refused
    /// (`sandbox.explain_denials`); connects are observed whenever `by_address` is not empty.
    pub explain: bool,
}

impl Grants {
    /// Whether a connect to `port` is the observer's to make.
    fn enforces_port(&self, port: u16) -> bool {
        self.by_address.iter().any(|d| d.port == port)
    }

    /// Whether the run lets the server reach no package registry: Landlock confines TCP ports on
    /// this kernel and neither 443 nor 80 is granted. A port granted for a local page or database
    /// (`--sandbox-connect 127.0.0.1:8080`) does not count: the public registries are on 443. A
    /// private registry on another port is refused too; granting 443 (the registry's destination)
    /// lets the install through to the sandbox's other rules. (Here rather than in `installers`,
    /// which the observer uses, so the two modules do not import each other.)
    pub(crate) fn registry_unreachable(&self) -> bool {
        let web = |p: u16| p == 443 || p == 80;
        self.ports_enforced
            && !self.tcp_connect.iter().any(|p| web(*p))
            && !self.by_address.iter().any(|d| web(d.port))
    }
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
            program: program(&observed_calls(&grants)),
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
    ///
    /// `note` prints at the debug level: a denial the kernel made (Landlock) is noted there at
    /// once and held ([`take_held`]) until the caller learns the server then failed — a tool
    /// call answered with an error, or the server exited unsuccessfully — when it is said at
    /// the default level; a server that handles the denial itself (probing an optional file)
    /// thus makes no noise. A refusal mcpguard makes itself (a connect to an address no
    /// destination has) is said at once.
    pub fn start(
        self: &Arc<Self>,
        say: Arc<dyn Fn(&str) + Send + Sync>,
        note: Arc<dyn Fn(&str) + Send + Sync>,
    ) {
        let Some(parent) = self.parent.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let weak = Arc::downgrade(self);
        let grants = self.grants.clone();
        let said = say.clone();
        if let Err(e) = std::thread::Builder::new()
            .name("sandbox-observer".into())
            .spawn(move || run(parent, weak, grants, say, note))
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
    note: Arc<dyn Fn(&str) + Send + Sync>,
) {
    let ctx = Arc::new(Ctx {
        grants,
        named: Mutex::new(Named::default()),
        say,
        note,
        resolved: Mutex::new(Vec::new()),
        workers: AtomicUsize::new(0),
    });
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
        serve(&listener, server, &ctx);
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

/// What the serving thread and the connect workers share.
struct Ctx {
    grants: Grants,
    named: Mutex<Named>,
    say: Arc<dyn Fn(&str) + Send + Sync>,
    /// Prints at the debug level.
    note: Arc<dyn Fn(&str) + Send + Sync>,
    /// The addresses of the destinations named by a host name, and when they were looked up.
    resolved: Mutex<Vec<(String, std::time::Instant, Vec<IpAddr>)>>,
    /// The connect workers running (`MAX_WORKERS`).
    workers: AtomicUsize,
}

/// The kernel's denials noted at the debug level and not yet said at the default level (one
/// mcpguard process serves one server, so one list per process).
static HELD: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Takes the denials held since the last call, to be said at the default level now that the
/// server failed (see [`Observer::start`]).
pub fn take_held() -> Vec<String> {
    std::mem::take(&mut *HELD.lock().unwrap_or_else(|p| p.into_inner()))
}

/// The keys of every denial named in this process (`open:PATH:WRITE`, `connect:ADDR`,
/// `bind:PORT`), for `sandbox-check --learn` ([`learned_grants`]).
static LEARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn learn(key: &str) {
    LEARNED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(key.to_string());
}

/// The grants a run was refused, folded for a person to pass on.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Learned {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub connect: Vec<SocketAddr>,
    pub bind: Vec<u16>,
}

impl Learned {
    pub fn is_empty(&self) -> bool {
        self.read.is_empty()
            && self.write.is_empty()
            && self.connect.is_empty()
            && self.bind.is_empty()
    }

    /// The command-line flags (a bind port has none: it is a policy key only).
    pub fn flags(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        out.extend(
            self.read
                .iter()
                .map(|p| ("--sandbox-read", p.display().to_string())),
        );
        out.extend(
            self.write
                .iter()
                .map(|p| ("--sandbox-write", p.display().to_string())),
        );
        out.extend(
            self.connect
                .iter()
                .map(|a| ("--sandbox-connect", a.to_string())),
        );
        out
    }

    /// The `[sandbox]` section that grants the same.
    pub fn toml(&self) -> String {
        let list = |v: Vec<String>| {
            v.iter()
                .map(|s| format!("{s:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = String::from("[sandbox]\n");
        if !self.read.is_empty() {
            let v = self.read.iter().map(|p| p.display().to_string()).collect();
            out.push_str(&format!("read = [{}]\n", list(v)));
        }
        if !self.write.is_empty() {
            let v = self.write.iter().map(|p| p.display().to_string()).collect();
            out.push_str(&format!("read_write = [{}]\n", list(v)));
        }
        if !self.connect.is_empty() {
            let v = self.connect.iter().map(|a| a.to_string()).collect();
            out.push_str(&format!("connect = [{}]\n", list(v)));
        }
        if !self.bind.is_empty() {
            let v: Vec<String> = self.bind.iter().map(u16::to_string).collect();
            out.push_str(&format!("tcp_bind = [{}]\n", v.join(", ")));
        }
        out
    }
}

/// The grants every denial named in this process asks for: a written or created file's folder
/// (editors and databases create files beside it); a file read, or its folder when two or more
/// files of one folder were read; nothing already inside a folder granted for writing; each
/// address and bind port once. Denials of /proc entries are not grantable and are left out.
pub fn learned_grants() -> Learned {
    let keys = LEARNED.lock().unwrap_or_else(|p| p.into_inner()).clone();
    fold(&keys)
}

fn fold(keys: &[String]) -> Learned {
    let mut reads: Vec<PathBuf> = Vec::new();
    let mut out = Learned::default();
    for key in keys {
        if let Some(rest) = key.strip_prefix("open:") {
            let Some((path, write)) = rest.rsplit_once(':') else {
                continue;
            };
            let path = PathBuf::from(path);
            if write == "true" {
                let dir = path.parent().map_or(path.clone(), Path::to_path_buf);
                if !out.write.contains(&dir) {
                    out.write.push(dir);
                }
            } else if !reads.contains(&path) {
                reads.push(path);
            }
        } else if let Some(addr) = key.strip_prefix("connect:") {
            if let Ok(a) = addr.parse::<SocketAddr>() {
                if !out.connect.contains(&a) {
                    out.connect.push(a);
                }
            }
        } else if let Some(port) = key.strip_prefix("bind:") {
            if let Ok(p) = port.parse::<u16>() {
                if !out.bind.contains(&p) {
                    out.bind.push(p);
                }
            }
        }
    }
    // Folders that hold a write grant's folder are kept as they are; a folder inside another
    // write folder goes.
    let writes = out.write.clone();
    out.write
        .retain(|w| !writes.iter().any(|o| o != w && w.starts_with(o)));
    let reads: Vec<PathBuf> = reads
        .into_iter()
        .filter(|r| !out.write.iter().any(|w| r.starts_with(w)))
        .collect();
    for r in &reads {
        let parent = r.parent().map(Path::to_path_buf);
        let shared = parent
            .as_ref()
            .is_some_and(|p| reads.iter().filter(|o| o.parent() == Some(p)).count() >= 2);
        let grant = if shared {
            parent.unwrap_or_else(|| r.clone())
        } else {
            r.clone()
        };
        if !out.read.contains(&grant) {
            out.read.push(grant);
        }
    }
    out.read.sort();
    out.write.sort();
    out
}

impl Ctx {
    /// Notes a denial the kernel made once under `key`, at the debug level, and holds it.
    fn hold(&self, key: String, line: &str) {
        // Kept once per key and at most `MAX_NAMED` keys, like the lines: a server looping over
        // ungranted paths cannot grow mcpguard's memory.
        let first = self
            .named
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .first(key.clone(), &*self.say);
        if first {
            learn(&key);
            (self.note)(line);
            HELD.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(line.to_string());
        }
    }

    /// Names `line` once under `key`.
    fn name(&self, key: String, line: &str) {
        let first = self
            .named
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .first(key.clone(), &*self.say);
        if first {
            learn(&key);
            (self.say)(line);
        }
    }
}

/// At most this many connects wait in workers at once (a blocking connect, or one whose
/// destination is a host name to look up); beyond it the serving thread makes them itself,
/// which delays the server's other observed calls but never answers one wrongly.
const MAX_WORKERS: usize = 16;

/// How long a host name's addresses are used before a connect to another address looks the
/// name up again.
const RESOLVE_AGAIN_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

/// Answers every notification of one listener until the server and its descendants are gone
/// (the listener hangs up): a connect to a port whose destinations are enforced by address is
/// made by mcpguard ([`connect_for`]); every other call continues to the kernel (CONTINUE), and
/// those the grants do not cover are named.
fn serve(listener: &OwnedFd, server: u32, ctx: &Arc<Ctx>) {
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
        // Read what the call names before answering.
        let call = read_call(&n);
        if let Some(Call::Net {
            bind: false,
            addr,
            fd: sock_fd,
            raw,
        }) = &call
        {
            if ctx.grants.enforces_port(addr.port()) {
                if let Some(sock) = tcp_socket(n.pid, *sock_fd) {
                    // The copy of the address and the socket were taken from the caller; the
                    // notification still being valid proves the caller was the thread that
                    // made this call (not a reused thread id), so both are its own. From here
                    // on the server cannot change what is connected: mcpguard connects its
                    // copy of the socket to its copy of the address.
                    if !id_valid(fd, n.id) {
                        continue;
                    }
                    let job = ConnectJob {
                        id: n.id,
                        addr: *addr,
                        raw: raw.clone(),
                        sock,
                    };
                    dispatch(listener, job, ctx);
                    continue;
                }
                // Not a TCP socket (or no longer there): the kernel decides as for any call,
                // and Landlock refuses TCP on this port, which it does not open.
            }
        }
        let valid = id_valid(fd, n.id);
        // The one call refused here: a package install a descendant starts while the run
        // cannot reach a registry (`sandbox::installers`, which says why a race cannot loosen it).
        let installer = match &call {
            // The server's own exec (a `uvx` or `npx` entry) is its launch shape, which
            // `sandbox::explain` speaks of; only what it starts later is judged here.
            Some(Call::Exec { path, argv }) if valid => super::installers::recognise(path, argv)
                .filter(|_| tgid_of(n.pid).is_some_and(|p| p != server))
                .map(|i| {
                    let refuse = i.installs && ctx.grants.registry_unreachable();
                    (i, refuse)
                }),
            _ => None,
        };
        if installer.as_ref().is_some_and(|(_, refuse)| *refuse) {
            answer(fd, n.id, 0, libc::EACCES, 0);
        } else {
            answer(fd, n.id, 0, 0, FLAG_CONTINUE);
        }
        // The comparison with the grants runs after the call went on, so the server waits
        // only for the read of its arguments. (A file the call creates exists by then only
        // if it was allowed, and then it is covered.)
        let refused = if valid {
            call.and_then(|c| refusal(&c, n.pid, server, &ctx.grants))
        } else {
            None
        };
        if let Some((key, line)) = refused {
            ctx.hold(key, &line);
        }
        if let Some((i, refuse)) = installer {
            let line = if refuse {
                Some(i.refused(n.pid))
            } else if !i.installs && ctx.grants.registry_unreachable() {
                Some(i.named(n.pid))
            } else {
                None
            };
            if let Some(line) = line {
                ctx.name(format!("exec {}", i.shown), &line);
            }
        }
    }
}

/// Whether notification `id` is still pending (its caller alive and waiting).
fn id_valid(listener: RawFd, id: u64) -> bool {
    // SAFETY: the ioctl reads one live u64.
    unsafe { libc::ioctl(listener, IOCTL_ID_VALID as _, &id as *const u64) == 0 }
}

/// Answers notification `id`: the call returns `val`, or fails with `errno` (positive), or
/// continues to the kernel with `FLAG_CONTINUE`.
fn answer(listener: RawFd, id: u64, val: i64, errno: i32, flags: u32) {
    let resp = Resp {
        id,
        val,
        error: -errno,
        flags,
    };
    // SAFETY: the ioctl reads the live response. A failure means the caller is gone (killed
    // or interrupted by a signal, after which the call is restarted and notified again).
    unsafe { libc::ioctl(listener, IOCTL_SEND as _, &resp as *const Resp) };
}

/// A connect mcpguard makes for the server.
struct ConnectJob {
    id: u64,
    addr: SocketAddr,
    /// The address as the server wrote it (read once), which is what is connected.
    raw: Vec<u8>,
    /// mcpguard's copy of the server's socket (`pidfd_getfd`): the same socket.
    sock: OwnedFd,
}

/// Makes the connect here when it cannot block (a nonblocking socket answers at once, with
/// EINPROGRESS while the handshake goes on, exactly as the server's own connect would) and
/// no host name must be looked up; otherwise in a worker thread, so that the server's other
/// observed calls do not wait for it.
fn dispatch(listener: &OwnedFd, job: ConnectJob, ctx: &Arc<Ctx>) {
    let quick = nonblocking(&job.sock) && !ctx.needs_lookup(job.addr.port());
    let mut job = Some(job);
    if !quick && ctx.workers.fetch_add(1, Ordering::SeqCst) < MAX_WORKERS {
        if let Ok(own) = listener.try_clone() {
            // The job goes to the worker through a slot, so that a thread that cannot be
            // started leaves it here to be made in this thread.
            let slot = Arc::new(Mutex::new(job.take()));
            let theirs = slot.clone();
            let worker_ctx = ctx.clone();
            let spawned = std::thread::Builder::new()
                .name("sandbox-connect".into())
                .spawn(move || {
                    let job = theirs.lock().unwrap_or_else(|p| p.into_inner()).take();
                    if let Some(job) = job {
                        connect_for(own.as_raw_fd(), job, &worker_ctx);
                    }
                    worker_ctx.workers.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_ok() {
                return;
            }
            job = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
        }
        ctx.workers.fetch_sub(1, Ordering::SeqCst);
    } else if !quick {
        ctx.workers.fetch_sub(1, Ordering::SeqCst);
    }
    if let Some(job) = job {
        connect_for(listener.as_raw_fd(), job, ctx);
    }
}

/// Decides a connect to an address-enforced port and answers it: refused with EACCES (as
/// Landlock refuses a port) and named when no destination of that port has this address;
/// otherwise connected by mcpguard, the server's call returning what mcpguard's returned.
fn connect_for(listener: RawFd, job: ConnectJob, ctx: &Ctx) {
    let ip = canonical(job.addr.ip());
    let port = job.addr.port();
    if !ctx.allows(ip, port) {
        answer(listener, job.id, 0, libc::EACCES, 0);
        let shown = SocketAddr::new(ip, port);
        let granted: Vec<String> = ctx
            .grants
            .by_address
            .iter()
            .filter(|d| d.port == port)
            .map(|d| d.to_string())
            .collect();
        ctx.name(
            format!("connect:{shown}"),
            &format!(
                "sandbox denied connect to {shown} (TCP): port {port} is granted only for {}; allow it with --sandbox-connect {shown} or sandbox.connect = [\"{shown}\"] in the policy",
                granted.join(", ")
            ),
        );
        return;
    }
    // SAFETY: connect reads `raw`, which is live and as long as the length given.
    let r = unsafe {
        libc::connect(
            job.sock.as_raw_fd(),
            job.raw.as_ptr().cast(),
            job.raw.len() as libc::socklen_t,
        )
    };
    let errno = if r == 0 {
        0
    } else {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO)
    };
    answer(listener, job.id, 0, errno, 0);
}

impl Ctx {
    /// Whether a destination looked up by name has this port.
    fn needs_lookup(&self, port: u16) -> bool {
        self.grants
            .by_address
            .iter()
            .any(|d| d.port == port && d.needs_dns())
    }

    /// Whether a destination of `port` has address `ip`: an address as written, `localhost`
    /// as 127.0.0.1 and ::1, a host name as mcpguard's resolver answers now (looked up
    /// again when the address is not among its last answer and that answer is older than
    /// `RESOLVE_AGAIN_AFTER`).
    fn allows(&self, ip: IpAddr, port: u16) -> bool {
        let mut names = Vec::new();
        for d in self.grants.by_address.iter().filter(|d| d.port == port) {
            if let Ok(a) = d.host.parse::<IpAddr>() {
                if canonical(a) == ip {
                    return true;
                }
            } else if d.host.eq_ignore_ascii_case("localhost") {
                if ip == IpAddr::from([127, 0, 0, 1]) || ip == IpAddr::from(Ipv6Addr::LOCALHOST) {
                    return true;
                }
            } else {
                names.push(d);
            }
        }
        names.iter().any(|d| self.resolves_to(d, ip))
    }

    fn resolves_to(&self, d: &Destination, ip: IpAddr) -> bool {
        let key = d.host.to_ascii_lowercase();
        {
            let cache = self.resolved.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((_, at, addrs)) = cache.iter().find(|(h, _, _)| *h == key) {
                if addrs.contains(&ip) || at.elapsed() < RESOLVE_AGAIN_AFTER {
                    return addrs.contains(&ip);
                }
            }
        }
        // Looked up without the lock held: getaddrinfo may take seconds.
        let addrs: Vec<IpAddr> = match (d.host.as_str(), d.port).to_socket_addrs() {
            Ok(it) => it.map(|a| canonical(a.ip())).collect(),
            Err(_) => Vec::new(),
        };
        let found = addrs.contains(&ip);
        let mut cache = self.resolved.lock().unwrap_or_else(|p| p.into_inner());
        cache.retain(|(h, _, _)| *h != key);
        cache.push((key, std::time::Instant::now(), addrs));
        found
    }
}

/// An IPv4 address written as IPv6 (`::ffff:127.0.0.1`, on a dual-stack socket) is the IPv4
/// address it maps.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// Whether the socket's file is nonblocking (the flag is the file's, shared with the server).
fn nonblocking(sock: &OwnedFd) -> bool {
    // SAFETY: fcntl(F_GETFL) takes integers only.
    let fl = unsafe { libc::fcntl(sock.as_raw_fd(), libc::F_GETFL) };
    fl >= 0 && fl & libc::O_NONBLOCK != 0
}

/// mcpguard's copy of descriptor `fd` of thread `tid`, when it is an internet TCP socket
/// (TCP or MPTCP; the seccomp filters refuse other stream protocols).
fn tcp_socket(tid: u32, fd: i32) -> Option<OwnedFd> {
    let sock = fd_of(tid, fd)?;
    let opt = |name: libc::c_int| -> Option<libc::c_int> {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: getsockopt writes one int and its length into live memory.
        let r = unsafe {
            libc::getsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                name,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        (r == 0).then_some(v)
    };
    let domain = opt(libc::SO_DOMAIN)?;
    let ty = opt(libc::SO_TYPE)?;
    let proto = opt(libc::SO_PROTOCOL)?;
    let tcp = (domain == libc::AF_INET || domain == libc::AF_INET6)
        && ty == libc::SOCK_STREAM
        && (proto == libc::IPPROTO_TCP || proto == IPPROTO_MPTCP);
    tcp.then_some(sock)
}

/// `IPPROTO_MPTCP` (Linux 5.6).
const IPPROTO_MPTCP: libc::c_int = 262;

/// `PIDFD_THREAD` (Linux 6.9): a pidfd for one thread, whose descriptor table may differ from
/// its process's (after `unshare(CLONE_FILES)`).
const PIDFD_THREAD: libc::c_uint = libc::O_EXCL as libc::c_uint;

/// A copy of descriptor `fd` of thread `tid` (`pidfd_getfd`): of the thread itself where the
/// kernel offers thread pidfds, else of its process.
fn fd_of(tid: u32, fd: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes integers and returns a new descriptor or -1.
    let mut pidfd =
        unsafe { libc::syscall(libc::SYS_pidfd_open, tid as libc::pid_t, PIDFD_THREAD) };
    if pidfd < 0 {
        let tgid = tgid_of(tid)?;
        // SAFETY: as above.
        pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, tgid as libc::pid_t, 0u32) };
    }
    if pidfd < 0 {
        return None;
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    // SAFETY: pidfd_getfd takes integers and returns a new descriptor or -1.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0u32) };
    if got < 0 {
        return None;
    }
    // SAFETY: as above.
    Some(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
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
        addr: SocketAddr,
        fd: i32,
        /// The address's bytes as read (what mcpguard connects, when the connect is its).
        raw: Vec<u8>,
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
            raw,
        });
    }
    None
}

/// An internet socket address from its bytes (`sockaddr_in` or `sockaddr_in6`).
fn sockaddr(raw: &[u8]) -> Option<SocketAddr> {
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

/// `RESOLVE_IN_ROOT` and `RESOLVE_NO_MAGICLINKS` of `openat2` (Linux 5.6).
const RESOLVE_IN_ROOT: u64 = 0x10;
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;

/// The real path of `path` as thread `tid` sees it: resolved with `openat2(RESOLVE_IN_ROOT)`
/// under `/proc/TID/root` (its root, in its mount namespace), so that a symlink, a mount or a
/// file that exists only in the server's namespace (its private TMPDIR's tmpfs) resolves as
/// it does for the server; the path printed is the kernel's name of what it found, which for
/// a mount of the server's namespace is its path there. Paths under /proc stay resolved in
/// mcpguard's own view, where the caller's `/proc/self` was already made its pid.
fn canonical_in(tid: u32, path: &Path) -> io::Result<PathBuf> {
    if path.starts_with("/proc") {
        return std::fs::canonicalize(path);
    }
    let root = std::ffi::CString::new(format!("/proc/{tid}/root"))
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: open reads the NUL-terminated path and returns a new descriptor or -1.
    let dir = unsafe {
        libc::open(
            root.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if dir < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    let dir = unsafe { OwnedFd::from_raw_fd(dir) };
    // struct open_how { u64 flags; u64 mode; u64 resolve; }.
    let how: [u64; 3] = [
        (libc::O_PATH | libc::O_CLOEXEC) as u64,
        0,
        RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    ];
    // SAFETY: openat2 reads the NUL-terminated path and the live open_how of the size given.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            name.as_ptr(),
            how.as_ptr(),
            std::mem::size_of_val(&how),
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
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
        Call::Net { bind, addr, fd, .. } => net_refusal(*bind, *addr, *fd, tid, grants),
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
    // Resolved as the server sees it: its private TMPDIR and read-only pins exist only in its
    // mount namespace.
    let real = match canonical_in(tid, &path) {
        Ok(real) => real,
        Err(_) if write => {
            let lex = lexical(&path);
            let dir = canonical_in(tid, lex.parent()?).ok()?;
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
    addr: SocketAddr,
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
    let sock = fd_of(tid, fd)?;
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

    /// A port granted for a local page or database leaves the registry out of reach; 443 or 80
    /// does not; without Landlock's port rules nothing is refused.
    #[test]
    fn only_a_registry_port_makes_an_install_worth_trying() {
        let g = |ports: &[u16], enforced| Grants {
            tcp_connect: ports.to_vec(),
            ports_enforced: enforced,
            ..Default::default()
        };
        assert!(g(&[], true).registry_unreachable());
        assert!(g(&[8080, 5432], true).registry_unreachable());
        assert!(!g(&[443], true).registry_unreachable());
        assert!(!g(&[80], true).registry_unreachable());
        assert!(!g(&[], false).registry_unreachable());
    }

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
        let p = program(&observed_calls(&Grants {
            explain: true,
            ..Grants::default()
        }));
        // The last two instructions are ALLOW and USER_NOTIF, and each comparison jumps to
        // the last one.
        let n = p.len();
        assert_eq!(p[n - 1].k, RET_USER_NOTIF);
        assert_eq!(p[n - 2].k, RET_ALLOW);
        for (k, ins) in p.iter().enumerate().skip(4).take(n - 6) {
            assert_eq!(k + 1 + ins.jt as usize, n - 1, "instruction {k}");
        }
    }

    #[test]
    fn without_explanations_only_connect_is_observed_and_only_for_enforced_addresses() {
        let dest = Destination::parse("127.0.0.1:5432").unwrap();
        let quiet = Grants {
            explain: false,
            by_address: vec![dest.clone()],
            ..Grants::default()
        };
        assert_eq!(observed_calls(&quiet), vec![libc::SYS_connect]);
        let none = Grants {
            explain: false,
            ..Grants::default()
        };
        assert!(observed_calls(&none).is_empty());
        let all = observed_calls(&Grants {
            explain: true,
            ..Grants::default()
        });
        for nr in [
            libc::SYS_openat,
            libc::SYS_openat2,
            libc::SYS_bind,
            libc::SYS_connect,
        ] {
            assert!(all.contains(&nr), "{nr}");
        }
    }

    #[test]
    fn a_destination_allows_its_address_on_its_port_only() {
        let ctx = Ctx {
            grants: Grants {
                by_address: vec![
                    Destination::parse("127.0.0.1:5432").unwrap(),
                    Destination::parse("localhost:8080").unwrap(),
                ],
                ..Grants::default()
            },
            named: Mutex::new(Named::default()),
            say: Arc::new(|_: &str| {}),
            note: Arc::new(|_: &str| {}),
            resolved: Mutex::new(Vec::new()),
            workers: AtomicUsize::new(0),
        };
        let ip = |s: &str| canonical(s.parse::<IpAddr>().unwrap());
        assert!(ctx.allows(ip("127.0.0.1"), 5432));
        // The IPv4-mapped form a dual-stack socket uses is the same address.
        assert!(ctx.allows(ip("::ffff:127.0.0.1"), 5432));
        assert!(!ctx.allows(ip("127.0.0.2"), 5432));
        assert!(!ctx.allows(ip("::1"), 5432));
        assert!(ctx.allows(ip("::1"), 8080) && ctx.allows(ip("127.0.0.1"), 8080));
        assert!(!ctx.allows(ip("10.0.0.1"), 8080));
        assert!(ctx.grants.enforces_port(5432) && !ctx.grants.enforces_port(5433));
    }

    #[test]
    fn learned_denials_fold_to_folders_sensibly() {
        let keys: Vec<String> = [
            "open:/data/notes/a.md:false",
            "open:/data/notes/b.md:false",
            "open:/etc/app.conf:false",
            "open:/srv/db/app.db:true",
            "open:/srv/db/app.db-journal:true",
            "open:/srv/db/app.db:false",
            "connect:127.0.0.1:5432",
            "connect:127.0.0.1:5432",
            "bind:8080",
            "proc:cgroup",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let l = fold(&keys);
        assert_eq!(
            l.read,
            [PathBuf::from("/data/notes"), PathBuf::from("/etc/app.conf")]
        );
        assert_eq!(l.write, [PathBuf::from("/srv/db")]);
        assert_eq!(l.connect, ["127.0.0.1:5432".parse::<SocketAddr>().unwrap()]);
        assert_eq!(l.bind, [8080]);
        let toml = l.toml();
        assert!(
            toml.contains("read = [\"/data/notes\", \"/etc/app.conf\"]"),
            "{toml}"
        );
        assert!(toml.contains("read_write = [\"/srv/db\"]"), "{toml}");
        assert!(toml.contains("connect = [\"127.0.0.1:5432\"]"), "{toml}");
        assert!(
            crate::policy::parse(&toml, "learned.toml").is_ok(),
            "{toml}"
        );
    }
}
