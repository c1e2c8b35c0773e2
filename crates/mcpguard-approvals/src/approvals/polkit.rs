//! The trusted path of out-of-band approvals: polkit. An approval given outside the host's own
//! dialog counts only when polkitd says that a person authenticated for it.
//!
//! mcpguard asks polkitd (`org.freedesktop.PolicyKit1` on the **system** bus) whether the proxy
//! process itself is authorized for [`ACTION`], allowing user interaction. The action's shipped
//! defaults are `auth_self` (never `_keep`), so polkitd asks the session's authentication agent
//! (the desktop's dialog, or `pkttyagent` in the terminal that runs `mcpguard approvals`) for
//! the user's password; the password is checked by the setuid `polkit-agent-helper-1` through
//! PAM, and polkitd's answer comes back on mcpguard's own connection. A program of the same user
//! can start the question (the approval socket and the desktop button do just that), but
//! without the password it cannot complete it, and no socket message stands in for the answer.
//!
//! polkit refuses details from an unprivileged caller ("Only trusted callers (e.g. uid 0 or an
//! action owner) can use CheckAuthorization() and pass details", polkit 122): a same-user
//! program could otherwise word the dialog. So the dialog names the action only; the call it
//! approves is the one mcpguard showed where the person asked for it (the terminal prints the
//! question and the id before the password prompt), and one proxy runs one authentication at a
//! time, so a second request cannot slip under a prompt the person is answering.
//!
//! Each check runs on a thread of its own; its cancellation id lets the proxy withdraw the
//! authentication when the question ends elsewhere (answered, denied, expired). Only
//! `is_authorized = true` approves; every other outcome (no bus, no polkitd, the action not
//! installed, no agent, a wrong password, a dismissed dialog) is a reason the person is told.

// This module's `unsafe`: the caller's uid for the polkit subject (each block with its `// SAFETY:`).
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::thread;

use zbus::blocking::{Connection, Proxy};
use zbus::zvariant::Value;

/// The polkit action mcpguard asks about (`packaging/polkit/io.github.mcpguard.policy`).
pub const ACTION: &str = "io.github.mcpguard.approve-write";

/// Where the action file must be installed for polkitd to know the action.
pub const ACTION_FILE: &str = "/usr/share/polkit-1/actions/io.github.mcpguard.policy";

const SERVICE: &str = "org.freedesktop.PolicyKit1";
const PATH: &str = "/org/freedesktop/PolicyKit1/Authority";
const INTERFACE: &str = "org.freedesktop.PolicyKit1.Authority";

/// `CheckAuthorization`'s flag that lets polkitd ask the person through an agent.
const ALLOW_USER_INTERACTION: u32 = 1;

/// What to do when approvals cannot be authenticated, said with every failure.
pub const REMEDY: &str = "an approval given outside the host's own dialog needs polkit: install polkitd (with pkttyagent) and mcpguard's action file at /usr/share/polkit-1/actions/io.github.mcpguard.policy, run `mcpguard approvals approve ID` in a terminal (or press Approve on a desktop with an authentication agent) and type your password; or use a host that shows elicitation dialogs. `mcpguard approvals deny ID` works anywhere";

/// How an authentication ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// polkitd said `is_authorized = true`: the person authenticated.
    Authorized,
    /// The person dismissed or cancelled the dialog.
    Dismissed,
    /// polkitd answered, but not with an authorization (a wrong password, no agent).
    NotAuthorized(String),
    /// polkit could not be asked at all (no system bus, no polkitd, the action not installed).
    Unavailable(String),
    /// mcpguard withdrew the question (it ended in another channel).
    Withdrawn,
}

impl Verdict {
    /// The reason in words, for a refusal.
    pub fn why(&self) -> String {
        match self {
            Verdict::Authorized => "the person authenticated".into(),
            Verdict::Dismissed => "the authentication was dismissed".into(),
            Verdict::NotAuthorized(w) | Verdict::Unavailable(w) => w.clone(),
            Verdict::Withdrawn => "the question ended before the authentication did".into(),
        }
    }
}

struct Attempt {
    id: String,
    cancellation: String,
}

/// The proxy's trusted path: at most one authentication at a time, each on a thread of its own.
#[derive(Clone, Default)]
pub struct TrustedPath {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// One system bus connection for every check and its cancellation (polkitd accepts a
    /// cancellation only from the connection that asked).
    conn: Mutex<Option<Connection>>,
    running: Mutex<Option<Attempt>>,
    /// The last outcome of each approval id asked about, for `status` (bounded below).
    outcomes: Mutex<Vec<(String, String)>>,
    serial: std::sync::atomic::AtomicU64,
}

/// How many outcomes `status` remembers.
const OUTCOMES_KEPT: usize = 64;

impl TrustedPath {
    pub fn new() -> Self {
        Self::default()
    }

    /// The approval id being authenticated now, if any.
    pub fn running(&self) -> Option<String> {
        lock(&self.inner.running).as_ref().map(|a| a.id.clone())
    }

    /// What became of the last authentication for `id`, in words.
    pub fn outcome(&self, id: &str) -> Option<String> {
        lock(&self.inner.outcomes)
            .iter()
            .rev()
            .find(|(i, _)| i == id)
            .map(|(_, o)| o.clone())
    }

    /// Records what became of the authentication for `id` (the proxy words it after acting on
    /// the verdict).
    pub fn record(&self, id: &str, outcome: String) {
        let mut o = lock(&self.inner.outcomes);
        o.retain(|(i, _)| i != id);
        o.push((id.to_string(), outcome));
        let excess = o.len().saturating_sub(OUTCOMES_KEPT);
        o.drain(..excess);
    }

    /// Starts authenticating approval `id`; `done` gets the verdict on the check's thread. Refused
    /// while another authentication runs, so that one prompt stands for one call.
    pub fn begin(
        &self,
        id: &str,
        done: impl FnOnce(Verdict) + Send + 'static,
    ) -> Result<(), String> {
        let serial = self
            .inner
            .serial
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cancellation = format!("mcpguard-{}-{serial}", std::process::id());
        {
            let mut running = lock(&self.inner.running);
            if let Some(a) = running.as_ref() {
                return Err(if a.id == id {
                    format!("approval {id} is already waiting for the person to authenticate")
                } else {
                    format!(
                        "approval {} is being authenticated now; one authentication runs at a time, so that a password prompt stands for one call. Finish or cancel that one first",
                        a.id
                    )
                });
            }
            *running = Some(Attempt {
                id: id.to_string(),
                cancellation: cancellation.clone(),
            });
        }
        lock(&self.inner.outcomes).retain(|(i, _)| i != id);
        let inner = self.inner.clone();
        let spawned = thread::Builder::new().name("polkit".into()).spawn(move || {
            let verdict = check(&inner, &cancellation);
            let withdrawn = release(&inner, &cancellation);
            // A withdrawn question is never approved, whatever polkitd said after.
            done(if withdrawn {
                Verdict::Withdrawn
            } else {
                verdict
            });
        });
        if let Err(e) = spawned {
            *lock(&self.inner.running) = None;
            return Err(format!("the authentication cannot start: {e}"));
        }
        Ok(())
    }

    /// Withdraws the authentication of `id` when one runs (the question ended elsewhere): the
    /// agent's prompt is cancelled and the verdict is `Withdrawn`. The slot is freed at once,
    /// not when polkitd answers: a system bus that accepts the connection and then never answers
    /// would otherwise hold it forever, and every later approval would be refused as "being
    /// authenticated". Each question's timeout therefore bounds how long one check can block
    /// the next; the stuck thread itself ends when the bus answers or the process exits.
    pub fn withdraw(&self, id: &str) {
        let cancellation = {
            let mut running = lock(&self.inner.running);
            match running.as_ref() {
                Some(a) if a.id == id => {
                    let cancellation = a.cancellation.clone();
                    *running = None;
                    cancellation
                }
                _ => return,
            }
        };
        let conn = lock(&self.inner.conn).clone();
        if let Some(conn) = conn {
            // Cancelling is best effort and must not hold up the caller (the proxy's tick).
            let _ = thread::Builder::new()
                .name("polkit-cancel".into())
                .spawn(move || {
                    if let Ok(p) = Proxy::new(&conn, SERVICE, PATH, INTERFACE) {
                        let _: zbus::Result<()> =
                            p.call("CancelCheckAuthorization", &(cancellation.as_str(),));
                    }
                });
        }
    }
}

/// Frees the slot of the attempt with `cancellation` when its check ends; `true` when it was
/// withdrawn meanwhile. The slot is this attempt's only while `withdraw` has not freed it: a freed
/// slot may already hold the next attempt, which this verdict must not touch.
fn release(inner: &Inner, cancellation: &str) -> bool {
    let mut running = lock(&inner.running);
    match running.as_ref() {
        Some(a) if a.cancellation == cancellation => {
            *running = None;
            false
        }
        _ => true,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The system bus connection, made on first use (`DBUS_SYSTEM_BUS_ADDRESS`, else the standard
/// socket).
fn connection(inner: &Inner) -> Result<Connection, String> {
    let mut conn = lock(&inner.conn);
    if let Some(c) = conn.as_ref() {
        return Ok(c.clone());
    }
    let c = Connection::system()
        .map_err(|e| format!("polkit cannot be asked: the system bus cannot be reached ({e})"))?;
    *conn = Some(c.clone());
    Ok(c)
}

/// This process as polkit's subject: pid, start time (so a recycled pid is another subject) and
/// uid.
fn subject() -> Result<(&'static str, HashMap<&'static str, Value<'static>>), String> {
    let stat = std::fs::read_to_string("/proc/self/stat")
        .map_err(|e| format!("polkit cannot be asked: /proc/self/stat cannot be read ({e})"))?;
    // The fields after the command name (which may hold spaces and parentheses) start at the
    // last ')'; the start time is field 22 of the line, the 20th after the name.
    let start_time = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(19))
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or("polkit cannot be asked: this process's start time cannot be read")?;
    // SAFETY: getuid has no preconditions and cannot fail (POSIX).
    let uid = unsafe { libc::getuid() };
    let uid = i32::try_from(uid).map_err(|_| format!("polkit cannot be asked: uid {uid}"))?;
    Ok((
        "unix-process",
        HashMap::from([
            ("pid", Value::U32(std::process::id())),
            ("start-time", Value::U64(start_time)),
            ("uid", Value::I32(uid)),
        ]),
    ))
}

/// One `CheckAuthorization` of this process for [`ACTION`], with user interaction.
fn check(inner: &Inner, cancellation: &str) -> Verdict {
    let conn = match connection(inner) {
        Ok(c) => c,
        Err(e) => return Verdict::Unavailable(e),
    };
    let subject = match subject() {
        Ok(s) => s,
        Err(e) => return Verdict::Unavailable(e),
    };
    let proxy = match Proxy::new(&conn, SERVICE, PATH, INTERFACE) {
        Ok(p) => p,
        Err(e) => {
            return Verdict::Unavailable(format!(
                "polkit cannot be addressed on the system bus ({e})"
            ))
        }
    };
    // No details: polkit refuses them from an unprivileged caller (see the module's notes).
    let details: HashMap<&str, &str> = HashMap::new();
    let answer: zbus::Result<(bool, bool, HashMap<String, String>)> = proxy.call(
        "CheckAuthorization",
        &(
            subject,
            ACTION,
            details,
            ALLOW_USER_INTERACTION,
            cancellation,
        ),
    );
    match answer {
        Ok((true, _, _)) => Verdict::Authorized,
        Ok((false, _, d)) if d.get("polkit.dismissed").is_some_and(|v| v == "true") => {
            Verdict::Dismissed
        }
        Ok((false, challenge, _)) => Verdict::NotAuthorized(if challenge {
            "polkit found no authentication agent to ask the person (run `mcpguard approvals approve ID` in a terminal, which starts pkttyagent, or log in to a desktop session with a polkit agent)".into()
        } else {
            "the authentication failed (a wrong password, or polkit's rules refuse the action)"
                .into()
        }),
        Err(e) => Verdict::Unavailable(unavailable(&e)),
    }
}

/// A failed `CheckAuthorization` in words: which part is missing.
fn unavailable(e: &zbus::Error) -> String {
    let text = e.to_string();
    if text.contains("ServiceUnknown") || text.contains("was not provided by any .service") {
        format!("polkit cannot be asked: polkitd does not run on the system bus ({text})")
    } else if text.contains("not registered") {
        format!("polkit does not know the action {ACTION}: its action file is not installed at {ACTION_FILE} ({text})")
    } else if text.contains("Cancelled") {
        "the authentication was cancelled".into()
    } else {
        format!("polkit refused the check ({text})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_its_own_subject_with_its_start_time() {
        let (kind, d) = subject().unwrap();
        assert_eq!(kind, "unix-process");
        assert_eq!(d["pid"], Value::U32(std::process::id()));
        assert!(matches!(d["start-time"], Value::U64(t) if t > 0));
    }

    #[test]
    fn a_withdrawn_check_frees_its_slot_at_once_and_its_late_verdict_touches_no_other() {
        let t = TrustedPath::new();
        let attempt = |id: &str, c: &str| Attempt {
            id: id.into(),
            cancellation: c.into(),
        };
        *lock(&t.inner.running) = Some(attempt("1-1", "a"));
        // The question expired while polkitd (or a stuck bus) has not answered: the slot is free
        // for the next approval at once.
        t.withdraw("1-1");
        assert_eq!(t.running(), None);
        *lock(&t.inner.running) = Some(attempt("1-2", "b"));
        // The first check's late verdict is a withdrawal and leaves the second attempt alone.
        assert!(release(&t.inner, "a"));
        assert_eq!(t.running().as_deref(), Some("1-2"));
        assert!(!release(&t.inner, "b"));
        assert_eq!(t.running(), None);
    }

    #[test]
    fn one_authentication_at_a_time_and_outcomes_are_bounded() {
        let t = TrustedPath::new();
        *lock(&t.inner.running) = Some(Attempt {
            id: "1-1".into(),
            cancellation: "c".into(),
        });
        let e = t.begin("1-2", |_| {}).unwrap_err();
        assert!(e.contains("approval 1-1 is being authenticated now"), "{e}");
        for n in 0..100 {
            t.record(&format!("1-{n}"), "x".into());
        }
        assert_eq!(lock(&t.inner.outcomes).len(), OUTCOMES_KEPT);
        assert_eq!(t.outcome("1-99").as_deref(), Some("x"));
        assert_eq!(t.outcome("1-0"), None);
    }
}
