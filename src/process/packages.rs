//! Package runners (`npx`, `uvx`) resolved once, outside the sandbox, and pinned.
//!
//! `npx -y pkg` and `uvx pkg` fetch a package from a registry on every launch, may bring a new
//! release at any time, and cannot run inside the sandbox (npx executes from its cache, which the
//! sandbox grants without exec, and both ask the network first). So a runner command is resolved
//! at capture time by the user's own package manager — `npm install` or `uv pip install`, with the
//! registry, credentials and integrity checks the user configured — into an install that mcpguard
//! keeps in its package store. The snapshot records the package identity ([`Package`]), and every
//! later run starts that exact install by its entry point (`node SCRIPT` or `VENV/bin/python
//! SCRIPT`), offline, after checking that the install is still the one that was pinned and that
//! the command still asks for it.
//!
//! What is checked at start: the install's own record (npm's `package-lock.json` entry for the
//! package: version and the registry's integrity hash; for PyPI the package's `METADATA` version
//! and the SHA-256 of its `RECORD` entries), and then the files themselves: capture records the
//! install's content digest ([`content_digest`]: one SHA-256 over the sorted list of every path
//! of the install with its kind, its executable bit and the SHA-256 of its bytes or its link
//! target) in the `package` record, which the snapshot's digest covers, and every start hashes
//! the install again and refuses it when the two differ. The labels alone are not enough: an
//! edited entry point, a planted `.pth` file or a rewritten `.pyc` keeps the version, the
//! lockfile and the `RECORD` text, and would run as "the pinned" package. Python installs are
//! compiled to bytecode at install (`--compile-bytecode`), so that the interpreter finds every
//! `.pyc` valid and never adds one to the install after capture.
//!
//! Capture and update never adopt an install already in the store: npm installs into a scratch
//! folder and replaces the store's folder unless its content is identical, and a PyPI install
//! (a virtual environment cannot be moved) is made again in place from uv's cache.
//!
//! Install scripts do not run (`npm install --ignore-scripts`): they would run outside the sandbox
//! with the user's rights, before anything was reviewed. A package that needs its install script
//! (a native addon) must be installed by hand and run by its entry point. For the same reason
//! PyPI packages are installed from wheels only (`uv pip install --no-build`): building a source
//! distribution runs its build script.
//!
//! It knows nothing of MCP or the gate; the command line glue passes plain values in.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The registries a runner installs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecosystem {
    Npm,
    Pypi,
}

impl Ecosystem {
    pub fn name(self) -> &'static str {
        match self {
            Ecosystem::Npm => "npm",
            Ecosystem::Pypi => "pypi",
        }
    }

    fn from_name(s: &str) -> Option<Ecosystem> {
        match s {
            "npm" => Some(Ecosystem::Npm),
            "pypi" => Some(Ecosystem::Pypi),
            _ => None,
        }
    }
}

/// A package runner command, as the host configuration writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runner {
    pub ecosystem: Ecosystem,
    /// The runner program as given (`npx`, `/usr/bin/uvx`).
    pub program: OsString,
    /// The package as the command asks for it (`pkg`, `pkg@1.2.3`, `pkg==1.2.3`, `pkg>=1`).
    pub spec: String,
    pub name: String,
    /// The exact version the command names, when it names one.
    pub exact: Option<String>,
    /// The command to run from the package when the runner was told (`npx -p PKG CMD`, `uvx
    /// --from PKG CMD`).
    pub bin: Option<String>,
    /// `uvx --python VERSION`.
    pub python: Option<String>,
    /// `uvx --with NAME==VERSION`: packages installed beside the server's, each pinned to an
    /// exact version, sorted.
    pub with: Vec<String>,
    /// PyPI packages the person allowed to be built from source (`--build-from-source`):
    /// their build scripts run outside the sandbox, so nothing else ever is.
    pub build_from_source: Vec<String>,
    /// The server's own arguments.
    pub args: Vec<OsString>,
}

/// The pinned identity of a package, as the snapshot records it (`servers.KEY.package`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub ecosystem: Ecosystem,
    pub name: String,
    pub version: String,
    /// npm: the registry's integrity hash of the package tarball (`sha512-…`). PyPI:
    /// `record-sha256:HEX`, the SHA-256 of the installed package's `RECORD` entries inside
    /// site-packages (each file with the hash the installer checked), sorted.
    pub integrity: String,
    /// The package as the captured command asked for it.
    pub requested: String,
    /// The command of the package that runs (a `bin` entry or a console script).
    pub bin: String,
    /// `uvx --with NAME==VERSION` packages the install holds beside the package, as the captured
    /// command asked for them (sorted). Their files are in the install, so the content digest
    /// covers them; the list is what a start compares with the command.
    pub with: Vec<String>,
    /// `sha256:HEX`, the install's content digest ([`content_digest`]). `None` in a record
    /// captured before content pinning: such a record is refused at start (capture again).
    pub content: Option<String>,
    /// `builtFromSource`: the PyPI packages of the install that were built from source at
    /// capture (`--build-from-source`), whose build scripts ran outside the sandbox: normalized
    /// names, sorted, as the install itself says ([`built_from_source`]). A start refuses an
    /// install whose list differs from the record's, so a record that does not say a package
    /// was built (one from before mcpguard recorded it) never runs such an install.
    pub built_from_source: Vec<String>,
}

impl Package {
    pub fn to_json(&self) -> Value {
        let mut v = json!({
            "ecosystem": self.ecosystem.name(),
            "name": self.name,
            "version": self.version,
            "integrity": self.integrity,
            "requested": self.requested,
            "bin": self.bin,
        });
        if let (Some(c), Some(o)) = (&self.content, v.as_object_mut()) {
            o.insert("content".into(), Value::String(c.clone()));
        }
        // Only when there are any, so that a record without them is the one it always was.
        if let (false, Some(o)) = (self.with.is_empty(), v.as_object_mut()) {
            o.insert("with".into(), json!(self.with));
        }
        if let (false, Some(o)) = (self.built_from_source.is_empty(), v.as_object_mut()) {
            o.insert("builtFromSource".into(), json!(self.built_from_source));
        }
        v
    }

    pub fn from_json(v: &Value) -> Result<Package, String> {
        let field = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("the snapshot's package record has no string `{k}`"))
        };
        let eco = field("ecosystem")?;
        let list = |k: &str| -> Result<Vec<String>, String> {
            match v.get(k) {
                None => Ok(Vec::new()),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|w| w.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or(format!(
                        "the snapshot's package record has a `{k}` that is not a list of strings"
                    )),
                Some(_) => Err(format!(
                    "the snapshot's package record has a `{k}` that is not a list"
                )),
            }
        };
        Ok(Package {
            ecosystem: Ecosystem::from_name(&eco)
                .ok_or_else(|| format!("the snapshot's package ecosystem {eco:?} is unknown"))?,
            name: field("name")?,
            version: field("version")?,
            integrity: field("integrity")?,
            requested: field("requested")?,
            bin: field("bin")?,
            with: list("with")?,
            built_from_source: list("builtFromSource")?,
            content: match v.get("content") {
                None => None,
                Some(Value::String(c)) => Some(c.clone()),
                Some(_) => {
                    return Err(
                        "the snapshot's package record has a `content` that is not a string".into(),
                    )
                }
            },
        })
    }

    /// `name@version` (npm) or `name==version` (PyPI), as a person would type it.
    pub fn label(&self) -> String {
        match self.ecosystem {
            Ecosystem::Npm => format!("{}@{}", self.name, self.version),
            Ecosystem::Pypi => format!("{}=={}", self.name, self.version),
        }
    }
}

/// A resolved install: its identity and the command that starts it without the runner.
#[derive(Debug, Clone)]
pub struct Installed {
    pub package: Package,
    pub command: Vec<OsString>,
    /// The install's folder in the store.
    pub dir: PathBuf,
    /// At start: what the content check hashed and how long it took.
    pub checked: Option<(Content, Duration)>,
}

/// Where mcpguard keeps the installs: `$MCPGUARD_PACKAGE_DIR`, else
/// `$XDG_DATA_HOME/mcpguard/packages`, else `~/.local/share/mcpguard/packages`.
pub fn store() -> Result<PathBuf, String> {
    let from = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(p) = from("MCPGUARD_PACKAGE_DIR") {
        return Ok(p);
    }
    if let Some(p) = from("XDG_DATA_HOME") {
        return Ok(p.join("mcpguard/packages"));
    }
    from("HOME")
        .map(|h| h.join(".local/share/mcpguard/packages"))
        .ok_or_else(|| {
            "cannot tell where to keep pinned packages: set MCPGUARD_PACKAGE_DIR (or HOME)".into()
        })
}

fn file_name(p: &OsStr) -> &str {
    Path::new(p)
        .file_name()
        .and_then(OsStr::to_str)
        .unwrap_or("")
}

/// Whether `command` starts a package runner mcpguard pins, and what it asks for. `Ok(None)`:
/// not a runner. `Err`: a runner in a form that cannot be pinned, with what to do instead.
pub fn parse(command: &[OsString]) -> Result<Option<Runner>, String> {
    let Some(program) = command.first() else {
        return Ok(None);
    };
    match file_name(program) {
        "npx" => parse_npx(program, &command[1..]).map(Some),
        "uvx" => parse_uvx(program, &command[1..]).map(Some),
        _ => Ok(None),
    }
}

fn text(a: &OsStr) -> Result<&str, String> {
    a.to_str()
        .ok_or_else(|| format!("the runner argument {a:?} is not valid UTF-8"))
}

/// A spec that names something other than a registry package (a path, a URL, a git remote).
fn not_from_a_registry(spec: &str) -> bool {
    spec.starts_with(['.', '/', '~']) || spec.contains(':')
}

fn parse_npx(program: &OsStr, rest: &[OsString]) -> Result<Runner, String> {
    let mut package: Option<String> = None;
    let mut i = 0;
    while i < rest.len() {
        let a = text(&rest[i])?;
        match a {
            "-y" | "--yes" | "-q" | "--quiet" | "--no-install" | "--prefer-offline" => {}
            "-p" | "--package" => {
                i += 1;
                let v = rest.get(i).ok_or("npx -p needs a package")?;
                package = Some(text(v)?.to_string());
            }
            _ if a.starts_with("--package=") => package = Some(a["--package=".len()..].into()),
            "--" => {
                i += 1;
                break;
            }
            _ if a.starts_with('-') => {
                return Err(format!(
                    "mcpguard pins npx packages but does not know the npx option {a:?}; \
                     drop it, or install the package yourself and run its entry point (`node PATH/dist/index.js`)"
                ))
            }
            _ => break,
        }
        i += 1;
    }
    let first = rest
        .get(i)
        .ok_or("npx was given no package to run")
        .map(|a| text(a).map(str::to_string))??;
    let (spec, bin) = match package {
        Some(p) => (p, Some(first)),
        None => (first, None),
    };
    if not_from_a_registry(&spec) {
        return Err(format!(
            "npx {spec:?} is not a registry package, so mcpguard cannot pin it; run its entry point directly"
        ));
    }
    // A scoped name starts with `@`; the version follows the next `@`.
    let at = spec[1..].find('@').map(|k| k + 1);
    let (name, version) = match at {
        Some(k) => (&spec[..k], Some(&spec[k + 1..])),
        None => (spec.as_str(), None),
    };
    if name.is_empty() || name.ends_with('/') {
        return Err(format!("npx package {spec:?} has no name"));
    }
    let exact = version.filter(|v| is_exact_version(v)).map(str::to_string);
    Ok(Runner {
        build_from_source: Vec::new(),
        ecosystem: Ecosystem::Npm,
        program: program.to_os_string(),
        name: name.to_string(),
        exact,
        spec,
        bin,
        python: None,
        with: Vec::new(),
        args: rest[i + 1..].to_vec(),
    })
}

fn parse_uvx(program: &OsStr, rest: &[OsString]) -> Result<Runner, String> {
    let mut from: Option<String> = None;
    let mut python: Option<String> = None;
    let mut with: Vec<String> = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let a = text(&rest[i])?;
        match a {
            "-q" | "--quiet" | "--offline" | "--isolated" | "--no-progress" => {}
            "--from" | "--python" | "-p" | "--with" | "-w" => {
                i += 1;
                let v = text(rest.get(i).ok_or(format!("uvx {a} needs a value"))?)?.to_string();
                match a {
                    "--from" => from = Some(v),
                    "--with" | "-w" => with.extend(with_specs(&v)?),
                    _ => python = Some(v),
                }
            }
            _ if a.starts_with("--from=") => from = Some(a["--from=".len()..].into()),
            _ if a.starts_with("--python=") => python = Some(a["--python=".len()..].into()),
            _ if a.starts_with("--with=") => with.extend(with_specs(&a["--with=".len()..])?),
            _ if a.starts_with('-') => {
                return Err(format!(
                    "mcpguard pins uvx packages but does not know the uvx option {a:?}; \
                     drop it, or install the package into a virtual environment and run its console script"
                ))
            }
            _ => break,
        }
        i += 1;
    }
    let first = text(rest.get(i).ok_or("uvx was given no package to run")?)?.to_string();
    let (spec, bin) = match from {
        Some(f) => (f, Some(first)),
        // `uvx pkg@1.2` is uv's shorthand for `pkg==1.2`.
        None => (first.replacen('@', "==", 1), None),
    };
    if not_from_a_registry(&spec) {
        return Err(format!(
            "uvx {spec:?} is not a registry package, so mcpguard cannot pin it; run it from a virtual environment instead"
        ));
    }
    let end = spec
        .find(['=', '<', '>', '!', '~', '[', ';', ' '])
        .unwrap_or(spec.len());
    let name = spec[..end].to_string();
    if name.is_empty() {
        return Err(format!("uvx package {spec:?} has no name"));
    }
    let exact = spec[end..]
        .strip_prefix("==")
        .filter(|v| is_exact_version(v))
        .map(str::to_string);
    Ok(Runner {
        build_from_source: Vec::new(),
        ecosystem: Ecosystem::Pypi,
        program: program.to_os_string(),
        name,
        exact,
        spec,
        bin,
        python,
        with: {
            with.sort();
            with.dedup();
            with
        },
        args: rest[i + 1..].to_vec(),
    })
}

/// The packages of one `uvx --with` value (uv takes a comma-separated list), each of which must
/// name an exact version: mcpguard pins everything the server runs, and a range would let the
/// registry choose another release at the next capture without the command changing.
fn with_specs(value: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for spec in value.split(',').map(str::trim) {
        let exact = spec
            .split_once("==")
            .filter(|(name, v)| {
                !name.is_empty()
                    && name
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                    && is_exact_version(v)
            })
            .is_some();
        if !exact {
            return Err(format!(
                "uvx --with {spec:?}: mcpguard pins every package a server runs, and this one names no exact \
                 version from the registry; write it as `--with NAME==VERSION` (the version `uv pip show NAME` \
                 prints for the one you use), or install the server into a virtual environment and run its console script"
            ));
        }
        out.push(spec.to_string());
    }
    Ok(out)
}

/// `1.2.3`, `2026.1.26`, `1.0.0-beta.1`, `0.6.2`: digits and dots, optionally a pre-release or
/// local part, and no range operator.
fn is_exact_version(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or("");
    !core.is_empty()
        && core.split('.').count() >= 2
        && core
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// How long a package manager may take to install one package.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// A program beside the runner (npx's npm and node, uvx's uv), else on PATH.
fn beside(runner: &OsStr, name: &str) -> Result<PathBuf, String> {
    let found = crate::process::child::resolve_program(&[runner.to_os_string()]).ok();
    if let Some(dir) = found.as_deref().and_then(Path::parent) {
        let p = dir.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    crate::process::child::resolve_program(&[OsString::from(name)]).map_err(|_| {
        format!(
            "`{name}` (needed to install the package) is not beside {} nor on PATH",
            runner.to_string_lossy()
        )
    })
}

/// Runs a package manager outside the sandbox, with its output kept for the error message.
fn run(cmd: &mut Command, what: &str) -> Result<String, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("cannot run {what}: {e}"))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let outs = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let errs = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().map_err(|e| format!("{what}: {e}"))? {
            break st;
        }
        if start.elapsed() > INSTALL_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "{what} did not finish within {} s; is the registry reachable from here?",
                INSTALL_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = outs.join().unwrap_or_default();
    let stderr = errs.join().unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!(
            "{what} failed ({status}):\n  {}",
            crate::wire::sanitize::clean(&tail.join("\n  "), crate::wire::sanitize::Clean::TEXT)
        ));
    }
    Ok(stdout)
}

/// What [`content_digest`] read: the digest, and the number of files and bytes it hashed (for
/// the start's diagnostics and the benchmark).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    /// `sha256:HEX`.
    pub digest: String,
    pub files: usize,
    pub bytes: u64,
}

/// The content digest of an install folder: one SHA-256 over the sorted list of every entry
/// beneath `dir` (never following a symbolic link), one record each: `d PATH` for a folder,
/// `f PATH MODE SHA256` for a regular file (MODE is `x` when any execute bit is set, else `-`),
/// `l PATH TARGET` for a symbolic link, every field ended by a NUL byte (which no name or link
/// target can hold, so two different trees never give the same stream). Paths are relative to
/// `dir`, so the digest does not depend on where the folder is. Any other kind of file (a
/// socket, a device, a FIFO) is refused: nothing an installer writes is one.
pub fn content_digest(dir: &Path) -> Result<Content, String> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let mut lines: Vec<Vec<u8>> = Vec::new();
    let mut files = 0usize;
    let mut bytes = 0u64;
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let here = dir.join(&rel);
        let entries =
            std::fs::read_dir(&here).map_err(|e| format!("cannot read {}: {e}", here.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {}: {e}", here.display()))?;
            let path = rel.join(entry.file_name());
            let full = dir.join(&path);
            let meta = std::fs::symlink_metadata(&full)
                .map_err(|e| format!("cannot inspect {}: {e}", full.display()))?;
            let name = path.as_os_str().as_bytes();
            let mut line = Vec::with_capacity(name.len() + 80);
            let kind = meta.file_type();
            if kind.is_dir() {
                line.extend_from_slice(b"d\0");
                line.extend_from_slice(name);
                line.push(0);
                stack.push(path);
            } else if kind.is_file() {
                let mut f = std::fs::File::open(&full)
                    .map_err(|e| format!("cannot read {}: {e}", full.display()))?;
                let mut h = Sha256::new();
                let n = std::io::copy(&mut f, &mut h)
                    .map_err(|e| format!("cannot read {}: {e}", full.display()))?;
                files += 1;
                bytes += n;
                line.extend_from_slice(b"f\0");
                line.extend_from_slice(name);
                line.extend_from_slice(if meta.permissions().mode() & 0o111 != 0 {
                    b"\0x\0"
                } else {
                    b"\0-\0"
                });
                line.extend_from_slice(hex(&h.finalize()).as_bytes());
                line.push(0);
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&full)
                    .map_err(|e| format!("cannot read the link {}: {e}", full.display()))?;
                line.extend_from_slice(b"l\0");
                line.extend_from_slice(name);
                line.push(0);
                line.extend_from_slice(target.as_os_str().as_bytes());
                line.push(0);
            } else {
                return Err(format!(
                    "{} is neither a file, a folder nor a link; no installer writes one",
                    full.display()
                ));
            }
            lines.push(line);
        }
    }
    lines.sort_unstable();
    let mut h = Sha256::new();
    for l in &lines {
        h.update(l);
    }
    Ok(Content {
        digest: format!("sha256:{}", hex(&h.finalize())),
        files,
        bytes,
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A folder name for a package in the store (`@scope/name` has a slash).
fn folder(name: &str, version: &str) -> String {
    format!("{}@{version}", name.replace('/', "+"))
}

/// The store folder name of a PyPI install: with `uvx --with` packages, a suffix naming that
/// set, so that the same server run with and without them (or with others) gets two installs.
fn pypi_folder(name: &str, version: &str, with: &[String]) -> String {
    let base = folder(&normalize(name), version);
    if with.is_empty() {
        return base;
    }
    let digest = hex(&Sha256::digest(with.join(",").as_bytes()));
    format!("{base}+with-{}", &digest[..16])
}

/// A fresh scratch folder in the store, renamed into place once the install is known good.
fn scratch(store: &Path, eco: Ecosystem) -> Result<PathBuf, String> {
    let base = store.join(eco.name());
    std::fs::create_dir_all(&base)
        .map_err(|e| format!("cannot create the package store {}: {e}", base.display()))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = base.join(format!(".install-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Moves a finished install into place; an existing install of the same version is replaced
/// only when it differs (a different integrity), so concurrent captures agree.
fn settle(scratch: &Path, dest: &Path, same: impl Fn(&Path) -> bool) -> Result<(), String> {
    if dest.exists() {
        if same(dest) {
            let _ = std::fs::remove_dir_all(scratch);
            return Ok(());
        }
        // A name beside it that no version folder can have (`with_extension` would cut a
        // version such as `1.2.3` at its last dot).
        let mut aside = dest.as_os_str().to_os_string();
        aside.push(format!(".replaced-{}", std::process::id()));
        let old = PathBuf::from(aside);
        std::fs::rename(dest, &old)
            .map_err(|e| format!("cannot move the old install {} aside: {e}", dest.display()))?;
        let _ = std::fs::remove_dir_all(&old);
    }
    std::fs::rename(scratch, dest)
        .map_err(|e| format!("cannot move the install into {}: {e}", dest.display()))
}

/// Resolves `r` with the user's package manager into the store, and says how to start it.
pub fn install(r: &Runner, store: &Path) -> Result<Installed, String> {
    let tmp = scratch(store, r.ecosystem)?;
    let result = match r.ecosystem {
        Ecosystem::Npm => install_npm(r, store, &tmp),
        Ecosystem::Pypi => install_pypi(r, store, &tmp),
    };
    if tmp.exists() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    result
}

fn install_npm(r: &Runner, store: &Path, tmp: &Path) -> Result<Installed, String> {
    let npm = beside(&r.program, "npm")?;
    std::fs::write(
        tmp.join("package.json"),
        "{\"name\":\"mcpguard-pinned-package\",\"private\":true}\n",
    )
    .map_err(|e| format!("cannot write into {}: {e}", tmp.display()))?;
    run(
        Command::new(&npm)
            .arg("install")
            .arg("--prefix")
            .arg(tmp)
            .args([
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                "--save-exact",
                "--loglevel=error",
            ])
            .arg(&r.spec),
        &format!("`npm install {}`", r.spec),
    )?;
    let (version, integrity) = npm_lock_entry(tmp, &r.name)?;
    let content = content_digest(tmp)?;
    let dest = store.join("npm").join(folder(&r.name, &version));
    // An install already in the store is kept only when its files are the fresh install's, byte
    // for byte: one edited after an earlier capture is replaced, never adopted.
    settle(tmp, &dest, |d| {
        content_digest(d).is_ok_and(|c| c.digest == content.digest)
    })?;
    let package = Package {
        ecosystem: Ecosystem::Npm,
        name: r.name.clone(),
        version,
        integrity,
        requested: r.spec.clone(),
        bin: String::new(),
        with: Vec::new(),
        content: Some(content.digest),
        built_from_source: Vec::new(),
    };
    npm_command(r, package, &dest)
}

/// The version and integrity npm recorded for `name` in an install's lockfile.
fn npm_lock_entry(dir: &Path, name: &str) -> Result<(String, String), String> {
    let path = dir.join("package-lock.json");
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let lock: Value = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    let entry = lock
        .pointer(&format!(
            "/packages/node_modules~1{}",
            name.replace('~', "~0").replace('/', "~1")
        ))
        .ok_or_else(|| format!("{} does not list {name}", path.display()))?;
    let get = |k: &str| {
        entry
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("{} has no {k} for {name}", path.display()))
    };
    Ok((get("version")?, get("integrity")?))
}

/// `node SCRIPT ARGS…` for the package's command.
fn npm_command(r: &Runner, mut package: Package, dir: &Path) -> Result<Installed, String> {
    let pkg_dir = dir.join("node_modules").join(&r.name);
    let manifest_path = pkg_dir.join("package.json");
    let manifest: Value = std::fs::read(&manifest_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| format!("cannot read {}", manifest_path.display()))?;
    let installed = manifest
        .get("version")
        .and_then(Value::as_str)
        .unwrap_or("");
    if installed != package.version {
        return Err(format!(
            "the install in {} holds {}@{installed}, but {} was pinned; run `mcpguard update` to review the new version",
            dir.display(),
            r.name,
            package.label()
        ));
    }
    let unscoped = r.name.rsplit('/').next().unwrap_or(&r.name);
    let wanted = r.bin.as_deref().or(if package.bin.is_empty() {
        None
    } else {
        Some(package.bin.as_str())
    });
    let (bin, rel) = match manifest.get("bin") {
        Some(Value::String(s)) => (unscoped.to_string(), s.clone()),
        Some(Value::Object(m)) => {
            let pick = match wanted {
                Some(w) => m.get_key_value(w),
                None if m.len() == 1 => m.iter().next(),
                None => m.get_key_value(unscoped),
            };
            match pick {
                Some((k, Value::String(v))) => (k.clone(), v.clone()),
                _ => {
                    let names: Vec<&str> = m.keys().map(String::as_str).collect();
                    return Err(format!(
                        "{} has several commands ({}); name one with `npx -p {} COMMAND`",
                        r.name,
                        names.join(", "),
                        r.name
                    ));
                }
            }
        }
        _ => {
            return Err(format!(
            "{} declares no command (`bin` in its package.json), so npx could not run it either",
            r.name
        ))
        }
    };
    package.bin = bin;
    let script = pkg_dir.join(rel.trim_start_matches("./"));
    let node = beside(&r.program, "node")?;
    let mut command = vec![node.into_os_string(), script.into_os_string()];
    command.extend(r.args.iter().cloned());
    Ok(Installed {
        package,
        command,
        dir: dir.to_path_buf(),
        checked: None,
    })
}

/// `uv venv DIR` and `uv pip install SPEC` into it, every module compiled to bytecode, so that
/// the interpreter never writes a `.pyc` into the install later (the content digest covers the
/// bytecode too: Python runs a valid `.pyc` instead of its source). Both installs of a capture
/// are compiled, so that their `RECORD`s compare.
fn uv_install(uv: &Path, r: &Runner, dir: &Path, spec: &str) -> Result<(), String> {
    let mut venv = Command::new(uv);
    venv.args(["venv", "--quiet"]);
    if let Some(p) = &r.python {
        venv.arg("--python").arg(p);
    }
    run(venv.arg(dir), "`uv venv`")?;
    let mut install = Command::new(uv);
    // `--no-build`: only built distributions (wheels) are installed. Building a source
    // distribution runs the package's own build script, outside the sandbox, with the user's
    // rights, before anything was reviewed — the same reason npm installs skip install scripts.
    install.args(["pip", "install", "--quiet", "--compile-bytecode"]);
    if r.build_from_source.is_empty() {
        install.arg("--no-build");
    } else {
        // Wheels for everything but the packages the person named, which may be built.
        install.args(["--only-binary", ":all:"]);
        for p in &r.build_from_source {
            install.arg("--no-binary").arg(p);
        }
    }
    let what = std::iter::once(spec)
        .chain(r.with.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join(" ");
    run(
        install
            .arg("--python")
            .arg(dir.join("bin/python"))
            .arg(spec)
            .args(&r.with),
        &format!("`uv pip install {what}` (wheels only)"),
    )
    .map(drop)
    .map_err(|e| no_build_hint(e, &what))
}

/// Says why an install that needed a source build was refused, and what the person can do: uv
/// words this as "building source distributions is disabled" or names `--no-build`.
fn no_build_hint(error: String, what: &str) -> String {
    let lower = error.to_ascii_lowercase();
    if !(lower.contains("no-build")
        || lower.contains("building source distributions is disabled")
        || lower.contains("no wheels")
        || lower.contains("no usable wheels"))
    {
        return error;
    }
    // uv names each package it would have had to build: "Wheels are required for `pandoc`".
    let mut named: Vec<&str> = error
        .split("Wheels are required for `")
        .skip(1)
        .filter_map(|rest| rest.split('`').next())
        .collect();
    named.sort_unstable();
    named.dedup();
    let allow = if named.is_empty() {
        "--build-from-source PACKAGE (the package uv names above)".to_string()
    } else {
        named
            .iter()
            .map(|n| format!("--build-from-source {n}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "{error}\nmcpguard installs pinned PyPI packages from wheels only: {what} (or a dependency) has only a source distribution, and building it runs its build script outside the sandbox with your rights before anything was reviewed. If you trust that package's build, allow exactly it: add {allow} to the `mcpguard capture` or `mcpguard update` that failed (and to later `update`s: the snapshot records what was built from source, but an update never builds without your word). Or install it yourself into a virtual environment (`uv venv DIR && uv pip install --python DIR/bin/python {what}`) and give the host configuration DIR/bin/<server> as the command; mcpguard then runs it sandboxed as a local program"
    )
}

fn install_pypi(r: &Runner, store: &Path, tmp: &Path) -> Result<Installed, String> {
    let uv = beside(&r.program, "uv")?;
    // The scratch install tells which version the spec resolves to. A virtual environment
    // cannot be moved (its console scripts name its interpreter by absolute path), so the
    // install is then made again in its final folder, from uv's cache, for exactly that version.
    uv_install(&uv, r, tmp, &r.spec)?;
    let (version, integrity) = pypi_record(tmp, &r.name)?;
    let dest = store
        .join("pypi")
        .join(pypi_folder(&r.name, &version, &r.with));
    // An install already in the store is never adopted, even with the same RECORD: its files
    // may have been edited since (RECORD is text beside them). It is moved aside and the
    // package installed again in place, from uv's cache.
    if dest.exists() {
        let mut aside = dest.as_os_str().to_os_string();
        aside.push(format!(".replaced-{}", std::process::id()));
        let old = PathBuf::from(aside);
        std::fs::rename(&dest, &old)
            .map_err(|e| format!("cannot move the old install {} aside: {e}", dest.display()))?;
        let _ = std::fs::remove_dir_all(&old);
    }
    let exact = format!("{}=={version}", r.name);
    if let Err(e) = uv_install(&uv, r, &dest, &exact) {
        let _ = std::fs::remove_dir_all(&dest);
        return Err(e);
    }
    let (_, again) = pypi_record(&dest, &r.name)?;
    if again != integrity {
        let _ = std::fs::remove_dir_all(&dest);
        return Err(format!(
            "installing {exact} twice gave two different packages ({integrity}, then {again}); is the registry or the cache changing under uv?"
        ));
    }
    let built = built_from_source(&dest)?;
    let content = content_digest(&dest)?;
    let package = Package {
        ecosystem: Ecosystem::Pypi,
        name: r.name.clone(),
        version,
        integrity,
        requested: r.spec.clone(),
        bin: r.bin.clone().unwrap_or_else(|| r.name.clone()),
        with: r.with.clone(),
        content: Some(content.digest),
        built_from_source: built,
    };
    pypi_command(r, package, &dest)
}

/// The site-packages folder of a virtual environment.
fn site_packages(venv: &Path) -> Result<PathBuf, String> {
    let lib = venv.join("lib");
    std::fs::read_dir(&lib)
        .map_err(|e| format!("cannot read {}: {e}", lib.display()))?
        .filter_map(Result::ok)
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .ok_or_else(|| format!("{} has no site-packages", venv.display()))
}

/// The packages of a PyPI install that uv built from source (normalized names, sorted): uv
/// writes `uv_build.json` into the `.dist-info` of each distribution it built itself, and
/// never into one it installed from a wheel.
pub fn built_from_source(venv: &Path) -> Result<Vec<String>, String> {
    let site = site_packages(venv)?;
    let mut out: Vec<String> = std::fs::read_dir(&site)
        .map_err(|e| format!("cannot read {}: {e}", site.display()))?
        .filter_map(Result::ok)
        .filter(|e| e.path().join("uv_build.json").is_file())
        .filter_map(|e| {
            let f = e.file_name();
            let stem = f.to_str()?.strip_suffix(".dist-info")?;
            Some(normalize(stem.rsplit_once('-')?.0))
        })
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

/// PEP 503 normalization: lowercase, runs of `-`, `_` and `.` as one `-`.
fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The installed version of `name` in a virtual environment, and the SHA-256 of its RECORD.
fn pypi_record(venv: &Path, name: &str) -> Result<(String, String), String> {
    let want = normalize(name);
    let site = site_packages(venv)?;
    for entry in std::fs::read_dir(&site)
        .map_err(|e| format!("cannot read {}: {e}", site.display()))?
        .filter_map(Result::ok)
    {
        let file = entry.file_name();
        let Some(stem) = file.to_str().and_then(|f| f.strip_suffix(".dist-info")) else {
            continue;
        };
        let Some((dist, _)) = stem.rsplit_once('-') else {
            continue;
        };
        if normalize(dist) != want {
            continue;
        }
        let metadata = std::fs::read_to_string(entry.path().join("METADATA"))
            .map_err(|e| format!("cannot read the metadata of {name}: {e}"))?;
        let version = metadata
            .lines()
            .find_map(|l| l.strip_prefix("Version:"))
            .map(|v| v.trim().to_string())
            .ok_or_else(|| format!("the metadata of {name} has no version"))?;
        let record = std::fs::read_to_string(entry.path().join("RECORD"))
            .map_err(|e| format!("cannot read the RECORD of {name}: {e}"))?;
        // The files inside site-packages, with the hashes the installer checked. Entries outside
        // it (`../../../bin/…`) are console-script wrappers the installer wrote for this
        // folder, whose first line names its interpreter, so they differ by location.
        // `uv_cache.json` is uv's own note of when it built a package from source (a
        // timestamp): the first install of a capture has it and the second, from uv's cache,
        // does not, so it would make two installs of the same build differ. It holds no code.
        let mut lines: Vec<&str> = record
            .lines()
            .filter(|l| !l.starts_with("../") && !l.is_empty())
            .filter(|l| {
                !l.split(',')
                    .next()
                    .unwrap_or("")
                    .ends_with(".dist-info/uv_cache.json")
            })
            .collect();
        lines.sort_unstable();
        let hash = Sha256::digest(lines.join("\n").as_bytes());
        let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
        return Ok((version, format!("record-sha256:{hex}")));
    }
    Err(format!(
        "{name} is not installed in {} (did the package name change?)",
        venv.display()
    ))
}

/// `VENV/bin/python VENV/bin/COMMAND ARGS…`: the console script run by the environment's own
/// interpreter (so the script's first line is not needed, and the python preset sees the venv).
fn pypi_command(r: &Runner, package: Package, dir: &Path) -> Result<Installed, String> {
    let script = dir.join("bin").join(&package.bin);
    if !script.is_file() {
        return Err(format!(
            "{} installs no command {:?}; name the command with `uvx --from {} COMMAND`",
            package.label(),
            package.bin,
            package.name
        ));
    }
    let mut command = vec![
        dir.join("bin/python").into_os_string(),
        script.into_os_string(),
    ];
    command.extend(r.args.iter().cloned());
    Ok(Installed {
        package,
        command,
        dir: dir.to_path_buf(),
        checked: None,
    })
}

/// Finds the pinned install for a run and checks it: the command must ask for the pinned
/// package ([`pinned_folder`]), and the install must still be the pinned version with the
/// pinned integrity and the pinned content.
pub fn verify(r: &Runner, pin: &Package, store: &Path) -> Result<Installed, String> {
    let dir = pinned_folder(r, pin, store)?;
    if !dir.is_dir() {
        return Err(format!(
            "the pinned package {} is not installed in {} (a new machine, or the store was removed); \
             capture again or run `mcpguard update` to install and review it",
            pin.label(),
            dir.display()
        ));
    }
    verify_in(r, pin, &dir)
}

/// For a live check (`check --server`, `lock check`): the pinned install checked as a start
/// checks it, or, where this machine has none (a fresh CI checkout), the pinned version
/// installed now by the user's package manager. The package record returned is what the
/// install holds; the caller compares it with the snapshot's.
pub fn for_check(r: &Runner, pin: &Package, store: &Path) -> Result<Installed, String> {
    let dir = pinned_folder(r, pin, store)?;
    if dir.is_dir() {
        return verify_in(r, pin, &dir);
    }
    let mut exact = r.clone();
    exact.spec = pin.label();
    exact.exact = Some(pin.version.clone());
    let mut installed = install(&exact, store)?;
    // The record keeps the command's own request, as the capture recorded it.
    installed.package.requested = pin.requested.clone();
    Ok(installed)
}

/// The store folder of the pinned install, once the command is known to ask for the pinned
/// package (the same name; no other exact version; no other range than the one captured).
fn pinned_folder(r: &Runner, pin: &Package, store: &Path) -> Result<PathBuf, String> {
    let update = "run `mcpguard update` (or capture again) to review the new version";
    if r.ecosystem != pin.ecosystem || normalize(&r.name) != normalize(&pin.name) {
        return Err(format!(
            "the command runs {} package {:?}, but the snapshot pinned {} package {}; {update}",
            r.ecosystem.name(),
            r.spec,
            pin.ecosystem.name(),
            pin.label()
        ));
    }
    if r.with != pin.with {
        let list = |w: &[String]| {
            if w.is_empty() {
                "no --with package".to_string()
            } else {
                format!("--with {}", w.join(","))
            }
        };
        return Err(format!(
            "the command runs {} with {}, but the snapshot pinned it with {}; {update}",
            pin.label(),
            list(&r.with),
            list(&pin.with)
        ));
    }
    let same_request = r.spec == pin.requested;
    match &r.exact {
        Some(v) if *v != pin.version => {
            return Err(format!(
                "the command asks for {}, but the snapshot pinned {}; {update}",
                r.spec,
                pin.label()
            ))
        }
        Some(_) => {}
        None if same_request || r.spec == r.name || r.spec == format!("{}@latest", r.name) => {}
        None => {
            return Err(format!(
            "the command asks for {:?}, but the snapshot pinned {} (captured from {:?}); {update}",
            r.spec,
            pin.label(),
            pin.requested
        ))
        }
    }
    Ok(store.join(pin.ecosystem.name()).join(match pin.ecosystem {
        Ecosystem::Npm => folder(&pin.name, &pin.version),
        Ecosystem::Pypi => pypi_folder(&pin.name, &pin.version, &pin.with),
    }))
}

/// The checks of an existing install in `dir` against the pin: version, integrity, content.
fn verify_in(r: &Runner, pin: &Package, dir: &Path) -> Result<Installed, String> {
    let update = "run `mcpguard update` (or capture again) to review the new version";
    let dir = dir.to_path_buf();
    let (version, integrity) = match pin.ecosystem {
        Ecosystem::Npm => npm_lock_entry(&dir, &pin.name)?,
        Ecosystem::Pypi => pypi_record(&dir, &pin.name)?,
    };
    if version != pin.version || integrity != pin.integrity {
        return Err(format!(
            "the install in {} holds {} {version} ({integrity}), not the pinned {} ({}); {update}",
            dir.display(),
            pin.name,
            pin.label(),
            pin.integrity
        ));
    }
    // What was built from source, as the install says (uv's marker files, covered by the
    // content digest below) against the record: a record that does not say so (one written
    // before mcpguard recorded it, or edited) is refused rather than run as a wheels-only
    // install.
    let built = match pin.ecosystem {
        Ecosystem::Npm => Vec::new(),
        Ecosystem::Pypi => built_from_source(&dir)?,
    };
    if built != pin.built_from_source {
        let say = |l: &[String]| {
            if l.is_empty() {
                "nothing (wheels only)".to_string()
            } else {
                l.join(", ")
            }
        };
        return Err(format!(
            "the install of {} in {} was built from source for {}, but the snapshot's package record says {}; \
             run `mcpguard update` (with --build-from-source for each package you allow to be built) or capture again",
            pin.label(),
            dir.display(),
            say(&built),
            say(&pin.built_from_source)
        ));
    }
    let Some(pinned) = &pin.content else {
        return Err(format!(
            "the snapshot pins {} by its label only (it was captured before mcpguard recorded an install's content), \
             so the files in {} cannot be checked; run `mcpguard update` (or capture again) to pin its content",
            pin.label(),
            dir.display()
        ));
    };
    let started = Instant::now();
    let content = content_digest(&dir)?;
    if content.digest != *pinned {
        return Err(format!(
            "the files of {} in {} are not the ones that were pinned: their content is {}, the snapshot pins {}; \
             something changed the install after capture. Remove {} and run `mcpguard update` (it installs the \
             package again, clean, and shows what changed) or capture again",
            pin.label(),
            dir.display(),
            content.digest,
            pinned,
            dir.display()
        ));
    }
    let mut installed = match pin.ecosystem {
        Ecosystem::Npm => npm_command(r, pin.clone(), &dir)?,
        Ecosystem::Pypi => pypi_command(r, pin.clone(), &dir)?,
    };
    installed.checked = Some((content, started.elapsed()));
    Ok(installed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<OsString> {
        s.split_whitespace().map(OsString::from).collect()
    }

    fn runner(s: &str) -> Runner {
        parse(&argv(s)).unwrap().unwrap()
    }

    #[test]
    fn npx_command_lines() {
        let r = runner("npx -y @modelcontextprotocol/server-memory@2026.1.26 --flag x");
        assert_eq!(r.ecosystem, Ecosystem::Npm);
        assert_eq!(r.name, "@modelcontextprotocol/server-memory");
        assert_eq!(r.exact.as_deref(), Some("2026.1.26"));
        assert_eq!(r.args, argv("--flag x"));
        let r = runner("npx --yes some-server");
        assert_eq!((r.name.as_str(), r.exact.as_deref()), ("some-server", None));
        let r = runner("npx -y some-server@^1.2");
        assert_eq!((r.name.as_str(), r.exact.as_deref()), ("some-server", None));
        assert_eq!(r.spec, "some-server@^1.2");
        let r = runner("npx -y -p @scope/tools@1.0.0 tool-a arg");
        assert_eq!(r.name, "@scope/tools");
        assert_eq!(r.bin.as_deref(), Some("tool-a"));
        assert_eq!(r.args, argv("arg"));
        for bad in ["npx ./local", "npx github:x/y", "npx -c 'echo'", "npx -y"] {
            assert!(parse(&argv(bad)).is_err(), "{bad}");
        }
        assert!(parse(&argv("node x.js")).unwrap().is_none());
    }

    #[test]
    fn uvx_command_lines() {
        let r = runner("uvx mcp-server-time==2025.9.25 --local-timezone UTC");
        assert_eq!(r.ecosystem, Ecosystem::Pypi);
        assert_eq!(r.name, "mcp-server-time");
        assert_eq!(r.exact.as_deref(), Some("2025.9.25"));
        assert_eq!(r.args, argv("--local-timezone UTC"));
        let r = runner("uvx mcp-server-git@1.0.0");
        assert_eq!(r.spec, "mcp-server-git==1.0.0");
        let r = runner("uvx --from mcp-server-fetch>=2025 mcp-server-fetch");
        assert_eq!(r.name, "mcp-server-fetch");
        assert_eq!(r.exact, None);
        assert_eq!(r.bin.as_deref(), Some("mcp-server-fetch"));
        let r = runner("uvx --python 3.11 pkg");
        assert_eq!(r.python.as_deref(), Some("3.11"));
        // `--with` packages are pinned with the server's: each must name an exact version.
        let r = runner("uvx --with mcp==1.30.0,anyio==4.16.0 -w pydantic==2.14.4 mcp-server-sqlite --db-path x");
        assert_eq!(r.with, ["anyio==4.16.0", "mcp==1.30.0", "pydantic==2.14.4"]);
        assert_eq!(r.name, "mcp-server-sqlite");
        assert_eq!(r.args, argv("--db-path x"));
        assert_eq!(runner("uvx --with=mcp==1.30.0 pkg").with, ["mcp==1.30.0"]);
        for bad in [
            "uvx --with x pkg",
            "uvx --with mcp<2 pkg",
            "uvx --with mcp==1.30.0,x pkg",
        ] {
            let e = parse(&argv(bad)).unwrap_err();
            assert!(e.contains("--with NAME==VERSION"), "{bad}: {e}");
        }
        for bad in ["uvx git+https://x/y", "uvx"] {
            assert!(parse(&argv(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn exact_versions_and_names() {
        for v in ["1.2.3", "2026.1.26", "1.0.0-beta.1", "0.6"] {
            assert!(is_exact_version(v), "{v}");
        }
        for v in ["^1.2", "latest", ">=1", "1", "1.x", ""] {
            assert!(!is_exact_version(v), "{v}");
        }
        assert_eq!(normalize("Mcp_Server.Time"), "mcp-server-time");
        assert_eq!(folder("@a/b", "1.0.0"), "@a+b@1.0.0");
    }

    #[test]
    fn the_package_record_round_trips() {
        let p = Package {
            ecosystem: Ecosystem::Pypi,
            name: "x".into(),
            version: "1.0".into(),
            integrity: "record-sha256:00".into(),
            requested: "x==1.0".into(),
            bin: "x".into(),
            with: Vec::new(),
            content: Some("sha256:00".into()),
            built_from_source: Vec::new(),
        };
        assert_eq!(Package::from_json(&p.to_json()).unwrap(), p);
        // Without `--with` packages the record has no `with` (it is the record it always was).
        assert!(p.to_json().get("with").is_none());
        let with = Package {
            with: vec!["mcp==1.30.0".into()],
            ..p.clone()
        };
        assert_eq!(Package::from_json(&with.to_json()).unwrap(), with);
        // What was built from source is recorded (and only when anything was).
        assert!(p.to_json().get("builtFromSource").is_none());
        let built = Package {
            built_from_source: vec!["pandoc".into()],
            ..p.clone()
        };
        assert_eq!(built.to_json()["builtFromSource"], json!(["pandoc"]));
        assert_eq!(Package::from_json(&built.to_json()).unwrap(), built);
        let mut bad = built.to_json();
        bad["builtFromSource"] = json!("pandoc");
        assert!(Package::from_json(&bad).is_err());
        assert!(Package::from_json(&json!({"ecosystem": "cargo"})).is_err());
        // A record from before content pinning reads (so that update can replace it), without
        // content; one whose content is not a string does not.
        let mut old = p.to_json();
        old.as_object_mut().unwrap().remove("content");
        assert_eq!(Package::from_json(&old).unwrap().content, None);
        old["content"] = json!(1);
        assert!(Package::from_json(&old).is_err());
    }

    #[test]
    fn the_packages_uv_built_are_those_with_its_build_marker() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("lib/python3.11/site-packages");
        for d in [
            "Foo_Bar-1.0.dist-info",
            "wheel_only-2.0.dist-info",
            "pandoc-2.4.dist-info",
        ] {
            std::fs::create_dir_all(site.join(d)).unwrap();
        }
        std::fs::write(site.join("Foo_Bar-1.0.dist-info/uv_build.json"), "{}").unwrap();
        std::fs::write(site.join("pandoc-2.4.dist-info/uv_build.json"), "{}").unwrap();
        assert_eq!(
            built_from_source(dir.path()).unwrap(),
            vec!["foo-bar".to_string(), "pandoc".to_string()]
        );
    }

    #[test]
    fn the_sandbox_finds_the_store_where_this_module_keeps_it() {
        let vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        let home = std::env::var_os("HOME").map(PathBuf::from);
        assert_eq!(
            crate::sandbox::presets::package_store(
                &crate::sandbox::presets::Env { vars: &vars },
                home.as_deref()
            ),
            store().ok()
        );
    }

    #[test]
    fn the_content_digest_sees_every_change_of_the_tree_and_not_its_place() {
        use std::os::unix::fs::PermissionsExt;
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        std::fs::create_dir_all(a.join("lib/pkg")).unwrap();
        std::fs::write(a.join("lib/pkg/index.js"), "ok\n").unwrap();
        std::os::unix::fs::symlink("pkg/index.js", a.join("lib/main")).unwrap();
        let first = content_digest(&a).unwrap();
        assert_eq!((first.files, first.bytes), (1, 3));
        // The same tree elsewhere has the same digest.
        let b = root.path().join("b");
        std::fs::rename(&a, &b).unwrap();
        assert_eq!(content_digest(&b).unwrap(), first);
        let changed = |what: &str, f: &dyn Fn(&Path)| {
            let c = root.path().join(what);
            std::fs::create_dir_all(c.join("lib/pkg")).unwrap();
            std::fs::write(c.join("lib/pkg/index.js"), "ok\n").unwrap();
            std::os::unix::fs::symlink("pkg/index.js", c.join("lib/main")).unwrap();
            assert_eq!(content_digest(&c).unwrap().digest, first.digest, "{what}");
            f(&c);
            assert_ne!(content_digest(&c).unwrap().digest, first.digest, "{what}");
        };
        changed("edit", &|c| {
            std::fs::write(c.join("lib/pkg/index.js"), "no\n").unwrap()
        });
        changed("add", &|c| {
            std::fs::write(c.join("lib/evil.pth"), "").unwrap()
        });
        changed("dir", &|c| std::fs::create_dir(c.join("lib/x")).unwrap());
        changed("exec", &|c| {
            std::fs::set_permissions(
                c.join("lib/pkg/index.js"),
                std::fs::Permissions::from_mode(0o755),
            )
            .unwrap()
        });
        changed("link", &|c| {
            std::fs::remove_file(c.join("lib/main")).unwrap();
            std::os::unix::fs::symlink("/tmp/x.js", c.join("lib/main")).unwrap();
        });
        changed("remove", &|c| {
            std::fs::remove_file(c.join("lib/main")).unwrap()
        });
    }

    #[test]
    fn verify_refuses_another_version_or_range_before_looking_at_the_store() {
        let pin = Package {
            ecosystem: Ecosystem::Npm,
            name: "srv".into(),
            version: "1.0.0".into(),
            integrity: "sha512-x".into(),
            requested: "srv@^1".into(),
            bin: "srv".into(),
            with: Vec::new(),
            content: Some("sha256:00".into()),
            built_from_source: Vec::new(),
        };
        let nowhere = Path::new("/nonexistent-mcpguard-store");
        let e = verify(&runner("npx -y srv@1.0.1"), &pin, nowhere).unwrap_err();
        assert!(e.contains("srv@1.0.1") && e.contains("srv@1.0.0"), "{e}");
        let e = verify(&runner("npx -y srv@^2"), &pin, nowhere).unwrap_err();
        assert!(e.contains("srv@^2") && e.contains("captured from"), "{e}");
        let e = verify(&runner("npx -y other"), &pin, nowhere).unwrap_err();
        assert!(e.contains("other"), "{e}");
        // A `uvx --with` package is part of the pin: the command must ask for the same ones.
        let py = Package {
            ecosystem: Ecosystem::Pypi,
            name: "srv".into(),
            version: "1.0.0".into(),
            integrity: "record-sha256:00".into(),
            requested: "srv==1.0.0".into(),
            bin: "srv".into(),
            with: vec!["mcp==1.30.0".into()],
            content: Some("sha256:00".into()),
            built_from_source: Vec::new(),
        };
        for (cmd, said) in [
            ("uvx srv==1.0.0", "with no --with package"),
            (
                "uvx --with mcp==1.29.0 srv==1.0.0",
                "with --with mcp==1.29.0",
            ),
        ] {
            let e = verify(&runner(cmd), &py, nowhere).unwrap_err();
            assert!(
                e.contains(said) && e.contains("pinned it with --with mcp==1.30.0"),
                "{cmd}: {e}"
            );
        }
        // The same request, no version, or the pinned version reach the store check.
        for ok in ["npx -y srv@^1", "npx -y srv", "npx srv@1.0.0"] {
            let e = verify(&runner(ok), &pin, nowhere).unwrap_err();
            assert!(e.contains("is not installed"), "{ok}: {e}");
        }
    }
}
