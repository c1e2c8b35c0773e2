//! The desktop channel: a freedesktop notification (`org.freedesktop.Notifications` on the
//! session bus) with Approve and Deny actions for each pending approval, withdrawn when the
//! approval is settled elsewhere or expires.
//!
//! It runs only where a session bus answers and its notification service can show actions
//! (`GetCapabilities` lists `actions`); otherwise `start` says why and the channel is off. A
//! dismissed notification is not an answer: the approval stays open for the other channels.
//! Nothing is written to the bus but the question's three lines (already sanitized by the gate).

use std::collections::{HashMap, HashSet};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use zbus::blocking::{Connection, Proxy};
use zbus::zvariant::Value;

const SERVICE: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";

/// The action keys of the notification's buttons.
const APPROVE: &str = "approve";
const DENY: &str = "deny";

/// One pending approval to show.
#[derive(Debug, Clone)]
pub struct Shown {
    pub id: String,
    pub summary: String,
    pub body: String,
    /// How long the notification stays (the approval's time left), in milliseconds.
    pub timeout_ms: i32,
}

enum Cmd {
    Show(Shown),
    Close(String),
}

/// A running desktop channel. `sync` shows what is new and withdraws what is gone; answers
/// arrive on the receiver `start` returned, as (approval id, approve).
pub struct Desktop {
    tx: mpsc::Sender<Cmd>,
    shown: HashSet<String>,
}

/// Connects to the session bus (at `address`, else where `DBUS_SESSION_BUS_ADDRESS` says) and
/// checks its notification service (bounded: a bus that does not answer within two seconds
/// counts as absent).
pub fn start(address: Option<String>) -> Result<(Desktop, mpsc::Receiver<(String, bool)>), String> {
    let (ready_tx, ready) = mpsc::channel();
    let (tx, commands) = mpsc::channel::<Cmd>();
    let (answers_tx, answers) = mpsc::channel();
    thread::Builder::new()
        .name("desktop".into())
        .spawn(move || {
            let setup = connect(address);
            let (conn, proxy, markup) = match setup {
                Ok(p) => {
                    let _ = ready_tx.send(Ok(()));
                    p
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            run(conn, proxy, markup, commands, answers_tx);
        })
        .map_err(|e| e.to_string())?;
    match ready.recv_timeout(Duration::from_secs(2)) {
        Ok(Ok(())) => Ok((
            Desktop {
                tx,
                shown: HashSet::new(),
            },
            answers,
        )),
        Ok(Err(e)) => Err(e),
        Err(_) => Err("the session bus did not answer within 2 s".to_string()),
    }
}

fn connect(address: Option<String>) -> Result<(Connection, Proxy<'static>, bool), String> {
    let conn = match address {
        Some(a) => zbus::blocking::connection::Builder::address(a.as_str()).and_then(|b| b.build()),
        None => Connection::session(),
    }
    .map_err(|e| format!("no session bus could be reached ({e})"))?;
    let proxy = Proxy::new(&conn, SERVICE, PATH, SERVICE)
        .map_err(|e| format!("the notification service cannot be addressed ({e})"))?;
    let caps: Vec<String> = proxy
        .call("GetCapabilities", &())
        .map_err(|e| format!("no notification service answers on the session bus ({e})"))?;
    if !caps.iter().any(|c| c == "actions") {
        return Err(
            "the desktop's notification service cannot show Approve and Deny buttons (no \"actions\" capability)"
                .to_string(),
        );
    }
    Ok((conn, proxy, caps.iter().any(|c| c == "body-markup")))
}

/// Text for a service that reads markup in bodies: `&`, `<` and `>` as entities, so an
/// argument value cannot style, hide or link anything.
fn escaped(text: &str, markup: bool) -> String {
    if !markup {
        return text.to_string();
    }
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Shows and closes notifications as told, and turns button presses into answers.
fn run(
    conn: Connection,
    proxy: Proxy<'static>,
    markup: bool,
    commands: mpsc::Receiver<Cmd>,
    answers: mpsc::Sender<(String, bool)>,
) {
    // Notification id → approval id, shared with the signal reader.
    let ids: Arc<Mutex<HashMap<u32, String>>> = Arc::default();
    let Ok(actions) = proxy.receive_signal("ActionInvoked") else {
        return;
    };
    {
        let ids = ids.clone();
        let _ = thread::Builder::new()
            .name("desktop-actions".into())
            .spawn(move || {
                for msg in actions {
                    let Ok((nid, key)) = msg.body().deserialize::<(u32, String)>() else {
                        continue;
                    };
                    let id = ids.lock().unwrap_or_else(|p| p.into_inner()).remove(&nid);
                    let verdict = match key.as_str() {
                        APPROVE => Some(true),
                        DENY => Some(false),
                        _ => None,
                    };
                    if let (Some(id), Some(approve)) = (id, verdict) {
                        if answers.send((id, approve)).is_err() {
                            break;
                        }
                    }
                }
            });
    }
    let _conn = conn;
    for cmd in commands {
        match cmd {
            Cmd::Show(s) => {
                let hints: HashMap<&str, Value> =
                    HashMap::from([("urgency", Value::U8(2)), ("resident", Value::Bool(true))]);
                let shown: zbus::Result<u32> = proxy.call(
                    "Notify",
                    &(
                        "mcpguard",
                        0u32,
                        "dialog-question",
                        s.summary.as_str(),
                        escaped(&s.body, markup).as_str(),
                        vec![APPROVE, "Approve", DENY, "Deny"],
                        hints,
                        s.timeout_ms,
                    ),
                );
                if let Ok(nid) = shown {
                    ids.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(nid, s.id);
                }
            }
            Cmd::Close(id) => {
                let nid = {
                    let mut ids = ids.lock().unwrap_or_else(|p| p.into_inner());
                    let nid = ids.iter().find(|(_, a)| **a == id).map(|(n, _)| *n);
                    if let Some(n) = nid {
                        ids.remove(&n);
                    }
                    nid
                };
                if let Some(nid) = nid {
                    let _ = proxy.call_noreply("CloseNotification", &(nid,));
                }
            }
        }
    }
}

impl Desktop {
    /// Brings the desktop in line with the pending approvals: new ones are shown, those no
    /// longer pending are withdrawn.
    pub fn sync(&mut self, pending: &[Shown]) {
        let now: HashSet<&str> = pending.iter().map(|s| s.id.as_str()).collect();
        for s in pending {
            if self.shown.insert(s.id.clone()) {
                let _ = self.tx.send(Cmd::Show(s.clone()));
            }
        }
        let gone: Vec<String> = self
            .shown
            .iter()
            .filter(|id| !now.contains(id.as_str()))
            .cloned()
            .collect();
        for id in gone {
            self.shown.remove(&id);
            let _ = self.tx.send(Cmd::Close(id));
        }
    }
}
