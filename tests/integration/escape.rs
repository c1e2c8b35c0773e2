//! The attacker's probe suite: ways out of the sandbox that Landlock has no hook for
//! (REFERENCE.md §6). Each class tries one escape with the probes of `tests/probes/escape.c`,
//! as root and as uid 65534, once with the sandbox off (the escape must work, or the sandboxed
//! half proves nothing) and once under the default profile (it must not). Wherever the effect
//! can be seen from outside, the test checks the effect itself: the bytes a listener received,
//! the file's mode, the victim's nice value, the process still alive.
//!
//! Section 21 proves the keys of `[sandbox]` that let something through (`allow_unix_sockets`,
//! `allow_other_sockets`, `scope_abstract_unix_sockets`, the limits, `preset`): both halves run
//! under the sandbox, once with the permissive value (the attempt must work) and once with the
//! strict one (it must not, and the report must say `[enforced]`).
//! Section 22 proves the report's remaining enforced rules (docs/threat-model.md's table of
//! rule ids and tests): TCP bind ports, cross-process access and io_uring, set-user-id
//! programs, `--sandbox-env`.
//!
//! Every case prints one `ESCAPE-TABLE | class | case | who | unsandboxed: .. | sandboxed: .. |`
//! line (see them with `--nocapture`). A test runs all its cases before it fails, and then
//! lists every escape it saw, with the probe's output.
//!
//! The unprivileged runs: when the tests run as root, mcpguard itself is started as uid/gid
//! 65534 with no supplementary groups (`setgroups`, `setgid`, `setuid` before exec). The
//! probes and a hard link (or copy) of mcpguard live in a fresh 0755 directory under /tmp,
//! because the build directory may not be readable by others; each test's scratch world is
//! there too, its HOME and writable directories owned by 65534. Not running as root, the tests
//! run as the current user only and say so.

use std::ffi::{CString, OsStr};
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::support::{mcpguard, process_alive, run_bounded, wait_gone, Peer};

const NOBODY: u32 = 65534;

/// How long a descendant that should die with the sandbox may take to go.
const DEATH_BOUND: Duration = Duration::from_secs(3);

fn am_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Root,
    /// An ordinary user: 65534 when the tests run as root, else the current user.
    User {
        uid: u32,
        gid: u32,
    },
}

impl Who {
    fn name(self) -> String {
        match self {
            Who::Root => "root".into(),
            Who::User { uid, .. } => format!("uid {uid}"),
        }
    }

    fn uid(self) -> u32 {
        match self {
            Who::Root => 0,
            Who::User { uid, .. } => uid,
        }
    }

    fn gid(self) -> u32 {
        match self {
            Who::Root => 0,
            Who::User { gid, .. } => gid,
        }
    }

    /// Whether processes for this user must switch uid (the tests run as root).
    fn switches(self) -> bool {
        matches!(self, Who::User { .. }) && am_root()
    }

    /// Makes `cmd` run as this user.
    fn apply(self, cmd: &mut Command) -> &mut Command {
        if self.switches() {
            let (uid, gid) = (self.uid(), self.gid());
            // SAFETY: the closure runs in the forked child before exec and makes only the
            // async-signal-safe system calls setgroups, setgid and setuid.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setgroups(0, std::ptr::null()) != 0
                        || libc::setgid(gid) != 0
                        || libc::setuid(uid) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        cmd
    }

    /// Gives `path` to this user (when the tests run as root).
    fn own(self, path: &Path) {
        if am_root() && self != Who::Root {
            std::os::unix::fs::chown(path, Some(self.uid()), Some(self.gid()))
                .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
        }
    }
}

/// Root and uid 65534 when the tests run as root; otherwise the current user alone.
fn everyone() -> Vec<Who> {
    if am_root() {
        vec![
            Who::Root,
            Who::User {
                uid: NOBODY,
                gid: NOBODY,
            },
        ]
    } else {
        println!("not running as root: the root half of every escape test is skipped");
        // SAFETY: getuid and getgid have no preconditions.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        vec![Who::User { uid, gid }]
    }
}

/// The compiled probes and a copy of mcpguard, in a directory every user can traverse.
struct Bins {
    /// The static probe (dynamic if static linking is impossible here).
    escape: PathBuf,
    /// The same program linked dynamically, for `ld.so FILE`.
    dynamic: PathBuf,
    /// mcpguard, reachable by uid 65534.
    guard: PathBuf,
    static_link: bool,
}

fn bins() -> &'static Bins {
    static BINS: OnceLock<Bins> = OnceLock::new();
    BINS.get_or_init(build_bins)
}

const BINS_PREFIX: &str = "mcpguard-escape-bins-";

static BINS_DIR: OnceLock<PathBuf> = OnceLock::new();

extern "C" fn remove_bins() {
    if let Some(d) = BINS_DIR.get() {
        let _ = std::fs::remove_dir_all(d);
    }
}

fn build_bins() -> Bins {
    // Directories of earlier runs whose test process is gone.
    if let Ok(entries) = std::fs::read_dir("/tmp") {
        for e in entries.flatten() {
            let name = e.file_name();
            if !name.to_string_lossy().starts_with(BINS_PREFIX) {
                continue;
            }
            let owner = std::fs::read_to_string(e.path().join("owner.pid"))
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok());
            let mine = e
                .metadata()
                .map(|m| {
                    // SAFETY: geteuid has no preconditions.
                    m.uid() == unsafe { libc::geteuid() }
                })
                .unwrap_or(false);
            if mine && owner.is_some_and(|p| !process_alive(p)) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let dir = tempfile::Builder::new()
        .prefix(BINS_PREFIX)
        .tempdir_in("/tmp")
        .expect("a directory under /tmp")
        .keep();
    // Removed when the test binary exits (a crashed run's is removed by the next run, above).
    if BINS_DIR.set(dir.clone()).is_ok() {
        // SAFETY: atexit with a function that takes no arguments and never unwinds.
        unsafe { libc::atexit(remove_bins) };
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.join("owner.pid"), std::process::id().to_string()).unwrap();
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/probes/escape.c");
    let gcc = |out: &Path, extra: &[&str]| -> Output {
        Command::new("gcc")
            .args(["-O1", "-Wall", "-o"])
            .arg(out)
            .arg(&src)
            .args(extra)
            .output()
            .unwrap_or_else(|e| panic!("gcc is needed to build the escape probes: {e}"))
    };
    let escape = bin.join("escape");
    let out = gcc(&escape, &["-static"]);
    let static_link = out.status.success();
    if !static_link {
        println!(
            "gcc -static failed (no static libc?), the probe is linked dynamically: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = gcc(&escape, &[]);
        assert!(out.status.success(), "gcc: {}", text(&out.stderr));
    }
    let dynamic = bin.join("escape-dyn");
    let out = gcc(&dynamic, &[]);
    assert!(out.status.success(), "gcc: {}", text(&out.stderr));
    let guard_dir = dir.join("guard");
    std::fs::create_dir(&guard_dir).unwrap();
    std::fs::set_permissions(&guard_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let guard = guard_dir.join("mcpguard");
    if std::fs::hard_link(mcpguard(), &guard).is_err() {
        std::fs::copy(mcpguard(), &guard).unwrap();
        std::fs::set_permissions(&guard, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Bins {
        escape,
        dynamic,
        guard,
        static_link,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Half {
    Sandboxed,
    Off,
}

/// A scratch world for one user: a HOME it owns, and two policies (the default profile, and
/// the sandbox off), in a directory under /tmp that every user can traverse.
struct World {
    dir: tempfile::TempDir,
    who: Who,
    home: PathBuf,
    sandboxed: PathBuf,
    off: PathBuf,
}

impl World {
    fn new(who: Who) -> World {
        crate::sandbox::require_landlock();
        let dir = tempfile::Builder::new()
            .prefix("mcpguard-escape-")
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        who.own(&home);
        let sandboxed = dir.path().join("sandboxed.toml");
        std::fs::write(&sandboxed, "[sandbox]\nmode = \"require\"\n").unwrap();
        let off = dir.path().join("off.toml");
        std::fs::write(&off, "[sandbox]\nmode = \"off\"\n").unwrap();
        for p in [&sandboxed, &off] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        World {
            dir,
            who,
            home,
            sandboxed,
            off,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A directory of this world owned by its user.
    fn owned_dir(&self, name: &str) -> PathBuf {
        let d = self.path(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        self.who.own(&d);
        d
    }

    fn policy(&self, half: Half) -> &Path {
        match half {
            Half::Sandboxed => &self.sandboxed,
            Half::Off => &self.off,
        }
    }

    /// `mcpguard ARGS` as this world's user, with HOME in the world.
    fn guard(&self) -> Command {
        let program = if self.who.switches() {
            bins().guard.clone()
        } else {
            mcpguard()
        };
        let mut cmd = Command::new(program);
        self.who.apply(&mut cmd);
        cmd.env("HOME", &self.home).current_dir(self.dir.path());
        cmd
    }

    /// `mcpguard sandbox-check --policy P OPTS -- escape PROBE...`, P the policy of `half`.
    fn check_cmd<S: AsRef<OsStr>>(&self, half: Half, opts: &[S], probe: &[S]) -> Command {
        self.check_cmd_at(self.policy(half), opts, probe)
    }

    /// `mcpguard sandbox-check --policy POLICY OPTS -- escape PROBE...`.
    fn check_cmd_at<S: AsRef<OsStr>>(&self, policy: &Path, opts: &[S], probe: &[S]) -> Command {
        let mut cmd = self.guard();
        cmd.arg("sandbox-check")
            .arg("--policy")
            .arg(policy)
            .args(opts)
            .arg("--")
            .arg(&bins().escape)
            .args(probe);
        cmd
    }

    fn check<S: AsRef<OsStr>>(&self, half: Half, opts: &[S], probe: &[S]) -> Run {
        let name = probe
            .first()
            .map(|p| p.as_ref().to_string_lossy().into_owned())
            .unwrap_or_default();
        Run::new(&name, run_bounded(&mut self.check_cmd(half, opts, probe)))
    }

    /// The probe started directly as this world's user, the way a host starts a server without
    /// mcpguard. The baseline for the classes mcpguard closes in every spawn, sandboxed or not
    /// (inherited descriptors, the controlling terminal): `sandbox.mode = "off"` no longer
    /// shows the escape there, a host that runs the server itself does.
    fn direct_cmd<S: AsRef<OsStr>>(&self, probe: &[S]) -> Command {
        let mut cmd = Command::new(&bins().escape);
        self.who.apply(&mut cmd);
        cmd.args(probe)
            .env("HOME", &self.home)
            .current_dir(self.dir.path());
        cmd
    }

    /// `check_cmd` for the sandboxed half, `direct_cmd` for the baseline.
    fn sandboxed_or_direct<S: AsRef<OsStr>>(&self, half: Half, probe: &[S]) -> Command {
        match half {
            Half::Sandboxed => self.check_cmd(half, &[], probe),
            Half::Off => self.direct_cmd(probe),
        }
    }

    /// Runs a probe helper directly (no mcpguard) as this world's user.
    fn helper(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(&bins().escape);
        self.who.apply(&mut cmd);
        cmd.args(args).current_dir(self.dir.path());
        run_bounded(&mut cmd)
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// One run of a probe through `mcpguard sandbox-check`.
struct Run {
    name: String,
    status: String,
    stdout: String,
    stderr: String,
}

impl Run {
    fn new(name: &str, out: Output) -> Run {
        Run {
            name: name.into(),
            status: format!("{:?}", out.status),
            stdout: text(&out.stdout),
            stderr: text(&out.stderr),
        }
    }

    /// Whether the probe started (so that its failure is the sandbox's doing).
    fn ran(&self) -> bool {
        self.stdout.contains(&format!("probe {} start", self.name))
    }

    fn says_escaped(&self) -> bool {
        self.stdout.lines().any(|l| l.starts_with("ESCAPED:"))
    }

    /// The sandbox-check report: everything before the probe's first line.
    fn report(&self) -> &str {
        let marker = format!("probe {} start", self.name);
        self.stdout
            .find(&marker)
            .map_or(&self.stdout[..], |i| &self.stdout[..i])
    }

    /// The probe's own lines, mcpguard's stderr and the exit status.
    fn brief(&self) -> String {
        let marker = format!("probe {} start", self.name);
        let probe = self
            .stdout
            .find(&marker)
            .map_or("(the probe never started)", |i| &self.stdout[i..]);
        format!(
            "mcpguard {}; probe output:\n{}\nstderr:\n{}",
            self.status,
            probe.trim_end(),
            self.stderr.trim_end()
        )
    }
}

/// What one half of a case showed.
struct Outcome {
    escaped: bool,
    ran: bool,
    detail: String,
}

impl Outcome {
    /// `escaped`: the effect the test observed; `run`: the probe's run.
    fn of(run: &Run, escaped: bool, observed: &str) -> Outcome {
        Outcome {
            escaped,
            ran: run.ran(),
            detail: format!("observed: {observed}\n{}", run.brief()),
        }
    }
}

/// The cases of one test; fails at the end with every escape (and every broken probe) seen.
struct Tally {
    class: &'static str,
    failures: Vec<String>,
    report: Option<String>,
}

impl Tally {
    fn new(class: &'static str) -> Tally {
        Tally {
            class,
            failures: Vec::new(),
            report: None,
        }
    }

    fn keep_report(&mut self, run: &Run) {
        self.keep_report_text(run.report());
    }

    fn keep_report_text(&mut self, report: &str) {
        if self.report.is_none() && !report.is_empty() {
            self.report = Some(report.to_string());
        }
    }

    /// Unsandboxed against sandboxed: the escape must work without the sandbox (or the
    /// sandboxed half proves nothing) and not with it.
    fn judge(&mut self, case: &str, who: Who, off: Outcome, sandboxed: Outcome) {
        self.weigh(case, who, ("unsandboxed", off), ("sandboxed", sandboxed));
    }

    /// The table line and the failures of one pair of runs: the escape must work in the `open`
    /// run (or the `shut` run proves nothing), and the `shut` run must have run and not escaped.
    fn weigh(
        &mut self,
        case: &str,
        who: Who,
        (open_label, open): (&str, Outcome),
        (shut_label, shut): (&str, Outcome),
    ) {
        let word = |o: &Outcome| {
            if o.escaped {
                "ESCAPES"
            } else if o.ran {
                "stopped"
            } else {
                "did not run"
            }
        };
        println!(
            "ESCAPE-TABLE | {} | {case} | {} | {open_label}: {} | {shut_label}: {} |",
            self.class,
            who.name(),
            if open.escaped { "works" } else { word(&open) },
            word(&shut)
        );
        if !open.escaped {
            self.failures.push(format!(
                "[{case}, {}] {open_label}, the escape did not work, so the {shut_label} half \
                 proves nothing:\n{}",
                who.name(),
                open.detail
            ));
        }
        if shut.escaped {
            self.failures.push(format!(
                "[{case}, {}] ESCAPED ({shut_label}):\n{}",
                who.name(),
                shut.detail
            ));
        } else if !shut.ran {
            self.failures.push(format!(
                "[{case}, {}] the probe did not run ({shut_label}), so nothing was tested:\n{}",
                who.name(),
                shut.detail
            ));
        }
    }

    fn skip(&self, case: &str, who: Who, reason: &str) {
        println!(
            "ESCAPE-TABLE | {} | {case} | {} | skipped: {reason} |",
            self.class,
            who.name()
        );
    }

    fn finish(self) {
        if self.failures.is_empty() {
            return;
        }
        panic!(
            "{}: {} failure(s)\n\n{}\n\n--- the sandbox-check report of the sandboxed runs:\n{}",
            self.class,
            self.failures.len(),
            self.failures.join("\n\n"),
            self.report.as_deref().unwrap_or("(none)")
        );
    }
}

/// A token unique to this test process and call.
fn token(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!(
        "{prefix}{:08x}",
        (std::process::id() ^ nanos.rotate_left(7)).wrapping_add(n.wrapping_mul(0x9e37_79b9))
    )
}

/// A listener the tests accept one connection from: TCP or UNIX.
trait Accept {
    type Stream: Read;
    fn nonblocking(&self, on: bool);
    fn accept_one(&self) -> std::io::Result<Self::Stream>;
    /// Makes an accepted stream blocking again, with `timeout` on each read.
    fn blocking(s: &Self::Stream, timeout: Duration);
}

impl Accept for TcpListener {
    type Stream = TcpStream;
    fn nonblocking(&self, on: bool) {
        self.set_nonblocking(on).unwrap();
    }
    fn accept_one(&self) -> std::io::Result<TcpStream> {
        self.accept().map(|(s, _)| s)
    }
    fn blocking(s: &TcpStream, timeout: Duration) {
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(timeout)).unwrap();
    }
}

impl Accept for std::os::unix::net::UnixListener {
    type Stream = std::os::unix::net::UnixStream;
    fn nonblocking(&self, on: bool) {
        self.set_nonblocking(on).unwrap();
    }
    fn accept_one(&self) -> std::io::Result<Self::Stream> {
        self.accept().map(|(s, _)| s)
    }
    fn blocking(s: &Self::Stream, timeout: Duration) {
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(timeout)).unwrap();
    }
}

/// Accepts one connection on `l` within `bound` and reads what it sends until EOF or a pause.
fn receive<L: Accept>(l: &L, bound: Duration) -> Option<Vec<u8>> {
    l.nonblocking(true);
    let until = Instant::now() + bound;
    let mut s = loop {
        match l.accept_one() {
            Ok(s) => break s,
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(10)),
            Err(_) => return None,
        }
    };
    L::blocking(&s, Duration::from_millis(500));
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    Some(got)
}

// ---- 1. TCP Fast Open ------------------------------------------------------------------

/// `sendto`/`sendmsg` with MSG_FASTOPEN connects without connect(2), so Landlock's connect
/// rule never sees it; TCP_FASTOPEN_CONNECT + connect goes through connect(2).
#[test]
fn tcp_fast_open_reaches_no_listener() {
    let mut t = Tally::new("TCP Fast Open");
    let tfo = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_fastopen").unwrap_or_default();
    println!("net.ipv4.tcp_fastopen = {}", tfo.trim());
    let client_enabled = tfo.trim().parse::<u32>().map_or(true, |v| v & 1 == 1);
    for who in everyone() {
        let w = World::new(who);
        for host in ["127.0.0.1", "::1"] {
            let bind: SocketAddr = if host.contains(':') {
                "[::1]:0".parse().unwrap()
            } else {
                "127.0.0.1:0".parse().unwrap()
            };
            for mode in ["tfo-sendto", "tfo-sendmsg", "tfo-connect"] {
                let case = format!("{mode} {host}");
                let mut outcome = |half: Half| {
                    let l = match TcpListener::bind(bind) {
                        Ok(l) => l,
                        Err(e) => return Err(format!("no listener on {bind}: {e}")),
                    };
                    let port = l.local_addr().unwrap().port().to_string();
                    let tok = token("tfo");
                    let run = w.check(half, &[], &[mode, host, &port, &tok]);
                    // The probe has finished: a connection it made is in the accept queue already.
                    let got = receive(&l, Duration::from_secs(1));
                    let escaped = got
                        .as_deref()
                        .is_some_and(|g| String::from_utf8_lossy(g).contains(&tok));
                    let observed = match &got {
                        None => "no connection reached the listener".to_string(),
                        Some(g) => format!(
                            "the listener accepted a connection and received {:?}",
                            String::from_utf8_lossy(g)
                        ),
                    };
                    if half == Half::Sandboxed {
                        t.keep_report(&run);
                    }
                    Ok(Outcome::of(&run, escaped, &observed))
                };
                match (outcome(Half::Sandboxed), outcome(Half::Off)) {
                    (Ok(_), Ok(o)) if !o.escaped && !client_enabled && mode != "tfo-connect" => t
                        .skip(
                            &case,
                            who,
                            "net.ipv4.tcp_fastopen has the client bit off: MSG_FASTOPEN \
                             fails even unsandboxed on this machine",
                        ),
                    (Ok(s), Ok(o)) => t.judge(&case, who, o, s),
                    (Err(e), _) | (_, Err(e)) => t.skip(&case, who, &e),
                }
            }
        }
    }
    t.finish();
}

// ---- 1b. TCP destinations by address --------------------------------------------------

/// Listeners on one port at 127.0.0.1, 127.0.0.2 and (where this machine has IPv6) ::1, fresh
/// ones for each case, so that a connection left in an accept queue is never counted for the
/// next.
fn same_port_listeners() -> Option<(TcpListener, Vec<(&'static str, TcpListener)>)> {
    let ipv6 = TcpListener::bind("[::1]:0").is_ok();
    for _ in 0..20 {
        let good = TcpListener::bind("127.0.0.1:0").ok()?;
        let port = good.local_addr().ok()?.port();
        let Ok(two) = TcpListener::bind(("127.0.0.2", port)) else {
            continue;
        };
        let mut others = vec![("127.0.0.2", two)];
        if ipv6 {
            let Ok(six) = TcpListener::bind(("::1", port)) else {
                continue;
            };
            others.push(("::1", six));
        }
        return Some((good, others));
    }
    None
}

/// Issue 33: `--sandbox-connect 127.0.0.1:P` lets the server reach 127.0.0.1:P and no other
/// address on port P. Landlock confines TCP by port only, so mcpguard makes the connects to
/// such a port itself (`sandbox::observe`) on its copy of the server's socket and its copy of
/// the address: 127.0.0.2:P and [::1]:P are refused, blocking and nonblocking, and named at
/// the default level with the flag; a helper that flips the address in shared memory while
/// the probe connects reaches nothing (no time-of-check gap). The granted address works both
/// ways. Unsandboxed, every one of these connects reaches its listener.
#[test]
fn a_tcp_destination_is_enforced_by_address_not_only_by_port() {
    let mut t = Tally::new("TCP destination by address");
    for who in everyone() {
        let w = World::new(who);
        for mode in ["block", "nonblock"] {
            let Some((good, _)) = same_port_listeners() else {
                t.skip(
                    mode,
                    who,
                    "no listeners on one port at 127.0.0.1 and 127.0.0.2",
                );
                continue;
            };
            let port = good.local_addr().unwrap().port().to_string();
            let flag = format!("127.0.0.1:{port}");
            let tok = token("granted");
            let run = w.check(
                Half::Sandboxed,
                &["--sandbox-connect", &flag],
                &["connect-to", "127.0.0.1", &port, &tok, mode],
            );
            let got = receive(&good, Duration::from_secs(2));
            let ok = got
                .as_deref()
                .is_some_and(|g| String::from_utf8_lossy(g).contains(&tok));
            println!(
                "ESCAPE-TABLE | {} | granted 127.0.0.1 {mode} | {} | sandboxed: {} |",
                t.class,
                who.name(),
                if ok {
                    "reached (as granted)"
                } else {
                    "NOT REACHED"
                }
            );
            if !ok {
                t.failures.push(format!(
                    "[granted 127.0.0.1 {mode}, {}] the granted destination {flag} was not reached:\n{}",
                    who.name(),
                    run.brief()
                ));
            }
        }
        for host in ["127.0.0.2", "::1"] {
            for mode in ["block", "nonblock"] {
                let case = format!("{host} on the granted port, {mode}");
                let mut outcome = |half: Half| {
                    let Some((_, others)) = same_port_listeners() else {
                        return Err("no listeners on one port".to_string());
                    };
                    let Some((_, l)) = others.iter().find(|(h, _)| *h == host) else {
                        return Err(format!("no listener at {host} (no IPv6 here?)"));
                    };
                    let port = l.local_addr().unwrap().port().to_string();
                    let flag = format!("127.0.0.1:{port}");
                    let tok = token("other");
                    let opts: Vec<&str> = match half {
                        Half::Sandboxed => vec!["--sandbox-connect", &flag],
                        Half::Off => Vec::new(),
                    };
                    let run = w.check(half, &opts, &["connect-to", host, &port, &tok, mode]);
                    let got = receive(l, Duration::from_secs(1));
                    let escaped = got
                        .as_deref()
                        .is_some_and(|g| String::from_utf8_lossy(g).contains(&tok));
                    if half == Half::Sandboxed {
                        t.keep_report(&run);
                        let shown: SocketAddr = if host.contains(':') {
                            format!("[{host}]:{port}")
                        } else {
                            format!("{host}:{port}")
                        }
                        .parse()
                        .unwrap();
                        let want = format!(
                            "mcpguard: warning: sandbox denied connect to {shown} (TCP): port {port} is granted only for {flag}; allow it with --sandbox-connect {shown}"
                        );
                        if !escaped && !run.stderr.contains(&want) {
                            t.failures.push(format!(
                                "[{case}, {}] the refusal was not named at the default level ({want:?} missing):\n{}",
                                who.name(),
                                run.brief()
                            ));
                        }
                    }
                    let observed = if escaped {
                        "the listener received the probe's token".to_string()
                    } else {
                        "no connection reached the listener".to_string()
                    };
                    Ok(Outcome::of(&run, escaped, &observed))
                };
                match (outcome(Half::Sandboxed), outcome(Half::Off)) {
                    (Ok(s), Ok(o)) => t.judge(&case, who, o, s),
                    (Err(e), _) | (_, Err(e)) => t.skip(&case, who, &e),
                }
            }
        }
        let case = "address flipped during the connect";
        let mut outcome = |half: Half| {
            let Some((_, others)) = same_port_listeners() else {
                return Err("no listeners on one port".to_string());
            };
            let l = &others[0].1;
            let port = l.local_addr().unwrap().port().to_string();
            let flag = format!("127.0.0.1:{port}");
            let opts: Vec<&str> = match half {
                Half::Sandboxed => vec!["--sandbox-connect", &flag],
                Half::Off => Vec::new(),
            };
            let run = w.check(
                half,
                &opts,
                &["connect-race", "127.0.0.1", "127.0.0.2", &port],
            );
            let reached = receive(l, Duration::from_secs(1)).is_some();
            if half == Half::Sandboxed {
                t.keep_report(&run);
            }
            let observed = if reached {
                "127.0.0.2 accepted a connection"
            } else {
                "no connection reached 127.0.0.2"
            };
            Ok(Outcome::of(&run, reached || run.says_escaped(), observed))
        };
        match (outcome(Half::Sandboxed), outcome(Half::Off)) {
            (Ok(s), Ok(o)) => t.judge(case, who, o, s),
            (Err(e), _) | (_, Err(e)) => t.skip(case, who, &e),
        }
    }
    t.finish();
}

// ---- 2. listen() without bind() --------------------------------------------------------

/// A stream of the lines a running mcpguard prints, with a bound on each wait.
fn lines_until(p: &Peer, want: &str, bound: Duration) -> (Vec<String>, Option<String>) {
    let until = Instant::now() + bound;
    let mut seen = Vec::new();
    while let Some(l) = p.recv_timeout(until.saturating_duration_since(Instant::now())) {
        let l = text(&l);
        seen.push(l.clone());
        if l.contains(want) {
            return (seen, Some(l));
        }
    }
    (seen, None)
}

#[test]
fn listen_without_bind_accepts_no_connection() {
    let mut t = Tally::new("listen() autobind");
    for who in everyone() {
        let w = World::new(who);
        for family in ["4", "6"] {
            let case = format!("listen (IPv{family}) without bind");
            let mut outcome = |half: Half| {
                let mut cmd = w.check_cmd(half, &[], &["listen", family]);
                let mut p = Peer::start_with(&mut cmd);
                let (mut seen, line) = lines_until(&p, "listening port=", Duration::from_secs(15));
                let mut observed = "the probe reported no listening port".to_string();
                let mut escaped = false;
                if let Some(port) = line.and_then(|l| {
                    l.rsplit('=')
                        .next()
                        .and_then(|n| n.trim().parse::<u16>().ok())
                }) {
                    let addr: SocketAddr = if family == "6" {
                        format!("[::1]:{port}").parse().unwrap()
                    } else {
                        format!("127.0.0.1:{port}").parse().unwrap()
                    };
                    match TcpStream::connect_timeout(&addr, Duration::from_secs(2)) {
                        Err(e) => observed = format!("connecting to {addr} from outside: {e}"),
                        Ok(mut s) => {
                            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                            let mut b = [0u8; 1];
                            match s.read(&mut b) {
                                Ok(1) if b[0] == b'L' => {
                                    escaped = true;
                                    observed = format!(
                                        "connected from outside to {addr} and the probe's \
                                         byte arrived"
                                    );
                                }
                                r => observed = format!("connected to {addr}, read {r:?}"),
                            }
                        }
                    }
                }
                let status = p.wait_timeout(Duration::from_secs(20));
                while let Some(l) = p.recv_timeout(Duration::from_millis(200)) {
                    seen.push(text(&l));
                }
                let run = Run {
                    name: "listen".into(),
                    status: format!("{status:?}"),
                    stdout: seen.join("\n"),
                    stderr: p.stderr(),
                };
                if half == Half::Sandboxed {
                    t.keep_report(&run);
                }
                Outcome::of(&run, escaped, &observed)
            };
            let s = outcome(Half::Sandboxed);
            let o = outcome(Half::Off);
            t.judge(&case, who, o, s);
        }
    }
    t.finish();
}

// ---- 3. inherited descriptors ----------------------------------------------------------

/// Runs the `fdwrite` probe with `fd` open as descriptor `target` in mcpguard (no
/// close-on-exec), as a host that leaks a descriptor would start it; the baseline starts the
/// probe itself that way.
fn with_inherited(w: &World, half: Half, fd: i32, target: i32, tok: &str) -> Run {
    let t = target.to_string();
    let mut cmd = w.sandboxed_or_direct(half, &["fdwrite", &t, tok]);
    // SAFETY: dup2 is async-signal-safe; `fd` stays open in the parent until the spawn returns.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, target) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Run::new("fdwrite", run_bounded(&mut cmd))
}

#[test]
fn inherited_descriptors_do_not_reach_the_server() {
    let mut t = Tally::new("inherited descriptors");
    for who in everyone() {
        let w = World::new(who);
        let outside = w.owned_dir("outside");
        // A file outside every grant, open for writing.
        let file_case = |half: Half, t: &mut Tally| {
            let path = outside.join(format!("leaked-{half:?}"));
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap();
            let tok = token("fd");
            let run = with_inherited(&w, half, f.as_raw_fd(), 7, &tok);
            drop(f);
            let content = std::fs::read_to_string(&path).unwrap_or_default();
            if half == Half::Sandboxed {
                t.keep_report(&run);
            }
            Outcome::of(
                &run,
                content.contains(&tok),
                &format!("the file outside every grant holds {content:?}"),
            )
        };
        let s = file_case(Half::Sandboxed, &mut t);
        let o = file_case(Half::Off, &mut t);
        t.judge("a file open for writing as fd 7", who, o, s);

        // A connected TCP socket to a listener the sandbox may not connect to.
        let socket_case = |half: Half| {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (mut server, _) = l.accept().unwrap();
            let tok = token("sock");
            let run = with_inherited(&w, half, client.as_raw_fd(), 8, &tok);
            drop(client);
            server
                .set_read_timeout(Some(Duration::from_millis(500)))
                .unwrap();
            let mut got = Vec::new();
            let _ = server.read_to_end(&mut got);
            let got = text(&got);
            Outcome::of(
                &run,
                got.contains(&tok),
                &format!("the listener received {got:?}"),
            )
        };
        let s = socket_case(Half::Sandboxed);
        let o = socket_case(Half::Off);
        t.judge("a connected TCP socket as fd 8", who, o, s);
    }
    t.finish();
}

// ---- 4. environment --------------------------------------------------------------------

/// `LC_*` is allowlisted for the locale categories; a secret named LC_SOMETHING must not ride
/// along.
#[test]
fn an_lc_prefixed_secret_does_not_reach_the_server() {
    let mut t = Tally::new("environment prefix");
    for who in everyone() {
        let w = World::new(who);
        let secret = token("lc-secret-");
        let mut outcome = |half: Half| {
            let mut cmd = w.check_cmd(half, &[], &["getenv", "LC_SECRET_TOKEN"]);
            cmd.env("LC_SECRET_TOKEN", &secret);
            let run = Run::new("getenv", run_bounded(&mut cmd));
            if half == Half::Sandboxed {
                t.keep_report(&run);
            }
            let escaped = run.stdout.contains(&format!("LC_SECRET_TOKEN={secret}"));
            Outcome::of(&run, escaped, "the probe's getenv")
        };
        let s = outcome(Half::Sandboxed);
        let o = outcome(Half::Off);
        t.judge("LC_SECRET_TOKEN in mcpguard's environment", who, o, s);
    }
    t.finish();
}

// ---- 5. kernel keyrings -----------------------------------------------------------------

/// A key in the user keyring of the test's user (readable by that user's processes, as a
/// desktop's are), removed when dropped.
struct Key<'a> {
    w: &'a World,
    desc: String,
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        let _ = self.w.helper(&["keyrm", &self.desc]);
    }
}

#[test]
fn the_users_kernel_keys_are_out_of_reach() {
    let mut t = Tally::new("kernel keyrings");
    for who in everyone() {
        let w = World::new(who);
        let desc = token("mcpguard-probe-");
        let payload = token("key-payload-");
        let add = w.helper(&["keyadd", &desc, &payload]);
        if !add.status.success() {
            t.skip(
                "user keyring",
                who,
                &format!(
                    "cannot add a key to the user keyring here: {} {}",
                    text(&add.stdout),
                    text(&add.stderr)
                ),
            );
            continue;
        }
        let _key = Key {
            w: &w,
            desc: desc.clone(),
        };
        let mut outcome = |half: Half| {
            let run = w.check(half, &[], &["keyread", &desc]);
            if half == Half::Sandboxed {
                t.keep_report(&run);
            }
            let escaped = run.stdout.contains(&format!("read={payload}"));
            Outcome::of(&run, escaped, "the key's payload in the probe's output")
        };
        let s = outcome(Half::Sandboxed);
        let o = outcome(Half::Off);
        t.judge("read a user-keyring key (KEYCTL_SEARCH/READ)", who, o, s);
    }
    t.finish();
}

// ---- 6. other processes of the same user -----------------------------------------------

/// `sleep 30` as the given user; killed when dropped.
struct Victim(Child);

impl Victim {
    fn start(who: Who) -> Victim {
        let mut cmd = Command::new("sleep");
        cmd.arg("30").stdin(Stdio::null());
        who.apply(&mut cmd);
        Victim(cmd.spawn().expect("sleep"))
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn stat_field(&self, n: usize) -> Option<String> {
        // Fields after the parenthesised command name start with field 3 (the state).
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).ok()?;
        let rest = stat.rsplit(')').next()?;
        rest.split_whitespace().nth(n - 3).map(str::to_string)
    }

    fn status_line(&self, key: &str) -> Option<String> {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).ok()?;
        s.lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.trim().to_string())
    }

    fn open_files_limit(&self) -> Option<String> {
        let s = std::fs::read_to_string(format!("/proc/{}/limits", self.pid())).ok()?;
        s.lines()
            .find(|l| l.starts_with("Max open files"))
            .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
    }

    fn io_class(&self) -> i64 {
        // SAFETY: ioprio_get(IOPRIO_WHO_PROCESS, pid) only reads.
        let r = unsafe { libc::syscall(libc::SYS_ioprio_get, 1, self.pid() as i64) };
        if r < 0 {
            -1
        } else {
            r >> 13
        }
    }
}

impl Drop for Victim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The CPUs in a list such as `0-3,6`.
fn cpus(list: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<u32>().ok()),
        }
    }
    out
}

#[test]
fn other_processes_of_the_same_user_are_out_of_reach() {
    let mut t = Tally::new("same-user process control");
    for who in everyone() {
        let w = World::new(who);
        // setpriority: the nice value (field 19 of /proc/PID/stat).
        let mut case = |name: &str,
                        probe: &dyn Fn(&Victim) -> Vec<String>,
                        effect: &dyn Fn(&Victim) -> (bool, String)| {
            let mut one = |half: Half| {
                let v = Victim::start(who);
                let args = probe(&v);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                let run = w.check(half, &[], &args);
                if half == Half::Sandboxed {
                    t.keep_report(&run);
                }
                let (escaped, observed) = effect(&v);
                Outcome::of(&run, escaped, &observed)
            };
            let s = one(Half::Sandboxed);
            let o = one(Half::Off);
            t.judge(name, who, o, s);
        };
        case(
            "setpriority(victim, 19)",
            &|v| vec!["setpriority".into(), v.pid().to_string()],
            &|v| {
                let nice = v.stat_field(19);
                (
                    nice.as_deref() == Some("19"),
                    format!("the victim's nice value is {nice:?}"),
                )
            },
        );
        case(
            "prlimit(victim, RLIMIT_NOFILE)",
            &|v| vec!["prlimit".into(), v.pid().to_string()],
            &|v| {
                let lim = v.open_files_limit();
                (
                    lim.as_deref() == Some("77"),
                    format!("the victim's soft open-files limit is {lim:?}"),
                )
            },
        );
        case(
            "ioprio_set(victim, idle)",
            &|v| vec!["ioprio".into(), v.pid().to_string()],
            &|v| {
                let class = v.io_class();
                (class == 3, format!("the victim's I/O class is {class}"))
            },
        );
        let probe_victim = Victim::start(who);
        let allowed = cpus(
            &probe_victim
                .status_line("Cpus_allowed_list:")
                .unwrap_or_default(),
        );
        drop(probe_victim);
        match allowed.last() {
            Some(&cpu) if allowed.len() > 1 => {
                let cpu = cpu.to_string();
                case(
                    "sched_setaffinity(victim)",
                    &|v| vec!["affinity".into(), v.pid().to_string(), cpu.clone()],
                    &|v| {
                        let list = v.status_line("Cpus_allowed_list:");
                        (
                            list.as_deref() == Some(cpu.as_str()),
                            format!("the victim's Cpus_allowed_list is {list:?}"),
                        )
                    },
                );
            }
            _ => t.skip(
                "sched_setaffinity(victim)",
                who,
                "only one CPU is allowed here, so a new affinity cannot be told apart",
            ),
        }
    }
    t.finish();
}

// ---- 7. descendants that leave ----------------------------------------------------------

/// The live processes whose name (comm) is `name`.
fn named(name: &str) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == name)
                && process_alive(pid)
            {
                out.push(pid);
            }
        }
    }
    out
}

/// Waits up to DEATH_BOUND for every process named `name` to go; returns the ones left,
/// after killing them so that no test leaks a process.
fn survivors(name: &str) -> Vec<u32> {
    let until = Instant::now() + DEATH_BOUND;
    let mut left = named(name);
    while !left.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
        left = named(name);
    }
    for &pid in &left {
        // SAFETY: plain kill(2) of a process this test's probe started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        wait_gone(pid, Duration::from_secs(2));
    }
    left
}

#[test]
fn a_grandchild_in_its_own_session_dies_with_sandbox_check() {
    let mut t = Tally::new("descendants that leave (sandbox-check)");
    for who in everyone() {
        let w = World::new(who);
        let outcome = |half: Half| {
            let dir = w.owned_dir(&format!("leave-{half:?}"));
            let name = token("lv");
            let d = dir.to_str().unwrap();
            let run = w.check(half, &["--sandbox-write", d], &["leave", d, &name]);
            let started = std::fs::read_to_string(dir.join("pid")).ok();
            let left = survivors(&name);
            let o = Outcome::of(
                &run,
                !left.is_empty(),
                &format!(
                    "the grandchild wrote pid {:?}; processes named {name} alive {DEATH_BOUND:?} \
                     after mcpguard returned: {left:?} (killed by the test)",
                    started.as_deref().map(str::trim)
                ),
            );
            (o, run.report().to_string())
        };
        // Both halves at once: each waits DEATH_BOUND for the grandchild.
        let ((s, report), (o, _)) = std::thread::scope(|sc| {
            let s = sc.spawn(|| outcome(Half::Sandboxed));
            let o = sc.spawn(|| outcome(Half::Off));
            (s.join().unwrap(), o.join().unwrap())
        });
        t.keep_report_text(&report);
        t.judge("setsid() grandchild outlives sandbox-check", who, o, s);
    }
    t.finish();
}

/// The pid of the first child of `pid`, within a bound.
fn first_child(pid: u32) -> Option<u32> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
            if let Some(c) = s.split_whitespace().next() {
                return c.parse().ok();
            }
        }
        if Instant::now() > until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[derive(Clone, Copy, Debug)]
enum Ending {
    EndOfInput,
    Sigterm,
    Sigkill,
}

/// One run of the proxy whose server leaves a setsid() grandchild, ended by `ending`.
fn proxy_outcome(w: &World, ending: Ending, half: Half) -> Outcome {
    let dir = w.owned_dir(&format!("serve-{ending:?}-{half:?}"));
    let name = token("sv");
    let mut cmd = w.guard();
    cmd.args(["--allow-unpinned", "--grace", "300ms", "--policy"])
        .arg(w.policy(half))
        .arg("--sandbox-write")
        .arg(&dir)
        .arg("--")
        .arg(&bins().escape)
        .arg("serve-leave")
        .arg(&dir)
        .arg(&name);
    let mut p = Peer::start_with(&mut cmd);
    let until = Instant::now() + Duration::from_secs(15);
    while !p.stderr().contains("leaver-ready") && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let ready = p.stderr().contains("leaver-ready");
    let server = first_child(p.pid());
    match ending {
        Ending::EndOfInput => p.close_stdin(),
        // SAFETY: plain kill(2) of the mcpguard this test started.
        Ending::Sigterm => unsafe {
            libc::kill(p.pid() as i32, libc::SIGTERM);
        },
        // SAFETY: as above.
        Ending::Sigkill => unsafe {
            libc::kill(p.pid() as i32, libc::SIGKILL);
        },
    }
    let status = p.wait_timeout(Duration::from_secs(15));
    let left = survivors(&name);
    let server_left = server.filter(|&s| !wait_gone(s, Duration::from_secs(1)));
    if let Some(s) = server_left {
        // SAFETY: plain kill(2) of the server this test started.
        unsafe { libc::kill(s as i32, libc::SIGKILL) };
    }
    // A SIGKILLed mcpguard cannot remove the server's private TMPDIR: the test does.
    let stderr = p.stderr();
    let tmpdir = stderr
        .split_whitespace()
        .find_map(|w| w.strip_prefix("tmpdir="))
        .filter(|d| d.starts_with("/tmp/mcpguard-") && Path::new(d).is_dir())
        .map(str::to_string);
    if let Some(d) = &tmpdir {
        let _ = std::fs::remove_dir_all(d);
    }
    let observed = format!(
        "server pid {server:?} (alive after: {}), grandchild pid file {:?}; \
             processes named {name} alive {DEATH_BOUND:?} after mcpguard ended: \
             {left:?} (killed by the test){}",
        server_left.is_some(),
        std::fs::read_to_string(dir.join("pid"))
            .ok()
            .map(|s| s.trim().to_string()),
        tmpdir.map_or(String::new(), |d| format!(
            "; the private TMPDIR {d} outlived mcpguard (removed by the test)"
        ))
    );
    Outcome {
        escaped: !left.is_empty() || server_left.is_some(),
        ran: ready,
        detail: format!(
            "observed: {observed}\nmcpguard {status:?}; stderr:\n{}",
            stderr.trim_end()
        ),
    }
}

#[test]
fn no_descendant_of_the_proxied_server_outlives_mcpguard() {
    let mut t = Tally::new("descendants that leave (proxy)");
    for who in everyone() {
        let w = World::new(who);
        let w = &w;
        let endings = [Ending::EndOfInput, Ending::Sigterm, Ending::Sigkill];
        // Every ending and half at once: each waits DEATH_BOUND for the grandchild.
        let results: Vec<(Ending, Outcome, Outcome)> = std::thread::scope(|sc| {
            let runs: Vec<_> = endings
                .iter()
                .map(|&e| {
                    let s = sc.spawn(move || proxy_outcome(w, e, Half::Sandboxed));
                    let o = sc.spawn(move || proxy_outcome(w, e, Half::Off));
                    (e, s, o)
                })
                .collect();
            runs.into_iter()
                .map(|(e, s, o)| (e, s.join().unwrap(), o.join().unwrap()))
                .collect()
        });
        for (ending, s, o) in results {
            let case = format!("server's setsid() grandchild, mcpguard ended by {ending:?}");
            match ending {
                Ending::Sigkill => t.judge(&case, who, o, s),
                // Without the sandbox mcpguard may well end the grandchild in these cases
                // (that is its business, not the sandbox's); only the sandboxed half is held
                // to it, and the unsandboxed result is printed.
                _ => {
                    println!(
                        "(unsandboxed, {case}, {}: the grandchild {})",
                        who.name(),
                        if o.escaped { "survived" } else { "was ended" }
                    );
                    let o = Outcome { escaped: true, ..o };
                    t.judge(&case, who, o, s);
                }
            }
        }
    }
    t.finish();
}

// ---- 8. terminal injection -------------------------------------------------------------

/// A new pty: (master, slave).
fn open_pty() -> std::io::Result<(OwnedFd, OwnedFd)> {
    // SAFETY: posix_openpt, grantpt, unlockpt, ptsname_r and open are called with valid
    // arguments; every descriptor returned is owned exactly once.
    unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        if m < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let master = OwnedFd::from_raw_fd(m);
        if libc::grantpt(m) != 0 || libc::unlockpt(m) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut name = [0 as libc::c_char; 128];
        if libc::ptsname_r(m, name.as_mut_ptr(), name.len()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let s = libc::open(
            name.as_ptr(),
            libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
        );
        if s < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok((master, OwnedFd::from_raw_fd(s)))
    }
}

/// Runs the `tiocsti` probe with a pty as mcpguard's controlling terminal and stdio; returns
/// the run and what arrived as terminal input.
fn tiocsti_run(w: &World, half: Half, tok: &str) -> std::io::Result<(Run, String)> {
    let (master, slave) = open_pty()?;
    let injected = format!("{tok}\n");
    let mut cmd = w.sandboxed_or_direct(half, &["tiocsti", &injected]);
    cmd.stdin(Stdio::from(slave.try_clone()?))
        .stdout(Stdio::from(slave.try_clone()?))
        .stderr(Stdio::from(slave.try_clone()?));
    // SAFETY: setsid and ioctl(TIOCSCTTY) are async-signal-safe system calls.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // Drain the master (mcpguard's output) so that mcpguard never blocks on the terminal.
    let output = Arc::new(Mutex::new(Vec::new()));
    let sink = output.clone();
    let mut m = std::fs::File::from(master);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = m.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    });
    let mut child = cmd.spawn()?;
    let until = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break format!("{s:?}");
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            break "killed after 30 s".to_string();
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    drop(cmd);
    // What the probe pushed is input of the terminal: read it where a shell would.
    // SAFETY: fcntl on a descriptor this function owns.
    unsafe {
        let fl = libc::fcntl(slave.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(slave.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
    let mut input = Vec::new();
    let mut s = std::fs::File::from(slave);
    let until = Instant::now() + Duration::from_millis(500);
    let mut buf = [0u8; 1024];
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(n) if n > 0 => input.extend_from_slice(&buf[..n]),
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    std::thread::sleep(Duration::from_millis(50));
    let out = text(&output.lock().unwrap());
    let out = out.replace("\r\n", "\n");
    Ok((
        Run {
            name: "tiocsti".into(),
            status,
            stdout: out,
            stderr: String::new(),
        },
        text(&input),
    ))
}

#[test]
fn tiocsti_cannot_type_into_the_terminal() {
    let mut t = Tally::new("terminal injection (TIOCSTI)");
    let legacy = std::fs::read_to_string("/proc/sys/dev/tty/legacy_tiocsti")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "absent (kernel older than 6.2: TIOCSTI always allowed)".into());
    if legacy == "0" {
        println!(
            "dev.tty.legacy_tiocsti = 0: only CAP_SYS_ADMIN may use TIOCSTI on this kernel, so \
             this test proves that a root server cannot inject input (the sandbox must drop \
             the capability or the terminal); the ordinary user's half is skipped"
        );
    } else {
        println!(
            "dev.tty.legacy_tiocsti = {legacy}: any process may use TIOCSTI on its controlling \
             terminal, so this test proves for root and for an ordinary user that the server \
             cannot type into the terminal it inherited"
        );
    }
    for who in everyone() {
        if legacy == "0" && who != Who::Root {
            t.skip(
                "TIOCSTI on the controlling terminal",
                who,
                "dev.tty.legacy_tiocsti = 0: an ordinary user cannot use TIOCSTI even \
                 unsandboxed on this kernel",
            );
            continue;
        }
        let w = World::new(who);
        let mut outcome = |half: Half| {
            let tok = token("TIOCSTI-");
            match tiocsti_run(&w, half, &tok) {
                Err(e) => Err(format!("no pty: {e}")),
                Ok((run, input)) => {
                    if half == Half::Sandboxed {
                        t.keep_report(&run);
                    }
                    Ok(Outcome::of(
                        &run,
                        input.contains(&tok),
                        &format!("terminal input read back: {input:?}"),
                    ))
                }
            }
        };
        match (outcome(Half::Sandboxed), outcome(Half::Off)) {
            (Ok(s), Ok(o)) => t.judge("TIOCSTI on the controlling terminal", who, o, s),
            (Err(e), _) | (_, Err(e)) => t.skip("TIOCSTI", who, &e),
        }
    }
    t.finish();
}

// ---- 9. code from writable places --------------------------------------------------------

#[test]
fn no_code_runs_from_a_writable_place() {
    let mut t = Tally::new("code from writable places");
    let b = bins();
    let dynamic = b.dynamic.to_str().unwrap().to_string();
    let escape = b.escape.to_str().unwrap().to_string();
    if !b.static_link {
        println!("(the memfd probe copies a dynamically linked program)");
    }
    for who in everyone() {
        let w = World::new(who);
        for (case, probe, proof) in [
            (
                "ld.so $TMPDIR/copy",
                vec!["ldso", dynamic.as_str()],
                "hello-ran",
            ),
            (
                "memfd_create + fexecve",
                vec!["memfd", escape.as_str()],
                "hello-ran",
            ),
            (
                "mmap(PROT_EXEC) of a file in $TMPDIR, called",
                vec!["mmapexec"],
                "it returned 42",
            ),
        ] {
            let mut outcome = |half: Half| {
                let run = w.check(half, &[], &probe);
                if half == Half::Sandboxed {
                    t.keep_report(&run);
                }
                let escaped = run.stdout.contains(proof);
                Outcome::of(
                    &run,
                    escaped,
                    &format!("the code's own output {proof:?} present: {escaped}"),
                )
            };
            let s = outcome(Half::Sandboxed);
            let o = outcome(Half::Off);
            t.judge(case, who, o, s);
        }
    }
    t.finish();
}

// ---- 10. metadata of files outside every grant -----------------------------------------

fn xattr(path: &Path, name: &str) -> Option<String> {
    let p = CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = CString::new(name).unwrap();
    let mut buf = [0u8; 64];
    // SAFETY: valid NUL-terminated strings and a buffer of the length passed.
    let r = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (r >= 0).then(|| text(&buf[..r as usize]))
}

#[test]
fn metadata_outside_every_grant_cannot_change() {
    let mut t = Tally::new("metadata anywhere");
    for who in everyone() {
        let w = World::new(who);
        let dir = w.path("meta");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Root gives the file away (the owner is then seen to change); an ordinary user makes
        // a no-op chown to itself, which still updates the change time.
        let (to_uid, to_gid) = if who == Who::Root {
            (NOBODY, NOBODY)
        } else {
            (who.uid(), who.gid())
        };
        let (su, sg) = (to_uid.to_string(), to_gid.to_string());
        type Effect = Box<dyn Fn(&Path, &std::fs::Metadata) -> (bool, String)>;
        let cases: Vec<(&str, &str, Vec<String>, Effect)> = vec![
            (
                "chmod",
                "chmod",
                vec![],
                Box::new(|p, _| {
                    let mode = std::fs::metadata(p).unwrap().mode() & 0o7777;
                    (mode == 0o604, format!("mode {mode:o}"))
                }),
            ),
            (
                "chown",
                "chown",
                vec![su, sg],
                Box::new(move |p, before| {
                    let m = std::fs::metadata(p).unwrap();
                    let changed = if who == Who::Root {
                        m.uid() == NOBODY
                    } else {
                        (m.ctime(), m.ctime_nsec()) != (before.ctime(), before.ctime_nsec())
                    };
                    (
                        changed,
                        format!(
                            "owner {}:{}, ctime {}.{:09} (before {}.{:09})",
                            m.uid(),
                            m.gid(),
                            m.ctime(),
                            m.ctime_nsec(),
                            before.ctime(),
                            before.ctime_nsec()
                        ),
                    )
                }),
            ),
            (
                "utimes",
                "utimes",
                vec![],
                Box::new(|p, _| {
                    let m = std::fs::metadata(p).unwrap().mtime();
                    (m == 1_000_000_000, format!("mtime {m}"))
                }),
            ),
            (
                "setxattr user.*",
                "setxattr",
                vec![],
                Box::new(|p, _| {
                    let v = xattr(p, "user.mcpguard_probe");
                    (
                        v.as_deref() == Some("escaped"),
                        format!("user.mcpguard_probe = {v:?}"),
                    )
                }),
            ),
        ];
        for (case, probe, extra, effect) in &cases {
            let mut outcome = |half: Half| {
                let f = dir.join(format!("{probe}-{half:?}"));
                std::fs::write(&f, "x").unwrap();
                std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
                who.own(&f);
                let before = std::fs::metadata(&f).unwrap();
                std::thread::sleep(Duration::from_millis(20));
                let mut args = vec![probe.to_string(), f.display().to_string()];
                args.extend(extra.iter().cloned());
                let run = w.check(half, &[], &args);
                if half == Half::Sandboxed {
                    t.keep_report(&run);
                }
                let (escaped, observed) = effect(&f, &before);
                Outcome::of(&run, escaped, &format!("{}: {observed}", f.display()))
            };
            let s = outcome(Half::Sandboxed);
            let o = outcome(Half::Off);
            if *probe == "setxattr" && !o.escaped && o.detail.contains("Operation not supported") {
                t.skip(
                    case,
                    who,
                    "this filesystem has no user.* extended attributes",
                );
                continue;
            }
            t.judge(case, who, o, s);
        }
    }
    t.finish();
}

// ---- 11. information about ungranted paths --------------------------------------------

/// `stat`, `access` and `inotify_add_watch` of ungranted paths may stay possible (Landlock has
/// no hook for them); the report must then name it as a residual risk.
#[test]
fn sandbox_check_names_stat_of_ungranted_paths_as_a_residual_risk() {
    let mut t = Tally::new("stat/access/inotify (information)");
    for who in everyone() {
        let w = World::new(who);
        let secret = w.home.join("secret.txt");
        std::fs::write(&secret, "x").unwrap();
        let s = secret.to_str().unwrap();
        let sandboxed = w.check(Half::Sandboxed, &[], &["stat", s]);
        let off = w.check(Half::Off, &[], &["stat", s]);
        t.keep_report(&sandboxed);
        println!(
            "ESCAPE-TABLE | {} | stat/access/inotify_add_watch of {s} | {} | unsandboxed: {} \
             | sandboxed: {} (information only) |",
            t.class,
            who.name(),
            if off.says_escaped() {
                "works"
            } else {
                "stopped"
            },
            if sandboxed.says_escaped() {
                "works"
            } else {
                "stopped"
            }
        );
        if !off.says_escaped() {
            t.failures.push(format!(
                "[{}] unsandboxed the stat probe failed:\n{}",
                who.name(),
                off.brief()
            ));
        }
        if !sandboxed.ran() {
            t.failures.push(format!(
                "[{}] the stat probe did not run under the sandbox:\n{}",
                who.name(),
                sandboxed.brief()
            ));
        }
        let named = sandboxed.report().lines().any(|l| {
            let l = l.to_lowercase();
            l.contains("stat") && l.contains("residual")
        });
        if sandboxed.says_escaped() && !named {
            t.failures.push(format!(
                "[{}] stat of an ungranted path works under the sandbox, and the report does \
                 not name it as a residual risk (no line mentions both \"stat\" and \
                 \"residual\"):\n{}",
                who.name(),
                sandboxed.brief()
            ));
        }
    }
    t.finish();
}

// ---- 12. privileged operations --------------------------------------------------------

/// The first block device the kernel knows (for mknod), or loop0.
fn a_block_device() -> (String, String) {
    std::fs::read_to_string("/proc/partitions")
        .ok()
        .and_then(|s| {
            s.lines().skip(2).find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 4).then(|| (f[0].to_string(), f[1].to_string()))
            })
        })
        .unwrap_or_else(|| ("7".into(), "0".into()))
}

/// What root can do and the sandboxed server must not. As an ordinary user, an operation that
/// needs a capability fails unsandboxed already and is skipped with that reason; one that an
/// ordinary user can do (a user namespace, a user-mode userfaultfd...) is held to the same
/// standard as for root.
#[test]
fn privileged_operations_are_refused() {
    let mut t = Tally::new("capabilities and privileged calls");
    let (maj, min) = a_block_device();
    for who in everyone() {
        let w = World::new(who);
        let victim = Victim::start(who);
        let vpid = victim.pid().to_string();
        let cases: Vec<(&str, Vec<&str>)> = vec![
            ("empty capability sets", vec!["caps"]),
            ("mknod of a block device", vec!["mknod", &maj, &min]),
            ("perf_event_open on another process", vec!["perf", &vpid]),
            ("bpf(BPF_MAP_CREATE)", vec!["bpf-map"]),
            ("bpf(BPF_PROG_LOAD)", vec!["bpf-prog"]),
            ("fanotify mount mark (an event arrives)", vec!["fanotify"]),
            ("sethostname (same name)", vec!["sethostname"]),
            ("unshare(CLONE_NEWUSER)", vec!["unshare-user"]),
            ("unshare(CLONE_NEWNS)", vec!["unshare-ns"]),
            ("clone3(CLONE_NEWUSER)", vec!["clone3-user"]),
            ("mount of a tmpfs", vec!["mount"]),
            ("setns (own UTS namespace)", vec!["setns"]),
            ("userfaultfd", vec!["userfaultfd"]),
            ("settimeofday(NULL, NULL)", vec!["settime"]),
            ("acct() (a missing file: nothing changes)", vec!["acct"]),
            ("syslog() size of the kernel log", vec!["syslog"]),
            ("swapoff (a missing file: nothing changes)", vec!["swapoff"]),
            ("SIOCSIFFLAGS on lo (same flags)", vec!["ifflags"]),
        ];
        for (case, probe) in cases {
            if who != Who::Root && probe[0] == "caps" {
                t.skip(
                    case,
                    who,
                    "an ordinary user holds no capabilities but the full bounding set, which \
                     only CAP_SETPCAP can empty",
                );
                continue;
            }
            let off = w.check(Half::Off, &[], &probe);
            if who != Who::Root && !off.says_escaped() {
                t.skip(
                    case,
                    who,
                    &format!(
                        "needs a capability an ordinary user does not have (unsandboxed: {})",
                        off.stdout
                            .lines()
                            .find(|l| l.starts_with("STOPPED") || l.starts_with("ERROR"))
                            .unwrap_or("no result line")
                    ),
                );
                continue;
            }
            let sandboxed = w.check(Half::Sandboxed, &[], &probe);
            t.keep_report(&sandboxed);
            let s = Outcome::of(&sandboxed, sandboxed.says_escaped(), "the probe's result");
            let o = Outcome::of(&off, off.says_escaped(), "the probe's result");
            t.judge(case, who, o, s);
        }
        drop(victim);
    }
    t.finish();
}

// ---- without namespaces: the report names what stays open, and it is true -------------

/// A seccomp program that answers `unshare(2)` with EPERM and allows everything else: what a
/// kernel or security module that forbids (user) namespaces looks like to mcpguard.
fn no_unshare_filter() -> Vec<libc::sock_filter> {
    mcpguard::sandbox::seccomp::refusing(&[libc::SYS_unshare], libc::EPERM)
}

/// Starts `cmd` under [`no_unshare_filter`] (with no_new_privs, which an unprivileged filter
/// needs).
fn without_unshare(cmd: &mut Command, filter: &Arc<Vec<libc::sock_filter>>) {
    let program = filter.clone();
    // SAFETY: prctl and the seccomp install are raw system calls on memory prepared before the
    // fork.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            mcpguard::sandbox::seccomp::install(&program)
        });
    }
}

/// Where namespaces are forbidden, the server still starts (require mode), the report names the
/// gaps that opens as residual risks with the reason, the proxy warns about it — and the gap is
/// real: a probe changes a file's mode outside every grant. So the report claims no more than
/// this kernel, for this user, enforces.
#[test]
fn without_namespaces_the_report_names_what_stays_open_and_it_is_true() {
    let filter = Arc::new(no_unshare_filter());
    for who in everyone() {
        let w = World::new(who);
        let dir = w.path("meta");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let f = dir.join("file");
        std::fs::write(&f, "x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        who.own(&f);
        let mut cmd = w.check_cmd(Half::Sandboxed, &[], &["chmod", &f.display().to_string()]);
        without_unshare(&mut cmd, &filter);
        let run = Run::new("chmod", run_bounded(&mut cmd));
        let report = run.report().to_string();
        let who_name = who.name();
        assert!(
            run.ran(),
            "[{who_name}] the server must still start in require mode without namespaces:\n{}",
            run.brief()
        );
        for want in [
            "a mount namespace: every mount read-only",
            "no code run from writable files",
            "a PID namespace: no descendant outlives",
        ] {
            let line = report
                .lines()
                .find(|l| l.contains(want))
                .unwrap_or_else(|| panic!("[{who_name}] no line {want:?} in:\n{report}"));
            assert!(
                line.contains("RESIDUAL RISK: ") && line.contains("forbid"),
                "[{who_name}] {want:?} must be a residual risk with the reason:\n{line}"
            );
        }
        // Without namespaces: metadata, ld.so/mmap, setsid, later mounts, IPC, the process
        // count and the temporary folder's size, besides stat, /proc and the memory of the whole server
        // (and uid 0's file permissions as root).
        let open = report
            .lines()
            .filter(|l| l.contains("[RESIDUAL RISK"))
            .count();
        assert!(
            open >= 10
                && report.contains(&format!("{open} residual risk(s)"))
                && !report.contains("every rule"),
            "[{who_name}] the verdict must count the open gaps:\n{report}"
        );
        let mode = std::fs::metadata(&f).unwrap().mode() & 0o7777;
        assert_eq!(
            mode,
            0o604,
            "[{who_name}] the named gap is real: chmod outside the grants works without a mount namespace\n{}",
            run.brief()
        );
        println!(
            "ESCAPE-TABLE | no namespaces | chmod outside the grants | {who_name} | named: RESIDUAL RISK | sandboxed: works (as named) |"
        );

        // The proxy says so at start, at the default log level.
        let mut proxy = w.guard();
        proxy
            .args(["--allow-unpinned", "--policy"])
            .arg(&w.sandboxed)
            .arg("--")
            .arg(&bins().escape)
            .arg("hello");
        without_unshare(&mut proxy, &filter);
        let out = run_bounded(&mut proxy);
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("mcpguard: warning: sandbox: no PID or mount namespace for this user"),
            "[{who_name}] the proxy must warn when the namespaces are missing:\n{stderr}"
        );
    }
}

// ---- 13. SysV IPC of the host ---------------------------------------------------------

/// A SysV shared memory segment and a message queue of the host, readable and writable by
/// everyone (as root's are to a root server, and a user's to that user's servers); removed when
/// dropped.
struct HostIpc {
    shm: i32,
    queue: i32,
}

impl HostIpc {
    fn new() -> HostIpc {
        // SAFETY: shmget and msgget take integers only.
        let (shm, queue) = unsafe {
            (
                libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o666),
                libc::msgget(libc::IPC_PRIVATE, libc::IPC_CREAT | 0o666),
            )
        };
        assert!(
            shm >= 0 && queue >= 0,
            "shmget/msgget: {}",
            std::io::Error::last_os_error()
        );
        HostIpc { shm, queue }
    }

    /// Writes `token` at the start of the segment, or reads what is there.
    fn segment(&self, token: Option<&str>) -> String {
        // SAFETY: attaches the segment this test created (4096 bytes), copies at most 63 bytes
        // in or out, and detaches it.
        unsafe {
            let mem = libc::shmat(self.shm, std::ptr::null(), 0) as *mut u8;
            assert!(
                mem as isize != -1,
                "shmat: {}",
                std::io::Error::last_os_error()
            );
            let out = if let Some(t) = token {
                let b = t.as_bytes();
                std::ptr::copy_nonoverlapping(b.as_ptr(), mem, b.len().min(63));
                *mem.add(b.len().min(63)) = 0;
                t.to_string()
            } else {
                let s = std::slice::from_raw_parts(mem, 64);
                let end = s.iter().position(|&c| c == 0).unwrap_or(64);
                text(&s[..end])
            };
            libc::shmdt(mem as *const libc::c_void);
            out
        }
    }

    /// Puts one message with `token` on the queue (after emptying it).
    fn send(&self, token: &str) {
        #[repr(C)]
        struct Msg {
            mtype: libc::c_long,
            text: [u8; 64],
        }
        let mut m = Msg {
            mtype: 1,
            text: [0; 64],
        };
        while self.messages() > 0 {
            // SAFETY: msgrcv writes at most 63 bytes into the live message.
            unsafe {
                libc::msgrcv(
                    self.queue,
                    (&mut m as *mut Msg).cast(),
                    63,
                    0,
                    libc::IPC_NOWAIT,
                )
            };
        }
        m.text[..token.len()].copy_from_slice(token.as_bytes());
        // SAFETY: msgsnd reads the live message of the length given.
        let r = unsafe {
            libc::msgsnd(
                self.queue,
                (&m as *const Msg).cast(),
                token.len() + 1,
                libc::IPC_NOWAIT,
            )
        };
        assert_eq!(r, 0, "msgsnd: {}", std::io::Error::last_os_error());
    }

    fn messages(&self) -> u64 {
        // SAFETY: msgctl(IPC_STAT) writes one msqid_ds we own.
        unsafe {
            let mut ds: libc::msqid_ds = std::mem::zeroed();
            if libc::msgctl(self.queue, libc::IPC_STAT, &mut ds) != 0 {
                return 0;
            }
            ds.msg_qnum as u64
        }
    }
}

impl Drop for HostIpc {
    fn drop(&mut self) {
        // SAFETY: removes the objects this test created.
        unsafe {
            libc::shmctl(self.shm, libc::IPC_RMID, std::ptr::null_mut());
            libc::msgctl(self.queue, libc::IPC_RMID, std::ptr::null_mut());
        }
    }
}

/// The server has its own IPC namespace: the host's SysV shared memory and message queues do
/// not exist for it (POSIX message queues are per IPC namespace the same way).
#[test]
fn the_hosts_sysv_ipc_is_out_of_reach() {
    let mut t = Tally::new("SysV IPC of the host");
    for who in everyone() {
        let w = World::new(who);
        let ipc = HostIpc::new();
        let shm = ipc.shm.to_string();
        let mut outcome = |half: Half| {
            let tok = token("shm-");
            ipc.segment(Some(&tok));
            let run = w.check(half, &[], &["shm", &shm]);
            if half == Half::Sandboxed {
                t.keep_report(&run);
            }
            let now = ipc.segment(None);
            Outcome::of(
                &run,
                now == "overwritten",
                &format!("the segment holds {now:?} (was {tok:?})"),
            )
        };
        let s = outcome(Half::Sandboxed);
        let o = outcome(Half::Off);
        t.judge("shmat + overwrite a host segment", who, o, s);
        let queue = ipc.queue.to_string();
        let outcome = |half: Half| {
            ipc.send(&token("msg-"));
            let run = w.check(half, &[], &["msgq", &queue]);
            let left = ipc.messages();
            Outcome::of(
                &run,
                left == 0,
                &format!("{left} message(s) left on the queue (1 put)"),
            )
        };
        let s = outcome(Half::Sandboxed);
        let o = outcome(Half::Off);
        t.judge("msgrcv from a host queue", who, o, s);
    }
    t.finish();
}

// ---- 14. mounts that arrive later -----------------------------------------------------

fn mount_cmd(args: &[&OsStr]) -> Output {
    run_bounded(Command::new("mount").args(args))
}

/// One run of the `latemount` probe with DIR granted for writing: DIR is a shared mount (as `/`
/// is on a systemd machine), and once the probe has started the host mounts a tmpfs on
/// DIR/sub. Returns the run and whether the probe's file landed on that tmpfs.
fn late_mount_run(w: &World, half: Half) -> (Run, bool, String) {
    let dir = w.owned_dir(&format!("late-{half:?}"));
    let sub = dir.join("sub");
    let bind = mount_cmd(&[OsStr::new("--bind"), dir.as_os_str(), dir.as_os_str()]);
    assert!(
        bind.status.success(),
        "mount --bind: {}",
        text(&bind.stderr)
    );
    let shared = mount_cmd(&[OsStr::new("--make-shared"), dir.as_os_str()]);
    assert!(
        shared.status.success(),
        "mount --make-shared: {}",
        text(&shared.stderr)
    );
    std::fs::create_dir(&sub).unwrap();
    std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755)).unwrap();
    w.who.own(&sub);
    let d = dir.display().to_string();
    let mut cmd = w.check_cmd(half, &["--sandbox-write", &d], &["latemount", &d]);
    let runner = std::thread::spawn(move || run_bounded(&mut cmd));
    let ready = dir.join("ready");
    let until = Instant::now() + Duration::from_secs(30);
    while !ready.exists() && Instant::now() < until && !runner.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mounted = ready.exists() && {
        let m = mount_cmd(&[
            OsStr::new("-t"),
            OsStr::new("tmpfs"),
            OsStr::new("-o"),
            OsStr::new("size=1m,mode=0777"),
            OsStr::new("mcpguard-late"),
            sub.as_os_str(),
        ]);
        assert!(m.status.success(), "mount -t tmpfs: {}", text(&m.stderr));
        true
    };
    let run = Run::new("latemount", runner.join().unwrap());
    let written = sub.join("written").exists();
    let observed = format!(
        "host mounted a tmpfs on {}: {mounted}; the probe's file on it: {written}",
        sub.display()
    );
    let _ = run_bounded(Command::new("umount").arg("-l").arg(&sub));
    let _ = run_bounded(Command::new("umount").arg("-l").arg(&dir));
    (run, written, observed)
}

/// The server's view of the mounts is frozen at its start: a file system the host mounts later
/// never appears inside (a slave mount namespace would receive it with the host's flags,
/// writable, after the read-only pass).
#[test]
fn a_mount_that_arrives_later_is_not_seen_writable() {
    let mut t = Tally::new("mounts that arrive later");
    if !am_root() {
        println!("not running as root: the host cannot mount a tmpfs for this test");
        return;
    }
    for who in everyone() {
        let w = World::new(who);
        let (s, escaped_s, seen_s) = late_mount_run(&w, Half::Sandboxed);
        t.keep_report(&s);
        let (o, escaped_o, seen_o) = late_mount_run(&w, Half::Off);
        t.judge(
            "tmpfs mounted by the host on a granted folder after the start",
            who,
            Outcome::of(&o, escaped_o, &seen_o),
            Outcome::of(&s, escaped_s, &seen_s),
        );
    }
    t.finish();
}

/// A file inside a read grant: the read-only mounts refuse a change of its metadata, which
/// Landlock has no hook for.
#[test]
fn metadata_inside_a_read_grant_cannot_change() {
    let mut t = Tally::new("metadata inside a read grant");
    for who in everyone() {
        let w = World::new(who);
        let outcome = |half: Half| {
            let dir = w.owned_dir(&format!("granted-{half:?}"));
            let f = dir.join("file");
            std::fs::write(&f, "x").unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
            who.own(&f);
            let d = dir.display().to_string();
            let run = w.check(
                half,
                &["--sandbox-read", &d],
                &["chmod", &f.display().to_string()],
            );
            let mode = std::fs::metadata(&f).unwrap().mode() & 0o7777;
            Outcome::of(&run, mode == 0o604, &format!("mode {mode:o}"))
        };
        let s = outcome(Half::Sandboxed);
        let o = outcome(Half::Off);
        t.judge("chmod of a file in --sandbox-read DIR", who, o, s);
    }
    t.finish();
}

// ---- 15. named UNIX sockets through socketpair --------------------------------------------

/// `socket(AF_UNIX)` is refused, but a datagram socket from a pair could `sendto` any named
/// datagram socket the user may write (`/dev/log`, journald, daemons' command sockets). The
/// test's socket stands for them, outside every grant.
#[test]
fn a_socket_pair_reaches_no_named_socket() {
    let mut t = Tally::new("named UNIX sockets through socketpair");
    for who in everyone() {
        let w = World::new(who);
        let path = w.path("log.sock");
        let sock = std::os::unix::net::UnixDatagram::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let p = path.display().to_string();
        let mut outcome = |half: Half| {
            let tok = token("pair-");
            let run = w.check(half, &[], &["pair-send", "dgram", &p, &tok]);
            if half == Half::Sandboxed {
                t.keep_report(&run);
            }
            let mut got = Vec::new();
            let mut buf = [0u8; 128];
            while let Ok(n) = sock.recv(&mut buf) {
                got.push(text(&buf[..n]));
            }
            let escaped = got.iter().any(|g| g == &tok);
            Outcome::of(&run, escaped, &format!("the named socket received {got:?}"))
        };
        let s = outcome(Half::Sandboxed);
        let o = outcome(Half::Off);
        t.judge("socketpair(SOCK_DGRAM) + sendto a named socket", who, o, s);
    }
    t.finish();
}

// ---- 16. process control by group; system calls newer than the filter ---------------------

/// setpriority by process group: the server's own group holds mcpguard's waiter outside the
/// namespaces, and another group is another program's.
#[test]
fn process_groups_are_out_of_reach() {
    let mut t = Tally::new("process control by group");
    for who in everyone() {
        let w = World::new(who);
        let own = |half: Half| {
            let run = w.check(half, &[], &["renice-group", "0"]);
            let escaped = run.says_escaped();
            Outcome::of(&run, escaped, "the probe's result")
        };
        let s = own(Half::Sandboxed);
        t.keep_report_text(&s.detail);
        let o = own(Half::Off);
        t.judge("setpriority(PRIO_PGRP, 0 = own group)", who, o, s);
        let other = |half: Half| {
            let mut cmd = Command::new("sleep");
            cmd.arg("30").stdin(Stdio::null()).process_group(0);
            who.apply(&mut cmd);
            let v = Victim(cmd.spawn().expect("sleep"));
            let run = w.check(half, &[], &["renice-group", &v.pid().to_string()]);
            let nice = v.stat_field(19);
            Outcome::of(
                &run,
                nice.as_deref() == Some("19"),
                &format!("the victim group's nice value is {nice:?}"),
            )
        };
        let s = other(Half::Sandboxed);
        let o = other(Half::Off);
        t.judge("setpriority(PRIO_PGRP, a victim's group)", who, o, s);
    }
    t.finish();
}

/// A system call numbered above the filter's tables is answered ENOSYS: on a kernel newer than
/// the tables (Linux 6.13's setxattrat is 463), it would otherwise reach the kernel unreviewed.
#[test]
fn system_calls_newer_than_the_filter_do_not_reach_the_kernel() {
    let mut t = Tally::new("system calls newer than the filter");
    let first = (mcpguard::sandbox::seccomp::HIGHEST_KNOWN + 1).to_string();
    let last = (mcpguard::sandbox::seccomp::HIGHEST_KNOWN + 24).to_string();
    for who in everyone() {
        let w = World::new(who);
        let o = w.check(Half::Off, &[], &["newcalls", &first, &last]);
        if !o.says_escaped() {
            t.skip(
                "a call above the tables",
                who,
                "this kernel has no system call above the filter's tables",
            );
            continue;
        }
        let s = w.check(Half::Sandboxed, &[], &["newcalls", &first, &last]);
        t.keep_report(&s);
        t.judge(
            &format!("system calls {first} to {last}"),
            who,
            Outcome::of(&o, true, "the probe's result"),
            Outcome::of(&s, s.says_escaped(), "the probe's result"),
        );
    }
    t.finish();
}

// ---- 17. limits by default ----------------------------------------------------------------

/// The default limits hold: a fork loop stops at `sandbox.limits.processes` (512) where the
/// server has its own user namespace (as root, where Linux exempts uid 0, the report names it
/// as a residual risk, and that is true), a big write to TMPDIR stops at `tmp_mb` (512 MiB),
/// and a big private mapping at `data_mb` (4096 MiB; the mapping is never touched, so the
/// unsandboxed half uses no memory).
#[test]
fn the_default_limits_stop_a_fork_loop_a_big_temporary_file_and_a_big_mapping() {
    let mut t = Tally::new("limits by default");
    for who in everyone() {
        let w = World::new(who);
        for (case, probe, limit_line) in [
            (
                "600 processes",
                ["forkloop", "600"],
                "processes (threads included)",
            ),
            ("600 MiB into TMPDIR", ["bigwrite", "600"], "private TMPDIR"),
            ("a 5000 MiB writable mapping", ["bigmap", "5000"], "data ("),
        ] {
            let s = w.check(Half::Sandboxed, &[], &probe);
            t.keep_report(&s);
            let line = s
                .report()
                .lines()
                .find(|l| l.contains(limit_line))
                .unwrap_or("")
                .to_string();
            if line.contains("RESIDUAL RISK") {
                // Named as open: then it must be true, and is not judged as an escape.
                println!(
                    "ESCAPE-TABLE | {} | {case} | {} | named: RESIDUAL RISK | sandboxed: {} |",
                    t.class,
                    who.name(),
                    if s.says_escaped() {
                        "works (as named)"
                    } else {
                        "stopped"
                    }
                );
                continue;
            }
            if !line.contains("[enforced]") {
                t.failures.push(format!(
                    "[{case}, {}] the report neither enforces nor names the limit ({line:?})",
                    who.name()
                ));
            }
            if !s.says_escaped() && !s.stdout.contains("STOPPED:") {
                t.failures.push(format!(
                    "[{case}, {}] the probe could not try (it must stop at the limit, not fail \
                     before):\n{}",
                    who.name(),
                    s.brief()
                ));
            }
            let o = w.check(Half::Off, &[], &probe);
            t.judge(
                case,
                who,
                Outcome::of(&o, o.says_escaped(), "the probe's result"),
                Outcome::of(&s, s.says_escaped(), "the probe's result"),
            );
        }
    }
    t.finish();
}

// ---- 18. uid 0's file permissions -----------------------------------------------------------

/// As root, the server never runs as uid 0 by default (`sandbox.drop_root`, issue 31): a
/// root-only file (0600, and the system's own `/etc/ssl/private` key where there is one) inside
/// a read grant is read unsandboxed and with `drop_root = false` (where the report names it),
/// and refused by default; a fork loop meets the process limit; and the private TMPDIR's size
/// limit holds for the server's uid.
#[test]
fn root_s_server_does_not_run_as_uid_0_by_default() {
    if !am_root() {
        println!("not running as root: nothing to test");
        return;
    }
    let w = World::new(Who::Root);
    let dir = w.owned_dir("ssl");
    let key = dir.join("private.key");
    std::fs::write(&key, "the-private-key").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let d = dir.display().to_string();
    let k = key.display().to_string();
    // sandbox.drop_root = false keeps uid 0: the read works, and the report names it.
    let keep = w.path("keep-root.toml");
    std::fs::write(&keep, "[sandbox]\nmode = \"require\"\ndrop_root = false\n").unwrap();
    let mut cmd = w.guard();
    cmd.arg("sandbox-check")
        .arg("--policy")
        .arg(&keep)
        .args(["--sandbox-read", &d, "--"])
        .arg(&bins().escape)
        .args(["read", &k]);
    let kept = Run::new("read", run_bounded(&mut cmd));
    let line = kept
        .report()
        .lines()
        .find(|l| l.contains("uid 0 keeps its file permissions"))
        .unwrap_or("")
        .to_string();
    assert!(
        kept.says_escaped() && line.contains("RESIDUAL RISK"),
        "with drop_root = false the server keeps uid 0, reads the key, and the report says so \
         ({line:?}):\n{}",
        kept.brief()
    );
    let mut t = Tally::new("root stays root");
    let mut cases = vec![
        (
            "read a 0600 root file in --sandbox-read".to_string(),
            vec!["--sandbox-read".to_string(), d.clone()],
            vec!["read".to_string(), k.clone()],
        ),
        (
            "600 processes".into(),
            vec![],
            vec!["forkloop".into(), "600".into()],
        ),
        (
            "600 MiB into TMPDIR (given to uid 65534)".into(),
            vec![],
            vec!["bigwrite".into(), "600".into()],
        ),
    ];
    // The system's own private keys, inside the default /etc/ssl grant, where the machine has
    // one readable by root only (0640 root:ssl-cert, in a 0710 folder).
    let system_key = std::fs::read_dir("/etc/ssl/private")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.is_file());
    match &system_key {
        Some(p) => cases.push((
            format!("read {} (default /etc/ssl grant)", p.display()),
            vec![],
            vec!["read".into(), p.display().to_string()],
        )),
        None => t.skip("read /etc/ssl/private", Who::Root, "no key on this machine"),
    }
    for (case, extra, probe) in &cases {
        let s = w.check(Half::Sandboxed, extra, probe);
        t.keep_report(&s);
        if !s.says_escaped() && !s.stdout.contains("STOPPED:") {
            t.failures
                .push(format!("[{case}] the probe could not try:\n{}", s.brief()));
        }
        let off = w.check(Half::Off, extra, probe);
        t.judge(
            case,
            Who::Root,
            Outcome::of(&off, off.says_escaped(), "the probe's result"),
            Outcome::of(&s, s.says_escaped(), "the probe's result"),
        );
    }
    let report = t.report.clone().unwrap_or_default();
    assert!(
        report.contains("root's server runs as uid and gid 65534")
            && !report.contains("uid 0 keeps its file permissions"),
        "the report must say the server runs as 65534:\n{report}"
    );
    t.finish();
}

/// As root, a grant under a 0700 root folder (as everything under /root is) still works by
/// default: the folder is seen through an ID-mapped mount, so the server (uid 65534) reads a
/// 0600 root file of the grant and writes there (by absolute path and relative to its working
/// directory), and what it creates is root's outside. The read-only pins of a repository in the
/// grant still hold on the mapped mount. A folder of another user on the way cannot be helped
/// by mapping root's files, and is refused with the path, the reason and the key.
#[test]
fn root_s_grants_under_a_root_only_folder_work_through_an_id_mapped_mount() {
    if !am_root() {
        println!("not running as root: nothing to test");
        return;
    }
    let w = World::new(Who::Root);
    let private = w.path("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let data = private.join("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = run_bounded(Command::new("git").args(["init", "-q"]).arg(&data));
    assert!(out.status.success(), "git init: {}", text(&out.stderr));
    let secret = data.join("secret");
    std::fs::write(&secret, "root-only").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let grant = data.display().to_string();
    let run = |probe: &[&str], cwd: &Path| {
        let mut cmd = w.guard();
        cmd.current_dir(cwd)
            .arg("sandbox-check")
            .arg("--policy")
            .arg(&w.sandboxed)
            .args(["--sandbox-write", &grant, "--"])
            .arg(&bins().escape)
            .args(probe);
        Run::new(probe[0], run_bounded(&mut cmd))
    };
    let read = run(&["read", &secret.display().to_string()], w.dir.path());
    assert!(
        read.says_escaped() && read.stdout.contains("root-only"),
        "the server must read the 0600 root file of its grant under a 0700 root folder:\n{}",
        read.brief()
    );
    let report = read.report();
    assert!(
        report.contains("root's server runs as uid and gid 65534")
            && report.contains(&format!("ID-mapped mounts, where root's files are uid 65534's and what it creates is root's (Landlock still limits it to its grants): {}", private.display())),
        "the report must name the mapped folder:\n{report}"
    );
    let created = data.join("created");
    let write = run(
        &["plant", &created.display().to_string(), "new"],
        w.dir.path(),
    );
    let relative = run(&["plant", "relative", "new"], &data);
    for (run, path) in [(&write, created), (&relative, data.join("relative"))] {
        let meta = std::fs::metadata(&path);
        assert!(
            run.says_escaped() && meta.as_ref().is_ok_and(|m| m.uid() == 0 && m.gid() == 0),
            "the server must create {} in its grant, owned by root outside ({:?}):\n{}",
            path.display(),
            meta.map(|m| (m.uid(), m.gid())),
            run.brief()
        );
    }
    // The pins hold on the mapped mount: the hooks and the configuration stay read-only.
    for pinned in [".git/hooks/pre-commit", ".git/config"] {
        let target = data.join(pinned);
        let before = std::fs::read(&target).ok();
        let p = run(
            &["plant", &target.display().to_string(), "\n# planted\n"],
            w.dir.path(),
        );
        assert!(
            p.ran() && !p.says_escaped() && std::fs::read(&target).ok() == before,
            "{pinned} must stay read-only on the mapped mount:\n{}",
            p.brief()
        );
    }
    // A 0700 folder of another user on the way: mapping root's files cannot help.
    let theirs = w.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&theirs, Some(4242), Some(4242)).unwrap();
    let inside = theirs.join("data");
    std::fs::create_dir(&inside).unwrap();
    let mut cmd = w.guard();
    cmd.arg("sandbox-check")
        .arg("--policy")
        .arg(&w.sandboxed)
        .arg("--sandbox-read")
        .arg(&inside)
        .arg("--")
        .arg(&bins().escape)
        .arg("hello");
    let out = run_bounded(&mut cmd);
    let err = text(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("sandbox.drop_root = false")
            && err.contains(&theirs.display().to_string())
            && err.contains("owner 4242")
            && !text(&out.stdout).contains("hello-ran"),
        "a grant a mapping cannot make reachable must be refused, naming it, why and the key:\n{err}"
    );
}

/// Issue 31, a mapped folder opening a read grant: as root, a write grant under a 0700 root
/// folder (the npm and uv caches under `/root`) maps the whole folder, where root's files are
/// the server's. A read grant below it (an interpreter's folder, `~/.npmrc`'s) keeps its real
/// owners: its 0600 root file stays unreadable, while its other files and the write grant work.
#[test]
fn root_s_read_grant_under_a_mapped_folder_keeps_its_root_only_files_closed() {
    if !am_root() {
        println!("not running as root: nothing to test");
        return;
    }
    let w = World::new(Who::Root);
    let home = w.path("roothome");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    let cache = home.join("cache");
    let conf = home.join("conf");
    for d in [&cache, &conf] {
        std::fs::create_dir(d).unwrap();
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let secret = conf.join("token");
    std::fs::write(&secret, "root-only-token").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let public = conf.join("settings");
    std::fs::write(&public, "public-settings").unwrap();
    std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();
    let run = |probe: &[&str]| {
        let mut cmd = w.guard();
        cmd.current_dir(w.dir.path())
            .arg("sandbox-check")
            .arg("--policy")
            .arg(&w.sandboxed)
            .arg("--sandbox-write")
            .arg(&cache)
            .arg("--sandbox-read")
            .arg(&conf)
            .arg("--")
            .arg(&bins().escape)
            .args(probe);
        Run::new(probe[0], run_bounded(&mut cmd))
    };
    let stolen = run(&["read", &secret.display().to_string()]);
    assert!(
        stolen.ran() && !stolen.says_escaped() && !stolen.stdout.contains("root-only-token"),
        "a 0600 root file in a read grant under a mapped folder must stay unreadable:\n{}",
        stolen.brief()
    );
    let report = stolen.report();
    assert!(
        report.contains(&format!(
            "in the read grants under them that keep their real owners ({})",
            conf.display()
        )) && report.contains(&format!(
            "root's files inside the ID-mapped folders {} (but the read grants kept with their real owners) are uid 65534's  [RESIDUAL RISK: ",
            home.display()
        )),
        "the report must name the kept read grant and the mapped folder as a residual:\n{report}"
    );
    let allowed = run(&["read", &public.display().to_string()]);
    assert!(
        allowed.says_escaped() && allowed.stdout.contains("public-settings"),
        "the read grant's readable files must still be read:\n{}",
        allowed.brief()
    );
    let made = cache.join("made");
    let write = run(&["plant", &made.display().to_string(), "new"]);
    assert!(
        write.says_escaped() && std::fs::metadata(&made).is_ok_and(|m| m.uid() == 0),
        "the write grant in the mapped folder must still work:\n{}",
        write.brief()
    );
}

// ---- 19. files trusted later inside a writable grant ------------------------------------------

/// A fresh git repository owned by the world's user, with one ordinary file.
fn repo(w: &World, name: &str) -> PathBuf {
    init_repo(w, name, false)
}

/// A new repository owned by the world's user: with a work tree, or bare (`git init --bare`,
/// what a server that pushes is granted).
fn init_repo(w: &World, name: &str, bare: bool) -> PathBuf {
    let dir = w.owned_dir(name);
    let mut init = Command::new("git");
    init.args(["init", "-q"]);
    if bare {
        init.arg("--bare");
    }
    let out = run_bounded(init.arg(&dir));
    assert!(out.status.success(), "git init: {}", text(&out.stderr));
    if !bare {
        std::fs::write(dir.join("README"), "project\n").unwrap();
    }
    if am_root() && w.who != Who::Root {
        let owner = format!("{}:{}", w.who.uid(), w.who.gid());
        let out = run_bounded(Command::new("chown").arg("-R").arg(&owner).arg(&dir));
        assert!(out.status.success(), "chown -R: {}", text(&out.stderr));
    }
    dir
}

/// A server with a write grant on a git repository plants what git runs later outside the
/// sandbox: a pre-commit hook, a `core.fsmonitor` command in `.git/config`, or a new `.git`
/// after moving the real one away. Unsandboxed each works; sandboxed, `.git/hooks` and
/// `.git/config` are read-only mounts over themselves and `.git` is a mount point, while an
/// ordinary file of the project stays writable (the grant's purpose).
#[test]
fn a_write_grant_on_a_repository_cannot_rewrite_its_hooks_or_config() {
    let mut t = Tally::new("files trusted later inside a write grant");
    for who in everyone() {
        let w = World::new(who);
        for (case, target, probe) in [
            (
                "write .git/hooks/pre-commit",
                ".git/hooks/pre-commit",
                "plant",
            ),
            ("core.fsmonitor in .git/config", ".git/config", "plant"),
            ("move .git away to make a new one", ".git", "move"),
        ] {
            let mut outcome = |half: Half| {
                let dir = repo(&w, &format!("repo-{}-{half:?}", token("")));
                let file = dir.join(target);
                let tok = token("planted-");
                let arg2 = match target {
                    ".git/config" => format!("[core]\n\tfsmonitor = {tok}\n"),
                    ".git" => dir.join(".git-moved").display().to_string(),
                    _ => format!("#!/bin/sh\necho {tok}\n"),
                };
                let d = dir.display().to_string();
                let f = file.display().to_string();
                let run = w.check(half, &["--sandbox-write", &d], &[probe, &f, &arg2]);
                if half == Half::Sandboxed {
                    t.keep_report(&run);
                }
                let (escaped, observed) = match target {
                    ".git/config" => {
                        // What the git that runs later outside the sandbox reads.
                        // As the repository's owner, or git refuses it as of dubious ownership.
                        let mut git = Command::new("git");
                        who.apply(&mut git);
                        git.arg("-C")
                            .arg(&dir)
                            .args(["config", "core.fsmonitor"])
                            .env("HOME", &w.home);
                        let out = run_bounded(&mut git);
                        let got = text(&out.stdout).trim().to_string();
                        (got == tok, format!("git config core.fsmonitor: {got:?}"))
                    }
                    ".git" => {
                        let moved = dir.join(".git-moved").exists();
                        (moved, format!(".git-moved exists: {moved}"))
                    }
                    _ => {
                        let now = std::fs::read_to_string(&file).unwrap_or_default();
                        let has = now.contains(&tok);
                        (has, format!("{target} holds the token: {has}"))
                    }
                };
                Outcome::of(&run, escaped, &observed)
            };
            let s = outcome(Half::Sandboxed);
            let o = outcome(Half::Off);
            t.judge(case, who, o, s);
        }
        // The grant's purpose holds: an ordinary file of the project is still writable.
        let dir = repo(&w, &format!("repo-{}-ordinary", token("")));
        let readme = dir.join("README");
        let tok = token("edited-");
        let d = dir.display().to_string();
        let run = w.check(
            Half::Sandboxed,
            &["--sandbox-write", &d],
            &["plant", &readme.display().to_string(), &tok],
        );
        let now = std::fs::read_to_string(&readme).unwrap_or_default();
        if !now.contains(&tok) {
            t.failures.push(format!(
                "[README, {}] an ordinary file of the granted project is not writable:\n{}",
                who.name(),
                run.brief()
            ));
        }
        let pinned = run
            .report()
            .lines()
            .find(|l| l.contains("read-only inside the read-write"))
            .unwrap_or("")
            .to_string();
        if !(pinned.contains("pinned .git/hooks, .git/config") && pinned.contains("[enforced]")) {
            t.failures.push(format!(
                "[report, {}] sandbox-check does not name the pinned files: {pinned:?}",
                who.name()
            ));
        }
        if !run
            .report()
            .contains("trusted files a server could still create inside")
        {
            t.failures.push(format!(
                "[report, {}] sandbox-check does not name what stays open",
                who.name()
            ));
        }
        // The repository's `.git` is read-only as a whole (the commondir route is closed), and
        // the report says so instead of naming the route as open.
        let git_line = run
            .report()
            .lines()
            .find(|l| l.contains("the .git folder of each repository"))
            .unwrap_or("")
            .to_string();
        if !(git_line.contains("(.git)") && git_line.contains("[enforced]"))
            || run.report().contains("lets the server create one")
        {
            t.failures.push(format!(
                "[report, {}] sandbox-check does not name the read-only .git: {git_line:?}",
                who.name()
            ));
        }
    }
    t.finish();
}

/// A folder a hostile server prepared for a commondir: the objects and refs git asks of a
/// common directory, a `core.fsmonitor` command (run by `git status`) and a `core.hooksPath`
/// with a pre-commit hook, each writing `token` to `evil/ran`. Owned by the world's user.
fn commondir_target(w: &World, token: &str) -> PathBuf {
    let evil = w.owned_dir(&format!("evil-{token}"));
    let ran = evil.join("ran");
    for d in ["objects", "refs", "hooks"] {
        std::fs::create_dir(evil.join(d)).unwrap();
    }
    std::fs::write(
        evil.join("config"),
        format!(
            "[core]\n\tfsmonitor = echo {token} >> {}\n\thooksPath = {}\n",
            ran.display(),
            evil.join("hooks").display()
        ),
    )
    .unwrap();
    let hook = evil.join("hooks/pre-commit");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\necho {token} >> {}\n", ran.display()),
    )
    .unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    if am_root() && w.who != Who::Root {
        let owner = format!("{}:{}", w.who.uid(), w.who.gid());
        let out = run_bounded(Command::new("chown").arg("-R").arg(&owner).arg(&evil));
        assert!(out.status.success(), "chown -R: {}", text(&out.stderr));
    }
    evil
}

/// The commondir route: a server with a write grant on a repository creates `.git/commondir`
/// naming a folder it prepared, and the person's next `git status` outside the sandbox runs
/// that folder's `core.fsmonitor` command. Unsandboxed it runs; sandboxed, the `.git` folder is
/// read-only as a whole, so the file cannot be created, nor a ref moved, nor the index written.
#[test]
fn a_write_grant_on_a_repository_cannot_create_a_commondir() {
    let mut t = Tally::new("git control files created inside a write grant");
    for who in everyone() {
        let w = World::new(who);
        let mut outcome = |half: Half| {
            let dir = repo(&w, &format!("repo-{}-{half:?}", token("")));
            let tok = token("ran-");
            let evil = commondir_target(&w, &tok);
            let d = dir.display().to_string();
            let commondir = dir.join(".git/commondir").display().to_string();
            let run = w.check(
                half,
                &["--sandbox-write", &d],
                &["plant", &commondir, &evil.display().to_string()],
            );
            if half == Half::Sandboxed {
                t.keep_report(&run);
            }
            // The person's git, later, outside any sandbox, as the repository's owner.
            let mut git = Command::new("git");
            who.apply(&mut git);
            git.arg("-C")
                .arg(&dir)
                .args(["status", "--short"])
                .env("HOME", &w.home);
            let out = run_bounded(&mut git);
            let ran = std::fs::read_to_string(evil.join("ran")).unwrap_or_default();
            let escaped = ran.contains(&tok);
            Outcome::of(
                &run,
                escaped,
                &format!(
                    "git status ran the planted core.fsmonitor: {escaped} (git: {} {})",
                    out.status,
                    text(&out.stderr).trim()
                ),
            )
        };
        let s = outcome(Half::Sandboxed);
        let o = outcome(Half::Off);
        t.judge("create .git/commondir", who, o, s);
        // A moved ref: the server points a branch at its own commit, which the person's next
        // checkout or merge writes into the tree. Unsandboxed the ref is written; sandboxed,
        // `.git/refs` is read-only with the rest of `.git`.
        let moved = |half: Half| {
            let dir = repo(&w, &format!("repo-{}-ref-{half:?}", token("")));
            let branch = dir.join(".git/refs/heads/probe");
            let run = w.check(
                half,
                &["--sandbox-write", &dir.display().to_string()],
                &["plant", &branch.display().to_string(), "0000"],
            );
            let escaped = branch.exists();
            Outcome::of(
                &run,
                escaped,
                &format!(".git/refs/heads/probe written: {escaped}"),
            )
        };
        let s = moved(Half::Sandboxed);
        let o = moved(Half::Off);
        t.judge("write .git/refs/heads/NAME", who, o, s);
        // A bare repository granted for write (a server that pushes to it): its hooks run at
        // the person's next push, so they stay pinned though the folder is writable.
        let bare_hook = |half: Half| {
            let dir = init_repo(&w, &format!("bare-{}-{half:?}.git", token("")), true);
            let hook = dir.join("hooks/pre-receive");
            let run = w.check(
                half,
                &["--sandbox-write", &dir.display().to_string()],
                &["plant", &hook.display().to_string(), "#!/bin/sh\n"],
            );
            let escaped = hook.exists();
            Outcome::of(
                &run,
                escaped,
                &format!("hooks/pre-receive of a bare repository written: {escaped}"),
            )
        };
        let s = bare_hook(Half::Sandboxed);
        let o = bare_hook(Half::Off);
        t.judge("write hooks/pre-receive of a bare repository", who, o, s);
        let dir = repo(&w, &format!("repo-{}-work", token("")));
        let d = dir.display().to_string();
        let index_lock = dir.join(".git/index.lock");
        let run = w.check(
            Half::Sandboxed,
            &["--sandbox-write", &d],
            &["plant", &index_lock.display().to_string(), "x"],
        );
        if index_lock.exists() {
            t.failures.push(format!(
                "[index.lock, {}] a new file was created in the read-only .git:\n{}",
                who.name(),
                run.brief()
            ));
        }
        // Granted by name, `.git` is writable (for a server that commits), and the report
        // names the commondir route as open.
        let git = dir.join(".git").display().to_string();
        let run = w.check(
            Half::Sandboxed,
            &["--sandbox-write", &d, "--sandbox-write", &git],
            &["plant", &index_lock.display().to_string(), "x"],
        );
        if !index_lock.exists() || !run.report().contains("lets the server create one") {
            t.failures.push(format!(
                "[.git granted by name, {}] not writable, or the report does not name the \
                 commondir route:\n{}\n{}",
                who.name(),
                run.brief(),
                run.report()
            ));
        }
    }
    t.finish();
}

// ---- 20. a system call off the allowlist ------------------------------------------------------

/// Deny by default: a call no `@system-service`-shaped set lists (`kcmp`, harmless and
/// unprivileged) reaches the kernel unsandboxed and is answered ENOSYS sandboxed.
#[test]
fn a_system_call_off_the_allowlist_does_not_reach_the_kernel() {
    let mut t = Tally::new("system calls off the allowlist");
    for who in everyone() {
        let w = World::new(who);
        let s = w.check(Half::Sandboxed, &[], &["offlist"]);
        t.keep_report(&s);
        if !s.stdout.contains("errno 38") && !s.says_escaped() {
            t.failures.push(format!(
                "[{}] kcmp must be answered ENOSYS (38):\n{}",
                who.name(),
                s.brief()
            ));
        }
        let o = w.check(Half::Off, &[], &["offlist"]);
        t.judge(
            "kcmp(getpid, getpid, KCMP_FILE, 0, 0)",
            who,
            Outcome::of(&o, o.says_escaped(), "the probe's result"),
            Outcome::of(&s, s.says_escaped(), "the probe's result"),
        );
        let line = s
            .report()
            .lines()
            .find(|l| l.contains("deny by default"))
            .unwrap_or("")
            .to_string();
        if !line.contains("[enforced]") {
            t.failures.push(format!(
                "[{}] the report does not claim the allowlist: {line:?}",
                who.name()
            ));
        }
    }
    t.finish();
}

// ---- 21. the keys of [sandbox] and [sandbox.limits] -----------------------------------------

impl World {
    /// `sandbox-check` under a policy of this world whose text is `policy`, running `probe`.
    fn check_under(&self, file: &str, policy: &str, probe: &[&str]) -> Run {
        let path = self.path(file);
        std::fs::write(&path, policy).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut cmd = self.check_cmd_at(&path, &[], probe);
        Run::new(probe.first().copied().unwrap_or(""), run_bounded(&mut cmd))
    }
}

impl Tally {
    /// One key, both values, both under the sandbox: the escape must work with the permissive
    /// value (or the strict half proves nothing) and not with the strict one, whose report
    /// line (the one containing `rule`) must say `[enforced]`.
    fn judge_key(
        &mut self,
        case: &str,
        who: Who,
        rule: &str,
        (permissive, open): (&str, Outcome),
        (strict, shut, report): (&str, Outcome, &str),
    ) {
        let line = report.lines().find(|l| l.contains(rule)).unwrap_or("");
        if !line.contains("[enforced]") {
            self.failures.push(format!(
                "[{case}, {}] with {strict} the report does not say the rule is enforced: {line:?}",
                who.name()
            ));
        }
        self.weigh(case, who, (permissive, open), (strict, shut));
    }
}

/// The policy text of a sandbox that is the default profile, required, plus `extra`.
fn required_with(extra: &str) -> String {
    format!("[sandbox]\nmode = \"require\"\n{extra}")
}

/// `sandbox.limits.open_files`: a server that raises its soft limit and floods descriptors stops
/// at the key's value (64 here); with `"inherit"` it gets mcpguard's limit.
#[test]
fn sandbox_limits_open_files_stops_a_descriptor_flood() {
    let mut t = Tally::new("sandbox.limits.open_files");
    for who in everyone() {
        let w = World::new(who);
        let run = |v: &str| {
            let r = w.check_under(
                "open-files.toml",
                &required_with(&format!("[sandbox.limits]\nopen_files = {v}\n")),
                &["openmany", "300"],
            );
            let escaped = r.says_escaped();
            (Outcome::of(&r, escaped, "the probe's result"), r)
        };
        let (open, _) = run("\"inherit\"");
        let (shut, r) = run("64");
        t.keep_report(&r);
        if !shut.escaped && !r.stdout.contains("STOPPED: openmany: dup") {
            t.failures.push(format!(
                "[{}] the flood must stop at the limit (EMFILE), not fail before:\n{}",
                who.name(),
                r.brief()
            ));
        }
        t.judge_key(
            "300 more descriptors",
            who,
            "open files at most 64",
            ("open_files = \"inherit\"", open),
            ("open_files = 64", shut, r.report()),
        );
    }
    t.finish();
}

/// `sandbox.limits.address_space_mb`: a reservation with no access (what V8 makes, and what
/// `data_mb` does not count) stops at the key's value; with `"inherit"` it succeeds.
#[test]
fn sandbox_limits_address_space_mb_stops_a_big_reservation() {
    let mut t = Tally::new("sandbox.limits.address_space_mb");
    for who in everyone() {
        let w = World::new(who);
        let run = |v: &str| {
            let r = w.check_under(
                "address-space.toml",
                &required_with(&format!("[sandbox.limits]\naddress_space_mb = {v}\n")),
                &["reserve", "3000"],
            );
            let escaped = r.says_escaped();
            (Outcome::of(&r, escaped, "the probe's result"), r)
        };
        let (open, _) = run("\"inherit\"");
        let (shut, r) = run("512");
        t.keep_report(&r);
        t.judge_key(
            "a 3000 MiB PROT_NONE reservation",
            who,
            "address space at most 512 MiB",
            ("address_space_mb = \"inherit\"", open),
            ("address_space_mb = 512", shut, r.report()),
        );
    }
    t.finish();
}

/// `sandbox.limits.core_dumps`: a child of the server with a secret in its memory crashes after
/// raising its soft core limit; with `false` the kernel writes no core file and the limit cannot
/// be raised above 0, with `true` it does (where the hard limit mcpguard inherits allows one at
/// all). Where core_pattern pipes to a program (systemd-coredump, apport) the kernel ignores
/// RLIMIT_CORE 0, so the report must not claim the rule there: it names a residual risk.
#[test]
fn sandbox_limits_core_dumps_false_writes_no_core_file() {
    let mut hard = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one live rlimit struct.
    unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut hard) };
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    let mut t = Tally::new("sandbox.limits.core_dumps");
    for who in everyone() {
        let w = World::new(who);
        let run = |v: bool| {
            let r = w.check_under(
                "core.toml",
                &required_with(&format!("[sandbox.limits]\ncore_dumps = {v}\n")),
                &["coredump"],
            );
            let escaped = r.says_escaped() || r.stdout.contains("RLIMIT_CORE raised above 0: yes");
            (Outcome::of(&r, escaped, "the probe's result"), r)
        };
        if pattern.starts_with('|') {
            let (_, r) = run(false);
            t.keep_report(&r);
            let line = r
                .report()
                .lines()
                .find(|l| l.contains("no core dumps"))
                .unwrap_or("");
            t.skip(
                "a crash in TMPDIR",
                who,
                &format!(
                    "core_pattern pipes to a program ({:?}): no core file to see",
                    pattern.trim()
                ),
            );
            if line.contains("[enforced]") || !line.contains("RESIDUAL RISK") {
                t.failures.push(format!(
                    "[{}] core_pattern pipes to a program, which ignores RLIMIT_CORE 0, yet the \
                     report does not name the residual risk: {line:?}",
                    who.name()
                ));
            }
            if !r.stdout.contains("RLIMIT_CORE raised above 0: no") {
                t.failures.push(format!(
                    "[{}] the core limit could be raised above 0:\n{}",
                    who.name(),
                    r.brief()
                ));
            }
            continue;
        }
        if hard.rlim_max == 0 {
            t.skip(
                "a crash in TMPDIR",
                who,
                "the hard core limit is 0 here: a core file cannot be seen",
            );
            continue;
        }
        let (open, _) = run(true);
        let (shut, r) = run(false);
        t.keep_report(&r);
        t.judge_key(
            "a crash in TMPDIR",
            who,
            "no core dumps",
            ("core_dumps = true", open),
            ("core_dumps = false", shut, r.report()),
        );
    }
    t.finish();
}

/// `sandbox.allow_unix_sockets`: a UNIX socket reached by path (a session bus, a container
/// engine's socket) is a way out. With `false` the server cannot create a UNIX socket of its own
/// and the listener outside receives nothing; with `true` it connects and sends.
#[test]
fn allow_unix_sockets_decides_whether_the_server_reaches_a_named_socket() {
    let mut t = Tally::new("sandbox.allow_unix_sockets");
    for who in everyone() {
        let w = World::new(who);
        let path = w.path("engine.sock");
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        let p = path.display().to_string();
        let run = |v: bool| {
            let tok = token("unix-");
            let r = w.check_under(
                "unix.toml",
                &required_with(&format!("allow_unix_sockets = {v}\n")),
                &["unix-send", &p, &tok],
            );
            let got = receive(&l, Duration::from_millis(300)).map(|b| text(&b));
            let escaped = got.as_deref() == Some(tok.as_str());
            (
                Outcome::of(&r, escaped, &format!("the named socket received {got:?}")),
                r,
            )
        };
        let (open, _) = run(true);
        let (shut, r) = run(false);
        t.keep_report(&r);
        t.judge_key(
            "connect + send to a named socket outside",
            who,
            "no UNIX sockets of its own",
            ("allow_unix_sockets = true", open),
            ("allow_unix_sockets = false", shut, r.report()),
        );
    }
    t.finish();
}

/// `sandbox.scope_abstract_unix_sockets`: even with UNIX sockets allowed, an abstract socket
/// outside the sandbox (D-Bus and X11 listen there) is out of reach with `true` (Landlock
/// scoping, ABI 6); with `false` the server connects and the listener receives its token.
#[test]
fn scope_abstract_unix_sockets_keeps_an_abstract_socket_outside_out_of_reach() {
    use std::os::linux::net::SocketAddrExt;
    let mut t = Tally::new("sandbox.scope_abstract_unix_sockets");
    for who in everyone() {
        let w = World::new(who);
        let name = token("mcpguard-abstract-");
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
        let at = format!("@{name}");
        let run = |v: bool| {
            let tok = token("abstract-");
            let r = w.check_under(
                "abstract.toml",
                &required_with(&format!(
                    "allow_unix_sockets = true\nscope_abstract_unix_sockets = {v}\n"
                )),
                &["unix-send", &at, &tok],
            );
            let got = receive(&l, Duration::from_millis(300)).map(|b| text(&b));
            let escaped = got.as_deref() == Some(tok.as_str());
            (
                Outcome::of(
                    &r,
                    escaped,
                    &format!("the abstract socket received {got:?}"),
                ),
                r,
            )
        };
        let (open, _) = run(false);
        let (shut, r) = run(true);
        t.keep_report(&r);
        t.judge_key(
            "connect + send to an abstract socket outside",
            who,
            "no connections to abstract UNIX sockets outside the sandbox",
            ("scope_abstract_unix_sockets = false", open),
            ("scope_abstract_unix_sockets = true", shut, r.report()),
        );
    }
    t.finish();
}

/// `sandbox.allow_other_sockets`, netlink: a netlink socket lists the machine's interfaces (and, with
/// capabilities, would change them); packet, raw, MPTCP and SCTP sockets are refused with it.
/// With `false` the socket cannot be created; with `true` the kernel answers.
#[test]
fn allow_other_sockets_decides_whether_the_server_opens_a_netlink_socket() {
    let mut t = Tally::new("sandbox.allow_other_sockets");
    for who in everyone() {
        let w = World::new(who);
        let run = |v: bool| {
            let r = w.check_under(
                "other.toml",
                &required_with(&format!("allow_other_sockets = {v}\n")),
                &["netlink"],
            );
            let escaped = r.says_escaped();
            (Outcome::of(&r, escaped, "the probe's result"), r)
        };
        let (open, _) = run(true);
        let (shut, r) = run(false);
        t.keep_report(&r);
        t.judge_key(
            "a routing netlink dump",
            who,
            "no other socket families",
            ("allow_other_sockets = true", open),
            ("allow_other_sockets = false", shut, r.report()),
        );
    }
    t.finish();
}

/// `sandbox.allow_other_sockets`, MPTCP: an MPTCP socket is a protocol of its own, outside
/// Landlock's TCP rules, so a server that may not connect to a port over TCP could still reach
/// it over MPTCP. A listener outside on a port the policy does not grant receives the server's
/// token with `true` and nothing with `false`. Skipped only where the host disables MPTCP
/// (`net.mptcp.enabled = 0`).
#[test]
fn allow_other_sockets_decides_whether_the_server_connects_over_mptcp() {
    let enabled = std::fs::read_to_string("/proc/sys/net/mptcp/enabled").unwrap_or_default();
    let mut t = Tally::new("sandbox.allow_other_sockets (MPTCP)");
    for who in everyone() {
        if enabled.trim() == "0" {
            t.skip(
                "MPTCP connect + send to a port not granted",
                who,
                "net.mptcp.enabled = 0 on this host: no MPTCP socket can be made",
            );
            continue;
        }
        let w = World::new(who);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port().to_string();
        let run = |v: bool| {
            let tok = token("mptcp-");
            let r = w.check_under(
                "mptcp.toml",
                &required_with(&format!("allow_other_sockets = {v}\n")),
                &["mptcp", &port, &tok],
            );
            let got = receive(&l, Duration::from_millis(300));
            let got = got.map(|b| text(&b));
            let escaped = got.as_deref() == Some(tok.as_str());
            (
                Outcome::of(&r, escaped, &format!("the listener received {got:?}")),
                r,
            )
        };
        let (open, _) = run(true);
        let (shut, r) = run(false);
        t.keep_report(&r);
        t.judge_key(
            "MPTCP connect + send to a port not granted",
            who,
            "no other socket families",
            ("allow_other_sockets = true", open),
            ("allow_other_sockets = false", shut, r.report()),
        );
    }
    t.finish();
}

/// `sandbox.preset`: the runtime preset grants what the interpreter needs to run the server's
/// script and its modules, read only. With `"none"` a python server outside the system paths
/// cannot even be read; with `"python"` (or `"auto"`, which picks it for `python3`) it runs and
/// imports the module beside it, and still cannot write into its own folder (a planted module
/// would run at its next start).
#[test]
fn sandbox_preset_grants_the_scripts_folder_read_only_and_none_grants_nothing() {
    let python = Path::new("/usr/bin/python3");
    assert!(
        python.exists(),
        "no /usr/bin/python3: the preset test needs it (scripts/install-peers.sh installs python3)"
    );
    let mut failures = Vec::new();
    for who in everyone() {
        let w = World::new(who);
        let app = w.path("app");
        std::fs::create_dir(&app).unwrap();
        std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o777)).unwrap();
        let tok = token("preset-");
        std::fs::write(app.join("helper.py"), format!("TOKEN = {tok:?}\n")).unwrap();
        std::fs::write(
            app.join("main.py"),
            "import os, sys\nimport helper\nprint('PRESET-RAN', helper.TOKEN, flush=True)\n\
             try:\n    open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'planted.py'), 'w').write('x')\n    print('PLANTED', flush=True)\n\
             except OSError as e:\n    print('NOT-PLANTED', e, flush=True)\n",
        )
        .unwrap();
        for f in ["helper.py", "main.py"] {
            std::fs::set_permissions(app.join(f), std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        for preset in ["none", "python", "auto"] {
            let policy = w.path(&format!("preset-{preset}.toml"));
            std::fs::write(&policy, required_with(&format!("preset = \"{preset}\"\n"))).unwrap();
            std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o644)).unwrap();
            let mut cmd = w.guard();
            cmd.arg("sandbox-check")
                .arg("--policy")
                .arg(&policy)
                .arg("--")
                .arg(python)
                .arg("-B")
                .arg(app.join("main.py"));
            let out = run_bounded(&mut cmd);
            let stdout = text(&out.stdout);
            let stderr = text(&out.stderr);
            let what = format!(
                "[preset = {preset}, {}] {:?}\nstdout:\n{stdout}\nstderr:\n{}",
                who.name(),
                out.status,
                stderr
            );
            let ran = stdout.contains(&format!("PRESET-RAN {tok}"));
            let planted = app.join("planted.py").exists();
            let _ = std::fs::remove_file(app.join("planted.py"));
            println!(
                "ESCAPE-TABLE | sandbox.preset | preset = {preset} | {} | script ran: {ran} | planted a module: {planted} |",
                who.name()
            );
            if planted {
                failures.push(format!("WROTE INTO THE SCRIPT'S FOLDER: {what}"));
            }
            match preset {
                "none" if ran => failures.push(format!(
                    "the script ran without the preset's grant, so the preset proves nothing: {what}"
                )),
                // The interpreter itself ran and was refused the script: any other failure
                // (no interpreter, a sandbox that did not start) would prove nothing.
                "none" if !(stderr.contains("can't open file")
                    && stderr.contains("[Errno 13] Permission denied")) =>
                {
                    failures.push(format!(
                        "python did not say the script was refused (\"can't open file … \
                         [Errno 13] Permission denied\"), so the refusal is not the sandbox's: {what}"
                    ))
                }
                "python" | "auto" if !ran => {
                    failures.push(format!("the preset did not grant the script: {what}"))
                }
                "python" | "auto" if !stdout.contains("NOT-PLANTED") => {
                    failures.push(format!("the write was not refused: {what}"))
                }
                _ => {}
            }
            if preset != "none" && !stdout.contains("preset: python") {
                failures.push(format!(
                    "the report does not name the python preset: {what}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

// ---- 22. the rest of the report's enforced rules ---------------------------------------------

/// Two different free TCP ports on 127.0.0.1: both listeners stay bound until both ports are
/// read, so the kernel cannot hand out the same port twice.
fn two_free_ports() -> (u16, u16) {
    let a = TcpListener::bind("127.0.0.1:0").unwrap();
    let b = TcpListener::bind("127.0.0.1:0").unwrap();
    let ports = (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    );
    assert_ne!(ports.0, ports.1, "two bound listeners got one port");
    ports
}

/// Connects to 127.0.0.1:`port` until something answers or `bound` passes, and returns what
/// the first answering listener sent.
fn connect_and_read(port: u16, bound: Duration) -> std::thread::JoinHandle<Option<String>> {
    std::thread::spawn(move || {
        let until = Instant::now() + bound;
        while Instant::now() < until {
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                s.set_read_timeout(Some(Duration::from_millis(500))).ok();
                let mut got = String::new();
                let _ = s.read_to_string(&mut got);
                return Some(got);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        None
    })
}

/// `sandbox.tcp_bind` (report rule `network.tcp-bind`): the server listens only on its ports.
/// With the port granted it binds, listens and a client outside gets its token; with another
/// port granted (so `listen` itself is allowed and only Landlock's bind rule stands in the
/// way) the bind is refused and nothing answers.
#[test]
fn tcp_bind_lets_the_server_listen_only_on_its_ports() {
    let mut t = Tally::new("sandbox.tcp_bind");
    for who in everyone() {
        let w = World::new(who);
        let run = |granted: u16, port: u16| {
            let tok = token("bind-");
            let client = connect_and_read(port, Duration::from_secs(6));
            let r = w.check_under(
                "bind.toml",
                &required_with(&format!("tcp_bind = [{granted}]\n")),
                &["bindlisten", &port.to_string(), &tok],
            );
            let got = client.join().unwrap();
            let escaped = got.as_deref() == Some(tok.as_str());
            (
                Outcome::of(
                    &r,
                    escaped,
                    &format!("a client on port {port} read {got:?}"),
                ),
                r,
            )
        };
        let (port, other) = two_free_ports();
        let (open, _) = run(port, port);
        let (shut, r) = run(other, port);
        t.keep_report(&r);
        t.judge_key(
            "bind + listen on a port not granted",
            who,
            "TCP bind only to ports",
            (&format!("tcp_bind = [{port}]"), open),
            (&format!("tcp_bind = [{other}]"), shut, r.report()),
        );
    }
    t.finish();
}

/// What decides, on this host, whether a cross-process call works at all for this user: where
/// the call fails even without the sandbox, the case is skipped with this as the reason.
fn crossmem_gate(mode: &str) -> String {
    let sysctl = |name: &str| {
        let path = format!("/proc/sys/{}", name.replace('.', "/"));
        match std::fs::read_to_string(&path) {
            Ok(v) => format!("{name} = {}", v.trim()),
            Err(_) => format!("{name} is not set here"),
        }
    };
    match mode {
        "io_uring_setup" => sysctl("kernel.io_uring_disabled"),
        "process_madvise" => format!(
            "process_madvise on another process needs CAP_SYS_NICE ({})",
            sysctl("kernel.yama.ptrace_scope")
        ),
        _ => sysctl("kernel.yama.ptrace_scope"),
    }
}

/// Report rule `processes.cross-process`: another process's memory (`process_vm_readv`, a
/// `ptrace` attach, `process_madvise`), its descriptors (`pidfd_getfd`) and an io_uring, whose
/// operations no seccomp filter sees. The victim is the probe's own child, the easiest target
/// there is. Each call is its own case, judged alone: one that works unsandboxed and is stopped
/// sandboxed proves its rule, whatever the others do.
#[test]
fn another_process_memory_descriptors_and_io_uring_are_out_of_reach() {
    let mut t = Tally::new("cross-process access and io_uring");
    for who in everyone() {
        let w = World::new(who);
        for mode in [
            "process_vm_readv",
            "ptrace",
            "pidfd_getfd",
            "process_madvise",
            "io_uring_setup",
        ] {
            let o = w.check(Half::Off, &[], &["crossmem", mode]);
            if o.ran() && !o.says_escaped() {
                t.skip(
                    mode,
                    who,
                    &format!(
                        "it fails even without the sandbox ({}): {}",
                        crossmem_gate(mode),
                        o.stdout.lines().last().unwrap_or("")
                    ),
                );
                continue;
            }
            let s = w.check(Half::Sandboxed, &[], &["crossmem", mode]);
            t.keep_report(&s);
            let line = s
                .report()
                .lines()
                .find(|l| l.contains("no io_uring, ptrace"))
                .unwrap_or("")
                .to_string();
            if !line.contains("[enforced]") {
                t.failures.push(format!(
                    "[{mode}, {}] the report does not claim the rule: {line:?}",
                    who.name()
                ));
            }
            t.judge(
                mode,
                who,
                Outcome::of(&o, o.says_escaped(), "the probe's result"),
                Outcome::of(&s, s.says_escaped(), "the probe's result"),
            );
        }
    }
    t.finish();
}

/// Report rule `processes.no-new-privs`: the server runs with the kernel's no_new_privs flag
/// (`NoNewPrivs:\t1` in its /proc/self/status), so no set-user-id or file-capability program
/// it executes gains privilege. Started directly, the flag is not set. As an extra check (when
/// the tests run as root, the only way to make a set-user-id root program) an ordinary user's
/// server executes a set-user-id root copy of the probe, in a folder the policy lets it execute
/// from, and must not gain euid 0; started directly, the same user does.
#[test]
fn a_set_user_id_program_gives_the_server_no_privilege() {
    let mut t = Tally::new("set-user-id programs");
    for who in everyone() {
        let w = World::new(who);
        let o = Run::new("euid", run_bounded(&mut w.direct_cmd(&["euid"])));
        let s = w.check(Half::Sandboxed, &[], &["euid"]);
        t.keep_report(&s);
        let line = s
            .report()
            .lines()
            .find(|l| l.contains("no_new_privs"))
            .unwrap_or("")
            .to_string();
        if !line.contains("[enforced]") {
            t.failures.push(format!(
                "[{}] the report does not claim no_new_privs: {line:?}",
                who.name()
            ));
        }
        if !s.stdout.contains("NoNewPrivs:\t1\n") {
            t.failures.push(format!(
                "[{}] the server's /proc/self/status does not say NoNewPrivs:\\t1:\n{}",
                who.name(),
                s.brief()
            ));
        }
        t.judge(
            "the no_new_privs flag of the server",
            who,
            Outcome::of(&o, o.says_escaped(), "NoNewPrivs in /proc/self/status"),
            Outcome::of(&s, s.says_escaped(), "NoNewPrivs in /proc/self/status"),
        );
    }
    let who = Who::User {
        uid: NOBODY,
        gid: NOBODY,
    };
    if !am_root() {
        t.skip(
            "exec of a set-user-id root program",
            who,
            "not running as root: no set-user-id root program can be made here",
        );
        t.finish();
        return;
    }
    let w = World::new(who);
    let dir = w.path("suid");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let prog = dir.join("escape-suid");
    std::fs::copy(&bins().escape, &prog).unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let p = prog.display().to_string();
    let o = Run::new(
        "setuid-exec",
        run_bounded(&mut w.direct_cmd(&["setuid-exec", p.as_str()])),
    );
    let s = w.check_under(
        "suid.toml",
        &required_with(&format!(
            "execute = [\"/usr\", \"/bin\", \"/sbin\", \"/lib\", \"/lib64\", \"{}\"]\n",
            dir.display()
        )),
        &["setuid-exec", &p],
    );
    if !s.stdout.contains("probe euid start") {
        t.failures.push(format!(
            "the set-user-id program did not run under the sandbox, so nothing was tested:\n{}",
            s.brief()
        ));
    }
    // The exec'd probe is judged on the euid it got; its NoNewPrivs line is the check above.
    let gained = |r: &Run| r.stdout.contains("gained euid 0");
    t.judge(
        "exec of a set-user-id root program",
        who,
        Outcome::of(&o, gained(&o), "the program's euid"),
        Outcome::of(&s, gained(&s), "the program's euid"),
    );
    t.finish();
}

/// Report rule `environment.sandbox-env`: `--sandbox-env NAME` passes that one variable of
/// mcpguard's environment, by exact name, and no other (`environment.passed`/`removed`).
#[test]
fn sandbox_env_passes_the_named_variable_and_no_other() {
    let mut failures = Vec::new();
    for who in everyone() {
        let w = World::new(who);
        let (a, b) = (token("a-"), token("b-"));
        let run = |name: &str| {
            let mut cmd = w.check_cmd(
                Half::Sandboxed,
                &["--sandbox-env", "HOST_SET_A"],
                &["getenv", name],
            );
            cmd.env("HOST_SET_A", &a).env("HOST_SET_B", &b);
            Run::new("getenv", run_bounded(&mut cmd))
        };
        let got_a = run("HOST_SET_A");
        let got_b = run("HOST_SET_B");
        let line = got_a
            .report()
            .lines()
            .find(|l| l.contains("passed by --sandbox-env"))
            .unwrap_or("")
            .to_string();
        if !(line.contains("HOST_SET_A") && line.contains("[enforced]")) {
            failures.push(format!("[{}] report line: {line:?}", who.name()));
        }
        if !got_a.stdout.contains(&format!("HOST_SET_A={a}")) {
            failures.push(format!(
                "[{}] the named variable did not pass:\n{}",
                who.name(),
                got_a.brief()
            ));
        }
        if got_b.stdout.contains(&b) || !got_b.ran() {
            failures.push(format!(
                "[{}] another variable passed (or the probe did not run):\n{}",
                who.name(),
                got_b.brief()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
// ---- 23. a set-user-ID file in a writable grant -------------------------------------------------

/// A server with a write grant makes a set-user-ID (and set-group-ID) program there: by
/// `chmod` of a file, by creating one with `open(O_CREAT)`, with `openat2`, whose mode a
/// filter cannot see, with `mknod` of a regular file, or with an `O_TMPFILE` file linked in
/// through /proc; or it gives a file a `security.capability` (cap_setuid) with `setxattr`. As
/// root the grant is seen ID-mapped, so the file is root's on disk and would run as root for
/// anyone who can reach it. Unsandboxed each works (as root and as an ordinary user, but for
/// file capabilities, which need CAP_SETFCAP); sandboxed none leaves a set-ID bit or a
/// capability on the file, seen from outside.
#[test]
fn no_set_user_id_file_is_made_in_a_writable_grant() {
    let mut t = Tally::new("set-ID files in a writable grant");
    // The file capability outside, read by the test (not by the probe).
    let capability = |f: &Path| {
        let c = CString::new(f.as_os_str().as_bytes()).unwrap();
        let mut buf = [0u8; 64];
        // SAFETY: getxattr reads two NUL-terminated strings and writes at most `buf.len()`
        // bytes into the live buffer.
        let n = unsafe {
            libc::getxattr(
                c.as_ptr(),
                c"security.capability".as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
            )
        };
        n > 0
    };
    for who in everyone() {
        let w = World::new(who);
        let grant = w.owned_dir("grant");
        let g = grant.display().to_string();
        for how in ["chmod", "create", "openat2", "mknod", "tmpfile", "setcap"] {
            if how == "setcap" && who != Who::Root {
                t.skip(
                    how,
                    who,
                    "an ordinary user may not set file capabilities (CAP_SETFCAP)",
                );
                continue;
            }
            let mut seen = Vec::new();
            for half in [Half::Off, Half::Sandboxed] {
                let target = grant.join(format!("{how}-{half:?}"));
                if how == "chmod" {
                    std::fs::write(&target, "#!/bin/sh\n").unwrap();
                    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755))
                        .unwrap();
                    who.own(&target);
                }
                let path = target.display().to_string();
                let run = w.check(half, &["--sandbox-write", &g], &["setuid", how, &path]);
                let mode = std::fs::metadata(&target).map(|m| m.mode() & 0o7777).ok();
                let cap = capability(&target);
                let escaped = mode.is_some_and(|m| m & 0o6000 != 0) || cap;
                seen.push(Outcome::of(
                    &run,
                    escaped,
                    &format!(
                        "the file's mode outside: {}, security.capability: {}",
                        mode.map_or("none".into(), |m| format!("{m:o}")),
                        if cap { "set" } else { "none" }
                    ),
                ));
                if half == Half::Sandboxed {
                    t.keep_report(&run);
                }
            }
            let sandboxed = seen.pop().unwrap();
            let off = seen.pop().unwrap();
            t.judge(how, who, off, sandboxed);
        }
    }
    t.finish();
}

// ---- 24. the package managers' trees that run later outside the sandbox -----------------------

/// The presets once granted the npm cache (where `npx` keeps the packages it runs) and uv's data
/// folder (where `uv tool` and `uvx` keep installed tools) for write to every server of their
/// kind; a server rewrote a cached npx package and an installed uv tool, which then ran outside
/// any sandbox. As root and as uid 65534: a node server writes into the npm cache and a python
/// server into uv's tool folder and uv's cache; unsandboxed each lands, sandboxed none does (the trees are
/// read-only, each server writes into a private cache of its own).
#[test]
fn a_server_cannot_rewrite_what_npx_or_uv_run_later() {
    let mut t = Tally::new("package-manager trees run later outside the sandbox");
    let node = "/usr/bin/node";
    let python = "/usr/bin/python3";
    for who in everyone() {
        let w = World::new(who);
        for (case, program) in [
            ("node rewrites a cached npx package", node),
            ("python rewrites an installed uv tool", python),
            ("python rewrites a package in uv's cache", python),
        ] {
            if !Path::new(program).exists() {
                t.skip(case, who, &format!("{program} is not installed"));
                continue;
            }
            let mut outcome = |half: Half| {
                let tok = token("planted-");
                let npm = w.owned_dir(&format!("npm-{tok}"));
                let uv_cache = w.owned_dir(&format!("uv-cache-{tok}"));
                let target = if program == node {
                    npm.join("_npx/0123abcd/node_modules/demo/index.js")
                } else if case.contains("uv's cache") {
                    // uvx links what it runs from the cache's unpacked archives.
                    uv_cache.join("archive-v0/0123abcd/demo/__init__.py")
                } else {
                    w.home
                        .join(format!(".local/share/uv/tools/demo-{tok}/bin/demo"))
                };
                std::fs::create_dir_all(target.parent().unwrap()).unwrap();
                std::fs::write(&target, "original\n").unwrap();
                if am_root() && who != Who::Root {
                    let owner = format!("{}:{}", who.uid(), who.gid());
                    for d in [&npm, &uv_cache, &w.home] {
                        let out = run_bounded(Command::new("chown").arg("-R").arg(&owner).arg(d));
                        assert!(out.status.success(), "chown -R: {}", text(&out.stderr));
                    }
                }
                let t_s = target.display().to_string();
                let code = if program == node {
                    format!("try {{ require('fs').appendFileSync({t_s:?}, {tok:?}); console.log('WROTE') }} catch (e) {{ console.log('DENIED', e.code) }}")
                } else {
                    format!("try:\n    open({t_s:?}, 'a').write({tok:?}); print('WROTE')\nexcept OSError as e:\n    print('DENIED', e.errno)\n")
                };
                let mut cmd = w.guard();
                cmd.arg("sandbox-check")
                    .arg("--policy")
                    .arg(w.policy(half))
                    .args([
                        "--",
                        program,
                        if program == node { "-e" } else { "-c" },
                        &code,
                    ])
                    .env("npm_config_cache", &npm)
                    .env("UV_CACHE_DIR", &uv_cache);
                let out = run_bounded(&mut cmd);
                let run = Run::new("write", out);
                if half == Half::Sandboxed {
                    t.keep_report(&run);
                }
                let now = std::fs::read_to_string(&target).unwrap_or_default();
                let escaped = now.contains(&tok);
                Outcome {
                    escaped,
                    ran: run.stdout.contains("WROTE") || run.stdout.contains("DENIED"),
                    detail: format!(
                        "observed: {} holds the token: {escaped}\nstdout: {}\nstderr: {}",
                        target.display(),
                        run.stdout.trim(),
                        run.stderr.trim()
                    ),
                }
            };
            let s = outcome(Half::Sandboxed);
            let o = outcome(Half::Off);
            t.judge(case, who, o, s);
        }
    }
    t.finish();
}

/// A write grant that holds what the person's own tools run or trust later — a shell start-up
/// file, or mcpguard's package store (the code of every pinned server) — is refused before the
/// server starts, naming the file, as root and as uid 65534. Unsandboxed the same write lands.
#[test]
fn a_write_grant_holding_start_up_files_or_the_package_store_is_refused() {
    let mut t = Tally::new("write grants holding what runs later");
    for who in everyone() {
        let w = World::new(who);
        let store = w.home.join(".local/share/mcpguard/packages/npm/demo@1.0.0");
        std::fs::create_dir_all(&store).unwrap();
        let entry = store.join("index.js");
        std::fs::write(&entry, "original\n").unwrap();
        let rc = w.home.join(".bashrc");
        std::fs::write(&rc, "original\n").unwrap();
        if am_root() && who != Who::Root {
            let owner = format!("{}:{}", who.uid(), who.gid());
            let out = run_bounded(Command::new("chown").arg("-R").arg(&owner).arg(&w.home));
            assert!(out.status.success(), "chown -R: {}", text(&out.stderr));
        }
        let packages = w.home.join(".local/share/mcpguard/packages");
        for (case, grant, target, named) in [
            (
                "--sandbox-write HOME holding .bashrc",
                w.home.clone(),
                &rc,
                &rc,
            ),
            (
                "--sandbox-write ~/.local/share holding the package store",
                w.home.join(".local/share"),
                &entry,
                &packages,
            ),
        ] {
            let outcome = |half: Half| {
                let tok = token("planted-");
                let g = grant.display().to_string();
                let f = target.display().to_string();
                let run = w.check(half, &["--sandbox-write", &g], &["plant", &f, &tok]);
                let now = std::fs::read_to_string(target).unwrap_or_default();
                let escaped = now.contains(&tok);
                let refused = run.stderr.contains(&format!("grants {g} for write"))
                    && run.stderr.contains(&named.display().to_string());
                Outcome {
                    escaped,
                    // Refused before the start, naming the file: the mechanism itself.
                    ran: run.ran() || (half == Half::Sandboxed && refused),
                    detail: format!(
                        "observed: {f} holds the token: {escaped}; refused naming it: {refused}\n{}",
                        run.brief()
                    ),
                }
            };
            let s = outcome(Half::Sandboxed);
            let o = outcome(Half::Off);
            t.judge(case, who, o, s);
        }
    }
    t.finish();
}
