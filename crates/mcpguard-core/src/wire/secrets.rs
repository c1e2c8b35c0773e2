//! Finding secret-shaped values in untrusted text.
//!
//! A tool result can carry a credential the server read somewhere (a `.env` file, a config, a
//! log line), and a model that sees it can repeat it to another tool or to its provider; a
//! model can also be talked into putting a credential into a call's arguments. This module finds
//! such values: high-confidence shapes of well-known credentials (cloud keys, provider API
//! tokens, private-key blocks, JWTs, bearer and basic credentials, passwords in connection
//! strings), patterns the user gives, and literal values the user names. Precision comes first:
//! each shape is anchored on a fixed prefix or structure that ordinary text does not have, and
//! each has tests of what it must and must not match.
//!
//! Pure text in, positions out. The patterns are compiled by the `regex` crate, whose matching
//! is linear in the text whatever it contains. Nothing here decides what a finding means; the
//! gate redacts or refuses.

use std::ops::Range;

use aho_corasick::{AhoCorasick, MatchKind};
use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};

/// One secret-shaped value in a text: what kind it is and where it is (byte offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The kind's stable name: a built-in one (`aws-access-key-id`), `pattern:NAME` for a
    /// user-given pattern or `env:NAME` for the value of a listed environment variable.
    pub kind: String,
    pub range: Range<usize>,
}

/// The text that replaces a redacted value: fixed, naming the kind, never any of the value.
pub fn marker(kind: &str) -> String {
    format!("[redacted:{kind}]")
}

/// The largest compiled size of one pattern (user-given patterns included), so that a policy
/// cannot make start-up or matching memory unbounded.
pub const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// Shortest literal value (from an environment variable the policy lists) that is looked for:
/// shorter values, such as `1` or `true`, occur in ordinary text and would redact it.
pub const MIN_LITERAL_LEN: usize = 8;

/// A built-in detector: the kind, the pattern, and an optional check of each match that the
/// pattern alone cannot express. When the pattern has a group named `s`, only that group is the
/// secret (the rest is context, such as the `postgres://user:` before a password).
struct Builtin {
    kind: &'static str,
    pattern: &'static str,
    check: Option<fn(&str) -> bool>,
    /// Fixed strings (from [`ANCHORS`]) at least one of which every match of the pattern
    /// contains, starting at most [`ANCHOR_REACH`] bytes after the match's start. The scanner
    /// runs the pattern only from a candidate anchor on (see [`Detector::find`]).
    anchors: &'static [&'static str],
}

/// How far into a built-in match its anchor can start: the longest context a shape has before
/// its anchor (`-----BEGIN` and up to 40 characters before `PRIVATE KEY`, a scheme of up to 21
/// characters before `://`), with a margin. Searching from this far before a candidate anchor
/// can only start the search earlier than the match, which is always exact.
const ANCHOR_REACH: usize = 64;

/// Fixed strings at least one of which every built-in shape contains (case-sensitive). A message with none of them holds no built-in shape, so the quick test is one
/// literal search over the raw text instead of the shapes themselves. The built-in tests check
/// that each shape's examples contain an anchor.
const ANCHORS: &[&str] = &[
    "PRIVATE KEY",
    "AKIA",
    "ASIA",
    "ABIA",
    "ACCA",
    "AGPA",
    "AIDA",
    "AROA",
    "ANPA",
    "ANVA",
    "AIPA",
    "ecret",
    "ECRET",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "gldt-",
    "glrt-",
    "glsoat-",
    "glptt-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxo-",
    "xoxs-",
    "xoxr-",
    "hooks.slack.com",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "rk_test_",
    "whsec_",
    "sk-",
    "AIza",
    "npm_",
    "pypi-",
    "hf_",
    "eyJ",
    "earer",
    "Basic",
    "://",
];

/// The built-in shapes, most specific first (an earlier match wins where two overlap).
const BUILTINS: &[Builtin] = &[
    Builtin {
        kind: "private-key",
        // The whole PEM block when it ends, else the header and the base64 body after it.
        pattern: r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s]*)",
        anchors: &["PRIVATE KEY"],
        check: None,
    },
    Builtin {
        kind: "aws-access-key-id",
        pattern: r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b",
        anchors: &[
            "AKIA", "ASIA", "ABIA", "ACCA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA",
        ],
        check: None,
    },
    Builtin {
        kind: "aws-secret-access-key",
        // Forty base64 characters are common (hashes, ids); only with the key's name before them.
        // The key's name in the spellings configs use (snake, upper snake, camel), each with an
        // anchor below, so the quick test can be a case-sensitive literal search.
        pattern: r#"(?:aws_?secret_?access_?key|AWS_?SECRET_?ACCESS_?KEY|aws_?secret_?key|AWS_?SECRET_?KEY|(?:[Aa]ws)?[Ss]ecret[Aa]ccess[Kk]ey)["']?\s*[:=]\s*["']?(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)"#,
        anchors: &["ecret", "ECRET"],
        check: None,
    },
    Builtin {
        kind: "github-token",
        pattern: r"\b(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})\b",
        anchors: &["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
        check: None,
    },
    Builtin {
        kind: "gitlab-token",
        pattern: r"\bgl(?:pat|dt|rt|soat|ptt)-[A-Za-z0-9_-]{20,}",
        anchors: &["glpat-", "gldt-", "glrt-", "glsoat-", "glptt-"],
        check: None,
    },
    Builtin {
        kind: "slack-token",
        pattern: r"\bxox[abposr]-[0-9]{6,}-[A-Za-z0-9-]{6,}",
        anchors: &["xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"],
        check: None,
    },
    Builtin {
        kind: "slack-webhook",
        pattern: r"https://hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{20,}",
        anchors: &["hooks.slack.com"],
        check: None,
    },
    Builtin {
        kind: "stripe-key",
        pattern: r"\b(?:sk|rk|whsec)_(?:live|test)_[A-Za-z0-9]{20,}\b|\bwhsec_[A-Za-z0-9]{32,}\b",
        anchors: &["sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"],
        check: None,
    },
    Builtin {
        kind: "anthropic-key",
        pattern: r"\bsk-ant-(?:api|admin|oat|sid)[0-9]{2}-[A-Za-z0-9_-]{32,}",
        anchors: &["sk-"],
        check: None,
    },
    Builtin {
        kind: "openai-key",
        pattern: r"\bsk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{40,}|\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}\b",
        anchors: &["sk-"],
        check: None,
    },
    Builtin {
        kind: "google-api-key",
        pattern: r"\bAIza[0-9A-Za-z_-]{35}(?:[^0-9A-Za-z_-]|$)",
        anchors: &["AIza"],
        check: None,
    },
    Builtin {
        kind: "npm-token",
        pattern: r"\bnpm_[A-Za-z0-9]{36}\b",
        anchors: &["npm_"],
        check: None,
    },
    Builtin {
        kind: "pypi-token",
        pattern: r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        anchors: &["pypi-"],
        check: None,
    },
    Builtin {
        kind: "huggingface-token",
        pattern: r"\bhf_[A-Za-z0-9]{34,}\b",
        anchors: &["hf_"],
        check: Some(mixed_alphanumeric),
    },
    Builtin {
        kind: "jwt",
        pattern: r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*",
        anchors: &["eyJ"],
        check: None,
    },
    Builtin {
        kind: "bearer-credential",
        // "Bearer" followed by a token of at least 20 characters that mixes letters and digits,
        // so that prose ("Bearer authentication is used") is left alone.
        pattern: r"\b[Bb]earer\s+(?P<s>[A-Za-z0-9\-._~+/]{20,}=*)",
        anchors: &["earer"],
        check: Some(mixed_alphanumeric),
    },
    Builtin {
        kind: "basic-credential",
        // Only when the base64 decodes to `user:password`.
        pattern: r"\bBasic\s+(?P<s>[A-Za-z0-9+/]{8,}={0,2})",
        anchors: &["Basic"],
        check: Some(basic_pair),
    },
    Builtin {
        kind: "connection-string-password",
        // scheme://user:password@host: the password only.
        pattern: r#"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@"'<>]{1,128}:(?P<s>[^\s@/"'<>]{1,256})@[A-Za-z0-9\[]"#,
        anchors: &["://"],
        check: Some(not_placeholder),
    },
];

/// The private-key shape in its parts (issue 34): its header, and the END line its lazy body
/// runs to. The whole pattern prefers the body that reaches an END line, so a regex search for
/// it scans to the end of the text to learn that there is none, once per header: quadratic for
/// a text of headers without END lines. [`Builtins::find`] runs it as its parts instead (see
/// [`Builtins::private_keys`]), which the differential tests hold to the whole pattern.
const PEM_HEAD: &str = r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----";
const PEM_END: &str = r"-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----";
/// The body without an END line, from the header's end on.
const PEM_BODY: &str = r"\A[A-Za-z0-9+/=\s]*";
/// The longest header: `-----BEGIN`, 40 characters, `PRIVATE KEY BLOCK-----`.
const PEM_HEAD_MAX: usize = 10 + 40 + 22;

/// A compiled detector.
struct Pattern {
    kind: String,
    regex: Regex,
    check: Option<fn(&str) -> bool>,
    /// The pattern has a group named `s`: only it is the secret.
    group: bool,
}

/// The built-in shapes compiled, with the one-pass prefilter over their anchors.
struct Builtins {
    patterns: Vec<Pattern>,
    /// Every anchor of [`BUILTINS`], each once, searched leftmost-first (no anchor is a prefix
    /// of another, so at most one can start at a position; the scan restarts one byte after each
    /// occurrence, so every occurrence is seen, overlapping ones included).
    anchors: AhoCorasick,
    /// Per anchor (by its id in `anchors`): the shapes (bit `i` for `BUILTINS[i]`) it starts.
    shapes: Vec<u32>,
    /// The private-key shape's parts: header, END line, body without END line.
    pem: [Regex; 3],
}

/// The built-in shapes, compiled on the first search that needs them (once per process): the
/// quick test (`may_contain`) needs only the anchors, so a start-up, and every message without
/// a secret-shaped anchor, never pays for compiling them. They are constants, compiled by the
/// unit tests; if one still failed to compile here, the `Err` makes every search report the
/// whole text as a finding (fail closed: redacted or refused, never passed unchecked).
static BUILTIN_PATTERNS: std::sync::OnceLock<Result<Builtins, String>> = std::sync::OnceLock::new();

fn builtin_patterns() -> &'static Result<Builtins, String> {
    BUILTIN_PATTERNS.get_or_init(|| {
        let patterns = BUILTINS
            .iter()
            .map(|b| {
                let regex =
                    compile(b.pattern).map_err(|e| format!("built-in pattern {}: {e}", b.kind))?;
                Ok(Pattern {
                    kind: b.kind.to_string(),
                    group: regex.capture_names().any(|n| n == Some("s")),
                    regex,
                    check: b.check,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let mut names: Vec<&str> = Vec::new();
        let mut shapes: Vec<u32> = Vec::new();
        for (i, b) in BUILTINS.iter().enumerate() {
            for a in b.anchors {
                match names.iter().position(|n| n == a) {
                    Some(at) => shapes[at] |= 1 << i,
                    None => {
                        names.push(a);
                        shapes.push(1 << i);
                    }
                }
            }
        }
        let anchors = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&names)
            .map_err(|e| format!("built-in anchors: {e}"))?;
        let part = |p: &str| compile(p).map_err(|e| format!("built-in private-key part: {e}"));
        let pem = [part(PEM_HEAD)?, part(PEM_END)?, part(PEM_BODY)?];
        Ok(Builtins {
            patterns,
            anchors,
            shapes,
            pem,
        })
    })
}

/// The fewest bytes a match of `pattern` can have (0 when that cannot be told): a text shorter
/// than that cannot hold a match, so it is not searched.
fn minimum_len(pattern: &str) -> usize {
    regex_syntax::Parser::new()
        .parse(pattern)
        .ok()
        .and_then(|hir| hir.properties().minimum_len())
        .unwrap_or(0)
}

/// A literal value to look for (from an environment variable the policy lists).
struct Literal {
    value: String,
    kind: String,
    finder: memchr::memmem::Finder<'static>,
}

/// The detectors one policy asks for, compiled once.
pub struct Detector {
    /// The built-in shapes are searched for (they are compiled lazily, see
    /// [`BUILTIN_PATTERNS`]).
    builtin: bool,
    /// The policy's own patterns, compiled when the detector is made, so that a pattern that
    /// does not compile is refused at start-up.
    patterns: Vec<Pattern>,
    /// The policy's patterns as one set: one pass over a text says which of them match at all,
    /// and only those are run for their positions. `None` when the set does not compile within
    /// the size bound (each pattern then runs on its own, as before).
    pattern_set: Option<RegexSet>,
    /// Literal values, longest first, with their kind (`env:NAME`).
    literals: Vec<Literal>,
    /// The quick test of a whole message's raw JSON text: the built-in shapes' anchors, each
    /// literal value raw and JSON-escaped, and the two escapes (`\u`, `\/`) that can spell an
    /// anchor or a value differently from the text it decodes to; one multi-literal scan.
    quick: Option<AhoCorasick>,
    /// The shortest text that can hold any finding: shorter strings are not searched.
    min_len: usize,
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Literal values are secrets: only their kinds are shown.
        f.debug_struct("Detector")
            .field(
                "kinds",
                &BUILTINS
                    .iter()
                    .filter(|_| self.builtin)
                    .map(|b| b.kind)
                    .chain(self.patterns.iter().map(|p| p.kind.as_str()))
                    .collect::<Vec<_>>(),
            )
            .field(
                "literals",
                &self.literals.iter().map(|l| &l.kind).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Compiles one pattern with the size bound every pattern here has.
pub fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .size_limit(PATTERN_SIZE_LIMIT)
        .dfa_size_limit(PATTERN_SIZE_LIMIT)
        .build()
}

impl Detector {
    /// A detector with nothing to find.
    pub fn none() -> Detector {
        Detector {
            builtin: false,
            patterns: Vec::new(),
            pattern_set: None,
            literals: Vec::new(),
            quick: None,
            min_len: 0,
        }
    }

    /// The built-in shapes (when `builtin`), the user's `patterns` (name, pattern) and the
    /// `literals` (name, value; values shorter than [`MIN_LITERAL_LEN`] are skipped by the
    /// caller's choice, see [`MIN_LITERAL_LEN`]). Fails on a pattern that does not compile.
    pub fn new(
        builtin: bool,
        patterns: &[(String, String)],
        literals: &[(String, String)],
    ) -> Result<Detector, String> {
        let mut out = Vec::new();
        for (name, pattern) in patterns {
            let regex = compile(pattern).map_err(|e| format!("secret pattern {name:?}: {e}"))?;
            out.push(Pattern {
                kind: format!("pattern:{name}"),
                group: regex.capture_names().any(|n| n == Some("s")),
                regex,
                check: None,
            });
        }
        let pattern_set = if patterns.is_empty() {
            None
        } else {
            let limit = PATTERN_SIZE_LIMIT.saturating_mul(patterns.len());
            RegexSetBuilder::new(patterns.iter().map(|(_, p)| p))
                .size_limit(limit)
                .dfa_size_limit(limit)
                .build()
                .ok()
        };
        let mut literals: Vec<(String, String)> = literals
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(n, v)| (v.clone(), format!("env:{n}")))
            .collect();
        literals.sort_by_key(|l| std::cmp::Reverse(l.0.len()));
        let literals: Vec<Literal> = literals
            .into_iter()
            .map(|(value, kind)| Literal {
                finder: memchr::memmem::Finder::new(value.as_bytes()).into_owned(),
                value,
                kind,
            })
            .collect();
        // The quick test's literals. Every anchor is free of characters JSON escapes, so it
        // shows in the raw text as it is unless spelt with `\u` or `\/`, which are looked for too.
        let mut quick: Vec<String> = Vec::new();
        if builtin {
            quick.extend(ANCHORS.iter().map(|a| a.to_string()));
        }
        for l in &literals {
            quick.push(l.value.clone());
            let escaped = serde_json::to_string(&l.value).unwrap_or_default();
            quick.push(escaped.trim_matches('"').to_string());
        }
        let quick = if quick.is_empty() {
            None
        } else {
            quick.push("\\u".to_string());
            quick.push("\\/".to_string());
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostFirst)
                    .build(&quick)
                    .map_err(|e| format!("secret anchors: {e}"))?,
            )
        };
        // Shapes' lengths are known without compiling them (their compile is deferred).
        let mut min_len = usize::MAX;
        if builtin {
            min_len = BUILTINS
                .iter()
                .map(|b| minimum_len(b.pattern))
                .min()
                .unwrap_or(0);
        }
        for (_, pattern) in patterns {
            min_len = min_len.min(minimum_len(pattern));
        }
        for l in &literals {
            min_len = min_len.min(l.value.len());
        }
        Ok(Detector {
            builtin,
            patterns: out,
            pattern_set,
            literals,
            quick,
            min_len: if min_len == usize::MAX { 0 } else { min_len },
        })
    }

    /// Whether there is anything to find at all.
    pub fn is_empty(&self) -> bool {
        !self.builtin && self.patterns.is_empty() && self.literals.is_empty()
    }

    /// The shortest text that can hold a finding: a caller walking many strings may skip the
    /// shorter ones ([`Detector::find`] answers nothing for them anyway).
    pub fn min_len(&self) -> usize {
        self.min_len
    }

    /// A quick test of a whole JSON message's text: `false` only when no string in it can hold
    /// a finding. It looks for the built-in shapes' anchors in the raw text, and answers `true` for
    /// what that cannot decide: an escape that could spell a value differently from the string
    /// it decodes to (`\u`, `\/`), a user-given pattern, or a literal value (searched raw and
    /// JSON-escaped). One multi-literal scan of the text.
    pub fn may_contain(&self, json_text: &str) -> bool {
        if self.is_empty() {
            return false;
        }
        // A user-given pattern can match anything: only the full search can tell.
        if !self.patterns.is_empty() {
            return true;
        }
        // Every string in the text decodes to at most as many bytes as its JSON spelling.
        if json_text.len() < self.min_len {
            return false;
        }
        self.quick
            .as_ref()
            .is_none_or(|q| q.is_match(json_text.as_bytes()))
    }

    /// Every secret-shaped value in `text`, in order, not overlapping (where two detectors
    /// overlap, the earlier-starting one wins, then the longer).
    ///
    /// One pass finds every built-in anchor; each shape's pattern then runs only from its first
    /// candidate on (from [`ANCHOR_REACH`] bytes before it), and again from the next candidate
    /// after each match, so a text without a candidate is never searched by a pattern. Every
    /// match of a shape contains one of its anchors no further than that into it, so a search
    /// from there finds exactly the match a search of the whole text finds next: the findings
    /// are those of each pattern over the whole text (the tests hold the two to each other).
    /// The policy's patterns run only when their set matches. Linear in the text: each search
    /// either ends in a match after which the next one starts, or ends the shape.
    pub fn find(&self, text: &str) -> Vec<Hit> {
        let mut hits: Vec<Hit> = Vec::new();
        if text.len() < self.min_len {
            return hits;
        }
        if self.builtin {
            match builtin_patterns() {
                Ok(b) => b.find(text, &mut hits),
                Err(_) => {
                    return vec![Hit {
                        kind: "built-in-detector-unavailable".to_string(),
                        range: 0..text.len(),
                    }]
                }
            }
        }
        if !self.patterns.is_empty() {
            let matched = self.pattern_set.as_ref().map(|set| set.matches(text));
            for (i, p) in self.patterns.iter().enumerate() {
                if matched.as_ref().is_none_or(|m| m.matched(i)) {
                    find_all(p, text, &mut hits);
                }
            }
        }
        for l in &self.literals {
            let mut from = 0;
            while let Some(at) = l.finder.find(&text.as_bytes()[from..]) {
                let start = from + at;
                hits.push(Hit {
                    kind: l.kind.clone(),
                    range: start..start + l.value.len(),
                });
                from = start + l.value.len();
            }
        }
        keep_first(hits)
    }

    /// `text` with every finding replaced by its [`marker`], and the findings; `None` when
    /// there is none.
    pub fn redact(&self, text: &str) -> Option<(String, Vec<Hit>)> {
        let hits = self.find(text);
        if hits.is_empty() {
            return None;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for h in &hits {
            out.push_str(&text[at..h.range.start]);
            out.push_str(&marker(&h.kind));
            at = h.range.end;
        }
        out.push_str(&text[at..]);
        Some((out, hits))
    }
}

impl Builtins {
    /// The built-in shapes' findings in `text`, shape by shape in [`BUILTINS`] order (the order
    /// [`keep_first`] breaks ties by).
    fn find(&self, text: &str, hits: &mut Vec<Hit>) {
        // Every anchor occurrence, with the shapes it starts.
        let mut candidates: Vec<(usize, u32)> = Vec::new();
        let mut any = 0u32;
        let mut from = 0;
        while from < text.len() {
            let input = aho_corasick::Input::new(text.as_bytes()).span(from..text.len());
            let Some(m) = self.anchors.find(input) else {
                break;
            };
            let shapes = self.shapes[m.pattern().as_usize()];
            candidates.push((m.start(), shapes));
            any |= shapes;
            from = m.start() + 1;
        }
        if any == 0 {
            return;
        }
        for (i, p) in self.patterns.iter().enumerate() {
            let bit = 1u32 << i;
            if any & bit == 0 {
                continue;
            }
            let mut next = candidates.iter().filter(|c| c.1 & bit != 0).map(|c| c.0);
            if p.kind == "private-key" {
                self.private_keys(p, text, next, hits);
                continue;
            }
            let mut pos = 0;
            // Each turn starts from the first candidate at or after the end of the last match.
            while let Some(anchor) = next.by_ref().find(|&a| a >= pos) {
                let mut start = anchor.saturating_sub(ANCHOR_REACH).max(pos);
                while !text.is_char_boundary(start) {
                    start -= 1;
                }
                let end = if p.group {
                    let Some(caps) = p.regex.captures_at(text, start) else {
                        break;
                    };
                    if let Some(m) = caps.name("s") {
                        push_group(p, m, hits);
                    }
                    caps.get(0).map_or(text.len(), |m| m.end())
                } else {
                    let Some(m) = p.regex.find_at(text, start) else {
                        break;
                    };
                    push_whole(p, text, m.range(), hits);
                    m.end()
                };
                // Built-in shapes never match the empty text; should one, move on regardless.
                pos = end.max(start + 1);
            }
        }
    }
}

impl Builtins {
    /// The private-key shape's matches, from its candidates (`next`, the positions of
    /// `PRIVATE KEY` in order), in linear time. The whole pattern is a header, then the shortest
    /// text up to an END line if there is one after the header, else the base64 body (which
    /// always matches, so the header's own preferred reading is the match's). So a match starts
    /// at the leftmost header, found in a window around its candidate (the header is at most
    /// [`PEM_HEAD_MAX`] bytes and holds the candidate: a header starting at or before the
    /// candidate lies inside the window, and none starts in the part of the text before the
    /// window that is past the previous match); it runs to the first END line after the header
    /// when there is one; otherwise to the end of the body. The search for an END line goes on
    /// from the header's end and is not repeated once it has found none, so each part of the
    /// text is searched about once.
    fn private_keys(
        &self,
        p: &Pattern,
        text: &str,
        mut next: impl Iterator<Item = usize>,
        hits: &mut Vec<Hit>,
    ) {
        let [head, end_line, body] = &self.pem;
        let mut pos = 0;
        let mut no_end_from: Option<usize> = None;
        while let Some(anchor) = next.find(|&a| a >= pos) {
            let mut start = anchor.saturating_sub(ANCHOR_REACH).max(pos);
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut window = (anchor + PEM_HEAD_MAX + 1).min(text.len());
            while !text.is_char_boundary(window) {
                window += 1;
            }
            let Some(h) = head
                .find_at(&text[..window], start)
                .filter(|h| h.start() <= anchor)
            else {
                // No header starts at or before this candidate (past `pos`).
                pos = anchor + 1;
                continue;
            };
            let until = match no_end_from {
                Some(from) if from <= h.end() => None,
                _ => match end_line.find_at(text, h.end()) {
                    Some(e) => Some(e.end()),
                    None => {
                        no_end_from = Some(h.end());
                        None
                    }
                },
            };
            let end = until
                .unwrap_or_else(|| h.end() + body.find(&text[h.end()..]).map_or(0, |b| b.end()));
            push_whole(p, text, h.start()..end, hits);
            pos = end.max(h.start() + 1);
        }
    }
}

/// Every match of `p` in `text` (the policy's own patterns, and the reference search).
fn find_all(p: &Pattern, text: &str, hits: &mut Vec<Hit>) {
    if p.group {
        for caps in p.regex.captures_iter(text) {
            if let Some(m) = caps.name("s") {
                push_group(p, m, hits);
            }
        }
    } else {
        for m in p.regex.find_iter(text) {
            push_whole(p, text, m.range(), hits);
        }
    }
}

/// A match's group `s` is the secret, when the pattern's check accepts it.
fn push_group(p: &Pattern, m: regex::Match<'_>, hits: &mut Vec<Hit>) {
    if p.check.is_none_or(|c| c(m.as_str())) {
        hits.push(Hit {
            kind: p.kind.clone(),
            range: m.range(),
        });
    }
}

/// A whole match is the secret, less its trailing context, when the pattern's check accepts it.
fn push_whole(p: &Pattern, text: &str, range: Range<usize>, hits: &mut Vec<Hit>) {
    let range = trim_context(text, range);
    if !range.is_empty() && p.check.is_none_or(|c| c(&text[range.clone()])) {
        hits.push(Hit {
            kind: p.kind.clone(),
            range,
        });
    }
}

/// The findings in order, not overlapping: where two overlap, the earlier-starting one wins,
/// then the longer, then the detector listed first.
fn keep_first(mut hits: Vec<Hit>) -> Vec<Hit> {
    hits.sort_by(|a, b| {
        a.range
            .start
            .cmp(&b.range.start)
            .then(b.range.end.cmp(&a.range.end))
    });
    let mut kept: Vec<Hit> = Vec::with_capacity(hits.len());
    for h in hits {
        match kept.last() {
            Some(last) if h.range.start < last.range.end => {}
            _ => kept.push(h),
        }
    }
    kept
}

/// A few built-in patterns end with one character of context (a pattern cannot say "not
/// followed by"); the secret is the match without it.
fn trim_context(text: &str, range: Range<usize>) -> Range<usize> {
    let s = &text[range.clone()];
    let keep = s.trim_end_matches(|c: char| {
        !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '=' | '+' | '/' | '.'))
    });
    let mut end = range.start + keep.len();
    // A private-key block without its END line ends with the whitespace after its body.
    while end > range.start && text.as_bytes()[end - 1].is_ascii_whitespace() {
        end -= 1;
    }
    range.start..end
}

/// Letters and digits both occur: real tokens are random, prose words are not.
fn mixed_alphanumeric(s: &str) -> bool {
    s.bytes().any(|b| b.is_ascii_digit()) && s.bytes().any(|b| b.is_ascii_alphabetic())
}

/// The base64 text decodes to printable `user:password` with both parts non-empty.
fn basic_pair(s: &str) -> bool {
    let Some(bytes) = base64_decode(s) else {
        return false;
    };
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return false;
    };
    match text.split_once(':') {
        Some((user, pass)) => {
            !user.is_empty()
                && !pass.is_empty()
                && text.chars().all(|c| !c.is_control())
                && not_placeholder(pass)
        }
        None => false,
    }
}

/// Documentation writes placeholders where a password goes (`postgres://user:password@host`,
/// `:***@`, `:${PASSWORD}@`); those are not secrets.
fn not_placeholder(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let placeholder = matches!(
        lower.as_str(),
        "password"
            | "passwd"
            | "pass"
            | "pwd"
            | "secret"
            | "yourpassword"
            | "your_password"
            | "mypassword"
            | "pw"
    ) || s.chars().all(|c| matches!(c, '*' | 'x' | 'X' | '.'))
        || (s.starts_with('<') && s.ends_with('>'))
        || (s.starts_with('{') && s.ends_with('}'))
        || s.starts_with("${")
        || s.starts_with("{{")
        || (s.starts_with('$') && s[1..].chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        || (s.starts_with('%') && s.ends_with('%'));
    !placeholder
}

/// Standard base64 (padding optional); `None` when `s` is not base64.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.trim_end_matches('=');
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let mut acc: u32 = 0;
    let mut bits = 0;
    for b in s.bytes() {
        let v = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod oracle;
#[cfg(test)]
mod tests;
