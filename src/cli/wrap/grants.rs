//! The sandbox grants `wrap` proposes for a server it wraps: every existing path named in the
//! entry's arguments (`--db-path F`, `--allow-dir=D`, a positional folder) and in its `env`
//! values (`NOTES_DIR=/home/u/notes`), as `--sandbox-read`, or `--sandbox-write` when the flag or
//! variable names data or storage (`db`, `data`, `dir`, `storage`, ...). A database file named by
//! a flag (`--db-path F`) is proposed as its folder, read-write: sqlite and duckdb create their
//! journal or write-ahead log beside the file, even to read, and a grant can only name what exists.
//!
//! This module only proposes: it reads the entry and asks the file system whether each path is
//! a directory or an existing file. Whether a proposal is applied is the person's decision
//! (`wrap` asks on a terminal, `--yes` accepts, otherwise the proposal is printed with the
//! command that applies it). A path is never proposed when granting it would open much more
//! than the server's data: `/`, a top-level directory, the home directory itself, anything
//! under `/proc`, `/sys` or `/dev`, or a credentials directory (`.ssh`, `.gnupg`, `.aws`, ...).
//! Nor is a path that holds, or lies in, what guards the server (the host configuration, the
//! snapshot directory, the policy): a server allowed to write there could unwrap itself or
//! rewrite its own review. Those are named as left out, so the person can grant them by hand.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// One proposed grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Proposal {
    pub path: PathBuf,
    /// Read-write (`--sandbox-write`) rather than read-only (`--sandbox-read`).
    pub write: bool,
    /// Where the path was found, for the person: `argument --db-path`, `env NOTES_DIR`.
    pub from: String,
}

impl Proposal {
    pub fn flag(&self) -> &'static str {
        if self.write {
            "--sandbox-write"
        } else {
            "--sandbox-read"
        }
    }
}

/// Words in a flag or variable name that say the path holds the server's data, which it
/// usually writes.
const WRITE_WORDS: [&str; 9] = [
    "data",
    "storage",
    "db",
    "database",
    "dir",
    "folder",
    "workspace",
    "notes",
    "allow",
];

/// Words that say a file is a database, which its engine opens with files of its own beside it
/// (sqlite's `-journal` and `-wal`, duckdb's `.wal`), created and removed as it goes.
const DATABASE_WORDS: [&str; 3] = ["db", "database", "sqlite"];

fn names_a_database(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| DATABASE_WORDS.contains(&word))
}

fn suggests_write(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| WRITE_WORDS.contains(&word))
        || WRITE_WORDS.iter().any(|w| w.len() > 3 && lower.contains(w))
}

/// Whether `path` is too broad (or not data at all) to be proposed.
fn too_broad(path: &Path) -> bool {
    let depth = path.components().count();
    if depth <= 2 {
        // `/` and `/home`, `/usr`, `/tmp`, ...
        return true;
    }
    if ["/proc", "/sys", "/dev"]
        .iter()
        .any(|p| path.starts_with(p))
    {
        return true;
    }
    let secret = [
        ".ssh",
        ".gnupg",
        ".aws",
        ".kube",
        ".docker",
        ".netrc",
        ".password-store",
    ];
    if path
        .components()
        .any(|c| secret.iter().any(|s| c.as_os_str() == *s))
    {
        return true;
    }
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .is_some_and(|h| h == path)
}

/// The path `value` names, if it is absolute, exists as a directory or a file, and is not too
/// broad. Relative paths are left alone: the host starts the server from a directory of its
/// choosing, so what they name is not known here.
fn existing(value: &str) -> Option<PathBuf> {
    let p = Path::new(value);
    if !p.is_absolute() {
        return None;
    }
    let p = PathBuf::from(
        p.components()
            .collect::<PathBuf>()
            .to_string_lossy()
            .trim_end_matches('/'),
    );
    let meta = std::fs::metadata(&p).ok()?;
    if !(meta.is_dir() || meta.is_file()) || too_broad(&p) {
        return None;
    }
    Some(p)
}

/// The grants proposed for a server run as `command args` with this `env`, without those
/// already `granted`. The first positional argument that is a file is the program's script
/// (`node /x/index.js`), which the sandbox already lets the server read, so it is skipped.
///
/// `protected` are the files and directories that guard the server (the host configuration,
/// the snapshot directory, the policy): a path that holds one or lies in one is left out, and
/// named in the second list returned.
pub(super) fn propose(
    args: &[String],
    env: Option<&Map<String, Value>>,
    granted: &[PathBuf],
    protected: &[PathBuf],
) -> (Vec<Proposal>, Vec<String>) {
    let mut out: Vec<Proposal> = Vec::new();
    let mut left_out: Vec<String> = Vec::new();
    let mut add = |path: PathBuf, write: bool, from: String| {
        if granted.contains(&path) {
            return;
        }
        if let Some(q) = protected
            .iter()
            .find(|q| q.starts_with(&path) || path.starts_with(q))
        {
            let why = format!(
                "{} (from {from}): it holds or lies in {}, which guards the server",
                path.display(),
                q.display()
            );
            if !left_out.contains(&why) {
                left_out.push(why);
            }
            return;
        }
        match out.iter_mut().find(|p| p.path == path) {
            Some(p) => p.write |= write,
            None => out.push(Proposal { path, write, from }),
        }
    };
    let mut flag: Option<&str> = None;
    let mut script_seen = false;
    for arg in args {
        if let Some(rest) = arg.strip_prefix('-').filter(|r| !r.is_empty()) {
            let name = rest.trim_start_matches('-');
            match name.split_once('=') {
                Some((n, value)) => {
                    if let Some(p) = existing(value) {
                        add(p, suggests_write(n), format!("argument --{n}"));
                    }
                    flag = None;
                }
                None => flag = Some(name),
            }
            continue;
        }
        let Some(p) = existing(arg) else {
            flag = None;
            continue;
        };
        match flag.take() {
            // A database file: its folder, read-write, because the engine creates its journal
            // or write-ahead log beside the file (a grant can only name what exists, and those
            // files come and go), unless the folder is too broad to give.
            // A folder too broad, or holding what guards the server, is not given: the file is.
            Some(n) if p.is_file() && names_a_database(n) => match p.parent() {
                Some(dir)
                    if !too_broad(dir)
                        && !protected
                            .iter()
                            .any(|q| q.starts_with(dir) || dir.starts_with(q)) =>
                {
                    add(
                        dir.to_path_buf(),
                        true,
                        format!(
                        "argument --{n}: the folder of {}, where the database keeps its journal",
                        p.display()
                    ),
                    )
                }
                _ => add(p, true, format!("argument --{n}")),
            },
            Some(n) => add(p, suggests_write(n), format!("argument --{n}")),
            None => {
                if p.is_file() && !script_seen {
                    script_seen = true;
                    continue;
                }
                add(p, false, "a positional argument".into());
            }
        }
    }
    if let Some(env) = env {
        for (name, value) in env {
            if let Some(p) = value.as_str().and_then(existing) {
                add(p, suggests_write(name), format!("env {name}"));
            }
        }
    }
    (out, left_out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_in_arguments_and_env_are_proposed_with_write_for_data_names() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let db_dir = dir.path().join("db");
        let db = db_dir.join("notes.db");
        std::fs::create_dir(&db_dir).unwrap();
        let script = dir.path().join("server.js");
        let docs = dir.path().join("docs");
        std::fs::create_dir(&data).unwrap();
        std::fs::create_dir(&docs).unwrap();
        std::fs::write(&db, "").unwrap();
        std::fs::write(&script, "").unwrap();
        let s = |p: &Path| p.display().to_string();
        let args = vec![
            s(&script),
            "--db-path".into(),
            s(&db),
            format!("--storage={}", s(&data)),
            s(&docs),
            "--missing".into(),
            "/no/such/path".into(),
            "/".into(),
            "relative/dir".into(),
        ];
        let env = json!({"NOTES_DIR": s(&data), "API_KEY": "secret", "LOG": "/proc/self"});
        let (got, left_out) = propose(&args, env.as_object(), &[], &[]);
        assert!(left_out.is_empty());
        let want = vec![
            // A database file's folder, where its engine writes its journal.
            Proposal {
                path: db_dir.clone(),
                write: true,
                from: format!(
                    "argument --db-path: the folder of {}, where the database keeps its journal",
                    db.display()
                ),
            },
            Proposal {
                path: data.clone(),
                write: true,
                from: "argument --storage".into(),
            },
            Proposal {
                path: docs.clone(),
                write: false,
                from: "a positional argument".into(),
            },
        ];
        assert_eq!(got, want);
        // A path already granted is not proposed again.
        let (got, _) = propose(&args, env.as_object(), std::slice::from_ref(&db_dir), &[]);
        assert_eq!(got.len(), 2);
        // A folder holding the host configuration is never proposed; it is named instead.
        let config = data.join("claude_desktop_config.json");
        let (got, left_out) = propose(&args, env.as_object(), &[], &[config]);
        assert!(got.iter().all(|p| p.path != data), "{got:?}");
        assert_eq!(
            left_out.len(),
            2,
            "named once per place it came from: {left_out:?}"
        );
        assert!(left_out
            .iter()
            .all(|w| w.contains("which guards the server")));
        // Nor a credentials directory.
        let ssh = dir.path().join(".ssh");
        std::fs::create_dir(&ssh).unwrap();
        let (got, _) = propose(&["--key-dir".into(), s(&ssh)], None, &[], &[]);
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn database_words() {
        assert!(names_a_database("db-path") && names_a_database("DATABASE_URL"));
        assert!(names_a_database("sqlite-file"));
        assert!(!names_a_database("allow-dir") && !names_a_database("dbx"));
    }

    #[test]
    fn write_words() {
        assert!(suggests_write("db-path"));
        assert!(suggests_write("NOTES_DIR"));
        assert!(suggests_write("allow-dir"));
        assert!(suggests_write("storage-path"));
        assert!(!suggests_write("config"));
        assert!(!suggests_write("timeout"));
    }
}
