//! Updates that ask only about what changed (issue 13), proven with the real binary and the
//! fixture server: the operation class a review records and the policy that trusts it, `mcpguard
//! update` (carried reviews, the triage, `.prev`, the pinned host configuration, `--yes`, the
//! unchanged no-op), and the interactive review driven through a pseudo-terminal.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::support::{fixture, mcpguard, run_bounded, Peer};

/// What one finished mcpguard command did.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    /// Asserts exit 0 and returns the single digest line on stdout.
    fn digest(&self) -> String {
        assert_eq!(
            self.code, 0,
            "expected success; stdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        let d = self.stdout.trim_end().rsplit('\n').next().unwrap_or("");
        assert!(
            d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit()),
            "the last stdout line is not a SHA-256: {:?}",
            self.stdout
        );
        d.to_string()
    }
}

fn guard<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    let out = run_bounded(Command::new(mcpguard()).args(args));
    Run {
        code: out.status.code().expect("mcpguard exited by a signal"),
        stdout: String::from_utf8(out.stdout).expect("UTF-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("UTF-8 stderr"),
    }
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// The fixture's command line with `flags`.
fn fixture_cmd(flags: &[&str]) -> Vec<OsString> {
    let mut v = vec![fixture().into_os_string()];
    v.extend(os(flags));
    v
}

/// `mcpguard capture --server fx --out SNAP -- fixture FLAGS`, asserting success.
fn capture(snap: &Path, flags: &[&str]) -> String {
    let mut args = os(&["capture", "--server", "fx", "--out"]);
    args.push(snap.into());
    args.extend(os(&["--timeout", "20s", "--"]));
    args.extend(fixture_cmd(flags));
    guard(&args).digest()
}

/// A complete review with the operation class `class` (none when empty) and these channels.
fn review_obj(class: &str, channels: Value) -> Value {
    let mut r = json!({"reviewer": "itest@example.test",
        "assertions": {"headless": true, "independentCalls": true, "modelBacked": false,
                       "sideEffects": [], "concurrency": "safe", "referenceBasedIO": true},
        "inputChannels": channels});
    if !class.is_empty() {
        r["sideEffect"] = json!(class);
    }
    r
}

/// `mcpguard review SNAP --server fx --from REVIEWS`, asserting success; returns the digest.
fn review_from(dir: &Path, snap: &Path, reviews: &Value) -> String {
    let file = dir.join("reviews.json");
    std::fs::write(&file, reviews.to_string()).unwrap();
    let mut args = os(&["review"]);
    args.push(snap.into());
    args.extend(os(&["--server", "fx", "--from"]));
    args.push(file.into());
    guard(&args).digest()
}

fn load(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The reviews of server `fx` in a snapshot file.
fn reviews_of(path: &Path) -> serde_json::Map<String, Value> {
    load(path)["servers"]["fx"]["reviews"]
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// mcpguard enforcing `snap` (server fx) over the fixture, with `policy` when given.
fn guarded(snap: &Path, digest: &str, policy: Option<&Path>, flags: &[&str]) -> Peer {
    let mut argv: Vec<OsString> = os(&["--manifest"]);
    argv.push(snap.into());
    argv.extend(os(&["--sha256", digest, "--server", "fx"]));
    if let Some(p) = policy {
        argv.push("--policy".into());
        argv.push(p.into());
    }
    argv.push("--".into());
    argv.extend(fixture_cmd(flags));
    Peer::guard(&argv)
}

/// The refusal code of a `tools/call` answer, or "" when the call went through.
fn refusal(r: &Value) -> String {
    r["result"]["_meta"]["dev.mcpguard/refusal"]["code"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn call(peer: &mut Peer, id: i64, tool: &str, arguments: Value) -> Value {
    peer.request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

// ---------------------------------------------------------------------------------------------
// The operation class in the review, and the policy that trusts it.

/// A review's `sideEffect` classifies the tool under the built-in policy, with no table: a
/// reviewed read passes without a person, a reviewed write needs one (this host cannot be asked,
/// so it is refused with `approval_required`), and a reviewed read with an `authority` channel
/// stays a write. A `[writes.tools]` table overrides the review; `trust_reviews = false` ignores it.
#[test]
fn reviewed_classes_classify_calls_and_authority_stays_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("fx.snapshot.json");
    capture(&snap, &[]);

    // The class is recorded from the command line, covered by the digest like every field.
    let before = guard(&[OsString::from("hash"), snap.clone().into()]).digest();
    let mut args = os(&["review"]);
    args.push(snap.clone().into());
    args.extend(os(&[
        "--server",
        "fx",
        "--tool",
        "echo",
        "--reviewer",
        "itest@example.test",
        "--side-effect",
        "read",
        "--assert",
        "headless=true",
        "--assert",
        "independentCalls=true",
        "--assert",
        "modelBacked=false",
        "--assert",
        "sideEffects=",
        "--assert",
        "concurrency=safe",
        "--assert",
        "referenceBasedIO=true",
        "--channel",
        "/text=data",
    ]));
    let after = guard(&args).digest();
    assert_ne!(before, after);
    assert_eq!(reviews_of(&snap)["echo"]["sideEffect"], "read");

    // Without a class the review still records, with a note that the tool is a write.
    let mut no_class = args.clone();
    let at = no_class.iter().position(|a| a == "--side-effect").unwrap();
    no_class.drain(at..at + 2);
    let pos = no_class.iter().position(|a| a == "echo").unwrap();
    no_class[pos] = "slow".into();
    let last = no_class.len() - 1;
    no_class[last] = "/ms=data".into();
    let r = guard(&no_class);
    r.digest();
    assert!(
        r.stderr.contains("no operation class recorded for slow"),
        "{}",
        r.stderr
    );

    // A class outside seed 004's vocabulary is refused, on the command line and in a file.
    let mut bad = args.clone();
    let at = bad.iter().position(|a| a == "--side-effect").unwrap();
    bad[at + 1] = "write".into();
    let r = guard(&bad);
    assert_eq!(r.code, 2, "{}", r.stderr);
    let file = dir.path().join("bad.json");
    std::fs::write(
        &file,
        json!({"add": review_obj("publish", json!({"/a": "data", "/b": "data"}))}).to_string(),
    )
    .unwrap();
    let mut from = os(&["review"]);
    from.push(snap.clone().into());
    from.extend(os(&["--server", "fx", "--from"]));
    from.push(file.into());
    let r = guard(&from);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr
            .contains("/reviews/add/sideEffect: the operation class must be"),
        "{}",
        r.stderr
    );

    let digest = review_from(
        dir.path(),
        &snap,
        &json!({
            // A reviewed read whose path argument is an authority channel.
            "write_note": review_obj("read", json!({"/path": "authority", "/body": "data"})),
            "add": review_obj("update", json!({"/a": "data", "/b": "data"})),
            "big": review_obj("", json!({"/bytes": "data"})),
        }),
    );
    let shown = guard(&[
        OsString::from("show"),
        snap.clone().into(),
        "--tool".into(),
        "add".into(),
    ]);
    assert!(
        shown.stdout.contains("    sideEffect: \"update\"\n"),
        "{}",
        shown.stdout
    );

    // The built-in policy: no table for any of them.
    let mut p = guarded(&snap, &digest, None, &[]);
    p.initialize();
    let r = call(&mut p, 1, "echo", json!({"text": "hi"}));
    assert_eq!(refusal(&r), "", "a reviewed read passes: {r}");
    assert_eq!(r["result"]["structuredContent"]["text"], "hi");
    let r = call(&mut p, 2, "add", json!({"a": 1, "b": 2}));
    assert_eq!(
        refusal(&r),
        "approval_required",
        "a reviewed update is a write: {r}"
    );
    let r = call(&mut p, 3, "write_note", json!({"path": "/x", "body": "b"}));
    assert_eq!(
        refusal(&r),
        "approval_required",
        "read + authority is a write: {r}"
    );
    let text = r["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains("authority"), "{text}");
    let r = call(&mut p, 4, "big", json!({"bytes": 3}));
    assert_eq!(refusal(&r), "approval_required", "no class: a write: {r}");
    drop(p);

    // A table overrides the review: add becomes a read, echo a confirmed write.
    let policy = dir.path().join("override.toml");
    std::fs::write(
        &policy,
        "[writes.tools.add]\nside_effect = \"read\"\n[writes.tools.echo]\nside_effect = \"update\"\n",
    )
    .unwrap();
    let mut p = guarded(&snap, &digest, Some(&policy), &[]);
    p.initialize();
    let r = call(&mut p, 1, "add", json!({"a": 1, "b": 2}));
    assert_eq!(r["result"]["structuredContent"]["sum"], 3.0, "{r}");
    let r = call(&mut p, 2, "echo", json!({"text": "hi"}));
    assert_eq!(refusal(&r), "approval_required", "{r}");
    drop(p);

    // trust_reviews = false: the review's class decides nothing.
    let policy = dir.path().join("distrust.toml");
    std::fs::write(&policy, "[writes]\ntrust_reviews = false\n").unwrap();
    let mut p = guarded(&snap, &digest, Some(&policy), &[]);
    p.initialize();
    let r = call(&mut p, 1, "echo", json!({"text": "hi"}));
    assert_eq!(refusal(&r), "approval_required", "{r}");
}
