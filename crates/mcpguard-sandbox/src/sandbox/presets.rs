//! Discovery of the paths a server needs beyond the policy's lists: the server program's own
//! directory, and the runtime presets (node, python) that make real servers start.
//!
//! Everything here reads the file system (existence, symlink targets, `#!` lines, `pyvenv.cfg`)
//! but decides nothing: it returns candidate paths with the reason each was added, and the
//! caller opens, filters and reports them.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::policy::{PathContext, Preset};

/// What a discovered path may be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    Read,
    /// Read and execute.
    Execute,
    ReadWrite,
    /// Read, write and execute. No preset grants it: a writable tree the server can also run
    /// code from is one where it can plant code (policies may still name one).
    ReadWriteExecute,
}

impl Access {
    pub fn label(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Execute => "execute",
            Access::ReadWrite => "read-write",
            Access::ReadWriteExecute => "read-write-execute",
        }
    }
}

/// A path found by discovery, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub access: Access,
    pub path: PathBuf,
    pub origin: String,
    /// The environment variable whose value gave this path (`UV_CACHE_DIR`, `npm_config_cache`,
    /// …): when the path is granted, the server gets the variable with that value, so that it
    /// uses the path that was granted rather than falling back to one that was not.
    pub var: Option<&'static str>,
    /// Variables the server gets set to these values when the path is granted, whatever
    /// mcpguard's own environment says (the private caches point the package managers there).
    pub sets: Vec<(&'static str, PathBuf)>,
}

fn found(access: Access, path: impl Into<PathBuf>, origin: impl Into<String>) -> Found {
    Found {
        access,
        path: path.into(),
        origin: origin.into(),
        var: None,
        sets: Vec::new(),
    }
}

impl Found {
    fn with_var(self, var: Option<&'static str>) -> Found {
        Found { var, ..self }
    }
}

/// The environment of mcpguard, as read by discovery.
pub struct Env<'a> {
    pub vars: &'a [(OsString, OsString)],
}

impl Env<'_> {
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        self.vars
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_os_str())
    }

    /// A variable holding an absolute path, or nothing.
    fn abs_path(&self, name: &str) -> Option<PathBuf> {
        self.get(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    }

    /// [`Env::abs_path`], with the name, for a [`Found`] that comes from it.
    fn var_path(&self, name: &'static str) -> Option<(PathBuf, Option<&'static str>)> {
        self.abs_path(name).map(|p| (p, Some(name)))
    }
}

/// An XDG base directory: the placeholder value (`$XDG_CACHE_HOME`), naming the variable when the
/// value is the environment's, else `~/<fallback>`.
fn base_dir(
    env: &Env<'_>,
    name: &'static str,
    value: Option<&PathBuf>,
    ctx: &PathContext,
    fallback: &str,
) -> Option<(PathBuf, Option<&'static str>)> {
    match value {
        Some(v) => {
            let var = (env.abs_path(name).as_ref() == Some(v)).then_some(name);
            Some((v.clone(), var))
        }
        None => ctx.home.as_ref().map(|h| (h.join(fallback), None)),
    }
}

/// Finds `program` the way execvp would: a name with a `/` is a path (relative to `cwd`), any
/// other name is looked up in `path_var`. Only executable regular files count.
pub fn find_program(program: &OsStr, path_var: Option<&OsStr>, cwd: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if program.as_bytes().contains(&b'/') {
        let p = cwd.join(program);
        return executable(&p).then_some(p);
    }
    if program.is_empty() {
        return None;
    }
    std::env::split_paths(path_var?)
        .map(|dir| {
            if dir.as_os_str().is_empty() {
                cwd.join(program)
            } else {
                cwd.join(dir).join(program)
            }
        })
        .find(|p| executable(p))
}

/// The runtime a program name belongs to.
fn runtime_of(name: &str) -> Option<Preset> {
    match name {
        "node" | "nodejs" | "npx" | "npm" => Some(Preset::Node),
        "uv" | "uvx" | "pipx" => Some(Preset::Python),
        n if n
            .strip_prefix("python")
            .is_some_and(|v| v.chars().all(|c| c.is_ascii_digit() || c == '.')) =>
        {
            Some(Preset::Python)
        }
        _ => None,
    }
}

fn file_name(p: &Path) -> &str {
    p.file_name().and_then(OsStr::to_str).unwrap_or("")
}

/// The interpreter named by a script's `#!` line, and the program `env` is asked to run when
/// the interpreter is `env` (`#!/usr/bin/env node`, `#!/usr/bin/env -S node --flag`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shebang {
    pub interpreter: PathBuf,
    pub via_env: Option<String>,
}

pub fn shebang(program: &Path) -> Option<Shebang> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    parse_shebang(&head[..n])
}

fn parse_shebang(head: &[u8]) -> Option<Shebang> {
    let line = head.strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n')?];
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let interpreter = PathBuf::from(words.next()?);
    let via_env = if file_name(&interpreter) == "env" {
        words.find(|w| !w.starts_with('-')).map(str::to_string)
    } else {
        None
    };
    Some(Shebang {
        interpreter,
        via_env,
    })
}

/// The preset `auto` picks for `program`, and why (for the report).
pub fn auto(program: &Path) -> (Preset, String) {
    if let Some(p) = runtime_of(file_name(program)) {
        return (p, format!("the server command is {}", file_name(program)));
    }
    let real = std::fs::canonicalize(program).unwrap_or_else(|_| program.to_path_buf());
    if let Some(p) = runtime_of(file_name(&real)) {
        return (p, format!("the server command runs {}", real.display()));
    }
    if let Some(sb) = shebang(&real) {
        let name = sb
            .via_env
            .clone()
            .unwrap_or_else(|| file_name(&sb.interpreter).to_string());
        if let Some(p) = runtime_of(&name) {
            return (p, format!("the server command is a {name} script"));
        }
    }
    (
        Preset::None,
        "the server command is neither node nor python".into(),
    )
}

/// The install prefix of a runtime binary: the directory above `bin/` when it lives in one (so
/// that `lib/` beside it is included), else its own directory.
fn prefix_of(binary: &Path) -> Option<PathBuf> {
    let dir = binary.parent()?;
    if file_name(dir) == "bin" {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

/// The program's own directory (read and execute), and its symlink target's when that differs.
pub fn program_dirs(program: &Path) -> Vec<Found> {
    let mut out = Vec::new();
    if let Some(dir) = program.parent() {
        out.push(found(
            Access::Execute,
            dir,
            "the server program's directory",
        ));
    }
    if let Ok(real) = std::fs::canonicalize(program) {
        if let Some(dir) = real.parent() {
            if Some(dir) != program.parent() {
                out.push(found(
                    Access::Execute,
                    dir,
                    "the directory of the server program's symlink target",
                ));
            }
        }
    }
    out
}

/// The node preset: node's install prefix, the npm cache, the package trees of the scripts the
/// command runs, and the /proc and /sys files libuv reads for CPU and memory figures.
pub fn node(program: &Path, args: &[OsString], env: &Env<'_>, ctx: &PathContext) -> Vec<Found> {
    let mut out = Vec::new();
    let cwd = ctx.cwd.clone().unwrap_or_else(|| PathBuf::from("/"));
    let node_binary = if matches!(file_name(program), "node" | "nodejs") {
        Some(program.to_path_buf())
    } else {
        match shebang(&std::fs::canonicalize(program).unwrap_or_else(|_| program.into())) {
            Some(Shebang {
                interpreter,
                via_env: None,
            }) if matches!(file_name(&interpreter), "node" | "nodejs") => Some(interpreter),
            _ => find_program(OsStr::new("node"), env.get("PATH"), &cwd),
        }
    };
    if let Some(real) = node_binary.and_then(|n| std::fs::canonicalize(n).ok()) {
        if let Some(prefix) = prefix_of(&real) {
            out.push(found(
                Access::Execute,
                prefix,
                "preset node: node's install prefix",
            ));
        }
    }
    // The user's npm cache holds the packages `npx` runs outside any sandbox: read-only here.
    // The server writes into a cache of its own ([`private_cache`]), which npm is told of.
    let cache = env
        .var_path("npm_config_cache")
        .or_else(|| ctx.home.as_ref().map(|h| (h.join(".npm"), None)));
    if let Some((cache, _)) = cache {
        out.push(found(
            Access::Read,
            cache,
            "preset node: the npm cache (read-only: npx runs what it holds outside the sandbox)",
        ));
    }
    if let Some(private) = private_cache(program, args, ctx) {
        let npm = private.join("npm");
        let _ = std::fs::create_dir_all(&npm);
        out.push(Found {
            sets: vec![
                ("npm_config_cache", npm),
                ("XDG_CACHE_HOME", private.clone()),
            ],
            ..found(
                Access::ReadWrite,
                private,
                "preset node: the server's private cache (npm_config_cache, XDG_CACHE_HOME)",
            )
        });
    }
    // The scripts the command runs: the program itself when it is a script, and every argument
    // that names an existing file (`node /path/to/dist/index.js`).
    let mut scripts = vec![std::fs::canonicalize(program).unwrap_or_else(|_| program.into())];
    for a in args {
        let p = cwd.join(a);
        if p.is_file() {
            if let Ok(real) = std::fs::canonicalize(&p) {
                scripts.push(real);
            }
        }
    }
    for script in scripts {
        if let Some(tree) = package_tree(&script) {
            if !out.iter().any(|f| f.path == tree.path) {
                out.push(tree);
            }
        }
    }
    for p in [
        "/proc/cpuinfo",
        "/proc/meminfo",
        "/proc/stat",
        "/sys/fs/cgroup",
        "/sys/devices/system/cpu",
    ] {
        out.push(found(
            Access::Read,
            p,
            "preset node: CPU and memory figures",
        ));
    }
    out
}

/// The runtime facts every server gets to read, whatever its preset (issue 33): the CPU and
/// memory figures that runtimes size their thread pools and heaps by. duckdb aborts without
/// them; libuv (node), Go, glibc's `sysconf` and python's `os.cpu_count` read some. Each is
/// named with why it is safe in `docs/threat-model.md` ("Runtime facts"). Read-only, files
/// only (no directory is granted here), and only the ones that exist; the process's own
/// `/proc/self` entries are [`OWN_PROC`], granted by the child itself.
pub fn runtime_facts() -> Vec<Found> {
    let mut out = Vec::new();
    let mut add = |p: PathBuf| {
        if p.exists() && !out.iter().any(|f: &Found| f.path == p) {
            out.push(found(
                Access::Read,
                p,
                "runtime facts: CPU and memory figures",
            ));
        }
    };
    for p in RUNTIME_FACTS {
        add(PathBuf::from(p));
    }
    // The limits of the cgroup mcpguard runs in (the server starts in the same one), as
    // `/proc/self/cgroup` names it: cgroup v2's unified line `0::PATH`, and v1's memory and
    // cpu controllers.
    if let Ok(text) = std::fs::read_to_string("/proc/self/cgroup") {
        for (dir, files) in cgroup_limit_files(&text) {
            for f in files {
                add(dir.join(f));
            }
        }
    }
    out
}

/// Host-wide runtime facts (see [`runtime_facts`]).
pub const RUNTIME_FACTS: [&str; 8] = [
    "/proc/stat",
    "/proc/meminfo",
    "/proc/cpuinfo",
    "/sys/devices/system/cpu/online",
    "/sys/devices/system/cpu/possible",
    "/sys/devices/system/cpu/present",
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/kernel/mm/transparent_hugepage/hpage_pmd_size",
];

/// The entries of the server's own `/proc/self` it may read (each a file of its own process;
/// the child grants them on itself before the sandbox is applied, `Prepared::apply_in_child`).
/// Not `environ`, `mem`, `fd` or `net`: `net` shows the host's sockets (the server shares the
/// host's network namespace).
pub const OWN_PROC: [&std::ffi::CStr; 9] = [
    c"/proc/self/cgroup",
    c"/proc/self/mountinfo",
    c"/proc/self/status",
    c"/proc/self/stat",
    c"/proc/self/statm",
    c"/proc/self/maps",
    c"/proc/self/limits",
    c"/proc/self/cmdline",
    c"/proc/self/auxv",
];

/// The cgroup folders and limit files a `/proc/self/cgroup` text names: for v2 (`0::PATH`)
/// `cpu.max`, `cpu.weight`, `memory.max`, `memory.high`, `memory.current` and
/// `cpuset.cpus.effective` in `/sys/fs/cgroup/PATH`; for v1, the memory and cpu controllers'
/// limit files in `/sys/fs/cgroup/CONTROLLER/PATH`.
fn cgroup_limit_files(text: &str) -> Vec<(PathBuf, &'static [&'static str])> {
    let mut out: Vec<(PathBuf, &'static [&'static str])> = Vec::new();
    let base = Path::new("/sys/fs/cgroup");
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let rel = path.trim_start_matches('/');
        // A path that climbs out of the hierarchy is not a cgroup folder.
        if rel.split('/').any(|c| c == "..") {
            continue;
        }
        if controllers.is_empty() {
            out.push((
                base.join(rel),
                &[
                    "cpu.max",
                    "cpu.weight",
                    "memory.max",
                    "memory.high",
                    "memory.current",
                    "cpuset.cpus.effective",
                ],
            ));
            continue;
        }
        for c in controllers.split(',') {
            match c {
                "memory" => out.push((
                    base.join("memory").join(rel),
                    &["memory.limit_in_bytes", "memory.usage_in_bytes"],
                )),
                "cpu" | "cpuacct" => out.push((
                    base.join(controllers).join(rel),
                    &["cpu.cfs_quota_us", "cpu.cfs_period_us", "cpu.shares"],
                )),
                _ => {}
            }
        }
    }
    out
}

/// The server's private cache folder: `$XDG_STATE_HOME/mcpguard/server-caches/ID` (else
/// `~/.local/state/…`), where ID is the first 16 hex digits of the SHA-256 of the server command
/// (program and arguments). Created 0700 here and held for this process's life; caches unused
/// for 30 days, or beyond the 32 most recently used, are removed (`sandbox::caches`). `None`
/// when no state folder is known or it cannot be created (the server then has no writable
/// cache, only its private `TMPDIR`).
///
/// Why: a package manager's cache or tool folder granted for write to every server of its kind
/// let one server rewrite what `npx`/`uvx` later run outside any sandbox, and what other
/// servers run. A cache of the server's own holds only what this server wrote, and nothing
/// outside the sandbox runs from it.
pub fn private_cache(program: &Path, args: &[OsString], ctx: &PathContext) -> Option<PathBuf> {
    use sha2::{Digest, Sha256};
    use std::os::unix::ffi::OsStrExt;
    let state = ctx
        .state_home
        .clone()
        .or_else(|| ctx.home.as_ref().map(|h| h.join(".local/state")))?;
    let mut h = Sha256::new();
    h.update(program.as_os_str().as_bytes());
    for a in args {
        h.update([0u8]);
        h.update(a.as_bytes());
    }
    let id: String = h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    // Held while this session runs; the folder keeps a bounded set (`sandbox::caches`).
    super::caches::open(&state.join("mcpguard/server-caches"), &id)
}

/// mcpguard's package store, by the rule `process::packages::store` follows (this layer may not
/// import it; a unit test there checks that the two agree): `$MCPGUARD_PACKAGE_DIR`, else
/// `$XDG_DATA_HOME/mcpguard/packages`, else `~/.local/share/mcpguard/packages`.
pub fn package_store(env: &Env<'_>, home: Option<&Path>) -> Option<PathBuf> {
    let from = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    from("MCPGUARD_PACKAGE_DIR")
        .or_else(|| from("XDG_DATA_HOME").map(|d| d.join("mcpguard/packages")))
        .or_else(|| home.map(|h| h.join(".local/share/mcpguard/packages")))
}

/// The files the user's own tools trust or run later that lie inside a writable grant of
/// `grant`: shell start-up files, `~/.ssh`, git's and other tools' configuration (`~/.config`,
/// `~/.gitconfig`), `~/.local` (user programs, uv's tools, mcpguard's package store), and
/// mcpguard's package store wherever it is. A server that can write one of them plants code
/// that runs later outside the sandbox (issue 31), which no grant of a project is for.
pub fn trusted_inside(grant: &Path, home: Option<&Path>, store: Option<&Path>) -> Vec<PathBuf> {
    const IN_HOME: [&str; 17] = [
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zshenv",
        ".zprofile",
        ".zlogin",
        ".ssh",
        ".gitconfig",
        ".config",
        ".local",
        ".npmrc",
        ".pypirc",
        ".pam_environment",
        ".xsessionrc",
    ];
    let grant = std::fs::canonicalize(grant).unwrap_or_else(|_| grant.to_path_buf());
    let mut out: Vec<PathBuf> = Vec::new();
    if let Some(home) = home {
        let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
        out.extend(
            IN_HOME
                .iter()
                .map(|n| home.join(n))
                .filter(|t| t.starts_with(&grant)),
        );
    }
    if let Some(store) = store {
        let store = std::fs::canonicalize(store).unwrap_or_else(|_| store.to_path_buf());
        if store.starts_with(&grant) && !out.iter().any(|t| store.starts_with(t)) {
            out.push(store);
        }
    }
    out
}

/// Where a node script's code lives: its nearest `node_modules` ancestor (a package and its
/// dependencies; read and execute, because packages ship helper binaries), else the nearest
/// directory with a `package.json` (read), else the script's directory (read).
fn package_tree(script: &Path) -> Option<Found> {
    let dir = script.parent()?;
    if let Some(nm) = dir.ancestors().find(|a| file_name(a) == "node_modules") {
        return Some(found(
            Access::Execute,
            nm,
            format!("preset node: the node_modules tree of {}", script.display()),
        ));
    }
    if script
        .extension()
        .and_then(OsStr::to_str)
        .is_none_or(|e| !matches!(e, "js" | "mjs" | "cjs"))
    {
        // A native program is not a node script; its directory is already granted.
        return None;
    }
    if let Some(pkg) = dir.ancestors().find(|a| a.join("package.json").is_file()) {
        return Some(found(
            Access::Read,
            pkg,
            format!("preset node: the package of {}", script.display()),
        ));
    }
    Some(found(
        Access::Read,
        dir,
        format!("preset node: the directory of {}", script.display()),
    ))
}

/// The python preset: the interpreter's prefix, the virtual environment (and the prefix of the
/// interpreter it was made from), what the command line runs (the script's folder, the module's
/// folder, the `uv run` project and its `.venv`: [`python_code`]), and uv's cache and data
/// directories.
pub fn python(program: &Path, args: &[OsString], env: &Env<'_>, ctx: &PathContext) -> Vec<Found> {
    let mut out = Vec::new();
    let cwd = ctx.cwd.clone().unwrap_or_else(|| PathBuf::from("/"));
    let code = python_code(program, args, &cwd);
    let mut interpreters = Vec::new();
    if runtime_of(file_name(program)).is_some() {
        interpreters.push(program.to_path_buf());
    }
    match shebang(program) {
        Some(Shebang {
            interpreter,
            via_env: None,
        }) => interpreters.push(interpreter),
        Some(Shebang {
            via_env: Some(name),
            ..
        }) => interpreters.extend(find_program(OsStr::new(&name), env.get("PATH"), &cwd)),
        None => {}
    }
    if interpreters.is_empty() {
        interpreters.extend(find_program(OsStr::new("python3"), env.get("PATH"), &cwd));
    }
    let mut venvs: Vec<(PathBuf, Option<&'static str>)> =
        env.var_path("VIRTUAL_ENV").into_iter().collect();
    venvs.extend(code.venv.map(|v| (v, None)));
    for i in &interpreters {
        // A virtual environment: <venv>/bin/python with <venv>/pyvenv.cfg. Its interpreter is a
        // symlink, so the venv is found from the path as written, before resolving links.
        if let Some(venv) = i
            .parent()
            .filter(|d| file_name(d) == "bin")
            .and_then(Path::parent)
        {
            if venv.join("pyvenv.cfg").is_file() {
                venvs.push((venv.to_path_buf(), None));
            }
        }
        if let Some(prefix) = std::fs::canonicalize(i).ok().as_deref().and_then(prefix_of) {
            out.push(found(
                Access::Execute,
                prefix,
                format!("preset python: the prefix of {}", i.display()),
            ));
        }
    }
    out.extend(code.found);
    for (venv, var) in venvs {
        if let Some(home) = venv_home(&venv) {
            if let Some(prefix) = std::fs::canonicalize(&home)
                .ok()
                .and_then(|h| prefix_of(&h.join("python")))
            {
                out.push(found(
                    Access::Execute,
                    prefix,
                    format!(
                        "preset python: the base interpreter of {} (pyvenv.cfg home)",
                        venv.display()
                    ),
                ));
            }
        }
        out.push(
            found(
                Access::Execute,
                venv,
                "preset python: the virtual environment",
            )
            .with_var(var),
        );
    }
    let uv_cache = env.var_path("UV_CACHE_DIR").or_else(|| {
        base_dir(
            env,
            "XDG_CACHE_HOME",
            ctx.cache_home.as_ref(),
            ctx,
            ".cache",
        )
        .map(|(c, var)| (c.join("uv"), var))
    });
    let uv_data = base_dir(
        env,
        "XDG_DATA_HOME",
        ctx.data_home.as_ref(),
        ctx,
        ".local/share",
    )
    .map(|(d, var)| (d.join("uv"), var));
    // uv's cache and data folders hold the tools `uvx` and `uv tool` run outside any sandbox,
    // and the interpreters uv installs: read and execute here, never write. The server (and a
    // `uv run` inside the sandbox) writes into a cache of its own, which uv is told of.
    for (dir, what) in [(uv_cache, "uv's cache"), (uv_data, "uv's data directory")] {
        if let Some((dir, _)) = dir {
            out.push(found(
                Access::Execute,
                dir,
                format!("preset python: {what} (read-only: uvx runs the tools it holds outside the sandbox)"),
            ));
        }
    }
    if let Some(private) = private_cache(program, args, ctx) {
        let uv = private.join("uv");
        let _ = std::fs::create_dir_all(&uv);
        out.push(Found {
            sets: vec![("UV_CACHE_DIR", uv), ("XDG_CACHE_HOME", private.clone())],
            ..found(
                Access::ReadWrite,
                private,
                "preset python: the server's private cache (UV_CACHE_DIR, XDG_CACHE_HOME)",
            )
        });
    }
    let mut seen = Vec::new();
    out.retain(|f| {
        let new = !seen.contains(&f.path);
        seen.push(f.path.clone());
        new
    });
    out
}

/// What a python command line runs, beside the interpreter.
#[derive(Debug, Default)]
struct PythonCode {
    /// Folders to read: the script's, the module's, the project's.
    found: Vec<Found>,
    /// The `uv run` project's virtual environment, when it has one.
    venv: Option<PathBuf>,
}

/// Options of the python interpreter that take a value (`-W ignore`, `-X utf8`), so that the
/// value is not taken for the script.
const PYTHON_VALUE_OPTIONS: &[&str] = &["-W", "-X", "--check-hash-based-pycs"];

/// Options of `uv` and `uv run` that take a value, for the same reason; `--directory` and
/// `--project` are read, the rest skipped.
const UV_VALUE_OPTIONS: &[&str] = &[
    "--directory",
    "--project",
    "--with",
    "--with-editable",
    "--with-requirements",
    "--python",
    "-p",
    "--extra",
    "--group",
    "--only-group",
    "--no-group",
    "--env-file",
    "--index",
    "--default-index",
    "--index-url",
    "--extra-index-url",
    "--find-links",
    "-f",
    "--package",
    "--cache-dir",
    "--config-file",
    "--color",
];

/// The code a python command runs, as the interpreter and uv find it:
/// - `python [options] FILE`: FILE's folder (read), because the script's folder is the first
///   entry of `sys.path` and a script imports the modules beside it;
/// - `python -m NAME`: the current directory (read), only when it holds NAME's top-level package
///   or module (`-m` puts the current directory on `sys.path`; a module installed in the
///   environment needs nothing more);
/// - `uv run [--directory D | --project P] [FILE]`: the project (D, P, or the current directory
///   when it has a `pyproject.toml`; read) and its `.venv` (as a virtual environment), and FILE's
///   folder as for python.
///
/// Too broad folders (the root, the home directory and its ancestors) are refused by the
/// caller, like every automatic rule.
fn python_code(program: &Path, args: &[OsString], cwd: &Path) -> PythonCode {
    let mut code = PythonCode::default();
    let words: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    let name = file_name(program);
    if matches!(name, "uv") {
        uv_run(&words, cwd, &mut code);
    } else if runtime_of(name) == Some(Preset::Python) && !matches!(name, "uvx" | "pipx") {
        python_args(&words, cwd, &mut code);
    }
    code
}

/// `python [options] (FILE | -m NAME | -c CODE | -) [args]`.
fn python_args(words: &[&str], cwd: &Path, code: &mut PythonCode) {
    let mut i = 0;
    while let Some(&w) = words.get(i) {
        if w == "-m" || (w.starts_with("-m") && !w.starts_with("--")) {
            let module = if w == "-m" {
                words.get(i + 1).copied()
            } else {
                Some(&w[2..])
            };
            if let Some(top) = module.and_then(|m| m.split('.').next()) {
                if cwd.join(top).is_dir() || cwd.join(format!("{top}.py")).is_file() {
                    code.found.push(found(
                        Access::Read,
                        cwd,
                        format!("preset python: the current directory, which holds module {top} (python -m)"),
                    ));
                }
            }
            return;
        }
        if w == "-c" || (w.starts_with("-c") && !w.starts_with("--")) || w == "-" {
            return;
        }
        if PYTHON_VALUE_OPTIONS.contains(&w) {
            i += 2;
            continue;
        }
        if w.starts_with('-') {
            i += 1;
            continue;
        }
        script_folder(cwd, w, code);
        return;
    }
}

/// The folder of a script a command line names, when it is a file.
fn script_folder(cwd: &Path, script: &str, code: &mut PythonCode) {
    let path = cwd.join(script);
    if !path.is_file() {
        return;
    }
    let real = std::fs::canonicalize(&path).unwrap_or(path);
    if let Some(dir) = real.parent() {
        code.found.push(found(
            Access::Read,
            dir,
            format!(
                "preset python: the folder of the script {} (it imports modules beside it)",
                real.display()
            ),
        ));
    }
}

/// `uv [--directory D] run [--directory D | --project P] [options] [FILE | python FILE | CMD]`.
fn uv_run(words: &[&str], cwd: &Path, code: &mut PythonCode) {
    let mut dir: Option<PathBuf> = None;
    let mut project: Option<PathBuf> = None;
    let mut run = false;
    let mut i = 0;
    let mut rest: &[&str] = &[];
    while let Some(&w) = words.get(i) {
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v)),
            _ => (w, None),
        };
        if UV_VALUE_OPTIONS.contains(&flag) {
            let value = inline.or_else(|| words.get(i + 1).copied());
            match flag {
                "--directory" => dir = value.map(|v| cwd.join(v)),
                "--project" => project = value.map(PathBuf::from),
                _ => {}
            }
            i += if inline.is_some() { 1 } else { 2 };
            continue;
        }
        if w.starts_with('-') {
            i += 1;
            continue;
        }
        if !run {
            if w != "run" {
                // Another uv subcommand (`uv tool run` is uvx): nothing to add.
                return;
            }
            run = true;
            i += 1;
            continue;
        }
        rest = &words[i..];
        break;
    }
    if !run {
        return;
    }
    // uv resolves --project against --directory, which it also changes into.
    let base = dir.clone().unwrap_or_else(|| cwd.to_path_buf());
    let root = match (&project, &dir) {
        (Some(p), _) => Some(base.join(p)),
        (None, Some(d)) => Some(d.clone()),
        (None, None) => Some(base.clone()).filter(|d| d.join("pyproject.toml").is_file()),
    };
    if let Some(root) = root.filter(|r| r.is_dir()) {
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        code.found.push(found(
            Access::Read,
            &root,
            "preset python: the project of uv run",
        ));
        if root.join(".venv/pyvenv.cfg").is_file() {
            code.venv = Some(root.join(".venv"));
        }
    }
    match rest {
        [first, more @ ..] if runtime_of(file_name(Path::new(first))) == Some(Preset::Python) => {
            python_args(more, &base, code)
        }
        [first, ..] if first.ends_with(".py") => script_folder(&base, first, code),
        _ => {}
    }
}

/// The `home` key of a virtual environment's `pyvenv.cfg`: the directory of the interpreter
/// the environment was made from.
fn venv_home(venv: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(venv.join("pyvenv.cfg")).ok()?;
    text.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == "home")
            .then(|| PathBuf::from(v.trim()))
            .filter(|p| p.is_absolute())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cgroup_limit_files_follow_proc_self_cgroup_and_never_climb_out() {
        use std::path::PathBuf;
        let v2 = super::cgroup_limit_files("0::/user.slice/app.scope\n");
        assert_eq!(v2.len(), 1);
        assert_eq!(
            v2[0].0,
            PathBuf::from("/sys/fs/cgroup/user.slice/app.scope")
        );
        assert!(v2[0].1.contains(&"memory.max") && v2[0].1.contains(&"cpu.max"));
        let v1 =
            super::cgroup_limit_files("4:memory:/docker/x\n2:cpu,cpuacct:/docker/x\n7:blkio:/\n");
        let dirs: Vec<_> = v1.iter().map(|(d, _)| d.clone()).collect();
        assert!(dirs.contains(&PathBuf::from("/sys/fs/cgroup/memory/docker/x")));
        assert!(dirs.contains(&PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/docker/x")));
        assert!(!dirs.iter().any(|d| d.to_string_lossy().contains("blkio")));
        assert!(super::cgroup_limit_files("0::/../../etc\n").is_empty());
    }

    use super::*;

    #[test]
    fn runtimes_are_recognised_by_name() {
        for (name, want) in [
            ("node", Some(Preset::Node)),
            ("npx", Some(Preset::Node)),
            ("python3.11", Some(Preset::Python)),
            ("python", Some(Preset::Python)),
            ("uvx", Some(Preset::Python)),
            ("python-config", None),
            ("sh", None),
            ("mcp-server-time", None),
        ] {
            assert_eq!(runtime_of(name), want, "{name}");
        }
    }

    #[test]
    fn shebang_lines() {
        let sb = parse_shebang(b"#!/usr/bin/env -S node --no-warnings\nrest").unwrap();
        assert_eq!(sb.via_env.as_deref(), Some("node"));
        let sb = parse_shebang(b"#!/opt/venv/bin/python\n").unwrap();
        assert_eq!(sb.interpreter, PathBuf::from("/opt/venv/bin/python"));
        assert_eq!(sb.via_env, None);
        assert_eq!(parse_shebang(b"\x7fELF..."), None);
        assert_eq!(
            parse_shebang(b"#!/bin/sh"),
            None,
            "no newline: not a whole line"
        );
    }

    #[test]
    fn a_venv_script_finds_the_venv_and_its_base_interpreter() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("base");
        std::fs::create_dir_all(base.join("bin")).unwrap();
        std::fs::write(base.join("bin/python3.11"), "").unwrap();
        let venv = dir.path().join("venv");
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::os::unix::fs::symlink(base.join("bin/python3.11"), venv.join("bin/python")).unwrap();
        std::fs::write(
            venv.join("pyvenv.cfg"),
            format!("home = {}\nversion = 3.11.7\n", base.join("bin").display()),
        )
        .unwrap();
        let script = venv.join("bin/mcp-server-x");
        std::fs::write(
            &script,
            format!("#!{}\nimport x\n", venv.join("bin/python").display()),
        )
        .unwrap();
        let ctx = PathContext {
            home: Some(dir.path().join("home")),
            ..PathContext::default()
        };
        let found = python(&script, &[], &Env { vars: &[] }, &ctx);
        let paths: Vec<&Path> = found.iter().map(|f| f.path.as_path()).collect();
        let base = base.canonicalize().unwrap();
        assert!(paths.contains(&base.as_path()), "{found:#?}");
        assert!(paths.contains(&venv.as_path()), "{found:#?}");
        // uv's cache is read and run from, never written (issue 31); the server writes into
        // a cache of its own, which uv is pointed at.
        assert!(found
            .iter()
            .any(|f| f.path.ends_with(".cache/uv") && f.access == Access::Execute));
        assert!(!found.iter().any(|f| f.access == Access::ReadWriteExecute));
        let private = found
            .iter()
            .find(|f| f.access == Access::ReadWrite)
            .expect("a private cache");
        assert!(
            private
                .path
                .starts_with(dir.path().join("home/.local/state/mcpguard/server-caches")),
            "{private:?}"
        );
        assert_eq!(
            private.sets,
            vec![
                ("UV_CACHE_DIR", private.path.join("uv")),
                ("XDG_CACHE_HOME", private.path.clone())
            ]
        );
        assert!(private.path.join("uv").is_dir());
        // Another command has another cache; the same command the same one.
        let again = private_cache(&script, &[], &ctx).unwrap();
        assert_eq!(again, private.path);
        let other = private_cache(&script, &[OsString::from("--other")], &ctx).unwrap();
        assert_ne!(other, private.path);
    }

    #[test]
    fn trusted_files_inside_a_writable_grant_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        let store = root.join("store");
        std::fs::create_dir_all(home.join("project/.git/hooks")).unwrap();
        let names = |g: &Path| trusted_inside(g, Some(&home), Some(&store));
        // A project folder holds none of them.
        assert_eq!(names(&home.join("project")), Vec::<PathBuf>::new());
        // The home directory holds the shell's start-up files, ~/.ssh, ~/.config, ~/.local.
        let in_home = names(&home);
        for want in [
            ".bashrc",
            ".profile",
            ".ssh",
            ".config",
            ".local",
            ".gitconfig",
        ] {
            assert!(in_home.contains(&home.join(want)), "{want}: {in_home:?}");
        }
        assert!(!in_home.contains(&store));
        // An ancestor of both holds the package store too.
        let all = names(&root);
        assert!(
            all.contains(&store) && all.contains(&home.join(".ssh")),
            "{all:?}"
        );
        assert_eq!(names(&home.join(".config")), vec![home.join(".config")]);
        // The store inside ~/.local is named once, by ~/.local.
        let local_store = home.join(".local/share/mcpguard/packages");
        assert_eq!(
            trusted_inside(&home.join(".local"), Some(&home), Some(&local_store)),
            vec![home.join(".local")]
        );
    }

    fn code_of(program: &str, args: &[&str], cwd: &Path) -> Vec<(PathBuf, Access)> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        let code = python_code(Path::new(program), &args, cwd);
        let mut out: Vec<_> = code.found.into_iter().map(|f| (f.path, f.access)).collect();
        out.extend(code.venv.map(|v| (v, Access::Execute)));
        out
    }

    #[test]
    fn python_command_lines_bring_the_script_module_or_project() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let srv = root.join("srv");
        std::fs::create_dir_all(srv.join("pkg")).unwrap();
        std::fs::write(srv.join("server.py"), "").unwrap();
        let read = |p: &Path| vec![(p.to_path_buf(), Access::Read)];
        let script = srv.join("server.py");
        let script = script.to_str().unwrap();
        assert_eq!(code_of("/usr/bin/python3", &[script], &root), read(&srv));
        assert_eq!(
            code_of(
                "python3.12",
                &["-u", "-W", "ignore", "-X", "utf8", script, "--flag"],
                &root
            ),
            read(&srv)
        );
        assert_eq!(code_of("python3", &["srv/server.py"], &root), read(&srv));
        assert_eq!(code_of("python3", &["-m", "pkg.main"], &srv), read(&srv));
        assert_eq!(code_of("python3", &["-mpkg"], &srv), read(&srv));
        assert_eq!(
            code_of("python3", &["-m", "installed_elsewhere"], &srv),
            vec![]
        );
        assert_eq!(
            code_of("python3", &["-c", "import pkg", script], &root),
            vec![]
        );
        assert_eq!(code_of("python3", &["/no/such/file.py"], &root), vec![]);

        let proj = root.join("proj");
        std::fs::create_dir_all(proj.join(".venv")).unwrap();
        std::fs::write(proj.join(".venv/pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        std::fs::write(proj.join("pyproject.toml"), "").unwrap();
        let project = vec![
            (proj.clone(), Access::Read),
            (proj.join(".venv"), Access::Execute),
        ];
        let p = proj.to_str().unwrap();
        assert_eq!(
            code_of("uv", &["run", "--directory", p, "server"], &root),
            project
        );
        assert_eq!(
            code_of("uv", &["--directory", p, "run", "server"], &root),
            project
        );
        assert_eq!(
            code_of("uv", &["run", "--project=proj", "x"], &root),
            project
        );
        assert_eq!(
            code_of("uv", &["run", "--with", "httpx", "x"], &proj),
            project
        );
        assert_eq!(
            code_of("uv", &["run", "x"], &root),
            vec![],
            "no pyproject.toml here"
        );
        assert_eq!(code_of("uv", &["tool", "run", "x"], &proj), vec![]);
        let mut with_script = project.clone();
        with_script.push((srv.clone(), Access::Read));
        let (a, b, v) = (&with_script[0], &with_script[2], &with_script[1]);
        assert_eq!(
            code_of("uv", &["run", "--directory", p, "python", script], &root),
            vec![a.clone(), b.clone(), v.clone()]
        );
    }

    #[test]
    fn node_scripts_bring_their_package_tree() {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("node_modules/@scope/server/dist");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("index.js"), "").unwrap();
        let tree = package_tree(&pkg.join("index.js")).unwrap();
        assert_eq!(tree.path, dir.path().join("node_modules"));
        assert_eq!(tree.access, Access::Execute);
        let own = dir.path().join("own/src");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(dir.path().join("own/package.json"), "{}").unwrap();
        std::fs::write(own.join("main.mjs"), "").unwrap();
        let tree = package_tree(&own.join("main.mjs")).unwrap();
        assert_eq!(
            (tree.path, tree.access),
            (dir.path().join("own"), Access::Read)
        );
        assert_eq!(package_tree(&own.join("native-binary")), None);
    }

    #[test]
    fn programs_are_found_like_execvp() {
        let path = OsString::from("/nonexistent:/usr/bin:/bin");
        let sh = find_program(OsStr::new("sh"), Some(&path), Path::new("/")).unwrap();
        assert!(sh.ends_with("sh"));
        assert_eq!(
            find_program(OsStr::new("no-such-program-x"), Some(&path), Path::new("/")),
            None
        );
        assert_eq!(
            find_program(OsStr::new("/etc/passwd"), Some(&path), Path::new("/")),
            None,
            "not executable"
        );
    }
}
