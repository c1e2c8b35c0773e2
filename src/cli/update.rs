//! `mcpguard update SNAPSHOT [--server KEY] [--yes] [--config HOST.json] -- <server command>`:
//! capture the server again (under the same sandbox as `capture`), write a new snapshot in which
//! every tool that did not change keeps its review and every changed or new tool is unreviewed,
//! print the triage of what changed, keep the old file as `SNAPSHOT.prev`, and (with `--config`)
//! pin the new digest into the host configuration as `wrap --pin` does.
//!
//! On a terminal, and without `--yes`, it then walks the changed and new tools through the
//! interactive review (`cli::interactive`), with the old review's answers as the defaults. Without
//! a terminal it never asks. An update of an unchanged server renews the snapshot: a new
//! `capturedAt` and `expiresAt`, every review carried, a new digest pinned as above. This is how an
//! expired snapshot comes back without a second review; the proxy names the command
//! ([`renew_command`]) when it refuses an expired snapshot, and warns [`RENEW_WARNING`] before.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use crate::cli::commands::{rfc3339, CmdResult};
use crate::process::capture::{self, Limits};
use crate::snapshot::diff::triage::{self, Status};
use crate::snapshot::manifest::{self, Acceptance, Manifest};

/// Options of `mcpguard update`.
pub struct UpdateArgs<'a> {
    pub file: &'a Path,
    pub server: Option<&'a str>,
    pub yes: bool,
    pub config: Option<&'a Path>,
    pub expires_in: Option<Duration>,
    pub reviewer: Option<&'a str>,
    pub acceptance: Acceptance,
    pub limits: Limits,
    pub timeout: Duration,
    pub max_message_bytes: usize,
    pub command: &'a [OsString],
    /// The package the command runs, pinned again for this update (`cli::launch::for_capture`).
    pub package: Option<Value>,
    /// The sandbox the server runs in (`None`: the policy turns it off).
    pub sandbox: Option<std::sync::Arc<crate::sandbox::Prepared>>,
}

/// Where the previous snapshot is kept: `FILE.prev` beside it.
pub fn prev_path(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(".prev");
    PathBuf::from(name)
}

/// `mcpguard update`.
pub fn run(args: UpdateArgs<'_>) -> CmdResult {
    let old_bytes = std::fs::read(args.file)
        .map_err(|e| format!("cannot read {}: {e}", args.file.display()))?;
    let old =
        manifest::from_bytes(&old_bytes).map_err(|e| format!("{}: {e}", args.file.display()))?;
    let keys: Vec<String> = old
        .servers()
        .map_err(|p| format!("{}: {p}", args.file.display()))?
        .keys()
        .cloned()
        .collect();
    let key = match (args.server, keys.as_slice()) {
        (Some(k), _) => k.to_string(),
        (None, [only]) => only.clone(),
        (None, _) => {
            return Err(format!(
                "{} has several servers ({}): say which one the command runs with --server KEY",
                args.file.display(),
                keys.join(", ")
            ))
        }
    };
    old.server(&key)
        .map_err(|p| format!("{}: {p}", args.file.display()))?;
    let validity = validity(&old, args.expires_in, &args.acceptance)?;
    let version = old
        .protocol_version()
        .unwrap_or(crate::protocol::DEFAULT_PROTOCOL_VERSION)
        .to_string();

    let live = capture::capture_command(
        args.command,
        &version,
        &args.limits,
        args.max_message_bytes,
        args.timeout,
        args.sandbox.as_ref(),
    )
    .map_err(|e| format!("update failed: the capture of server {key:?} failed: {e}"))?;
    let mut live = live;
    if let (Some(package), Some(obj)) = (args.package, live.entry.as_object_mut()) {
        obj.insert("package".into(), package);
    }
    let old_package = old
        .server(&key)
        .ok()
        .and_then(|e| e.get("package"))
        .and_then(|p| crate::process::packages::Package::from_json(p).ok());
    let new_package = live
        .entry
        .get("package")
        .and_then(|p| crate::process::packages::Package::from_json(p).ok());
    match (&old_package, &new_package) {
        (Some(a), Some(b)) if a != b => eprintln!(
            "package: {} ({}) -> {} ({})",
            a.label(),
            a.integrity,
            b.label(),
            b.integrity
        ),
        (None, Some(b)) => eprintln!("package: now pinned as {} ({})", b.label(), b.integrity),
        _ => {}
    }
    // The cache directives of the modern era (ttlMs, cacheScope) describe a result, not a tool
    // or the server (the gate does not count them as drift either): a capture that differs only
    // there is the same server, and the update a no-op.
    let old_entry = old.server(&key).map_err(|p| p.to_string())?.clone();
    let comparable = |entry: &Value| {
        let mut v = entry.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("reviews");
        }
        crate::gate::modern::strip_cache_fields(&mut v);
        v
    };
    let live_entry = if live.protocol_version == version
        && crate::snapshot::diff::json_eq(&comparable(&old_entry), &comparable(&live.entry))
    {
        old_entry.clone()
    } else {
        live.entry
    };
    let now = Timestamp::now();
    let expires = now
        .checked_add(validity)
        .map_err(|e| format!("--expires-in is out of range: {e}"))?;
    let updated = crate::snapshot::update::update(
        &old.doc,
        &key,
        live_entry,
        &live.protocol_version,
        &rfc3339(now),
        &rfc3339(expires),
    )
    .map_err(|e| format!("{}: {e}", args.file.display()))?;
    eprint!("{}", triage::render(&key, &updated.triage));

    let mut digest = old.digest.clone();
    let keep_prev = || {
        manifest::write_atomic(&prev_path(args.file), &old_bytes).map_err(|e| {
            format!(
                "cannot keep the old snapshot as {}: {e}; nothing was changed",
                prev_path(args.file).display()
            )
        })
    };
    if !updated.changed {
        // Nothing changed (the same tools, identity, package and protocol): the reviews still
        // describe exactly what the server serves, so the snapshot is renewed rather than
        // reviewed again. This is the way back from an expired snapshot.
        match crate::snapshot::update::renew(&old.doc, &rfc3339(now), &rfc3339(expires)) {
            Err(why) => eprintln!(
                "{}: server {key:?} is unchanged, but the snapshot is not renewed: {why}; nothing was written (the digest stays the same)",
                args.file.display()
            ),
            Ok(doc) => {
                keep_prev()?;
                let m = Manifest::new(doc);
                manifest::write_atomic(args.file, &manifest::to_pretty(&m.doc))
                    .map_err(|e| format!("cannot write {}: {e}", args.file.display()))?;
                digest = m.digest;
                let was = old
                    .doc
                    .get("expiresAt")
                    .and_then(Value::as_str)
                    .unwrap_or("?");
                eprintln!(
                    "renewed {}: server {key:?} is unchanged (the same tools, identity and package), so its {} review(s) are carried and nothing needs reviewing; it now expires at {} (it was {was}); the old snapshot is kept as {}",
                    args.file.display(),
                    updated.carried.len(),
                    rfc3339(expires),
                    prev_path(args.file).display(),
                );
                if args.config.is_none() {
                    eprintln!(
                        "pin the new digest where the old one is pinned: `mcpguard wrap --pin <the host configuration file>`, or run update with --config HOST.json"
                    );
                }
            }
        }
    } else {
        keep_prev()?;
        let m = Manifest::new(updated.doc);
        manifest::write_atomic(args.file, &manifest::to_pretty(&m.doc))
            .map_err(|e| format!("cannot write {}: {e}", args.file.display()))?;
        digest = m.digest;
        let count = |s: Status| {
            updated
                .triage
                .tools
                .iter()
                .filter(|t| t.status == s)
                .count()
        };
        eprintln!(
            "updated {}: {} review(s) carried, {} changed and {} new tool(s) unreviewed, {} removed; the old snapshot is kept as {} (`mcpguard diff {} {}` shows the update)",
            args.file.display(),
            updated.carried.len(),
            count(Status::Changed),
            count(Status::New),
            count(Status::Removed),
            prev_path(args.file).display(),
            prev_path(args.file).display(),
            args.file.display(),
        );
        let to_review: Vec<String> = updated.triage.changed().map(|t| t.name.clone()).collect();
        // Tool names come from the server: shown quoted, hidden characters visible.
        let shown: Vec<String> = to_review
            .iter()
            .map(|n| crate::snapshot::diff::display_name(n))
            .collect();
        let interactive =
            !args.yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
        if !to_review.is_empty() {
            if interactive {
                digest = crate::cli::interactive::walk(&crate::cli::interactive::Walk {
                    file: args.file,
                    server: &key,
                    tools: &to_review,
                    reviewer: args.reviewer,
                    previous: Some(&old_entry),
                    triage: Some(&updated.triage),
                })?;
            } else {
                eprintln!(
                    "not reviewed, so not served until you review them: {}; review them with `mcpguard review {} --server {}` (on a terminal it asks about each), then pin the new digest",
                    shown.join(", "),
                    crate::cli::wrap::shell_quote(&args.file.display().to_string()),
                    crate::cli::wrap::shell_quote(&key),
                );
            }
        }
    }
    if let Some(config) = args.config {
        let code = crate::cli::wrap::run(&crate::cli::wrap::WrapArgs {
            config,
            dry_run: false,
            snapshot_dir: None,
            mcpguard: None,
            policy: None,
            pin: true,
            only: Some(args.file),
            entry: None,
            grants: &crate::cli::flags::SandboxGrants::default(),
            from_lock: None,
            yes: false,
        })?;
        if code != 0 {
            return Err(format!(
                "the new digest of {} was not pinned into {} (see above)",
                args.file.display(),
                config.display()
            ));
        }
    }
    println!("{digest}");
    Ok(0)
}

/// The new snapshot's validity: `--expires-in`, else as long as the old one was valid, never
/// more than the policy accepts.
fn validity(
    old: &Manifest,
    expires_in: Option<Duration>,
    acceptance: &Acceptance,
) -> Result<jiff::SignedDuration, String> {
    let max = acceptance.max_validity;
    let wanted = match expires_in {
        Some(d) => jiff::SignedDuration::try_from(d)
            .map_err(|e| format!("--expires-in is out of range: {e}"))?,
        None => {
            let instant = |k: &str| {
                old.doc
                    .get(k)
                    .and_then(Value::as_str)
                    .and_then(|t| t.parse::<Timestamp>().ok())
            };
            match (instant("capturedAt"), instant("expiresAt")) {
                (Some(c), Some(e)) if e > c => e.duration_since(c).min(max),
                _ => jiff::SignedDuration::from_hours(7 * 24).min(max),
            }
        }
    };
    if wanted.is_zero() || wanted.is_negative() || wanted > max {
        return Err(format!(
            "--expires-in must be more than zero and at most the policy's maximum validity ({} days)",
            max.as_secs() / 86_400
        ));
    }
    Ok(wanted)
}

/// How long before a snapshot's `expiresAt` the proxy warns at start that it must be renewed.
pub const RENEW_WARNING: Duration = Duration::from_secs(2 * 24 * 3600);

/// The exact command that renews the snapshot `manifest` of server `key`, for a proxy started
/// with this policy, these grants and this server command: `mcpguard update` captures the server
/// again under the same sandbox and, when nothing changed, writes a new expiry with every review
/// carried and pins it into the host configuration.
pub fn renew_command(
    manifest: &Path,
    key: &str,
    policy: Option<&Path>,
    grants: &crate::cli::flags::SandboxGrants,
    server: &[OsString],
) -> String {
    use crate::cli::wrap::shell_quote;
    let path = |p: &Path| shell_quote(&p.display().to_string());
    let mut words = vec![
        "mcpguard update".to_string(),
        path(manifest),
        "--server".into(),
        shell_quote(key),
    ];
    if let Some(p) = policy {
        words.extend(["--policy".into(), path(p)]);
    }
    for (flag, paths) in [
        ("--sandbox-read", &grants.read),
        ("--sandbox-write", &grants.write),
    ] {
        for p in paths {
            words.extend([flag.to_string(), path(p)]);
        }
    }
    for name in &grants.env {
        words.extend(["--sandbox-env".into(), shell_quote(name)]);
    }
    words.extend([
        "--config".into(),
        "<the host configuration file>".into(),
        "--".into(),
    ]);
    words.extend(server.iter().map(|a| shell_quote(&a.to_string_lossy())));
    words.join(" ")
}

/// The `expiresAt` of the snapshot file at `manifest`, if it can be read; for the proxy's
/// messages only (the snapshot itself is verified by `gate::pin`).
pub fn expires_at(manifest: &Path) -> Option<Timestamp> {
    #[derive(serde::Deserialize)]
    struct Instants {
        #[serde(rename = "expiresAt")]
        expires_at: String,
    }
    let bytes = std::fs::read(manifest).ok()?;
    let i: Instants = serde_json::from_slice(&bytes).ok()?;
    i.expires_at.parse().ok()
}

/// What the proxy says about the expiry of the snapshot it starts with, at `now`: the refusal's
/// addition when it has expired (`Err`), a warning when it expires within [`RENEW_WARNING`]
/// (`Ok(Some)`), nothing otherwise. Both name [`renew_command`].
pub fn expiry_notice(
    expires: Option<Timestamp>,
    now: Timestamp,
    command: impl FnOnce() -> String,
) -> Result<Option<String>, String> {
    let Some(e) = expires else { return Ok(None) };
    let left = e.duration_since(now);
    if left.is_negative() || left.is_zero() {
        return Err(format!(
            "the snapshot expired at {}. If the server is unchanged, renew it without reviewing again \
             (a new expiry, every review carried, the new digest pinned): {}",
            rfc3339(e),
            command()
        ));
    }
    let warn = jiff::SignedDuration::try_from(RENEW_WARNING).unwrap_or_default();
    if left <= warn {
        let hours = left.as_secs() / 3600;
        return Ok(Some(format!(
            "the snapshot expires at {} (in {hours} h); after that the server will not start. \
             Renew it now (if the server is unchanged, nothing needs reviewing): {}",
            rfc3339(e),
            command()
        )));
    }
    Ok(None)
}
