//! Real hosts through mcpguard (issue 15): each host, configured the way its documentation says,
//! runs mcpguard over the fixture server with a snapshot captured **at the default protocol
//! version**, with the host's model replaced by a small HTTP stand-in on 127.0.0.1 that answers
//! in the provider's API format — the first request with a call of the guarded tool, the next
//! with text that echoes the tool's result — so the host calls an MCP tool for real and the
//! result must reach its final answer. The hosts are installed pinned into `.peers/` by
//! `scripts/install-peers.sh`. Slow (a host starts in seconds), so they live in a module of their
//! own.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::gate::{guarded_argv, reviewed_snapshot};
use crate::interop::{argv, peers};
use crate::support::{mcpguard, run_bounded};

/// The text the stand-in model asks the guarded `echo` tool to echo.
const MARK: &str = "hello-through-mcpguard";

/// One request the stand-in received: its path and JSON body.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// A Gemini API stand-in on 127.0.0.1 (`GOOGLE_GEMINI_BASE_URL`); returns its base URL and what
/// it received. `streamGenerateContent` is the conversation: a call of the declared function
/// whose name ends in `echo` while no function response is in the contents, then text echoing
/// that response. Any other `generateContent` is one of Gemini CLI's own side questions (the
/// model router's classifier, the next-speaker check): answered with JSON that fits them.
fn gemini_stand_in() -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || answer_gemini(stream, &log));
        }
    });
    (url, seen)
}

/// Reads one HTTP request and answers it (then closes: `connection: close`).
fn answer_gemini(mut stream: TcpStream, seen: &Seen) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let path = request_line.split(' ').nth(1).unwrap_or("").to_string();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    seen.lock().unwrap().push((path.clone(), req.clone()));
    let part = if path.contains(":streamGenerateContent") {
        let response = req["contents"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["parts"].as_array().into_iter().flatten())
            .find_map(|p| p.get("functionResponse"));
        let echo = req["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
            .filter_map(|f| f["name"].as_str())
            .find(|n| n.ends_with("echo"));
        match (response, echo) {
            (Some(r), _) => json!({"text": format!("FINAL: {}", r["response"])}),
            (None, Some(name)) => {
                json!({"functionCall": {"name": name, "args": {"text": MARK}}})
            }
            (None, None) => json!({"text": "FINAL: no echo tool was declared"}),
        }
    } else {
        json!({"text": json!({"complexity_reasoning": "stand-in", "complexity_score": 10,
                              "reasoning": "stand-in", "next_speaker": "user"}).to_string()})
    };
    let answer = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    });
    let (kind, payload) = if path.contains(":streamGenerateContent") {
        ("text/event-stream", format!("data: {answer}\r\n\r\n"))
    } else {
        ("application/json", answer.to_string())
    };
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
        payload.len()
    );
}

/// Gemini CLI with its own HOME (settings in `.gemini/settings.json`, as its documentation
/// says), the stand-in as its model endpoint, and a trusted workspace.
fn gemini(home: &Path, work: &Path, url: &str, args: &[&str]) -> Command {
    let gemini = argv(&peers()["gemini"]);
    let mut cmd = Command::new(&gemini[0]);
    cmd.args(&gemini[1..])
        .args(args)
        .current_dir(work)
        .env("HOME", home)
        .env("GOOGLE_GEMINI_BASE_URL", url)
        .env("GEMINI_API_KEY", "stand-in")
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .env_remove("MCPGUARD_LOG");
    cmd
}

/// Gemini CLI 0.61 asks for protocol 2025-06-18 and rejected mcpguard's 2025-11-25 answer, so it
/// could not connect to a default snapshot ("Disconnected"). Now it is answered in its version:
/// `gemini mcp list` reports the guarded server connected, and `gemini -p` calls the reviewed
/// `echo` tool through mcpguard, whose result reaches the final answer.
#[test]
fn gemini_cli_connects_to_a_default_snapshot_and_its_tool_result_reaches_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = dir.path().join("server.log");
    let args = guarded_argv(
        &snap,
        &digest,
        &[],
        &["--log".into(), log.display().to_string()],
    );
    let (home, work) = (dir.path().join("home"), dir.path().join("work"));
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    // `trust` skips Gemini's own confirmation: `-p` has nobody to ask, and `echo` is a read
    // mcpguard lets through without asking.
    let settings = json!({
        "mcpServers": {"fixture": {"command": mcpguard(), "args": args, "trust": true}},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
    });
    std::fs::write(home.join(".gemini/settings.json"), settings.to_string()).unwrap();
    let (url, seen) = gemini_stand_in();

    let out = run_bounded(&mut gemini(&home, &work, &url, &["mcp", "list"]));
    let listed =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        listed
            .lines()
            .any(|l| l.contains("fixture") && l.ends_with("- Connected")),
        "gemini mcp list: {listed}"
    );

    let out = run_bounded(&mut gemini(
        &home,
        &work,
        &url,
        &["-p", "Echo a greeting with the echo tool."],
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "gemini -p: {stdout}\n{stderr}");
    let answer = stdout
        .lines()
        .find(|l| l.starts_with("FINAL: "))
        .unwrap_or_else(|| {
            panic!(
                "no final answer; stdout: {stdout}\nstderr: {stderr}\nrequests: {:?}",
                seen.lock().unwrap()
            )
        });
    assert!(
        answer.contains(MARK),
        "the tool result reaches the answer: {answer}"
    );

    let received: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let init = received
        .iter()
        .find(|m| m["method"] == "initialize")
        .expect("initialize");
    assert_eq!(
        init["params"]["protocolVersion"], "2025-11-25",
        "the server runs the pinned version"
    );
    assert!(
        received.iter().any(|m| m["method"] == "tools/call"
            && m["params"]["name"] == "echo"
            && m["params"]["arguments"]["text"] == MARK),
        "the call reached the server through mcpguard: {received:?}"
    );
}
