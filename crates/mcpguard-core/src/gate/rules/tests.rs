use super::*;
use serde_json::json;

fn rule(toml_rule: &str, folders: Option<Vec<&str>>) -> Rule {
    let r: ArgumentRule = toml::from_str(toml_rule).unwrap();
    Rule::new(
        "/v",
        &r,
        folders.map(|f| f.into_iter().map(PathBuf::from).collect()),
        Some(PathBuf::from("/home/u/work")),
    )
    .unwrap()
}

fn key(r: &Rule, v: &str) -> Option<&'static str> {
    r.check(&json!(v)).err().map(|b| b.key)
}

#[test]
fn paths_must_lie_within_a_folder_after_dot_dot_is_applied() {
    let r = rule("", Some(vec!["/home/u/notes", "/tmp/x/"]));
    for ok in [
        "/home/u/notes",
        "/home/u/notes/a.txt",
        "/home/u/notes/./sub/../b.txt",
        "file:///home/u/notes/c",
        "/tmp/x/y",
        "../notes/a", // relative to /home/u/work
    ] {
        assert_eq!(key(&r, ok), None, "{ok}");
    }
    for bad in [
        "/home/u/notes/../.ssh/id_rsa",
        "/home/u/notesX/a",
        "/etc/passwd",
        "notes/a",
        "/home/u/notes/../../../../etc",
        "/tmp/xy",
    ] {
        assert_eq!(key(&r, bad), Some("paths"), "{bad}");
    }
    let b = r.check(&json!("/etc/shadow")).unwrap_err();
    assert!(
        !b.why.contains("shadow"),
        "the value is never quoted: {}",
        b.why
    );
    assert!(b.why.contains("lexical"), "{}", b.why);
}

#[test]
fn urls_are_held_to_schemes_and_hosts_and_metadata_is_never_allowed() {
    let r = rule(
        "url_schemes = [\"https\"]\nhosts = [\"example.com\", \"*.example.org\"]",
        None,
    );
    assert_eq!(key(&r, "https://example.com/a"), None);
    assert_eq!(key(&r, "https://API.example.org:8443/x"), None);
    assert_eq!(key(&r, "https://example.org/"), Some("hosts"));
    assert_eq!(key(&r, "http://example.com/"), Some("url_schemes"));
    assert_eq!(key(&r, "https://example.com.evil.net/"), Some("hosts"));
    assert_eq!(key(&r, "https://example.com@evil.net/"), Some("hosts"));
    assert_eq!(key(&r, "not a url"), Some("url_schemes"));

    // Any URL rule refuses metadata and private addresses; private ones pass when allowed.
    let open = rule("deny_hosts = [\"evil.net\"]", None);
    for bad in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fd00:ec2::254]/",
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://2852039166/",
        "http://0xa9fea9fe/",
        "http://0251.0376.0251.0376/",
        "http://169.254.43518/",
        "http://[::ffff:169.254.169.254]/",
        "http://169.254.169.%32%35%34/",
        "http://METADATA.GOOGLE.INTERNAL./",
    ] {
        assert_eq!(key(&open, bad), Some("hosts"), "{bad}");
    }
    assert_eq!(key(&open, "https://evil.net/x"), Some("deny_hosts"));
    for private in [
        "http://127.0.0.1:8080/",
        "http://localhost/",
        "http://10.1.2.3/",
        "http://192.168.0.1/",
        "http://[::1]/",
        "http://[fe80::1]/",
        "http://0/",
    ] {
        assert_eq!(key(&open, private), Some("private_addresses"), "{private}");
    }
    let lan = rule(
        "deny_hosts = []\nhosts = [\"10.1.2.3\", \"169.254.169.254\"]\nprivate_addresses = true",
        None,
    );
    assert_eq!(key(&lan, "http://10.1.2.3/"), None);
    assert_eq!(key(&lan, "http://169.254.169.254/"), Some("hosts"));
}

#[test]
fn command_pattern_and_length_rules() {
    let r = rule(
        "command = true\nmax_length = 20\npattern = \"[a-z .-]+\"",
        None,
    );
    assert_eq!(key(&r, "ls -la"), None);
    for bad in [
        "ls; rm -rf x",
        "a && b",
        "$(id)",
        "`id`",
        "a | b",
        "a > b",
        "a\nb",
    ] {
        assert_eq!(key(&r, bad), Some("command"), "{bad:?}");
    }
    assert_eq!(key(&r, "ABC"), Some("pattern"));
    assert_eq!(key(&r, &"a".repeat(21)), Some("max_length"));
    assert_eq!(r.check(&json!(3)).unwrap_err().key, "rules");
}

#[test]
fn pointer_patterns_select_and_cover() {
    let p = PointerPattern::parse("/paths/*").unwrap();
    let args = json!({"paths": ["/a", "/b"], "x": 1});
    let got: Vec<String> = p.select(&args).into_iter().map(|(ptr, _)| ptr).collect();
    assert_eq!(got, ["/paths/0", "/paths/1"]);
    assert!(
        PointerPattern::parse("/a~1b")
            .unwrap()
            .select(&json!({"a/b": 1}))
            .len()
            == 1
    );
    assert!(p.covers(&["paths".into(), "3".into()]));
    assert!(p.covers(&["paths".into(), "3".into(), "deep".into()]));
    assert!(!p.covers(&["other".into(), "3".into()]));
    assert!(PointerPattern::parse("")
        .unwrap()
        .covers(&["anything".into()]));
    assert!(PointerPattern::parse("x").is_err());
}

#[test]
fn metadata_urls_are_found_anywhere_in_a_string() {
    assert!(metadata_url_in("curl -s http://169.254.169.254/latest/meta-data/iam").is_some());
    assert!(metadata_url_in("see (http://metadata.google.internal)").is_some());
    assert!(metadata_url_in("https://example.com/169.254.169.254").is_none());
    assert!(metadata_url_in("plain text 169.254.169.254").is_none());
    assert!(metadata_url_in("").is_none());
}
