//! Why a sandboxed server most likely failed, and the flag or policy key that grants what it
//! lacked: from the way it ended (exit status, signal, a timeout), the permission errors its
//! stderr named (EACCES, EPERM, EROFS, with the path when the line quotes one) and the grants of
//! the run. A server that dies under the sandbox otherwise leaves only its own, often misleading,
//! words ("not a valid Git repository" for a repository that was merely not granted).
//!
//! It owns the wording of that explanation and the reading of stderr lines for denials. It runs
//! nothing and decides nothing: the process layer feeds it lines and the ending, and prints what
//! it returns. It reads only the metadata of the paths it suggests (file or folder).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Access;

/// How the server ended before it answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    Exited(i32),
    Signalled(i32),
    /// It did not answer `method` within `after`.
    TimedOut {
        method: String,
        after: Duration,
    },
    /// Its output closed and no exit status was seen.
    Closed,
}

impl Ending {
    /// How a process that exited ended.
    pub fn of(status: &std::process::ExitStatus) -> Ending {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Ending::Exited(code),
            (None, Some(signal)) => Ending::Signalled(signal),
            _ => Ending::Closed,
        }
    }
}

/// The kind of permission error a stderr line reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Errno {
    /// EACCES, "Permission denied": Landlock refused to read, write or execute a path.
    Eacces,
    /// EPERM, "Operation not permitted": the system-call filter, or Landlock refusing a link or
    /// rename across grants.
    Eperm,
    /// EROFS, "Read-only file system": the mount namespace keeps everything but the writable
    /// grants read-only.
    Erofs,
    /// Not a permission error: a package's compiled addon (`build/Release/x.node`, a prebuilt
    /// binary) is missing because its install script never ran (`npm --ignore-scripts`, as
    /// mcpguard's package store installs). Recorded with the denials so that every explanation
    /// says it instead of blaming the sandbox.
    NoAddon,
}

impl Errno {
    fn name(self) -> &'static str {
        match self {
            Errno::Eacces => "EACCES",
            Errno::Eperm => "EPERM",
            Errno::Erofs => "EROFS",
            Errno::NoAddon => "compiled addon missing",
        }
    }
}

/// One stderr line that reports a permission error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub line: String,
    pub errno: Errno,
    /// The absolute path the line names, if it names one.
    pub path: Option<PathBuf>,
}

/// Reads one (sanitized) stderr line: a denial, or nothing.
pub fn denial(line: &str) -> Option<Denial> {
    let lower = line.to_ascii_lowercase();
    if missing_addon(&lower) {
        return Some(Denial {
            line: line.to_string(),
            errno: Errno::NoAddon,
            path: named_path(line),
        });
    }
    let errno = if lower.contains("read-only file system") || line.contains("EROFS") {
        Errno::Erofs
    } else if lower.contains("permission denied")
        || line.contains("EACCES")
        || line.contains("[Errno 13]")
    {
        Errno::Eacces
    } else if lower.contains("operation not permitted")
        || line.contains("EPERM")
        || line.contains("[Errno 1]")
    {
        Errno::Eperm
    } else {
        return None;
    };
    Some(Denial {
        line: line.to_string(),
        errno,
        path: named_path(line),
    })
}

/// Whether a (lower-cased) stderr line says a package's compiled addon is missing: node's
/// `Cannot find module '…/build/Release/x.node'`, the `bindings` package's "Could not locate the
/// bindings file", `node-gyp-build`'s "No native build was found".
fn missing_addon(lower: &str) -> bool {
    lower.contains("could not locate the bindings file")
        || lower.contains("no native build was found")
        || ((lower.contains("cannot find module") || lower.contains("no such file"))
            && (lower.contains(".node'")
                || lower.contains(".node\"")
                || lower.contains("build/release/")))
}

/// The hint for a missing compiled addon: not the sandbox, but an install script that never ran.
const NO_ADDON: &str = "a compiled addon of the package is missing: its install script (which builds or downloads it) never ran, because mcpguard installs pinned npm packages with --ignore-scripts (an install script would run outside the sandbox with your rights before any review) or the package was installed so; no grant fixes this. Install the package by hand where you accept its install script (`npm install PKG` in a folder of its own), run it by its entry point (`node /abs/node_modules/PKG/…`), and wrap that command";

/// The package runner a server command starts (`uvx`, `npx`, `uv run`, `uv tool run`, `pipx
/// run`, `pnpm dlx`, `bunx`), which resolves and installs the package at each start.
fn package_runner(command: &[OsString]) -> Option<String> {
    let word = |i: usize| {
        command
            .get(i)
            .map(|w| w.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let program = Path::new(&word(0))
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match (program.as_str(), word(1).as_str(), word(2).as_str()) {
        ("uvx" | "npx" | "bunx" | "pnpx", _, _) => Some(program),
        ("uv", "run", _) | ("pipx", "run", _) | ("pnpm" | "yarn", "dlx", _) => {
            Some(format!("{program} {}", word(1)))
        }
        ("uv", "tool", "run") => Some("uv tool run".into()),
        _ => None,
    }
}

/// The first absolute path a line names: inside quotes (`'…'`, `"…"`, as python and node write
/// them), else a word starting with `/` (as `sh: 1: /x/y: Permission denied` and `cat` write it).
fn named_path<'a>(line: &'a str) -> Option<PathBuf> {
    // A quote followed by `/` opens a path (an apostrophe in "can't" does not), up to the same
    // quote.
    let quoted = line.char_indices().find_map(|(i, q)| {
        if q != '\'' && q != '"' {
            return None;
        }
        let rest = &line[i + 1..];
        let inside = &rest[..rest.find(q)?];
        (inside.starts_with('/') && !inside.contains(char::is_whitespace)).then_some(inside)
    });
    // Unquoted, as shells write it (`sh: /x/run: line 3: /y/z: Permission denied`): the path
    // right before the error text is the one denied; the first names the script that reported.
    let lower = line.to_ascii_lowercase();
    let before = [
        "permission denied",
        "operation not permitted",
        "read-only file system",
    ]
    .iter()
    .filter_map(|p| lower.find(p))
    .min()
    .unwrap_or(line.len());
    let words = |text: &'a str| {
        text.split_whitespace()
            .map(|w| w.trim_end_matches([':', ',', ';', ')']))
            .filter(|w| w.starts_with('/') && w.len() > 1)
    };
    quoted
        .or_else(|| words(&line[..before]).next_back())
        .or_else(|| words(line).next())
        .map(PathBuf::from)
}

/// The denials seen on one server's stderr: the first few, each path once, so that a server
/// that loops on an error cannot grow mcpguard's memory.
#[derive(Debug, Default)]
pub struct Watch {
    seen: Vec<Denial>,
}

impl Watch {
    const MAX: usize = 8;

    pub fn observe(&mut self, line: &str) {
        if self.is_full() {
            return;
        }
        if let Some(d) = denial(line) {
            if !self
                .seen
                .iter()
                .any(|s| s.path == d.path && s.errno == d.errno)
            {
                self.seen.push(d);
            }
        }
    }

    pub fn denials(&self) -> &[Denial] {
        &self.seen
    }

    /// Whether it records nothing more (see [`Watch::observe`]).
    pub fn is_full(&self) -> bool {
        self.seen.len() >= Self::MAX
    }
}

/// What the explanation knows of the run: what was granted, what automatic rules were not (and
/// why), and how the run was asked for, so that the suggested command is the same one.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub grants: Vec<(Access, PathBuf)>,
    /// Paths an automatic rule or the policy wanted but did not get, with the reason.
    pub not_granted: Vec<(PathBuf, String)>,
    /// `--policy FILE` of the run, when one was given.
    pub policy: Option<PathBuf>,
    /// `--sandbox-read` and `--sandbox-write` of the run.
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub home: Option<PathBuf>,
}

impl Context {
    fn granted(&self, path: &Path) -> Option<Access> {
        self.grants
            .iter()
            .filter(|(_, g)| path.starts_with(g))
            .map(|(a, _)| *a)
            .max_by_key(|a| match a {
                Access::Read => 0,
                Access::Execute => 1,
                Access::ReadWrite => 2,
                Access::ReadWriteExecute => 3,
            })
    }

    fn too_broad(&self, path: &Path) -> bool {
        super::too_broad(path, self.home.as_deref())
    }
}

/// The `.git` folder `path` is in (the nearest ancestor of that name, the path itself included).
fn git_folder(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == ".git"))
        .map(Path::to_path_buf)
}

/// The explanation of a sandboxed server's failure, as indented lines to append to the error:
/// what the sandbox most likely denied, the flag or key that grants it, and the `sandbox-check`
/// command to try it with.
pub fn explain(ctx: &Context, ending: &Ending, denials: &[Denial], command: &[OsString]) -> String {
    let mut lines = vec![
        "the server ran in mcpguard's sandbox, which may have denied it something it needs:"
            .to_string(),
    ];
    let mut read = Vec::new();
    let mut write = Vec::new();
    if let Some(runner) = package_runner(command) {
        lines.push(format!(
            "- the server command starts `{runner}`, which resolves the package from the registry and installs it into its own folders at every start; the sandbox gives it no network and no write to those folders, so it fails on the first of them it reaches (a file it cannot create, a connection refused or a name not resolved) — that is the launch shape, not a data grant. Pin it: `mcpguard capture` with this command installs the package into mcpguard's package store, and the wrapped entry then starts it from there; or, if you installed the server in a virtual environment or a folder of your own, start it from there (`/path/to/venv/bin/SERVER`, `/path/to/venv/bin/python -m MODULE`, `node /abs/node_modules/PKG/…`) in place of `{runner}` and run `mcpguard wrap` again"
        ));
    }
    match ending {
        Ending::Exited(126) => lines.push(
            "- status 126 means a program could not be executed: its directory or its interpreter's is not executable in the sandbox; grant that directory with sandbox.execute in the policy (a writable grant is never executable)".into(),
        ),
        Ending::Exited(127) => lines.push(
            "- status 127 means a program was not found: its directory may not be granted (sandbox.execute), or PATH is not passed (sandbox.env)".into(),
        ),
        Ending::Signalled(31) => lines.push(
            "- it was killed by SIGSYS: the sandbox's system-call filter refused a call".into(),
        ),
        Ending::TimedOut { method, after } => lines.push(format!(
            "- it did not answer {method} within {after:?}: inside the sandbox there is no network, so a server (or a package runner such as npx or uvx) that asks the network first may wait until it gives up; raise --timeout to see its own error"
        )),
        Ending::Exited(_) | Ending::Signalled(_) | Ending::Closed => {}
    }
    for d in denials {
        let mut text = format!("- its stderr said {:?} ({})", d.line, d.errno.name());
        match &d.path {
            Some(path) if d.errno != Errno::NoAddon => {
                let suggestion = suggest(ctx, d.errno, path, *ending == Ending::Exited(126));
                text.push_str(&format!(": {}", suggestion.text));
                match suggestion.grant {
                    Some((Access::ReadWrite, p)) => write.push(p),
                    Some((_, p)) => read.push(p),
                    None => {}
                }
            }
            _ if d.errno == Errno::NoAddon => text.push_str(&format!(": {NO_ADDON}")),
            _ => text.push_str(match d.errno {
                Errno::NoAddon => "",
                Errno::Eacces => ": a path outside the grants; grant it with --sandbox-read PATH (sandbox.read), --sandbox-write PATH if the server writes there (sandbox.read_write), or sandbox.execute for programs",
                Errno::Erofs => ": only the writable grants can be written; grant the folder with --sandbox-write PATH (sandbox.read_write)",
                Errno::Eperm => ": the system-call filter or Landlock refused an operation (linking or renaming across grants, or a refused system call)",
            }),
        }
        lines.push(text);
    }
    for (path, why) in &ctx.not_granted {
        lines.push(format!("- not granted: {} ({why})", path.display()));
    }
    if denials.is_empty() && !matches!(ending, Ending::Exited(126 | 127)) {
        lines.push("- its stderr named no permission error; a missing grant can still show as another error (a file \"not found\", \"not a valid Git repository\")".into());
    }
    read.dedup();
    write.dedup();
    lines.push(format!(
        "try it with: {}",
        sandbox_check_command(ctx, &read, &write, command)
    ));
    lines.push("(sandbox-check lists every grant and runs the command with your terminal; add the same flags to this command, or the paths to sandbox.read, sandbox.read_write or sandbox.execute in your policy)".into());
    lines.join("\n  ")
}

/// When a tool call's error text reports permission errors (a path the server was denied), what
/// the sandbox most likely denied and how to grant it; `None` when the text names none. A grant a
/// server needs only for some calls never shows at capture, so this is where it shows first.
pub fn explain_call(ctx: &Context, tool: &str, text: &str, command: &[OsString]) -> Option<String> {
    let denials: Vec<Denial> = text.lines().filter_map(denial).take(4).collect();
    if let Some(d) = denials.iter().find(|d| d.errno == Errno::NoAddon) {
        return Some(format!(
            "the call of {tool:?} failed, and not because of mcpguard's sandbox: the server said {:?}, so {NO_ADDON}",
            d.line
        ));
    }
    let with_path: Vec<&Denial> = denials.iter().filter(|d| d.path.is_some()).collect();
    if with_path.is_empty() {
        return None;
    }
    let mut lines = vec![format!(
        "the call of {tool:?} failed with a permission error in mcpguard's sandbox, which may have denied the server a path it needs:"
    )];
    let (mut read, mut write) = (Vec::new(), Vec::new());
    for d in with_path {
        let path = d.path.as_deref().unwrap_or(Path::new("/"));
        let suggestion = suggest(ctx, d.errno, path, false);
        lines.push(format!(
            "- {} ({}): {}",
            path.display(),
            d.errno.name(),
            suggestion.text
        ));
        match suggestion.grant {
            Some((Access::ReadWrite, p)) => write.push(p),
            Some((_, p)) => read.push(p),
            None => {}
        }
    }
    read.dedup();
    write.dedup();
    lines.push(format!(
        "to try the grant, restart the server with the same flags, or check first with: {}",
        sandbox_check_command(ctx, &read, &write, command)
    ));
    Some(lines.join("\n  "))
}

struct Suggestion {
    text: String,
    grant: Option<(Access, PathBuf)>,
}

/// What to grant for a denial on `path`: its folder when it is a file (a server reads what lies
/// beside its files) unless that folder is too broad, else the path itself. `exec`: the server
/// exited 126, so the denial was most likely of executing it.
fn suggest(ctx: &Context, errno: Errno, path: &Path, exec: bool) -> Suggestion {
    let meta = std::fs::metadata(path).ok();
    let folder = match &meta {
        Some(m) if m.is_dir() => path.to_path_buf(),
        // A missing path the server wanted to create: its nearest existing ancestor.
        None => path
            .ancestors()
            .skip(1)
            .find(|a| a.is_dir())
            .unwrap_or(Path::new("/"))
            .to_path_buf(),
        Some(_) => path.parent().unwrap_or(Path::new("/")).to_path_buf(),
    };
    let (target, broad_note) = if ctx.too_broad(&folder) {
        (
            path.to_path_buf(),
            format!(
                " ({} is the root or your home directory, which is never granted whole: grant the file itself, or move the server into a folder of its own)",
                folder.display()
            ),
        )
    } else {
        (folder, String::new())
    };
    let has = ctx.granted(path);
    let wants_write = errno == Errno::Erofs
        || matches!(has, Some(Access::Read | Access::Execute) if errno == Errno::Eacces);
    let shown = target.display();
    let text = match (errno, has) {
        (Errno::Eacces, Some(Access::ReadWrite)) if exec => {
            return Suggestion {
                text: format!(
                    "{} is inside a writable grant, and nothing writable is executable in the sandbox; a package runner (npx) that runs tools from its cache fails so: install the package into a folder of its own and run it by path (`node /abs/node_modules/PKG/dist/index.js`), which the node preset grants",
                    path.display()
                ),
                grant: None,
            }
        }
        (Errno::Eacces, _) if exec && has != Some(Access::Execute) => {
            return Suggestion {
                text: format!(
                    "{} is outside the sandbox's grants and cannot be executed; add {shown} to sandbox.execute in the policy (--sandbox-read and --sandbox-write never grant executing){broad_note}",
                    path.display()
                ),
                grant: None,
            }
        }
        (Errno::Eperm, _) => format!(
            "{} — the system-call filter or Landlock refused an operation on it (linking or renaming across grants needs both ends in one --sandbox-write folder, sandbox.read_write)",
            path.display()
        ),
        (Errno::Erofs, Some(Access::ReadWrite | Access::ReadWriteExecute))
            if git_folder(path).is_some() =>
        {
            let git = git_folder(path).unwrap_or_else(|| path.to_path_buf());
            return Suggestion {
                text: format!(
                    "{} is in the .git folder of a repository inside a writable grant, which is read-only as a whole in the sandbox, so that the server can neither create a control file (.git/commondir, hooks, config) that git runs later outside it nor move a branch to its own commits; for a server that must fetch or commit, grant the folder by name: --sandbox-write {} (sandbox.read_write in the policy)",
                    path.display(),
                    git.display()
                ),
                grant: Some((Access::ReadWrite, git)),
            };
        }
        (_, Some(Access::ReadWrite | Access::ReadWriteExecute)) => format!(
            "{} is already granted read-write; if the server executes it, it needs sandbox.execute instead (a writable grant is never executable)",
            path.display()
        ),
        _ if wants_write => format!(
            "{} is not writable in the sandbox; grant --sandbox-write {shown} (sandbox.read_write in the policy){broad_note}",
            path.display()
        ),
        _ => format!(
            "{} is outside the sandbox's grants; grant --sandbox-read {shown} (sandbox.read in the policy), --sandbox-write {shown} if the server writes there (sandbox.read_write), or sandbox.execute if it runs programs from it{broad_note}",
            path.display()
        ),
    };
    let grant = match errno {
        Errno::Eperm => None,
        _ if matches!(has, Some(Access::ReadWrite | Access::ReadWriteExecute)) => None,
        _ if wants_write => Some((Access::ReadWrite, target)),
        _ => Some((Access::Read, target)),
    };
    Suggestion { text, grant }
}

/// `mcpguard sandbox-check [--policy P] [grants of the run and the suggested ones] -- COMMAND`.
fn sandbox_check_command(
    ctx: &Context,
    read: &[PathBuf],
    write: &[PathBuf],
    command: &[OsString],
) -> String {
    let mut words = vec!["mcpguard".to_string(), "sandbox-check".to_string()];
    if let Some(p) = &ctx.policy {
        words.push("--policy".into());
        words.push(quote(p.as_os_str()));
    }
    for (flag, paths) in [
        ("--sandbox-read", ctx.read.iter().chain(read)),
        ("--sandbox-write", ctx.write.iter().chain(write)),
    ] {
        let mut seen: Vec<&PathBuf> = Vec::new();
        for p in paths {
            if !seen.contains(&p) {
                seen.push(p);
                words.push(flag.into());
                words.push(quote(p.as_os_str()));
            }
        }
    }
    words.push("--".into());
    words.extend(command.iter().map(|w| quote(w)));
    words.join(" ")
}

/// A word as a POSIX shell reads it back: bare when it holds only safe characters, else in
/// single quotes.
fn quote(word: &std::ffi::OsStr) -> String {
    let s = word.to_string_lossy();
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s.into_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn denials_are_read_with_their_path() {
        for (line, errno, path) in [
            (
                "PermissionError: [Errno 13] Permission denied: '/srv/data/notes.json'",
                Errno::Eacces,
                Some("/srv/data/notes.json"),
            ),
            (
                "/usr/bin/python3: can't open file '/home/u/srv/server.py': [Errno 13] Permission denied",
                Errno::Eacces,
                Some("/home/u/srv/server.py"),
            ),
            (
                "/home/u/.pyenv/shims/python3: line 12: /home/u/.pyenv/libexec/pyenv: Permission denied",
                Errno::Eacces,
                Some("/home/u/.pyenv/libexec/pyenv"),
            ),
            (
                "sh: 1: /opt/tools/run: Permission denied",
                Errno::Eacces,
                Some("/opt/tools/run"),
            ),
            (
                "Error: EACCES: permission denied, open '/x/y.json'",
                Errno::Eacces,
                Some("/x/y.json"),
            ),
            (
                "OSError: [Errno 30] Read-only file system: '/var/lib/x'",
                Errno::Erofs,
                Some("/var/lib/x"),
            ),
            ("ln: failed: Operation not permitted", Errno::Eperm, None),
        ] {
            let d = denial(line).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(d.errno, errno, "{line}");
            assert_eq!(d.path.as_deref(), path.map(Path::new), "{line}");
        }
        assert_eq!(denial("Traceback (most recent call last):"), None);
    }

    #[test]
    fn a_read_denial_suggests_the_folder_and_the_same_command() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data.json");
        std::fs::write(&file, "{}").unwrap();
        let ctx = Context {
            policy: Some("/etc/p.toml".into()),
            home: Some("/nonexistent-home".into()),
            ..Context::default()
        };
        let d = denial(&format!("Permission denied: '{}'", file.display())).unwrap();
        let text = explain(
            &ctx,
            &Ending::Exited(1),
            &[d],
            &["python3".into(), "/srv/my server.py".into()],
        );
        let folder = dir.path().display();
        assert!(
            text.contains(&format!("grant --sandbox-read {folder} (sandbox.read")),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "try it with: mcpguard sandbox-check --policy /etc/p.toml --sandbox-read {folder} -- python3 '/srv/my server.py'"
            )),
            "{text}"
        );
    }

    #[test]
    fn status_126_names_sandbox_execute_and_a_read_only_write_names_sandbox_write() {
        let ctx = Context {
            grants: vec![(Access::Read, "/srv".into())],
            ..Context::default()
        };
        let d = denial("OSError: [Errno 30] Read-only file system: '/srv/out'").unwrap();
        let text = explain(&ctx, &Ending::Exited(126), &[d], &["x".into()]);
        assert!(text.contains("sandbox.execute"), "{text}");
        assert!(text.contains("--sandbox-write /srv"), "{text}");
    }

    #[test]
    fn a_program_in_a_writable_cache_is_never_suggested_for_sandbox_execute() {
        let ctx = Context {
            grants: vec![(Access::ReadWrite, "/h/.npm".into())],
            ..Context::default()
        };
        let d = denial("sh: 1: /h/.npm/_npx/1/node_modules/.bin/srv: Permission denied").unwrap();
        let text = explain(&ctx, &Ending::Exited(126), &[d], &["npx".into()]);
        assert!(text.contains("inside a writable grant"), "{text}");
        assert!(!text.contains("add /h/.npm"), "{text}");
    }

    #[test]
    fn a_read_only_git_folder_in_a_writable_grant_names_the_git_grant() {
        let ctx = Context {
            grants: vec![(Access::ReadWrite, "/srv/repo".into())],
            ..Context::default()
        };
        let d =
            denial("fatal: Unable to create '/srv/repo/.git/index.lock': Read-only file system")
                .unwrap();
        let text = explain(&ctx, &Ending::Exited(128), &[d], &["x".into()]);
        assert!(text.contains("control file"), "{text}");
        assert!(text.contains("--sandbox-write /srv/repo/.git"), "{text}");
        assert!(!text.contains("already granted read-write"), "{text}");
    }

    #[test]
    fn a_file_in_the_home_directory_is_suggested_alone() {
        let home = tempfile::tempdir().unwrap();
        let file = home.path().join("server.py");
        std::fs::write(&file, "").unwrap();
        let ctx = Context {
            home: Some(home.path().to_path_buf()),
            ..Context::default()
        };
        let s = suggest(&ctx, Errno::Eacces, &file, false);
        assert_eq!(s.grant, Some((Access::Read, file.clone())));
        assert!(s.text.contains("never granted whole"), "{}", s.text);
    }

    /// A missing compiled addon is named as an install script that never ran, not as a grant
    /// the sandbox withheld, at start and at a call.
    #[test]
    fn a_missing_native_addon_is_not_blamed_on_the_sandbox() {
        for line in [
            "Error: Cannot find module '../build/Release/better_sqlite3.node'",
            "Error: Could not locate the bindings file. Tried:",
            "Error: No native build was found for platform=linux arch=x64 runtime=node abi=115",
            "Error: Cannot find module '/srv/node_modules/x/build/Release/x.node'",
        ] {
            let d = denial(line).unwrap_or_else(|| panic!("{line}"));
            assert_eq!(d.errno, Errno::NoAddon, "{line}");
            let text = explain(
                &Context::default(),
                &Ending::Exited(1),
                &[d],
                &["node".into()],
            );
            assert!(
                text.contains("--ignore-scripts") && text.contains("no grant fixes this"),
                "{text}"
            );
            assert!(!text.contains("--sandbox-read /"), "{text}");
            assert!(
                !text.contains("its stderr named no permission error"),
                "{text}"
            );
        }
        let why = explain_call(
            &Context::default(),
            "query",
            "Error: Could not locate the bindings file. Tried:\n → /x/build/x.node",
            &["node".into()],
        )
        .unwrap();
        assert!(why.contains("not because of mcpguard's sandbox"), "{why}");
        assert_eq!(denial("Error: Cannot find module 'express'"), None);
    }

    /// A server started by a package runner that fails under the sandbox is told its launch
    /// shape and the two fixes, whatever it tripped on first.
    #[test]
    fn a_package_runner_entry_is_named_with_its_fix() {
        let d = denial("error: Could not create temporary file: Permission denied (os error 13) at path \"/h/.local/share/uv/tools/.tmp1\"").unwrap();
        for (command, runner) in [
            (vec!["uvx", "mcp-server-time"], "uvx"),
            (vec!["/usr/bin/npx", "-y", "pkg"], "npx"),
            (vec!["uv", "tool", "run", "x"], "uv tool run"),
            (vec!["uv", "run", "--with", "mcp", "x"], "uv run"),
        ] {
            let command: Vec<OsString> = command.into_iter().map(OsString::from).collect();
            let text = explain(
                &Context::default(),
                &Ending::Exited(2),
                std::slice::from_ref(&d),
                &command,
            );
            assert!(
                text.contains(&format!("the server command starts `{runner}`"))
                    && text.contains("mcpguard capture")
                    && text.contains("/path/to/venv/bin/SERVER"),
                "{text}"
            );
        }
        let text = explain(
            &Context::default(),
            &Ending::Exited(2),
            &[d],
            &["python3".into()],
        );
        assert!(!text.contains("the server command starts"), "{text}");
    }

    #[test]
    fn the_watch_is_bounded_and_keeps_each_path_once() {
        let mut w = Watch::default();
        for _ in 0..3 {
            w.observe("cat: /a: Permission denied");
        }
        for i in 0..20 {
            w.observe(&format!("cat: /b{i}: Permission denied"));
        }
        assert_eq!(w.denials().len(), Watch::MAX);
        assert_eq!(w.denials()[0].path.as_deref(), Some(Path::new("/a")));
    }
}
