//! The system-log sinks: each audit record, already chained and hashed, sent to the systemd
//! journal through its native datagram protocol (structured fields `MCPGUARD_EVENT`,
//! `MCPGUARD_TOOL`, `MCPGUARD_CODE`, `MCPGUARD_HASH`, …) and to the local syslog socket as an
//! RFC 5424 message whose structured data carries the same fields.
//!
//! Each send is one datagram to a Unix socket: the call returns only when the kernel has queued
//! it for the daemon, or with the error that makes the decision fail closed. A record longer than
//! the socket takes (only likely with `audit.payload = "full"`) fails like any other write, and
//! the message says so.
//!
//! The message builders are pure functions of the record, unit-tested; sending is the only IO.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The journal's native socket.
pub const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// The local syslog socket.
pub const SYSLOG_SOCKET: &str = "/dev/log";

/// The RFC 5424 structured-data ID of mcpguard's fields. 32473 is the enterprise number IANA
/// reserves for documentation and examples (RFC 5612); mcpguard has no number of its own.
pub const SD_ID: &str = "mcpguard@32473";

/// Records of these kinds are written at warning severity (a refusal, a drift, a failure);
/// everything else is informational.
fn is_warning(event: &str) -> bool {
    event.contains("refused")
        || event.contains("denied")
        || event.contains("drift")
        || event.contains("invalid")
        || event.contains("fail")
        || event.contains("timeout")
        || event.contains("error")
}

/// Which system log one target writes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Journal,
    Syslog,
}

/// One system-log sink: its kind and its socket.
#[derive(Debug)]
pub struct Target {
    pub kind: Kind,
    pub socket: PathBuf,
    sock: UnixDatagram,
}

impl Target {
    /// An unbound datagram socket that sends to `socket`. Nothing is checked here beyond
    /// creating the socket: a daemon that is not running fails the first record, which blocks
    /// the first decision, and the proxy checks every sink with the `start` record before the
    /// server is spawned.
    pub fn new(kind: Kind, socket: &Path) -> io::Result<Target> {
        Ok(Target {
            kind,
            socket: socket.to_path_buf(),
            sock: UnixDatagram::unbound()?,
        })
    }

    /// Sends one record. `line` is the record as the file sink writes it (compact JSON).
    pub fn send(&self, record: &Map<String, Value>, line: &str) -> io::Result<()> {
        let message = match self.kind {
            Kind::Journal => journal_datagram(record, line),
            Kind::Syslog => syslog_message(record, line, &hostname(), std::process::id()),
        };
        let sent = self.sock.send_to(&message, &self.socket);
        match sent {
            Ok(n) if n == message.len() => Ok(()),
            Ok(n) => Err(io::Error::other(format!(
                "{}: only {n} of {} bytes were sent",
                self.describe(),
                message.len()
            ))),
            Err(e) if e.raw_os_error() == Some(nix::libc::EMSGSIZE) => Err(io::Error::new(
                e.kind(),
                format!(
                    "{}: the record ({} bytes) is longer than the socket accepts; with audit.payload = \"full\" large values cannot go to the system log (use \"digests\", or the file sink alone)",
                    self.describe(),
                    message.len()
                ),
            )),
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!(
                    "{}: {e} (is the daemon running? `audit.{}` names another socket)",
                    self.describe(),
                    match self.kind {
                        Kind::Journal => "journal_socket",
                        Kind::Syslog => "syslog_socket",
                    }
                ),
            )),
        }
    }

    /// How messages name this sink.
    pub fn describe(&self) -> String {
        match self.kind {
            Kind::Journal => format!("the journal sink ({})", self.socket.display()),
            Kind::Syslog => format!("the syslog sink ({})", self.socket.display()),
        }
    }
}

/// The host name for the syslog header, or RFC 5424's `-` when it is unknown or not printable.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty() && h.len() <= 255 && h.bytes().all(|b| b.is_ascii_graphic()))
        .unwrap_or_else(|| "-".to_string())
}

fn text(record: &Map<String, Value>, key: &str) -> Option<String> {
    match record.get(key)? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        v => Some(v.to_string()),
    }
}

/// The record's fields as (journal field name, value), in a fixed order. Argument and result
/// values never become fields of their own; they stay inside `MCPGUARD_RECORD` when the policy
/// writes them at all.
fn fields(record: &Map<String, Value>) -> Vec<(&'static str, String)> {
    const NAMES: [(&str, &str); 10] = [
        ("MCPGUARD_EVENT", "event"),
        ("MCPGUARD_SEQ", "seq"),
        ("MCPGUARD_SERVER", "server"),
        ("MCPGUARD_SNAPSHOT", "snapshot"),
        ("MCPGUARD_TOOL", "tool"),
        ("MCPGUARD_OUTCOME", "outcome"),
        ("MCPGUARD_CODE", "code"),
        ("MCPGUARD_ARGS_SHA256", "argsSha256"),
        ("MCPGUARD_PREV", "prev"),
        ("MCPGUARD_HASH", "hash"),
    ];
    NAMES
        .iter()
        .filter_map(|(field, key)| text(record, key).map(|v| (*field, v)))
        .collect()
}

/// A one-line summary for people reading the log: event, tool, outcome, code.
fn summary(record: &Map<String, Value>) -> String {
    let mut s = format!(
        "mcpguard {}",
        text(record, "event").unwrap_or_else(|| "?".into())
    );
    for (label, key) in [("tool", "tool"), ("outcome", "outcome"), ("code", "code")] {
        if let Some(v) = text(record, key) {
            s.push_str(&format!(" {label}={v}"));
        }
    }
    if let Some(server) = text(record, "server") {
        s.push_str(&format!(" server={server}"));
    }
    s
}

/// The journal's native protocol: `NAME=value\n` per field, or, for a value with a newline,
/// `NAME\n`, its length as 64-bit little-endian, the bytes and `\n`.
pub fn journal_datagram(record: &Map<String, Value>, line: &str) -> Vec<u8> {
    let event = text(record, "event").unwrap_or_default();
    let priority = if is_warning(&event) { "4" } else { "6" };
    let mut out = Vec::new();
    let mut field = |name: &str, value: &str| {
        if value.contains('\n') {
            out.extend_from_slice(name.as_bytes());
            out.push(b'\n');
            out.extend_from_slice(&(value.len() as u64).to_le_bytes());
            out.extend_from_slice(value.as_bytes());
            out.push(b'\n');
        } else {
            out.extend_from_slice(format!("{name}={value}\n").as_bytes());
        }
    };
    field("MESSAGE", &summary(record));
    field("PRIORITY", priority);
    field("SYSLOG_IDENTIFIER", "mcpguard");
    for (name, value) in fields(record) {
        field(name, &value);
    }
    field("MCPGUARD_RECORD", line.trim_end_matches('\n'));
    out
}

/// Escapes an RFC 5424 PARAM-VALUE: `"`, `\` and `]` take a backslash.
fn sd_escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        if matches!(c, '"' | '\\' | ']') {
            s.push('\\');
        }
        s.push(c);
    }
    s
}

/// An RFC 5424 message: `<PRI>1 TIMESTAMP HOSTNAME mcpguard PROCID MSGID [SD] MSG`, facility
/// authpriv (security messages, kept private by distributions' default rules), MSGID the event
/// code, the structured data the same fields as the journal's, and the record's JSON as MSG.
pub fn syslog_message(record: &Map<String, Value>, line: &str, host: &str, pid: u32) -> Vec<u8> {
    const AUTHPRIV: u8 = 10;
    let event = text(record, "event").unwrap_or_else(|| "-".into());
    let severity: u8 = if is_warning(&event) { 4 } else { 6 };
    let time = text(record, "time").unwrap_or_else(|| "-".into());
    // MSGID is at most 32 printable ASCII characters.
    let msgid: String = event
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(32)
        .collect();
    let mut sd = format!("[{SD_ID}");
    for (name, value) in fields(record) {
        let param = name.trim_start_matches("MCPGUARD_").to_ascii_lowercase();
        sd.push_str(&format!(" {param}=\"{}\"", sd_escape(&value)));
    }
    sd.push(']');
    format!(
        "<{}>1 {time} {host} mcpguard {pid} {} {sd} {}",
        AUTHPRIV * 8 + severity,
        if msgid.is_empty() { "-" } else { &msgid },
        line.trim_end_matches('\n')
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record() -> Map<String, Value> {
        json!({"seq": 2, "time": "2026-12-01T10:00:00.000001Z", "event": "call_refused", "server": "fs",
               "snapshot": null, "tool": "rm\"]x", "code": "policy_refused", "prev": "aa", "hash": "bb"})
        .as_object()
        .unwrap()
        .clone()
    }

    #[test]
    fn journal_fields_and_binary_values() {
        let mut r = record();
        r.insert("tool".into(), json!("two\nlines"));
        let d = journal_datagram(&r, "{\"x\":1}\n");
        let text = String::from_utf8_lossy(&d);
        assert!(
            text.starts_with("MESSAGE\n"),
            "a value with a newline is sent in the binary form: {text}"
        );
        let mut want = b"MCPGUARD_TOOL\n".to_vec();
        want.extend_from_slice(&9u64.to_le_bytes());
        want.extend_from_slice(b"two\nlines\n");
        assert!(d.windows(want.len()).any(|w| w == want.as_slice()));
        for f in [
            "PRIORITY=4\n",
            "MCPGUARD_EVENT=call_refused\n",
            "MCPGUARD_CODE=policy_refused\n",
            "MCPGUARD_HASH=bb\n",
            "MCPGUARD_RECORD={\"x\":1}\n",
        ] {
            assert!(text.contains(f), "{f}: {text}");
        }
        assert!(
            !text.contains("MCPGUARD_SNAPSHOT"),
            "null fields are left out"
        );
    }

    #[test]
    fn syslog_is_rfc5424_with_escaped_structured_data() {
        let m = syslog_message(&record(), "{}\n", "host1", 42);
        assert_eq!(
            String::from_utf8(m).unwrap(),
            "<84>1 2026-12-01T10:00:00.000001Z host1 mcpguard 42 call_refused [mcpguard@32473 event=\"call_refused\" seq=\"2\" server=\"fs\" tool=\"rm\\\"\\]x\" code=\"policy_refused\" prev=\"aa\" hash=\"bb\"] {}"
        );
        let mut r = record();
        r.insert("event".into(), json!("call_allowed"));
        assert!(String::from_utf8(syslog_message(&r, "{}", "h", 1))
            .unwrap()
            .starts_with("<86>1 "));
    }
}
