//! The IO driver: threads that move bytes between the host, the decision core and the server.
//!
//! Design: one thread reads the host (stdin), one reads the server (its stdout), one relays the
//! server's stderr. Each reader decides every message of a read in the core and writes the
//! results itself through a `Sink` per destination (one vectored write per batch; a queue and a
//! writer thread only when the server's stdin is full). The main thread spawned the child (so
//! the parent-death signal stays armed for mcpguard's whole life) and runs the lifecycle: end
//! of input, signals, grace periods, exit status.
//!
//! Why threads and blocking IO rather than an async runtime: stdio cannot be made non-blocking
//! safely (the host may share the file description), so async stdio runs on a blocking thread
//! pool anyway, paying two hand-offs per read. With one thread per direction a forwarded line
//! costs one read and one write, as in a plain pipe relay.
//!
//! It decides nothing: every frame goes to `gate::session`, whose `Out` actions it executes. It
//! knows nothing of the command line (`main` passes `Options` in).
//!
//! A panic is a bug, and it must never leave the host waiting: the readers decide each read
//! inside `catch_unwind`, and a process-wide panic hook (installed by [`run`]) reports every
//! other thread's panic to the lifecycle. Either way the lifecycle ends the session at once
//! ([`end_after_panic`]): the server is killed, every request the host is owed an answer for is
//! answered with an error, one error line says what happened, and mcpguard exits with
//! [`EXIT_INTERNAL_ERROR`]. ARCHITECTURE.md says why this rather than `panic = "abort"`.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use nix::sys::signal::Signal;

use crate::approvals;
use crate::audit::{AuditLog, Event as AuditEvent, EventKind};
use crate::gate::session::{AuditNote, Config, Mode, Out, Parsed, Session};
use crate::policy::Channel;
use crate::process::child;
use crate::process::diag;
use crate::protocol::{Era, Level};
use crate::wire::frame::LineDecoder;
use crate::wire::sink::Sink;

/// Options of one proxy run.
#[derive(Debug, Clone)]
pub struct Options {
    pub command: Vec<OsString>,
    pub max_message_bytes: usize,
    /// Wait after closing the server's stdin before SIGTERM, and after SIGTERM before SIGKILL.
    pub grace: Duration,
    /// What the gate enforces (decided, and the snapshot verified, before the server starts).
    pub mode: Mode,
    /// Which capabilities pass and how many pages a live walk may have.
    pub capabilities: crate::gate::capabilities::Capabilities,
    pub max_pages: usize,
    pub max_calls_in_flight: usize,
    /// Per-call timeout (zero: none).
    pub call_timeout: Duration,
    pub redact_errors: bool,
    pub structured_only: bool,
    /// Where decisions are recorded, if anywhere.
    pub audit: Option<Arc<AuditLog>>,
    /// Write classification and confirmation.
    pub policy: Arc<crate::policy::Policy>,
    pub dry_run: bool,
    /// The prepared sandbox; `None` when the policy turns it off.
    pub sandbox: Option<Arc<crate::sandbox::Prepared>>,
    /// The policy's value checks, compiled (secrets, argument rules, result labels).
    pub content: Arc<crate::gate::content::Content>,
}

/// How the proxy ended; the binary turns it into its own exit status.
#[derive(Debug)]
pub enum Outcome {
    /// The server exited; mcpguard mirrors its status.
    Child(ExitStatus),
    /// The host closed the connection, the server did not exit in time, and mcpguard's own
    /// SIGTERM or SIGKILL (the `--grace` escalation) ended it: an ordinary shutdown, so the
    /// binary exits with a fixed status instead of dying of the signal it sent itself.
    Stopped {
        /// The signal that ended the server (SIGTERM or SIGKILL).
        signal: Signal,
    },
    /// mcpguard could not start the server.
    SpawnFailed(i32),
    /// mcpguard hit an internal error (a panic) and ended the session: the server was killed and
    /// the host's pending requests were answered with an error.
    InternalError,
}

/// The exit status after an internal error (a panic): `EX_SOFTWARE` of sysexits(3).
pub const EXIT_INTERNAL_ERROR: u8 = 70;

#[derive(Debug)]
enum Event {
    HostEof,
    HostGone,
    ServerEof,
    ChildExited(ExitStatus),
    Signal(i32),
    /// A thread panicked. `unanswered` are the ids of the host's requests in the batch whose
    /// decision panicked (a supervised reader knows them; the panic hook does not).
    Panic {
        unanswered: Vec<crate::wire::message::Id>,
    },
}

/// Where the panic hook reports a panic of a thread that is not supervised (the lifecycle's
/// channel, set by [`run`]).
static PANIC_EVENTS: Mutex<Option<mpsc::Sender<Event>>> = Mutex::new(None);

thread_local! {
    /// Set on the reader threads, which catch their own panics and report them with the ids
    /// they know, so the hook does not report them a second time.
    static SUPERVISED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs the process-wide panic hook of the proxy: one error line on stderr (the thread, the
/// place, the message made safe for a terminal) instead of Rust's default report, and, for a
/// thread no reader supervises, an [`Event::Panic`] to the lifecycle, which ends the session.
/// The hook runs before the panicking thread unwinds, so it takes no lock of the session.
fn install_panic_hook(events: &mpsc::Sender<Event>) {
    *PANIC_EVENTS.lock().unwrap_or_else(|p| p.into_inner()) = Some(events.clone());
    std::panic::set_hook(Box::new(|info| {
        let thread = thread::current().name().unwrap_or("unnamed").to_string();
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let what = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "(no message)".into());
        let what = crate::wire::sanitize::clean(
            &what,
            crate::wire::sanitize::Clean {
                keep_newlines: false,
                max_bytes: 512,
            },
        );
        diag::emit(
            Level::Error,
            &format!("internal error: mcpguard panicked in its {thread} thread{place}: {what}. The session ends: the server is stopped, the host's pending requests are answered with an error, and mcpguard exits with status {EXIT_INTERNAL_ERROR}. This is a bug in mcpguard; please report it"),
        );
        if !SUPERVISED.with(std::cell::Cell::get) {
            if let Some(tx) = PANIC_EVENTS
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
            {
                let _ = tx.send(Event::Panic {
                    unanswered: Vec::new(),
                });
            }
        }
    }));
}

/// Runs the proxy until the server exits.
pub fn run(opts: Options) -> io::Result<Outcome> {
    let (events, rx) = mpsc::channel::<Event>();
    install_panic_hook(&events);

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

    let mut child = match child::spawn_with(&opts.command, opts.sandbox.as_ref(), child::Io::Piped)
    {
        Ok(c) => c,
        Err(e) => {
            diag::emit(Level::Error, &e.to_string());
            return Ok(Outcome::SpawnFailed(e.exit_code));
        }
    };
    // The spawn succeeded, so every step of the sandbox ran in the child: the record states what
    // was applied, not what was hoped for.
    if let Some(log) = &opts.audit {
        let detail = match &opts.sandbox {
            Some(s) => s.report.summary(),
            None => "sandbox off (sandbox.mode = \"off\"): the server runs unconfined".to_string(),
        };
        record_note(
            log,
            &AuditNote {
                detail: Some(detail),
                ..AuditNote::new(EventKind::SandboxApplied)
            },
        );
    }
    let pgid = child.id();
    let (Some(child_in), Some(child_out), Some(child_err)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(io::Error::other("the child's pipes were not created"));
    };

    // What may wait for the server's stdin before the host's reader waits too. A message
    // larger than this still passes (the sink admits any message into an empty queue), so the
    // bound is on how much is in flight, not on message size. 64 KiB, as much again as a pipe
    // holds, keeps a host that pipelines thousands of small requests from queueing all of them:
    // each queued request is also an entry of the id-correlation table, and every entry beyond
    // what the caches hold costs misses on its insert and its remove, where the pipe relay holds
    // no more than its pipes do. Measured with 200,000 pipelined pings (BENCHMARKS.md), 64 KiB
    // cost about a fifth less of mcpguard's CPU than 1 MiB, which cost less than 16 MiB.
    let budget = 64 << 10;
    let to_server = Sink::new(
        File::from(OwnedFd::from(child_in)),
        true,
        budget,
        "to-server",
    )?;
    // A duplicate of stdout, so that the sink owns its descriptor and never closes fd 1.
    let stdout = File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let to_host = Sink::new(stdout, false, budget, "to-host")?;
    let started = Instant::now();
    // The terminal channel of confirmations: bound before the session starts, so the session
    // knows whether it runs.
    let approvals = bind_approvals(&opts.policy);
    let desktop = start_desktop(&opts.policy);
    let mut out_of_band = Vec::new();
    if approvals.is_some() {
        out_of_band.push(Channel::Terminal);
    }
    if desktop.is_some() {
        out_of_band.push(Channel::Desktop);
    }
    // The session prefixes its own request ids with this; a withheld batch must tell them from
    // the host's (`Sinks::withhold`).
    let nonce = nonce();
    let core = Arc::new(Mutex::new(Session::new(
        Config {
            max_message_bytes: opts.max_message_bytes,
            capabilities: opts.capabilities.clone(),
            max_pages: opts.max_pages,
            max_calls_in_flight: opts.max_calls_in_flight,
            call_timeout_ms: u64::try_from(opts.call_timeout.as_millis()).unwrap_or(u64::MAX),
            redact_errors: opts.redact_errors,
            structured_only: opts.structured_only,
            audit: opts.audit.is_some(),
            policy: opts.policy.clone(),
            dry_run: opts.dry_run,
            secret: secret_key()?,
            out_of_band,
            instance: std::process::id().to_string(),
            // The snapshot's protocol version decides the era; without one the legacy
            // lifecycle is enforced.
            era: match &opts.mode {
                Mode::Pinned(pin) if pin.modern.is_some() => Era::Modern,
                _ => Era::Legacy,
            },
            ..Config::with_content(opts.mode.clone(), opts.content.clone())
        },
        &nonce,
    )));

    let withheld = Arc::new(Mutex::new(std::collections::HashSet::new()));
    let explain = opts
        .sandbox
        .as_ref()
        .map(|p| Arc::new((p.explain.clone(), opts.command.clone())));
    // The permission errors the server's stderr reports, read by the stderr relay: a failed call
    // whose own error text names no path (a Python tool's "Error executing tool X") is explained
    // from them.
    let watch = opts.sandbox.as_ref().map(|_| child::DenialWatch::default());
    let explained = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let sinks = |events: &mpsc::Sender<Event>| Sinks {
        host: to_host.clone(),
        server: to_server.clone(),
        events: events.clone(),
        audit: opts.audit.clone(),
        withheld: withheld.clone(),
        own_prefix: format!("mcpguard-{nonce}-"),
        explain: explain.clone(),
        watch: watch.clone(),
        explained: explained.clone(),
    };
    // The trusted path: every out-of-band approval is authenticated through polkit; the
    // socket and the desktop button only start it.
    let trusted = Approver {
        core: core.clone(),
        sinks: Arc::new(sinks(&events)),
        started,
        path: approvals::polkit::TrustedPath::new(),
    };
    // Kept until the proxy returns; dropping it removes the socket file.
    let _approvals = match approvals {
        Some(bound) => serve_approvals(bound, trusted.clone()),
        None => None,
    };
    let mut desktop = match desktop {
        Some((d, answers)) => {
            let trusted = trusted.clone();
            thread::Builder::new()
                .name("desktop-answers".into())
                .spawn(move || {
                    for (id, approve) in answers {
                        // A press of Approve starts the authentication; the desktop's polkit
                        // agent asks for the password. Deny needs no proof.
                        let said = if approve {
                            trusted.approve(&id, crate::policy::Scope::Once, Channel::Desktop)
                        } else {
                            trusted.deny(&id, Channel::Desktop)
                        };
                        match said {
                            Ok(m) => diag::emit(Level::Info, &format!("desktop: {m}")),
                            Err(e) => diag::emit(Level::Warn, &format!("desktop: {e}")),
                        }
                    }
                })?;
            Some(d)
        }
        None => None,
    };

    // Readers. The server reader counts what it reads, so the exit path can tell a reader
    // that is busy relaying a large last message from one that waits on a pipe held open.
    let server_progress = Arc::new(ReaderProgress::default());
    {
        let core = core.clone();
        let sinks = sinks(&events);
        let events = events.clone();
        let max = opts.max_message_bytes;
        // A duplicate of stdin, read only by this thread.
        let stdin = File::from(std::io::stdin().as_fd().try_clone_to_owned()?);
        thread::Builder::new()
            .name("from-host".into())
            .spawn(move || {
                let ended = read_loop(
                    stdin,
                    max,
                    |frames, out| {
                        let parsed: Vec<Parsed> = frames.iter().map(Parsed::new).collect();
                        let mut core = core_lock(&core);
                        // The time between a question and its answer is measured to the
                        // millisecond (a host that answers for the person is fast).
                        core.set_clock(elapsed_ms(started));
                        for frame in parsed {
                            #[cfg(debug_assertions)]
                            debug_panic::maybe("host", &frame);
                            core.from_host_parsed(frame, out);
                        }
                    },
                    &sinks,
                    Route::FromHost,
                );
                let _ = events.send(match ended {
                    Ended::Eof => Event::HostEof,
                    Ended::Panicked(unanswered) => Event::Panic { unanswered },
                });
            })?;
    }
    {
        let core = core.clone();
        let sinks = sinks(&events);
        let events = events.clone();
        let max = opts.max_message_bytes;
        let progress = server_progress.clone();
        thread::Builder::new()
            .name("from-server".into())
            .spawn(move || {
                let ended = read_loop(
                    Counting(child_out, progress),
                    max,
                    |frames, out| {
                        let parsed: Vec<Parsed> = frames.iter().map(Parsed::new).collect();
                        let mut core = core_lock(&core);
                        for frame in parsed {
                            #[cfg(debug_assertions)]
                            debug_panic::maybe("server", &frame);
                            core.from_server_parsed(frame, out);
                        }
                    },
                    &sinks,
                    Route::FromServer,
                );
                let _ = events.send(match ended {
                    Ended::Eof => Event::ServerEof,
                    Ended::Panicked(unanswered) => Event::Panic { unanswered },
                });
            })?;
    }
    let (stderr_done, stderr_finished) = mpsc::channel::<()>();
    let relay_watch = watch.clone();
    thread::Builder::new()
        .name("server-stderr".into())
        .spawn(move || {
            child::relay_stderr(child_err, relay_watch);
            let _ = stderr_done.send(());
        })?;
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
    // The exit path reports nothing further; it only needs a sender to build `Sinks`.
    let exit_events = events;

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
        // Wake at least twice a second so the core's clock advances (per-call timeouts); a
        // passed lifecycle deadline is `None`.
        let tick = Duration::from_millis(500);
        let wait = match next {
            Some(deadline) if !sent_kill => {
                deadline.saturating_duration_since(Instant::now()).min(tick)
            }
            _ => tick,
        };
        let ev = match rx.recv_timeout(wait) {
            Ok(ev) => Some(ev),
            Err(RecvTimeoutError::Disconnected) => {
                return Err(io::Error::other("event channel closed"))
            }
            Err(RecvTimeoutError::Timeout) => {
                let mut out = Vec::new();
                let authenticating = trusted.path.running();
                let ticked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let mut core = core_lock(&core);
                    core.tick(elapsed_ms(started), &mut out);
                    (desktop.is_some() || authenticating.is_some()).then(|| core.offers())
                }));
                let Ok(offers) = ticked else {
                    let sinks = sinks(&exit_events);
                    return Ok(end_after_panic(
                        &core,
                        &sinks,
                        &to_host,
                        &to_server,
                        pgid,
                        &rx,
                        Vec::new(),
                    ));
                };
                if let Some(offers) = offers {
                    // A question that ended (answered, denied, expired) withdraws its
                    // authentication, so the person is not asked for a password for nothing.
                    if let Some(id) = authenticating {
                        if !offers.iter().any(|o| o["id"] == id.as_str()) {
                            trusted.path.withdraw(&id);
                        }
                    }
                    if let Some(d) = desktop.as_mut() {
                        d.sync(&shown(&offers));
                    }
                }
                sinks(&exit_events).dispatch(&mut out, Route::FromHost);
                match next {
                    Some(deadline) if !sent_kill && Instant::now() >= deadline => None,
                    _ => continue,
                }
            }
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
            Some(Event::Panic { unanswered }) => {
                let sinks = sinks(&exit_events);
                return Ok(end_after_panic(
                    &core, &sinks, &to_host, &to_server, pgid, &rx, unanswered,
                ));
            }
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
    if let Some(log) = &opts.audit {
        record_note(
            log,
            &AuditNote {
                detail: Some(format!("the server {why}")),
                ..AuditNote::new(EventKind::ChildExit)
            },
        );
    }
    let mut out = Vec::new();
    core_lock(&core).server_closed(&why, &mut out);
    sinks(&exit_events).dispatch(&mut out, Route::FromServer);

    // Everything owed to the host was written by the threads that decided it. The server's last
    // stderr lines are still relayed (briefly bounded: a grandchild may hold the pipe).
    to_host.close();
    let _ = stderr_finished.recv_timeout(Duration::from_millis(500));
    diag::emit(Level::Debug, &format!("the server {why}"));
    let ended_by = std::os::unix::process::ExitStatusExt::signal(&status)
        .and_then(|s| Signal::try_from(s).ok())
        .filter(|s| (sent_term && *s == Signal::SIGTERM) || (sent_kill && *s == Signal::SIGKILL));
    if !status.success() && ended_by.is_none() {
        // The server failed: what the sandbox denied it is said at the default level.
        crate::process::child::name_held_denials();
    }
    // A sandboxed server that failed before it said anything most likely lacked a grant: say
    // what the sandbox may have denied, since the server's own words rarely point there.
    if let (Some(prepared), Some(watch)) = (&opts.sandbox, &watch) {
        if !status.success()
            && ended_by.is_none()
            && server_progress.bytes.load(Ordering::SeqCst) == 0
        {
            use crate::sandbox::explain::{explain, Ending};
            let ending = Ending::of(&status);
            let watch = watch.lock().unwrap_or_else(|p| p.into_inner());
            diag::emit(
                Level::Error,
                &format!(
                    "the server {why} before answering anything\n  {}",
                    explain(&prepared.explain, &ending, watch.denials(), &opts.command)
                ),
            );
        }
    }
    Ok(match ended_by {
        Some(signal) => Outcome::Stopped { signal },
        None => Outcome::Child(status),
    })
}

/// Ends the session after a panic. The session's state may be half-updated, so nothing more
/// is decided: the server is killed at once (its process group, so nothing it started acts
/// on), the session answers what it knows to be pending (as when a server goes away), the
/// requests of the batch that panicked get a JSON-RPC internal error unless that answer
/// covered them, and the host's stdout is closed. Each step that touches the session runs
/// inside `catch_unwind`, so a second panic only costs the answers it would have given.
fn end_after_panic(
    core: &Mutex<Session>,
    sinks: &Sinks,
    to_host: &Sink,
    to_server: &Sink,
    pgid: u32,
    rx: &mpsc::Receiver<Event>,
    mut unanswered: Vec<crate::wire::message::Id>,
) -> Outcome {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let _ = child::signal_group(pgid, Signal::SIGKILL);
    to_server.close();
    // A supervised reader's report may follow the hook's by a moment: take the ids it knows.
    while let Ok(ev) = rx.recv_timeout(Duration::from_millis(50)) {
        if let Event::Panic { unanswered: more } = ev {
            unanswered.extend(more);
        }
    }
    let mut out = Vec::new();
    let _ = catch_unwind(AssertUnwindSafe(|| {
        core_lock(core).server_closed(
            "was stopped because mcpguard hit an internal error",
            &mut out,
        );
    }));
    let answered: std::collections::HashSet<String> = out
        .iter()
        .filter_map(|o| match o {
            Out::Host(line) => crate::wire::message::parse(line)
                .ok()
                .and_then(|m| m.id.map(|id| id.to_json())),
            _ => None,
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    for id in unanswered {
        if answered.contains(&id.to_json()) || !seen.insert(id.to_json()) {
            continue;
        }
        out.push(Out::Host(Bytes::from(crate::wire::message::error_response(
            Some(&id),
            crate::wire::message::INTERNAL_ERROR,
            "mcpguard: an internal error (a bug in mcpguard) ended the session while it decided this request; the server was stopped. See mcpguard's stderr",
            None,
        ))));
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        sinks.dispatch(&mut out, Route::FromServer)
    }));
    to_host.close();
    diag::emit(
        Level::Error,
        &format!("mcpguard ended the session after an internal error: the server was killed and the host's pending requests were answered with an error; exiting with status {EXIT_INTERNAL_ERROR}"),
    );
    Outcome::InternalError
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

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Binds the approval socket when the policy offers confirmations in the terminal. A socket
/// that cannot be bound turns the channel off (said on stderr); writes are then refused as
/// before, never let through.
fn bind_approvals(policy: &crate::policy::Policy) -> Option<approvals::server::Bound> {
    let c = &policy.confirmation;
    if c.mode != crate::policy::ConfirmationMode::Elicit || !c.channels.contains(&Channel::Terminal)
    {
        return None;
    }
    match approvals::server::bind() {
        Ok(bound) => {
            diag::emit(
                Level::Debug,
                &format!(
                    "approvals: `mcpguard approvals` reaches this mcpguard at {}",
                    bound.path().display()
                ),
            );
            Some(bound)
        }
        Err(e) => {
            diag::emit(
                Level::Warn,
                &format!("the terminal confirmation channel is off: {e}"),
            );
            None
        }
    }
}

/// Starts the desktop channel when the policy lists it and a session bus is there to be
/// asked; where none is (a server machine, a host that strips the environment), it is off.
fn start_desktop(
    policy: &crate::policy::Policy,
) -> Option<(approvals::desktop::Desktop, mpsc::Receiver<(String, bool)>)> {
    let c = &policy.confirmation;
    if c.mode != crate::policy::ConfirmationMode::Elicit || !c.channels.contains(&Channel::Desktop)
    {
        return None;
    }
    let runtime_bus = std::env::var_os("XDG_RUNTIME_DIR")
        .map(|d| std::path::PathBuf::from(d).join("bus"))
        .unwrap_or_else(|| format!("/run/user/{}/bus", approvals::euid()).into());
    // Hosts often start servers without DBUS_SESSION_BUS_ADDRESS; the user's bus is then at
    // its standard place in the runtime directory.
    let address = match std::env::var_os("DBUS_SESSION_BUS_ADDRESS") {
        Some(_) => None,
        None if runtime_bus.exists() => Some(format!("unix:path={}", runtime_bus.display())),
        None => {
            diag::emit(
                Level::Debug,
                "the desktop confirmation channel is off: no session bus (DBUS_SESSION_BUS_ADDRESS is unset and there is no runtime bus socket)",
            );
            return None;
        }
    };
    match approvals::desktop::start(address) {
        Ok(d) => Some(d),
        Err(e) => {
            diag::emit(
                Level::Info,
                &format!("the desktop confirmation channel is off: {e}"),
            );
            None
        }
    }
}

/// The pending approvals as desktop notifications: the first line as the summary, the other
/// two as the body.
fn shown(offers: &[serde_json::Value]) -> Vec<approvals::desktop::Shown> {
    offers
        .iter()
        .map(|o| {
            let line = |i: usize| o["lines"][i].as_str().unwrap_or_default().to_string();
            approvals::desktop::Shown {
                id: o["id"].as_str().unwrap_or_default().to_string(),
                summary: line(0),
                body: format!("{}\n{}", line(1), line(2)),
                timeout_ms: i32::try_from(o["expiresInMs"].as_u64().unwrap_or(0))
                    .unwrap_or(i32::MAX),
            }
        })
        .collect()
}

/// Answers `mcpguard approvals` from the session: the list of offered approvals (each marked
/// when it is being authenticated), denials, and requests to approve, which only start the
/// trusted path (`Approver::approve`): no message on the socket approves anything.
fn serve_approvals(
    bound: approvals::server::Bound,
    trusted: Approver,
) -> Option<approvals::server::Listener> {
    let handler = move |req: &serde_json::Value| match req["op"].as_str() {
        Some("list") => {
            let mut offers = {
                let mut core = core_lock(&trusted.core);
                core.set_clock(elapsed_ms(trusted.started));
                core.offers()
            };
            let running = trusted.path.running();
            for o in &mut offers {
                o["authenticating"] =
                    serde_json::json!(running.as_deref().is_some_and(|id| o["id"] == id));
            }
            serde_json::json!({"ok": true, "pending": offers})
        }
        Some("answer") => {
            let (Some(id), Some(approve)) = (req["id"].as_str(), req["approve"].as_bool()) else {
                return serde_json::json!({"ok": false, "error": "refused the answer: it needs an \"id\" string and an \"approve\" boolean"});
            };
            let Some(scope) = req["scope"].as_str().map_or(
                Some(crate::policy::Scope::Once),
                crate::policy::Scope::parse,
            ) else {
                return serde_json::json!({"ok": false, "error": "refused the answer: \"scope\" must be \"once\", \"identical\" or \"tool\""});
            };
            if !approve {
                return match trusted.deny(id, Channel::Terminal) {
                    Ok(m) => serde_json::json!({"ok": true, "message": m}),
                    Err(e) => serde_json::json!({"ok": false, "error": e}),
                };
            }
            // Never "ok": a client that reads "ok" as "approved" must not be misled. The
            // person's authentication decides, and `status` tells how it went.
            match trusted.approve(id, scope, Channel::Terminal) {
                Ok(m) => serde_json::json!({"ok": false, "authenticating": true, "error": m}),
                Err(e) => serde_json::json!({"ok": false, "error": e}),
            }
        }
        Some("status") => {
            let Some(id) = req["id"].as_str() else {
                return serde_json::json!({"ok": false, "error": "refused the request: \"status\" needs an \"id\" string"});
            };
            let authenticating = trusted.path.running().as_deref() == Some(id);
            serde_json::json!({
                "ok": true,
                "authenticating": authenticating,
                "outcome": trusted.path.outcome(id),
            })
        }
        _ => {
            serde_json::json!({"ok": false, "error": "refused the request: \"op\" must be \"list\", \"answer\" or \"status\""})
        }
    };
    match bound.serve(handler) {
        Ok(l) => Some(l),
        Err(e) => {
            diag::emit(
                Level::Warn,
                &format!("the terminal confirmation channel is off: {e}"),
            );
            None
        }
    }
}

/// The out-of-band channels' way to the session: a denial is applied at once; an approval only
/// starts the trusted path (polkit), and the session hears of it when polkitd says the person
/// authenticated.
#[derive(Clone)]
struct Approver {
    core: Arc<Mutex<Session>>,
    sinks: Arc<Sinks>,
    started: Instant,
    path: approvals::polkit::TrustedPath,
}

impl Approver {
    /// Settles approval `id` in the session (`approve` only after polkit said yes) and executes
    /// what that sends.
    fn settle(
        &self,
        id: &str,
        approve: bool,
        scope: crate::policy::Scope,
        channel: Channel,
    ) -> Result<String, String> {
        let mut out = Vec::new();
        let said = {
            let mut core = core_lock(&self.core);
            core.set_clock(elapsed_ms(self.started));
            core.answer_offer(id, approve, scope, channel, &mut out)
        };
        self.sinks.dispatch(&mut out, Route::FromHost);
        said
    }

    /// Denies approval `id`, withdrawing its authentication if one runs.
    fn deny(&self, id: &str, channel: Channel) -> Result<String, String> {
        self.path.withdraw(id);
        let said = self.settle(id, false, crate::policy::Scope::Once, channel);
        if let Ok(m) = &said {
            self.path.record(id, m.clone());
        }
        said
    }

    /// Starts the person's authentication for approval `id`. Returns what the person is told
    /// now; the approval itself happens on the check's thread, when polkitd says yes.
    fn approve(
        &self,
        id: &str,
        scope: crate::policy::Scope,
        channel: Channel,
    ) -> Result<String, String> {
        let offered = {
            let mut core = core_lock(&self.core);
            core.set_clock(elapsed_ms(self.started));
            core.offers().iter().any(|o| o["id"] == id)
        };
        if !offered {
            return Err(format!(
                "approval {id} is not pending here: it was already answered, it expired, or its call ended"
            ));
        }
        let me = self.clone();
        let owned = id.to_string();
        self.path.begin(id, move |verdict| {
            let id = owned;
            let outcome = match verdict {
                approvals::polkit::Verdict::Authorized => {
                    match me.settle(&id, true, scope, channel) {
                        Ok(m) => format!("{m}; the person authenticated through polkit"),
                        Err(e) => e,
                    }
                }
                approvals::polkit::Verdict::Dismissed => {
                    let m = me
                        .settle(&id, false, crate::policy::Scope::Once, channel)
                        .unwrap_or_else(|e| e);
                    format!("not approved: the person dismissed the authentication; {m}")
                }
                approvals::polkit::Verdict::Withdrawn => {
                    "not approved: the question ended before the authentication did".to_string()
                }
                other => {
                    let why = other.why();
                    let remedy = match other {
                        approvals::polkit::Verdict::Unavailable(_) => {
                            format!(" {}", approvals::polkit::REMEDY)
                        }
                        _ => String::new(),
                    };
                    diag::emit(
                        Level::Warn,
                        &format!("approval {id} was not approved: {why}.{remedy}"),
                    );
                    format!(
                        "not approved: {why}; the call stays pending until it is answered or its time runs out.{remedy}"
                    )
                }
            };
            me.path.record(&id, outcome);
        })?;
        Ok(format!(
            "approval {id} waits for the person to authenticate (polkit action {}); only that approves it",
            approvals::polkit::ACTION
        ))
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

/// Reads `src` until end of file, decides every frame of each read in the core, and writes the
/// results as one batch per destination. The frames of one read are decided under one lock of
/// the core: taking it per frame made the two reader threads contend on every message, which
/// cost more than the decisions themselves when many small messages are pipelined. `decide`
/// parses the frames (`Parsed`) before it takes the lock, so the lock covers only the routing.
fn read_loop(
    mut src: impl Read,
    max: usize,
    mut decide: impl FnMut(&[crate::wire::frame::Frame], &mut Vec<Out>),
    sinks: &Sinks,
    route: Route,
) -> Ended {
    SUPERVISED.with(|s| s.set(true));
    // A panic while deciding a read ends the reader: what the batch decided so far is dropped
    // (the state it came from is not trustworthy), and the ids the host waits on in it are
    // handed to the lifecycle, which ends the session.
    let mut decide = |frames: &[crate::wire::frame::Frame], out: &mut Vec<Out>| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| decide(frames, out))).map_err(
            |_| {
                out.clear();
                owed_ids(frames, route, &sinks.own_prefix)
            },
        )
    };
    let mut decoder = LineDecoder::new(max);
    let mut buf = BytesMut::with_capacity(64 << 10);
    let mut chunk = vec![0u8; 64 << 10];
    let mut out = Vec::new();
    let mut frames = Vec::new();
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
            frames.push(frame);
        }
        if !frames.is_empty() {
            if let Err(unanswered) = decide(&frames, &mut out) {
                return Ended::Panicked(unanswered);
            }
            frames.clear();
        }
        sinks.dispatch(&mut out, route);
        // Grow the read size with the message being assembled, so a 64 MiB line takes a few
        // hundred reads, not a thousand.
        if buf.len() > chunk.len() && chunk.len() < (1 << 20) {
            chunk.resize(chunk.len() * 2, 0);
        }
    }
    while let Some(frame) = decoder.decode_eof(&mut buf) {
        frames.push(frame);
    }
    if !frames.is_empty() {
        if let Err(unanswered) = decide(&frames, &mut out) {
            return Ended::Panicked(unanswered);
        }
    }
    sinks.dispatch(&mut out, route);
    Ended::Eof
}

/// How a reader ended.
enum Ended {
    Eof,
    /// Deciding a read panicked; the ids of the host's requests that read may have left
    /// unanswered.
    Panicked(Vec<crate::wire::message::Id>),
}

/// The ids the host may wait on among `frames`: its requests (from the host), or the responses
/// the server sent to its requests (from the server; the two share the host's ids, while
/// mcpguard's own requests carry `own_prefix`).
fn owed_ids(
    frames: &[crate::wire::frame::Frame],
    route: Route,
    own_prefix: &str,
) -> Vec<crate::wire::message::Id> {
    use crate::wire::message::{self, Id, Kind};
    frames
        .iter()
        .filter_map(|f| match f {
            crate::wire::frame::Frame::Line(line) => message::parse(line).ok(),
            crate::wire::frame::Frame::TooLong { .. } => None,
        })
        .filter(|m| match route {
            Route::FromHost => m.kind == Kind::Request,
            Route::FromServer => matches!(m.kind, Kind::Response | Kind::ErrorResponse),
        })
        .filter_map(|m| m.id)
        .filter(|id| !matches!(id, Id::Str(s) if s.starts_with(own_prefix)))
        .collect()
}

/// A panic on cue, for the tests of [`end_after_panic`]: `MCPGUARD_DEBUG_PANIC=host:METHOD`
/// (or `server:METHOD`) panics while the session's lock is held, when a frame of that method
/// arrives from that side. Compiled only into debug builds: a release build has no such
/// variable, so no environment can make an installed mcpguard panic on purpose.
#[cfg(debug_assertions)]
mod debug_panic {
    use crate::gate::session::Parsed;
    use std::sync::OnceLock;

    pub(super) fn maybe(side: &str, frame: &Parsed<'_>) {
        static CUE: OnceLock<Option<String>> = OnceLock::new();
        let cue = CUE.get_or_init(|| std::env::var("MCPGUARD_DEBUG_PANIC").ok());
        let Some((want_side, method)) = cue.as_deref().and_then(|c| c.split_once(':')) else {
            return;
        };
        if let Parsed::Line { msg: Ok(m), .. } = frame {
            if want_side == side && m.method.as_deref() == Some(method) {
                panic!("MCPGUARD_DEBUG_PANIC: injected panic on {side} {method}");
            }
        }
    }
}

/// Both destinations, where to report that the host is gone, and the audit log.
struct Sinks {
    host: Arc<Sink>,
    server: Arc<Sink>,
    events: mpsc::Sender<Event>,
    audit: Option<Arc<AuditLog>>,
    /// Ids (as JSON) of host requests refused because their audit record failed.
    withheld: Arc<Mutex<std::collections::HashSet<String>>>,
    /// The prefix of mcpguard's own request ids (the session's `own_prefix`).
    own_prefix: String,
    /// The sandbox's grants and the server command, to explain a call that failed on a
    /// permission the sandbox may have denied (`None` when the server is not sandboxed).
    explain: Option<Arc<(crate::sandbox::explain::Context, Vec<std::ffi::OsString>)>>,
    /// The denials the server's stderr reported (with `explain`), and how many of them a failed
    /// call's explanation has already named.
    watch: Option<child::DenialWatch>,
    explained: Arc<std::sync::atomic::AtomicUsize>,
}

impl Sinks {
    /// Executes the core's decisions: diagnostics now, then one batch per destination. Traffic
    /// forwarded in the reader's own direction waits for room; replies to the sender do not.
    fn dispatch(&self, out: &mut Vec<Out>, route: Route) {
        let mut to_host = Vec::new();
        let mut to_server = Vec::new();
        let mut failed_calls = Vec::new();
        let mut audit_failed = false;
        for o in out.drain(..) {
            match o {
                Out::Host(b) => to_host.push(b),
                Out::Server(b) => to_server.push(b),
                Out::Diag(level, msg) => diag::emit(level, &msg),
                Out::Audit(note) => audit_failed |= !self.record(&note),
                Out::ToolError { tool, text } => failed_calls.push((tool, text)),
            }
        }
        if audit_failed {
            // Fail closed: a decision whose record could not be written does not take effect.
            (to_host, to_server) = self.withhold(to_host, to_server);
        } else if !to_host.is_empty() {
            to_host = self.drop_answered(to_host);
        }
        if self.host.send(to_host, route == Route::FromServer).is_err() {
            let _ = self.events.send(Event::HostGone);
        }
        // A failed server stdin means the server is exiting; its exit is reported separately.
        let _ = self.server.send(to_server, route == Route::FromHost);
        // Explained after the messages went on: the explanation may wait briefly for the
        // server's stderr, and the host's answer must not wait with it. The call failed, so
        // the denials the sandbox observer held are said now.
        if !failed_calls.is_empty() {
            crate::process::child::name_held_denials();
        }
        for (tool, text) in failed_calls {
            let text = self.with_stderr_denials(text);
            if let Some(why) = self
                .explain
                .as_ref()
                .and_then(|e| crate::sandbox::explain::explain_call(&e.0, &tool, &text, &e.1))
            {
                diag::emit(Level::Warn, &why);
            }
        }
    }

    /// A failed call's error text, followed by the permission errors the server's stderr reported
    /// since the last explanation: many servers answer a denied path with a generic error ("Error
    /// executing tool read_note") and print the `PermissionError` with its path only on stderr.
    /// The server writes its stderr before its answer, but mcpguard reads the two pipes on two
    /// threads, so a line may still be on its way: it is waited for, briefly (at most 200 ms,
    /// and only for a failed call of a sandboxed server whose text names no denial).
    fn with_stderr_denials(&self, text: String) -> String {
        use std::sync::atomic::Ordering;
        let (Some(_), Some(watch)) = (&self.explain, &self.watch) else {
            return text;
        };
        let names_one = text
            .lines()
            .any(|l| crate::sandbox::explain::denial(l).is_some_and(|d| d.path.is_some()));
        if names_one {
            return text;
        }
        let from = self.explained.load(Ordering::Acquire);
        let deadline = Instant::now() + Duration::from_millis(200);
        loop {
            let (lines, full): (Vec<String>, bool) = {
                let w = watch.lock().unwrap_or_else(|p| p.into_inner());
                let lines = w
                    .denials()
                    .iter()
                    .skip(from)
                    .map(|d| d.line.clone())
                    .collect();
                (lines, w.is_full())
            };
            if !lines.is_empty() {
                self.explained.fetch_add(lines.len(), Ordering::AcqRel);
                return format!("{text}\n{}", lines.join("\n"));
            }
            // A full watch records nothing new: there is nothing to wait for.
            if full || Instant::now() >= deadline {
                return text;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Records one note; false when it could not be written to every sink.
    fn record(&self, note: &AuditNote) -> bool {
        match &self.audit {
            Some(log) => record_note(log, note),
            None => true,
        }
    }

    /// Replaces the effects of a batch whose audit record failed: nothing goes to the server; a
    /// request the host sent is answered with an error naming the failure, and so is every
    /// response for the host (a result whose forwarding could not be recorded is not
    /// forwarded). The ids of the withheld requests are remembered, so that the gate's own later
    /// answer for them (a timeout) does not reach the host as a second response.
    fn withhold(&self, to_host: Vec<Bytes>, to_server: Vec<Bytes>) -> (Vec<Bytes>, Vec<Bytes>) {
        use crate::wire::message::{self, Kind};
        let why = "refused: mcpguard could not write the audit record of this decision, so it did not take effect (fail closed); see mcpguard's stderr, and fix the audit sink or change audit.sink in the policy";
        let mut replies = Vec::new();
        let mut withheld = self
            .withheld
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = to_server.len() + to_host.len();
        let lines = to_server
            .iter()
            .map(|l| (true, l))
            .chain(to_host.iter().map(|l| (false, l)));
        for (towards_server, line) in lines {
            let Ok(m) = message::parse(line) else {
                continue;
            };
            let own = matches!(&m.id, Some(message::Id::Str(s)) if s.starts_with(&self.own_prefix));
            let id = match (m.kind, &m.id) {
                // mcpguard's own request (a walk): nobody on the host side waits for it, and
                // the session answers its own waiters when the walk times out.
                (Kind::Request, Some(_)) if towards_server && own => continue,
                (Kind::Request, Some(id)) if towards_server => {
                    withheld.insert(id.to_json());
                    id
                }
                // The gate's later answer to a request already refused here: the host has its
                // one response.
                (Kind::Response | Kind::ErrorResponse, Some(id))
                    if !towards_server && withheld.remove(&id.to_json()) =>
                {
                    continue
                }
                (Kind::Response | Kind::ErrorResponse, Some(id)) if !towards_server => id,
                // Notifications, the host's answers to server requests and mcpguard's own
                // requests to the host are withheld without a reply: the waiting side times out,
                // which is closed.
                _ => continue,
            };
            let reply = serde_json::json!({"jsonrpc": "2.0", "id": id.to_json_value(), "error": {"code": crate::protocol::codes::AUDIT_FAILED, "message": why}});
            // Lines are handed to the sink without their terminator; it writes one per line.
            replies.push(Bytes::from(reply.to_string().into_bytes()));
        }
        diag::emit(
            Level::Error,
            &format!(
                "withheld {count} message(s) whose audit record could not be written (fail closed)"
            ),
        );
        (replies, Vec::new())
    }

    /// Drops responses for requests already answered by [`Sinks::withhold`].
    fn drop_answered(&self, to_host: Vec<Bytes>) -> Vec<Bytes> {
        let mut withheld = self
            .withheld
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if withheld.is_empty() {
            return to_host;
        }
        to_host
            .into_iter()
            .filter(|line| {
                let Ok(m) = crate::wire::message::parse(line) else {
                    return true;
                };
                let response = matches!(
                    m.kind,
                    crate::wire::message::Kind::Response | crate::wire::message::Kind::ErrorResponse
                );
                match (response, &m.id) {
                    (true, Some(id)) if withheld.remove(&id.to_json()) => {
                        diag::emit(Level::Info, "dropped the gate's later answer to a request already refused for a failed audit record");
                        false
                    }
                    _ => true,
                }
            })
            .collect()
    }
}

/// Writes one audit note; false when a sink failed. A failed write is reported on stderr every
/// time: the audit log is the evidence, so its loss must never be silent.
pub fn record_note(log: &AuditLog, note: &AuditNote) -> bool {
    let mut ev = match (note.kind, &note.detail) {
        // Raw server error text has a record field of its own (with a larger bound).
        (EventKind::ErrorTextRaw, Some(text)) => AuditEvent::error_text_raw(text.as_str()),
        (kind, _) => AuditEvent::new(kind),
    };
    if let Some(t) = &note.tool {
        ev = ev.tool(t.as_str());
    }
    if let Some(a) = &note.arguments {
        ev = ev.arguments(a);
    }
    if let Some(o) = note.outcome {
        ev = ev.outcome(o);
    }
    if let Some(c) = note.code {
        ev = ev.code(c);
    }
    if let (Some(d), false) = (&note.detail, note.kind == EventKind::ErrorTextRaw) {
        ev = ev.detail(d.as_str());
    }
    match log.record(ev) {
        Ok(()) => true,
        Err(e) => {
            diag::emit(
                Level::Error,
                &format!("writing the audit record to {} failed: {e}", log.describe()),
            );
            false
        }
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

/// The per-process key of the HMAC on mcpguard's own confirmation state, from the kernel's
/// random source. Without randomness mcpguard does not start: a guessable key would let a host
/// forge approvals.
fn secret_key() -> io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    random_fill(&mut key).map_err(|e| {
        io::Error::other(format!(
            "cannot read /dev/urandom for the approval key: {e}"
        ))
    })?;
    Ok(key)
}

/// Fills `buf` from the kernel's random source.
fn random_fill(buf: &mut [u8]) -> io::Result<()> {
    File::open("/dev/urandom").and_then(|mut f| f.read_exact(buf))
}

/// A per-process random nonce for mcpguard's own request ids.
fn nonce() -> String {
    let mut bytes = [0u8; 8];
    if random_fill(&mut bytes).is_err() {
        // Without randomness the nonce still separates id spaces by process and time.
        let t = Instant::now().elapsed().as_nanos() as u64 ^ u64::from(std::process::id());
        bytes = t.to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
