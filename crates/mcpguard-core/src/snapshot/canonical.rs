//! RFC 8785 (JSON Canonicalization Scheme) bytes and the SHA-256 digests computed over them.
//!
//! A pin must not depend on how a peer happened to format a document: member order, whitespace,
//! escape spelling and number spelling all vary between JSON writers. JCS fixes each of them:
//! members sorted by their UTF-16 code units, no insignificant whitespace, the shortest string
//! escapes, and numbers written as ECMAScript's `Number.prototype.toString` writes IEEE doubles.
//!
//! The writer is our own walk over the value; the two parts where a mistake is easy to make are
//! well-kept libraries: numbers are written by `ryu-js` (the ECMAScript number formatter of the
//! Boa engine, the one `serde_jcs` uses) and strings are escaped by `serde_json`, whose escapes
//! are exactly RFC 8785's. We stopped serializing through `serde_jcs` 0.2 because it re-parses
//! every member name as JSON to sort it and buffers every object: on a 1,016-tool snapshot it
//! took 7 to 11 ms, most of a start's snapshot load, where this walk takes well under one. It
//! stays the oracle of the tests: every official RFC 8785 vector, the ES6 number sequence and
//! a differential test over generated values compare the two byte for byte. Numbers follow
//! IEEE double semantics, so integers beyond 2^53 lose precision exactly as they would in a
//! browser: `9007199254740993` canonicalizes as `9007199254740992`.
//!
//! Depth: serializing is recursive. Values produced by `crate::snapshot::strict::parse_strict` are
//! at most
//! `MAX_DEPTH` levels deep, which is far from any stack limit.
//!
//! Pure; knows JSON values only, nothing of snapshots, the gate or IO.

#![forbid(unsafe_code)]

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Returns the RFC 8785 canonical UTF-8 bytes of `value`.
pub fn canonical_bytes(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    write_value(value, &mut out);
    out
}

fn write_value(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(item, out);
            }
            out.push(b']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            // Names are unique within an object, so an unstable sort gives one order.
            sorted.sort_unstable_by(|a, b| utf16_order(a.0, b.0));
            out.push(b'{');
            for (i, (name, member)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(name, out);
                out.push(b':');
                write_value(member, out);
            }
            out.push(b'}');
        }
    }
}

/// Compares member names by their UTF-16 code units (RFC 8785 section 3.2.3). Everything before
/// the first differing byte is the same in both names, so the order is decided by the two
/// characters that contain that byte (both start at the same offset): comparing their UTF-16
/// units is comparing the names' units, because the units before them are equal.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    let Some(at) = a.bytes().zip(b.bytes()).position(|(x, y)| x != y) else {
        // One name is a prefix of the other, or they are equal.
        return a.len().cmp(&b.len());
    };
    let (x, y) = (a.as_bytes()[at], b.as_bytes()[at]);
    if x < 0xF0 && y < 0xF0 {
        // Neither byte leads a four-byte character: both lead characters of the Basic
        // Multilingual Plane, whose bytes, code points and single UTF-16 units all sort alike,
        // or both continue one character whose lead byte they share (so both are as long, and
        // both in the BMP or both beyond it, where bytes and units sort alike too). Only a
        // supplementary character (a surrogate pair, 0xD800-0xDFFF) against U+E000-U+FFFF sorts
        // differently in UTF-16 than in UTF-8.
        return x.cmp(&y);
    }
    let start = (0..=at).rev().find(|&i| a.is_char_boundary(i)).unwrap_or(0);
    let (mut ua, mut ub) = ([0u16; 2], [0u16; 2]);
    units_at(a, start, &mut ua).cmp(units_at(b, start, &mut ub))
}

/// The UTF-16 units of the character of `s` that starts at byte `start`.
fn units_at<'b>(s: &str, start: usize, buf: &'b mut [u16; 2]) -> &'b [u16] {
    match s[start..].chars().next() {
        Some(c) => c.encode_utf16(buf),
        None => &buf[..0],
    }
}

/// Writes a number as ECMAScript's `Number.prototype.toString` writes the IEEE double it denotes.
fn write_number(n: &serde_json::Number, out: &mut Vec<u8>) {
    // Without `arbitrary_precision` (forbidden, see the test below) every Number is an i64, a u64
    // or a finite f64, and `as_f64` converts the first two as an ECMAScript engine would; a
    // serde_json Number never holds NaN or an infinity.
    let double = n.as_f64().unwrap_or(f64::NAN);
    debug_assert!(double.is_finite());
    let mut buffer = ryu_js::Buffer::new();
    out.extend_from_slice(buffer.format_finite(double).as_bytes());
}

/// Writes a string with RFC 8785's escapes: `"` and `\` escaped, the control characters as `\b`,
/// `\t`, `\n`, `\f`, `\r` or `\u00xx` (lowercase), everything else as it is. serde_json's
/// compact writer escapes exactly so (checked by the official vectors and the tests below).
fn write_string(s: &str, out: &mut Vec<u8>) {
    // Writing into a Vec cannot fail, and a str is always valid to serialize.
    let _ = serde_json::to_writer(&mut *out, s);
}

/// Returns the lowercase hexadecimal SHA-256 of `bytes` (64 characters).
pub fn sha256_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(2 * hash.len());
    for byte in hash {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

/// Returns the digest that pins `value`: lowercase hex SHA-256 over its RFC 8785 bytes.
pub fn digest(value: &Value) -> String {
    sha256_hex(&canonical_bytes(value))
}

/// Tells whether two values have the same RFC 8785 form, that is, whether they would pin to the
/// same digest. Note that this is IEEE equality for numbers: `1`, `1.0` and `1e0` are equal, and
/// so are integers beyond 2^53 that round to the same double.
pub fn canonical_eq(a: &Value, b: &Value) -> bool {
    canonical_bytes(a) == canonical_bytes(b)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::snapshot::strict::parse_strict;

    /// Parses `input` strictly and compares its canonical form with `expected`.
    fn check(input: &str, expected: &str) {
        let value = parse_strict(input.as_bytes())
            .unwrap_or_else(|err| panic!("input {input:?} must parse: {err}"));
        let bytes = canonical_bytes(&value);
        assert_eq!(
            String::from_utf8_lossy(&bytes),
            expected,
            "input: {input:?}"
        );
        check_idempotent(&bytes);
    }

    /// Canonical output must parse strictly and canonicalize to itself.
    fn check_idempotent(canonical: &[u8]) {
        let again = parse_strict(canonical).unwrap_or_else(|err| {
            panic!(
                "canonical output {:?} must parse: {err}",
                String::from_utf8_lossy(canonical)
            )
        });
        assert_eq!(canonical_bytes(&again), canonical, "not idempotent");
    }

    fn vectors_dir() -> PathBuf {
        // This crate is `crates/mcpguard-core` in the repository.
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/jcs-vectors")
    }

    fn read(path: &Path) -> Vec<u8> {
        std::fs::read(path).unwrap_or_else(|err| panic!("reading {}: {err}", path.display()))
    }

    /// Decodes an `outhex/` file: hex byte pairs separated by whitespace.
    fn decode_hex(text: &str) -> Vec<u8> {
        text.split_whitespace()
            .map(|pair| u8::from_str_radix(pair, 16).expect("outhex holds hex byte pairs"))
            .collect()
    }

    #[test]
    fn official_rfc8785_vectors() {
        let dir = vectors_dir();
        let mut names: Vec<_> = std::fs::read_dir(dir.join("input"))
            .expect("the vectors are in tests/data/jcs-vectors/input")
            .map(|entry| entry.expect("listing vectors").file_name())
            .collect();
        names.sort();
        // Guards against the test passing vacuously on an empty or half-copied directory.
        assert_eq!(
            names,
            [
                "arrays.json",
                "french.json",
                "structures.json",
                "unicode.json",
                "values.json",
                "weird.json"
            ]
        );
        for name in &names {
            let input = read(&dir.join("input").join(name));
            let expected = read(&dir.join("output").join(name));
            let hex_name = Path::new(name).with_extension("txt");
            let hex = String::from_utf8(read(&dir.join("outhex").join(hex_name)))
                .expect("outhex files are ASCII");
            assert_eq!(
                decode_hex(&hex),
                expected,
                "output/ and outhex/ disagree for {name:?}"
            );

            let value = parse_strict(&input)
                .unwrap_or_else(|err| panic!("vector {name:?} must parse strictly: {err}"));
            let canonical = canonical_bytes(&value);
            assert_eq!(
                String::from_utf8_lossy(&canonical),
                String::from_utf8_lossy(&expected),
                "vector {name:?}"
            );
            assert_eq!(canonical, expected, "vector {name:?} (bytes)");
            check_idempotent(&canonical);
        }
    }

    #[test]
    fn numbers_follow_ecmascript() {
        // Expected text follows ECMAScript Number::toString as RFC 8785 section 3.2.2.3 cites it:
        // shortest round-trip digits; plain notation for exponents from 1e-6 up to below 1e21,
        // exponential notation ("e+"/"e-") outside that range; "-0" prints as "0".
        let cases: &[(&str, &str)] = &[
            ("0", "0"),
            ("-0", "0"),
            ("-0.0", "0"),
            ("0.0e5", "0"),
            ("1", "1"),
            ("-1", "-1"),
            ("1.0", "1"),
            ("1E2", "100"),
            ("1e+2", "100"),
            ("100e-2", "1"),
            ("4.50", "4.5"),
            ("-1.5", "-1.5"),
            ("0.1", "0.1"),
            ("0.30000000000000004", "0.30000000000000004"),
            ("1234567.0", "1234567"),
            // Exponent boundaries: 1e21 is the first exponential, 1e-6 the last plain fraction.
            ("1e20", "100000000000000000000"),
            ("1e21", "1e+21"),
            ("-1e21", "-1e+21"),
            ("999999999999999999999", "1e+21"),
            ("123456789012345678901", "123456789012345680000"),
            ("1e-6", "0.000001"),
            ("1e-7", "1e-7"),
            ("-1e-7", "-1e-7"),
            ("0.00001234", "0.00001234"),
            ("12e-10", "1.2e-9"),
            ("123e-20", "1.23e-18"),
            ("1E30", "1e+30"),
            ("1.5e300", "1.5e+300"),
            ("0.000000000000000000000000001", "1e-27"),
            // Extremes of the double range.
            ("5e-324", "5e-324"),
            ("-5e-324", "-5e-324"),
            ("4.9e-324", "5e-324"),
            ("1e-400", "0"),
            ("2.2250738585072014e-308", "2.2250738585072014e-308"),
            ("2.2250738585072011e-308", "2.225073858507201e-308"),
            ("1.7976931348623157e308", "1.7976931348623157e+308"),
            ("-1.7976931348623157e308", "-1.7976931348623157e+308"),
            // Integers are doubles: exact up to 2^53, rounded (ties to even) beyond it.
            ("9007199254740991", "9007199254740991"),
            ("9007199254740992", "9007199254740992"),
            ("9007199254740993", "9007199254740992"),
            ("9007199254740995", "9007199254740996"),
            ("-9007199254740993", "-9007199254740992"),
            ("18446744073709551615", "18446744073709552000"),
            ("18446744073709551616", "18446744073709552000"),
            ("-9223372036854775808", "-9223372036854776000"),
            ("295147905179352825856", "295147905179352830000"),
            // RFC 8785 section 3.2.2.3 and the values.json vector.
            ("333333333.33333329", "333333333.3333333"),
            ("2e-3", "0.002"),
        ];
        for (input, expected) in cases {
            check(input, expected);
            // The same number inside a structure must come out the same way.
            check(
                &format!("{{\"n\":[{input}]}}"),
                &format!("{{\"n\":[{expected}]}}"),
            );
        }
    }

    #[test]
    fn rfc8785_appendix_b_ieee_table() {
        // RFC 8785 Appendix B, "Number Serialization Samples": IEEE 754 bits -> JSON text.
        let cases: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for &(bits, expected) in cases {
            let value = Value::from(f64::from_bits(bits));
            let text = String::from_utf8(canonical_bytes(&value)).expect("canonical JSON is UTF-8");
            assert_eq!(text, expected, "bits {bits:016x}");
            check(&text, expected);
        }
        // The table's NaN and Infinity rows are errors in RFC 8785; serde_json cannot even hold
        // them in a Number, so they can never reach the canonicalizer.
        for bits in [
            0x7fffffffffffffff_u64,
            0x7ff0000000000000,
            0xfff0000000000000,
        ] {
            assert!(serde_json::Number::from_f64(f64::from_bits(bits)).is_none());
        }
    }

    /// The first 168 doubles of the RFC 8785 ES6 number test file, as bit patterns. This is data
    /// from the generator `testdata/numgen.go` in cyberphone/json-canonicalization (Apache-2.0,
    /// Copyright 2006-2021 WebPKI.org), whose output is the file the RFC's Appendix B refers to.
    const ES6_STATIC: [u64; 168] = [
        0x0000000000000000,
        0x8000000000000000,
        0x0000000000000001,
        0x8000000000000001,
        0xc46696695dbd1cc3,
        0xc43211ede4974a35,
        0xc3fce97ca0f21056,
        0xc3c7213080c1a6ac,
        0xc39280f39a348556,
        0xc35d9b1f5d20d557,
        0xc327af4c4a80aaac,
        0xc2f2f2a36ecd5556,
        0xc2be51057e155558,
        0xc28840d131aaaaac,
        0xc253670dc1555557,
        0xc21f0b4935555557,
        0xc1e8d5d42aaaaaac,
        0xc1b3de4355555556,
        0xc17fca0555555556,
        0xc1496e6aaaaaaaab,
        0xc114585555555555,
        0xc0e046aaaaaaaaab,
        0xc0aa0aaaaaaaaaaa,
        0xc074d55555555555,
        0xc040aaaaaaaaaaab,
        0xc00aaaaaaaaaaaab,
        0xbfd5555555555555,
        0xbfa1111111111111,
        0xbf6b4e81b4e81b4f,
        0xbf35d867c3ece2a5,
        0xbf0179ec9cbd821e,
        0xbecbf647612f3696,
        0xbe965e9f80f29212,
        0xbe61e54c672874db,
        0xbe2ca213d840baf8,
        0xbdf6e80fe033c8c6,
        0xbdc2533fe68fd3d2,
        0xbd8d51ffd74c861c,
        0xbd5774ccac3d3817,
        0xbd22c3d6f030f9ac,
        0xbcee0624b3818f79,
        0xbcb804ea293472c7,
        0xbc833721ba905bd3,
        0xbc4ebe9c5db3c61e,
        0xbc18987d17c304e5,
        0xbbe3ad30dfcf371d,
        0xbbaf7b816618582f,
        0xbb792f9ab81379bf,
        0xbb442615600f9499,
        0xbb101e77800c76e1,
        0xbad9ca58cce0be35,
        0xbaa4a1e0a3e6fe90,
        0xba708180831f320d,
        0xba3a68cd9e985016,
        0x446696695dbd1cc3,
        0x443211ede4974a35,
        0x43fce97ca0f21056,
        0x43c7213080c1a6ac,
        0x439280f39a348556,
        0x435d9b1f5d20d557,
        0x4327af4c4a80aaac,
        0x42f2f2a36ecd5556,
        0x42be51057e155558,
        0x428840d131aaaaac,
        0x4253670dc1555557,
        0x421f0b4935555557,
        0x41e8d5d42aaaaaac,
        0x41b3de4355555556,
        0x417fca0555555556,
        0x41496e6aaaaaaaab,
        0x4114585555555555,
        0x40e046aaaaaaaaab,
        0x40aa0aaaaaaaaaaa,
        0x4074d55555555555,
        0x4040aaaaaaaaaaab,
        0x400aaaaaaaaaaaab,
        0x3fd5555555555555,
        0x3fa1111111111111,
        0x3f6b4e81b4e81b4f,
        0x3f35d867c3ece2a5,
        0x3f0179ec9cbd821e,
        0x3ecbf647612f3696,
        0x3e965e9f80f29212,
        0x3e61e54c672874db,
        0x3e2ca213d840baf8,
        0x3df6e80fe033c8c6,
        0x3dc2533fe68fd3d2,
        0x3d8d51ffd74c861c,
        0x3d5774ccac3d3817,
        0x3d22c3d6f030f9ac,
        0x3cee0624b3818f79,
        0x3cb804ea293472c7,
        0x3c833721ba905bd3,
        0x3c4ebe9c5db3c61e,
        0x3c18987d17c304e5,
        0x3be3ad30dfcf371d,
        0x3baf7b816618582f,
        0x3b792f9ab81379bf,
        0x3b442615600f9499,
        0x3b101e77800c76e1,
        0x3ad9ca58cce0be35,
        0x3aa4a1e0a3e6fe90,
        0x3a708180831f320d,
        0x3a3a68cd9e985016,
        0x4024000000000000,
        0x4014000000000000,
        0x3fe0000000000000,
        0x3fa999999999999a,
        0x3f747ae147ae147b,
        0x3f40624dd2f1a9fc,
        0x3f0a36e2eb1c432d,
        0x3ed4f8b588e368f1,
        0x3ea0c6f7a0b5ed8d,
        0x3e6ad7f29abcaf48,
        0x3e35798ee2308c3a,
        0x3ed539223589fa95,
        0x3ed4ff26cd5a7781,
        0x3ed4f95a762283ff,
        0x3ed4f8c60703520c,
        0x3ed4f8b72f19cd0d,
        0x3ed4f8b5b31c0c8d,
        0x3ed4f8b58d1c461a,
        0x3ed4f8b5894f7f0e,
        0x3ed4f8b588ee37f3,
        0x3ed4f8b588e47da4,
        0x3ed4f8b588e3849c,
        0x3ed4f8b588e36bb5,
        0x3ed4f8b588e36937,
        0x3ed4f8b588e368f8,
        0x3ed4f8b588e368f1,
        0x3ff0000000000000,
        0xbff0000000000000,
        0xbfeffffffffffffa,
        0xbfeffffffffffffb,
        0x3feffffffffffffa,
        0x3feffffffffffffb,
        0x3feffffffffffffc,
        0x3feffffffffffffe,
        0xbfefffffffffffff,
        0xbfefffffffffffff,
        0x3fefffffffffffff,
        0x3fefffffffffffff,
        0x3fd3333333333332,
        0x3fd3333333333333,
        0x3fd3333333333334,
        0x0010000000000000,
        0x000ffffffffffffd,
        0x000fffffffffffff,
        0x7fefffffffffffff,
        0xffefffffffffffff,
        0x4340000000000000,
        0xc340000000000000,
        0x4430000000000000,
        0x44b52d02c7e14af5,
        0x44b52d02c7e14af6,
        0x44b52d02c7e14af7,
        0x444b1ae4d6e2ef4e,
        0x444b1ae4d6e2ef4f,
        0x444b1ae4d6e2ef50,
        0x3eb0c6f7a0b5ed8c,
        0x3eb0c6f7a0b5ed8d,
        0x41b3de4355555553,
        0x41b3de4355555554,
        0x41b3de4355555555,
        0x41b3de4355555556,
        0x41b3de4355555557,
        0xbecbf647612f3696,
        0x43143ff3c1cb0959,
    ];

    /// Yields the doubles of the ES6 number test file in order: the fixed list, then 2000 values
    /// counting up from the smallest normal double, then doubles read 8 bytes at a time
    /// (little-endian) from a SHA-256 hash chain that starts from 32 zero bytes, skipping zero,
    /// NaN and the infinities.
    struct Es6Numbers {
        index: usize,
        block: [u8; 32],
        used: usize,
    }

    impl Es6Numbers {
        fn new() -> Self {
            // `used == 32` means the (all-zero) block is exhausted, so the first draw hashes it.
            Es6Numbers {
                index: 0,
                block: [0; 32],
                used: 32,
            }
        }
    }

    impl Iterator for Es6Numbers {
        type Item = f64;

        fn next(&mut self) -> Option<f64> {
            const SERIAL: usize = 2000;
            let index = self.index;
            self.index += 1;
            if let Some(&bits) = ES6_STATIC.get(index) {
                return Some(f64::from_bits(bits));
            }
            if let Some(step) = index.checked_sub(ES6_STATIC.len()).filter(|&i| i < SERIAL) {
                return Some(f64::from_bits(0x0010000000000000 + step as u64));
            }
            loop {
                if self.used == self.block.len() {
                    self.block = Sha256::digest(self.block).into();
                    self.used = 0;
                }
                let mut word = [0; 8];
                word.copy_from_slice(&self.block[self.used..self.used + 8]);
                self.used += 8;
                let f = f64::from_le_bytes(word);
                if f != 0.0 && f.is_finite() {
                    return Some(f);
                }
            }
        }
    }

    #[test]
    fn es6_number_test_file_prefix() {
        // The published SHA-256 of the first N lines of es6testfile100m.txt (see the vectors'
        // README.md). Each line is "<bits in lowercase hex without leading zeros>,<number>\n".
        let published: &[(usize, usize, &str)] = &[
            (
                1_000,
                37_967,
                "be18b62b6f69cdab33a7e0dae0d9cfa869fda80ddc712221570f9f40a5878687",
            ),
            (
                10_000,
                399_022,
                "b9f7a8e75ef22a835685a52ccba7f7d6bdc99e34b010992cbc5864cd12be6892",
            ),
            (
                100_000,
                4_031_728,
                "22776e6d4b49fa294a0d0f349268e5c28808fe7e0cb2bcbe28f63894e494d4c7",
            ),
        ];
        let mut file = Vec::new();
        let mut checkpoints = published.iter();
        let mut next_checkpoint = checkpoints.next();
        for (line, f) in (1..).zip(Es6Numbers::new()) {
            let Some(&(lines, size, hash)) = next_checkpoint else {
                break;
            };
            let number = canonical_bytes(&Value::from(f));
            file.extend_from_slice(format!("{:x},", f.to_bits()).as_bytes());
            file.extend_from_slice(&number);
            file.push(b'\n');

            // Reading the text back must give the same double (minus zero aside), which also
            // checks that the parser rounds decimal text correctly.
            let back = parse_strict(&number).ok().and_then(|v| v.as_f64());
            let want = if f == 0.0 { 0.0 } else { f };
            assert_eq!(back.map(f64::to_bits), Some(want.to_bits()), "line {line}");

            if line == lines {
                assert_eq!(file.len(), size, "size of the first {lines} lines");
                assert_eq!(sha256_hex(&file), hash, "hash of the first {lines} lines");
                next_checkpoint = checkpoints.next();
            }
        }
        assert!(next_checkpoint.is_none(), "every checkpoint was reached");
    }

    #[test]
    fn strings_use_minimal_escapes() {
        // RFC 8785 section 3.2.2.2: escape only '"', '\\' and U+0000..U+001F; use the two-letter
        // forms \b \t \n \f \r where they exist and lowercase \u00xx otherwise; everything else,
        // including DEL, U+2028 and non-BMP characters, is written as raw UTF-8.
        let cases: &[(&str, &str)] = &[
            (r#""\u0000""#, r#""\u0000""#),
            (r#""\u001F""#, r#""\u001f""#),
            (r#""\u000b""#, r#""\u000b""#),
            (r#""\u0008\u0009\u000a\u000c\u000d""#, r#""\b\t\n\f\r""#),
            (r#""\"\\\/""#, r#""\"\\/""#),
            (r#""\u007f""#, "\"\u{7f}\""),
            (r#""\u2028\u2029""#, "\"\u{2028}\u{2029}\""),
            (r#""\u00e9\u20AC""#, "\"é€\""),
            (r#""\ud83d\ude02""#, "\"\u{1f602}\""),
            (r#""</script>""#, r#""</script>""#),
            // No Unicode normalization: A + combining ring stays two code points.
            (r#""A\u030a""#, "\"A\u{30a}\""),
        ];
        for (input, expected) in cases {
            check(input, expected);
        }
    }

    #[test]
    fn members_sort_by_utf16_code_units() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"b":1,"a":2,"aa":3,"A":4,"":5}"#,
                r#"{"":5,"A":4,"a":2,"aa":3,"b":1}"#,
            ),
            (r#"{"10":1,"1":2,"2":3}"#, r#"{"1":2,"10":1,"2":3}"#),
            // U+10000 is the surrogate pair D800 DC00 in UTF-16 and therefore sorts before U+E000,
            // although its code point (and its UTF-8 encoding) is larger.
            (
                r#"{"\ue000":1,"\ud800\udc00":2}"#,
                "{\"\u{10000}\":2,\"\u{e000}\":1}",
            ),
            (
                r#"{"\uffff":1,"\ud83d\ude02":2,"\u00ff":3}"#,
                "{\"\u{ff}\":3,\"\u{1f602}\":2,\"\u{ffff}\":1}",
            ),
            // Nested objects sort independently; arrays keep their order.
            (
                r#"{"z":[{"y":1,"x":2},3,1],"a":{"d":{},"c":[]}}"#,
                r#"{"a":{"c":[],"d":{}},"z":[{"x":2,"y":1},3,1]}"#,
            ),
            (
                " [ true , false , null , { } , [ ] ] ",
                "[true,false,null,{},[]]",
            ),
        ];
        for (input, expected) in cases {
            check(input, expected);
        }
    }

    #[test]
    fn deepest_accepted_document_canonicalizes() {
        let n = crate::snapshot::strict::MAX_DEPTH;
        let arrays = format!("{}{}", "[ ".repeat(n), " ]".repeat(n));
        check(&arrays, &format!("{}{}", "[".repeat(n), "]".repeat(n)));
        let objects = format!("{}0{}", "{\"k\": ".repeat(n), " }".repeat(n));
        check(
            &objects,
            &format!("{}0{}", "{\"k\":".repeat(n), "}".repeat(n)),
        );
    }

    #[test]
    fn sha256_hex_matches_known_digests() {
        // FIPS 180-2 examples, plus a canonical document hashed with coreutils `sha256sum`.
        let cases: &[(&[u8], &str)] = &[
            (
                b"",
                "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            ),
            (
                b"abc",
                "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            ),
            (
                br#"{"a":2,"b":[1,"x"]}"#,
                "ff0dbc276228342a8b965009d571339643da1a81e0e29d3182d517184abe2834",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(sha256_hex(input), *expected);
        }
    }

    #[test]
    fn digest_ignores_formatting_but_not_content() {
        let pinned = "ff0dbc276228342a8b965009d571339643da1a81e0e29d3182d517184abe2834";
        let same = [
            r#"{"a":2,"b":[1,"x"]}"#,
            r#"{"b":[1,"x"],"a":2}"#,
            "{ \"b\" : [ 1.0 , \"\\u0078\" ] ,\n  \"a\" : 2e0 }",
            r#"{"a":20E-1,"b":[100e-2,"x"]}"#,
        ];
        for input in same {
            let value = parse_strict(input.as_bytes()).expect("test input parses");
            assert_eq!(digest(&value), pinned, "input: {input}");
        }
        let different = [
            r#"{"a":2,"b":["x",1]}"#,
            r#"{"a":2,"b":[1,"X"]}"#,
            r#"{"a":"2","b":[1,"x"]}"#,
            r#"{"a":2,"b":[1,"x"],"c":null}"#,
            r#"{"a":2.000001,"b":[1,"x"]}"#,
        ];
        for input in different {
            let value = parse_strict(input.as_bytes()).expect("test input parses");
            assert_ne!(digest(&value), pinned, "input: {input}");
        }
    }

    #[test]
    fn canonical_eq_compares_canonical_forms() {
        let cases: &[(&str, &str, bool)] = &[
            (r#"{"a":1,"b":2}"#, r#"{ "b":2, "a":1 }"#, true),
            ("1", "1.0", true),
            ("-0", "0", true),
            ("[1,2]", "[2,1]", false),
            (r#"{"a":1}"#, r#"{"a":"1"}"#, false),
            (r#""\u00e9""#, r#""e\u0301""#, false),
            // IEEE semantics: these two integers are the same double, so they pin identically.
            ("9007199254740993", "9007199254740992", true),
            ("9007199254740994", "9007199254740992", false),
        ];
        for (a, b, expected) in cases {
            let a_value = parse_strict(a.as_bytes()).expect("test input parses");
            let b_value = parse_strict(b.as_bytes()).expect("test input parses");
            assert_eq!(canonical_eq(&a_value, &b_value), *expected, "{a} vs {b}");
        }
    }

    #[test]
    fn serde_json_arbitrary_precision_is_off() {
        // With `arbitrary_precision` (which any crate in the build can switch on through feature
        // unification), numbers keep their source text, canonical numbers break and the strict
        // parser's visitor would see numbers as maps. Without it, "1E2" is read as the double 100.
        let value: Value = serde_json::from_str("1E2").expect("valid JSON");
        assert_eq!(value.to_string(), "100.0");
    }

    /// A small deterministic generator, so that a failure names its seed.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// Characters where a writer can go wrong: every escape class, the code units around the
    /// surrogate range (where UTF-16 order and code point order part), and multi-byte characters
    /// that share leading bytes.
    const CHARS: &[char] = &[
        'a',
        'b',
        'z',
        'A',
        '0',
        ' ',
        '"',
        '\\',
        '/',
        '\u{0}',
        '\u{8}',
        '\t',
        '\n',
        '\u{b}',
        '\u{c}',
        '\r',
        '\u{1f}',
        '\u{7f}',
        '\u{80}',
        '\u{e9}',
        '\u{ff}',
        '\u{100}',
        '\u{7ff}',
        '\u{800}',
        '\u{2028}',
        '\u{d7ff}',
        '\u{e000}',
        '\u{fb01}',
        '\u{fffd}',
        '\u{ffff}',
        '\u{10000}',
        '\u{1f600}',
        '\u{1f602}',
        '\u{10ffff}',
    ];

    fn string(rng: &mut Rng) -> String {
        (0..rng.below(5))
            .map(|_| CHARS[rng.below(CHARS.len())])
            .collect()
    }

    fn number(rng: &mut Rng) -> Value {
        match rng.below(6) {
            0 => Value::from(rng.next() as i64),
            1 => Value::from(rng.next()),
            2 => Value::from(rng.below(2000) as i64 - 1000),
            3 => Value::from((1u64 << 53) + rng.below(3) as u64),
            _ => {
                let f = f64::from_bits(rng.next());
                serde_json::Number::from_f64(f)
                    .map(Value::Number)
                    .unwrap_or(Value::from(0.5))
            }
        }
    }

    fn value(rng: &mut Rng, depth: usize) -> Value {
        let leaf = depth == 0 || rng.below(3) == 0;
        match rng.below(if leaf { 4 } else { 6 }) {
            0 => Value::Null,
            1 => Value::Bool(rng.below(2) == 0),
            2 => number(rng),
            3 => Value::String(string(rng)),
            4 => Value::Array((0..rng.below(4)).map(|_| value(rng, depth - 1)).collect()),
            _ => Value::Object(
                (0..rng.below(6))
                    .map(|_| (string(rng), value(rng, depth - 1)))
                    .collect(),
            ),
        }
    }

    #[test]
    fn agrees_with_serde_jcs_on_generated_values() {
        for seed in 1..=3000u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
            let v = value(&mut rng, 4);
            let oracle = serde_jcs::to_vec(&v).expect("serde_jcs writes every Value");
            assert_eq!(
                String::from_utf8_lossy(&canonical_bytes(&v)),
                String::from_utf8_lossy(&oracle),
                "seed {seed}: {v}"
            );
        }
    }

    #[test]
    fn member_names_sort_by_utf16_units_where_code_points_disagree() {
        // Every pair of the tricky characters, as whole names and after a shared prefix, in both
        // orders: the order must be the one of their UTF-16 units.
        for &x in CHARS {
            for &y in CHARS {
                for prefix in ["", "k", "\u{e9}"] {
                    let (a, b) = (format!("{prefix}{x}"), format!("{prefix}{y}"));
                    let expected = a.encode_utf16().cmp(b.encode_utf16());
                    assert_eq!(utf16_order(&a, &b), expected, "{a:?} vs {b:?}");
                    let longer = format!("{a}z");
                    assert_eq!(
                        utf16_order(&longer, &b),
                        longer.encode_utf16().cmp(b.encode_utf16()),
                        "{longer:?} vs {b:?}"
                    );
                }
            }
        }
    }
}
