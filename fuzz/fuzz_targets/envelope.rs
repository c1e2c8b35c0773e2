//! Fuzzes the one-pass envelope reader against the serde_json path it is the fast path of: for
//! every input, `wire::message::parse` (the reader first, serde_json for what it declines) must
//! give exactly what `parse_with_serde` gives: the same acceptance, the same kind, id, method,
//! raw params/result/error text and unknown member names, or the same refusal. Run with
//! `cargo fuzz run envelope` (nightly); `tests/integration/envelope.rs` runs the same comparison
//! over generated and captured lines on the stable toolchain.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let view = |r: &Result<
        mcpguard_core::wire::message::Message<'_>,
        mcpguard_core::wire::message::Invalid,
    >| match r {
        Ok(m) => format!("{m:?}"),
        Err(e) => format!("{e:?}"),
    };
    let ours = mcpguard_core::wire::message::parse(data);
    let oracle = mcpguard_core::wire::message::parse_with_serde(data);
    assert_eq!(view(&ours), view(&oracle));
});
