//! The files inside a writable grant that the person's own tools run or trust later (issue 31):
//! which ones ([`TRUSTED`]), and where they are in one grant ([`find`]). `isolate` mounts each
//! one read-only over itself in the server's mount namespace, so the server can still edit the
//! project it was given, but cannot plant a git hook, a `core.fsmonitor` command, a direnv
//! script or an editor task that runs later outside the sandbox.
//!
//! Where the line is: editing the files of a project the person granted is the grant's
//! purpose, and the person runs the project's code deliberately. What is pinned is what a tool
//! runs or believes when the person merely enters the folder, opens it in an editor or a host,
//! or commits in it. A mount needs an existing file to cover, so a name that does not exist at
//! the start cannot be pinned: [`Pins::missing`] lists them, and the sandbox report names them
//! as a residual risk. Only the grant itself and the folders one level down are searched (a
//! folder of repositories); deeper ones are named in the report as not searched.
//!
//! A repository's `.git` folder is read-only as a whole ([`Pins::git`]), because the names git
//! trusts there are not only the ones that exist: a server that creates `.git/commondir` makes
//! git read the configuration and hooks of a folder it chose, and the same holds for a new
//! `.git/modules/NAME` or `.git/worktrees/NAME`. Nothing inside it stays writable, `refs`
//! included: a server that could write a branch or a remote-tracking ref would point it at its
//! own commit, and the person's next checkout or merge would write the server's `.envrc` or
//! `.vscode` into the tree. The server's git can read the history but not fetch, commit or
//! update the index. A person who wants a server to commit grants the
//! `.git` folder for write by name (`--sandbox-write REPO/.git`): then it is writable as before,
//! its `hooks` and `config` stay pinned, and the report names the commondir route as open.

use std::path::{Path, PathBuf};

/// The trusted names, relative to a folder, and who runs or trusts each.
pub const TRUSTED: &[(&str, &str)] = &[
    (".git/hooks", "git runs the hooks in it"),
    (
        ".git/config",
        "git runs the commands it names: core.fsmonitor, core.hooksPath, core.sshCommand, \
         pagers, editors, filter and diff drivers, aliases, credential helpers, include.path",
    ),
    (".git/config.worktree", "git reads it as configuration"),
    (
        ".git/commondir",
        "git reads configuration and hooks from the folder it names",
    ),
    (
        ".git/modules",
        "each submodule's git configuration and hooks",
    ),
    (
        ".git/worktrees",
        "each linked worktree's commondir and configuration, which git reads in that worktree",
    ),
    (
        ".husky",
        "husky's hooks, which git runs through core.hooksPath",
    ),
    (
        ".pre-commit-config.yaml",
        "pre-commit runs the commands it names at every commit",
    ),
    (".envrc", "direnv loads it when the shell enters the folder"),
    (
        ".vscode",
        "VS Code's tasks (runOn folderOpen), settings (tool and interpreter paths) and MCP servers",
    ),
    (
        ".devcontainer",
        "dev containers run initializeCommand on the host",
    ),
    (
        ".idea",
        "JetBrains IDEs' run configurations and start-up tasks",
    ),
    (".claude", "Claude Code's hooks and settings"),
    (
        ".mcp.json",
        "the MCP servers Claude Code starts for the project",
    ),
    (".cursor", "Cursor's MCP servers and rules"),
    (".gemini", "Gemini CLI's settings and MCP servers"),
];

/// At most this many folders one level down are searched; a grant with more is named in the
/// report as searched in part.
const MAX_SUBDIRS: usize = 1024;

/// The trusted files of one writable grant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pins {
    /// The grant (its real path).
    pub grant: PathBuf,
    /// Folders mounted onto themselves, writable: a `.git` folder, or a folder one level down
    /// that holds trusted files. A mount point cannot be renamed or removed (EBUSY), so the
    /// server cannot move a folder with its read-only files away and make a new one.
    pub held: Vec<PathBuf>,
    /// Mounted read-only over themselves.
    pub read_only: Vec<PathBuf>,
    /// `.git` folders mounted read-only over themselves as a whole, so that no control file
    /// can be created in them and no ref moved.
    pub git: Vec<PathBuf>,
    /// `.git` folders the person granted for write by name: writable, with only their
    /// existing trusted files pinned.
    pub git_granted: Vec<PathBuf>,
    /// Trusted names missing at the start in the grant itself (relative): a server could
    /// create them, and nothing can cover a file that does not exist.
    pub missing: Vec<String>,
    /// Trusted names that are symbolic links, or reached through one (relative): a mount would
    /// cover the link's target, not the name, so they are not pinned.
    pub links: Vec<String>,
    /// Whether the grant had more folders than were searched.
    pub partial: bool,
}

/// Finds the trusted files of the writable grant `grant` (a folder; `None` otherwise): in the
/// grant itself and in each folder one level down. `granted` lists every path granted for
/// write by name (real paths): a `.git` folder among them stays writable.
pub fn find(grant: &Path, granted: &[PathBuf]) -> Option<Pins> {
    let root = std::fs::canonicalize(grant).ok()?;
    if !std::fs::metadata(&root).ok()?.is_dir() {
        return None;
    }
    let mut pins = Pins {
        grant: root.clone(),
        ..Pins::default()
    };
    search(&root, &root, granted, &mut pins);
    if is_git_folder(&root) {
        search_git_folder(&root, &mut pins);
    }
    let mut subdirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    subdirs.sort();
    if subdirs.len() > MAX_SUBDIRS {
        subdirs.truncate(MAX_SUBDIRS);
        pins.partial = true;
    }
    for dir in subdirs {
        // The grant's own `.git` and editor folders were searched as names already.
        if TRUSTED
            .iter()
            .any(|(name, _)| root.join(name.split('/').next().unwrap_or(name)) == dir)
        {
            continue;
        }
        let before = pins.read_only.len() + pins.git.len();
        search(&root, &dir, granted, &mut pins);
        if pins.read_only.len() + pins.git.len() > before {
            pins.held.push(dir);
        }
    }
    pins.held.sort();
    pins.held.dedup();
    Some(pins)
}

/// Whether `dir` is itself a git folder: a bare repository, or a `.git` folder granted alone.
/// git recognises one by `HEAD` beside `objects` and `refs`.
fn is_git_folder(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir.join("HEAD")).is_ok_and(|m| m.is_file())
        && ["objects", "refs"]
            .iter()
            .all(|d| std::fs::symlink_metadata(dir.join(d)).is_ok_and(|m| m.is_dir()))
}

/// Adds the trusted names of a grant that is itself a git folder (a bare repository, or a
/// `.git` granted by name without its work tree): the grant is writable, as the person asked,
/// so its existing hooks and configuration are pinned, and a missing `commondir` is named
/// (a created one makes git read another folder's hooks and configuration).
fn search_git_folder(root: &Path, pins: &mut Pins) {
    for (name, _) in TRUSTED {
        let Some(inner) = name.strip_prefix(".git/") else {
            continue;
        };
        let path = root.join(inner);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => pins.links.push(inner.to_string()),
            Ok(_) => pins.read_only.push(path),
            Err(_) if inner == "commondir" => pins.missing.push(inner.to_string()),
            Err(_) => {}
        }
    }
    pins.git_granted.push(root.to_path_buf());
}

/// Adds the trusted names of `dir` (the grant `root`, or a folder one level down) to `pins`.
fn search(root: &Path, dir: &Path, granted: &[PathBuf], pins: &mut Pins) {
    let relative = |p: &Path| {
        p.strip_prefix(root)
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    let git = dir.join(".git");
    let git_is_dir = std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir());
    // A real `.git` folder (no link on the way, so the mount covers this very folder) that the
    // person did not grant by name is read-only as a whole: nothing missing in it can be made.
    let git_read_only = git_is_dir
        && std::fs::canonicalize(&git).ok().as_deref() == Some(git.as_path())
        && !granted.contains(&git);
    for (name, _) in TRUSTED {
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => pins.links.push(relative(&path)),
            Ok(_) => {
                // Every component must be the real one: a `.git` that is a link would make
                // the mount cover a file elsewhere.
                if std::fs::canonicalize(&path).ok().as_deref() != Some(path.as_path()) {
                    pins.links.push(relative(&path));
                    continue;
                }
                if git_is_dir && !git_read_only && path.starts_with(&git) {
                    pins.held.push(git.clone());
                }
                pins.read_only.push(path);
            }
            // Nothing can be created in a read-only `.git`.
            Err(_) if git_read_only && path.starts_with(&git) => {}
            // In a `.git` granted by name one level down, what is missing is named too: a
            // created `commondir` there undoes the pins as it would at the grant's root.
            Err(_) if dir == root || (git_is_dir && path.starts_with(&git)) => {
                // Inside a `.git` that is missing (or a gitdir file), the `.git` name itself
                // is what a server could create.
                if name.starts_with(".git/") && !git_is_dir {
                    if std::fs::symlink_metadata(&git).is_err()
                        && !pins.missing.iter().any(|m| m == ".git")
                    {
                        pins.missing.push(".git".into());
                    }
                    continue;
                }
                // git reads `config.worktree` only when the (pinned) configuration turns
                // `extensions.worktreeConfig` on, so a missing one is no way in.
                if *name != ".git/config.worktree" {
                    pins.missing.push(relative(&path));
                }
            }
            Err(_) => {}
        }
    }
    if git_read_only {
        pins.git.push(git.clone());
    } else if git_is_dir && granted.contains(&git) {
        pins.git_granted.push(git.clone());
    }
    // A `.git` file (a worktree's or submodule's gitdir pointer) names the git folder to use.
    if std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_file()) {
        pins.read_only.push(git);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_and_a_folder_of_repositories() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), "").unwrap();
        std::fs::write(root.join(".envrc"), "").unwrap();
        std::fs::create_dir_all(root.join(".git/objects")).unwrap();
        std::fs::create_dir_all(root.join(".git/refs")).unwrap();
        std::os::unix::fs::symlink("/tmp", root.join(".git/logs")).unwrap();
        std::fs::create_dir_all(root.join("sub/.git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("plain")).unwrap();
        std::fs::write(root.join("README"), "").unwrap();
        let p = find(&root, &[]).unwrap();
        assert_eq!(
            p.read_only,
            vec![
                root.join(".git/hooks"),
                root.join(".git/config"),
                root.join(".envrc"),
                root.join("sub/.git/hooks"),
            ]
        );
        // Each `.git` is read-only as a whole, refs and objects included: nothing in it held.
        assert_eq!(p.git, vec![root.join(".git"), root.join("sub/.git")]);
        assert_eq!(p.held, vec![root.join("sub")]);
        // Nothing can be created in a read-only `.git`, so no name in it is missing.
        assert!(!p.missing.iter().any(|m| m.starts_with(".git")));
        assert!(p.missing.contains(&".vscode".to_string()));
        assert!(p.links.is_empty());
        assert!(p.git_granted.is_empty());
        // Granted by name, a `.git` stays writable, held, with its commondir missing.
        let p = find(&root, &[root.join(".git")]).unwrap();
        assert_eq!(p.git, vec![root.join("sub/.git")]);
        assert_eq!(p.git_granted, vec![root.join(".git")]);
        assert!(p.held.contains(&root.join(".git")));
        assert!(!p.held.contains(&root.join(".git/objects")));
        assert!(p.missing.contains(&".git/commondir".to_string()));
    }

    /// A grant that is a git folder itself (a bare repository, or a `.git` granted without its
    /// work tree) keeps its hooks and configuration pinned and names a missing `commondir`; so
    /// does a `.git` granted by name one level down.
    #[test]
    fn a_bare_repository_or_a_git_folder_granted_alone() {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().canonicalize().unwrap().join("bare.git");
        std::fs::create_dir_all(bare.join("hooks")).unwrap();
        std::fs::create_dir_all(bare.join("objects")).unwrap();
        std::fs::create_dir_all(bare.join("refs")).unwrap();
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(bare.join("config"), "").unwrap();
        let p = find(&bare, std::slice::from_ref(&bare)).unwrap();
        assert_eq!(p.read_only, vec![bare.join("hooks"), bare.join("config")]);
        assert_eq!(p.git_granted, vec![bare.clone()]);
        assert!(p.missing.contains(&"commondir".to_string()), "{p:?}");
        // A folder of repositories whose `sub/.git` is granted by name.
        let root = dir.path().canonicalize().unwrap().join("projects");
        std::fs::create_dir_all(root.join("sub/.git/hooks")).unwrap();
        let p = find(&root, &[root.join("sub/.git")]).unwrap();
        assert_eq!(p.git_granted, vec![root.join("sub/.git")]);
        assert!(
            p.missing.contains(&"sub/.git/commondir".to_string()),
            "{p:?}"
        );
        assert!(p.read_only.contains(&root.join("sub/.git/hooks")));
        // An ordinary folder is no git folder.
        assert!(!is_git_folder(&root));
    }

    #[test]
    fn no_repository_a_gitdir_file_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let p = find(&root, &[]).unwrap();
        assert!(p.read_only.is_empty() && p.held.is_empty());
        assert!(p.missing.contains(&".git".to_string()));
        assert!(!p.missing.iter().any(|m| m.starts_with(".git/")));
        std::fs::write(root.join(".git"), "gitdir: /elsewhere\n").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join(".envrc")).unwrap();
        let p = find(&root, &[]).unwrap();
        assert_eq!(p.read_only, vec![root.join(".git")]);
        assert_eq!(p.links, vec![".envrc".to_string()]);
        assert!(
            find(&root.join(".git"), &[]).is_none(),
            "a file is no folder"
        );
    }
}
