//! The wire: bytes and text as they arrive from the peers and as they leave.
//!
//! Owns newline framing (`frame`), the lossless read-only view of one JSON-RPC line (`message`,
//! with its one-pass fast reader `envelope`), the table of requests in flight by id (`id_table`),
//! the writers towards one peer (`sink`), the sanitizing of untrusted text for display
//! (`sanitize`), the labelling of instruction-like passages in such text (`injection`) and the
//! finding of secret-shaped values in it (`secrets`). It
//! knows the JSON-RPC shapes and the protocol facts, and nothing of the gate, the snapshot, the
//! policy or processes: it never decides whether a message passes. In tests, `test_rng` is the
//! seeded generator of its differential tests.

pub mod envelope;
pub mod frame;
pub mod id_table;
pub mod injection;
pub mod message;
pub mod sanitize;
pub mod secrets;
pub mod sink;
#[cfg(test)]
mod test_rng;
