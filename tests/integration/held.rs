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
    p.request(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "itest", "version": "0"}}),
    );
    p.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
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
