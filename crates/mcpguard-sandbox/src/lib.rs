//! mcpguard-sandbox: the server's confinement (`sandbox`): resolve → plan → prepare → apply,
//! the runtime presets and shims, Landlock, seccomp, the namespaces and limits, the denial
//! observer and the explanations of what was denied.
//!
//! It holds every `unsafe` system call of the confinement (each block with its `// SAFETY:`
//! comment, lint-enforced; the modules that hold them say so with `#![allow(unsafe_code)]`,
//! the others are denied it by the crate's `#![deny(unsafe_code)]`), and the confinement only:
//! it reads the policy's `[sandbox]` types from
//! `mcpguard-core` and knows nothing of messages, sessions, approvals or the command line.

// Every module is denied `unsafe` but those that say `#![allow(unsafe_code)]` (or, for one
// function, `#[allow(unsafe_code)]`), so the compiler keeps the list of places that hold it.
#![deny(unsafe_code)]

pub mod sandbox;

/// The policy's `[sandbox]` types, under the path the sandbox's modules have always used
/// (`crate::policy::…`).
pub(crate) use mcpguard_core::policy;
