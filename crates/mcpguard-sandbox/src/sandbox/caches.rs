//! The lifetime of the servers' private caches (`presets::private_cache`,
//! `$XDG_STATE_HOME/mcpguard/server-caches/ID`): a cache is held while a session uses it and
//! the folder keeps a bounded set of them.
//!
//! Why a bounded set and not a cache per session removed at its end: the cache is what makes a
//! server's second start fast (uv and npm fill it with what the server fetched or built), and a
//! server's command always maps to the same ID. But every distinct command ever run left a
//! folder behind, never cleaned, so the set is bounded: a cache not used for
//! [`UNUSED_DAYS`] days is removed, and beyond the [`KEPT`] most recently used the older ones
//! are, whenever a server's cache is opened.
//!
//! A cache in use is never removed: each session holds a shared `flock` on `ID.lock` beside the
//! folder for the life of the mcpguard process (the kernel drops it however the process ends),
//! and removal takes the exclusive lock without waiting, skipping what it cannot lock. The lock
//! file's modification time is the cache's last use; it lies outside the folder granted to the
//! server, so a server cannot make its cache look fresh, nor remove another's lock.

// This module's `unsafe`: flock on the cache's lock file (each block with its `// SAFETY:`).
#![allow(unsafe_code)]

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// At most this many caches are kept (the most recently used).
pub const KEPT: usize = 32;

/// A cache unused for this many days is removed.
pub const UNUSED_DAYS: u64 = 30;

/// The locks this process holds on the caches its sessions use, until it ends.
static HELD: Mutex<Vec<File>> = Mutex::new(Vec::new());

/// Marks the cache `root/id` as used by this process (a shared lock on `root/id.lock`, held
/// until the process ends, whose modification time becomes now), creates the folder 0700, and
/// then removes the caches [`prune`] finds unused. `None` when the lock or the folder cannot
/// be made.
pub fn open(root: &Path, id: &str) -> Option<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(root)
        .ok()?;
    let lock = hold(&root.join(format!("{id}.lock")))?;
    let dir = root.join(id);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .ok()?;
    if let Ok(mut held) = HELD.lock() {
        held.push(lock);
    }
    prune(
        root,
        KEPT,
        Duration::from_secs(UNUSED_DAYS * 86_400),
        SystemTime::now(),
    );
    Some(dir)
}

/// `flock` on `file`; `false` when it is held the other way (`LOCK_NB`) or fails.
fn flock(file: &File, op: libc::c_int) -> bool {
    // SAFETY: flock on a descriptor this File owns; no memory is passed.
    unsafe { libc::flock(file.as_raw_fd(), op) == 0 }
}

/// Opens `path` (0600) and takes a shared lock on it, waiting for a removal in progress; if the
/// file was removed meanwhile (the lock is then on a name that no longer exists), opens it
/// again.
fn hold(path: &Path) -> Option<File> {
    for _ in 0..5 {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(path)
            .ok()?;
        if !flock(&file, libc::LOCK_SH) {
            return None;
        }
        let same = match (file.metadata(), std::fs::symlink_metadata(path)) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        if same {
            let _ = file.set_modified(SystemTime::now());
            return Some(file);
        }
    }
    None
}

/// Removes from `root` every cache not in use (its lock can be taken exclusively without
/// waiting) that was last used before `now - unused`, or that is older than the `kept` most
/// recently used; and lock files whose cache folder is gone. Returns the IDs removed. Errors are
/// skipped: a cache that cannot be removed now is tried again at the next start.
pub fn prune(root: &Path, kept: usize, unused: Duration, now: SystemTime) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut caches: Vec<(SystemTime, String)> = Vec::new();
    let mut orphans: Vec<String> = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(meta) = e.metadata() else { continue };
        if let Some(id) = name.strip_suffix(".lock") {
            if meta.is_file() && std::fs::symlink_metadata(root.join(id)).is_err() {
                orphans.push(id.to_string());
            }
            continue;
        }
        if !meta.is_dir() {
            continue;
        }
        // The last use: the lock's time, or the folder's for a cache from before locks.
        let used = std::fs::metadata(root.join(format!("{name}.lock")))
            .and_then(|m| m.modified())
            .or_else(|_| meta.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        caches.push((used, name));
    }
    caches.sort_by(|a, b| b.cmp(a));
    let stale = now.checked_sub(unused).unwrap_or(SystemTime::UNIX_EPOCH);
    let mut removed = Vec::new();
    for (i, (used, id)) in caches.iter().enumerate() {
        if i < kept && *used >= stale {
            continue;
        }
        if remove_unused(root, id, true) {
            removed.push(id.clone());
        }
    }
    for id in orphans {
        remove_unused(root, &id, false);
    }
    removed
}

/// Removes the cache `root/id` (when `folder`) and its lock file, under the exclusive lock;
/// `false` when it is in use or could not be removed.
fn remove_unused(root: &Path, id: &str, folder: bool) -> bool {
    let lock_path = root.join(format!("{id}.lock"));
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(&lock_path);
    let Ok(lock) = lock else { return false };
    if !flock(&lock, libc::LOCK_EX | libc::LOCK_NB) {
        return false;
    }
    if folder && !remove_tree(&root.join(id)) {
        return false;
    }
    // Removed while still locked, so that a start waiting on it opens a new one (`hold`).
    std::fs::remove_file(&lock_path).is_ok()
}

/// Removes a folder the server filled, even where it took away its own permissions (a folder
/// of mode 0000 cannot be listed): folders (never links) are given back rwx to the owner first.
fn remove_tree(dir: &Path) -> bool {
    if std::fs::remove_dir_all(dir).is_ok() {
        return true;
    }
    fn open_up(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    open_up(&e.path());
                }
            }
        }
    }
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.is_dir()) {
        open_up(dir);
    }
    std::fs::remove_dir_all(dir).is_ok() || !dir.exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(root: &Path, id: &str, age_days: u64, now: SystemTime) {
        std::fs::create_dir_all(root.join(id).join("npm/deep")).unwrap();
        std::fs::write(root.join(id).join("npm/deep/blob"), "x").unwrap();
        let lock = File::create(root.join(format!("{id}.lock"))).unwrap();
        lock.set_modified(now - Duration::from_secs(age_days * 86_400))
            .unwrap();
    }

    #[test]
    fn unused_and_surplus_caches_go_and_one_in_use_stays() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let now = SystemTime::now();
        // Five recent caches, one old, one old but in use; keep 3.
        for (i, id) in ["a", "b", "c", "d", "e"].iter().enumerate() {
            cache(root, id, i as u64, now);
        }
        cache(root, "old", 40, now);
        cache(root, "busy", 50, now);
        let busy = File::open(root.join("busy.lock")).unwrap();
        assert!(flock(&busy, libc::LOCK_SH));
        // A server that took away its own permissions on a folder of its cache.
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(root.join("e/npm"), std::fs::Permissions::from_mode(0o000))
                .unwrap();
        }
        // A lock without its folder.
        File::create(root.join("gone.lock")).unwrap();
        let mut removed = prune(root, 3, Duration::from_secs(30 * 86_400), now);
        removed.sort();
        assert_eq!(removed, vec!["d", "e", "old"]);
        for id in ["a", "b", "c", "busy"] {
            assert!(root.join(id).is_dir(), "{id} must stay");
            assert!(
                root.join(format!("{id}.lock")).is_file(),
                "{id}.lock must stay"
            );
        }
        for id in ["d", "e", "old", "gone"] {
            assert!(!root.join(id).exists(), "{id} must go");
            assert!(
                !root.join(format!("{id}.lock")).exists(),
                "{id}.lock must go"
            );
        }
        // Once its session ends, the old cache goes too.
        drop(busy);
        assert_eq!(
            prune(root, 3, Duration::from_secs(30 * 86_400), now),
            vec!["busy"]
        );
    }

    #[test]
    fn open_holds_its_cache_against_removal_and_marks_it_used() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("server-caches");
        let got = open(&root, "0123").unwrap();
        assert_eq!(got, root.join("0123"));
        assert!(got.is_dir());
        // Held by this process: even with nothing kept, it stays.
        assert!(prune(
            &root,
            0,
            Duration::ZERO,
            SystemTime::now() + Duration::from_secs(60)
        )
        .is_empty());
        assert!(got.is_dir());
        let used = std::fs::metadata(root.join("0123.lock"))
            .unwrap()
            .modified()
            .unwrap();
        assert!(used.elapsed().unwrap_or_default() < Duration::from_secs(60));
    }
}
