//! The sandbox of the server process (SPEC §5): Landlock for files, TCP ports and IPC scoping;
//! a new session, no inherited descriptors, no capabilities, and PID and mount namespaces
//! (`isolate`); seccomp for what none of those reach (sockets Landlock does not confine, TCP
//! Fast Open, keyrings, process control by pid, the kernel's privileged interfaces);
//! `no_new_privs`; resource limits; an environment allowlist of exact names; a private
//! temporary directory per run. What none of it can close on this kernel is named in the
//! report as a residual risk.
//!
//! Three stages, so that the child does as little as possible and the report is the truth:
//! 1. [`resolve`] (here) turns the policy's profile into a [`Request`]: placeholders expanded,
//!    presets and the server's own directory discovered, every path opened `O_PATH` (a missing
//!    path is kept as such, to be reported), the environment filtered.
//! 2. [`plan`] (`report.rs`) compares the request with what this kernel offers ([`Kernel`]) and
//!    writes the [`Report`]: each rule enforced, dropped (the kernel cannot), skipped (nothing to
//!    enforce) or a residual risk. It is a pure function, so the report for any kernel is
//!    unit-tested.
//! 3. [`prepare`] (`prepare.rs`) refuses in `require` mode when anything was dropped, then builds
//!    the Landlock ruleset (`landlock.rs`), the seccomp filters (`seccomp.rs`), the isolation
//!    (`isolate.rs`) and the resource limits in the parent. The forked child runs
//!    [`Prepared::apply_in_child`]: raw system calls only (unshare, mount, clone, setrlimit,
//!    prctl, capset, landlock_restrict_self, seccomp), no allocation, no locks, no formatting.
//!
//! A spawn that succeeds has passed every step in the child (a failing step fails the spawn), so
//! "applied" in the audit log and the diagnostics is known, not assumed.

pub(crate) mod caches;
pub mod explain;
pub(crate) mod installers;
pub mod isolate;
pub mod landlock;
pub mod observe;
pub(crate) mod pins;
mod prepare;
pub mod presets;
mod report;
pub mod seccomp;
pub(crate) mod shims;

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::policy::{PathContext, Preset, Sandbox, SandboxMode};
pub use prepare::{prepare, Prepared, Refused};
pub use presets::Access;
pub use report::{plan, Line, Report, Status};

/// Paths granted on the command line for this run (`--sandbox-read`, `--sandbox-write`), on top
/// of the policy: the host configuration names the directory a server such as server-filesystem
/// is given, without a policy file per directory.
#[derive(Debug, Clone, Default)]
pub struct Extra {
    pub read: Vec<PathBuf>,
    pub read_write: Vec<PathBuf>,
    /// Variables passed to the server by name for this run (`--sandbox-env`, which `wrap` writes
    /// for the names a host configuration sets), on top of `sandbox.env`.
    pub env: Vec<String>,
    /// TCP destinations for this run (`--sandbox-connect`), on top of `sandbox.connect`.
    pub connect: Vec<crate::policy::Destination>,
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
    /// Whether mcpguard runs as root, so that the server would start with every capability.
    pub root: bool,
    /// The cgroup v2 folder delegated to this user with the memory and pids controllers
    /// (`isolate::delegated_cgroup`), or why there is none.
    pub cgroup: Result<PathBuf, String>,
    /// `/proc/sys/kernel/core_pattern` when it pipes a crash to a program (`|…`: systemd-coredump,
    /// apport). The kernel ignores RLIMIT_CORE 0 for such a pattern, so it decides whether
    /// "no core dumps" can be claimed.
    pub core_pipe: Option<String>,
}

impl Kernel {
    /// Whether the server's processes are counted apart from the user's other processes: it
    /// has its own user namespace, where `RLIMIT_NPROC` counts only that namespace's processes
    /// (REFERENCE §7). Root's server has one only with `drop_root` (and uid 0 in the initial
    /// namespace is exempt from the limit); without namespaces the count would be every process
    /// of the user. The plan and the preparation both ask, so it lives with the kernel's facts.
    pub(crate) fn processes_counted_apart(&self, drop_root: bool) -> bool {
        self.namespaces.is_ok() && (!self.root || drop_root)
    }

    pub fn probe() -> Kernel {
        Kernel {
            landlock: landlock::probe(),
            seccomp: seccomp::available(),
            release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            namespaces: isolate::probe(),
            memfd_noexec_seal: seccomp::memfd_noexec_seal_available(),
            root: isolate::running_as_root(),
            cgroup: isolate::delegated_cgroup(),
            core_pipe: std::fs::read_to_string("/proc/sys/kernel/core_pattern")
                .ok()
                .map(|p| p.trim().to_string())
                .filter(|p| p.starts_with('|')),
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
    /// Variables passed although `sandbox.env` does not name them, because a preset granted a
    /// path from their value: the name and the rule it gave.
    pub for_grants: Vec<(String, String)>,
    /// Variables passed because `--sandbox-env` named them (names only; the values never
    /// appear in reports or logs).
    pub for_run: Vec<String>,
}

/// The profile resolved for one run: plain data, plus the open path descriptors.
#[derive(Debug)]
pub struct Request {
    pub mode: SandboxMode,
    pub preset: Preset,
    pub preset_reason: String,
    /// The program to execute: the server command as found on PATH, or the interpreter a
    /// version manager's shim would have run (`shim` says so).
    pub program: Option<PathBuf>,
    pub shim: Option<String>,
    pub paths: Vec<PathRule>,
    /// The TCP ports the server may connect to: `sandbox.tcp_connect` and the ports of the
    /// destinations.
    pub tcp_connect: Vec<u16>,
    /// `sandbox.tcp_connect` alone: the ports open to any address.
    pub tcp_connect_any: Vec<u16>,
    /// `sandbox.connect` and `--sandbox-connect`. Their addresses are enforced by the
    /// observer (`observe`), which makes the connect itself, unless `tcp_connect_any` opens
    /// their port to any address.
    pub connect: Vec<crate::policy::Destination>,
    pub tcp_bind: Vec<u16>,
    pub allow_udp: bool,
    pub allow_unix_sockets: bool,
    pub allow_other_sockets: bool,
    pub scope_signals: bool,
    pub scope_abstract_unix_sockets: bool,
    pub drop_root: bool,
    /// `sandbox.explain_denials`: whether the observer watches opens and binds to name what the
    /// sandbox refused.
    pub explain_denials: bool,
    pub limits: crate::policy::SandboxLimits,
    pub env: EnvPlan,
    pub tmpdir: Option<PathBuf>,
    /// The trusted files inside each read-write grant of the policy and the command line
    /// (`pins`), made read-only in the server's view.
    pub pins: Vec<pins::Pins>,
}

impl Request {
    /// Whether `listen(2)` is refused: nothing legitimate listens when no TCP port may be bound
    /// and the server may not create UNIX sockets.
    pub(crate) fn listen_denied(&self) -> bool {
        self.tcp_bind.is_empty() && !self.allow_unix_sockets
    }

    /// The destinations whose address mcpguard enforces: those of `sandbox.connect` and
    /// `--sandbox-connect` whose port `sandbox.tcp_connect` does not open to any address.
    pub fn by_address(&self) -> Vec<crate::policy::Destination> {
        self.connect
            .iter()
            .filter(|d| !self.tcp_connect_any.contains(&d.port))
            .cloned()
            .collect()
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

/// Variables every login or desktop session has, which nobody expects a server to need by name:
/// they are never named as withheld. Exact names, and the prefixes below.
const ORDINARY: &[&str] = &[
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "PATH",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "TERM",
    "COLORTERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "MAIL",
    "HOSTNAME",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "LESS",
    "LESSOPEN",
    "LESSCLOSE",
    "LS_COLORS",
    "TMPDIR",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "DBUS_SESSION_BUS_ADDRESS",
    "SSH_AUTH_SOCK",
    "SSH_AGENT_PID",
    "SSH_CONNECTION",
    "SSH_CLIENT",
    "SSH_TTY",
    "DESKTOP_SESSION",
    "SESSION_MANAGER",
    "GDMSESSION",
    "MOTD_SHOWN",
    "NO_COLOR",
    // mcpguard's own: the system bus its approvals ask polkit on.
    "DBUS_SYSTEM_BUS_ADDRESS",
    // What the hosts set for every process they start (Claude Code's child marker and Node's
    // Windows-compatibility switch), not for one server.
    "AI_AGENT",
    "CLAUDECODE",
    "NoDefaultCurrentDirectoryInExePath",
];
/// Prefixes of the same: the locale, the session's folders, mcpguard's own, and the hosts'
/// own variables for every child (Claude Code, Codex, Gemini CLI, fast-agent, VS Code, Cursor,
/// and the Node.js tooling they run).
const ORDINARY_PREFIXES: &[&str] = &[
    "LC_",
    "XDG_",
    "MCPGUARD_",
    "TERM_",
    "CLAUDE_",
    "CODEX_",
    "GEMINI_",
    "FAST_AGENT",
    "VSCODE_",
    "CURSOR_",
    "COREPACK_",
];

/// The names of the variables that were in mcpguard's environment (`ours`), were not passed to
/// the server (`passed`), are not part of the ordinary session environment ([`ORDINARY`]), and —
/// when the environment of the process that started mcpguard is known (`parent`) — were not
/// already there with the same value. What is left is what the starting program set for this
/// server in particular: a host configuration's `env` (say `MEMORY_FILE_PATH`), which a server
/// then silently lacks unless `--sandbox-env NAME` passes it. Sorted, names only.
pub fn withheld_notable(
    ours: &[(OsString, OsString)],
    passed: &[(OsString, OsString)],
    parent: Option<&[(OsString, OsString)]>,
) -> Vec<String> {
    let mut names: Vec<String> = ours
        .iter()
        .filter(|(k, _)| !passed.iter().any(|(p, _)| p == k))
        .filter(|(k, v)| parent.is_none_or(|env| !env.iter().any(|(pk, pv)| pk == k && pv == v)))
        .filter_map(|(k, _)| k.to_str())
        .filter(|k| !ORDINARY.contains(k) && !ORDINARY_PREFIXES.iter().any(|p| k.starts_with(p)))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The environment the parent process was started with (`/proc/PPID/environ`), when readable.
pub fn parent_environment() -> Option<Vec<(OsString, OsString)>> {
    use std::os::unix::ffi::OsStrExt;
    let ppid = std::os::unix::process::parent_id();
    let bytes = std::fs::read(format!("/proc/{ppid}/environ")).ok()?;
    Some(
        bytes
            .split(|b| *b == 0)
            .filter_map(|entry| {
                let eq = entry.iter().position(|b| *b == b'=')?;
                Some((
                    std::ffi::OsStr::from_bytes(&entry[..eq]).to_os_string(),
                    std::ffi::OsStr::from_bytes(&entry[eq + 1..]).to_os_string(),
                ))
            })
            .collect(),
    )
}

/// Passes the variables a preset granted a path from, with the value it granted, when the
/// allowlist removed them: a server (or uv, npm) that does not see `UV_CACHE_DIR` falls back to
/// another cache, which is not granted. Only variables whose path was granted pass.
fn pass_grant_vars(
    plan: &mut EnvPlan,
    env: &[(OsString, OsString)],
    vars: &[(&'static str, Option<OsString>, String)],
) {
    for (name, value, rule) in vars {
        if let Some(value) = value {
            // A value the preset sets (a private cache) replaces whatever was passed: the
            // package manager must not fall back to the user's own cache.
            plan.passed.retain(|(k, _)| k != name);
            plan.passed.push((OsString::from(name), value.clone()));
            plan.removed.retain(|r| r != name);
            plan.for_grants.retain(|(n, _)| n != name);
            plan.for_grants.push((name.to_string(), rule.clone()));
            continue;
        }
        if plan.passed.iter().any(|(k, _)| k == name) {
            continue;
        }
        if let Some((k, v)) = env.iter().find(|(k, _)| k == name) {
            plan.passed.push((k.clone(), v.clone()));
            plan.removed.retain(|r| r != name);
            plan.for_grants.push((name.to_string(), rule.clone()));
        }
    }
}

/// Passes the variables `--sandbox-env` names, when mcpguard's environment has them (a host
/// sets a server's `env` in the environment of the command it starts, which is mcpguard).
fn pass_named_vars(plan: &mut EnvPlan, env: &[(OsString, OsString)], names: &[String]) {
    for name in names {
        if name == "TMPDIR" || plan.passed.iter().any(|(k, _)| k == name.as_str()) {
            continue;
        }
        if let Some((k, v)) = env.iter().find(|(k, _)| k == name.as_str()) {
            plan.passed.push((k.clone(), v.clone()));
            plan.removed.retain(|r| r != name);
            plan.for_run.push(name.clone());
        }
    }
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
    // (access, path, origin, automatic, the variable the path came from, variables it sets)
    type Wanted = (
        Access,
        PathBuf,
        String,
        bool,
        Option<&'static str>,
        Vec<(&'static str, PathBuf)>,
    );
    let mut wanted: Vec<Wanted> = Vec::new();
    for (list, access, key) in [
        (&p.execute, Access::Execute, "sandbox.execute"),
        (&p.read, Access::Read, "sandbox.read"),
        (&p.read_write, Access::ReadWrite, "sandbox.read_write"),
    ] {
        for pp in list {
            let path = pp.expand(inp.ctx).map_err(|e| {
                format!("{key}: {e}; set it in the environment or change the policy")
            })?;
            wanted.push((access, path, format!("{key} {pp}"), false, None, Vec::new()));
        }
    }
    for path in &inp.extra.read {
        wanted.push((
            Access::Read,
            path.clone(),
            "--sandbox-read".into(),
            false,
            None,
            Vec::new(),
        ));
    }
    for path in &inp.extra.read_write {
        wanted.push((
            Access::ReadWrite,
            path.clone(),
            "--sandbox-write".into(),
            false,
            None,
            Vec::new(),
        ));
    }
    // A writable grant never reaches what the user's tools run or trust later (issue 31): the
    // policy's and the flags' grants are checked before anything is opened.
    let store = presets::package_store(&presets::Env { vars: inp.env }, home);
    for (access, path, origin, ..) in &wanted {
        if !matches!(access, Access::ReadWrite | Access::ReadWriteExecute) {
            continue;
        }
        let mut trusted = presets::trusted_inside(path, home, store.as_deref());
        if !trusted.is_empty() {
            // The ones that exist first; a missing one could be planted as well.
            trusted.sort_by_key(|t| !t.exists());
            let mut names: Vec<String> = trusted
                .iter()
                .take(6)
                .map(|t| t.display().to_string())
                .collect();
            if trusted.len() > 6 {
                names.push(format!("{} more", trusted.len() - 6));
            }
            return Err(format!(
                "{origin} grants {} for write, and within it are (or a server could create) {}, which \
                 your shell, git, ssh or mcpguard itself run or trust later outside the sandbox: a \
                 server could plant code there. Grant the folder the server works on instead (a project or data folder \
                 beneath it, with --sandbox-write or sandbox.read_write)",
                path.display(),
                names.join(", ")
            ));
        }
    }
    let env = presets::Env { vars: inp.env };
    // A version manager's shim is replaced by the interpreter it would run, read from the
    // manager's files: the shim itself runs the manager's tree, which is not granted.
    let cwd = inp.ctx.cwd.clone().unwrap_or_else(|| PathBuf::from("/"));
    let shim = match inp.program {
        Some(program) => shims::resolve(program, &env, &cwd)?,
        None => None,
    };
    let program = shim.as_ref().map(|s| s.real.as_path()).or(inp.program);
    let (preset, preset_reason) = match (p.preset, program) {
        (Preset::Auto, Some(program)) => {
            let (found, why) = presets::auto(program);
            (found, format!("auto: {why}"))
        }
        (Preset::Auto, None) => (Preset::None, "auto: no server command given".to_string()),
        (other, _) => (other, "set by the policy".to_string()),
    };
    if let Some(program) = program {
        let mut found = presets::program_dirs(program);
        match preset {
            Preset::Node => found.extend(presets::node(program, inp.args, &env, inp.ctx)),
            Preset::Python => found.extend(presets::python(program, inp.args, &env, inp.ctx)),
            Preset::None | Preset::Auto => {}
        }
        wanted.extend(
            found
                .into_iter()
                .map(|f| (f.access, f.path, f.origin, true, f.var, f.sets)),
        );
    }
    // The read-only runtime facts (CPU and memory figures) every runtime may read.
    wanted.extend(
        presets::runtime_facts()
            .into_iter()
            .map(|f| (f.access, f.path, f.origin, true, f.var, f.sets)),
    );
    let mut grant_vars: Vec<(&'static str, Option<OsString>, String)> = Vec::new();
    let paths: Vec<PathRule> = wanted
        .into_iter()
        .map(|(access, path, origin, automatic, var, sets)| {
            let state = if automatic && too_broad(&path, home) {
                PathState::NotGranted(
                    "too broad to grant automatically (the root or your home directory); name what the server needs in sandbox.read or sandbox.execute".into(),
                )
            } else {
                open_path(&path)
            };
            if let (Some(var), PathState::Open { .. }) = (var, &state) {
                grant_vars.push((var, None, format!("{origin}: {}", path.display())));
            }
            if let PathState::Open { .. } = &state {
                for (name, value) in sets {
                    grant_vars.push((
                        name,
                        Some(value.into_os_string()),
                        format!("{origin}: {}", path.display()),
                    ));
                }
            }
            PathRule {
                access,
                path,
                origin,
                state,
            }
        })
        .collect();
    // The private caches and the run's own TMPDIR are the server's alone: nothing the person's
    // tools trust is in them.
    let pins = wanted_pins(&paths, inp.ctx.tmpdir.as_deref());
    let mut env_plan = filter_env(inp.env, &p.env);
    pass_grant_vars(&mut env_plan, inp.env, &grant_vars);
    pass_named_vars(&mut env_plan, inp.env, &inp.extra.env);
    if let Some(tmp) = &inp.ctx.tmpdir {
        env_plan
            .passed
            .push((OsString::from("TMPDIR"), tmp.clone().into_os_string()));
    }
    Ok(Request {
        mode: p.mode,
        preset,
        preset_reason,
        program: program.map(Path::to_path_buf),
        shim: shim.map(|s| s.note),
        paths,
        tcp_connect: {
            let mut ports = p.tcp_connect.clone();
            for d in p.connect.iter().chain(&inp.extra.connect) {
                if !ports.contains(&d.port) {
                    ports.push(d.port);
                }
            }
            ports
        },
        tcp_connect_any: p.tcp_connect.clone(),
        connect: p
            .connect
            .iter()
            .chain(&inp.extra.connect)
            .cloned()
            .collect(),
        tcp_bind: p.tcp_bind.clone(),
        allow_udp: p.allow_udp,
        allow_unix_sockets: p.allow_unix_sockets,
        allow_other_sockets: p.allow_other_sockets,
        scope_signals: p.scope_signals,
        scope_abstract_unix_sockets: p.scope_abstract_unix_sockets,
        drop_root: p.drop_root,
        explain_denials: p.explain_denials,
        limits: p.limits.clone(),
        env: env_plan,
        tmpdir: inp.ctx.tmpdir.clone(),
        pins,
    })
}

/// The trusted files ([`pins::find`]) of the open read-write grants the policy or the command
/// line made (a preset's are private caches), but the run's TMPDIR.
fn wanted_pins(paths: &[PathRule], tmpdir: Option<&Path>) -> Vec<pins::Pins> {
    let writable = || {
        paths
            .iter()
            .filter(|r| matches!(r.access, Access::ReadWrite | Access::ReadWriteExecute))
            .filter(|r| matches!(r.state, PathState::Open { .. }))
    };
    // A `.git` folder granted for write by name stays writable (the person chose it).
    let granted: Vec<PathBuf> = writable()
        .filter_map(|r| std::fs::canonicalize(&r.path).ok())
        .collect();
    writable()
        .filter(|r| matches!(r.state, PathState::Open { dir: true, .. }))
        .filter(|r| r.origin.starts_with("sandbox.") || r.origin.starts_with("--sandbox"))
        .filter(|r| tmpdir.is_none_or(|t| r.path != t))
        .filter_map(|r| pins::find(&r.path, &granted))
        .fold(Vec::new(), |mut out: Vec<pins::Pins>, p| {
            if !out.iter().any(|o| o.grant == p.grant) {
                out.push(p);
            }
            out
        })
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

/// The container runtime a server command starts, if it is one (`docker run …`, `podman run …`,
/// `nerdctl`). Such a client asks a daemon, over its socket, to start the server; the daemon
/// runs outside any sandbox mcpguard can put on its child, so confining the client would
/// confine nothing of the server.
pub fn container_runtime(program: &Path) -> Option<&'static str> {
    let name = program.file_name()?.to_str()?;
    ["docker", "podman", "nerdctl"]
        .into_iter()
        .find(|r| name == *r)
}

/// Resolves, plans and prepares the sandbox for `command` under `profile` (read from
/// `policy_file`, when one was given: a failure's explanation repeats it). `Ok(None)` when the
/// profile is off. In best-effort mode the caller reports `prepared.report.dropped()`.
pub fn setup(
    profile: &Sandbox,
    policy_file: Option<&Path>,
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
    let mut prepared = prepare(req, kernel)?;
    prepared.explain.policy = policy_file.map(Path::to_path_buf);
    prepared.explain.home = ctx.home.clone();
    Ok(Some(Setup {
        prepared: std::sync::Arc::new(prepared),
        tmp,
    }))
}

#[cfg(test)]
mod tests;
