//! The sandbox of the server process (SPEC §5): Landlock for files, TCP ports and IPC scoping;
//! a new session, no inherited descriptors, no capabilities, and PID and mount namespaces
//! (`isolate`); seccomp for what none of those reach (sockets Landlock does not confine, TCP
//! Fast Open, keyrings, process control by pid, the kernel's privileged interfaces);
//! `no_new_privs`; resource limits; an environment allowlist of exact names; a private
//! temporary directory per run. What none of it can close on this kernel is named in the
//! report as a residual risk.
//!
//! Three stages, so that the child does as little as possible and the report is the truth:
//! 1. [`resolve`] turns the policy's profile into a [`Request`]: placeholders expanded, presets
//!    and the server's own directory discovered, every path opened `O_PATH` (a missing path is
//!    kept as such, to be reported), the environment filtered.
//! 2. [`plan`] compares the request with what this kernel offers ([`Kernel`]) and writes the
//!    [`Report`]: each rule enforced, dropped (the kernel cannot) or skipped (nothing to enforce).
//!    It is a pure function, so the report for any ABI is unit-tested.
//! 3. [`prepare`] refuses in `require` mode when anything was dropped, then builds the Landlock
//!    ruleset, the seccomp program and the resource limits in the parent. The forked child runs
//!    [`Prepared::apply_in_child`]: raw system calls only (unshare, mount, clone, setrlimit,
//!    prctl, capset, landlock_restrict_self, seccomp), no allocation, no locks, no formatting.
//!
//! A spawn that succeeds has passed every step in the child (a failing step fails the spawn), so
//! "applied" in the audit log and the diagnostics is known, not assumed.

pub mod isolate;
pub mod landlock;
pub mod presets;
pub mod seccomp;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::policy::{Limit, PathContext, Preset, Sandbox, SandboxMode};
pub use presets::Access;

/// Paths granted on the command line for this run (`--sandbox-read`, `--sandbox-write`), on top
/// of the policy: the host configuration names the directory a server such as server-filesystem
/// is given, without a policy file per directory.
#[derive(Debug, Clone, Default)]
pub struct Extra {
    pub read: Vec<PathBuf>,
    pub read_write: Vec<PathBuf>,
}

/// What the running kernel offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    pub landlock: landlock::Abi,
    pub seccomp: bool,
    pub release: String,
    /// Whether this user can have PID and mount namespaces here (`isolate::probe`), or why not.
    pub namespaces: Result<(), String>,
    /// Whether memfds can be sealed non-executable (`MFD_NOEXEC_SEAL`, Linux 6.3).
    pub memfd_noexec_seal: bool,
}

impl Kernel {
    pub fn probe() -> Kernel {
        Kernel {
            landlock: landlock::probe(),
            seccomp: seccomp::available(),
            release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            namespaces: isolate::probe(),
            memfd_noexec_seal: seccomp::memfd_noexec_seal_available(),
        }
    }

    fn abi(&self) -> u32 {
        self.landlock.version()
    }
}

/// One path rule of the request.
#[derive(Debug)]
pub struct PathRule {
    pub access: Access,
    pub path: PathBuf,
    /// Where the rule comes from: a policy key, a command-line option or a discovery.
    pub origin: String,
    pub state: PathState,
}

#[derive(Debug)]
pub enum PathState {
    /// Opened with O_PATH; the rule is added on this descriptor, so a path swapped after the
    /// check does not change what is granted.
    Open {
        fd: OwnedFd,
        dir: bool,
    },
    Missing,
    /// Not granted, and why (unreadable, or too broad for an automatic rule).
    NotGranted(String),
}

/// The environment the server gets.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPlan {
    pub passed: Vec<(OsString, OsString)>,
    /// Names of the variables removed (never their values).
    pub removed: Vec<String>,
}

/// The profile resolved for one run: plain data, plus the open path descriptors.
#[derive(Debug)]
pub struct Request {
    pub mode: SandboxMode,
    pub preset: Preset,
    pub preset_reason: String,
    pub program: Option<PathBuf>,
    pub paths: Vec<PathRule>,
    pub tcp_connect: Vec<u16>,
    pub tcp_bind: Vec<u16>,
    pub allow_udp: bool,
    pub allow_unix_sockets: bool,
    pub allow_other_sockets: bool,
    pub scope_signals: bool,
    pub scope_abstract_unix_sockets: bool,
    pub limits: crate::policy::SandboxLimits,
    pub env: EnvPlan,
    pub tmpdir: Option<PathBuf>,
}

/// What happens to one rule on this kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "kebab-case")]
pub enum Status {
    Enforced,
    /// Asked for, but this kernel cannot enforce it.
    Dropped(String),
    /// Nothing to enforce (a path that does not exist, something the policy allows).
    Skipped(String),
    /// A known way out that nothing available here closes: named so that the report never
    /// claims more than it enforces. It does not stop `require` mode (it is not a rule of the
    /// profile this kernel refuses, but a limit of what Linux offers this user).
    Residual(String),
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    pub layer: &'static str,
    pub rule: String,
    #[serde(flatten)]
    pub status: Status,
}

/// What the profile asks and what this kernel enforces, rule by rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub mode: &'static str,
    pub kernel: String,
    pub landlock_abi: u32,
    pub seccomp: bool,
    pub program: Option<String>,
    pub preset: String,
    pub lines: Vec<Line>,
}

impl Report {
    /// The rules this kernel cannot enforce.
    pub fn dropped(&self) -> Vec<&Line> {
        self.lines
            .iter()
            .filter(|l| matches!(l.status, Status::Dropped(_)))
            .collect()
    }

    /// The known gaps that stay open on this kernel.
    pub fn residual(&self) -> Vec<&Line> {
        self.lines
            .iter()
            .filter(|l| matches!(l.status, Status::Residual(_)))
            .collect()
    }

    /// The human report, one rule per line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "kernel: Linux {}", self.kernel);
        let _ = writeln!(
            out,
            "landlock: {}",
            match self.landlock_abi {
                0 => "not available (ABI 0)".to_string(),
                v => format!("ABI {v}"),
            }
        );
        let _ = writeln!(
            out,
            "seccomp: {}",
            if self.seccomp {
                "available"
            } else {
                "not available"
            }
        );
        let _ = writeln!(out, "sandbox.mode: {}", self.mode);
        if let Some(p) = &self.program {
            let _ = writeln!(out, "server program: {p}");
        }
        let _ = writeln!(out, "preset: {}", self.preset);
        let mut layer = "";
        for l in &self.lines {
            if l.layer != layer {
                layer = l.layer;
                let _ = writeln!(out, "{layer}:");
            }
            let status = match &l.status {
                Status::Enforced => "enforced".to_string(),
                Status::Dropped(why) => format!("DROPPED: {why}"),
                Status::Skipped(why) => format!("skipped: {why}"),
                Status::Residual(why) => format!("RESIDUAL RISK: {why}"),
            };
            let _ = writeln!(out, "  {}  [{status}]", l.rule);
        }
        let dropped = self.dropped();
        let residual = self.residual().len();
        let _ = if dropped.is_empty() {
            writeln!(
                out,
                "verdict: the rules above are enforced on this kernel, but {residual} residual risk(s) marked RESIDUAL RISK remain open (nothing this user can use on this kernel closes them)"
            )
        } else {
            writeln!(
                out,
                "verdict: {} rule(s) cannot be enforced on this kernel{}",
                dropped.len(),
                if self.mode == "require" {
                    "; sandbox.mode = \"require\" refuses to start the server"
                } else {
                    "; sandbox.mode = \"best-effort\" starts the server without them"
                }
            )
        };
        out
    }

    /// One line for the start-up diagnostics and the audit record.
    pub fn summary(&self) -> String {
        let count = |f: fn(&Status) -> bool| self.lines.iter().filter(|l| f(&l.status)).count();
        let paths = self
            .lines
            .iter()
            .filter(|l| l.layer == "files" && l.status == Status::Enforced)
            .count();
        format!(
            "sandbox {} (Landlock ABI {}, seccomp {}): {} rules enforced ({} paths), {} dropped, {} skipped, {} residual risks (`mcpguard sandbox-check` lists them)",
            self.mode,
            self.landlock_abi,
            if self.seccomp { "on" } else { "unavailable" },
            count(|s| *s == Status::Enforced),
            paths,
            count(|s| matches!(s, Status::Dropped(_))),
            count(|s| matches!(s, Status::Skipped(_))),
            count(|s| matches!(s, Status::Residual(_))),
        )
    }
}

fn mode_name(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::Require => "require",
        SandboxMode::BestEffort => "best-effort",
        SandboxMode::Off => "off",
    }
}

/// Keeps the variables `allow` names (exact names only: a prefix would pass whatever a host or
/// an attacker names with it, such as `LC_SECRET_TOKEN`) and reports the names of the others.
/// `TMPDIR` is never passed through: the run's private one replaces it.
pub fn filter_env(vars: &[(OsString, OsString)], allow: &[String]) -> EnvPlan {
    let allowed = |name: &str| name != "TMPDIR" && allow.iter().any(|a| a == name);
    let mut plan = EnvPlan::default();
    for (k, v) in vars {
        match k.to_str() {
            Some(name) if allowed(name) => plan.passed.push((k.clone(), v.clone())),
            _ => plan.removed.push(k.to_string_lossy().into_owned()),
        }
    }
    plan
}

/// Whether an automatic rule on `path` would grant too much: the root, or the home directory or
/// one of its ancestors (a program in `~/` or `/` must be granted by the policy, by name).
fn too_broad(path: &Path, home: Option<&Path>) -> bool {
    path == Path::new("/") || home.is_some_and(|h| h.starts_with(path))
}

fn open_path(path: &Path) -> PathState {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH)
        .open(path)
    {
        Ok(f) => match f.metadata() {
            Ok(m) => PathState::Open {
                dir: m.is_dir(),
                fd: OwnedFd::from(f),
            },
            Err(e) => PathState::NotGranted(format!("cannot inspect it: {e}")),
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => PathState::Missing,
        Err(e) => PathState::NotGranted(format!("cannot open it: {e}")),
    }
}

/// Everything [`resolve`] reads.
pub struct Inputs<'a> {
    pub profile: &'a Sandbox,
    /// The server program, already found on PATH (absolute), and its arguments; `None` for a
    /// profile check without a command.
    pub program: Option<&'a Path>,
    pub args: &'a [OsString],
    pub extra: &'a Extra,
    /// Placeholder values; `tmpdir` is the run's private directory.
    pub ctx: &'a PathContext,
    /// mcpguard's own environment.
    pub env: &'a [(OsString, OsString)],
}

/// Resolves the profile for one run. Fails only when a policy path cannot be resolved (its base,
/// such as `~`, is unknown in this run): guessing would grant the wrong path.
pub fn resolve(inp: &Inputs<'_>) -> Result<Request, String> {
    let p = inp.profile;
    let home = inp.ctx.home.as_deref();
    let mut wanted: Vec<(Access, PathBuf, String, bool)> = Vec::new();
    for (list, access, key) in [
        (&p.execute, Access::Execute, "sandbox.execute"),
        (&p.read, Access::Read, "sandbox.read"),
        (&p.read_write, Access::ReadWrite, "sandbox.read_write"),
    ] {
        for pp in list {
            let path = pp.expand(inp.ctx).map_err(|e| {
                format!("{key}: {e}; set it in the environment or change the policy")
            })?;
            wanted.push((access, path, format!("{key} {pp}"), false));
        }
    }
    for path in &inp.extra.read {
        wanted.push((Access::Read, path.clone(), "--sandbox-read".into(), false));
    }
    for path in &inp.extra.read_write {
        wanted.push((
            Access::ReadWrite,
            path.clone(),
            "--sandbox-write".into(),
            false,
        ));
    }
    let (preset, preset_reason) = match (p.preset, inp.program) {
        (Preset::Auto, Some(program)) => {
            let (found, why) = presets::auto(program);
            (found, format!("auto: {why}"))
        }
        (Preset::Auto, None) => (Preset::None, "auto: no server command given".to_string()),
        (other, _) => (other, "set by the policy".to_string()),
    };
    let env = presets::Env { vars: inp.env };
    if let Some(program) = inp.program {
        let mut found = presets::program_dirs(program);
        match preset {
            Preset::Node => found.extend(presets::node(program, inp.args, &env, inp.ctx)),
            Preset::Python => found.extend(presets::python(program, &env, inp.ctx)),
            Preset::None | Preset::Auto => {}
        }
        wanted.extend(
            found
                .into_iter()
                .map(|f| (f.access, f.path, f.origin, true)),
        );
    }
    let paths = wanted
        .into_iter()
        .map(|(access, path, origin, automatic)| {
            let state = if automatic && too_broad(&path, home) {
                PathState::NotGranted(
                    "too broad to grant automatically (the root or your home directory); name what the server needs in sandbox.read or sandbox.execute".into(),
                )
            } else {
                open_path(&path)
            };
            PathRule {
                access,
                path,
                origin,
                state,
            }
        })
        .collect();
    let mut env_plan = filter_env(inp.env, &p.env);
    if let Some(tmp) = &inp.ctx.tmpdir {
        env_plan
            .passed
            .push((OsString::from("TMPDIR"), tmp.clone().into_os_string()));
    }
    Ok(Request {
        mode: p.mode,
        preset,
        preset_reason,
        program: inp.program.map(Path::to_path_buf),
        paths,
        tcp_connect: p.tcp_connect.clone(),
        tcp_bind: p.tcp_bind.clone(),
        allow_udp: p.allow_udp,
        allow_unix_sockets: p.allow_unix_sockets,
        allow_other_sockets: p.allow_other_sockets,
        scope_signals: p.scope_signals,
        scope_abstract_unix_sockets: p.scope_abstract_unix_sockets,
        limits: p.limits.clone(),
        env: env_plan,
        tmpdir: inp.ctx.tmpdir.clone(),
    })
}

/// Whether `listen(2)` is refused: nothing legitimate listens when no TCP port may be bound and
/// the server may not create UNIX sockets.
fn listen_denied(req: &Request) -> bool {
    req.tcp_bind.is_empty() && !req.allow_unix_sockets
}

fn ports(list: &[u16]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The report: what the request asks and what `kernel` enforces of it. Pure.
pub fn plan(req: &Request, kernel: &Kernel) -> Report {
    let abi = kernel.abi();
    let mut lines = Vec::new();
    let mut line = |layer: &'static str, rule: String, status: Status| {
        lines.push(Line {
            layer,
            rule,
            status,
        })
    };
    let no_landlock = match &kernel.landlock {
        landlock::Abi::Unavailable(why) => why.clone(),
        landlock::Abi::Available(_) => String::new(),
    };
    let landlock_status = |min: u32, what: &str| {
        if abi >= min {
            Status::Enforced
        } else if abi == 0 {
            Status::Dropped(no_landlock.clone())
        } else {
            Status::Dropped(format!(
                "{what} needs Landlock ABI {min}; this kernel has ABI {abi}"
            ))
        }
    };

    // Files.
    line(
        "files",
        "no access to files outside the paths granted below".into(),
        landlock_status(1, ""),
    );
    if abi < 3 {
        line(
            "files",
            "no truncation of files outside the read-write paths".into(),
            landlock_status(3, "restricting truncate(2)"),
        );
    }
    if abi < 5 {
        line(
            "files",
            "no ioctl on devices outside the read-write paths".into(),
            landlock_status(5, "restricting device ioctls"),
        );
    }
    for r in &req.paths {
        let rule = format!(
            "{:<18} {}  ({})",
            r.access.label(),
            r.path.display(),
            r.origin
        );
        let status = match &r.state {
            PathState::Open { .. } => landlock_status(1, ""),
            PathState::Missing => Status::Skipped("does not exist".into()),
            PathState::NotGranted(why) => Status::Skipped(why.clone()),
        };
        line("files", rule, status);
    }
    let namespaces = &kernel.namespaces;
    let without_namespaces = |what: &str| match namespaces {
        Ok(()) => Status::Enforced,
        Err(why) => Status::Residual(format!("{why}; without a mount namespace {what}")),
    };
    line(
        "files",
        "a mount namespace: every mount read-only and nosuid outside the read-write paths, which are noexec, nosuid and nodev: no chmod, chown, xattr or time changes outside them".into(),
        without_namespaces("the server can change the metadata (mode, owner, times, extended attributes) of any file its user owns, granted or not: Landlock has no hook for it"),
    );
    line(
        "files",
        "no code run from writable files: not executed (Landlock), not mapped executable by ld.so or mmap (noexec mounts)".into(),
        without_namespaces("`ld.so FILE` and mmap(PROT_EXEC) run code from a writable file"),
    );
    line(
        "files",
        "no executable memfds: memfd_create without MFD_NOEXEC_SEAL refused (seccomp)".into(),
        if !kernel.seccomp {
            Status::Dropped("this kernel cannot run seccomp filters (CONFIG_SECCOMP_FILTER)".into())
        } else if kernel.memfd_noexec_seal {
            Status::Enforced
        } else {
            Status::Residual("this kernel has no MFD_NOEXEC_SEAL (Linux 6.3); memfd_create + fexecve runs code no file rule saw".into())
        },
    );
    line(
        "files",
        "stat, access, readlink and inotify on paths outside the grants".into(),
        Status::Residual(
            "Landlock has no hook for them: the server can learn which files exist and their sizes and times, though not read them".into(),
        ),
    );

    // Network.
    line(
        "network",
        format!("TCP connect only to ports: {}", ports(&req.tcp_connect)),
        landlock_status(4, "restricting TCP"),
    );
    line(
        "network",
        format!("TCP bind only to ports: {}", ports(&req.tcp_bind)),
        landlock_status(4, "restricting TCP"),
    );
    let seccomp_status = |allowed: bool, key: &str| {
        if allowed {
            Status::Skipped(format!("allowed by sandbox.{key}"))
        } else if kernel.seccomp {
            Status::Enforced
        } else {
            Status::Dropped("this kernel cannot run seccomp filters (CONFIG_SECCOMP_FILTER)".into())
        }
    };
    line(
        "network",
        "no UDP sockets (seccomp)".into(),
        seccomp_status(req.allow_udp, "allow_udp"),
    );
    line(
        "network",
        "no UNIX sockets of its own; socketpair(2) allowed (seccomp)".into(),
        seccomp_status(req.allow_unix_sockets, "allow_unix_sockets"),
    );
    line(
        "network",
        "no other socket families: netlink, packet, raw, MPTCP, SCTP... (seccomp)".into(),
        seccomp_status(req.allow_other_sockets, "allow_other_sockets"),
    );
    line(
        "network",
        "no TCP Fast Open: MSG_FASTOPEN on sendto/sendmsg, TCP_FASTOPEN(_CONNECT) refused (seccomp); it connects past Landlock".into(),
        seccomp_status(false, ""),
    );
    line(
        "network",
        "no listen(): nothing may be bound, and listen() without bind() would take an ephemeral TCP port (seccomp)".into(),
        if !listen_denied(req) {
            Status::Residual(format!(
                "{} lets the server listen, and listen() without bind() takes an ephemeral TCP port that sandbox.tcp_bind does not limit",
                if req.tcp_bind.is_empty() { "sandbox.allow_unix_sockets" } else { "sandbox.tcp_bind" }
            ))
        } else {
            seccomp_status(false, "")
        },
    );

    // Processes.
    let scope = |asked: bool, what: &str, key: &str| {
        if asked {
            landlock_status(6, what)
        } else {
            Status::Skipped(format!("sandbox.{key} = false"))
        }
    };
    line(
        "processes",
        "no signals to processes outside the sandbox, mcpguard included".into(),
        scope(req.scope_signals, "signal scoping", "scope_signals"),
    );
    line(
        "processes",
        "no connections to abstract UNIX sockets outside the sandbox".into(),
        scope(
            req.scope_abstract_unix_sockets,
            "abstract UNIX socket scoping",
            "scope_abstract_unix_sockets",
        ),
    );
    line(
        "processes",
        "no io_uring, ptrace, process_vm_readv/writev, pidfd_getfd, process_madvise (seccomp)"
            .into(),
        seccomp_status(false, ""),
    );
    line(
        "processes",
        "no_new_privs: no privilege gain through setuid or file capabilities".into(),
        Status::Enforced,
    );
    line(
        "processes",
        if isolate::running_as_root() {
            "every capability dropped (bounding, effective, permitted, inheritable, ambient), securebits locked: root gets none back at exec"
        } else {
            "no capabilities: an ordinary user's (and those of its user namespace) dropped from every set"
        }
        .into(),
        Status::Enforced,
    );
    line(
        "processes",
        "a new session: no controlling terminal; TIOCSTI and TIOCLINUX refused (seccomp)".into(),
        Status::Enforced,
    );
    line(
        "processes",
        "no inherited descriptors: everything above stdin, stdout and stderr closed at exec".into(),
        Status::Enforced,
    );
    line(
        "processes",
        "a PID namespace: no descendant outlives the server or mcpguard (even after setsid), other processes invisible by pid".into(),
        without_namespaces("a descendant that calls setsid() leaves the process group and can outlive the server and mcpguard"),
    );
    line(
        "processes",
        "no control of other processes: prlimit, setpriority, ioprio_set, sched_set*, migrate_pages name only the caller (seccomp)".into(),
        seccomp_status(false, ""),
    );
    line(
        "processes",
        "no kernel keyrings: add_key, request_key, keyctl (seccomp)".into(),
        seccomp_status(false, ""),
    );
    line(
        "processes",
        "the machine's process list in /proc (names and command lines, not memory or environment)".into(),
        Status::Residual(
            "/proc is the host's, so the server can list the machine's processes and read their command lines".into(),
        ),
    );
    line(
        "kernel",
        "no mounts, namespaces, modules, kexec, BPF, perf events, fanotify, userfaultfd, clock, host name, accounting, quotas, kernel log, swap or reboot; no namespace flags on clone (seccomp)".into(),
        seccomp_status(false, ""),
    );

    // Limits.
    let limit = |name: &str, l: Limit, unit: &str| match l {
        Limit::Max(n) => (format!("{name} at most {n}{unit}"), Status::Enforced),
        Limit::Inherit => (
            format!("{name}: mcpguard's own limit"),
            Status::Skipped("\"inherit\"".into()),
        ),
    };
    for (rule, status) in [
        limit("open files", req.limits.open_files, ""),
        limit("processes of this user", req.limits.processes, ""),
        limit("address space", req.limits.address_space_mb, " MiB"),
    ] {
        line("limits", rule, status);
    }
    line(
        "limits",
        if req.limits.core_dumps {
            "core dumps allowed".into()
        } else {
            "no core dumps".into()
        },
        if req.limits.core_dumps {
            Status::Skipped("sandbox.limits.core_dumps = true".into())
        } else {
            Status::Enforced
        },
    );

    // Environment.
    let names: Vec<String> = req
        .env
        .passed
        .iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    line(
        "environment",
        format!(
            "passed: {}",
            if names.is_empty() {
                "nothing".into()
            } else {
                names.join(", ")
            }
        ),
        Status::Enforced,
    );
    line(
        "environment",
        format!(
            "removed: {}",
            if req.env.removed.is_empty() {
                "nothing".into()
            } else {
                req.env.removed.join(", ")
            }
        ),
        Status::Enforced,
    );
    if let Some(tmp) = &req.tmpdir {
        line(
            "environment",
            format!(
                "TMPDIR={} (private to this run, removed at exit)",
                tmp.display()
            ),
            Status::Enforced,
        );
    }

    Report {
        mode: mode_name(req.mode),
        kernel: kernel.release.clone(),
        landlock_abi: abi,
        seccomp: kernel.seccomp,
        program: req.program.as_ref().map(|p| p.display().to_string()),
        preset: format!(
            "{} ({})",
            match req.preset {
                Preset::None | Preset::Auto => "none",
                Preset::Node => "node",
                Preset::Python => "python",
            },
            req.preset_reason
        ),
        lines,
    }
}

/// The Landlock rights for an access class, within what the ruleset handles; a file that is not
/// a directory takes only the rights that apply to files. No grant may create device nodes or
/// issue device ioctls: a device made in a writable directory would reach the whole disk.
fn rights(access: Access, handled: u64, dir: bool) -> u64 {
    use landlock::*;
    let read = FS_READ_FILE | FS_READ_DIR;
    let all = handled & !(FS_MAKE_CHAR | FS_MAKE_BLOCK | FS_IOCTL_DEV);
    let m = match access {
        Access::Read => read,
        Access::Execute => read | FS_EXECUTE,
        Access::ReadWrite => all & !FS_EXECUTE,
        Access::ReadWriteExecute => all,
    } & handled;
    if dir {
        m
    } else {
        m & FILE_RIGHTS
    }
}

/// A resource limit to set in the child.
#[derive(Debug, Clone, Copy)]
struct Rlimit {
    which: Resource,
    value: libc::rlimit,
}

#[derive(Debug, Clone, Copy)]
enum Resource {
    NoFile,
    NProc,
    As,
    Core,
}

/// Everything the child needs, computed in the parent.
pub struct Prepared {
    pub report: Report,
    /// The program to execute (absolute) and the environment to give it.
    pub program: PathBuf,
    pub env: Vec<(OsString, OsString)>,
    ruleset: Option<landlock::Ruleset>,
    filters: Vec<Vec<libc::sock_filter>>,
    rlimits: Vec<Rlimit>,
    isolation: isolate::Isolation,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("program", &self.program)
            .field("ruleset", &self.ruleset)
            .field("filters", &self.filters.len())
            .field("rlimits", &self.rlimits)
            .field("isolation", &self.isolation)
            .finish_non_exhaustive()
    }
}

/// Why the sandbox cannot be prepared: the refusal of `require` mode, or a system call that
/// failed while building the rules. The message says what to do.
#[derive(Debug)]
pub struct Refused(pub String);

/// Builds everything the child applies. In `require` mode, refuses when any rule of the report
/// is dropped.
pub fn prepare(req: Request, kernel: &Kernel) -> Result<Prepared, Refused> {
    let report = plan(&req, kernel);
    let dropped = report.dropped();
    if req.mode == SandboxMode::Require && !dropped.is_empty() {
        let list: Vec<String> = dropped
            .iter()
            .map(|l| match &l.status {
                Status::Dropped(why) => format!("{} ({why})", l.rule),
                _ => l.rule.clone(),
            })
            .collect();
        let what = if kernel.abi() == 0 {
            "use a kernel ≥ 5.13 with landlock in lsm= (≥ 6.12 for the whole default profile)"
        } else {
            "use a newer kernel (Linux ≥ 6.12 enforces the whole default profile)"
        };
        return Err(Refused(format!(
            "sandbox.mode = \"require\" but this kernel (Linux {}, Landlock ABI {}) cannot enforce: {}. To fix: {what}, or set sandbox.mode = \"best-effort\" (start without these rules) or \"off\" in your policy",
            kernel.release,
            kernel.abi(),
            list.join("; ")
        )));
    }
    let program = req
        .program
        .clone()
        .ok_or_else(|| Refused("no server command to sandbox".into()))?;
    let abi = kernel.abi();
    let ruleset = if abi > 0 {
        let handled = landlock::handled_fs(abi);
        let scoped = (if req.scope_signals {
            landlock::SCOPE_SIGNAL
        } else {
            0
        } | if req.scope_abstract_unix_sockets {
            landlock::SCOPE_ABSTRACT_UNIX_SOCKET
        } else {
            0
        }) & landlock::scopes(abi);
        let net = landlock::handled_net(abi);
        let failed = |what: String, e: io::Error| {
            Refused(format!(
                "building the Landlock ruleset failed at {what}: {e}"
            ))
        };
        let rs = landlock::Ruleset::new(abi, handled, net, scoped)
            .map_err(|e| failed("landlock_create_ruleset".into(), e))?;
        for r in &req.paths {
            if let PathState::Open { fd, dir } = &r.state {
                let access = rights(r.access, handled, *dir);
                rs.allow_path(fd, access)
                    .map_err(|e| failed(format!("{}", r.path.display()), e))?;
            }
        }
        if net != 0 {
            for &port in &req.tcp_connect {
                rs.allow_port(port, landlock::NET_CONNECT_TCP)
                    .map_err(|e| failed(format!("TCP connect port {port}"), e))?;
            }
            for &port in &req.tcp_bind {
                rs.allow_port(port, landlock::NET_BIND_TCP)
                    .map_err(|e| failed(format!("TCP bind port {port}"), e))?;
            }
        }
        Some(rs)
    } else {
        None
    };
    let filters = if kernel.seccomp {
        seccomp::programs(seccomp::Options {
            allow_udp: req.allow_udp,
            allow_unix: req.allow_unix_sockets,
            allow_other_sockets: req.allow_other_sockets,
            deny_listen: listen_denied(&req),
            memfd_noexec_seal: kernel.memfd_noexec_seal,
        })
    } else {
        Vec::new()
    };
    let writable = req
        .paths
        .iter()
        .filter(|r| matches!(r.state, PathState::Open { .. }))
        .filter_map(|r| match r.access {
            Access::ReadWrite => isolate::writable_grant(&r.path, false),
            Access::ReadWriteExecute => isolate::writable_grant(&r.path, true),
            Access::Read | Access::Execute => None,
        })
        .collect();
    let isolation = isolate::Isolation::new(kernel.namespaces.is_ok(), writable);
    Ok(Prepared {
        report,
        program,
        env: req.env.passed,
        ruleset,
        filters,
        rlimits: rlimits(&req.limits),
        isolation,
    })
}

/// The limits to set, each capped at mcpguard's own hard limit (raising a hard limit would fail
/// for an unprivileged user, and a lower value is stricter anyway).
fn rlimits(l: &crate::policy::SandboxLimits) -> Vec<Rlimit> {
    let hard = |which: Resource| {
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit struct into `cur`, which is live.
        let ok = unsafe { libc::getrlimit(resource_id(which), &mut cur) } == 0;
        if ok {
            cur.rlim_max
        } else {
            libc::RLIM_INFINITY
        }
    };
    let mut out = Vec::new();
    for (which, limit, scale) in [
        (Resource::NoFile, l.open_files, 1u64),
        (Resource::NProc, l.processes, 1),
        (Resource::As, l.address_space_mb, 1 << 20),
    ] {
        if let Limit::Max(n) = limit {
            let v = n.saturating_mul(scale).min(hard(which));
            out.push(Rlimit {
                which,
                value: libc::rlimit {
                    rlim_cur: v,
                    rlim_max: v,
                },
            });
        }
    }
    if !l.core_dumps {
        out.push(Rlimit {
            which: Resource::Core,
            value: libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            },
        });
    }
    out
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
type ResourceId = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type ResourceId = libc::c_int;

fn resource_id(r: Resource) -> ResourceId {
    match r {
        Resource::NoFile => libc::RLIMIT_NOFILE,
        Resource::NProc => libc::RLIMIT_NPROC,
        Resource::As => libc::RLIMIT_AS,
        Resource::Core => libc::RLIMIT_CORE,
    }
}

impl Prepared {
    /// Applies the sandbox to the calling process. Runs in the forked child between fork and
    /// exec, so only raw, async-signal-safe system calls on memory the parent prepared: no
    /// allocation, no locks, no formatting (`io::Error::last_os_error` only reads errno).
    /// Order: the namespaces (which fork: only the server process returns from them), limits,
    /// capabilities dropped, no_new_privs (Landlock and seccomp require it), Landlock, then
    /// seccomp last so that its filters do not have to allow the calls before them.
    pub fn apply_in_child(&self) -> io::Result<()> {
        self.isolation.enter()?;
        for r in &self.rlimits {
            // SAFETY: setrlimit reads one live rlimit struct.
            if unsafe { libc::setrlimit(resource_id(r.which), &r.value) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        self.isolation.drop_capabilities()?;
        // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some(rs) = &self.ruleset {
            landlock::restrict_self(rs.raw_fd())?;
        }
        for f in &self.filters {
            seccomp::install(f)?;
        }
        Ok(())
    }

    /// The descriptor of the ruleset, for tests that check it is close-on-exec.
    pub fn ruleset_fd(&self) -> Option<i32> {
        self.ruleset.as_ref().map(|r| r.raw_fd())
    }
}

/// The private temporary directory of one run: created 0700 under the inherited temporary
/// directory, passed to the server as `TMPDIR`, removed (with its contents) when dropped.
/// A SIGKILLed mcpguard leaves it behind; its name says whose it was.
#[derive(Debug)]
pub struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    pub fn create() -> io::Result<PrivateTmp> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let mut last = None;
        for _ in 0..16 {
            let path = base.join(format!("mcpguard-{}-{}", std::process::id(), random_hex()));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    // Landlock rules follow the real path; a temporary directory reached through
                    // a symlink (macOS-style /tmp) must be granted where it really is.
                    let path = std::fs::canonicalize(&path).unwrap_or(path);
                    return Ok(PrivateTmp { path });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no unique name")))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        // std's remove_dir_all does not follow symlinks the server may have planted.
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn random_hex() -> String {
    use std::io::Read;
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        b = t.to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A sandbox ready for one run: the prepared rules and the private temporary directory, which is
/// removed when this is dropped (after the server has exited).
#[derive(Debug)]
pub struct Setup {
    pub prepared: std::sync::Arc<Prepared>,
    pub tmp: PrivateTmp,
}

/// Resolves, plans and prepares the sandbox for `command` under `profile`. `Ok(None)` when the
/// profile is off. In best-effort mode the caller reports `prepared.report.dropped()`.
pub fn setup(
    profile: &Sandbox,
    program: &Path,
    args: &[OsString],
    extra: &Extra,
    kernel: &Kernel,
) -> Result<Option<Setup>, Refused> {
    if profile.mode == SandboxMode::Off {
        return Ok(None);
    }
    let tmp = PrivateTmp::create().map_err(|e| {
        Refused(format!(
            "cannot create the private temporary directory in {}: {e}",
            std::env::temp_dir().display()
        ))
    })?;
    let ctx = PathContext::from_process(Some(tmp.path().to_path_buf()));
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let req = resolve(&Inputs {
        profile,
        program: Some(program),
        args,
        extra,
        ctx: &ctx,
        env: &env,
    })
    .map_err(Refused)?;
    let prepared = prepare(req, kernel)?;
    Ok(Some(Setup {
        prepared: std::sync::Arc::new(prepared),
        tmp,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    fn the_environment_keeps_only_named_variables() {
        let vars = os(&[
            ("PATH", "/usr/bin"),
            ("HOME", "/home/u"),
            ("LC_ALL", "C"),
            ("GITHUB_TOKEN", "secret"),
            ("LC_SECRET_TOKEN", "secret"),
            ("TMPDIR", "/tmp"),
            ("PATHX", "x"),
        ]);
        let allow: Vec<String> = ["PATH", "HOME", "LC_ALL", "TMPDIR"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let plan = filter_env(&vars, &allow);
        assert_eq!(
            plan.passed,
            os(&[("PATH", "/usr/bin"), ("HOME", "/home/u"), ("LC_ALL", "C")])
        );
        assert_eq!(
            plan.removed,
            ["GITHUB_TOKEN", "LC_SECRET_TOKEN", "TMPDIR", "PATHX"]
        );
    }

    #[test]
    fn rights_follow_the_access_class_and_the_file_type() {
        use landlock::*;
        let h = handled_fs(7);
        assert_eq!(rights(Access::Read, h, true), FS_READ_FILE | FS_READ_DIR);
        assert_eq!(rights(Access::Read, h, false), FS_READ_FILE);
        assert_eq!(rights(Access::Execute, h, false), FS_READ_FILE | FS_EXECUTE);
        let rw = rights(Access::ReadWrite, h, true);
        assert_eq!(rw & FS_EXECUTE, 0, "nothing writable is executable");
        assert_ne!(
            rw & (FS_MAKE_REG | FS_REMOVE_FILE | FS_TRUNCATE | FS_REFER),
            0
        );
        assert_eq!(
            rights(Access::ReadWrite, h, false),
            FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE
        );
        let no_devices = FS_MAKE_CHAR | FS_MAKE_BLOCK | FS_IOCTL_DEV;
        assert_eq!(rights(Access::ReadWriteExecute, h, true), h & !no_devices);
        assert_eq!(rw & no_devices, 0, "no device nodes, no device ioctls");
        // ABI 1 handles neither truncate nor refer, so no rule may carry them.
        assert_eq!(
            rights(Access::ReadWrite, handled_fs(1), true) & FS_TRUNCATE,
            0
        );
    }

    #[test]
    fn automatic_rules_never_grant_the_root_or_home() {
        let home = Path::new("/home/u");
        assert!(too_broad(Path::new("/"), Some(home)));
        assert!(too_broad(Path::new("/home"), Some(home)));
        assert!(too_broad(Path::new("/home/u"), Some(home)));
        assert!(!too_broad(Path::new("/home/u/bin"), Some(home)));
        assert!(!too_broad(Path::new("/usr/bin"), Some(home)));
    }

    fn request(mode: SandboxMode) -> Request {
        let dir = tempfile::tempdir().unwrap();
        let profile = Sandbox {
            mode,
            preset: Preset::None,
            read: vec![crate::policy::PolicyPath::parse("/nonexistent-mcpguard-test").unwrap()],
            ..Sandbox::default()
        };
        let ctx = PathContext {
            tmpdir: Some(dir.path().to_path_buf()),
            home: Some(PathBuf::from("/nonexistent-home")),
            ..PathContext::default()
        };
        let env = os(&[("PATH", "/usr/bin"), ("API_KEY", "x")]);
        resolve(&Inputs {
            profile: &profile,
            program: Some(Path::new("/usr/bin/true")),
            args: &[],
            extra: &Extra::default(),
            ctx: &ctx,
            env: &env,
        })
        .unwrap()
    }

    fn kernel(abi: u32, seccomp: bool) -> Kernel {
        Kernel {
            landlock: if abi == 0 {
                landlock::Abi::Unavailable("no Landlock here".into())
            } else {
                landlock::Abi::Available(abi)
            },
            seccomp,
            release: "test".into(),
            namespaces: Ok(()),
            memfd_noexec_seal: true,
        }
    }

    #[test]
    fn the_report_tells_what_each_abi_enforces() {
        let req = request(SandboxMode::Require);
        let full = plan(&req, &kernel(7, true));
        assert!(full.dropped().is_empty(), "{}", full.text());
        let text = full.text();
        assert!(text.contains("/nonexistent-mcpguard-test"), "{text}");
        assert!(text.contains("skipped: does not exist"), "{text}");
        assert!(text.contains("removed: API_KEY"), "{text}");
        assert!(text.contains("passed: PATH, TMPDIR"), "{text}");
        assert!(
            !text.contains("x\n") && !text.contains("=x"),
            "values never appear"
        );

        let dropped = |abi, seccomp| -> Vec<String> {
            plan(&req, &kernel(abi, seccomp))
                .dropped()
                .iter()
                .map(|l| l.rule.clone())
                .collect()
        };
        let five = dropped(5, true);
        assert_eq!(five.len(), 2, "{five:?}");
        assert!(
            five.iter().all(|r| r.contains("outside the sandbox")),
            "{five:?}"
        );
        let four = dropped(4, true);
        assert!(four.iter().any(|r| r.contains("ioctl")), "{four:?}");
        let three = dropped(3, true);
        assert!(three.iter().any(|r| r.contains("TCP connect")), "{three:?}");
        assert!(dropped(2, true).iter().any(|r| r.contains("truncation")));
        let none = dropped(0, true);
        assert!(none.iter().any(|r| r.contains("/usr")), "{none:?}");
        let no_seccomp = dropped(7, false);
        assert_eq!(no_seccomp.len(), 10, "{no_seccomp:?}");
        assert!(no_seccomp.iter().any(|r| r.contains("UDP")));
        assert!(no_seccomp.iter().any(|r| r.contains("TCP Fast Open")));
        assert!(no_seccomp.iter().any(|r| r.contains("keyrings")));
    }

    #[test]
    fn the_report_names_what_stays_open_and_never_claims_every_rule() {
        let req = request(SandboxMode::Require);
        let full = plan(&req, &kernel(7, true));
        let text = full.text();
        assert!(!text.contains("every rule"), "{text}");
        let residual: Vec<&str> = full.residual().iter().map(|l| l.rule.as_str()).collect();
        assert!(
            residual.iter().any(|r| r.starts_with("stat, access")),
            "{residual:?}"
        );
        assert!(text.contains("2 residual risk(s)"), "{text}");
        // Without namespaces the metadata, ld.so and setsid gaps are named, with the reason.
        let mut k = kernel(7, true);
        k.namespaces = Err("no user namespaces here".into());
        k.memfd_noexec_seal = false;
        let without = plan(&req, &k);
        let open: Vec<String> = without
            .residual()
            .iter()
            .map(|l| format!("{} {:?}", l.rule, l.status))
            .collect();
        assert_eq!(open.len(), 6, "{open:#?}");
        for want in [
            "chmod",
            "ld.so",
            "setsid",
            "MFD_NOEXEC_SEAL",
            "no user namespaces here",
        ] {
            assert!(open.iter().any(|r| r.contains(want)), "{want}: {open:#?}");
        }
        assert!(
            without.dropped().is_empty(),
            "residual risks do not stop require mode"
        );
        assert!(without.text().contains("6 residual risk(s)"));
    }

    #[test]
    fn require_refuses_what_the_kernel_cannot_enforce_and_says_what_to_do() {
        let err = prepare(request(SandboxMode::Require), &kernel(0, true)).unwrap_err();
        assert!(err.0.contains("sandbox.mode = \"require\""), "{}", err.0);
        assert!(err.0.contains("Landlock ABI 0"), "{}", err.0);
        assert!(err.0.contains("best-effort"), "{}", err.0);
        let err = prepare(request(SandboxMode::Require), &kernel(5, true)).unwrap_err();
        assert!(
            err.0.contains("signal scoping needs Landlock ABI 6"),
            "{}",
            err.0
        );
        // best-effort starts with what there is, and the report keeps what was dropped.
        let p = prepare(request(SandboxMode::BestEffort), &kernel(0, true)).unwrap();
        assert!(p.ruleset.is_none());
        assert!(!p.report.dropped().is_empty());
    }
}
