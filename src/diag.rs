//! Human diagnostics on stderr. stdout belongs to JSON-RPC alone, so nothing here ever touches it.

use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

use crate::session::Level;

static MAX_LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

/// Sets the most verbose level printed, from `MCPGUARD_LOG` (error, warn, info, debug).
pub fn init_from_env() {
    let level = match std::env::var("MCPGUARD_LOG").as_deref() {
        Ok("error") => Level::Error,
        Ok("warn") => Level::Warn,
        Ok("debug") | Ok("trace") => Level::Debug,
        _ => Level::Info,
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
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "mcpguard: {tag}: {msg}");
}
