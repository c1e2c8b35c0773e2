//! Writing the log: [`AuditLog`] opens a regular file (never stdout), continues its chain from the
//! last line, and appends each record under an exclusive `flock`, flushed before it returns.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use jiff::Timestamp;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde_json::{Map, Value};

use crate::snapshot::canonical::{canonical_bytes, sha256_hex};

use super::*;

/// Why [`AuditLog::open`] refused a file.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("cannot open the audit log {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },

    /// The log's folder did not exist and could not be made.
    #[error(
        "cannot create the folder {} of the audit log {}: {source}; create it (mode 0700) or name \
         another file with --audit-log FILE",
        dir.display(),
        path.display()
    )]
    Folder {
        dir: PathBuf,
        path: PathBuf,
        source: io::Error,
    },

    /// Pipes, terminals and devices are refused: the log must be a file that can be verified, and
    /// stdout in particular carries JSON-RPC.
    #[error(
        "the audit log {} is not a regular file; audit records are only written to a regular \
         file, never to a terminal, pipe or device (stdout carries JSON-RPC)",
        path.display()
    )]
    NotARegularFile { path: PathBuf },

    #[error(
        "the audit log {} is the file stdout writes to; stdout carries JSON-RPC, so name another \
         file",
        path.display()
    )]
    IsStdout { path: PathBuf },

    /// The existing file's last line is not an intact record, so the chain cannot be continued.
    #[error(
        "refusing to append to the audit log {}: its last line is damaged ({problem}); run \
         `mcpguard audit verify` on it, then move it aside and start a new log",
        path.display()
    )]
    Damaged { path: PathBuf, problem: Problem },
}

/// The appending writer of one audit log file. See the module documentation for the format.
pub struct AuditLog {
    /// The file sink's path; `None` when records go to the system log only.
    path: Option<PathBuf>,
    payload: Payload,
    server: String,
    /// The system-log sinks each record is also sent to, after the file (`audit.sink`).
    system: Vec<super::system::Target>,
    state: Mutex<State>,
}

/// Everything that changes with each record, behind the mutex.
struct State {
    /// The file sink; without one the chain lives in memory, starting from the genesis.
    file: Option<File>,
    snapshot: Option<String>,
    head: ChainHead,
    /// The file length right after this writer's last write (or the open). A different length at
    /// the next record means another process appended (or the file was cut), so the chain must be
    /// re-read from the file.
    end: u64,
}

impl fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditLog")
            .field("path", &self.path)
            .field("payload", &self.payload)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// Creates the missing folders above `path`, each 0700: a shipped policy names a log under
/// `$XDG_STATE_HOME/mcpguard/`, which a fresh machine does not have yet, and the folder of a
/// private log must not be readable by others. Existing folders are left as they are.
fn create_folders(path: &Path) -> Result<(), OpenError> {
    use std::os::unix::fs::DirBuilderExt;
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| OpenError::Folder {
            dir: dir.to_owned(),
            path: path.to_owned(),
            source,
        })
}

impl AuditLog {
    /// Opens (creating with mode 0600 if needed, and its missing parent folders with mode 0700)
    /// the log at `path` for appending. An existing log
    /// is continued: its last line must be an intact record (it is parsed and its hash checked;
    /// the rest of the file is not read, which is what [`verify`] is for), and the next record
    /// follows it in `seq` and `prev`. A damaged last line is refused rather than repaired,
    /// because appending would hide the damage behind a valid-looking continuation.
    ///
    /// `server` is the server key written in every record; `snapshot` the pinned snapshot digest,
    /// if known yet (see [`AuditLog::set_snapshot`]).
    pub fn open(
        path: &Path,
        server: impl Into<String>,
        snapshot: Option<String>,
        payload: Payload,
    ) -> Result<AuditLog, OpenError> {
        let io_err = |source| OpenError::Io {
            path: path.to_owned(),
            source,
        };
        create_folders(path)?;
        let file = OpenOptions::new()
            .append(true)
            .create(true)
            .read(true)
            .mode(0o600)
            .open(path)
            .map_err(io_err)?;
        let meta = file.metadata().map_err(io_err)?;
        if !meta.is_file() {
            return Err(OpenError::NotARegularFile {
                path: path.to_owned(),
            });
        }
        if is_stdout(&meta) {
            return Err(OpenError::IsStdout {
                path: path.to_owned(),
            });
        }
        let (head, end) = {
            let guard = lock_file(&file).map_err(io_err)?;
            let end = guard.metadata().map_err(io_err)?.len();
            let head = read_head(&guard, end).map_err(|err| match err {
                TailError::Io(source) => io_err(source),
                TailError::Damaged(problem) => OpenError::Damaged {
                    path: path.to_owned(),
                    problem,
                },
            })?;
            (head, end)
        };
        Ok(AuditLog {
            path: Some(path.to_owned()),
            payload,
            server: server.into(),
            system: Vec::new(),
            state: Mutex::new(State {
                file: Some(file),
                snapshot,
                head,
                end,
            }),
        })
    }

    /// A log with no file sink: records go to the system-log sinks only (add them with
    /// [`AuditLog::with_system`]), chained in memory from the genesis.
    pub fn system_only(
        server: impl Into<String>,
        snapshot: Option<String>,
        payload: Payload,
    ) -> AuditLog {
        AuditLog {
            path: None,
            payload,
            server: server.into(),
            system: Vec::new(),
            state: Mutex::new(State {
                file: None,
                snapshot,
                head: ChainHead::genesis(),
                end: 0,
            }),
        }
    }

    /// Adds system-log sinks: every record is sent to each of them after the file sink.
    pub fn with_system(mut self, targets: Vec<super::system::Target>) -> AuditLog {
        self.system.extend(targets);
        self
    }

    /// The file this log appends to, if it has a file sink.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Names the sinks, for messages: `the audit log FILE`, `the journal sink (…)`.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .path
            .iter()
            .map(|p| format!("the audit log {}", p.display()))
            .collect();
        parts.extend(self.system.iter().map(|t| t.describe()));
        parts.join(", ")
    }

    /// Whether argument and result values are written.
    pub fn payload(&self) -> Payload {
        self.payload
    }

    /// Sets the snapshot digest written in later records (`None` writes `null`), for a log that is
    /// opened before the snapshot is loaded, or a run without one.
    pub fn set_snapshot(&self, snapshot: Option<String>) {
        self.lock_state().snapshot = snapshot;
    }

    /// The last record this writer wrote or found at open. Printing it at exit lets removed
    /// trailing lines be detected later (see the module documentation). Another process may have
    /// appended since.
    pub fn head(&self) -> ChainHead {
        self.lock_state().head.clone()
    }

    /// Appends one record. When this returns `Ok`, the whole line is in the kernel: process exit
    /// loses nothing (a power loss still can, see [`AuditLog::sync`]).
    ///
    /// On error nothing is appended: a partly written line is cut off again (under the file
    /// lock, so no other writer's line is touched), and the chain continues from the last intact
    /// record. Errors are also returned when the file no longer ends with an intact record (it
    /// was damaged or cut since the last write); the caller decides whether to fail closed.
    pub fn record(&self, event: Event<'_>) -> io::Result<()> {
        // The digest and payload copies are the expensive part; they are made before taking the
        // locks so that concurrent callers wait only for the write itself.
        let fields = event.fields(self.payload == Payload::Full);
        let mut state = self.lock_state();
        let state = &mut *state;
        let Some(file) = &state.file else {
            // No file sink: the chain is this process's own, kept in memory.
            let seq =
                state.head.seq.checked_add(1).ok_or_else(|| {
                    io::Error::other("the audit chain's seq cannot grow any further")
                })?;
            let time = format!("{:.6}", Timestamp::now());
            let (record, line, hash) =
                self.build_record(seq, &time, event.kind, &state.snapshot, fields, &state.head)?;
            state.head = ChainHead { seq, hash };
            return self.send_system(&record, &line);
        };
        let guard = lock_file(file)?;
        let len = guard.metadata()?.len();
        if len < state.end {
            return Err(io::Error::other(format!(
                "{} shrank from {} to {len} bytes while mcpguard was writing it: it \
                 was cut or rotated underneath; records are not appended to a cut chain (restart \
                 mcpguard to start a new log after rotating)",
                self.describe(),
                state.end
            )));
        }
        if len > state.end {
            // Another process appended since our last write; continue after its last record.
            state.head = read_head(&guard, len).map_err(|err| match err {
                TailError::Io(err) => err,
                TailError::Damaged(problem) => io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the last line of {} is damaged ({problem}); not appending",
                        self.describe()
                    ),
                ),
            })?;
            state.end = len;
        }
        let seq = state.head.seq.checked_add(1).ok_or_else(|| {
            io::Error::other("the audit log's seq cannot grow any further; start a new log")
        })?;
        let time = format!("{:.6}", Timestamp::now());
        let build = |fields: Map<String, Value>| {
            self.build_record(seq, &time, event.kind, &state.snapshot, fields, &state.head)
        };
        let (mut record, mut line, mut hash) = build(fields)?;
        if line.len() > MAX_RECORD_BYTES {
            // Only payload values can make a record this long. A line verify would refuse is worse
            // than a record without its values, so they are dropped and the drop is recorded.
            let mut fields = event.fields(false);
            fields.insert("payloadOmitted".into(), Value::from("record too long"));
            (record, line, hash) = build(fields)?;
        }
        let mut writer: &File = &guard;
        if let Err(err) = writer.write_all(line.as_bytes()) {
            // A partial line would break the chain for every later record; cutting it off leaves
            // the file as it was. If even that fails, the next record finds a damaged last line
            // and reports it.
            let _ = guard.set_len(len);
            return Err(err);
        }
        // `File` has no buffer, so this does nothing today; it is here so that wrapping the file
        // in a buffered writer later cannot silently start losing lines at exit.
        writer.flush()?;
        state.end = len + line.len() as u64;
        state.head = ChainHead { seq, hash };
        drop(guard);
        self.send_system(&record, &line)
    }

    /// Sends a record, already in the file (when there is one) and chained, to every system-log
    /// sink. The first failure is returned, so the decision the record is about does not take
    /// effect; a sink that missed a record shows the gap as a `prev` that matches no `hash`.
    fn send_system(&self, record: &Map<String, Value>, line: &str) -> io::Result<()> {
        for target in &self.system {
            target.send(record, line)?;
        }
        Ok(())
    }

    /// Forces the records written so far to the disk (`fdatasync`), so that they also survive a
    /// power loss or kernel crash. Process exit alone never needs this.
    pub fn sync(&self) -> io::Result<()> {
        match &self.lock_state().file {
            Some(f) => f.sync_data(),
            None => Ok(()),
        }
    }

    /// Builds one record and returns it, its line (with its `\n`) and its hash.
    fn build_record(
        &self,
        seq: u64,
        time: &str,
        kind: EventKind,
        snapshot: &Option<String>,
        fields: Map<String, Value>,
        head: &ChainHead,
    ) -> io::Result<(Map<String, Value>, String, String)> {
        let mut record = Map::new();
        record.insert("seq".into(), Value::from(seq));
        record.insert("time".into(), Value::from(time));
        record.insert("event".into(), Value::from(kind.code()));
        record.insert("server".into(), Value::from(self.server.as_str()));
        record.insert(
            "snapshot".into(),
            snapshot.as_deref().map_or(Value::Null, Value::from),
        );
        record.extend(fields);
        record.insert("prev".into(), Value::from(head.hash.as_str()));
        let mut record = Value::Object(record);
        let hash = sha256_hex(&canonical_bytes(&record));
        if let Value::Object(map) = &mut record {
            map.insert("hash".into(), Value::from(hash.as_str()));
        }
        let mut line = serde_json::to_string(&record).map_err(io::Error::other)?;
        line.push('\n');
        let Value::Object(record) = record else {
            return Err(io::Error::other("an audit record is not an object"));
        };
        Ok((record, line, hash))
    }

    /// Locks the state; a poisoned mutex is still usable because the state is only changed after
    /// a write succeeded, so a panic elsewhere cannot leave it half-updated.
    fn lock_state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Tells whether `meta` is the file stdout writes to.
fn is_stdout(meta: &std::fs::Metadata) -> bool {
    let Ok(fd) = io::stdout().as_fd().try_clone_to_owned() else {
        // Without a stdout there is nothing to confuse the log with.
        return false;
    };
    match File::from(fd).metadata() {
        Ok(out) => out.dev() == meta.dev() && out.ino() == meta.ino(),
        Err(_) => false,
    }
}

/// Takes an exclusive `flock` on the open file description behind `file`, released when the
/// returned guard is dropped. The lock is on a duplicate descriptor so that the guard owns it
/// while the log keeps `file`.
fn lock_file(file: &File) -> io::Result<Flock<File>> {
    let mut dup = file.try_clone()?;
    loop {
        match Flock::lock(dup, FlockArg::LockExclusive) {
            Ok(guard) => return Ok(guard),
            // A signal handler installed without SA_RESTART interrupts the wait; keep waiting.
            Err((file, Errno::EINTR)) => dup = file,
            Err((_, errno)) => return Err(io::Error::from(errno)),
        }
    }
}

enum TailError {
    Io(io::Error),
    Damaged(Problem),
}

impl From<io::Error> for TailError {
    fn from(err: io::Error) -> Self {
        TailError::Io(err)
    }
}

/// Reads the last line of a file of length `len` and returns the chain head it records.
fn read_head(file: &File, len: u64) -> Result<ChainHead, TailError> {
    if len == 0 {
        return Ok(ChainHead::genesis());
    }
    let mut last = [0_u8; 1];
    file.read_exact_at(&mut last, len - 1)?;
    if last[0] != b'\n' {
        return Err(TailError::Damaged(Problem::Truncated));
    }
    let end = len - 1;
    let max = MAX_RECORD_BYTES as u64;
    let mut start = end;
    let mut chunk = vec![0_u8; TAIL_CHUNK];
    while start > 0 {
        let n = start.min(TAIL_CHUNK as u64);
        let from = start - n;
        // `n` is at most TAIL_CHUNK, so it fits a usize.
        let buf = &mut chunk[..n as usize];
        file.read_exact_at(buf, from)?;
        if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            start = from + i as u64 + 1;
            break;
        }
        start = from;
        if end - start > max {
            return Err(TailError::Damaged(Problem::TooLong));
        }
    }
    if end - start > max {
        return Err(TailError::Damaged(Problem::TooLong));
    }
    // Bounded by MAX_RECORD_BYTES just above, so it fits a usize.
    let mut line = vec![0_u8; (end - start) as usize];
    file.read_exact_at(&mut line, start)?;
    let checked = check_record(&line).map_err(TailError::Damaged)?;
    Ok(ChainHead {
        seq: checked.seq,
        hash: checked.hash,
    })
}
