//! The gate: the IO-free decision core and what it enforces.
//!
//! `session` is the state machine of one proxied connection (frames in, actions out), split by
//! concern; `pin` is the reviewed snapshot made ready for the message path (and the capability
//! filter, the refusal contract and the live catalogue walk); `modern` holds the 2026-07-28 era's
//! decisions as pure functions; `schema` validates arguments and structured results.
//!
//! Pure: it performs no IO, reads no clock and spawns nothing (the one exception is
//! `pin::load_pin` reading the snapshot file before anything starts). It never imports
//! `process`, `sandbox` or `cli`, and reaches `audit` only for its event vocabulary.

pub mod capabilities;
pub mod catalogue;
pub mod content;
pub mod modern;
pub mod pin;
pub mod refusal;
pub mod rules;
pub mod schema;
pub mod session;
