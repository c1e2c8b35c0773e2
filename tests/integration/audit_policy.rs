//! The local policy files and the audit log, through the real binary: every shipped policy loads
//! and validates, a bad one is refused with FILE:LINE, and a gated session leaves a hash-chained
//! log whose tampering `mcpguard audit verify` detects.

use std::process::Command;

use serde_json::{json, Value};

use crate::gate::{guarded_with, reviewed_snapshot, tool_names};
use crate::support::{mcpguard, reads_policy_with};

#[test]
fn every_shipped_policy_checks_and_a_bad_one_names_its_line() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        seen += 1;
        let out = Command::new(mcpguard())
            .args(["policy", "check"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("[confirmation]"),
            "the effective policy is printed"
        );
    }
    assert!(seen >= 3, "default, strict and observe are shipped");
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[review]\nmax_validity = \"7d\"\nallow_everything = true\n",
    )
    .unwrap();
    let out = Command::new(mcpguard())
        .args(["policy", "check"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.toml:3:") && err.contains("allow_everything"),
        "{err}"
    );
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn verify(path: &std::path::Path) -> (bool, String) {
    let out = Command::new(mcpguard())
        .args(["audit", "verify"])
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn a_gated_session_leaves_a_verifiable_chain_and_tampering_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("audit.jsonl");
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--audit-log".to_string(), log.display().to_string()],
        &[],
    );
    p.initialize();
    let r = p.request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "do-not-log-me"}}),
    );
    assert_eq!(r["result"]["structuredContent"]["text"], "do-not-log-me");
    let r = p.request(
        2,
        "tools/call",
        json!({"name": "big", "arguments": {"bytes": 1}}),
    );
    assert_eq!(r["error"]["code"], -32602);
    p.close_stdin();
    assert!(p.wait().success());

    let (ok, report) = verify(&log);
    assert!(ok, "{report}");
    let records: Vec<Value> = lines(&log)
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<&str> = records
        .iter()
        .map(|r| r["event"].as_str().unwrap())
        .collect();
    for e in [
        "start",
        "snapshot_verified",
        "sandbox_applied",
        "handshake_pinned",
        "call_allowed",
        "child_exit",
    ] {
        assert!(events.contains(&e), "{e} missing from {events:?}");
    }
    assert!(
        records.iter().all(|r| r["snapshot"] == json!(digest)),
        "every record names the snapshot"
    );
    let sandbox = records
        .iter()
        .find(|r| r["event"] == "sandbox_applied")
        .unwrap();
    assert!(
        sandbox
            .to_string()
            .contains("sandbox require (Landlock ABI"),
        "the record states what was enforced: {sandbox}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("do-not-log-me"),
        "argument values are not logged by default"
    );
    assert!(records
        .iter()
        .any(|r| r["event"] == "call_allowed"
            && r["argsSha256"].as_str().is_some_and(|h| h.len() == 64)));

    let original = lines(&log);
    let tampered = |edit: &dyn Fn(&mut Vec<String>)| {
        let mut l = original.clone();
        edit(&mut l);
        std::fs::write(&log, l.join("\n") + "\n").unwrap();
        verify(&log)
    };
    let pinned = original
        .iter()
        .position(|l| l.contains("handshake_pinned"))
        .unwrap();
    let (ok, msg) =
        tampered(&|l| l[pinned] = l[pinned].replace("handshake_pinned", "handshake_pinnedX"));
    assert!(
        !ok && msg.contains(&format!("line {}", pinned + 1)),
        "edit: {msg}"
    );
    let (ok, msg) = tampered(&|l| {
        l.remove(1);
    });
    assert!(!ok && msg.contains("line 2"), "removal: {msg}");
    let (ok, msg) = tampered(&|l| l.swap(1, 2));
    assert!(!ok && msg.contains("line 2"), "swap: {msg}");
}

#[test]
fn the_policy_can_refuse_a_reviewed_tool_but_never_admit_one() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, "[review]\nrefused_tools = [\"echo\", \"big\"]\n").unwrap();
    let log = dir.path().join("server.log");
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".to_string(), policy.display().to_string()],
        &["--log".to_string(), log.display().to_string()],
    );
    p.initialize();
    let list = p.request(1, "tools/list", json!({}));
    let names = tool_names(&list);
    assert!(
        !names.contains(&"echo") && names.contains(&"add"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"big"),
        "naming an unreviewed tool in the policy does not admit it"
    );
    let r = p.request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    );
    assert_eq!(r["error"]["code"], -32602);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("local policy"),
        "{r}"
    );
    p.wait_stderr("review.refused_tools");
}

#[test]
fn show_report_gives_the_content_trust_of_reviewed_tools() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, _) = reviewed_snapshot(dir.path(), &[]);
    let out = Command::new(mcpguard())
        .args(["show", "--report"])
        .arg(&snap)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("  tool echo\n    input channels:\n      /text: data\n    output locations:\n      (root): composite\n      /text: free_text\n"), "{text}");
    assert!(
        text.contains(
            "  tool write_note\n    input channels:\n      /body: data\n      /path: authority\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains("tool big"),
        "unreviewed tools are not reported"
    );
    // Deterministic: the same snapshot gives the same report.
    let again = Command::new(mcpguard())
        .args(["show", "--report"])
        .arg(&snap)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(again.stdout).unwrap(), text);
}

#[test]
fn a_call_past_the_policy_timeout_has_an_unknown_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        reads_policy_with("[limits]\ncall_timeout = \"1s\"\n"),
    )
    .unwrap();
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".to_string(), policy.display().to_string()],
        &[],
    );
    p.initialize();
    let start = std::time::Instant::now();
    let r = p.request(
        1,
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 4000}}),
    );
    let sc = &r["result"]["_meta"]["dev.mcpguard/refusal"];
    assert_eq!(sc["code"], "UNKNOWN_DISPATCH_OUTCOME", "{r}");
    assert_eq!(sc["outcomeKnown"], false);
    assert!(
        start.elapsed() < std::time::Duration::from_secs(3),
        "answered at the timeout, not when the server finished"
    );
    // The session goes on; the late answer never reaches the host.
    let r = p.request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "after"}}),
    );
    assert_eq!(r["result"]["structuredContent"]["text"], "after");
}

#[test]
fn redacted_error_text_and_structured_only_output_with_the_raw_text_in_the_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        reads_policy_with("[errors]\ntext = \"redacted\"\n[output]\nmode = \"structured-only\"\n"),
    )
    .unwrap();
    let log = dir.path().join("audit.jsonl");
    let mut p = guarded_with(
        &snap,
        &digest,
        &[
            "--policy".to_string(),
            policy.display().to_string(),
            "--audit-log".to_string(),
            log.display().to_string(),
        ],
        &[],
    );
    p.initialize();
    let r = p.request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "text", "text": "{\"text\":\"hi\"}"}]),
        "{r}"
    );
    for (id, tool) in [(2, "fail"), (3, "rpc_error")] {
        let r = p.request(id, "tools/call", json!({"name": tool, "arguments": {}}));
        assert!(
            !r.to_string().contains("SECRET123"),
            "{tool}: the server's text reached the host: {r}"
        );
    }
    p.close_stdin();
    p.wait();
    let audit = std::fs::read_to_string(&log).unwrap();
    assert!(
        audit.contains("SECRET123"),
        "the raw text is kept for the auditor"
    );
    assert!(verify(&log).0);
}

/// `policies/observe.toml` names `$XDG_STATE_HOME/mcpguard/observe-audit.jsonl`; on a fresh
/// machine that folder does not exist, and mcpguard makes it (0700) rather than refuse to start.
#[test]
fn observe_toml_starts_on_a_fresh_machine_and_makes_its_log_folder() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let state = dir.path().join("fresh-state");
    let observe = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies/observe.toml");
    let mut cmd = Command::new(mcpguard());
    cmd.arg("--manifest")
        .arg(&snap)
        .args(["--sha256", &digest, "--server", "fixture", "--policy"])
        .arg(&observe)
        .arg("--")
        .arg(crate::support::fixture())
        .env("XDG_STATE_HOME", &state);
    let mut p = crate::support::Peer::start_with(&mut cmd);
    let init = p.initialize();
    assert!(init.get("result").is_some(), "{init}\n{}", p.stderr());
    p.close_stdin();
    assert!(p.wait().success(), "{}", p.stderr());
    let log = state.join("mcpguard/observe-audit.jsonl");
    assert!(verify(&log).0, "{}", verify(&log).1);
    let mode = std::fs::metadata(state.join("mcpguard")).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

/// The shipped profiles behave as docs/policy.md says, through the real binary and the
/// fixture, with a host that cannot be asked (no elicitation): under `default.toml` an
/// unclassified tool is a write that waits for an approval in the terminal channel; `observe.toml` forwards
/// it unconfirmed (and audits it so); `strict.toml` refuses every write outright
/// (`confirmation.mode = "deny"`). The server's log shows which writes reached it.
#[test]
fn the_shipped_policies_treat_writes_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let shipped = |name: &str| {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("policies")
            .join(name)
            .display()
            .to_string()
    };
    let log = dir.path().join("server.log");
    let fixture_args = ["--log".to_string(), log.display().to_string()];
    let write = json!({"name": "write_note", "arguments": {"path": "/n", "body": "b"}});

    // Under default.toml the write waits for the terminal channel (the host cannot ask), where
    // it is denied here.
    let runtime = tempfile::tempdir().unwrap();
    let mut p = crate::support::Peer::start_with(
        Command::new(mcpguard())
            .args(crate::gate::guarded_argv(
                &snap,
                &digest,
                &["--policy".to_string(), shipped("default.toml")],
                &fixture_args,
            ))
            .env("XDG_RUNTIME_DIR", runtime.path()),
    );
    p.initialize();
    p.send_json(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": write.clone()}),
    );
    let approvals = |args: &[&str]| {
        crate::support::run_bounded(
            Command::new(mcpguard())
                .arg("approvals")
                .args(args)
                .env("XDG_RUNTIME_DIR", runtime.path()),
        )
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let id = loop {
        let doc: Value = serde_json::from_slice(&approvals(&["list", "--json"]).stdout).unwrap();
        if let Some(id) = doc["pending"][0]["id"].as_str() {
            break id.to_string();
        }
        assert!(
            std::time::Instant::now() < until,
            "default.toml: nothing pending"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(approvals(&["deny", &id]).status.success());
    let (r, _) = p.recv_response(&json!(1));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"], "consent_required",
        "default.toml: {r}"
    );
    p.close_stdin();
    p.wait();
    assert!(crate::gate::calls_received(&log).is_empty());

    let audit = dir.path().join("observe.jsonl");
    let mut p = guarded_with(
        &snap,
        &digest,
        &[
            "--policy".to_string(),
            shipped("observe.toml"),
            "--audit-log".to_string(),
            audit.display().to_string(),
        ],
        &fixture_args,
    );
    p.initialize();
    let r = p.request(1, "tools/call", write.clone());
    assert!(r.to_string().contains("wrote 1 bytes"), "observe.toml: {r}");
    p.close_stdin();
    p.wait();
    assert_eq!(crate::gate::calls_received(&log), vec!["write_note"]);
    let text = std::fs::read_to_string(&audit).unwrap();
    assert!(
        text.contains("without confirmation"),
        "observe.toml audits the write as unconfirmed: {text}"
    );

    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".to_string(), shipped("strict.toml")],
        &fixture_args,
    );
    p.initialize();
    let r = p.request(1, "tools/call", write);
    // write_note's schema is unbounded (strings without maxLength, an open object), and
    // strict.toml serves only bounded write tools: it is not served at all.
    assert_eq!(r["error"]["code"], -32602, "strict.toml: {r}");
    assert!(
        r.to_string()
            .contains("require_bounded_write_schemas = true"),
        "strict.toml withholds unbounded writes and says so: {r}"
    );
    p.close_stdin();
    p.wait();
    assert_eq!(crate::gate::calls_received(&log), vec!["write_note"]);
}
