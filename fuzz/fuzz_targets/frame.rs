//! Fuzzes the framing decoder and the message view together: arbitrary bytes, split into reads
//! at arbitrary points, must never panic, must yield the same items however they are split, and
//! every line item must parse or be refused without panicking.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use mcpguard_core::wire::frame::{Frame, LineDecoder};

fn decode_all(input: &[u8], split: usize, max: usize) -> Vec<Frame> {
    let mut dec = LineDecoder::new(max);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let step = split.max(1);
    for chunk in input.chunks(step) {
        buf.extend_from_slice(chunk);
        while let Some(f) = dec.decode(&mut buf) {
            out.push(f);
        }
    }
    while let Some(f) = dec.decode_eof(&mut buf) {
        out.push(f);
    }
    out
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let split = data[0] as usize % 64 + 1;
    let max = 16 + data[1] as usize * 4;
    let input = &data[2..];
    let whole = decode_all(input, input.len().max(1), max);
    let pieces = decode_all(input, split, max);
    // Line items must not depend on how the input was split into reads. (Over-long items keep
    // only a head, whose size can depend on the split, so compare their lengths only.)
    assert_eq!(whole.len(), pieces.len());
    for (a, b) in whole.iter().zip(&pieces) {
        match (a, b) {
            (Frame::Line(x), Frame::Line(y)) => assert_eq!(x, y),
            (Frame::TooLong { len: x, .. }, Frame::TooLong { len: y, .. }) => assert_eq!(x, y),
            _ => panic!("item kinds differ: {a:?} vs {b:?}"),
        }
    }
    for f in &whole {
        if let Frame::Line(l) = f {
            assert!(l.len() <= max);
            let _ = mcpguard_core::wire::message::parse(l);
        }
    }
});
