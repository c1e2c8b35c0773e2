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
pub fn for_capture(command: &[OsString]) -> Result<(Vec<OsString>, Option<Value>), String> {
    let Some(runner) = packages::parse(command)? else {
        return Ok((command.to_vec(), None));
    };
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

/// The command a live check starts for the snapshot `file`'s server `key` (reads the snapshot;
/// the proxy, which has already verified it, uses [`for_run_with`]).
pub fn for_run(command: &[OsString], file: &Path, key: &str) -> Result<Vec<OsString>, String> {
    // Most commands are not runners; only those read the snapshot a second time.
    if packages::parse(command)?.is_none() {
        return Ok(command.to_vec());
    }
    let m = manifest::load(file)?;
    let entry = m.server(key).map_err(|p| p.to_string())?;
    for_run_with(command, entry.get("package"))
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
    diag::emit(
        Level::Info,
        &format!(
            "running the pinned {} from {}",
            pin.label(),
            installed.dir.display()
        ),
    );
    Ok(installed.command)
}
