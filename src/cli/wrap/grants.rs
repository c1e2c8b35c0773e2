//! The sandbox grants `wrap` proposes for a server it wraps: every existing path named in the
//! entry's arguments (`--db-path F`, `--allow-dir=D`, a positional folder) and in its `env`
//! values (`NOTES_DIR=/home/u/notes`), as `--sandbox-read`, or `--sandbox-write` when the flag or
//! variable names data or storage (`db`, `data`, `dir`, `storage`, ...).
//!
//! A database file named by a flag (`--db-path F`) needs more than the file: sqlite and duckdb
//! create their journal or write-ahead log beside it (`F-journal`, `F-wal`, `F-shm`, `F.wal`) and
//! remove it again, and a Landlock rule can only name a path that exists when the sandbox is
//! built (it is opened `O_PATH`); creating or removing a file needs a right on its folder, which
//! covers every file in it. So the folder is proposed, read-write, only when it holds nothing but
//! the database and its journal files; otherwise the file is (with the journal files that exist
//! now), and [`Narrowed`] says that writes needing a new journal will be denied and how to
//! allow them (a folder of the database's own, or the folder granted on purpose).
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

/// A database proposed as its file rather than its folder, because the folder holds other files
/// too: granting it read-write would open them all to the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Narrowed {
    pub db: PathBuf,
    pub dir: PathBuf,
    /// The flag that named it, `--db-path`.
    pub flag: String,
    /// Why the folder is not proposed: "holds 3 other entries", "is too broad to grant".
    pub why: String,
    /// The file is an sqlite database in write-ahead-log mode, which needs `-wal` and `-shm`
    /// even to read.
    pub wal_mode: bool,
}

impl Narrowed {
    /// What the person is told: what was granted, what will fail, and the two ways to allow it.
    pub fn say(&self, name: &str, regrant: &str) -> String {
        let db = self.db.display();
        let dir = self.dir.display();
        let fails = if self.wal_mode {
            "it is in write-ahead-log mode, so even reading it needs those files and will fail"
        } else {
            "reading works, but a write that needs a new journal fails (\"unable to open database file\", \"attempt to write a readonly database\")"
        };
        format!(
            "{name:?}'s database {db} (from argument --{flag}) is granted as the file alone: its folder {dir} {why}, and the sandbox cannot grant the journal files the engine creates beside the database ({db}-journal, -wal, -shm, .wal) before they exist; {fails}. To let it write, move the database into a folder of its own and run wrap again, or grant the folder on purpose: {regrant} --sandbox-write {dir}",
            flag = self.flag,
            why = self.why,
        )
    }
}

/// The names a database engine keeps beside a database file `db` (sqlite's rollback journal
/// and write-ahead log with its shared-memory index; duckdb's write-ahead log).
fn journal_names(db: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for suffix in ["-journal", "-wal", "-shm", ".wal"] {
        let mut name = db.as_os_str().to_os_string();
        name.push(suffix);
        out.push(PathBuf::from(name));
    }
    out
}

/// How many entries of `dir` are neither `db` nor one of its journal files (`None` when the
/// folder cannot be listed, which counts as holding others).
fn other_entries(dir: &Path, db: &Path) -> Option<usize> {
    let own = journal_names(db);
    let mut n = 0;
    for e in std::fs::read_dir(dir).ok()? {
        let path = e.ok()?.path();
        if path != db && !own.contains(&path) {
            n += 1;
        }
    }
    Some(n)
}

/// Why the folder `dir` of database `db` is not proposed in its place, or `None` when it may be:
/// too broad, holding or lying in what guards the server, or holding other entries.
fn folder_refused(dir: &Path, db: &Path, protected: &[PathBuf]) -> Option<String> {
    if too_broad(dir) {
        return Some("is too broad to grant".into());
    }
    if let Some(q) = protected
        .iter()
        .find(|q| q.starts_with(dir) || dir.starts_with(q))
    {
        return Some(format!(
            "holds or lies in {}, which guards the server",
            q.display()
        ));
    }
    match other_entries(dir, db) {
        Some(0) => None,
        Some(n) => Some(format!(
            "holds {n} other entr{} than the database and its journal files, which a grant of the folder would open to the server",
            if n == 1 { "y" } else { "ies" }
        )),
        None => Some("cannot be listed to see what else it holds".into()),
    }
}

/// Whether `db` is an sqlite database in write-ahead-log mode: the header's read and write
/// format versions (bytes 18 and 19) are 2.
fn sqlite_wal_mode(db: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 20];
    std::fs::File::open(db)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && head.starts_with(b"SQLite format 3\0")
        && (head[18] == 2 || head[19] == 2)
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
/// named in the second list returned. The third lists the databases granted as their file
/// alone (see the module's documentation).
pub(super) fn propose(
    args: &[String],
    env: Option<&Map<String, Value>>,
    granted: &[PathBuf],
    protected: &[PathBuf],
) -> (Vec<Proposal>, Vec<String>, Vec<Narrowed>) {
    let mut out: Vec<Proposal> = Vec::new();
    let mut left_out: Vec<String> = Vec::new();
    let mut narrowed: Vec<Narrowed> = Vec::new();
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
            // files come and go), but only when the folder holds nothing else and is not too
            // broad to give. Otherwise the file and the journal files that exist now, and the
            // person is told what that denies.
            Some(n) if p.is_file() && names_a_database(n) => match p.parent() {
                Some(dir) if folder_refused(dir, &p, protected).is_none() => {
                    add(
                        dir.to_path_buf(),
                        true,
                        format!(
                        "argument --{n}: the folder of {}, which holds only the database and its journal files",
                        p.display()
                    ),
                    )
                }
                parent => {
                    for j in journal_names(&p) {
                        if j.is_file() {
                            add(j, true, format!("argument --{n}: a journal file of the database"));
                        }
                    }
                    if let Some((dir, why)) =
                        parent.and_then(|d| Some((d, folder_refused(d, &p, protected)?)))
                    {
                        let guards = protected
                            .iter()
                            .any(|q| q.starts_with(&p) || p.starts_with(q));
                        if !granted.contains(&p) && !guards {
                            narrowed.push(Narrowed {
                                db: p.clone(),
                                dir: dir.to_path_buf(),
                                flag: n.to_string(),
                                why,
                                wal_mode: sqlite_wal_mode(&p),
                            });
                        }
                    }
                    add(p, true, format!("argument --{n}"));
                }
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
    (out, left_out, narrowed)
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
        let (got, left_out, narrowed) = propose(&args, env.as_object(), &[], &[]);
        assert!(left_out.is_empty() && narrowed.is_empty());
        let want = vec![
            // A database file's folder, where its engine writes its journal.
            Proposal {
                path: db_dir.clone(),
                write: true,
                from: format!(
                    "argument --db-path: the folder of {}, which holds only the database and its journal files",
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
        let (got, _, _) = propose(&args, env.as_object(), std::slice::from_ref(&db_dir), &[]);
        assert_eq!(got.len(), 2);
        // A folder holding the host configuration is never proposed; it is named instead.
        let config = data.join("claude_desktop_config.json");
        let (got, left_out, _) = propose(&args, env.as_object(), &[], &[config]);
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
        let (got, _, _) = propose(&["--key-dir".into(), s(&ssh)], None, &[], &[]);
        assert!(got.is_empty(), "{got:?}");
    }

    /// `--db-path ~/Documents/x.db`: the folder holds other files, so the database file is
    /// proposed (with the journal that exists now), never the folder, and the person is told
    /// what that denies and how to allow it. A folder holding only the database and its
    /// journal files is proposed whole.
    #[test]
    fn a_database_among_other_files_is_granted_as_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let docs = dir.path().join("Documents");
        std::fs::create_dir(&docs).unwrap();
        let db = docs.join("x.db");
        let mut header = b"SQLite format 3\0".to_vec();
        header.extend([0x10, 0, 1, 1]);
        std::fs::write(&db, &header).unwrap();
        std::fs::write(docs.join("x.db-journal"), "").unwrap();
        std::fs::write(docs.join("taxes.pdf"), "").unwrap();
        let args = vec!["--db-path".to_string(), db.display().to_string()];
        let (got, _, narrowed) = propose(&args, None, &[], &[]);
        let paths: Vec<&Path> = got.iter().map(|p| p.path.as_path()).collect();
        assert_eq!(
            paths,
            [docs.join("x.db-journal").as_path(), db.as_path()],
            "{got:?}"
        );
        assert!(got.iter().all(|p| p.write));
        assert_eq!(narrowed.len(), 1);
        assert!(!narrowed[0].wal_mode);
        let said = narrowed[0].say("sqlite", "mcpguard wrap C --entry sqlite");
        assert!(
            said.contains("holds 1 other entry")
                && said.contains("a write that needs a new journal fails")
                && said.ends_with(&format!(
                    "mcpguard wrap C --entry sqlite --sandbox-write {}",
                    docs.display()
                )),
            "{said}"
        );
        // In write-ahead-log mode, even a read needs the -wal and -shm files: said so.
        header[18] = 2;
        header[19] = 2;
        std::fs::write(&db, &header).unwrap();
        let (_, _, narrowed) = propose(&args, None, &[], &[]);
        assert!(narrowed[0].wal_mode);
        assert!(narrowed[0].say("s", "w").contains("even reading it"));
        // The other files gone, the folder holds only the database and its journal: proposed.
        std::fs::remove_file(docs.join("taxes.pdf")).unwrap();
        std::fs::write(docs.join("x.db-wal"), "").unwrap();
        let (got, _, narrowed) = propose(&args, None, &[], &[]);
        assert!(narrowed.is_empty());
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].path.as_path(), got[0].write),
            (docs.as_path(), true)
        );
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
