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

/// Prints one diagnostic line. Failures to write stderr are ignored: there is nowhere else to
/// report them, and they must not take the proxy down.
pub fn emit(level: Level, msg: &str) {
    if !enabled(level) {
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
