//! The server command as it will run: package runners replaced by their pinned installs.
//!
//! `capture` resolves an `npx`/`uvx` command into mcpguard's package store and records the
//! package in the snapshot; the proxy and a live `check` find that install again, check it
//! against the snapshot, and run it by its entry point. Commands that are not package runners
//! pass unchanged. The work is in `process::packages`; this is the glue between it, the snapshot
//! and the diagnostics.

use std::ffi::OsString;
use std::path::Path;

use serde_json::Value;

use crate::process::diag;
use crate::process::packages::{self, Package};
use crate::protocol::Level;
use crate::snapshot::manifest;

/// The command `capture` runs, and the package record for the snapshot when it is a runner.
/// `build_from_source` names the PyPI packages the person allows to be built from source
/// (`--build-from-source`); every other package is installed from wheels only.
pub fn for_capture(
    command: &[OsString],
    build_from_source: &[String],
) -> Result<(Vec<OsString>, Option<Value>), String> {
    let Some(mut runner) = packages::parse(command)? else {
        return Ok((command.to_vec(), None));
    };
    runner.build_from_source = build_from_source.to_vec();
    let store = packages::store()?;
    let manager = match runner.ecosystem {
        packages::Ecosystem::Npm => "npm install",
        packages::Ecosystem::Pypi => "uv pip install",
    };
    diag::emit(
        Level::Info,
        &format!(
            "resolving {} with `{manager}` outside the sandbox (install scripts do not run), into {}",
            runner.spec,
            store.display()
        ),
    );
    let installed = packages::install(&runner, &store)?;
    diag::emit(
        Level::Info,
        &format!(
            "pinned {} ({}); the server runs from {} under the sandbox, and later runs start this install, offline",
            installed.package.label(),
            installed.package.integrity,
            installed.dir.display()
        ),
    );
    Ok((installed.command, Some(installed.package.to_json())))
}

/// The command the proxy starts, given the package record of the snapshot it has already loaded
/// and verified (`Pin::package`): the snapshot is not read again, so a start parses and hashes
/// it once, and the record checked is the one in the bytes whose digest was checked.
pub fn for_run_with(command: &[OsString], record: Option<&Value>) -> Result<Vec<OsString>, String> {
    let Some(runner) = packages::parse(command)? else {
        return Ok(command.to_vec());
    };
    let Some(record) = record else {
        diag::emit(
            Level::Warn,
            &format!(
                "{} runs {} from the registry on every start, unpinned (the snapshot records no package); \
                 capture the server again so that mcpguard pins the package it reviewed",
                runner.program.to_string_lossy(),
                runner.spec
            ),
        );
        return Ok(command.to_vec());
    };
    let pin = Package::from_json(record)?;
    let installed = packages::verify(&runner, &pin, &packages::store()?)?;
    let checked = checked_note(&installed);
    diag::emit(
        Level::Info,
        &format!(
            "running the pinned {} from {}{checked}",
            pin.label(),
            installed.dir.display()
        ),
    );
    Ok(installed.command)
}

/// The command a live check (`check --server KEY`, `lock check`) starts for the snapshot
/// `file`'s server `key`, and the package record the live side holds, for the comparison with
/// the snapshot's: the pinned install when this machine has it (checked as a start checks it,
/// content included), else the pinned version installed now (a fresh CI checkout). `None` for
/// a command that is not a package runner, or a snapshot that pins no package.
pub fn for_check(
    command: &[OsString],
    file: &Path,
    key: &str,
) -> Result<(Vec<OsString>, Option<Value>), String> {
    let Some(runner) = packages::parse(command)? else {
        return Ok((command.to_vec(), None));
    };
    let m = manifest::load(file)?;
    let entry = m.server(key).map_err(|p| p.to_string())?;
    let Some(record) = entry.get("package") else {
        return for_run_with(command, None).map(|c| (c, None));
    };
    let pin = Package::from_json(record)?;
    let installed = packages::for_check(&runner, &pin, &packages::store()?)?;
    diag::emit(
        Level::Info,
        &format!(
            "checking the pinned {} from {}{}",
            installed.package.label(),
            installed.dir.display(),
            checked_note(&installed)
        ),
    );
    Ok((installed.command, Some(installed.package.to_json())))
}

/// Removes the content digest from an entry's package record, for a comparison between
/// machines: the digest is of one machine's install (its folder's path is written into console
/// scripts, and npm resolves dependencies on the day), and every start on the machine that made
/// the install checks it. What a live check compares is the package's identity: ecosystem,
/// name, version, the registry's integrity (npm) or the `RECORD` hash (PyPI), the request and
/// the command.
pub fn without_content(entry: &mut Value) {
    if let Some(p) = entry.get_mut("package").and_then(Value::as_object_mut) {
        p.remove("content");
    }
}

/// What the content check of a start hashed and how long it took, for the info line (and the
/// benchmark in BENCHMARKS.md, which reads it).
fn checked_note(installed: &packages::Installed) -> String {
    installed
        .checked
        .as_ref()
        .map(|(c, took)| {
            format!(
                " (content {} checked: {} files, {} bytes hashed in {:.1} ms)",
                c.digest,
                c.files,
                c.bytes,
                took.as_secs_f64() * 1e3
            )
        })
        .unwrap_or_default()
}
