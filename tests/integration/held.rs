//! A held write's whole life, attacked through the real binary: the ids of mcpguard's own
//! questions to the host (a server that predicts them must not get its question's answer taken
//! for an approval), the exact arguments a person is shown and approves, cancellation and id reuse
//! while a call waits, and the bound on every wait.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::gate::{calls_received, guarded_with, reviewed_snapshot};
use crate::support::{reads_policy_with, Peer};

/// A policy file in `dir` with the reads policy and `extra`.
fn policy(dir: &Path, extra: &str) -> String {
    let path = dir.join("policy.toml");
    std::fs::write(&path, reads_policy_with(extra)).unwrap();
    path.display().to_string()
}

/// The legacy handshake of a host that advertises form elicitation.
fn initialize_eliciting(p: &mut Peer) {
    p.initialize_with(json!({"elicitation": {}}));
}

fn refusal_code(response: &Value) -> Value {
    response["result"]["_meta"]["dev.mcpguard/refusal"]["code"].clone()
}

fn is_mcpguards_question(v: &Value) -> bool {
    v["method"] == "elicitation/create"
        && v["params"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("mcpguard:"))
}

#[test]
fn a_server_that_predicts_the_question_ids_cannot_get_an_approval() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let policy = policy(
        dir.path(),
        "[capabilities]\nelicitation = true\n[confirmation]\nchannels = [\"host\"]\ntimeout = \"3s\"\n",
    );
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".into(), policy],
        &[
            "--log".into(),
            log.display().to_string(),
            "--predict-ids".into(),
        ],
    );
    initialize_eliciting(&mut p);
    p.send_json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "write_note", "arguments": {"path": "/notes/a", "body": "rm -rf"}}}));
    // The person sees the server's harmless questions and, once mcpguard's question is there too,
    // accepts every harmless one; mcpguard's own question stays unanswered.
    let mut harmless = Vec::new();
    let mut asked = false;
    let until = Instant::now() + Duration::from_secs(20);
    let response = loop {
        assert!(Instant::now() < until, "no answer; stderr:\n{}", p.stderr());
        let Some(line) = p.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let v: Value = serde_json::from_slice(&line).unwrap();
        if v["id"] == 7 && v.get("method").is_none() {
            break v;
        }
        if v["method"] == "elicitation/create" {
            if is_mcpguards_question(&v) {
                asked = true;
            } else {
                harmless.push(v["id"].clone());
            }
        }
        if asked && !harmless.is_empty() {
            for id in harmless.drain(..) {
                p.send_json(&json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept", "content": {"approve": true}}}));
            }
        }
    };
    let stderr = p.stderr();
    assert!(asked, "mcpguard asked the person: {response}\n{stderr}");
    assert_eq!(
        calls_received(&log),
        Vec::<String>::new(),
        "the write never reaches the server: {response}\n{stderr}"
    );
    assert_eq!(refusal_code(&response), "consent_required", "{response}");
    assert!(
        response.to_string().contains("no answer within 3 s"),
        "{response}"
    );
}

/// Calls `write_note` with `n` written as `number` (raw JSON text) and returns what came back
/// first: mcpguard's question, or the call's refusal.
fn write_with_number(p: &mut Peer, id: i64, number: &str) -> Value {
    p.send(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"write_note","arguments":{{"path":"/notes/a","body":"x","n":{number}}}}}}}"#
    ));
    loop {
        let v = p.recv_json();
        if v["method"] == "elicitation/create" || (v["id"] == id && v.get("method").is_none()) {
            return v;
        }
    }
}

#[test]
fn the_person_sees_and_approves_the_exact_number_the_server_receives() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let policy = policy(
        dir.path(),
        "[arguments.tools.write_note]\nclosed = false\n[confirmation]\nchannels = [\"host\"]\n",
    );
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".into(), policy],
        &["--log".into(), log.display().to_string()],
    );
    initialize_eliciting(&mut p);
    let mut approvals = Vec::new();
    for (id, number) in [(1, "9007199254740993"), (2, "9007199254740992")] {
        let ask = write_with_number(&mut p, id, number);
        let message = ask["params"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("n={number}")),
            "the question shows {number}: {ask}"
        );
        approvals.push(
            message
                .split("(binding ")
                .nth(1)
                .map(|r| r[..12].to_string())
                .unwrap(),
        );
        // The person declines; the next call asks again.
        p.send_json(&json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "decline"}}));
        let (answer, _) = p.recv_response(&json!(id));
        assert_eq!(answer["result"]["isError"], true, "{answer}");
    }
    assert_ne!(
        approvals[0], approvals[1],
        "neighbouring integers get different bindings"
    );
    // A number whose value cannot be shown as written is refused, saying so, before anyone is asked.
    let refused = write_with_number(&mut p, 3, "9007199254740993.0");
    assert_eq!(refused["id"], 3, "{refused}");
    assert_eq!(refusal_code(&refused), "invalid_arguments", "{refused}");
    let text = refused.to_string();
    assert!(
        text.contains("9007199254740993.0") && text.contains("cannot show and bind exactly"),
        "{text}"
    );
    assert_eq!(calls_received(&log), Vec::<String>::new());
}

/// Waits for the response to `id`, answering every question of mcpguard's with an approval;
/// `None` if none comes within `limit`.
fn response_approving(p: &mut Peer, id: i64, limit: Duration) -> Option<Value> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        let Some(line) = p.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        let v: Value = serde_json::from_slice(&line).unwrap();
        if is_mcpguards_question(&v) {
            p.send_json(&json!({"jsonrpc": "2.0", "id": v["id"], "result": {"action": "accept", "content": {"approve": true}}}));
        } else if v["id"] == id && v.get("method").is_none() {
            return Some(v);
        }
    }
    None
}

/// Reads what arrives for `limit`, answering mcpguard's questions with an approval.
fn approve_for(p: &mut Peer, limit: Duration) -> Vec<Value> {
    let mut seen = Vec::new();
    let until = Instant::now() + limit;
    while Instant::now() < until {
        let Some(line) = p.recv_timeout(Duration::from_millis(50)) else {
            continue;
        };
        let v: Value = serde_json::from_slice(&line).unwrap();
        if is_mcpguards_question(&v) {
            p.send_json(&json!({"jsonrpc": "2.0", "id": v["id"], "result": {"action": "accept", "content": {"approve": true}}}));
        }
        seen.push(v);
    }
    seen
}

#[test]
fn a_write_approved_while_queued_does_not_run_once_the_host_cancelled_it() {
    let dir = tempfile::tempdir().unwrap();
    // write_note is reviewed with `concurrency: serialize`: a second call waits for the first.
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let policy = policy(dir.path(), "[confirmation]\nchannels = [\"host\"]\n");
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".into(), policy],
        &[
            "--log".into(),
            log.display().to_string(),
            "--write-delay-ms".into(),
            "3000".into(),
        ],
    );
    initialize_eliciting(&mut p);
    for (id, body) in [(1, "first"), (2, "second")] {
        p.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "write_note", "arguments": {"path": "/notes/a", "body": body}}}));
        approve_for(&mut p, Duration::from_millis(700));
    }
    // Call 2 is approved and queued behind call 1. Its id cannot be taken while it waits.
    p.send_json(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}));
    let reuse = approve_for(&mut p, Duration::from_millis(500));
    assert!(
        reuse.iter().any(|v| v["id"] == 2
            && v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("still pending"))),
        "the queued call's id was not refused: {reuse:?}\n{}",
        p.stderr()
    );
    p.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "the user pressed stop"}}));
    let first = response_approving(&mut p, 1, Duration::from_secs(10)).expect("call 1 answers");
    assert!(first.to_string().contains("wrote 5 bytes"), "{first}");
    let after = approve_for(&mut p, Duration::from_millis(1500));
    assert_eq!(
        calls_received(&log),
        vec!["write_note"],
        "the cancelled write never reaches the server: {after:?}\n{}",
        p.stderr()
    );
}

#[test]
fn a_walk_the_server_never_finishes_ends_with_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let policy = policy(dir.path(), "[limits]\ncall_timeout = \"2s\"\n");
    // The binding walk is answered; every later tools/list is not.
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".into(), policy],
        &[
            "--log".into(),
            log.display().to_string(),
            "--stall-list-after".into(),
            "1".into(),
        ],
    );
    p.initialize();
    let started = Instant::now();
    p.send_json(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "hi"}}}));
    let answer = response_approving(&mut p, 5, Duration::from_secs(12));
    let answer = answer.unwrap_or_else(|| panic!("no answer within 12 s; stderr:\n{}", p.stderr()));
    assert!(started.elapsed() >= Duration::from_millis(1500), "{answer}");
    assert_eq!(refusal_code(&answer), "verification_failed", "{answer}");
    assert_eq!(
        answer["result"]["_meta"]["dev.mcpguard/refusal"]["retryable"], true,
        "{answer}"
    );
    assert!(
        answer
            .to_string()
            .contains("did not complete the live tools/list"),
        "{answer}"
    );
    assert_eq!(calls_received(&log), Vec::<String>::new());
}

#[test]
fn the_id_of_a_call_given_up_on_is_not_reused_while_its_answer_may_come() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let policy = policy(dir.path(), "[limits]\ncall_timeout = \"1s\"\n");
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".into(), policy],
        &["--log".into(), log.display().to_string()],
    );
    p.initialize();
    let timed_out = p.request(
        3,
        "tools/call",
        json!({"name": "slow", "arguments": {"ms": 4000}}),
    );
    assert_eq!(timed_out["result"]["isError"], true, "{timed_out}");
    // The server's answer to that call is still to come: a new request under id 3 is refused
    // rather than be answered with it.
    let reused = p.request(
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert!(
        reused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("passed the per-call timeout")),
        "{reused}"
    );
    assert_eq!(calls_received(&log), vec!["slow"]);
}

#[test]
fn a_write_of_a_tool_known_to_have_drifted_is_refused_without_asking_anyone() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let policy = policy(dir.path(), "[confirmation]\nchannels = [\"host\"]\n");
    // The live server's write_note differs from the reviewed one from the start.
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".into(), policy],
        &[
            "--log".into(),
            log.display().to_string(),
            "--write-drift".into(),
        ],
    );
    initialize_eliciting(&mut p);
    p.wait_stderr("it is not served");
    p.send_json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "write_note", "arguments": {"path": "/notes/a", "body": "x"}}}));
    let (answer, before) = p.recv_response(&json!(1));
    assert!(
        before.iter().all(|v| !is_mcpguards_question(v)),
        "the person was asked: {before:?}"
    );
    assert_eq!(refusal_code(&answer), "tool_drift", "{answer}");
    assert_eq!(calls_received(&log), Vec::<String>::new());
}

#[test]
fn a_call_waiting_for_a_person_reports_progress_and_its_timeout_says_what_happens_next() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let policy = policy(
        dir.path(),
        "[confirmation]\nchannels = [\"host\"]\ntimeout = \"8s\"\n",
    );
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".into(), policy],
        &["--log".into(), log.display().to_string()],
    );
    initialize_eliciting(&mut p);
    p.send_json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "write_note", "arguments": {"path": "/notes/a", "body": "x"}, "_meta": {"progressToken": "tok-1"}}}));
    // Nobody answers the question.
    let (answer, before) = p.recv_response(&json!(1));
    let progress: Vec<&Value> = before
        .iter()
        .filter(|v| v["method"] == "notifications/progress")
        .collect();
    assert!(
        !progress.is_empty(),
        "no progress while the call waited: {before:?}"
    );
    for n in &progress {
        assert_eq!(n["params"]["progressToken"], "tok-1", "{n}");
        assert!(
            n["params"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("waits for a person's approval")),
            "{n}"
        );
    }
    let progressed: Vec<u64> = progress
        .iter()
        .filter_map(|n| n["params"]["progress"].as_u64())
        .collect();
    assert!(progressed.windows(2).all(|w| w[0] < w[1]), "{progressed:?}");
    assert_eq!(refusal_code(&answer), "consent_required", "{answer}");
    assert!(
        answer.to_string().contains("nothing runs later on its own"),
        "{answer}"
    );
    assert_eq!(calls_received(&log), Vec::<String>::new());
}
