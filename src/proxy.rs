//! The IO driver: threads that move bytes between the host, the decision core and the server.
//!
//! Design: one thread reads the host (stdin), one reads the server (its stdout), one relays the
//! server's stderr, and one writer thread per destination drains a byte-budgeted queue. The main
//! thread spawned the child (so the parent-death signal stays armed for mcpguard's whole life)
//! and runs the lifecycle: end of input, signals, grace periods, exit status.
//!
//! Why threads and blocking IO rather than an async runtime: stdio cannot be made non-blocking
//! safely (the host may share the file description), so async stdio runs on a blocking thread
//! pool anyway, paying two hand-offs per read. With one thread per direction a forwarded line
//! costs one read, one queue hand-off and one write.
//!
//! Why writer queues: a reader must never block on the *other* peer. If the server reader could
//! block writing to the server's stdin while the server blocks writing its stdout (which Node
//! does on pipes), both would wait forever. Forwarded traffic waits for room in the destination's
//! budget (backpressure on the sender); replies mcpguard generates towards a peer only wait once
//! a much larger hard cap is reached.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::mem::ManuallyDrop;
use std::os::fd::FromRawFd;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use nix::sys::signal::Signal;

use crate::child;
use crate::diag;
use crate::frame::LineDecoder;
use crate::sanitize::{self, Clean};
use crate::session::{Config, Era, Level, Out, Session};

/// Options of one proxy run.
#[derive(Debug, Clone)]
pub struct Options {
    pub command: Vec<OsString>,
    pub max_message_bytes: usize,
    /// Wait after closing the server's stdin before SIGTERM, and after SIGTERM before SIGKILL.
    pub grace: Duration,
}

/// How the proxy ended; the binary turns it into its own exit status.
#[derive(Debug)]
pub enum Outcome {
    /// The server exited; mcpguard mirrors its status.
    Child(ExitStatus),
    /// mcpguard could not start the server.
    SpawnFailed(i32),
}

#[derive(Debug)]
enum Event {
    HostEof,
    HostGone,
    ServerEof,
    ChildExited(ExitStatus),
    Signal(i32),
    HostWriterDone,
}

/// Runs the proxy until the server exits.
pub fn run(opts: Options) -> io::Result<Outcome> {
    let (events, rx) = mpsc::channel::<Event>();

    // Signals first, so none arriving during start-up takes the default action and leaves the
    // child orphaned.
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ])?;
    {
        let events = events.clone();
        thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    if events.send(Event::Signal(sig)).is_err() {
                        break;
                    }
                }
            })?;
    }

    let mut child = match child::spawn(&opts.command) {
        Ok(c) => c,
        Err(e) => {
            diag::emit(Level::Error, &e.to_string());
            return Ok(Outcome::SpawnFailed(e.exit_code));
        }
    };
    let pgid = child.id();
    let (Some(child_in), Some(child_out), Some(child_err)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(io::Error::other("the child's pipes were not created"));
    };

    let budget = (4 << 20).max(opts.max_message_bytes.min(64 << 20));
    let to_host = Arc::new(Queue::new(budget));
    let to_server = Arc::new(Queue::new(budget));
    let core = Arc::new(Mutex::new(Session::new(
        Config {
            max_message_bytes: opts.max_message_bytes,
            era: Era::Legacy,
        },
        &nonce(),
    )));

    // Writers.
    {
        let q = to_server.clone();
        thread::Builder::new()
            .name("to-server".into())
            .spawn(move || {
                if let Err(e) = write_loop(&q, child_in) {
                    if e.kind() != io::ErrorKind::BrokenPipe {
                        diag::emit(Level::Warn, &format!("writing to the server failed: {e}"));
                    }
                }
                // Dropping the pipe here is what closes the server's stdin.
                q.close();
            })?;
    }
    {
        let q = to_host.clone();
        let events = events.clone();
        thread::Builder::new()
            .name("to-host".into())
            .spawn(move || {
                // SAFETY: fd 1 is open for the life of the process; ManuallyDrop keeps this File
                // from closing it, so stderr-only diagnostics after exit paths stay well defined.
                let stdout = ManuallyDrop::new(unsafe { File::from_raw_fd(1) });
                let result = write_loop(&q, &*stdout);
                q.close();
                if result.is_err() {
                    let _ = events.send(Event::HostGone);
                }
                let _ = events.send(Event::HostWriterDone);
            })?;
    }

    // Readers. The server reader counts what it reads, so the exit path can tell a reader
    // that is busy relaying a large last message from one that waits on a pipe held open.
    let server_progress = Arc::new(ReaderProgress::default());
    {
        let core = core.clone();
        let (to_host, to_server) = (to_host.clone(), to_server.clone());
        let events = events.clone();
        let max = opts.max_message_bytes;
        thread::Builder::new()
            .name("from-host".into())
            .spawn(move || {
                // SAFETY: fd 0 is open for the life of the process and is only read here; the
                // ManuallyDrop wrapper keeps it from being closed.
                let stdin = ManuallyDrop::new(unsafe { File::from_raw_fd(0) });
                read_loop(
                    &*stdin,
                    max,
                    |frame, out| core_lock(&core).from_host(frame, out),
                    &to_host,
                    &to_server,
                    Route::FromHost,
                );
                let _ = events.send(Event::HostEof);
            })?;
    }
    {
        let core = core.clone();
        let (to_host, to_server) = (to_host.clone(), to_server.clone());
        let events = events.clone();
        let max = opts.max_message_bytes;
        let progress = server_progress.clone();
        thread::Builder::new()
            .name("from-server".into())
            .spawn(move || {
                read_loop(
                    Counting(child_out, progress),
                    max,
                    |frame, out| core_lock(&core).from_server(frame, out),
                    &to_host,
                    &to_server,
                    Route::FromServer,
                );
                let _ = events.send(Event::ServerEof);
            })?;
    }
    thread::Builder::new()
        .name("server-stderr".into())
        .spawn(move || relay_stderr(child_err))?;
    {
        let events = events.clone();
        thread::Builder::new().name("wait".into()).spawn(move || {
            let status = loop {
                match child.wait() {
                    Ok(s) => break s,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => break ExitStatus::from_raw(1 << 8),
                }
            };
            let _ = events.send(Event::ChildExited(status));
        })?;
    }
    drop(events);

    // Lifecycle.
    let mut stop_requested_at: Option<Instant> = None;
    let mut sent_term = false;
    let mut sent_kill = false;
    let mut server_eof = false;
    let status = loop {
        let next = stop_requested_at.map(|t| {
            if !sent_term {
                t + opts.grace
            } else {
                t + opts.grace * 2
            }
        });
        let ev = match next {
            Some(deadline) if !sent_kill => {
                match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(ev) => Some(ev),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => {
                        return Err(io::Error::other("event channel closed"))
                    }
                }
            }
            _ => Some(
                rx.recv()
                    .map_err(|_| io::Error::other("event channel closed"))?,
            ),
        };
        match ev {
            Some(Event::HostEof) | Some(Event::HostGone) => {
                if stop_requested_at.is_none() {
                    diag::emit(
                        Level::Debug,
                        "the host closed the connection; closing the server's stdin",
                    );
                    stop_requested_at = Some(Instant::now());
                    to_server.close();
                }
            }
            Some(Event::Signal(sig)) => {
                if let Ok(s) = Signal::try_from(sig) {
                    diag::emit(
                        Level::Debug,
                        &format!("forwarding {s} to the server's process group"),
                    );
                    let _ = child::signal_group(pgid, s);
                }
            }
            Some(Event::ServerEof) => server_eof = true,
            Some(Event::ChildExited(status)) => break status,
            Some(Event::HostWriterDone) => {}
            None => {
                if !sent_term {
                    diag::emit(
                        Level::Info,
                        &format!("the server did not exit within {:?} of its stdin closing; sending SIGTERM", opts.grace),
                    );
                    let _ = child::signal_group(pgid, Signal::SIGTERM);
                    sent_term = true;
                } else {
                    diag::emit(
                        Level::Warn,
                        &format!(
                            "the server ignored SIGTERM for {:?}; sending SIGKILL",
                            opts.grace
                        ),
                    );
                    let _ = child::signal_group(pgid, Signal::SIGKILL);
                    sent_kill = true;
                }
            }
        }
    };

    // The server is gone. Nothing of its may outlive it: end the rest of its process group,
    // which also closes the last write ends of its stdout pipe.
    if child::group_alive(pgid) {
        let _ = child::signal_group(pgid, Signal::SIGTERM);
        thread::sleep(Duration::from_millis(50));
        if child::group_alive(pgid) {
            let _ = child::signal_group(pgid, Signal::SIGKILL);
        }
    }

    // Relay everything it wrote before exiting. The wait ends at end of file, or when the
    // reader has made no progress for a while (a process that left the group may still hold
    // the pipe open); a large message still being relayed keeps it going.
    let mut last_seen = server_progress.bytes.load(Ordering::SeqCst);
    while !server_eof {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(Event::ServerEof) => server_eof = true,
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => {
                let now_seen = server_progress.bytes.load(Ordering::SeqCst);
                if now_seen == last_seen && server_progress.waiting.load(Ordering::SeqCst) {
                    break;
                }
                last_seen = now_seen;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let why = describe_exit(&status);
    let mut out = Vec::new();
    core_lock(&core).server_closed(&why, &mut out);
    dispatch(out, &to_host, &to_server, Route::FromServer);

    // Flush everything owed to the host, but never hang on a host that stopped reading.
    to_host.close();
    let flush_until = Instant::now() + Duration::from_secs(5);
    loop {
        match rx.recv_timeout(flush_until.saturating_duration_since(Instant::now())) {
            Ok(Event::HostWriterDone) | Err(_) => break,
            Ok(_) => {}
        }
    }
    diag::emit(Level::Debug, &format!("the server {why}"));
    Ok(Outcome::Child(status))
}

fn describe_exit(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => match Signal::try_from(sig) {
            Ok(s) => format!("was killed by {s}"),
            Err(_) => format!("was killed by signal {sig}"),
        },
        _ => "ended".to_string(),
    }
}

fn core_lock(core: &Mutex<Session>) -> std::sync::MutexGuard<'_, Session> {
    // A panic while holding the lock would be a bug; the state is still the best we have, so
    // keep going rather than poison every later message.
    core.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    FromHost,
    FromServer,
}

fn read_loop(
    mut src: impl Read,
    max: usize,
    mut decide: impl FnMut(crate::frame::Frame, &mut Vec<Out>),
    to_host: &Queue,
    to_server: &Queue,
    route: Route,
) {
    let mut decoder = LineDecoder::new(max);
    let mut buf = BytesMut::with_capacity(64 << 10);
    let mut chunk = vec![0u8; 64 << 10];
    let mut out = Vec::new();
    loop {
        let n = match src.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                diag::emit(Level::Warn, &format!("reading failed: {e}"));
                break;
            }
        };
        buf.extend_from_slice(&chunk[..n]);
        while let Some(frame) = decoder.decode(&mut buf) {
            decide(frame, &mut out);
            dispatch(std::mem::take(&mut out), to_host, to_server, route);
        }
        // Grow the read size with the message being assembled, so a 64 MiB line takes a few
        // hundred reads, not a thousand.
        if buf.len() > chunk.len() && chunk.len() < (1 << 20) {
            chunk.resize(chunk.len() * 2, 0);
        }
    }
    while let Some(frame) = decoder.decode_eof(&mut buf) {
        decide(frame, &mut out);
        dispatch(std::mem::take(&mut out), to_host, to_server, route);
    }
}

fn dispatch(out: Vec<Out>, to_host: &Queue, to_server: &Queue, route: Route) {
    for o in out {
        match o {
            Out::Host(b) => to_host.push(b, route == Route::FromServer),
            Out::Server(b) => to_server.push(b, route == Route::FromHost),
            Out::Diag(level, msg) => diag::emit(level, &msg),
        }
    }
}

fn write_loop(q: &Queue, dst: impl Write) -> io::Result<()> {
    let mut w = BufWriter::with_capacity(64 << 10, dst);
    let mut batch = Vec::new();
    while q.pop_all(&mut batch) {
        for b in batch.drain(..) {
            w.write_all(&b)?;
            w.write_all(b"\n")?;
        }
        w.flush()?;
    }
    w.flush()
}

/// Relays the server's stderr line by line, with terminal escapes and invisible characters made
/// harmless, so a server cannot repaint the user's terminal or hide text in mcpguard's log.
fn relay_stderr(mut src: impl Read) {
    const MAX_LINE: usize = 16 << 10;
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 8192];
    let emit = |line: &[u8]| {
        let text = String::from_utf8_lossy(line);
        let text = text.strip_suffix('\r').unwrap_or(&text);
        let mut err = io::stderr().lock();
        let _ = writeln!(err, "[server] {}", sanitize::clean(text, Clean::LINE));
    };
    loop {
        let n = match src.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        pending.extend_from_slice(&chunk[..n]);
        while let Some(i) = memchr::memchr(b'\n', &pending) {
            emit(&pending[..i]);
            pending.drain(..=i);
        }
        if pending.len() > MAX_LINE {
            emit(&pending);
            pending.clear();
        }
    }
    if !pending.is_empty() {
        emit(&pending);
    }
}

/// What the server reader is doing, for the exit path.
#[derive(Default)]
struct ReaderProgress {
    bytes: AtomicU64,
    /// True while the reader waits inside `read`; false while it processes what it read.
    waiting: AtomicBool,
}

/// A reader that reports its progress.
struct Counting<R>(R, Arc<ReaderProgress>);

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.1.waiting.store(true, Ordering::SeqCst);
        let n = self.0.read(buf);
        self.1.waiting.store(false, Ordering::SeqCst);
        let n = n?;
        self.1.bytes.fetch_add(n as u64, Ordering::SeqCst);
        Ok(n)
    }
}

/// A per-process random nonce for mcpguard's own request ids.
fn nonce() -> String {
    let mut bytes = [0u8; 8];
    if File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_err()
    {
        // Without randomness the nonce still separates id spaces by process and time.
        let t = Instant::now().elapsed().as_nanos() as u64 ^ u64::from(std::process::id());
        bytes = t.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A queue of messages for one destination, bounded by bytes.
struct Queue {
    state: Mutex<QueueState>,
    readable: Condvar,
    writable: Condvar,
    budget: usize,
}

struct QueueState {
    items: VecDeque<Bytes>,
    bytes: usize,
    closed: bool,
}

impl Queue {
    fn new(budget: usize) -> Self {
        Queue {
            state: Mutex::new(QueueState {
                items: VecDeque::new(),
                bytes: 0,
                closed: false,
            }),
            readable: Condvar::new(),
            writable: Condvar::new(),
            budget,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `b`. Forwarded traffic waits while the queue is over budget; replies that
    /// mcpguard generates wait only past four times the budget. A closed queue drops silently:
    /// it is closed only when its peer is gone, which the lifecycle reports.
    fn push(&self, b: Bytes, forwarded: bool) {
        let limit = if forwarded {
            self.budget
        } else {
            self.budget * 4
        };
        let mut st = self.lock();
        while !st.closed && !st.items.is_empty() && st.bytes + b.len() > limit {
            st = self.writable.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if st.closed {
            return;
        }
        st.bytes += b.len();
        st.items.push_back(b);
        drop(st);
        self.readable.notify_one();
    }

    /// Moves every queued item into `into`, waiting for at least one. Returns false once the
    /// queue is closed and empty.
    fn pop_all(&self, into: &mut Vec<Bytes>) -> bool {
        let mut st = self.lock();
        while st.items.is_empty() && !st.closed {
            st = self.readable.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if st.items.is_empty() {
            return false;
        }
        into.extend(st.items.drain(..));
        st.bytes = 0;
        drop(st);
        self.writable.notify_all();
        true
    }

    /// No more items will be accepted; the writer drains what is queued and stops.
    fn close(&self) {
        self.lock().closed = true;
        self.readable.notify_all();
        self.writable.notify_all();
    }
}
