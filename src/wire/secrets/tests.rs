use super::*;

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
