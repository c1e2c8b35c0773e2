//! The gate, end to end: the real mcpguard binary enforcing a snapshot captured and reviewed from
//! the fixture server. Every refusal is checked on both sides: what the host sees, and (from the
//! fixture's log of every line it received) that the server never saw the refused call.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::support::{fixture, mcpguard, reads_policy, reads_policy_with, sandbox_grants, Peer};

/// The fixture's tools this suite reviews, with their input channels.
fn reviews() -> Value {
    let r = |channels: Value, concurrency: &str| {
        json!({"reviewer": "itest@example.test", "assertions": {"headless": true, "independentCalls": true, "modelBacked": false,
               "sideEffects": [], "concurrency": concurrency, "referenceBasedIO": true}, "inputChannels": channels})
    };
    json!({
        "echo": r(json!({"/text": "data"}), "safe"),
        "add": r(json!({"/a": "data", "/b": "data"}), "safe"),
        "write_note": r(json!({"/path": "authority", "/body": "data"}), "serialize"),
        "slow": r(json!({"/ms": "data"}), "safe"),
        "crash": r(json!({"/code": "data"}), "safe"),
        "bad_output": r(json!({}), "safe"),
        "no_structured": r(json!({}), "safe"),
        "fail": r(json!({}), "safe"),
        "rpc_error": r(json!({}), "safe"),
        "list_changed": r(json!({}), "safe"),
        "ask_sampling": r(json!({}), "safe"),
        "ask_roots": r(json!({}), "safe"),
        "notify": r(json!({}), "safe"),
        "task_tool": r(json!({}), "safe"),
    })
}

/// Captures the fixture (started with `args`) and reviews the tools above; returns the snapshot
/// path and its digest.
pub fn reviewed_snapshot(dir: &Path, args: &[&str]) -> (PathBuf, String) {
    let snap = dir.join("fixture.snapshot.json");
    let out = Command::new(mcpguard())
        .args(["capture", "--server", "fixture", "--out"])
        .arg(&snap)
        .arg("--")
        .arg(fixture())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "capture failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reviews_file = dir.join("reviews.json");
    std::fs::write(&reviews_file, reviews().to_string()).unwrap();
    let out = Command::new(mcpguard())
        .arg("review")
        .arg(&snap)
        .args(["--server", "fixture", "--from"])
        .arg(&reviews_file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "review failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let digest = String::from_utf8(out.stdout).unwrap().trim().to_string();
    (snap, digest)
}

/// A guarded fixture: mcpguard enforcing `snap`, the fixture started with `args` and logging
/// what it receives to `log`.
fn guarded(snap: &Path, digest: &str, log: &Path, args: &[&str]) -> Peer {
    let mut fixture_args = vec!["--log".to_string(), log.display().to_string()];
    fixture_args.extend(args.iter().map(|s| s.to_string()));
    guarded_with(snap, digest, &[], &fixture_args)
}

/// mcpguard enforcing `snap` with extra options `opts`, over the fixture started with
/// `fixture_args`.
pub fn guarded_with(snap: &Path, digest: &str, opts: &[String], fixture_args: &[String]) -> Peer {
    Peer::guard(&guarded_argv(snap, digest, opts, fixture_args))
}

/// The arguments of mcpguard in `guarded_with` (also what a host configuration runs).
pub fn guarded_argv(
    snap: &Path,
    digest: &str,
    opts: &[String],
    fixture_args: &[String],
) -> Vec<String> {
    let mut argv: Vec<String> = vec![
        "--manifest".into(),
        snap.display().to_string(),
        "--sha256".into(),
        digest.into(),
        "--server".into(),
        "fixture".into(),
    ];
    if !opts.iter().any(|o| o == "--policy") {
        argv.extend(["--policy".into(), reads_policy().display().to_string()]);
    }
    argv.extend(opts.iter().cloned());
    argv.extend(sandbox_grants(fixture_args));
    argv.push("--".into());
    argv.push(fixture().display().to_string());
    argv.extend(fixture_args.iter().cloned());
    argv
}

/// The tool names of a `tools/list` response.
pub fn tool_names(list: &Value) -> Vec<&str> {
    list["result"]["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default()
}

/// What the server received, one JSON value per line.
fn received(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub fn calls_received(log: &Path) -> Vec<String> {
    received(log)
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"]["name"].as_str().unwrap_or("").to_string())
        .collect()
}

fn call(p: &mut Peer, id: i64, name: &str, args: Value) -> Value {
    p.request(id, "tools/call", json!({"name": name, "arguments": args}))
}

/// The refusal contract of a tool error result (always in `_meta`).
fn sc(v: &Value) -> &Value {
    &v["result"]["_meta"]["dev.mcpguard/refusal"]
}

#[test]
fn a_reviewed_tool_is_served_and_called() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let mut p = guarded(&snap, &digest, &log, &[]);
    let init = p.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], "mcpguard-fixture");
    let list = p.request(1, "tools/list", json!({}));
    let names = tool_names(&list);
    assert!(
        names.contains(&"echo") && !names.contains(&"big"),
        "only reviewed tools are listed: {names:?}"
    );
    let r = call(&mut p, 2, "echo", json!({"text": "hello"}));
    assert_eq!(r["result"]["structuredContent"]["text"], "hello", "{r}");
    assert_eq!(calls_received(&log), vec!["echo"]);
}

#[test]
fn refused_calls_never_reach_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let mut p = guarded(&snap, &digest, &log, &[]);
    p.initialize();
    let r = call(&mut p, 1, "big", json!({"bytes": 1}));
    assert_eq!(r["error"]["code"], -32602, "an unreviewed tool: {r}");
    let r = call(&mut p, 2, "no_such_tool", json!({}));
    assert_eq!(r["error"]["code"], -32602);
    let r = call(&mut p, 3, "echo", json!({"text": 42}));
    assert_eq!(sc(&r)["code"], "invalid_arguments", "{r}");
    assert!(
        !r.to_string().contains("42"),
        "argument values are not echoed: {r}"
    );
    let r = call(&mut p, 4, "task_tool", json!({}));
    assert_eq!(sc(&r)["code"], "capability_denied");
    let r = p.request(
        5,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}, "task": {"ttl": 1000}}),
    );
    assert_eq!(sc(&r)["code"], "capability_denied");
    let r = p.request(6, "prompts/list", json!({}));
    assert_eq!(r["error"]["code"], -32601);
    // The explanation is written after the reply, so wait for it rather than sample once.
    p.wait_stderr("refused");
    p.close_stdin();
    p.wait();
    assert_eq!(calls_received(&log), Vec::<String>::new());
}

/// The `tools/call` lines the server received, parsed.
fn call_lines_received(log: &Path) -> Vec<Value> {
    received(log)
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .collect()
}

#[test]
fn undeclared_arguments_are_refused_unless_the_policy_relaxes_them_for_the_tool() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let mut p = guarded(&snap, &digest, &log, &[]);
    p.initialize();
    // The reviewed echo schema declares only `text` and says nothing of other members.
    let r = call(
        &mut p,
        1,
        "echo",
        json!({"text": "hi", "path": "/etc/shadow-value"}),
    );
    assert_eq!(r["result"]["isError"], true, "{r}");
    let contract = sc(&r);
    assert_eq!(contract["code"], "undeclared_argument", "{r}");
    assert_eq!(contract["category"], "input");
    assert_eq!(contract["retryable"], false);
    assert_eq!(contract["outcomeKnown"], true);
    assert!(
        contract["message"].as_str().unwrap().contains("/path"),
        "{r}"
    );
    assert!(
        !r.to_string().contains("shadow-value"),
        "never the value: {r}"
    );
    // Declared arguments pass.
    let r = call(&mut p, 2, "add", json!({"a": 1, "b": 2}));
    assert_eq!(r["result"]["structuredContent"]["sum"], 3, "{r}");
    p.wait_stderr("does not declare");
    p.close_stdin();
    p.wait();
    let calls = call_lines_received(&log);
    assert_eq!(calls.len(), 1, "only the declared call arrived: {calls:?}");
    assert_eq!(calls[0]["params"]["name"], "add");

    // The policy relaxes it for echo only; the call then goes out as the host sent it.
    let policy = dir.path().join("open-echo.toml");
    std::fs::write(
        &policy,
        reads_policy_with("[arguments.tools.echo]\nclosed = false\n"),
    )
    .unwrap();
    let out = Command::new(mcpguard())
        .args(["policy", "check"])
        .arg(&policy)
        .output()
        .unwrap();
    let effective = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        effective.contains("[arguments]\nclosed = true\n")
            && effective.contains("[arguments.tools.echo]\nclosed = false\n"),
        "{effective}"
    );
    let log = dir.path().join("server-open.log");
    let opts = ["--policy".to_string(), policy.display().to_string()];
    let fixture_args = ["--log".to_string(), log.display().to_string()];
    let mut p = guarded_with(&snap, &digest, &opts, &fixture_args);
    p.initialize();
    let r = call(&mut p, 3, "echo", json!({"text": "hi", "extra": true}));
    assert_eq!(r["result"]["structuredContent"]["text"], "hi", "{r}");
    let r = call(&mut p, 4, "add", json!({"a": 1, "b": 2, "c": 3}));
    assert_eq!(
        sc(&r)["code"],
        "undeclared_argument",
        "add stays closed: {r}"
    );
    p.close_stdin();
    p.wait();
    let calls = call_lines_received(&log);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        calls[0]["params"]["arguments"],
        json!({"text": "hi", "extra": true})
    );

    // The reviewer's view says the schemas are closed.
    let out = Command::new(mcpguard())
        .arg("show")
        .arg(&snap)
        .output()
        .unwrap();
    let view = String::from_utf8_lossy(&out.stdout);
    assert!(
        view.contains("arguments: closed: members the inputSchema does not declare are refused"),
        "{view}"
    );
}

#[test]
fn requests_before_the_handshake_and_a_second_initialize_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let mut p = guarded(&snap, &digest, &log, &[]);
    let r = call(&mut p, 1, "echo", json!({"text": "early"}));
    assert_eq!(r["error"]["code"], -31005, "{r}");
    let r = p.request(2, "server/discover", json!({}));
    assert_eq!(r["error"]["code"], -32601);
    p.initialize();
    let r = p.request(3, "initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}));
    assert_eq!(r["error"]["code"], -32600);
    p.close_stdin();
    p.wait();
    let methods: Vec<Value> = received(&log).iter().map(|m| m["method"].clone()).collect();
    assert_eq!(
        methods.iter().filter(|m| **m == "initialize").count(),
        1,
        "{methods:?}"
    );
    assert!(!methods.contains(&json!("tools/call")));
}

/// Gemini CLI's case (issue 15): a host that asks for 2025-06-18 is answered in 2025-06-18 by a
/// default (2025-11-25) snapshot, and its calls work, while the server runs the pinned version.
#[test]
fn the_server_is_initialized_with_the_pinned_version_and_blocked_capabilities_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let mut p = guarded(&snap, &digest, &log, &[]);
    let r = p.request(0, "initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}, "roots": {"listChanged": true}, "elicitation": {}, "experimental": {"x": {}}}, "clientInfo": {"name": "host", "version": "9"}}));
    assert_eq!(
        r["result"]["protocolVersion"], "2025-06-18",
        "the host hears its own version: {r}"
    );
    p.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let r = call(&mut p, 1, "echo", json!({"text": "hi"}));
    assert_eq!(r["result"]["structuredContent"]["text"], "hi", "{r}");
    let init = received(&log)
        .into_iter()
        .find(|m| m["method"] == "initialize")
        .unwrap();
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        init["params"]["capabilities"],
        json!({"experimental": {"x": {}}})
    );
    assert_eq!(
        init["params"]["clientInfo"],
        json!({"name": "host", "version": "9"}),
        "clientInfo is forwarded as is"
    );
}

/// A host version the pinned catalogue cannot be served in is refused before the server is
/// initialized: across the era boundary. The message names both versions and the capture flag.
/// (The other case, below 2025-11-25 with a tool that requires tasks, needs `tasks = true`,
/// which the policy no longer accepts: see `a_policy_letting_tasks_through_refuses_to_start`.)
#[test]
fn a_host_version_the_snapshot_cannot_be_served_in_is_refused_with_the_capture_flag() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let fixture_args = ["--log".to_string(), log.display().to_string()];
    let mut p = guarded_with(&snap, &digest, &[], &fixture_args);
    let init = |v: &str| json!({"protocolVersion": v, "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}});
    for (id, asked, names) in [(
        0,
        "2026-07-28",
        vec!["2026-07-28", "2025-11-25", "--protocol-version 2026-07-28"],
    )] {
        let r = p.request(id, "initialize", init(asked));
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert_eq!(r["error"]["data"]["requested"], asked, "{r}");
        let m = r["error"]["message"].as_str().unwrap();
        for n in names {
            assert!(m.contains(n), "{n}: {m}");
        }
    }
    let r = p.request(2, "initialize", init("2025-11-25"));
    assert_eq!(
        r["result"]["protocolVersion"], "2025-11-25",
        "a retry may succeed: {r}"
    );
    p.close_stdin();
    p.wait();
    let inits = received(&log)
        .iter()
        .filter(|m| m["method"] == "initialize")
        .count();
    assert_eq!(inits, 1, "the refused ones never reached the server");
}

/// Issue 15's noise: a healthy session, with the `server/discover` probe dual-era hosts send
/// first, leaves no line of mcpguard's on stderr at the default level (hosts record stderr, some
/// as errors); `MCPGUARD_LOG=info` shows what was enforced and the probe's answer.
#[test]
fn a_healthy_session_is_quiet_at_the_default_level_and_detailed_at_info() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    for level in [None, Some("info")] {
        let mut cmd = Command::new(mcpguard());
        cmd.args(guarded_argv(&snap, &digest, &[], &[]))
            .env_remove("MCPGUARD_LOG");
        if let Some(l) = level {
            cmd.env("MCPGUARD_LOG", l);
        }
        let mut p = Peer::start_with(&mut cmd);
        let r = p.request(0, "server/discover", json!({}));
        assert_eq!(r["error"]["code"], -32601, "the probe's answer: {r}");
        p.initialize();
        let r = call(&mut p, 1, "echo", json!({"text": "hi"}));
        assert_eq!(r["result"]["structuredContent"]["text"], "hi", "{r}");
        p.close_stdin();
        assert!(p.wait().success(), "{}", p.stderr());
        let stderr = p.stderr();
        let ours: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("mcpguard:"))
            .collect();
        match level {
            None => assert!(ours.is_empty(), "a healthy start is quiet: {ours:#?}"),
            Some(_) => {
                for needle in [
                    "info: enforcing snapshot",
                    "info: server/discover is not available",
                ] {
                    assert!(
                        ours.iter().any(|l| l.contains(needle)),
                        "{needle}: {ours:#?}"
                    );
                }
                assert!(!stderr.contains("warning"), "{stderr}");
            }
        }
    }
}

#[test]
fn a_changed_server_identity_refuses_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let mut p = guarded(&snap, &digest, &log, &["--server-version", "1.0.1"]);
    let r = p.request(0, "initialize", json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "h", "version": "1"}}));
    assert_eq!(r["error"]["code"], -31006, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/serverInfo/version"),
        "{r}"
    );
    let r = call(&mut p, 1, "echo", json!({"text": "x"}));
    assert_eq!(r["error"]["code"], -31006);
    assert!(calls_received(&log).is_empty());
}

#[test]
fn drift_in_one_keyword_is_caught_before_dispatch() {
    for flag in [
        vec!["--describe-suffix", "!"],
        vec!["--annotation-drift"],
        vec!["--schema-drift"],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
        let log = dir.path().join("server.log");
        let mut p = guarded(&snap, &digest, &log, &flag);
        p.initialize();
        let list = p.request(1, "tools/list", json!({}));
        let names = tool_names(&list);
        assert!(
            !names.contains(&"echo"),
            "{flag:?}: a drifted tool is not listed"
        );
        let r = call(&mut p, 2, "echo", json!({"text": "x"}));
        assert_eq!(sc(&r)["code"], "tool_drift", "{flag:?}: {r}");
        let r = call(&mut p, 3, "add", json!({"a": 1, "b": 2}));
        assert_eq!(
            sc(&r)["code"],
            "review_invalidated",
            "{flag:?}: after drift nothing passes"
        );
        p.close_stdin();
        p.wait();
        assert!(calls_received(&log).is_empty(), "{flag:?}");
    }
}

#[test]
fn a_rug_pull_after_the_first_list_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    // The fixture answers the binding walk honestly and changes echo's description afterwards.
    let mut p = guarded(&snap, &digest, &log, &["--rug-pull-after", "1"]);
    p.initialize();
    let r = call(&mut p, 1, "echo", json!({"text": "x"}));
    assert_eq!(sc(&r)["code"], "tool_drift", "{r}");
    assert!(sc(&r)["message"].as_str().unwrap().contains("/description"));
    assert!(calls_received(&log).is_empty());
}

#[test]
fn list_changed_during_a_call_makes_its_result_indeterminate_and_ends_the_review() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let mut p = guarded(&snap, &digest, &log, &[]);
    p.initialize();
    let r = call(&mut p, 1, "list_changed", json!({}));
    assert_eq!(sc(&r)["code"], "UNKNOWN_DISPATCH_OUTCOME", "{r}");
    assert_eq!(sc(&r)["outcomeKnown"], false);
    let r = call(&mut p, 2, "echo", json!({"text": "x"}));
    assert_eq!(sc(&r)["code"], "review_invalidated");
    let list = p.request(3, "tools/list", json!({}));
    assert_eq!(list["result"]["tools"], json!([]));
    assert_eq!(calls_received(&log), vec!["list_changed"]);
}

#[test]
fn results_must_honour_the_reviewed_output_schema() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let mut p = guarded(&snap, &digest, &log, &[]);
    p.initialize();
    let r = call(&mut p, 1, "bad_output", json!({}));
    assert_eq!(sc(&r)["code"], "output_contract_violation", "{r}");
    let r = call(&mut p, 2, "no_structured", json!({}));
    assert_eq!(sc(&r)["code"], "output_contract_violation", "{r}");
    let r = call(&mut p, 3, "add", json!({"a": 1, "b": 2}));
    assert_eq!(r["result"]["structuredContent"]["sum"], 3);
}

#[test]
fn server_error_text_is_sanitized() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let mut p = guarded(&snap, &digest, &log, &[]);
    p.initialize();
    for (id, tool) in [(1, "fail"), (2, "rpc_error")] {
        let r = call(&mut p, id, tool, json!({}));
        let text = r.to_string();
        for hidden in ['\u{1b}', '\u{202e}', '\u{200b}', '\u{e0041}', '\u{85}'] {
            assert!(!text.contains(hidden), "{tool}: {hidden:?} passed: {text}");
        }
        assert!(
            text.contains("\\\\u{202E}"),
            "{tool}: hidden characters are made visible: {text}"
        );
    }
}

#[test]
fn server_requests_for_excluded_capabilities_are_answered_with_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let mut p = guarded(&snap, &digest, &log, &[]);
    p.initialize();
    for (id, tool) in [(1, "ask_sampling"), (2, "ask_roots")] {
        p.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}}));
        let (r, seen) = p.recv_response(&json!(id));
        assert!(
            seen.iter().all(|m| m
                .get("method")
                .is_none_or(|m| m != "sampling/createMessage" && m != "roots/list")),
            "{tool}: the host saw {seen:?}"
        );
        let text = r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            text.contains("error") && text.contains("-32601"),
            "{tool}: the server got an error: {r}"
        );
    }
}

#[test]
fn a_tampered_or_expired_snapshot_never_starts_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let marker = dir.path().join("started");
    let server = [
        "--",
        "sh",
        "-c",
        &format!("touch {}; cat", marker.display()),
    ];
    let run = |args: Vec<String>| {
        let mut p = Peer::guard(&args);
        let status = p.wait();
        (status, p.stderr())
    };
    let base = |d: &str| -> Vec<String> {
        let mut v = vec![
            "--manifest".into(),
            snap.display().to_string(),
            "--sha256".into(),
            d.into(),
            "--server".into(),
            "fixture".into(),
        ];
        v.extend(server.iter().map(|s| s.to_string()));
        v
    };
    let (status, err) = run(base(&"0".repeat(64)));
    assert!(!status.success());
    assert!(err.contains("digest mismatch"), "{err}");
    // Edit one review: the digest no longer matches.
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&snap).unwrap()).unwrap();
    doc["servers"]["fixture"]["reviews"]["echo"]["reviewer"] = json!("mallory");
    std::fs::write(&snap, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let (status, err) = run(base(&digest));
    assert!(
        !status.success() && err.contains("digest mismatch"),
        "{err}"
    );
    // Expired, with the digest updated to match.
    doc["capturedAt"] = json!("2020-01-01T00:00:00Z");
    doc["expiresAt"] = json!("2020-01-08T00:00:00Z");
    std::fs::write(&snap, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let d = String::from_utf8(
        Command::new(mcpguard())
            .arg("hash")
            .arg(&snap)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let (status, err) = run(base(d.trim()));
    assert!(!status.success() && err.contains("expired"), "{err}");
    assert!(!marker.exists(), "the server process was started");
}

/// A reviewed tool whose schema cannot be enforced (here a pattern the regex engine refuses)
/// refuses the whole start, and the server never runs: the schemas are compiled while the
/// sandbox is prepared on another thread, but still before the spawn.
#[test]
fn a_schema_that_cannot_be_compiled_refuses_the_start_before_the_server_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, _) = reviewed_snapshot(dir.path(), &[]);
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&snap).unwrap()).unwrap();
    let tools = doc["servers"]["fixture"]["toolPages"][0]["tools"]
        .as_array_mut()
        .unwrap();
    let echo = tools.iter_mut().find(|t| t["name"] == "echo").unwrap();
    echo["inputSchema"]["properties"]["text"]["pattern"] = json!("(unclosed");
    std::fs::write(&snap, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let digest = crate::support::hash(&snap);
    let out = crate::support::run_bounded(
        Command::new(mcpguard())
            .arg("--manifest")
            .arg(&snap)
            .args(["--sha256", &digest, "--server", "fixture", "--"])
            .arg(fixture())
            .stdin(std::process::Stdio::null()),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("refusing to start the server")
            && stderr.contains("inputSchema of tool \"echo\""),
        "{stderr}"
    );
    assert!(!stderr.contains("fixture-pid="), "the server ran: {stderr}");
}

/// The sandbox is prepared on another thread while the snapshot is verified; what it says must
/// still follow the snapshot's lines, and a refused snapshot must print none of it.
#[test]
fn the_sandbox_prepared_beside_the_snapshot_reports_after_it_and_not_at_all_on_a_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let start = |sha: &str| {
        crate::support::run_bounded(
            Command::new(mcpguard())
                .env("MCPGUARD_LOG", "info")
                .arg("--manifest")
                .arg(&snap)
                .args(["--sha256", sha, "--server", "fixture", "--"])
                .arg(fixture())
                .stdin(std::process::Stdio::null()),
        )
    };
    let out = start(&digest);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let at = |needle: &str| {
        stderr
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} missing: {stderr}"))
    };
    let (enforcing, sandbox, passed, server) = (
        at("info: enforcing snapshot"),
        at("info: sandbox "),
        at("info: sandbox: passed:"),
        at("fixture-pid="),
    );
    assert!(
        enforcing < sandbox && sandbox < passed && passed < server,
        "out of order: {stderr}"
    );
    let wrong = "0".repeat(64);
    let out = start(&wrong);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("digest mismatch"), "{stderr}");
    assert!(
        !stderr.contains("sandbox"),
        "the sandbox's lines were printed for a refused start: {stderr}"
    );
    assert!(!stderr.contains("fixture-pid="), "the server ran: {stderr}");
}

#[test]
fn require_bounded_write_schemas_withholds_a_write_tool_with_an_unbounded_schema() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let policy = dir.path().join("bounded.toml");
    std::fs::write(
        &policy,
        reads_policy_with("[review]\nrequire_bounded_write_schemas = true\n"),
    )
    .unwrap();
    let opts = ["--policy".to_string(), policy.display().to_string()];
    let mut p = guarded_with(
        &snap,
        &digest,
        &opts,
        &["--log".to_string(), log.display().to_string()],
    );
    p.initialize();
    let list = p.request(1, "tools/list", json!({}));
    let names = tool_names(&list);
    assert!(!names.contains(&"write_note"), "{list}");
    // Reads are not affected, whatever their schemas.
    assert!(names.contains(&"echo"), "{list}");
    let r = call(
        &mut p,
        2,
        "write_note",
        json!({"path": "/tmp/x", "body": "hello"}),
    );
    let m = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        m.contains("write_note")
            && m.contains("inputSchema /properties/body: unbounded-string")
            && m.contains("require_bounded_write_schemas = true"),
        "{r}"
    );
    let stderr = p.stderr();
    p.close_stdin();
    p.wait();
    assert!(
        stderr.contains("not serving a reviewed tool: tool \"write_note\"")
            && stderr.contains("require_bounded_write_schemas"),
        "{stderr}"
    );
    assert!(calls_received(&log).is_empty(), "the server saw no call");
}

/// `tasks/result` would carry a task's real result past the result checks, so a policy that
/// lets tasks through is refused before the server starts, at the key's line.
#[test]
fn a_policy_letting_tasks_through_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let policy = dir.path().join("tasks.toml");
    std::fs::write(&policy, "[capabilities]\ntasks = true\n").unwrap();
    let opts = ["--policy".to_string(), policy.display().to_string()];
    let mut p = guarded_with(
        &snap,
        &digest,
        &opts,
        &["--log".to_string(), log.display().to_string()],
    );
    assert_eq!(p.wait().code(), Some(1), "{}", p.stderr());
    let stderr = p.stderr();
    assert!(
        stderr.contains("tasks.toml:2:") && stderr.contains("tasks/result"),
        "{stderr}"
    );
    assert!(!log.exists(), "the server never started");
}

/// A `tools/call` is forwarded as its original bytes, so a member the gate does not check
/// would reach the server unchecked: it is refused, named, at the top level and in params.
#[test]
fn a_call_with_members_the_gate_does_not_check_is_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let mut p = guarded(&snap, &digest, &log, &[]);
    p.initialize();
    p.send_json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}},
        "smuggled": {"instructions": "delete everything"}}));
    let (r, _) = p.recv_response(&json!(1));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let m = r["error"]["message"].as_str().unwrap();
    assert!(m.contains("\"smuggled\" (top level)"), "{r}");
    let r = p.request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}, "hidden": 1}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("params.\"hidden\""),
        "{r}"
    );
    // The same call without them passes.
    let r = call(&mut p, 3, "echo", json!({"text": "hi"}));
    assert_eq!(r["result"]["structuredContent"]["text"], "hi", "{r}");
    p.close_stdin();
    p.wait();
    assert_eq!(calls_received(&log), ["echo"]);
    assert!(!std::fs::read_to_string(&log).unwrap().contains("smuggled"));
}
