//! Version-manager shims: a server command such as `python3` found as `~/.pyenv/shims/python3`
//! is a shell script that runs the manager, which picks an interpreter from files in the home
//! directory at run time. Under the sandbox the manager's tree is not granted (and granting it
//! whole would let the server run anything installed there), so the shim fails with status 126.
//!
//! This module reads the choice the manager would make — from the same variables and files, never
//! by running the shim unsandboxed — and names the real interpreter, which the sandbox then
//! examines and runs. pyenv and asdf keep their choice in files (`PYENV_VERSION`,
//! `.python-version`, `~/.pyenv/version`; `ASDF_<TOOL>_VERSION`, `.tool-versions`), so their
//! shims are resolved; mise and volta decide inside their own binary, so a shim of theirs is
//! refused with the command that prints the real interpreter. It decides nothing else.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::presets::Env;

/// A shim resolved to the program it would run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub real: PathBuf,
    /// For the report: which manager, which version, and where the choice came from.
    pub note: String,
}

/// Resolves `program` when it is a version manager's shim. `Ok(None)`: not a shim. `Err`: a shim
/// whose choice cannot be read, with what to run instead.
pub fn resolve(program: &Path, env: &Env<'_>, cwd: &Path) -> Result<Option<Resolved>, String> {
    let name = file_name(program);
    if let Ok(real) = std::fs::canonicalize(program) {
        let target = file_name(&real);
        if let Some((manager, which)) = match target {
            "mise" | "rtx" => Some(("mise", format!("mise which {name}"))),
            "volta-shim" | "volta" => Some(("volta", format!("volta which {name}"))),
            _ => None,
        } {
            if target != name {
                return Err(format!(
                    "{} is a {manager} shim: {manager} picks the program at run time, inside its own binary, which the sandbox cannot examine; run the program by its real path instead (`{which}` prints it), e.g. `mcpguard … -- $({which}) ARGS`",
                    program.display()
                ));
            }
        }
    }
    let Some(text) = small_script(program) else {
        return Ok(None);
    };
    if let Some(root) = pyenv_root(&text, program, env) {
        return pyenv(program, name, &root, env, cwd).map(Some);
    }
    if let Some(root) = asdf_root(&text, program, env) {
        return asdf(program, name, &text, &root, env, cwd).map(Some);
    }
    Ok(None)
}

fn file_name(p: &Path) -> &str {
    p.file_name().and_then(OsStr::to_str).unwrap_or("")
}

/// The text of a shell script of at most 8 KiB (a shim is a few lines; an interpreter is a
/// binary and never read whole).
fn small_script(program: &Path) -> Option<String> {
    let meta = std::fs::metadata(program).ok()?;
    if !meta.is_file() || meta.len() > 8192 {
        return None;
    }
    let text = std::fs::read_to_string(program).ok()?;
    text.starts_with("#!").then_some(text)
}

/// The pyenv root of a pyenv shim: `export PYENV_ROOT="…"` in the shim, else `PYENV_ROOT`, else
/// the folder above `shims/`. Only a script in a `shims` folder that execs `…/libexec/pyenv exec`
/// (pyenv's shim template) is a pyenv shim: a server's own wrapper that mentions pyenv must
/// still run as written.
fn pyenv_root(text: &str, program: &Path, env: &Env<'_>) -> Option<PathBuf> {
    let execs_pyenv = text
        .lines()
        .any(|l| l.trim_start().starts_with("exec ") && l.contains("libexec/pyenv\" exec "));
    if !execs_pyenv || shims_parent(program).is_none() {
        return None;
    }
    let from_shim = text.lines().find_map(|l| {
        let v = l.trim().strip_prefix("export PYENV_ROOT=")?;
        Some(PathBuf::from(v.trim_matches('"')))
    });
    from_shim
        .or_else(|| env.get("PYENV_ROOT").map(PathBuf::from))
        .or_else(|| shims_parent(program))
        .filter(|r| r.is_absolute())
}

fn shims_parent(program: &Path) -> Option<PathBuf> {
    let dir = program.parent()?;
    (file_name(dir) == "shims").then(|| dir.parent().map(Path::to_path_buf))?
}

/// The first file named `name` in `cwd` or one of its ancestors.
fn find_up(cwd: &Path, name: &str) -> Option<PathBuf> {
    cwd.ancestors().map(|d| d.join(name)).find(|p| p.is_file())
}

/// `pyenv version-name`, read the way pyenv reads it: `PYENV_VERSION`, else the nearest
/// `.python-version` from the current directory up, else `$PYENV_ROOT/version`, else `system`.
/// Each source may list several versions (`:` or lines); the first that has the command wins.
fn pyenv(
    program: &Path,
    name: &str,
    root: &Path,
    env: &Env<'_>,
    cwd: &Path,
) -> Result<Resolved, String> {
    let (versions, source): (Vec<String>, String) = if let Some(v) = env
        .get("PYENV_VERSION")
        .and_then(OsStr::to_str)
        .filter(|v| !v.is_empty())
    {
        (
            v.split(':').map(str::to_string).collect(),
            "PYENV_VERSION".into(),
        )
    } else if let Some(file) = find_up(cwd, ".python-version") {
        (read_versions(&file), file.display().to_string())
    } else if root.join("version").is_file() {
        let file = root.join("version");
        (read_versions(&file), file.display().to_string())
    } else {
        (vec!["system".into()], "no version file".into())
    };
    for v in &versions {
        if v == "system" {
            // pyenv's "system" is the first such command on PATH outside its shims.
            let shims = root.join("shims");
            let found = env.get("PATH").and_then(|path| {
                std::env::split_paths(path)
                    .filter(|d| d != &shims && d.is_absolute())
                    .map(|d| d.join(name))
                    .find(|p| super::presets::find_program(p.as_os_str(), None, cwd).is_some())
            });
            if let Some(real) = found {
                return Ok(Resolved {
                    note: format!(
                        "{} is a pyenv shim; version \"system\" (from {source}) is {}",
                        program.display(),
                        real.display()
                    ),
                    real,
                });
            }
            continue;
        }
        let Some(dir) = version_dir(&root.join("versions"), v) else {
            continue;
        };
        let real = dir.join("bin").join(name);
        if super::presets::find_program(real.as_os_str(), None, cwd).is_some() {
            return Ok(Resolved {
                note: format!(
                    "{} is a pyenv shim; running the interpreter it selects, pyenv version {v} (from {source})",
                    program.display()
                ),
                real,
            });
        }
    }
    Err(format!(
        "{} is a pyenv shim, and the version it selects ({} from {source}) has no {name} under {}; install it (`pyenv install`), choose another with PYENV_VERSION or .python-version, or run the interpreter by its path (`pyenv which {name}` prints it)",
        program.display(),
        versions.join(":"),
        root.join("versions").display()
    ))
}

/// The versions a version file lists: words, `#` comments left out.
fn read_versions(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .flat_map(str::split_whitespace)
        .map(str::to_string)
        .collect()
}

/// The installed version folder for `v`: exact, else the highest installed `v.*` (pyenv and
/// asdf accept a prefix such as `3.11`).
fn version_dir(versions: &Path, v: &str) -> Option<PathBuf> {
    if v.is_empty() || v.contains('/') || v == ".." {
        return None;
    }
    let exact = versions.join(v);
    if exact.is_dir() {
        return Some(exact);
    }
    let prefix = format!("{v}.");
    let mut matches: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(versions)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|e| {
            let n = e.file_name().to_str()?.to_string();
            n.strip_prefix(&prefix)?;
            let key = n
                .split('.')
                .map(|p| p.parse::<u64>().ok())
                .collect::<Option<Vec<u64>>>()?;
            Some((key, e.path()))
        })
        .collect();
    matches.sort();
    matches.pop().map(|(_, p)| p)
}

/// The asdf data folder of an asdf shim (`exec asdf exec …` with `# asdf-plugin:` lines):
/// `ASDF_DATA_DIR`, else the folder above `shims/`.
fn asdf_root(text: &str, program: &Path, env: &Env<'_>) -> Option<PathBuf> {
    let execs_asdf = text
        .lines()
        .any(|l| l.trim_start().starts_with("exec ") && l.contains("asdf exec "));
    if !execs_asdf || !text.contains("# asdf-plugin:") || shims_parent(program).is_none() {
        return None;
    }
    env.get("ASDF_DATA_DIR")
        .map(PathBuf::from)
        .or_else(|| shims_parent(program))
        .filter(|r| r.is_absolute())
}

/// The version asdf would pick for the shim's plugin: `ASDF_<PLUGIN>_VERSION`, else the nearest
/// `.tool-versions` from the current directory up, else `~/.tool-versions`; the program is
/// `<data>/installs/<plugin>/<version>/bin/<name>`.
fn asdf(
    program: &Path,
    name: &str,
    text: &str,
    root: &Path,
    env: &Env<'_>,
    cwd: &Path,
) -> Result<Resolved, String> {
    let plugins: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# asdf-plugin:"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let home_file = env.get("HOME").map(|h| Path::new(h).join(".tool-versions"));
    for plugin in &plugins {
        let var = format!(
            "ASDF_{}_VERSION",
            plugin.to_ascii_uppercase().replace('-', "_")
        );
        let chosen = env
            .get(&var)
            .and_then(OsStr::to_str)
            .map(|v| (v.to_string(), var.clone()))
            .or_else(|| {
                let file = cwd
                    .ancestors()
                    .map(|d| d.join(".tool-versions"))
                    .chain(home_file.clone())
                    .filter(|p| p.is_file())
                    .find(|p| tool_version(p, plugin).is_some())?;
                Some((tool_version(&file, plugin)?, file.display().to_string()))
            });
        let Some((version, source)) = chosen else {
            continue;
        };
        let real = root
            .join("installs")
            .join(plugin)
            .join(&version)
            .join("bin")
            .join(name);
        if super::presets::find_program(real.as_os_str(), None, cwd).is_some() {
            return Ok(Resolved {
                note: format!(
                    "{} is an asdf shim; running the program it selects, {plugin} {version} (from {source})",
                    program.display()
                ),
                real,
            });
        }
    }
    Err(format!(
        "{} is an asdf shim, and no installed version of {} with {name} is selected for this directory; run the program by its path instead (`asdf which {name}` prints it)",
        program.display(),
        plugins.join(", ")
    ))
}

/// The first version `.tool-versions` lists for `plugin`.
fn tool_version(file: &Path, plugin: &str) -> Option<String> {
    std::fs::read_to_string(file).ok()?.lines().find_map(|l| {
        let mut w = l.split('#').next()?.split_whitespace();
        (w.next()? == plugin).then(|| w.next().map(str::to_string))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::os::unix::fs::PermissionsExt;

    fn exe(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn pyenv_tree(root: &Path) -> PathBuf {
        let shim = root.join("shims/python3");
        exe(
            &shim,
            &format!(
                "#!/usr/bin/env bash\nset -e\nexport PYENV_ROOT=\"{}\"\nexec \"{}/libexec/pyenv\" exec \"$program\" \"$@\"\n",
                root.display(),
                root.display()
            ),
        );
        for v in ["3.11.7", "3.12.1", "3.12.10"] {
            exe(&root.join("versions").join(v).join("bin/python3"), "");
        }
        shim
    }

    #[test]
    fn a_pyenv_shim_resolves_like_pyenv_version_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("pyenv");
        let shim = pyenv_tree(&root);
        let project = dir.path().join("project/sub");
        std::fs::create_dir_all(&project).unwrap();
        let no_env: Vec<(OsString, OsString)> = vec![];
        let env = Env { vars: &no_env };
        // Nothing chosen and no `system` python3 on PATH: refused with what to do.
        let err = resolve(&shim, &env, &project).unwrap_err();
        assert!(err.contains("pyenv which python3"), "{err}");
        std::fs::write(root.join("version"), "3.11.7\n").unwrap();
        let r = resolve(&shim, &env, &project).unwrap().unwrap();
        assert_eq!(r.real, root.join("versions/3.11.7/bin/python3"));
        assert!(r.note.contains("pyenv version 3.11.7 (from"), "{}", r.note);
        // A .python-version above the current directory wins over the global file; a prefix
        // picks the highest installed match.
        std::fs::write(dir.path().join("project/.python-version"), "3.12\n").unwrap();
        let r = resolve(&shim, &env, &project).unwrap().unwrap();
        assert_eq!(r.real, root.join("versions/3.12.10/bin/python3"));
        // PYENV_VERSION wins over both.
        let vars = vec![(OsString::from("PYENV_VERSION"), OsString::from("3.12.1"))];
        let r = resolve(&shim, &Env { vars: &vars }, &project)
            .unwrap()
            .unwrap();
        assert_eq!(r.real, root.join("versions/3.12.1/bin/python3"));
        assert!(r.note.contains("from PYENV_VERSION"), "{}", r.note);
        // A server's own wrapper that runs pyenv is not a shim: it runs as written.
        let wrapper = dir.path().join("bin/run-server");
        exe(
            &wrapper,
            &format!(
                "#!/bin/sh\nexec \"{}/libexec/pyenv\" exec python3 server.py\n",
                root.display()
            ),
        );
        assert_eq!(resolve(&wrapper, &env, &project).unwrap(), None);
        // A real interpreter is not a shim.
        assert_eq!(
            resolve(&root.join("versions/3.12.1/bin/python3"), &env, &project).unwrap(),
            None
        );
    }

    #[test]
    fn an_asdf_shim_resolves_from_tool_versions() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("asdf");
        let shim = root.join("shims/node");
        exe(
            &shim,
            "#!/usr/bin/env bash\n# asdf-plugin: nodejs 20.11.0\n# asdf-plugin: nodejs 18.0.0\nexec asdf exec \"node\" \"$@\"\n",
        );
        exe(&root.join("installs/nodejs/20.11.0/bin/node"), "");
        let cwd = dir.path().join("proj");
        std::fs::create_dir_all(&cwd).unwrap();
        std::fs::write(
            cwd.join(".tool-versions"),
            "python 3.12.1\nnodejs 20.11.0\n",
        )
        .unwrap();
        let no_env: Vec<(OsString, OsString)> = vec![];
        let r = resolve(&shim, &Env { vars: &no_env }, &cwd)
            .unwrap()
            .unwrap();
        assert_eq!(r.real, root.join("installs/nodejs/20.11.0/bin/node"));
    }

    #[test]
    fn a_mise_shim_is_refused_with_the_command_that_names_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let mise = dir.path().join("bin/mise");
        exe(&mise, "");
        let shim = dir.path().join("shims/node");
        std::fs::create_dir_all(shim.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(&mise, &shim).unwrap();
        let no_env: Vec<(OsString, OsString)> = vec![];
        let err = resolve(&shim, &Env { vars: &no_env }, dir.path()).unwrap_err();
        assert!(err.contains("mise which node"), "{err}");
    }
}
