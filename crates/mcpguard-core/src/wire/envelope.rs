//! The one-pass envelope reader: the fast path of `message::parse`.
//!
//! One scan over a line validates it as JSON and records what the gate reads from the envelope
//! (the spans of `jsonrpc`, `id`, `method`, `params`, `result`, `error` and the names of other
//! top-level members), building no tree and allocating nothing for a message without unknown
//! members. Nesting depth is counted during the same scan.
//!
//! The reader only ever *accepts*: whenever it meets anything it is not sure to judge exactly as
//! the serde_json path does (any syntax error, an escape in a top-level name or in `jsonrpc` or
//! `method`, a repeated top-level member, nesting past the limit, a line that does not start with
//! an object), it answers `None` and `message::parse` runs the serde_json path, which then
//! produces the refusal with its usual error text. So the refusals are the serde_json path's by
//! construction, and the one thing this module must get right is never to accept a line that
//! path refuses, and to hand back the same spans it would. `tests/integration/envelope.rs`
//! checks exactly that on generated lines and mutations of captured traffic.
//!
//! What is accepted below the top level is what serde_json accepts when it skips a value (its
//! `RawValue` and `IgnoredAny` paths): RFC 8259 grammar, control characters refused in strings,
//! `\u` escapes needing four hex digits but not a valid code point (a lone surrogate passes, as
//! it does there), numbers checked for their grammar but not their range, duplicate names in
//! nested objects allowed (the strict parser refuses them where a value is parsed in full).
//!
//! Knows JSON syntax only: nothing of JSON-RPC's rules, which `message` applies to the spans.

/// The spans of one envelope's top-level members, each the exact JSON text of the value (no
/// surrounding whitespace), as serde_json's `RawValue` would hold it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Envelope<'a> {
    /// The contents of the `jsonrpc` string (it had no escapes), or the reader declined.
    pub jsonrpc: Option<&'a str>,
    pub id: Option<&'a str>,
    /// The contents of the `method` string (it had no escapes).
    pub method: Option<&'a str>,
    pub params: Option<&'a str>,
    pub result: Option<&'a str>,
    pub error: Option<&'a str>,
    /// Top-level member names JSON-RPC does not define, in order (none had escapes).
    pub unknown: Vec<&'a str>,
}

/// Reads the envelope of `text`, or `None` when the serde_json path must judge it.
pub fn read(text: &str, max_depth: usize) -> Option<Envelope<'_>> {
    let b = text.as_bytes();
    let mut r = Reader { b, i: 0, max_depth };
    let mut env = Envelope::default();
    // Every SDK we relay writes `jsonrpc` first and without spaces: one comparison then takes
    // the place of two string scans and a name match. The loop below reads the members after it
    // exactly as it reads any others (a second `jsonrpc` is still a repeated member).
    if b.starts_with(USUAL_START) {
        // The contents of the member just compared: equal to the line's own bytes.
        env.jsonrpc = Some("2.0");
        r.i = USUAL_START.len();
        r.ws();
    } else {
        r.ws();
        r.eat(b'{')?;
        r.ws();
        if r.peek() == b'}' {
            r.i += 1;
            r.ws();
            return (r.i == b.len()).then_some(env);
        }
    }
    loop {
        r.eat(b'"')?;
        let key_start = r.i;
        if r.string()? {
            // An escaped name is decoded by the serde_json path; matching it here would
            // need the same decoding, so decline.
            return None;
        }
        let key = &text[key_start..r.i - 1];
        r.ws();
        r.eat(b':')?;
        r.ws();
        let mut ignored = None;
        // `jsonrpc` and `method` are read as strings: their contents, when plain.
        let (slot, as_string) = match key {
            "jsonrpc" => (&mut env.jsonrpc, true),
            "id" => (&mut env.id, false),
            "method" => (&mut env.method, true),
            "params" => (&mut env.params, false),
            "result" => (&mut env.result, false),
            "error" => (&mut env.error, false),
            other => {
                if env.unknown.contains(&other) {
                    return None;
                }
                env.unknown.push(other);
                (&mut ignored, false)
            }
        };
        if slot.is_some() {
            return None;
        }
        let start = r.i;
        *slot = Some(if as_string {
            // Anything but a plain string (another type, an escape) is for the serde_json
            // path to judge.
            r.eat(b'"')?;
            if r.string()? {
                return None;
            }
            &text[start + 1..r.i - 1]
        } else {
            r.value(1)?;
            &text[start..r.i]
        });
        r.ws();
        match r.next() {
            b',' => r.ws(),
            b'}' => break,
            _ => return None,
        }
    }
    r.ws();
    (r.i == b.len()).then_some(env)
}

/// How nearly every message starts: the object, its `jsonrpc` member and the comma before the
/// next member.
const USUAL_START: &[u8] = br#"{"jsonrpc":"2.0","#;

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
    max_depth: usize,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of every zero byte of `x`. A borrow can also mark a byte after a zero one, never
/// before it, so the lowest set bit is always exact (which is all `skip_plain` uses).
#[inline]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & HIGHS
}

impl Reader<'_> {
    /// The current byte, or 0 past the end. A zero byte is never valid JSON outside a string
    /// (and a control character inside one), so the end needs no branch of its own: every
    /// match below declines it as it declines any other unexpected byte.
    #[inline(always)]
    fn peek(&self) -> u8 {
        self.b.get(self.i).copied().unwrap_or(0)
    }

    /// The current byte (0 past the end), moving past it. After a 0 the position may be one
    /// past the end; every caller then declines at once, before the position is used again.
    #[inline(always)]
    fn next(&mut self) -> u8 {
        let c = self.peek();
        self.i += 1;
        c
    }

    #[inline(always)]
    fn eat(&mut self, want: u8) -> Option<()> {
        (self.next() == want).then_some(())
    }

    /// Skips JSON whitespace (the four bytes RFC 8259 allows, as serde_json does).
    #[inline(always)]
    fn ws(&mut self) {
        while let b' ' | b'\n' | b'\t' | b'\r' = self.peek() {
            self.i += 1;
        }
    }

    /// Skips one value starting at the current byte; `depth` is the nesting of the container
    /// the value is in (the top-level object is 1).
    fn value(&mut self, depth: usize) -> Option<()> {
        match self.next() {
            b'"' => self.string().map(|_| ()),
            b'{' => {
                let depth = depth + 1;
                if depth > self.max_depth {
                    return None;
                }
                self.ws();
                if self.peek() == b'}' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.eat(b'"')?;
                    self.string()?;
                    self.ws();
                    self.eat(b':')?;
                    self.ws();
                    self.value(depth)?;
                    self.ws();
                    match self.next() {
                        b',' => self.ws(),
                        b'}' => return Some(()),
                        _ => return None,
                    }
                }
            }
            b'[' => {
                let depth = depth + 1;
                if depth > self.max_depth {
                    return None;
                }
                self.ws();
                if self.peek() == b']' {
                    self.i += 1;
                    return Some(());
                }
                loop {
                    self.value(depth)?;
                    self.ws();
                    match self.next() {
                        b',' => self.ws(),
                        b']' => return Some(()),
                        _ => return None,
                    }
                }
            }
            b't' => self.literal(b"rue"),
            b'f' => self.literal(b"alse"),
            b'n' => self.literal(b"ull"),
            b'-' => self.number(),
            b'0'..=b'9' => {
                self.i -= 1;
                self.number()
            }
            _ => None,
        }
    }

    fn literal(&mut self, rest: &[u8]) -> Option<()> {
        if self.b[self.i..].starts_with(rest) {
            self.i += rest.len();
            Some(())
        } else {
            None
        }
    }

    /// A number after its optional minus: `0` or a non-zero digit and more digits, then an
    /// optional fraction and exponent, each with at least one digit. Only the grammar is
    /// checked, never the range, as serde_json does when it skips a value.
    fn number(&mut self) -> Option<()> {
        match self.next() {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == b'.' {
            self.i += 1;
            self.one_or_more_digits()?;
        }
        if let b'e' | b'E' = self.peek() {
            self.i += 1;
            if let b'+' | b'-' = self.peek() {
                self.i += 1;
            }
            self.one_or_more_digits()?;
        }
        Some(())
    }

    #[inline]
    fn digits(&mut self) {
        while let b'0'..=b'9' = self.peek() {
            self.i += 1;
        }
    }

    fn one_or_more_digits(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }

    /// Skips the rest of a string whose opening quote was read; `Some(true)` when it held an
    /// escape. The text is already valid UTF-8, so bytes from 0x80 up are passed over whole;
    /// control characters are refused, and an escape must be one of JSON's. Inlined: most
    /// strings of a message are short names, where a call's register saves cost more than the
    /// scan.
    #[inline(always)]
    fn string(&mut self) -> Option<bool> {
        let mut escaped = false;
        loop {
            self.skip_plain();
            match self.next() {
                b'"' => return Some(escaped),
                b'\\' => {
                    escaped = true;
                    match self.next() {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let hex = self.b.get(self.i..self.i + 4)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.i += 4;
                        }
                        _ => return None,
                    }
                }
                // Only a control character (or the end of the text) can be left here:
                // `skip_plain` stops at nothing else.
                _ => return None,
            }
        }
    }

    /// Moves to the next quote, backslash or control character of a string (or the end of the
    /// text).
    #[inline]
    fn skip_plain(&mut self) {
        self.i = string_stop(self.b, self.i);
    }
}

/// The index of the first quote, backslash or control character of `b` at or after `i` (or the
/// length of `b`): where a plain run inside a JSON string ends. Eight bytes at a time, since long
/// texts (descriptions, file contents) are most of a message's bytes; the first special byte of
/// a word is found exactly from the lowest bit of its mask, so a short string costs one word,
/// not one word per byte. Shared with the live page reader (`gate::catalogue`).
#[inline]
pub fn string_stop(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word);
        let special = zero_bytes(x ^ (ONES * u64::from(b'"')))
            | zero_bytes(x ^ (ONES * u64::from(b'\\')))
            | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS);
        if special != 0 {
            // Little-endian: the lowest set bit belongs to the earliest special byte, and the
            // masks are exact there (a borrow only marks bytes after a real match).
            return i + (special.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            return i;
        }
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = crate::protocol::MAX_JSON_DEPTH;

    #[test]
    fn reads_the_spans_of_a_request() {
        let line = r#" {"jsonrpc" : "2.0", "id":7 ,"method":"tools/call","params": {"a":[1,2.5e-3,true,null,"x\u00e9"]},"z":{} } "#;
        let env = read(line, MAX).expect("accepted");
        assert_eq!(env.jsonrpc, Some("2.0"));
        assert_eq!(env.id, Some("7"));
        assert_eq!(env.method, Some("tools/call"));
        assert_eq!(env.params, Some(r#"{"a":[1,2.5e-3,true,null,"x\u00e9"]}"#));
        assert_eq!(env.unknown, vec!["z"]);
    }

    #[test]
    fn declines_what_it_cannot_judge_exactly() {
        for line in [
            "",
            "[]",
            "\u{a0}{}",
            r#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
            r#"{"x":1,"x":2}"#,
            r#"{"\u0069d":1}"#,
            r#"{"method":"p\u0069ng"}"#,
            r#"{"jsonrpc":2}"#,
            r#"{"id":01}"#,
            r#"{"id":1.}"#,
            r#"{"id":-}"#,
            r#"{"id":1e}"#,
            r#"{"a":[1,]}"#,
            r#"{"a":{"b":1,}}"#,
            r#"{"a":"\x"}"#,
            r#"{"a":"\u12"}"#,
            "{\"a\":\"\t\"}",
            r#"{"a":tru}"#,
            r#"{"a":1} x"#,
            r#"{"a":1"#,
            "\u{feff}{}",
            // The usual start is read by one comparison; what follows it is still judged.
            r#"{"jsonrpc":"2.0",}"#,
            r#"{"jsonrpc":"2.0","#,
            r#"{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"a"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"a"}}"#,
            r#"{"jsonrpc":"2.0",,"id":1}"#,
        ] {
            assert_eq!(read(line, MAX), None, "{line:?}");
        }
    }

    #[test]
    fn the_usual_start_gives_the_spans_the_general_loop_gives() {
        let usual = read(r#"{"jsonrpc":"2.0","id":1,"method":"a"}"#, MAX).expect("usual");
        let spaced = read(r#"{ "jsonrpc":"2.0", "id":1, "method":"a" }"#, MAX).expect("spaced");
        assert_eq!(usual, spaced);
        assert_eq!(usual.jsonrpc, Some("2.0"));
        assert_eq!(usual.id, Some("1"));
        let only = read(r#"{"jsonrpc":"2.0", "result":{}}"#, MAX).expect("result");
        assert_eq!(only.result, Some("{}"));
    }

    #[test]
    fn counts_depth_like_the_limit_check() {
        let at = |n: usize| format!("{{\"p\":{}{}}}", "[".repeat(n - 1), "]".repeat(n - 1));
        assert!(read(&at(MAX), MAX).is_some());
        assert!(read(&at(MAX + 1), MAX).is_none());
    }

    #[test]
    fn a_special_byte_is_found_at_every_offset_of_a_word() {
        // The word scan jumps to the first special byte it finds; every position in and across
        // words, after ASCII or multi-byte text, must give what serde_json says of the line.
        for filler in ["a", "é", "\u{7f}"] {
            for before in 0..20 {
                for special in ["\u{1}", "\u{1f}", "\\\"", "\\u00e9", "\\q", "\"", " "] {
                    for after in [0, 1, 7, 9] {
                        let line = format!(
                            "{{\"p\":\"{}{special}{}\",\"id\":1}}",
                            filler.repeat(before),
                            "b".repeat(after)
                        );
                        let serde = serde_json::from_str::<serde_json::Value>(&line).is_ok();
                        let env = read(&line, MAX);
                        assert_eq!(env.is_some(), serde, "{line:?}");
                        if let Some(env) = env {
                            assert_eq!(env.id, Some("1"), "{line:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn long_strings_are_scanned_by_the_word_and_still_checked() {
        let clean = format!("{{\"p\":\"{}é\"}}", "a".repeat(1000));
        assert!(read(&clean, MAX).is_some());
        for bad in ["\u{1}", "\u{1f}"] {
            let line = format!("{{\"p\":\"{}{bad}{}\"}}", "a".repeat(17), "b".repeat(9));
            assert!(read(&line, MAX).is_none(), "{line:?}");
        }
        let escaped = format!("{{\"p\":\"{}\\\"{}\"}}", "a".repeat(13), "b".repeat(20));
        assert!(read(&escaped, MAX).is_some());
    }
}
