//! mcpguard-approvals: out-of-band confirmation (`approvals`): the per-user approval sockets
//! behind `mcpguard approvals`, the desktop notification channel and the polkit check that is
//! the only out-of-band way to approve.
//!
//! It knows nothing of sessions, policies or messages: the proxy (`process::proxy` in the
//! `mcpguard` binary) hands it functions and applies its answers, so it depends on no crate of
//! ours. It uses `unsafe` only for `libc` calls on its sockets (`SO_PEERCRED`, `getuid`).

pub mod approvals;
