//! `mcpguard.lock`, a team's servers in one file kept in git, and `mcpguard lock check`, which CI
//! runs: every server is started live under the sandbox and compared with its reviewed snapshot.
//!
//! ```toml
//! version = 1
//!
//! [servers.files]
//! command = ["npx", "-y", "@modelcontextprotocol/server-filesystem@2026.1.14", "/srv/docs"]
//! snapshot = "snapshots/files.snapshot.json"   # relative to this file
//! sha256 = "…"                                 # `mcpguard hash` of the reviewed snapshot
//! package = "npm:@modelcontextprotocol/server-filesystem@2026.1.14"   # must be in `command`
//! policy = "team-policy.toml"                  # optional, relative to this file
//! sandbox_read = ["/srv/docs"]                 # optional grants, as --sandbox-read
//! sandbox_env = ["DOCS_TOKEN"]                 # optional variables passed by name, as --sandbox-env
//! ```
//!
//! Each server is *current* (digest, reviews and the live catalogue all match), *drifted* (the
//! live server differs from the reviewed snapshot: the diff says where) or *failed* (the snapshot
//! is missing, changed, expired or unacceptable, or the server cannot be started or listed).
//! Exit status: 0 when every server is current, 1 when any drifted and none failed, 2 when any
//! failed or the lock file itself is unusable.
//!
//! The comparisons are the ones `mcpguard check` makes (`commands::live_drift`,
//! `process::capture`); this file only reads the lock and words the report.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use serde::Deserialize;
use serde_json::{json, Value};

use super::commands::{live_drift, CmdResult};
use crate::policy::Policy;
use crate::process::capture::{self, Limits};
use crate::snapshot::manifest;

/// The lock file's name when none is given.
pub const DEFAULT_LOCK: &str = "mcpguard.lock";

/// A parsed `mcpguard.lock`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lockfile {
    pub version: u32,
    #[serde(default)]
    pub servers: BTreeMap<String, LockedServer>,
    /// The directory relative paths are read from (the lock file's own).
    #[serde(skip)]
    pub dir: PathBuf,
}

/// One server of the lock.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockedServer {
    /// The launch command: a program (found on PATH when it has no `/`) and its arguments.
    pub command: Vec<String>,
    /// The reviewed snapshot, relative to the lock file unless absolute.
    pub snapshot: PathBuf,
    /// The snapshot's digest (`mcpguard hash`).
    pub sha256: String,
    /// The package and version the command runs (`npm:NAME@VERSION`, `pypi:NAME==VERSION`, …),
    /// for the reader and the report; the command itself must name the same version.
    pub package: Option<String>,
    /// The policy the server runs under, relative to the lock file unless absolute.
    pub policy: Option<PathBuf>,
    #[serde(default)]
    pub sandbox_read: Vec<PathBuf>,
    #[serde(default)]
    pub sandbox_write: Vec<PathBuf>,
    /// Variables passed to the server by exact name (`--sandbox-env`); values are never in the
    /// lock, each machine's environment provides them.
    #[serde(default)]
    pub sandbox_env: Vec<String>,
}

impl Lockfile {
    /// Reads and checks a lock file; errors name FILE:LINE:COLUMN where TOML gives a place.
    pub fn load(path: &Path) -> Result<Lockfile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the lock file {}: {e}", path.display()))?;
        let mut lock: Lockfile = toml::from_str(&text).map_err(|e| {
            let (line, col) = e.span().map_or((1, 1), |s| line_col(&text, s.start));
            format!(
                "{}:{line}:{col}: {}",
                path.display(),
                e.message().trim_end()
            )
        })?;
        if lock.version != 1 {
            return Err(format!(
                "{}: version {} is not known to this mcpguard (it reads version 1)",
                path.display(),
                lock.version
            ));
        }
        if lock.servers.is_empty() {
            return Err(format!("{}: no [servers.KEY] tables", path.display()));
        }
        for (key, s) in &lock.servers {
            if s.command.is_empty() || s.command[0].is_empty() {
                return Err(format!(
                    "{}: servers.{key}.command is empty",
                    path.display()
                ));
            }
            if let Some(p) = s
                .sandbox_read
                .iter()
                .chain(&s.sandbox_write)
                .find(|p| !p.is_absolute())
            {
                return Err(format!(
                    "{}: servers.{key}: the sandbox grant {} is not absolute",
                    path.display(),
                    p.display()
                ));
            }
            // The same names `--sandbox-env` takes, so a lock cannot pass a pattern or TMPDIR.
            for name in &s.sandbox_env {
                crate::cli::flags::env_name(name)
                    .map_err(|e| format!("{}: servers.{key}.sandbox_env: {e}", path.display()))?;
            }
        }
        lock.dir = std::path::absolute(path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .unwrap_or_else(|| PathBuf::from("."));
        Ok(lock)
    }

    /// A path of the lock, made absolute against the lock file's directory.
    pub fn resolve(&self, p: &Path) -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.dir.join(p)
        }
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// Options of `mcpguard lock add`.
pub struct AddArgs<'a> {
    pub key: &'a str,
    pub snapshot: &'a Path,
    pub lock: Option<&'a Path>,
    pub package: Option<&'a str>,
    pub policy: Option<&'a Path>,
    pub read: &'a [PathBuf],
    pub write: &'a [PathBuf],
    pub env: &'a [String],
    pub command: &'a [String],
}

/// A path as the lock should record it: relative to the lock's folder when it lies beneath it
/// (so the repository can be cloned anywhere), absolute otherwise.
fn relative_to(dir: &Path, p: &Path) -> Result<String, String> {
    let abs = std::path::absolute(p).map_err(|e| format!("cannot resolve {}: {e}", p.display()))?;
    Ok(abs
        .strip_prefix(dir)
        .map(|r| r.display().to_string())
        .unwrap_or_else(|_| abs.display().to_string()))
}

/// `mcpguard lock add KEY --snapshot FILE [--lock FILE] [--package PIN] [--policy FILE] -- CMD`
pub fn add(args: &AddArgs<'_>) -> CmdResult {
    let path = args.lock.unwrap_or(Path::new(DEFAULT_LOCK));
    let m = manifest::load(args.snapshot)?;
    m.server(args.key).map_err(|p| {
        format!(
            "{}: {p}; the lock's key must be the snapshot's server key",
            args.snapshot.display()
        )
    })?;
    if let Some(pin) = args.package {
        pin_named(pin, args.command)?;
    }
    let mut doc: toml::Table = match std::fs::read_to_string(path) {
        Ok(text) => {
            // The existing file must be a lock this mcpguard reads, or it is left alone.
            Lockfile::load(path)?;
            text.parse()
                .map_err(|e| format!("{}: {e}", path.display()))?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut t = toml::Table::new();
            t.insert("version".into(), toml::Value::Integer(1));
            t
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let dir = std::path::absolute(path)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    let mut entry = toml::Table::new();
    let strings =
        |v: Vec<String>| toml::Value::Array(v.into_iter().map(toml::Value::String).collect());
    entry.insert("command".into(), strings(args.command.to_vec()));
    entry.insert(
        "snapshot".into(),
        toml::Value::String(relative_to(&dir, args.snapshot)?),
    );
    entry.insert("sha256".into(), toml::Value::String(m.digest.clone()));
    if let Some(pin) = args.package {
        entry.insert("package".into(), toml::Value::String(pin.to_string()));
    }
    if let Some(p) = args.policy {
        entry.insert("policy".into(), toml::Value::String(relative_to(&dir, p)?));
    }
    let paths = |v: &[PathBuf]| strings(v.iter().map(|p| p.display().to_string()).collect());
    if !args.read.is_empty() {
        entry.insert("sandbox_read".into(), paths(args.read));
    }
    if !args.write.is_empty() {
        entry.insert("sandbox_write".into(), paths(args.write));
    }
    if !args.env.is_empty() {
        entry.insert("sandbox_env".into(), strings(args.env.to_vec()));
    }
    let servers = doc
        .entry("servers")
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
        .as_table_mut()
        .ok_or_else(|| format!("{}: `servers` is not a table", path.display()))?;
    let replaced = servers
        .insert(args.key.to_string(), toml::Value::Table(entry))
        .is_some();
    let text = toml::to_string(&doc).map_err(|e| format!("cannot write the lock: {e}"))?;
    manifest::write_atomic(path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!(
        "{} server {:?} in {} (sha256 {}); check it with `mcpguard lock check {}`",
        if replaced { "updated" } else { "added" },
        args.key,
        path.display(),
        m.digest,
        path.display()
    );
    Ok(0)
}

/// The outcome for one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Current,
    Drifted(String),
    Failed(String),
}

/// One server's report line.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub key: String,
    pub status: Status,
    pub snapshot: PathBuf,
    pub sha256: String,
    pub package: Option<String>,
    pub seconds: f64,
}

use crate::cli::flags::ReportFormat as Format;

/// What `lock check` needs from the binary's edge: the layered policy of a server (floor and
/// its `policy` file) and a prepared sandbox for its command.
pub struct Env<'a> {
    pub policy: &'a dyn Fn(Option<&Path>) -> Result<Policy, String>,
    pub sandbox: &'a PrepareSandbox,
    pub timeout: Duration,
}

/// Prepares the sandbox of a server: its policy, the policy's file, the command and the grants;
/// `Ok(None)` when the policy turns the sandbox off, `Err` with why the server cannot start.
pub type PrepareSandbox = dyn Fn(
    &Policy,
    Option<&Path>,
    &[OsString],
    &crate::cli::flags::SandboxGrants,
) -> Result<Option<crate::sandbox::Setup>, String>;

/// Whether the command runs the pinned package version. `npm:` and `pypi:` pins are checked
/// (the exact `NAME@VERSION` or `NAME==VERSION` must be an argument, as `npx`, `uvx` and `pipx
/// run` take it), because a launcher given a bare name runs whatever version is newest on the
/// day; other schemes are recorded for the reader and not checked.
fn pin_named(pin: &str, command: &[String]) -> Result<(), String> {
    match pin.split_once(':') {
        Some(("npm" | "pypi", spec)) => {
            if command.iter().skip(1).any(|a| a == spec) {
                Ok(())
            } else {
                Err(format!(
                    "the command does not name the pinned package {spec:?} as an argument, so the launcher may run another version; write the exact version into the command"
                ))
            }
        }
        _ => Ok(()),
    }
}

/// Checks one server of the lock.
fn check_one(lock: &Lockfile, key: &str, s: &LockedServer, env: &Env<'_>) -> Status {
    if let Some(pin) = &s.package {
        if let Err(why) = pin_named(pin, &s.command) {
            return Status::Failed(why);
        }
    }
    let snap = lock.resolve(&s.snapshot);
    let policy_file = s.policy.as_ref().map(|p| lock.resolve(p));
    let policy = match (env.policy)(policy_file.as_deref()) {
        Ok(p) => p,
        Err(e) => return Status::Failed(e),
    };
    let m = match manifest::load(&snap) {
        Ok(m) => m,
        Err(e) => return Status::Failed(e),
    };
    if !m.digest.eq_ignore_ascii_case(&s.sha256) {
        return Status::Failed(format!(
            "{} hashes to {} but the lock pins {}: the snapshot changed after it was locked; review it and update sha256",
            snap.display(),
            m.digest,
            s.sha256
        ));
    }
    let acceptance = manifest::Acceptance {
        allow_model_backed: policy.review.allow_model_backed,
        forbidden_side_effects: policy.review.forbidden_side_effects.clone(),
        max_validity: policy.review.max_validity,
    };
    let mut problems: Vec<String> = manifest::validate(&m, Timestamp::now(), &acceptance)
        .iter()
        .map(|p| p.to_string())
        .collect();
    match super::signed::allowed_signers(&policy) {
        Err(e) => problems.push(e),
        Ok(signers) => {
            for line in super::signed::review_lines(&m, signers.as_ref(), Timestamp::now()) {
                if let (Err(bad), true) = (line, signers.is_some()) {
                    problems.push(bad);
                }
            }
        }
    }
    let entry = m.server(key);
    if let Err(p) = &entry {
        problems.push(format!(
            "{p} (the lock's key must be the snapshot's server key)"
        ));
    }
    if !problems.is_empty() {
        return Status::Failed(format!(
            "the snapshot {} is not acceptable: {}",
            snap.display(),
            problems.join("; ")
        ));
    }
    let Ok(entry) = entry else {
        return Status::Failed(format!("no server {key:?} in {}", snap.display()));
    };
    let command: Vec<OsString> = s.command.iter().map(OsString::from).collect();
    // A package runner runs its pinned install, as the proxy would run it (installed now on a
    // machine that has none), and the install's package record is compared with the
    // snapshot's.
    let (command, package) = match crate::cli::launch::for_check(&command, &snap, key) {
        Ok(c) => c,
        Err(e) => return Status::Failed(e),
    };
    let grants = crate::cli::flags::SandboxGrants {
        read: s.sandbox_read.clone(),
        write: s.sandbox_write.clone(),
        env: s.sandbox_env.clone(),
        connect: Vec::new(),
    };
    let setup = match (env.sandbox)(&policy, policy_file.as_deref(), &command, &grants) {
        Ok(s) => s,
        Err(e) => return Status::Failed(e),
    };
    let version = m
        .protocol_version()
        .unwrap_or(crate::protocol::DEFAULT_PROTOCOL_VERSION);
    let live = capture::capture_command(
        &command,
        version,
        &Limits {
            max_pages: policy.limits.max_pages,
            ..Limits::default()
        },
        policy.limits.max_message_bytes,
        env.timeout,
        setup.as_ref().map(|s| &s.prepared),
    );
    drop(setup);
    let mut live = match live {
        Ok(l) => l,
        Err(e) => return Status::Failed(format!("the server could not be checked live: {e}")),
    };
    if let (Some(p), Some(o)) = (package, live.entry.as_object_mut()) {
        o.insert("package".into(), p);
    }
    let mut drift = String::new();
    if live.protocol_version != version {
        drift.push_str(&format!(
            "the server negotiated protocol {} but {version} is pinned\n",
            live.protocol_version
        ));
    }
    drift.push_str(&live_drift(key, entry, &live.entry));
    if drift.is_empty() {
        Status::Current
    } else {
        Status::Drifted(drift)
    }
}

/// `mcpguard lock check [FILE] [--format text|json|junit]`
pub fn check(file: Option<&Path>, format: Format, env: &Env<'_>) -> CmdResult {
    let path = file.unwrap_or(Path::new(DEFAULT_LOCK));
    let lock = match Lockfile::load(path) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("mcpguard: error: {e}");
            return Ok(2);
        }
    };
    let mut outcomes = Vec::new();
    for (key, s) in &lock.servers {
        let started = std::time::Instant::now();
        let status = check_one(&lock, key, s, env);
        outcomes.push(Outcome {
            key: key.clone(),
            status,
            snapshot: lock.resolve(&s.snapshot),
            sha256: s.sha256.clone(),
            package: s.package.clone(),
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    let text = match format {
        Format::Text => render_text(&outcomes),
        Format::Json => format!("{}\n", render_json(path, &outcomes)),
        Format::Junit => render_junit(path, &outcomes),
    };
    print!("{text}");
    let failed = outcomes
        .iter()
        .any(|o| matches!(o.status, Status::Failed(_)));
    let drifted = outcomes
        .iter()
        .any(|o| matches!(o.status, Status::Drifted(_)));
    Ok(if failed { 2 } else { u8::from(drifted) })
}

fn status_word(s: &Status) -> &'static str {
    match s {
        Status::Current => "current",
        Status::Drifted(_) => "drifted",
        Status::Failed(_) => "failed",
    }
}

fn render_text(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    for o in outcomes {
        match &o.status {
            Status::Current => out.push_str(&format!(
                "{}: current (sha256 {}{})\n",
                o.key,
                o.sha256,
                o.package
                    .as_ref()
                    .map(|p| format!(", {p}"))
                    .unwrap_or_default()
            )),
            Status::Drifted(diff) => {
                out.push_str(&format!(
                    "{}: DRIFTED: the live server differs from {}; review the change (`mcpguard capture` to a new file, `mcpguard diff`), then update the lock:\n",
                    o.key,
                    o.snapshot.display()
                ));
                for l in diff.lines() {
                    out.push_str(&format!("    {l}\n"));
                }
            }
            Status::Failed(why) => out.push_str(&format!("{}: FAILED: {why}\n", o.key)),
        }
    }
    let count = |w: &str| {
        outcomes
            .iter()
            .filter(|o| status_word(&o.status) == w)
            .count()
    };
    out.push_str(&format!(
        "{} servers: {} current, {} drifted, {} failed\n",
        outcomes.len(),
        count("current"),
        count("drifted"),
        count("failed")
    ));
    out
}

fn render_json(path: &Path, outcomes: &[Outcome]) -> Value {
    let servers: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            let mut v = json!({
                "key": o.key,
                "status": status_word(&o.status),
                "snapshot": o.snapshot.display().to_string(),
                "sha256": o.sha256,
                "package": o.package,
                "seconds": o.seconds,
            });
            match &o.status {
                Status::Drifted(d) => v["diff"] = json!(d),
                Status::Failed(e) => v["error"] = json!(e),
                Status::Current => {}
            }
            v
        })
        .collect();
    let count = |w: &str| {
        outcomes
            .iter()
            .filter(|o| status_word(&o.status) == w)
            .count()
    };
    json!({
        "lockfile": path.display().to_string(),
        "servers": servers,
        "summary": {"current": count("current"), "drifted": count("drifted"), "failed": count("failed")},
    })
}

/// Escapes text for XML character data and attribute values.
fn xml(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 has no way to write most control characters, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\r' | '\t') => {
                out.push_str(&format!("\\u{{{:04X}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// JUnit XML as CI systems read it: one test case per server; drift is a `failure`, a server
/// that could not be checked an `error`.
fn render_junit(path: &Path, outcomes: &[Outcome]) -> String {
    let failures = outcomes
        .iter()
        .filter(|o| matches!(o.status, Status::Drifted(_)))
        .count();
    let errors = outcomes
        .iter()
        .filter(|o| matches!(o.status, Status::Failed(_)))
        .count();
    let total: f64 = outcomes.iter().map(|o| o.seconds).sum();
    let name = xml(&format!("mcpguard lock check {}", path.display()));
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"{name}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" time=\"{total:.3}\">\n  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"0\" time=\"{total:.3}\">\n",
        outcomes.len(),
        outcomes.len()
    );
    for o in outcomes {
        out.push_str(&format!(
            "    <testcase classname=\"mcpguard.lock\" name=\"{}\" time=\"{:.3}\">\n      <properties>\n        <property name=\"snapshot\" value=\"{}\"/>\n        <property name=\"sha256\" value=\"{}\"/>\n",
            xml(&o.key),
            o.seconds,
            xml(&o.snapshot.display().to_string()),
            xml(&o.sha256)
        ));
        if let Some(p) = &o.package {
            out.push_str(&format!(
                "        <property name=\"package\" value=\"{}\"/>\n",
                xml(p)
            ));
        }
        out.push_str("      </properties>\n");
        match &o.status {
            Status::Current => {}
            Status::Drifted(d) => out.push_str(&format!(
                "      <failure type=\"drifted\" message=\"the live server differs from the reviewed snapshot\">{}</failure>\n",
                xml(d)
            )),
            Status::Failed(e) => out.push_str(&format!(
                "      <error type=\"failed\" message=\"{}\">{}</error>\n",
                xml(e.lines().next().unwrap_or("")),
                xml(e)
            )),
        }
        out.push_str("    </testcase>\n");
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_pins_must_be_in_the_command() {
        let cmd = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let npx = cmd(&[
            "npx",
            "-y",
            "@modelcontextprotocol/server-everything@2026.1.26",
        ]);
        assert!(pin_named(
            "npm:@modelcontextprotocol/server-everything@2026.1.26",
            &npx
        )
        .is_ok());
        let e = pin_named(
            "npm:@modelcontextprotocol/server-everything@2026.1.27",
            &npx,
        )
        .unwrap_err();
        assert!(e.contains("does not name the pinned package"), "{e}");
        let floating = cmd(&["uvx", "mcp-server-time"]);
        assert!(pin_named("pypi:mcp-server-time==2026.10.19", &floating).is_err());
        assert!(
            pin_named("cargo:anything@1", &floating).is_ok(),
            "other schemes are recorded only"
        );
    }

    #[test]
    fn junit_escapes_everything_a_diff_can_hold() {
        let outcomes = vec![
            Outcome {
                key: "a<b".into(),
                status: Status::Drifted("at /x: \"<script>\" & '\u{1b}'".into()),
                snapshot: "s.json".into(),
                sha256: "00".into(),
                package: Some("npm:x@1".into()),
                seconds: 0.5,
            },
            Outcome {
                key: "c".into(),
                status: Status::Failed("no\nserver".into()),
                snapshot: "t.json".into(),
                sha256: "11".into(),
                package: None,
                seconds: 0.25,
            },
        ];
        let x = render_junit(Path::new("mcpguard.lock"), &outcomes);
        assert!(x.contains("name=\"a&lt;b\""), "{x}");
        assert!(
            x.contains("at /x: &quot;&lt;script&gt;&quot; &amp; &apos;\\u{001B}&apos;"),
            "{x}"
        );
        assert!(x.contains("tests=\"2\" failures=\"1\" errors=\"1\""), "{x}");
        assert!(
            x.contains("<error type=\"failed\" message=\"no\">no\nserver</error>"),
            "{x}"
        );
    }
}
