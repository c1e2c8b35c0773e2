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

use regex::{Regex, RegexBuilder};

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
}

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
        check: None,
    },
    Builtin {
        kind: "aws-access-key-id",
        pattern: r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b",
        check: None,
    },
    Builtin {
        kind: "aws-secret-access-key",
        // Forty base64 characters are common (hashes, ids); only with the key's name before them.
        // The key's name in the spellings configs use (snake, upper snake, camel), each with an
        // anchor below, so the quick test can be a case-sensitive literal search.
        pattern: r#"(?:aws_?secret_?access_?key|AWS_?SECRET_?ACCESS_?KEY|aws_?secret_?key|AWS_?SECRET_?KEY|(?:[Aa]ws)?[Ss]ecret[Aa]ccess[Kk]ey)["']?\s*[:=]\s*["']?(?P<s>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+]|$)"#,
        check: None,
    },
    Builtin {
        kind: "github-token",
        pattern: r"\b(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9]{22}_[A-Za-z0-9]{59})\b",
        check: None,
    },
    Builtin {
        kind: "gitlab-token",
        pattern: r"\bgl(?:pat|dt|rt|soat|ptt)-[A-Za-z0-9_-]{20,}",
        check: None,
    },
    Builtin {
        kind: "slack-token",
        pattern: r"\bxox[abposr]-[0-9]{6,}-[A-Za-z0-9-]{6,}",
        check: None,
    },
    Builtin {
        kind: "slack-webhook",
        pattern: r"https://hooks\.slack\.com/services/T[A-Z0-9]{6,}/B[A-Z0-9]{6,}/[A-Za-z0-9]{20,}",
        check: None,
    },
    Builtin {
        kind: "stripe-key",
        pattern: r"\b(?:sk|rk|whsec)_(?:live|test)_[A-Za-z0-9]{20,}\b|\bwhsec_[A-Za-z0-9]{32,}\b",
        check: None,
    },
    Builtin {
        kind: "anthropic-key",
        pattern: r"\bsk-ant-(?:api|admin|oat|sid)[0-9]{2}-[A-Za-z0-9_-]{32,}",
        check: None,
    },
    Builtin {
        kind: "openai-key",
        pattern: r"\bsk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{40,}|\bsk-[A-Za-z0-9]{20}T3BlbkFJ[A-Za-z0-9]{20}\b",
        check: None,
    },
    Builtin {
        kind: "google-api-key",
        pattern: r"\bAIza[0-9A-Za-z_-]{35}(?:[^0-9A-Za-z_-]|$)",
        check: None,
    },
    Builtin {
        kind: "npm-token",
        pattern: r"\bnpm_[A-Za-z0-9]{36}\b",
        check: None,
    },
    Builtin {
        kind: "pypi-token",
        pattern: r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}",
        check: None,
    },
    Builtin {
        kind: "huggingface-token",
        pattern: r"\bhf_[A-Za-z0-9]{34,}\b",
        check: Some(mixed_alphanumeric),
    },
    Builtin {
        kind: "jwt",
        pattern: r"\beyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*",
        check: None,
    },
    Builtin {
        kind: "bearer-credential",
        // "Bearer" followed by a token of at least 20 characters that mixes letters and digits,
        // so that prose ("Bearer authentication is used") is left alone.
        pattern: r"\b[Bb]earer\s+(?P<s>[A-Za-z0-9\-._~+/]{20,}=*)",
        check: Some(mixed_alphanumeric),
    },
    Builtin {
        kind: "basic-credential",
        // Only when the base64 decodes to `user:password`.
        pattern: r"\bBasic\s+(?P<s>[A-Za-z0-9+/]{8,}={0,2})",
        check: Some(basic_pair),
    },
    Builtin {
        kind: "connection-string-password",
        // scheme://user:password@host: the password only.
        pattern: r#"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s:/@"'<>]{1,128}:(?P<s>[^\s@/"'<>]{1,256})@[A-Za-z0-9\[]"#,
        check: Some(not_placeholder),
    },
];

/// A compiled detector.
struct Pattern {
    kind: String,
    regex: Regex,
    check: Option<fn(&str) -> bool>,
    /// The pattern has a group named `s`: only it is the secret.
    group: bool,
}

/// The built-in shapes, compiled on the first search that needs them (once per process): the
/// quick test (`may_contain`) needs only the anchors, so a start-up, and every message without
/// a secret-shaped anchor, never pays for compiling them. They are constants, compiled by the
/// unit tests; if one still failed to compile here, the `Err` makes every search report the
/// whole text as a finding (fail closed: redacted or refused, never passed unchecked).
static BUILTIN_PATTERNS: std::sync::OnceLock<Result<Vec<Pattern>, String>> =
    std::sync::OnceLock::new();

fn builtin_patterns() -> &'static Result<Vec<Pattern>, String> {
    BUILTIN_PATTERNS.get_or_init(|| {
        BUILTINS
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
            .collect()
    })
}

/// The detectors one policy asks for, compiled once.
pub struct Detector {
    /// The built-in shapes are searched for (they are compiled lazily, see
    /// [`BUILTIN_PATTERNS`]).
    builtin: bool,
    /// The policy's own patterns, compiled when the detector is made, so that a pattern that
    /// does not compile is refused at start-up.
    patterns: Vec<Pattern>,
    /// Literal values, longest first, with their kind (`env:NAME`).
    literals: Vec<(String, String)>,
    /// The built-in shapes' anchors, for the quick test of a whole message.
    union: Option<Regex>,
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
                &self.literals.iter().map(|l| &l.1).collect::<Vec<_>>(),
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
            literals: Vec::new(),
            union: None,
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
        let union = if builtin {
            // Only literals: the regex crate runs such an expression as a multi-literal search.
            let all: Vec<String> = ANCHORS.iter().map(|a| regex::escape(a)).collect();
            Some(compile(&all.join("|")).map_err(|e| format!("built-in anchors: {e}"))?)
        } else {
            None
        };
        for (name, pattern) in patterns {
            let regex = compile(pattern).map_err(|e| format!("secret pattern {name:?}: {e}"))?;
            out.push(Pattern {
                kind: format!("pattern:{name}"),
                group: regex.capture_names().any(|n| n == Some("s")),
                regex,
                check: None,
            });
        }
        let mut literals: Vec<(String, String)> = literals
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(n, v)| (v.clone(), format!("env:{n}")))
            .collect();
        literals.sort_by_key(|l| std::cmp::Reverse(l.0.len()));
        Ok(Detector {
            builtin,
            patterns: out,
            literals,
            union,
        })
    }

    /// Whether there is anything to find at all.
    pub fn is_empty(&self) -> bool {
        !self.builtin && self.patterns.is_empty() && self.literals.is_empty()
    }

    /// A quick test of a whole JSON message's text: `false` only when no string in it can hold
    /// a finding. It looks for the built-in shapes' anchors in the raw text, and answers `true` for
    /// what that cannot decide: an escape that could spell a value differently from the string
    /// it decodes to (`\u`, `\/`), a user-given pattern, or a literal value (searched raw and
    /// JSON-escaped).
    pub fn may_contain(&self, json_text: &str) -> bool {
        if self.is_empty() {
            return false;
        }
        // A user-given pattern can match anything: only the full search can tell.
        if !self.patterns.is_empty() {
            return true;
        }
        if json_text.contains("\\u") || json_text.contains("\\/") {
            return true;
        }
        // Every anchor is free of characters JSON escapes, so it shows in the raw text as it is.
        if self.union.as_ref().is_some_and(|u| u.is_match(json_text)) {
            return true;
        }
        self.literals.iter().any(|(value, _)| {
            json_text.contains(value.as_str()) || {
                let escaped = serde_json::to_string(value).unwrap_or_default();
                json_text.contains(escaped.trim_matches('"'))
            }
        })
    }

    /// Every secret-shaped value in `text`, in order, not overlapping (where two detectors
    /// overlap, the earlier-starting one wins, then the longer).
    pub fn find(&self, text: &str) -> Vec<Hit> {
        let mut hits: Vec<Hit> = Vec::new();
        let builtin: &[Pattern] = match (self.builtin, builtin_patterns()) {
            (false, _) => &[],
            (true, Ok(patterns)) => patterns,
            (true, Err(_)) => {
                return vec![Hit {
                    kind: "built-in-detector-unavailable".to_string(),
                    range: 0..text.len(),
                }]
            }
        };
        for p in builtin.iter().chain(&self.patterns) {
            if p.group {
                for caps in p.regex.captures_iter(text) {
                    if let Some(m) = caps.name("s") {
                        if p.check.is_none_or(|c| c(m.as_str())) {
                            hits.push(Hit {
                                kind: p.kind.clone(),
                                range: m.range(),
                            });
                        }
                    }
                }
            } else {
                for m in p.regex.find_iter(text) {
                    let range = trim_context(text, m.range());
                    if !range.is_empty() && p.check.is_none_or(|c| c(&text[range.clone()])) {
                        hits.push(Hit {
                            kind: p.kind.clone(),
                            range,
                        });
                    }
                }
            }
        }
        for (value, kind) in &self.literals {
            let mut from = 0;
            while let Some(at) = text[from..].find(value.as_str()) {
                let start = from + at;
                hits.push(Hit {
                    kind: kind.clone(),
                    range: start..start + value.len(),
                });
                from = start + value.len();
            }
        }
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
mod tests;
