use super::*;
use crate::wire::test_rng::Rng;

fn kinds(text: &str) -> Vec<String> {
    Detector::new(true, &[], &[])
        .unwrap()
        .find(text)
        .into_iter()
        .map(|h| h.kind)
        .collect()
}

/// Builds a token of `n` characters from a repeating alphabet, so that no real credential is
/// written in this file.
fn filler(n: usize) -> String {
    "a1B2c3D4e5F6g7H8i9J0".chars().cycle().take(n).collect()
}

#[test]
fn each_builtin_shape_matches_what_it_must() {
    let jwt = format!("eyJ{}.eyJ{}.{}", filler(20), filler(30), filler(43));
    let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA1b2c3\nd4e5f6==\n-----END RSA PRIVATE KEY-----";
    let cases: Vec<(String, &str)> = vec![
        ("key AKIAIOSFODNN7EXAMPLE here".into(), "aws-access-key-id"),
        ("ASIAY34FZKBOKMUTVV7A".into(), "aws-access-key-id"),
        (
            "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            "aws-secret-access-key",
        ),
        (
            "\"AWS_SECRET_ACCESS_KEY\": \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"".into(),
            "aws-secret-access-key",
        ),
        (
            "secretAccessKey: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            "aws-secret-access-key",
        ),
        (format!("token ghp_{}", filler(36)), "github-token"),
        (
            format!("github_pat_{}_{}", filler(22), filler(59)),
            "github-token",
        ),
        (format!("glpat-{}", filler(20)), "gitlab-token"),
        (format!("xoxb-123456789012-{}", filler(24)), "slack-token"),
        (
            format!(
                "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/{}",
                filler(24)
            ),
            "slack-webhook",
        ),
        (format!("sk_live_{}", filler(24)), "stripe-key"),
        (format!("rk_test_{}", filler(24)), "stripe-key"),
        (format!("sk-ant-api03-{}AA", filler(93)), "anthropic-key"),
        (format!("sk-proj-{}", filler(64)), "openai-key"),
        (
            format!("sk-{}T3BlbkFJ{}", filler(20), filler(20)),
            "openai-key",
        ),
        (format!("AIza{}", filler(35)), "google-api-key"),
        (format!("npm_{}", filler(36)), "npm-token"),
        (format!("pypi-AgEIcHlwaS5vcmc{}", filler(60)), "pypi-token"),
        (format!("hf_{}", filler(34)), "huggingface-token"),
        (jwt, "jwt"),
        (pem.into(), "private-key"),
        (
            format!("Authorization: Bearer {}", filler(32)),
            "bearer-credential",
        ),
        // "alice:s3cr3t-pass" in base64.
        (
            "Authorization: Basic YWxpY2U6czNjcjN0LXBhc3M=".into(),
            "basic-credential",
        ),
        (
            "postgres://app:Tr0ub4dor&3@db.internal:5432/app".into(),
            "connection-string-password",
        ),
        (
            "mongodb+srv://svc:hunter2hunter2@cluster0.example.net/".into(),
            "connection-string-password",
        ),
    ];
    for (text, kind) in cases {
        assert_eq!(kinds(&text), [kind], "{text:?}");
        let lower = text.to_ascii_lowercase();
        assert!(
            ANCHORS
                .iter()
                .any(|a| lower.contains(&a.to_ascii_lowercase())),
            "{text:?} holds no anchor, so the quick test would miss it"
        );
    }
}

#[test]
fn ordinary_text_is_left_alone() {
    for text in [
        "Read the complete contents of a file from the file system.",
        "The AKIA prefix marks AWS access keys.",
        "AKIAIOSFODNN7EXAMPL",    // one character short
        "XAKIAIOSFODNN7EXAMPLE1", // inside a longer word
        "sha1 da39a3ee5e6b4b0d3255bfef95601890afd80709 ok", // forty hex, no key name
        "commit 9fceb02d0ae598e95dc970b74767f19372d61af8",
        "Bearer authentication_is_described_here", // prose after Bearer
        "Basic usage of the tool is shown below",  // prose after Basic
        "Basic aGVsbG8gd29ybGQ=",                  // "hello world": no user:password pair
        "postgres://user:password@localhost/db",   // a documentation placeholder
        "postgres://user:${DB_PASSWORD}@localhost/db",
        "mysql://root:***@127.0.0.1/",
        "https://example.com/path?x=1",
        "see https://user@example.com/ for details",
        "ghp_short",
        "sk-1234",
        "the ask-ant-api03 project",
        "eyJhbGciOiJIUzI1NiJ9 alone is only a header",
        "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
        "hf_hub_download is a function",
        "2024-01-01T00:00:00Z value 12345678901234567890",
        "",
    ] {
        assert!(kinds(text).is_empty(), "{text:?} matched {:?}", kinds(text));
    }
}

#[test]
fn redaction_replaces_only_the_secret_and_names_its_kind() {
    let d = Detector::new(true, &[], &[]).unwrap();
    let (text, hits) = d
        .redact("id=AKIAIOSFODNN7EXAMPLE; db=postgres://app:Tr0ub4dor3@db/x")
        .unwrap();
    assert_eq!(
        text,
        "id=[redacted:aws-access-key-id]; db=postgres://app:[redacted:connection-string-password]@db/x"
    );
    assert_eq!(hits.len(), 2);
    assert!(d.redact("nothing here").is_none());
    // A PEM block is replaced whole, the text after it kept.
    let (text, _) = d
        .redact("key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----\nbye")
        .unwrap();
    assert_eq!(text, "key:\n[redacted:private-key]\nbye");
    // A truncated block: the header and the body up to the first character that is not base64.
    let (text, _) = d
        .redact("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\nkqhkiG9w0B\n")
        .unwrap();
    assert_eq!(text, "[redacted:private-key]\n");
}

#[test]
fn user_patterns_and_literals_are_found_with_their_names() {
    let d = Detector::new(
        false,
        &[("internal".into(), r"itk_[0-9a-f]{16}".into())],
        &[("MY_TOKEN".into(), "s3cr3t-value-42".into())],
    )
    .unwrap();
    let (text, hits) = d
        .redact("a itk_0123456789abcdef b s3cr3t-value-42 c")
        .unwrap();
    assert_eq!(
        text,
        "a [redacted:pattern:internal] b [redacted:env:MY_TOKEN] c"
    );
    assert_eq!(hits.len(), 2);
    // Without the built-ins, their shapes are not looked for.
    assert!(d.find("AKIAIOSFODNN7EXAMPLE").is_empty());
    assert!(Detector::new(false, &[("bad".into(), "(".into())], &[]).is_err());
    // The debug form never shows a literal value.
    assert!(!format!("{d:?}").contains("s3cr3t"));
}

#[test]
fn the_quick_test_never_misses_what_find_finds() {
    let d = Detector::new(true, &[], &[("T".into(), "quote\"d-value".into())]).unwrap();
    let jwt = format!("eyJ{}.eyJ{}.{}", filler(20), filler(30), filler(10));
    for (value, expect) in [
        (serde_json::json!({"text": "AKIAIOSFODNN7EXAMPLE"}), true),
        (
            serde_json::json!({"text": "-----BEGIN EC PRIVATE KEY-----\nMHc\n-----END EC PRIVATE KEY-----"}),
            true,
        ),
        (serde_json::json!({"text": jwt}), true),
        (serde_json::json!({"text": "a quote\"d-value"}), true),
        (serde_json::json!({"text": "plain words only"}), false),
    ] {
        let raw = serde_json::to_string(&value).unwrap();
        assert_eq!(d.may_contain(&raw), expect, "{raw}");
    }
    // An escaped spelling of a key is not decided by the raw text: the full scan runs.
    assert!(d.may_contain(r#"{"text":"\u0041KIAIOSFODNN7EXAMPLE"}"#));
    assert!(!Detector::none().may_contain("AKIAIOSFODNN7EXAMPLE"));
}

/// Pieces the generated texts are made of: every anchor, whole shapes, near-misses cut short,
/// contexts that `\b` and the trailing checks look at, placeholders, multi-byte characters.
fn pieces() -> Vec<String> {
    let mut p: Vec<String> = ANCHORS.iter().map(|a| a.to_string()).collect();
    p.extend(
        [
            "AKIAIOSFODNN7EXAMPLE",
            "aws_secret_access_key = ",
            "AWS_SECRET_KEY=\"",
            "SecretAccessKey: ",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "-----BEGIN RSA PRIVATE KEY-----\n",
            "-----BEGIN PRIVATE KEY-----",
            "\n-----END RSA PRIVATE KEY-----",
            "-----END PRIVATE KEY BLOCK-----",
            "MIIEowIBAAKCAQEA1b2c3\n",
            "Authorization: Bearer ",
            "bearer ",
            "Basic YWxpY2U6czNjcjN0LXBhc3M=",
            "Basic aGVsbG8gd29ybGQ=",
            "postgres://app:Tr0ub4dor&3@db.internal:5432/app",
            "mongodb+srv://svc:hunter2hunter2@cluster0.example.net/",
            "postgres://user:password@localhost/db",
            "https://hooks.slack.com/services/T0123ABCD/B0123ABCD/",
            "https://example.com/path?x=1 ",
            "a://b:c@d",
            "sk-ant-api03-",
            "sk-proj-",
            "T3BlbkFJ",
            "pypi-AgEIcHlwaS5vcmc",
            "github_pat_",
            ".eyJ",
            "xoxb-123456789012-",
            "sk_live_",
            "whsec_",
            "s3cr3t-value-42",
            "itk_0123456789abcdef",
            "é",
            "日本",
            "🙂",
            "\u{200b}",
            " ",
            "\n",
            "\"",
            "'",
            ":",
            "=",
            "@",
            "/",
            "_",
            "-",
            ".",
            "\\u0041",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    p.push(format!("AIza{} ", filler(35)));
    p.push(format!("npm_{}", filler(36)));
    p.push(format!(
        "eyJ{}.eyJ{}.{}",
        filler(12),
        filler(12),
        filler(10)
    ));
    p.push(format!("ghp_{}", filler(36)));
    p.push(format!("hf_{}", filler(34)));
    p.push(filler(8));
    p.push(filler(20));
    p.push(filler(36));
    p.push(filler(40));
    p.push(filler(64));
    p
}

/// A text of up to `n` pieces, with runs of token characters between them.
fn generated(rng: &mut Rng, pieces: &[String], n: usize) -> String {
    let mut text = String::new();
    for _ in 0..rng.below(n) + 1 {
        if rng.below(3) == 0 {
            let len = rng.below(70);
            let alphabet = b"AZaz09+/=_-.KEY";
            for _ in 0..len {
                text.push(alphabet[rng.below(alphabet.len())] as char);
            }
        } else {
            text.push_str(&pieces[rng.below(pieces.len())]);
        }
    }
    text
}

/// The detectors the differential tests compare: built-ins alone, with the policy's patterns
/// and literals, and the patterns and literals alone.
fn detectors() -> Vec<Detector> {
    let patterns = vec![
        ("internal".to_string(), r"itk_[0-9a-f]{16}".to_string()),
        (
            "grouped".to_string(),
            r"key=(?P<s>[A-Za-z0-9]{8,})".to_string(),
        ),
        ("empty".to_string(), r"x*".to_string()),
    ];
    let literals = vec![
        ("MY_TOKEN".to_string(), "s3cr3t-value-42".to_string()),
        ("OVERLAP".to_string(), "AKIAIOSF".to_string()),
        ("QUOTED".to_string(), "quote\"d-value/é".to_string()),
    ];
    vec![
        Detector::new(true, &[], &[]).unwrap(),
        Detector::new(true, &patterns[..2], &literals).unwrap(),
        Detector::new(true, &[], &literals).unwrap(),
        Detector::new(false, &patterns, &[]).unwrap(),
        Detector::new(false, &[], &literals).unwrap(),
    ]
}

/// Texts a tool returns for real: this repository's own documentation and sources (what a file
/// read returns), the tests' fixtures among them.
fn real_texts() -> Vec<String> {
    // This crate is `crates/mcpguard-core` in the repository.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for dir in [
        "docs",
        "crates/mcpguard-core/src/wire",
        "crates/mcpguard-core/src/gate",
        "tests/data/policies",
        "tests/peers",
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            if let Ok(text) = std::fs::read_to_string(&path) {
                out.push(text);
            }
        }
    }
    for name in ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"] {
        if let Ok(text) = std::fs::read_to_string(root.join(name)) {
            out.push(text);
        }
    }
    out
}

#[test]
fn the_scanner_finds_what_the_reference_search_finds() {
    let pieces = pieces();
    let detectors = detectors();
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut texts: Vec<String> = (0..2000)
        .map(|_| generated(&mut rng, &pieces, 12))
        .collect();
    texts.extend((0..200).map(|_| generated(&mut rng, &pieces, 400)));
    texts.extend(real_texts());
    assert!(texts.len() > 2200, "the repository's texts were not found");
    let mut found = 0;
    for text in &texts {
        for d in &detectors {
            let want = oracle::find(d, text);
            assert_eq!(d.find(text), want, "{d:?} over {text:?}");
            // Redaction replaces exactly the reference findings, each by its marker.
            let expected = (!want.is_empty()).then(|| {
                let mut out = String::new();
                let mut at = 0;
                for h in &want {
                    out.push_str(&text[at..h.range.start]);
                    out.push_str(&super::marker(&h.kind));
                    at = h.range.end;
                }
                out.push_str(&text[at..]);
                out
            });
            assert_eq!(
                d.redact(text).map(|(s, _)| s),
                expected,
                "{d:?} over {text:?}"
            );
            found += want.len();
        }
    }
    // The generated texts hold findings of every kind, so the comparison is not vacuous.
    assert!(found > 1000, "only {found} findings");
    let kinds: std::collections::BTreeSet<String> = texts
        .iter()
        .flat_map(|t| detectors[1].find(t))
        .map(|h| h.kind)
        .collect();
    for b in BUILTINS {
        assert!(kinds.contains(b.kind), "no {} among {kinds:?}", b.kind);
    }
}

#[test]
fn the_raw_quick_test_is_exact_where_it_says_no() {
    let pieces = pieces();
    let detectors = detectors();
    let mut rng = Rng(0x0dd_ba11_cafe_f00d);
    for _ in 0..1500 {
        let strings: Vec<String> = (0..rng.below(4) + 1)
            .map(|_| generated(&mut rng, &pieces, 6))
            .collect();
        let mut value = serde_json::json!({"content": strings});
        if rng.below(2) == 0 {
            value = serde_json::json!({"nested": [value, {"name": strings[0].clone()}]});
        }
        let mut raw = serde_json::to_string(&value).unwrap();
        if rng.below(4) == 0 {
            // Another spelling of the same strings: every `A` and `/` escaped.
            raw = raw.replace('A', "\\u0041").replace('/', "\\/");
        }
        let decoded: serde_json::Value = serde_json::from_str(&raw).unwrap();
        let mut texts = Vec::new();
        collect_texts(&decoded, &mut texts);
        for d in &detectors {
            let quick = d.may_contain(&raw);
            let any = texts.iter().any(|t| !oracle::find(d, t).is_empty());
            assert!(
                quick || !any,
                "{d:?}: the quick test missed a finding in {raw}"
            );
            if raw.len() >= d.min_len() {
                assert_eq!(quick, oracle::may_contain(d, &raw), "{d:?} over {raw}");
            }
        }
    }
}

fn collect_texts(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|c| collect_texts(c, out)),
        serde_json::Value::Object(o) => o.iter().for_each(|(k, c)| {
            out.push(k.clone());
            collect_texts(c, out)
        }),
        _ => {}
    }
}

#[test]
fn every_shape_is_anchored_where_the_scanner_looks() {
    let mut all: Vec<&str> = BUILTINS
        .iter()
        .flat_map(|b| b.anchors.iter().copied())
        .collect();
    all.sort();
    all.dedup();
    let mut listed: Vec<&str> = ANCHORS.to_vec();
    listed.sort();
    assert_eq!(
        all, listed,
        "the shapes' anchors and the quick test's differ"
    );
    // At most one anchor can start at a position, which the scanner's restart relies on.
    for a in ANCHORS {
        for b in ANCHORS {
            assert!(a == b || !b.starts_with(a), "{a:?} is a prefix of {b:?}");
        }
    }
    // Every match of a shape in the generated texts holds one of its anchors near its start.
    let pieces = pieces();
    let mut rng = Rng(0xfeed_beef_0000_0001);
    let Ok(b) = builtin_patterns() else {
        panic!("the built-in shapes compile")
    };
    for _ in 0..3000 {
        let text = generated(&mut rng, &pieces, 12);
        for (shape, p) in BUILTINS.iter().zip(&b.patterns) {
            for m in p.regex.find_iter(&text) {
                let near = &text[m.start()..m.end()];
                let anchored = shape.anchors.iter().any(|a| {
                    near.find(a)
                        .is_some_and(|at| at <= ANCHOR_REACH && at + a.len() <= near.len())
                });
                assert!(
                    anchored,
                    "{} matched {near:?} without an anchor",
                    shape.kind
                );
            }
        }
    }
}

#[test]
fn texts_shorter_than_any_shape_are_not_searched_and_hold_nothing() {
    let d = Detector::new(true, &[], &[]).unwrap();
    assert!(d.min_len() >= 8, "{}", d.min_len());
    // min_len is not too large: a secret exactly that long is still found (a larger bound
    // would skip strings that hold one).
    let shortest = "ab://c:d@e";
    assert_eq!(shortest.len(), d.min_len());
    assert!(
        !d.find(shortest).is_empty(),
        "{shortest:?} holds a password"
    );
    // A policy pattern that can match the empty text makes every text worth searching.
    let any = Detector::new(true, &[("x".into(), "x*".into())], &[]).unwrap();
    assert_eq!(any.min_len(), 0);
    let lit = Detector::new(false, &[], &[("T".into(), "abcdefgh".into())]).unwrap();
    assert_eq!(lit.min_len(), 8);
    assert!(!lit.may_contain("\"abc\""));
}

#[test]
fn private_keys_are_found_as_the_whole_pattern_finds_them() {
    // The shape runs as its parts (header, END line, body): held to the whole pattern over
    // headers with and without END lines, BLOCK, other key types, Unicode spaces in the body,
    // a header inside a body, END lines of another kind, and headers back to back.
    let parts = [
        "-----BEGIN PRIVATE KEY-----",
        "-----BEGIN RSA PRIVATE KEY-----",
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        "-----BEGIN  PRIVATE KEY----",
        "-----END PRIVATE KEY-----",
        "-----END RSA PRIVATE KEY-----",
        "-----END PGP PRIVATE KEY BLOCK-----",
        "-----END CERTIFICATE-----",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        "abc+/=",
        "\n",
        " ",
        "\u{2003}",
        "é",
        "-----",
        "PRIVATE KEY",
        "x",
    ];
    let d = Detector::new(true, &[], &[]).unwrap();
    let mut rng = Rng(0x007e_570f_9e3c_1a2b);
    let mut found = 0;
    for _ in 0..3000 {
        let text: String = (0..1 + rng.below(12))
            .map(|_| parts[rng.below(parts.len())])
            .collect();
        let want = oracle::find(&d, &text);
        found += want.len();
        assert_eq!(d.find(&text), want, "{text:?}");
    }
    assert!(found > 500, "only {found} findings");
}
