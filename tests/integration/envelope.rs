//! The differential test of the one-pass envelope reader (`wire::envelope`, the fast path of
//! `wire::message::parse`) against the serde_json path it replaces (`parse_with_serde`), which is
//! the oracle: on every input, both must accept or refuse alike, and agree on everything the
//! gate reads (kind, id, method, the raw text of params/result/error, unknown member names) and
//! on the refusal (reason, its text, the salvaged id).
//!
//! The inputs are real traffic captured from the fixture server (a handshake, paginated
//! `tools/list` walks, calls with Unicode, errors), lines from a seeded generator that aims at
//! the places where two JSON readers differ (duplicate top-level members, escapes in names and
//! ids, lone surrogates, numbers out of range or badly formed, nesting around the limit,
//! whitespace that is not JSON's, a BOM, trailing garbage, control characters), and byte-level
//! mutations of both, including invalid UTF-8. cargo-fuzz needs a nightly toolchain, which this
//! machine does not have; `fuzz/fuzz_targets/envelope.rs` runs the same comparison under
//! libFuzzer where one is available.

use mcpguard::wire::{envelope, message};

use crate::support::{fixture, Peer};

/// Everything the two paths produce for `line`, as text: `Message` and `Invalid` print every
/// field (the raw spans included), so equal texts mean equal views.
fn view(result: &Result<message::Message<'_>, message::Invalid>) -> String {
    match result {
        Ok(m) => format!("{m:?}"),
        Err(e) => format!("{e:?} / {}", e.reason),
    }
}

/// Compares the two paths on one line; true when the fast reader accepted it.
fn check(line: &[u8]) -> bool {
    let ours = message::parse(line);
    let oracle = message::parse_with_serde(line);
    assert_eq!(
        view(&ours),
        view(&oracle),
        "the envelope reader disagrees with the serde_json path on {:?}",
        String::from_utf8_lossy(line)
    );
    std::str::from_utf8(line)
        .ok()
        .and_then(|t| envelope::read(t, message::MAX_DEPTH))
        .is_some()
}

/// A small seeded generator (xorshift64*), so every run sees the same inputs and a failure
/// names a line that can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A generator's choice: in a clean line every pick is valid JSON, so that accepted lines (where
/// the fast reader's answer is the one used) are frequent; in a rough line anything goes.
struct Gen {
    r: Rng,
    clean: bool,
}

impl Gen {
    fn below(&mut self, n: usize) -> usize {
        self.r.below(n)
    }
    /// From `valid` in a clean line, from both lists otherwise.
    fn choose<'a>(&mut self, valid: &[&'a str], bad: &[&'a str]) -> &'a str {
        let n = if self.clean {
            valid.len()
        } else {
            valid.len() + bad.len()
        };
        let i = self.below(n);
        if i < valid.len() {
            valid[i]
        } else {
            bad[i - valid.len()]
        }
    }
    /// Whitespace between tokens: mostly none or JSON's own; in a rough line sometimes what
    /// only Unicode calls whitespace.
    fn ws(&mut self) -> &'static str {
        if self.below(4) != 0 {
            return "";
        }
        self.choose(
            &[" ", "\t", "\n", "\r", "  \r\n"],
            &["\u{a0}", "\u{feff}", "\u{2028}", "\u{b}"],
        )
    }
}

const STRINGS: &[&str] = &[
    r#""""#,
    r#""plain""#,
    r#""tools/call""#,
    r#""é ü 漢字 😀""#,
    r#""esc \" \\ \/ \b \f \n \r \t""#,
    r#""\u00e9\u0041""#,
    r#""\ud83d\ude00""#,
    r#""lone \ud800 high""#,
    r#""lone \udc00 low""#,
    r#""\ud800\u0041""#,
    "\"del \u{7f} is allowed\"",
    r#""a long text that crosses several eight-byte words before it ends, twice over.""#,
];

const BAD_STRINGS: &[&str] = &[
    r#""bad \x escape""#,
    r#""short \u12 hex""#,
    r#""\uZZZZ""#,
    "\"raw \u{1} control\"",
    "\"raw \u{1f} unit separator\"",
    "\"tab\tinside\"",
    r#""unterminated"#,
];

const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "7",
    "-42",
    "9223372036854775807",
    "-9223372036854775808",
    "9223372036854775808",
    "123456789012345678901234567890",
    "1.5",
    "1.5e10",
    "2E-3",
    "1e+2",
    "1e400",
    "-1e400",
    "4.9e-400",
    "1.0",
];

const BAD_NUMBERS: &[&str] = &["01", "1.", ".5", "-", "1e", "1e+", "+1", "0x10", "NaN"];

fn value(g: &mut Gen, depth: usize) -> String {
    let pick = if depth > 4 { g.below(5) } else { g.below(9) };
    match pick {
        0 | 1 => g.choose(STRINGS, BAD_STRINGS).to_string(),
        2 | 3 => g.choose(NUMBERS, BAD_NUMBERS).to_string(),
        4 => g
            .choose(
                &["true", "false", "null"],
                &["tru", "nul", "falsey", "True"],
            )
            .to_string(),
        5 | 6 => {
            let n = g.below(4);
            let mut s = String::from("{");
            for i in 0..n {
                if i > 0 {
                    s.push_str(g.choose(&[","], &[",,", ";"]));
                }
                // Nested duplicate names are allowed on the message path (the strict parser
                // refuses them where a value is parsed in full).
                let key = g.choose(
                    &[r#""a""#, r#""b""#, r#""a""#, r#""\u0061""#, "\"\""],
                    &["c"],
                );
                let (a, b, c) = (g.ws(), g.ws(), g.ws());
                s.push_str(&format!("{a}{key}{b}:{c}"));
                s.push_str(&value(g, depth + 1));
            }
            if !g.clean && g.below(6) == 0 {
                s.push(',');
            }
            s.push_str(g.ws());
            s.push_str(g.choose(&["}"], &["]", ""]));
            s
        }
        7 => {
            let n = g.below(4);
            let mut s = String::from("[");
            for i in 0..n {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(g.ws());
                s.push_str(&value(g, depth + 1));
            }
            if !g.clean && g.below(6) == 0 {
                s.push(',');
            }
            s.push_str(g.choose(&["]"], &["}"]));
            s
        }
        _ => {
            // Nesting around the limit (the envelope object is level one; this value's
            // container is at `depth`).
            let n = message::MAX_DEPTH - depth - 2 + g.below(5);
            let (open, close) = if g.below(2) == 0 {
                ("[", "]")
            } else {
                ("{\"k\":[", "]}")
            };
            format!("{}1{}", open.repeat(n), close.repeat(n))
        }
    }
}

/// One generated line: the JSON-RPC members in random order and shape, some repeated, some
/// unknown, with whitespace, prefixes and tails that readers disagree on.
fn generated(r: &mut Rng) -> Vec<u8> {
    let clean = r.below(2) == 0;
    let mut g = Gen {
        r: Rng(r.next() | 1),
        clean,
    };
    let g = &mut g;
    let mut members: Vec<String> = Vec::new();
    let jsonrpc = g.choose(
        &[r#""2.0""#, r#""2.0""#, r#""2.0""#, r#""2\u002e0""#],
        &[r#""1.0""#, "2", "null"],
    );
    if !g.clean || g.below(10) != 0 {
        members.push(format!(r#""jsonrpc":{jsonrpc}"#));
    }
    let id = g.choose(
        &[
            "1",
            "-7",
            "0",
            r#""abc""#,
            r#""a\"b""#,
            r#""\u0041""#,
            "9223372036854775807",
            "123456789012345678",
            "-1234567890123456789",
        ],
        &[
            r#""lone \ud800""#,
            // Valid JSON, but serde_json reads it as a float: not an id.
            "-0",
            "null",
            "1.5",
            "1e400",
            "9223372036854775808",
            "{}",
            "[1]",
            "true",
            "01",
        ],
    );
    if g.below(3) != 0 {
        let w = g.ws();
        members.push(format!(r#""id":{w}{id}"#));
    }
    let method = g.choose(
        &[
            r#""ping""#,
            r#""tools/call""#,
            r#""tools/list""#,
            r#""notifications/initialized""#,
            r#""p\u0069ng""#,
        ],
        &["1", r#""lone \udfff""#],
    );
    match g.below(6) {
        0..=2 => {
            members.push(format!(r#""method":{method}"#));
            if g.below(3) != 0 {
                members.push(format!(r#""params":{}"#, value(g, 1)));
            }
        }
        3 | 4 => members.push(format!(r#""result":{}"#, value(g, 1))),
        _ => members.push(format!(r#""error":{}"#, value(g, 1))),
    }
    for _ in 0..g.below(3) {
        let key = g.choose(
            &[
                r#""extra""#,
                r#""_meta""#,
                r#""\u0069d""#,
                r#""m\u00e9thod""#,
                r#""""#,
            ],
            &[r#""lone\ud800""#],
        );
        members.push(format!("{key}:{}", value(g, 1)));
    }
    if !g.clean && g.below(3) == 0 && !members.is_empty() {
        // A repeated top-level member, known or unknown.
        let again = members[g.below(members.len())].clone();
        members.push(again);
    }
    if !g.clean {
        for _ in 0..members.len() {
            let (a, b) = (g.below(members.len()), g.below(members.len()));
            members.swap(a, b);
        }
    }
    let mut line = String::new();
    line.push_str(g.choose(&["", "", "", "  ", "\t"], &["\u{feff}", "\u{a0}", "["]));
    line.push('{');
    for (i, m) in members.iter().enumerate() {
        if i > 0 {
            line.push_str(g.ws());
            line.push(',');
        }
        line.push_str(g.ws());
        // Whitespace around the colon as well.
        let (a, b) = (g.ws(), g.ws());
        line.push_str(&m.replacen(':', &format!("{a}:{b}"), 1));
    }
    line.push_str(g.ws());
    line.push('}');
    line.push_str(g.choose(
        &["", "", "", "\r", " \t "],
        &[" x", "}", "{}", "\u{feff}", "\0"],
    ));
    line.into_bytes()
}

/// A byte-level change of a line: a byte replaced by one that matters to JSON or UTF-8, a byte
/// removed, a slice repeated, or the tail cut.
fn mutate(r: &mut Rng, line: &[u8]) -> Vec<u8> {
    let mut out = line.to_vec();
    if out.is_empty() {
        return out;
    }
    const BYTES: &[u8] = b"\"\\{}[],:0e-.u \t\x00\x1f\x7f\x80\xbf\xc3\xed\xf0\xff";
    for _ in 0..1 + r.below(3) {
        let at = r.below(out.len().max(1));
        match r.below(5) {
            0 | 1 => {
                if at < out.len() {
                    out[at] = BYTES[r.below(BYTES.len())];
                }
            }
            2 => {
                if at < out.len() {
                    out.remove(at);
                }
            }
            3 => {
                let end = (at + 1 + r.below(12)).min(out.len());
                let slice = out[at..end].to_vec();
                out.splice(at..at, slice);
            }
            _ => out.truncate(at),
        }
    }
    out
}

/// Real traffic in both directions through the fixture server: the handshake, a paginated
/// `tools/list` walk of a generated catalogue, calls with Unicode and escapes, an error, a ping.
fn captured_traffic() -> Vec<Vec<u8>> {
    let mut server = Peer::start(fixture(), &["--tools", "40", "--page-size", "15"]);
    let mut lines: Vec<Vec<u8>> = Vec::new();
    fn exchange(
        server: &mut Peer,
        lines: &mut Vec<Vec<u8>>,
        request: serde_json::Value,
        id: serde_json::Value,
    ) -> serde_json::Value {
        let sent = serde_json::to_vec(&request).unwrap();
        server.send(&sent);
        lines.push(sent);
        loop {
            let got = server.recv();
            let v: serde_json::Value = serde_json::from_slice(&got).unwrap();
            lines.push(got);
            if v.get("id") == Some(&id) && v.get("method").is_none() {
                return v;
            }
        }
    }
    let rpc = |id: i64, method: &str, params: serde_json::Value| serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    exchange(
        &mut server,
        &mut lines,
        rpc(
            0,
            "initialize",
            serde_json::json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "diff", "version": "0"}}),
        ),
        0.into(),
    );
    let initialized = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec();
    server.send(&initialized);
    lines.push(initialized);
    let mut cursor: Option<String> = None;
    for id in 1..10 {
        let params = match &cursor {
            Some(c) => serde_json::json!({"cursor": c}),
            None => serde_json::json!({}),
        };
        let page = exchange(
            &mut server,
            &mut lines,
            rpc(id, "tools/list", params),
            id.into(),
        );
        cursor = page["result"]["nextCursor"].as_str().map(str::to_string);
        if cursor.is_none() {
            break;
        }
    }
    for (id, name, arguments) in [
        (
            20,
            "echo",
            serde_json::json!({"text": "héllo \"wörld\" \\ 😀 \u{7}"}),
        ),
        (21, "add", serde_json::json!({"a": 2, "b": -3.5e2})),
        (22, "fail", serde_json::json!({})),
        (23, "bad_output", serde_json::json!({})),
        (
            24,
            "no_such_tool",
            serde_json::json!({"x": [null, true, {}]}),
        ),
    ] {
        exchange(
            &mut server,
            &mut lines,
            rpc(
                id,
                "tools/call",
                serde_json::json!({"name": name, "arguments": arguments, "_meta": {"progressToken": id}}),
            ),
            id.into(),
        );
    }
    exchange(
        &mut server,
        &mut lines,
        rpc(30, "ping", serde_json::json!({})),
        30.into(),
    );
    server.close_stdin();
    server.wait();
    lines
}

#[test]
fn the_envelope_reader_agrees_with_serde_json_on_captured_traffic() {
    let traffic = captured_traffic();
    assert!(
        traffic.len() > 15,
        "too little traffic captured: {}",
        traffic.len()
    );
    for line in &traffic {
        // Every real message takes the fast path: that is where the time goes.
        assert!(
            check(line),
            "the fast reader declined real traffic: {}",
            String::from_utf8_lossy(line)
        );
    }
    let mut r = Rng(0x5eed_1234_abcd_0001);
    let mut accepted = 0;
    let mut total = 0;
    for line in &traffic {
        for _ in 0..300 {
            accepted += usize::from(check(&mutate(&mut r, line)));
            total += 1;
        }
    }
    // Both outcomes must be exercised, or the comparison proves little.
    assert!(
        accepted > total / 50 && accepted < total * 9 / 10,
        "{accepted} of {total} mutated lines accepted"
    );
}

#[test]
fn the_envelope_reader_agrees_with_serde_json_on_generated_lines() {
    let mut r = Rng(0x0dd_ba11_c0ff_ee42);
    let (mut accepted, mut total) = (0, 0);
    for _ in 0..40_000 {
        let line = generated(&mut r);
        accepted += usize::from(check(&line));
        total += 1;
        for _ in 0..2 {
            accepted += usize::from(check(&mutate(&mut r, &line)));
            total += 1;
        }
    }
    assert!(
        accepted > total / 20 && accepted < total * 9 / 10,
        "{accepted} of {total} generated lines accepted"
    );
}

/// The cases the issue names, each compared and each with the outcome it must have.
#[test]
fn the_envelope_reader_refuses_what_the_serde_json_path_refuses() {
    let cases: &[(&[u8], bool)] = &[
        (br#"{"jsonrpc":"2.0","id":1,"method":"a","id":2}"#, false),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"a","x":1,"x":2}"#,
            false,
        ),
        (b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xc3\"}", false),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"params\":\"\xed\xa0\x80\"}",
            false,
        ),
        (br#"{"jsonrpc":"2.0","id":1,"method":"a\ud800"}"#, false),
        (br#"{"jsonrpc":"2.0","id":"\ud800","method":"a"}"#, false),
        (br#"{"jsonrpc":"2.0","id":1e400,"method":"a"}"#, false),
        (br#"{"jsonrpc":"2.0","id":-0,"method":"a"}"#, false),
        (
            br#"{"jsonrpc":"2.0","id":99999999999999999999,"method":"a"}"#,
            false,
        ),
        (br#"{"jsonrpc":"2.0","id":1,"method":"a"} x"#, false),
        (
            b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}",
            false,
        ),
        // Accepted by both: what the message path leaves to the strict parser further on.
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"a","params":{"s":"\ud800"}}"#,
            true,
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"a","params":{"n":1e400}}"#,
            true,
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"a","params":{"k":1,"k":2}}"#,
            true,
        ),
        (
            b" \t{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}\r\n ",
            true,
        ),
    ];
    for (line, ok) in cases {
        check(line);
        assert_eq!(
            message::parse(line).is_ok(),
            *ok,
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    let deep = |n: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"a","params":{}{}}}"#,
            "[".repeat(n - 1),
            "]".repeat(n - 1)
        )
    };
    assert!(check(deep(message::MAX_DEPTH).as_bytes()));
    assert!(!check(deep(message::MAX_DEPTH + 1).as_bytes()));
    assert!(message::parse(deep(message::MAX_DEPTH + 1).as_bytes()).is_err());
}
