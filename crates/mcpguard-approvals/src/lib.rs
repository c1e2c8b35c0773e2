//! mcpguard-approvals: out-of-band confirmation (`approvals`): the per-user approval sockets
//! behind `mcpguard approvals`, the desktop notification channel and the polkit check that is
//! the only out-of-band way to approve.
//!
//! It knows nothing of sessions, policies or messages: the proxy (`process::proxy` in the
//! `mcpguard` binary) hands it functions and applies its answers, so it depends on no crate of
//! ours. Its `unsafe` is `libc` calls: the peer's credentials (`SO_PEERCRED`) and the caller's
//! uid, and in the polkit client's agent the child's start (`pre_exec`), its pipe, `poll` and
//! `kill`; the modules that hold them say so (`#![allow(unsafe_code)]`), the others are denied
//! it by the crate's `#![deny(unsafe_code)]`.

// Every module is denied `unsafe` but those that say `#![allow(unsafe_code)]` (or, for one
// function, `#[allow(unsafe_code)]`), so the compiler keeps the list of places that hold it.
#![deny(unsafe_code)]

pub mod approvals;
