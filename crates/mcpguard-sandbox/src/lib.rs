//! mcpguard-sandbox: the server's confinement (`sandbox`): resolve → plan → prepare → apply,
//! the runtime presets and shims, Landlock, seccomp, the namespaces and limits, the denial
//! observer and the explanations of what was denied.
//!
//! It holds every `unsafe` system call of the confinement (each block with its `// SAFETY:`
//! comment, lint-enforced), and nothing else: it reads the policy's `[sandbox]` types from
//! `mcpguard-core` and knows nothing of messages, sessions, approvals or the command line.

pub mod sandbox;

/// The policy's `[sandbox]` types, under the path the sandbox's modules have always used
/// (`crate::policy::…`).
pub(crate) use mcpguard_core::policy;
