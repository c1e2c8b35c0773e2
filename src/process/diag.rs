//! Human diagnostics on stderr. stdout belongs to JSON-RPC alone, so nothing here ever touches it.
//!
//! Knows stderr and the `Level`; never stdout, and nothing of what the messages are about.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use crate::protocol::Level;

// Until `init_from_env` runs: warnings, the proxy's default.
static MAX_LEVEL: AtomicU8 = AtomicU8::new(Level::Warn as u8);
static JSON: AtomicBool = AtomicBool::new(false);

/// Diagnostics as one JSON object per line (`{"time", "level", "message"}`) instead of text,
/// for hosts and log collectors that parse stderr.
pub fn set_json(json: bool) {
    JSON.store(json, Ordering::Relaxed);
}

/// Whether diagnostics are JSON lines (`--log-format json`).
pub fn is_json() -> bool {
    JSON.load(Ordering::Relaxed)
}

/// Sets the most verbose level printed, from `MCPGUARD_LOG` (error, warn, info, debug), or
/// `default` when it is unset or unknown. The proxy's default is `Warn`: hosts record a server's
/// stderr, some of them as errors, so a healthy start and a host's normal behaviour must print
/// nothing there. The subcommands a person runs at a terminal default to `Info`.
pub fn init_from_env(default: Level) {
    let level = match std::env::var("MCPGUARD_LOG").as_deref() {
        Ok("error") => Level::Error,
        Ok("warn") => Level::Warn,
        Ok("info") => Level::Info,
        Ok("debug") | Ok("trace") => Level::Debug,
        _ => default,
    };
    MAX_LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Whether a message at `level` would be printed; lets callers skip formatting.
pub fn enabled(level: Level) -> bool {
    level as u8 <= MAX_LEVEL.load(Ordering::Relaxed)
}

thread_local! {
    // The lines this thread holds back while it runs inside `captured`.
    static CAPTURE: std::cell::RefCell<Option<Vec<(Level, String)>>> =
        const { std::cell::RefCell::new(None) };
}

/// Diagnostics held back by [`captured`], to be printed later with [`Captured::replay`], or
/// dropped when the work they describe turned out not to matter.
#[must_use = "held-back diagnostics are lost unless replayed"]
#[derive(Debug, Default)]
pub struct Captured(Vec<(Level, String)>);

impl Captured {
    /// Prints the held-back lines, in the order they were emitted.
    pub fn replay(self) {
        for (level, msg) in self.0 {
            emit(level, &msg);
        }
    }
}

/// Runs `f` with this thread's diagnostics held back instead of printed. The proxy prepares
/// the sandbox on a second thread while it verifies the snapshot: what that thread says is
/// printed after the snapshot's lines, in the order a sequential start prints them, and not at
/// all when the snapshot refuses the start. Only this thread's lines are held.
pub fn captured<T>(f: impl FnOnce() -> T) -> (T, Captured) {
    let outer = CAPTURE.with(|c| c.borrow_mut().replace(Vec::new()));
    let value = f();
    let lines = CAPTURE.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    (value, Captured(lines.unwrap_or_default()))
}

/// Prints one diagnostic line. Failures to write stderr are ignored: there is nowhere else to
/// report them, and they must not take the proxy down.
pub fn emit(level: Level, msg: &str) {
    if !enabled(level) {
        return;
    }
    let held = CAPTURE.with(|c| match c.borrow_mut().as_mut() {
        Some(lines) => {
            lines.push((level, msg.to_owned()));
            true
        }
        None => false,
    });
    if held {
        return;
    }
    let tag = match level {
        Level::Error => "error",
        Level::Warn => "warning",
        Level::Info => "info",
        Level::Debug => "debug",
    };
    let line = if JSON.load(Ordering::Relaxed) {
        serde_json::json!({
            "time": jiff::Timestamp::now().to_string(),
            "level": tag,
            "source": "mcpguard",
            "message": msg,
        })
        .to_string()
    } else {
        format!("mcpguard: {tag}: {msg}")
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// Relays one (already sanitized) stderr line of the server, as text or JSON.
pub fn server_line(text: &str) {
    let line = if JSON.load(Ordering::Relaxed) {
        serde_json::json!({
            "time": jiff::Timestamp::now().to_string(),
            "level": "info",
            "source": "server",
            "message": text,
        })
        .to_string()
    } else {
        format!("[server] {text}")
    };
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn captured_lines_are_held_in_order_and_only_on_their_thread() {
        let ((), outer) = captured(|| {
            emit(Level::Warn, "first");
            let ((), inner) = captured(|| emit(Level::Error, "inner"));
            emit(Level::Warn, "second");
            // Another thread's lines are not held by this thread's capture.
            let ((), other) = std::thread::scope(|s| {
                s.spawn(|| captured(|| emit(Level::Warn, "elsewhere")))
                    .join()
                    .expect("thread")
            });
            assert_eq!(other.0, vec![(Level::Warn, "elsewhere".to_string())]);
            // Replaying inside a capture hands the lines to the enclosing one.
            inner.replay();
        });
        let texts: Vec<&str> = outer.0.iter().map(|(_, m)| m.as_str()).collect();
        assert_eq!(texts, ["first", "second", "inner"]);
        // Below the printed level nothing is held: it would not have been printed either.
        let ((), quiet) = captured(|| emit(Level::Debug, "not printed"));
        assert!(quiet.0.is_empty() || enabled(Level::Debug));
        CAPTURE.with(|c| assert!(c.borrow().is_none(), "the capture ended"));
    }
}
