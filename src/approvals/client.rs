//! The asking side, used by `mcpguard approvals`: every approval socket of this user, one
//! request each.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

/// The sockets of this user's running mcpguard processes, by pid, in pid order. A socket whose
/// process is gone (mcpguard was killed before it could remove it) is removed here. A search
/// directory that is not this user's private one is refused: an error for the first (this
/// process's own choice), a problem report for the fallback.
pub fn sockets(problems: &mut Vec<String>) -> io::Result<Vec<(u32, PathBuf)>> {
    let mut found = Vec::new();
    for (i, dir) in super::search_dirs().into_iter().enumerate() {
        if std::fs::symlink_metadata(&dir).is_err() {
            continue;
        }
        match super::check_private(&dir) {
            Ok(()) => sockets_in(&dir, &mut found)?,
            Err(e) if i == 0 => return Err(e),
            Err(e) => problems.push(e.to_string()),
        }
    }
    found.sort();
    found.dedup_by_key(|(pid, _)| *pid);
    Ok(found)
}

fn sockets_in(dir: &Path, found: &mut Vec<(u32, PathBuf)>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let Some(pid) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".sock"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        found.push((pid, path));
    }
    Ok(())
}

/// Sends `request` on the socket at `path` and reads the one answer line.
pub fn request(path: &Path, request: &Value) -> io::Result<Value> {
    let mut stream = UnixStream::connect(path)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut line = serde_json::to_vec(request).unwrap_or_default();
    line.push(b'\n');
    stream.write_all(&line)?;
    let mut answer = String::new();
    BufReader::new((&stream).take(super::MAX_LINE as u64)).read_line(&mut answer)?;
    serde_json::from_str(&answer).map_err(|e| {
        io::Error::other(format!(
            "{} answered something that is not JSON: {e}",
            path.display()
        ))
    })
}

/// Every pending approval of every running mcpguard of this user, each with the `pid` of the
/// mcpguard that holds it. A process that cannot be asked is reported in `problems`.
pub fn list_all() -> io::Result<(Vec<Value>, Vec<String>)> {
    let mut pending = Vec::new();
    let mut problems = Vec::new();
    for (pid, path) in sockets(&mut problems)? {
        match request(&path, &json!({"op": "list"})) {
            Ok(v) if v["ok"] == true => {
                for mut item in v["pending"].as_array().cloned().unwrap_or_default() {
                    item["pid"] = json!(pid);
                    pending.push(item);
                }
            }
            Ok(v) => problems.push(format!(
                "mcpguard {pid}: {}",
                v["error"].as_str().unwrap_or("refused the request")
            )),
            Err(e) => problems.push(format!("mcpguard {pid} cannot be asked: {e}")),
        }
    }
    Ok((pending, problems))
}

/// Answers approval `id` (`<pid>-<n>`) in the mcpguard that holds it.
pub fn answer(id: &str, approve: bool, scope: &str) -> Result<String, String> {
    let pid = id
        .split_once('-')
        .and_then(|(pid, n)| n.parse::<u64>().ok().and(pid.parse::<u32>().ok()))
        .ok_or_else(|| {
            format!("{id:?} is not an approval id (they look like 1234-1; `mcpguard approvals list` shows them)")
        })?;
    let mut problems = Vec::new();
    let found = sockets(&mut problems).map_err(|e| e.to_string())?;
    let Some((_, path)) = found.into_iter().find(|(p, _)| *p == pid) else {
        return Err(format!(
            "no mcpguard with pid {pid} is waiting for approvals (it ended, or it runs as another user or with another XDG_RUNTIME_DIR); `mcpguard approvals list` shows what is pending"
        ));
    };
    let reply = request(
        &path,
        &json!({"op": "answer", "id": id, "approve": approve, "scope": scope}),
    )
    .map_err(|e| format!("mcpguard {pid} cannot be asked: {e}"))?;
    if reply["ok"] == true {
        Ok(reply["message"].as_str().unwrap_or("done").to_string())
    } else {
        Err(reply["error"]
            .as_str()
            .unwrap_or("the answer was refused")
            .to_string())
    }
}
