//! Writing the edited configuration (backup, atomic replace, the original's permissions), the
//! bound on its backups (the first and the latest are kept), and the unified diff `--dry-run`
//! prints.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` over `config` after keeping `original` as a new backup beside it (older backups
/// but the first are then removed: [`prune_backups`]). Both files
/// get the original's permissions. The write is atomic, goes to the file a symbolic link points
/// to (dotfile managers link these files), and is abandoned if the file changed since it was read.
pub(super) fn write_with_backup(
    config: &Path,
    original: &[u8],
    bytes: &[u8],
) -> Result<PathBuf, String> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let target = std::fs::canonicalize(config)
        .map_err(|e| format!("cannot resolve {}: {e}", config.display()))?;
    let mode = std::fs::metadata(&target)
        .map_err(|e| format!("cannot read {}: {e}", target.display()))?
        .permissions()
        .mode()
        & 0o7777;
    let create = |path: &Path, data: &[u8]| -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(path)?;
        f.write_all(data)?;
        f.sync_all()
    };
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let file_name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = target.parent().unwrap_or(Path::new("/"));
    let mut backup = None;
    for n in 0..1000 {
        let suffix = if n == 0 {
            String::new()
        } else {
            format!("-{n}")
        };
        let candidate = dir.join(format!("{file_name}.bak-{stamp}{suffix}"));
        match create(&candidate, original) {
            Ok(()) => {
                backup = Some(candidate);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(format!(
                    "cannot write the backup {}: {e}",
                    candidate.display()
                ))
            }
        }
    }
    let backup = backup.ok_or("cannot find a free backup file name")?;
    let tmp = dir.join(format!(
        ".{file_name}.mcpguard-wrap.{}.tmp",
        std::process::id()
    ));
    let result = create(&tmp, bytes).and_then(|()| {
        if std::fs::read(&target)? != original {
            return Err(std::io::Error::other(
                "the file changed while it was being wrapped; run wrap again",
            ));
        }
        std::fs::rename(&tmp, &target)
    });
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("cannot write {}: {e}", target.display()));
    }
    prune_backups(dir, &file_name, &backup);
    Ok(backup)
}

/// How many backups of one configuration are kept: the oldest (the file as it was before
/// mcpguard first changed it) and the newest (as it was before the latest change).
pub const KEPT_BACKUPS: usize = 2;

/// The order of a backup that `write_with_backup` named `NAME.bak-STAMP[-N]`, if it is one.
fn backup_key(candidate: &str, file_name: &str) -> Option<(String, u32)> {
    let rest = candidate.strip_prefix(file_name)?.strip_prefix(".bak-")?;
    let (stamp, n) = match rest.split_once('-') {
        Some((stamp, n)) => (stamp, n.parse::<u32>().ok().filter(|n| *n > 0)?),
        None => (rest, 0),
    };
    // YYYYMMDDTHHMMSSZ, exactly as written above; anything else is not ours to delete.
    let ok = stamp.len() == 16
        && stamp.bytes().enumerate().all(|(i, b)| match i {
            8 => b == b'T',
            15 => b == b'Z',
            _ => b.is_ascii_digit(),
        });
    ok.then(|| (stamp.to_string(), n))
}

/// Bounds the backups of `file_name` in `dir` to [`KEPT_BACKUPS`]: every `wrap`, `wrap --pin`
/// and `update --config` writes one, and a folder that grows a file per pin hides the one that
/// matters. Only regular files named exactly as `write_with_backup` names them are removed; a
/// failure to remove one is not an error (the configuration is already written). The newest kept
/// is `written`, the backup just made, wherever it sorts.
fn prune_backups(dir: &Path, file_name: &str, written: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut found: Vec<((String, u32), PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            Some((backup_key(&name, file_name)?, e.path()))
        })
        .collect();
    if found.len() <= KEPT_BACKUPS {
        return;
    }
    // Kept: the oldest and the one just written. The newest by name is not always the one just
    // written: a free `-N` suffix of the same second, left by an earlier pruning, sorts before a
    // higher one.
    found.sort();
    for (_, path) in &found[1..] {
        if path != written {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A unified diff of two texts, three lines of context, from a longest-common-subsequence
/// alignment of lines (configuration files are small, so the quadratic table is fine).
pub fn unified_diff(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    // The edit script: (tag, old index, new index).
    let mut ops = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            ops.push((' ', i, j));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            // Removals come before additions, as diff(1) shows them.
            ops.push(('-', i, j));
            i += 1;
        } else {
            ops.push(('+', i, j));
            j += 1;
        }
    }
    const CONTEXT: usize = 3;
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    let changed: Vec<usize> = (0..ops.len()).filter(|&k| ops[k].0 != ' ').collect();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k < changed.len() && changed[k] <= end + 2 * CONTEXT + 1 {
            end = changed[k];
            k += 1;
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        let hunk = &ops[start..end];
        let old_len = hunk.iter().filter(|o| o.0 != '+').count();
        let new_len = hunk.iter().filter(|o| o.0 != '-').count();
        let old_start = hunk[0].1 + usize::from(old_len > 0);
        let new_start = hunk[0].2 + usize::from(new_len > 0);
        out.push_str(&format!(
            "@@ -{old_start},{old_len} +{new_start},{new_len} @@\n"
        ));
        for &(tag, oi, nj) in hunk {
            let line = if tag == '+' { b[nj] } else { a[oi] };
            out.push(tag);
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_are_unified() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\n";
        let new = "a\nb\nc\nD\ne\nf\ng\nh\n";
        let d = unified_diff(old, new, "x", "y");
        assert_eq!(
            d,
            "--- x\n+++ y\n@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n"
        );
        assert_eq!(unified_diff(old, old, "x", "y"), "--- x\n+++ y\n");
    }

    #[test]
    fn only_our_backup_names_are_ours() {
        let f = "mcp.json";
        assert_eq!(
            backup_key("mcp.json.bak-20261203T180000Z", f),
            Some(("20261203T180000Z".into(), 0))
        );
        assert_eq!(
            backup_key("mcp.json.bak-20261203T180000Z-12", f),
            Some(("20261203T180000Z".into(), 12))
        );
        for other in [
            "mcp.json.bak-20261203T180000Z-x",
            "mcp.json.bak-20261203T180000Z-0",
            "mcp.json.bak-mine",
            "mcp.json.bak",
            "mcp.json.bak-20261203T180000Z.old",
            "other.json.bak-20261203T180000Z",
        ] {
            assert_eq!(backup_key(other, f), None, "{other}");
        }
    }
}
