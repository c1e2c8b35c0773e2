//! A stand-in for a desktop's notification service (`org.freedesktop.Notifications`), used by
//! the desktop-channel tests on a private `dbus-daemon --session`: it shows nothing, logs every
//! notification it is asked to show or close as a JSON line, and, after a short pause, "presses"
//! the button the test chose (`--press approve|deny|none`).
//!
//! Usage: `notification_service --press approve --log FILE` with `DBUS_SESSION_BUS_ADDRESS` set;
//! it prints `ready` on stdout once it owns the name.

use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

use zbus::blocking::{Connection, MessageIterator};
use zbus::message::Type;
use zbus::zvariant::OwnedValue;

const SERVICE: &str = "org.freedesktop.Notifications";
const PATH: &str = "/org/freedesktop/Notifications";

type NotifyArgs = (
    String,
    u32,
    String,
    String,
    String,
    Vec<String>,
    HashMap<String, OwnedValue>,
    i32,
);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let press = value("--press").unwrap_or_else(|| "none".into());
    let log_path = value("--log").ok_or("--log FILE is required")?;
    let log = std::sync::Arc::new(std::sync::Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path)?,
    ));
    let conn = Connection::session()?;
    conn.request_name(SERVICE)?;
    println!("ready");
    std::io::stdout().flush()?;
    let mut next_id = 0u32;
    for msg in MessageIterator::from(&conn) {
        let msg = msg?;
        if msg.message_type() != Type::MethodCall {
            continue;
        }
        let header = msg.header();
        let member = header.member().map(|m| m.to_string()).unwrap_or_default();
        let record = |v: serde_json::Value| {
            let mut f = log.lock().unwrap();
            let _ = writeln!(f, "{v}");
        };
        match member.as_str() {
            "GetCapabilities" => conn.reply(&header, &(vec!["actions", "body"],))?,
            "GetServerInformation" => {
                conn.reply(&header, &("test-notifications", "mcpguard", "1", "1.2"))?
            }
            "Notify" => {
                let (app, _, _, summary, body, actions, _, timeout): NotifyArgs =
                    msg.body().deserialize()?;
                next_id += 1;
                let id = next_id;
                conn.reply(&header, &(id,))?;
                record(
                    serde_json::json!({"notify": id, "app": app, "summary": summary,
                    "body": body, "actions": actions, "timeout": timeout}),
                );
                if press != "none" {
                    let conn = conn.clone();
                    let press = press.clone();
                    std::thread::spawn(move || {
                        // A person reads before pressing.
                        std::thread::sleep(Duration::from_millis(300));
                        let _ = conn.emit_signal(
                            None::<&str>,
                            PATH,
                            SERVICE,
                            "ActionInvoked",
                            &(id, press.as_str()),
                        );
                    });
                }
            }
            "CloseNotification" => {
                let (id,): (u32,) = msg.body().deserialize()?;
                conn.reply(&header, &())?;
                record(serde_json::json!({"closed": id}));
                conn.emit_signal(
                    None::<&str>,
                    PATH,
                    SERVICE,
                    "NotificationClosed",
                    &(id, 3u32),
                )?;
            }
            _ => {}
        }
    }
    Ok(())
}
