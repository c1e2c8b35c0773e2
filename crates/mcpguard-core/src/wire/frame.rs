//! Newline framing for the stdio transport.
//!
//! MCP over stdio is one JSON-RPC message per line. This decoder works on bytes, not on text, so
//! that a line of invalid UTF-8 or an over-long line becomes one bad *item* and the stream goes on
//! (tokio-util's `LinesCodec` ends the stream after its first error and can lose buffered lines).
//! It remembers how far it has already searched, so a 64 MiB line arriving in small reads is
//! scanned once, not once per read.
//!
//! Knows bytes and newlines only: nothing of JSON-RPC, the gate or where the bytes came from.

use bytes::{Bytes, BytesMut};

/// How many leading bytes of an over-long line are kept, so that the caller can still try to
/// read the request id and answer the sender with an error.
pub const TOO_LONG_HEAD: usize = 4096;

/// One item of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A complete line without its terminator (`\n` or `\r\n`). Never empty.
    Line(Bytes),
    /// A line longer than the limit. Its bytes were discarded as they arrived; `head` keeps the
    /// first [`TOO_LONG_HEAD`] bytes and `len` is the full length without the terminator.
    TooLong { len: usize, head: Bytes },
}

/// Incremental decoder; feed it a buffer that the caller appends reads to.
#[derive(Debug)]
pub struct LineDecoder {
    max: usize,
    /// Bytes of `buf` already searched for a newline in earlier calls.
    scanned: usize,
    /// Set while the rest of an over-long line is being thrown away.
    discarding: Option<Discard>,
}

#[derive(Debug)]
struct Discard {
    head: Bytes,
    len: usize,
    /// The last discarded byte was `\r` (it belongs to the terminator if `\n` follows).
    last_cr: bool,
}

impl LineDecoder {
    /// `max` is the largest accepted line in bytes, terminator excluded.
    pub fn new(max: usize) -> Self {
        LineDecoder {
            max,
            scanned: 0,
            discarding: None,
        }
    }

    /// Returns the next item if `buf` holds one, consuming its bytes. `None` means more input
    /// is needed; bytes of an over-long line are dropped from `buf` as soon as they are seen so
    /// memory stays bounded by the limit.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Option<Frame> {
        loop {
            if let Some(discard) = self.discarding.as_mut() {
                match memchr::memchr(b'\n', buf) {
                    Some(i) => {
                        let cr = if i > 0 {
                            buf[i - 1] == b'\r'
                        } else {
                            discard.last_cr
                        };
                        let _ = buf.split_to(i + 1);
                        let mut d = self.discarding.take()?;
                        // A `\r` before the newline is the terminator, not content, exactly as
                        // for lines that fit.
                        d.len = d.len + i - usize::from(cr);
                        return Some(Frame::TooLong {
                            len: d.len,
                            head: d.head,
                        });
                    }
                    None => {
                        if let Some(&last) = buf.last() {
                            discard.last_cr = last == b'\r';
                        }
                        discard.len += buf.len();
                        buf.clear();
                        return None;
                    }
                }
            }

            let start = self.scanned.min(buf.len());
            match memchr::memchr(b'\n', &buf[start..]) {
                Some(rel) => {
                    let end = start + rel;
                    self.scanned = 0;
                    let mut line = buf.split_to(end + 1);
                    line.truncate(end);
                    if line.last() == Some(&b'\r') {
                        line.truncate(end - 1);
                    }
                    if line.len() > self.max {
                        let head = Bytes::copy_from_slice(&line[..TOO_LONG_HEAD.min(line.len())]);
                        return Some(Frame::TooLong {
                            len: line.len(),
                            head,
                        });
                    }
                    if is_blank(&line) {
                        // Blank lines carry no message; skipping them is not a drop.
                        continue;
                    }
                    return Some(Frame::Line(line.freeze()));
                }
                None => {
                    // One byte of slack: a line of exactly `max` bytes may still be followed
                    // by `\r`.
                    if buf.len() > self.max + 1 {
                        let head = Bytes::copy_from_slice(&buf[..TOO_LONG_HEAD.min(buf.len())]);
                        self.discarding = Some(Discard {
                            head,
                            len: buf.len(),
                            last_cr: buf.last() == Some(&b'\r'),
                        });
                        buf.clear();
                        self.scanned = 0;
                        return None;
                    }
                    self.scanned = buf.len();
                    return None;
                }
            }
        }
    }

    /// Called once the source reached end of file: returns what is left as a final item (a
    /// last line without a terminator is still a message).
    pub fn decode_eof(&mut self, buf: &mut BytesMut) -> Option<Frame> {
        if let Some(frame) = self.decode(buf) {
            return Some(frame);
        }
        if let Some(d) = self.discarding.take() {
            let cr = match buf.last() {
                Some(&b) => b == b'\r',
                None => d.last_cr,
            };
            return Some(Frame::TooLong {
                len: d.len + buf.len() - usize::from(cr),
                head: d.head,
            });
        }
        self.scanned = 0;
        if buf.is_empty() {
            return None;
        }
        let mut line = buf.split();
        if line.last() == Some(&b'\r') {
            line.truncate(line.len() - 1);
        }
        if is_blank(&line) {
            return None;
        }
        if line.len() > self.max {
            let head = Bytes::copy_from_slice(&line[..TOO_LONG_HEAD.min(line.len())]);
            return Some(Frame::TooLong {
                len: line.len(),
                head,
            });
        }
        Some(Frame::Line(line.freeze()))
    }

    /// Whether the decoder is in the middle of discarding an over-long line.
    pub fn is_discarding(&self) -> bool {
        self.discarding.is_some()
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` one by one and returns every item, including the one at end of file.
    fn run(max: usize, chunks: &[&[u8]]) -> Vec<Frame> {
        let mut dec = LineDecoder::new(max);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        for c in chunks {
            buf.extend_from_slice(c);
            while let Some(f) = dec.decode(&mut buf) {
                out.push(f);
            }
        }
        while let Some(f) = dec.decode_eof(&mut buf) {
            out.push(f);
        }
        out
    }

    fn line(s: &str) -> Frame {
        Frame::Line(Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn splits_lines_across_reads() {
        let cases: &[(&[&[u8]], Vec<Frame>)] = &[
            (&[b"a\nb\n"], vec![line("a"), line("b")]),
            (&[b"a", b"b", b"\n"], vec![line("ab")]),
            (&[b"a\r\n", b"b\r", b"\n"], vec![line("a"), line("b")]),
            (&[b"\n\n \r\nx\n"], vec![line("x")]),
            (
                &[b"tail-without-newline"],
                vec![line("tail-without-newline")],
            ),
            (&[b"x\ny\r"], vec![line("x"), line("y")]),
        ];
        for (chunks, expected) in cases {
            assert_eq!(&run(64, chunks), expected, "chunks {chunks:?}");
        }
    }

    #[test]
    fn over_long_line_is_one_item_and_the_stream_goes_on() {
        let long = [b'x'; 100];
        let frames = run(10, &[b"ok\n", &long[..50], &long[50..], b"\nnext\n"]);
        assert_eq!(frames.len(), 3);
        assert_eq!(frames[0], line("ok"));
        match &frames[1] {
            Frame::TooLong { len, head } => {
                assert_eq!(*len, 100);
                assert_eq!(head.len(), 50.min(TOO_LONG_HEAD));
            }
            other => panic!("expected TooLong, got {other:?}"),
        }
        assert_eq!(frames[2], line("next"));
    }

    #[test]
    fn line_at_the_limit_is_accepted_one_over_is_not() {
        let at = vec![b'y'; 10];
        let over = vec![b'z'; 11];
        let mut input = at.clone();
        input.extend_from_slice(b"\r\n");
        input.extend_from_slice(&over);
        input.push(b'\n');
        let frames = run(10, &[&input]);
        assert_eq!(frames[0], Frame::Line(Bytes::from(at)));
        assert!(matches!(frames[1], Frame::TooLong { len: 11, .. }));
    }

    #[test]
    fn big_line_in_small_reads_is_not_rescanned() {
        // 8 MiB in 4 KiB reads: quadratic rescanning would take minutes, a linear scan is instant.
        let mut dec = LineDecoder::new(16 << 20);
        let mut buf = BytesMut::new();
        let chunk = vec![b'a'; 4096];
        for _ in 0..2048 {
            buf.extend_from_slice(&chunk);
            assert!(dec.decode(&mut buf).is_none());
            assert_eq!(dec.scanned, buf.len());
        }
        buf.extend_from_slice(b"\n");
        match dec.decode(&mut buf) {
            Some(Frame::Line(l)) => assert_eq!(l.len(), 8 << 20),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn over_long_length_does_not_depend_on_how_input_is_split() {
        let mut input = vec![b'q'; 40];
        input.extend_from_slice(b"\r\n");
        input.extend_from_slice(&[b'r'; 30]);
        input.push(b'\r');
        for split in 1..input.len() {
            let chunks: Vec<&[u8]> = input.chunks(split).collect();
            let frames = run(8, &chunks);
            let lens: Vec<usize> = frames
                .iter()
                .map(|f| match f {
                    Frame::TooLong { len, .. } => *len,
                    Frame::Line(l) => panic!("unexpected line {l:?}"),
                })
                .collect();
            assert_eq!(lens, vec![40, 30], "split {split}");
        }
    }

    #[test]
    fn over_long_unterminated_tail_is_reported_at_eof() {
        let frames = run(4, &[b"123456789"]);
        assert!(matches!(frames[..], [Frame::TooLong { len: 9, .. }]));
    }
}
