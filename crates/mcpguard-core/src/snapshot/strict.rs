//! Strict JSON parsing: exactly one UTF-8 JSON document, no repeated member names, bounded nesting.
//!
//! serde_json's own `Value` parser silently keeps the last of two members with the same name.
//! mcpguard pins documents by digest and shows them to a human reviewer, so a document that two
//! parsers could read differently (one keeping the first duplicate, another the last) must be
//! refused outright rather than resolved one way or the other. Names are compared after escapes
//! are decoded, so `"a"` and `"\u0061"` are the same name, exactly as RFC 8785 sees them.
//!
//! The parser is serde_json's tokenizer driven by a custom `DeserializeSeed`. The seed carries the
//! RFC 6901 JSON pointer of the value being read, as a chain of borrowed parent links on the stack,
//! so that the happy path allocates nothing extra and an error can still say where it happened.
//!
//! Pure; knows JSON text only, nothing of JSON-RPC, snapshots or IO.

#![forbid(unsafe_code)]

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// The deepest nesting of arrays and objects that [`parse_strict`] accepts (see
/// [`crate::protocol::MAX_JSON_DEPTH`]).
pub const MAX_DEPTH: usize = crate::protocol::MAX_JSON_DEPTH;

// serde_json rejects the 128th nested level before our visitor sees it, so a limit of 127 or more
// would silently turn every `TooDeep` into a less helpful `Syntax` error.
const _: () = assert!(MAX_DEPTH < 127);

/// Why a byte string is not an acceptable JSON document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StrictError {
    /// An object repeats a member name. `pointer` is the RFC 6901 pointer of that object (empty
    /// for the top-level value) and `key` is the repeated name after unescaping. The message quotes
    /// the name with Rust's debug escaping, so control, bidi and zero-width characters in it show
    /// up as visible escapes instead of rearranging or hiding text in a terminal.
    #[error(
        "duplicate member name {key:?} in the object at {loc}: a name may occur only once per \
         object (escaped spellings such as \"\\u0061\" count as the same name as \"a\"), so \
         remove or rename one of the members",
        loc = describe(.pointer)
    )]
    DuplicateKey { pointer: String, key: String },

    /// The text is not JSON (including an empty input and anything after the first document).
    /// `line` and `column` are counted as serde_json counts them (both 1-based, but column 0 when
    /// the problem is found before the first character of a line); `message` says what was wrong.
    #[error("malformed JSON at line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },

    /// The input is not valid UTF-8; `offset` is the byte index of the first invalid byte.
    #[error(
        "the input is not valid UTF-8 (first invalid byte at offset {offset}); JSON documents \
         must be encoded as UTF-8"
    )]
    InvalidUtf8 { offset: usize },

    /// Arrays and objects are nested more than `limit` levels deep; `pointer` names the first
    /// container that is too deep.
    #[error(
        "JSON nesting is deeper than {limit} levels at {loc}: arrays and objects may be nested at \
         most {limit} levels deep",
        loc = describe(.pointer)
    )]
    TooDeep { pointer: String, limit: usize },
}

/// Turns a JSON pointer into words for an error message; the empty pointer is the whole document,
/// which is clearer spelled out than shown as `""`.
fn describe(pointer: &str) -> String {
    if pointer.is_empty() {
        "the top level of the document".to_owned()
    } else {
        format!("JSON pointer {pointer:?}")
    }
}

/// Parses one JSON document from raw bytes, refusing invalid UTF-8, duplicate member names,
/// nesting deeper than [`MAX_DEPTH`] and anything but whitespace after the document.
///
/// Member order is kept as received (serde_json's `preserve_order`). Numbers are read the way
/// serde_json reads them: non-negative integers that fit become `u64`, negative ones `i64`, and
/// everything else `f64`; a number too large for `f64` is a syntax error. Decimal text is rounded
/// to the nearest double because mcpguard's Cargo.toml switches on serde_json's `float_roundtrip`
/// feature; the ES6 number test in `canonical` would notice if that ever stopped.
pub fn parse_strict(bytes: &[u8]) -> Result<Value, StrictError> {
    // Checking the encoding up front gives one clear error for every kind of bad byte; serde_json
    // would report them inside strings and outside strings with two unrelated syntax messages.
    let text = std::str::from_utf8(bytes).map_err(|err| StrictError::InvalidUtf8 {
        offset: err.valid_up_to(),
    })?;
    parse_strict_str(text)
}

/// Like [`parse_strict`], for text that is already known to be UTF-8.
pub fn parse_strict_str(text: &str) -> Result<Value, StrictError> {
    let ctx = Context::default();
    let mut de = serde_json::Deserializer::from_str(text);
    let root = Node {
        ctx: &ctx,
        loc: &Loc::Root,
        depth: 0,
    };
    // `end` is what rejects trailing characters; it only skips whitespace before looking.
    let result = root.deserialize(&mut de).and_then(|value| {
        de.end()?;
        Ok(value)
    });
    result.map_err(|err| match ctx.failure.take() {
        // Our own checks store the structured error before handing serde_json an opaque one.
        Some(failure) => failure,
        None => syntax_error(&err, text),
    })
}

/// Converts a serde_json error into [`StrictError::Syntax`], keeping its message but moving the
/// position into separate fields.
fn syntax_error(err: &serde_json::Error, text: &str) -> StrictError {
    let (line, column) = (err.line(), err.column());
    let message = if err.is_eof() && text.trim_matches(is_json_whitespace).is_empty() {
        // serde_json calls this "EOF while parsing a value", which reads like a truncated file.
        "the input is empty; expected one JSON document".to_owned()
    } else {
        // serde_json's Display appends the position; it is reported in its own fields instead.
        let full = err.to_string();
        let suffix = format!(" at line {line} column {column}");
        full.strip_suffix(&suffix).unwrap_or(&full).to_owned()
    };
    StrictError::Syntax {
        line,
        column,
        message,
    }
}

/// The four whitespace characters RFC 8259 allows between tokens.
fn is_json_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// State shared by every node of one parse.
#[derive(Default)]
struct Context {
    /// The structured error behind a failed parse, if one of our own checks caused it. serde's
    /// error type can only carry a message, so the details travel on this side channel instead.
    failure: Cell<Option<StrictError>>,
}

/// Where a value sits in the document: a linked list of borrowed parents, innermost first. It is
/// only rendered into an RFC 6901 pointer when an error needs one.
enum Loc<'p> {
    Root,
    Member { parent: &'p Loc<'p>, name: &'p str },
    Element { parent: &'p Loc<'p>, index: usize },
}

impl Loc<'_> {
    /// Renders this location as an RFC 6901 JSON pointer (`""` for the root).
    fn pointer(&self) -> String {
        let mut segments = Vec::new();
        let mut here = self;
        // Iterative on purpose: the chain is at most MAX_DEPTH long, but an error path should not
        // add stack depth of its own.
        loop {
            match here {
                Loc::Root => break,
                Loc::Member { parent, name } => {
                    // RFC 6901 section 3: "~" and "/" are the two characters a segment escapes.
                    segments.push(name.replace('~', "~0").replace('/', "~1"));
                    here = parent;
                }
                Loc::Element { parent, index } => {
                    segments.push(index.to_string());
                    here = parent;
                }
            }
        }
        segments
            .iter()
            .rev()
            .fold(String::new(), |mut out, segment| {
                out.push('/');
                out.push_str(segment);
                out
            })
    }
}

/// The seed and visitor for one value: it knows where the value is and how deep it is nested.
#[derive(Clone, Copy)]
struct Node<'c, 'p> {
    ctx: &'c Context,
    loc: &'p Loc<'p>,
    /// How many arrays and objects enclose this value.
    depth: usize,
}

impl Node<'_, '_> {
    /// Records a structured error and returns the opaque serde error that stops the parse.
    fn fail<E: de::Error>(&self, failure: StrictError) -> E {
        let err = E::custom(&failure);
        self.ctx.failure.set(Some(failure));
        err
    }

    /// Checks the nesting limit on entering an array or object at this node and returns the depth
    /// of that container's children.
    fn enter<E: de::Error>(&self) -> Result<usize, E> {
        let depth = self.depth + 1;
        if depth > MAX_DEPTH {
            return Err(self.fail(StrictError::TooDeep {
                pointer: self.loc.pointer(),
                limit: MAX_DEPTH,
            }));
        }
        Ok(depth)
    }
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_> {
    type Value = Value;

    fn deserialize<D>(self, deserializer: D) -> Result<Value, D::Error>
    where
        D: de::Deserializer<'de>,
    {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_, '_> {
    type Value = Value;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        // serde_json never produces a non-finite float (it reports overflow as an error), but a
        // Number cannot hold one, so this is handled rather than assumed.
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number is not finite"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let depth = self.enter()?;
        let mut items = Vec::new();
        loop {
            let loc = Loc::Element {
                parent: self.loc,
                index: items.len(),
            };
            let child = Node {
                ctx: self.ctx,
                loc: &loc,
                depth,
            };
            match seq.next_element_seed(child)? {
                Some(item) => items.push(item),
                None => break,
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let depth = self.enter()?;
        let mut members = Map::new();
        while let Some(name) = map.next_key::<String>()? {
            // Checked before the value is read, so the error points at the first repetition
            // rather than at something later inside the repeated member's value.
            if members.contains_key(&name) {
                return Err(self.fail(StrictError::DuplicateKey {
                    pointer: self.loc.pointer(),
                    key: name,
                }));
            }
            let loc = Loc::Member {
                parent: self.loc,
                name: &name,
            };
            let child = Node {
                ctx: self.ctx,
                loc: &loc,
                depth,
            };
            let value = map.next_value_seed(child)?;
            members.insert(name, value);
        }
        Ok(Value::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `input` and compares the outcome with `expected`: `Ok` holds the expected document
    /// as compact JSON text in received member order, `Err` the exact error.
    fn check(input: &[u8], expected: Result<&str, StrictError>) {
        let shown = String::from_utf8_lossy(input);
        match (parse_strict(input), expected) {
            (Ok(value), Ok(text)) => {
                let compact = serde_json::to_string(&value).expect("a Value always serializes");
                assert_eq!(compact, text, "input: {shown}");
            }
            (Err(err), Err(want)) => assert_eq!(err, want, "input: {shown}"),
            (got, want) => panic!("input: {shown}\n got: {got:?}\nwant: {want:?}"),
        }
    }

    fn dup(pointer: &str, key: &str) -> StrictError {
        StrictError::DuplicateKey {
            pointer: pointer.to_owned(),
            key: key.to_owned(),
        }
    }

    fn syntax(line: usize, column: usize, message: &str) -> StrictError {
        StrictError::Syntax {
            line,
            column,
            message: message.to_owned(),
        }
    }

    fn too_deep(pointer: &str) -> StrictError {
        StrictError::TooDeep {
            pointer: pointer.to_owned(),
            limit: MAX_DEPTH,
        }
    }

    #[test]
    fn accepts_documents_and_keeps_member_order() {
        let cases: &[(&str, &str)] = &[
            ("null", "null"),
            (" \t\r\ntrue\n", "true"),
            ("\"\"", "\"\""),
            ("{}", "{}"),
            ("[]", "[]"),
            (r#"{"b":1,"a":2,"c":3}"#, r#"{"b":1,"a":2,"c":3}"#),
            (
                r#"{"z":{"y":1,"x":2},"a":[3,{"q":4,"p":5}]}"#,
                r#"{"z":{"y":1,"x":2},"a":[3,{"q":4,"p":5}]}"#,
            ),
            // The same name in sibling or nested objects is not a duplicate.
            (r#"[{"a":1},{"a":2}]"#, r#"[{"a":1},{"a":2}]"#),
            (r#"{"a":{"a":{"a":1}}}"#, r#"{"a":{"a":{"a":1}}}"#),
            // Names that differ in case, whitespace or Unicode normalization are distinct: RFC 8785
            // compares names as they are, without any normalization.
            (r#"{"a":1,"A":2,"a ":3}"#, r#"{"a":1,"A":2,"a ":3}"#),
            (
                r#"{"\u00e9":1,"e\u0301":2}"#,
                "{\"\u{e9}\":1,\"e\u{301}\":2}",
            ),
            // Escapes are decoded.
            (r#""\u0061\n\/""#, r#""a\n/""#),
            (r#""\ud83d\ude02""#, "\"\u{1f602}\""),
        ];
        for (input, expected) in cases {
            check(input.as_bytes(), Ok(expected));
        }
    }

    #[test]
    fn numbers_are_read_as_serde_json_reads_them() {
        let cases: &[(&str, Value)] = &[
            ("0", Value::from(0_u64)),
            ("18446744073709551615", Value::from(u64::MAX)),
            ("-1", Value::from(-1_i64)),
            ("-9223372036854775808", Value::from(i64::MIN)),
            ("1.5", Value::from(1.5)),
            ("1e2", Value::from(100.0)),
            // Integers beyond u64 become doubles, as in serde_json.
            (
                "18446744073709551616",
                Value::from(18_446_744_073_709_551_616.0),
            ),
            // serde_json reads "-0" as the double -0.0, not as the integer 0.
            ("-0", Value::from(-0.0)),
            // Underflow rounds to zero like every IEEE parser; overflow is an error (tested below).
            ("1e-400", Value::from(0.0)),
        ];
        for (input, expected) in cases {
            assert_eq!(
                parse_strict(input.as_bytes()).as_ref(),
                Ok(expected),
                "input: {input}"
            );
        }
        let minus_zero = parse_strict(b"-0").ok().and_then(|v| v.as_f64());
        assert_eq!(minus_zero.map(f64::to_bits), Some((-0.0_f64).to_bits()));
    }

    #[test]
    fn rejects_duplicate_member_names() {
        let cases: &[(&str, StrictError)] = &[
            (r#"{"a":1,"a":2}"#, dup("", "a")),
            (r#"{"a":1,"b":2,"a":1}"#, dup("", "a")),
            (r#"{"a":null,"a":{}}"#, dup("", "a")),
            (r#"{"":1,"":2}"#, dup("", "")),
            (r#"{"a":[{"b":1,"b":2}]}"#, dup("/a/0", "b")),
            (r#"[0,1,{"k":1,"k":2}]"#, dup("/2", "k")),
            (r#"{"x":{"y":{"k":1,"k":1}}}"#, dup("/x/y", "k")),
            (r#"{"x":[[{"ok":1}],[{"k":1,"k":1}]]}"#, dup("/x/1/0", "k")),
            // Names that are equal only after unescaping are duplicates too.
            (r#"{"a":1,"\u0061":2}"#, dup("", "a")),
            (r#"{"\u00e9":1,"é":2}"#, dup("", "é")),
            (r#"{"\ud83d\ude02":1,"😂":2}"#, dup("", "😂")),
            (r#"{"a\/b":1,"a/b":2}"#, dup("", "a/b")),
            // Pointer segments escape "~" and "/" as RFC 6901 requires.
            (r#"{"a/b":{"m~n":{"k":0,"k":0}}}"#, dup("/a~1b/m~0n", "k")),
            (r#"{"":{"k":0,"k":0}}"#, dup("/", "k")),
            // The first repetition is reported, before the rest of the document is read.
            (r#"{"a":1,"a":2,"b":1,"b":2}"#, dup("", "a")),
            (r#"{"a":1,"a":[}"#, dup("", "a")),
        ];
        for (input, expected) in cases {
            check(input.as_bytes(), Err(expected.clone()));
        }
    }

    #[test]
    fn rejects_malformed_text() {
        let empty = "the input is empty; expected one JSON document";
        let cases: &[(&str, StrictError)] = &[
            ("", syntax(1, 0, empty)),
            (" \n\t", syntax(2, 1, empty)),
            // Trailing garbage, including a second document.
            ("{} x", syntax(1, 4, "trailing characters")),
            ("1 2", syntax(1, 3, "trailing characters")),
            ("[1]\n[2]", syntax(2, 1, "trailing characters")),
            ("{}}", syntax(1, 3, "trailing characters")),
            ("[1,]", syntax(1, 4, "trailing comma")),
            ("{\"a\":1,}", syntax(1, 8, "trailing comma")),
            ("[", syntax(1, 1, "EOF while parsing a list")),
            ("{\"a\":", syntax(1, 5, "EOF while parsing a value")),
            ("{'a':1}", syntax(1, 2, "key must be a string")),
            ("{\"a\" 1}", syntax(1, 6, "expected `:`")),
            ("NaN", syntax(1, 1, "expected value")),
            ("-Infinity", syntax(1, 2, "invalid number")),
            ("01", syntax(1, 2, "invalid number")),
            ("1.", syntax(1, 2, "EOF while parsing a value")),
            (".5", syntax(1, 1, "expected value")),
            ("+1", syntax(1, 1, "expected value")),
            ("1e400", syntax(1, 5, "number out of range")),
            ("/* c */ 1", syntax(1, 1, "expected value")),
            ("\u{feff}{}", syntax(1, 1, "expected value")),
            ("\"\\x\"", syntax(1, 3, "invalid escape")),
            // Lone surrogates cannot be represented in UTF-8, so they are refused in any position.
            ("\"\\ud800\"", syntax(1, 8, "unexpected end of hex escape")),
            (
                "\"\\ud800\\u0041\"",
                syntax(1, 13, "lone leading surrogate in hex escape"),
            ),
            // serde_json words a lone trailing surrogate as "leading" too; the message is its own.
            (
                "\"\\udc00\"",
                syntax(1, 7, "lone leading surrogate in hex escape"),
            ),
            (
                "\"a\u{1}\"",
                syntax(
                    1,
                    3,
                    "control character (\\u0000-\\u001F) found while parsing a string",
                ),
            ),
            ("\"abc", syntax(1, 4, "EOF while parsing a string")),
        ];
        for (input, expected) in cases {
            check(input.as_bytes(), Err(expected.clone()));
        }
    }

    #[test]
    fn rejects_invalid_utf8() {
        let cases: &[(&[u8], usize)] = &[
            (b"\xff", 0),
            (b"\"\xff\"", 1),
            // A truncated two-byte sequence inside a member value.
            (b"{\"a\":\"\xc3\"}", 6),
            // An overlong encoding of "/".
            (b"[\"\xc0\xaf\"]", 2),
            // A UTF-16 surrogate encoded as UTF-8 (CESU-8) is not UTF-8.
            (b"\"\xed\xa0\x80\"", 1),
            // Bad bytes outside any string.
            (b"[1]\x80", 3),
            // A sequence cut off by the end of the input.
            (b"\"\xe2\x82", 1),
        ];
        for (input, offset) in cases {
            check(input, Err(StrictError::InvalidUtf8 { offset: *offset }));
        }
    }

    #[test]
    fn bounds_nesting_depth() {
        let arrays = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        let objects = |n: usize| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
        let zeros = "/0".repeat(MAX_DEPTH);
        let names = "/a".repeat(MAX_DEPTH);
        // Exactly at the limit is fine, one more level is not.
        check(arrays(MAX_DEPTH).as_bytes(), Ok(&arrays(MAX_DEPTH)));
        check(objects(MAX_DEPTH).as_bytes(), Ok(&objects(MAX_DEPTH)));
        check(arrays(MAX_DEPTH + 1).as_bytes(), Err(too_deep(&zeros)));
        check(objects(MAX_DEPTH + 1).as_bytes(), Err(too_deep(&names)));
        // Hostile inputs far deeper than any stack stop at the limit. They are unterminated, and
        // the depth error wins because it is found before the end of the input.
        check("[".repeat(100_000).as_bytes(), Err(too_deep(&zeros)));
        check("{\"a\":".repeat(100_000).as_bytes(), Err(too_deep(&names)));
        check(
            "[{\"a\":".repeat(50_000).as_bytes(),
            Err(too_deep(&"/0/a".repeat(MAX_DEPTH / 2))),
        );
        // Depth 128 is where serde_json gives up by itself; our error must still be the one seen.
        check(arrays(128).as_bytes(), Err(too_deep(&zeros)));
    }

    #[test]
    fn deep_documents_fit_a_small_stack() {
        // Tokio worker threads and test threads have 2 MiB stacks; show that a maximally deep
        // document parses (and the next level is refused) well within a quarter of that.
        let parsed = std::thread::Builder::new()
            .stack_size(512 * 1024)
            .spawn(|| {
                let n = MAX_DEPTH;
                let ok = parse_strict(format!("{}{}", "[".repeat(n), "]".repeat(n)).as_bytes());
                let deep = parse_strict("[".repeat(1_000_000).as_bytes());
                (ok.is_ok(), matches!(deep, Err(StrictError::TooDeep { .. })))
            })
            .expect("spawning a test thread")
            .join()
            .expect("the parser must not overflow the stack");
        assert_eq!(parsed, (true, true));
    }

    #[test]
    fn error_messages_are_sentences() {
        let cases: &[(StrictError, &str)] = &[
            (
                dup("/a/0", "b"),
                "duplicate member name \"b\" in the object at JSON pointer \"/a/0\": a name may \
                 occur only once per object (escaped spellings such as \"\\u0061\" count as the \
                 same name as \"a\"), so remove or rename one of the members",
            ),
            (
                dup("", "\u{202e}x"),
                "duplicate member name \"\\u{202e}x\" in the object at the top level of the \
                 document: a name may occur only once per object (escaped spellings such as \
                 \"\\u0061\" count as the same name as \"a\"), so remove or rename one of the \
                 members",
            ),
            (
                syntax(3, 7, "trailing characters"),
                "malformed JSON at line 3, column 7: trailing characters",
            ),
            (
                StrictError::InvalidUtf8 { offset: 12 },
                "the input is not valid UTF-8 (first invalid byte at offset 12); JSON documents \
                 must be encoded as UTF-8",
            ),
            (
                too_deep("/0"),
                "JSON nesting is deeper than 100 levels at JSON pointer \"/0\": arrays and \
                 objects may be nested at most 100 levels deep",
            ),
        ];
        for (err, text) in cases {
            assert_eq!(err.to_string(), *text);
        }
    }

    #[test]
    fn str_and_bytes_entry_points_agree() {
        for input in [r#"{"a":[1,2.5,"x"]}"#, r#"{"a":1,"a":2}"#, "[1,", ""] {
            assert_eq!(parse_strict_str(input), parse_strict(input.as_bytes()));
        }
    }
}
