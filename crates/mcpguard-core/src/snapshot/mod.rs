//! The reviewed snapshot and the JSON it is made of: the manifest format (`manifest`), strict
//! parsing (`strict`), RFC 8785 canonical bytes and digests (`canonical`), the semantic diff
//! (`diff`, with the update triage `diff::triage`), the reviewer's view (`reviewview`), the
//! content-trust report (`trust`), the update of a snapshot from a fresh capture (`update`) and
//! signed reviews (`signature`).
//!
//! Pure: values in, values or text out (the one exception is `manifest`'s atomic file write and
//! load). It knows nothing of live connections, the gate's state, the policy, processes or the
//! command line; capturing a snapshot from a live server is `process::capture`.

pub mod canonical;
pub mod diff;
pub mod manifest;
pub mod reviewview;
pub mod signature;
pub mod strict;
pub mod trust;
pub mod update;
