//! Strict parsing and RFC 8785 canonicalization on arbitrary bytes.
//!
//! Two properties are checked. First, `parse_strict` returns `Ok` or `Err` for every input and never
//! panics or overflows the stack, whatever the nesting, encoding or size. Second, whenever it
//! accepts a document, the canonical bytes are themselves a strictly valid document whose
//! canonical form is identical: a digest computed over canonical bytes must not change when those
//! bytes are read back (for example by a reviewer's tool re-hashing a stored snapshot).

#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpguard_core::snapshot::canonical::canonical_bytes;
use mcpguard_core::snapshot::strict::parse_strict;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = parse_strict(data) else {
        return;
    };
    let first = canonical_bytes(&value);
    // Panicking is how a fuzz target reports a finding; both messages name the broken property.
    let reparsed = match parse_strict(&first) {
        Ok(reparsed) => reparsed,
        Err(err) => panic!(
            "canonical output is not strict JSON ({err}): {:?}",
            String::from_utf8_lossy(&first)
        ),
    };
    let second = canonical_bytes(&reparsed);
    assert!(
        first == second,
        "canonicalization is not idempotent:\n first: {:?}\nsecond: {:?}",
        String::from_utf8_lossy(&first),
        String::from_utf8_lossy(&second)
    );
});
