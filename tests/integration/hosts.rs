//! Real hosts through mcpguard (issue 15): each host, configured the way its documentation says,
//! runs mcpguard over the fixture server with a snapshot captured **at the default protocol
//! version**, with the host's model replaced by a small HTTP stand-in on 127.0.0.1 that answers
//! in the provider's API format — the first request with a call of the guarded tool (for Claude
//! Code, which defers MCP tools, first a `ToolSearch` that loads it), the next with text that
//! echoes the tool's result — so the host calls an MCP tool for real and the result must reach
//! its final answer. Hosts: Gemini CLI (Gemini API), Claude Code (Anthropic Messages API),
//! Codex (OpenAI Responses API) and fast-agent (its `passthrough` model, which needs no
//! endpoint). The interactive interfaces of Claude Code, Codex and fast-agent run in a terminal
//! (tmux, `support::tmux`), where a person approves a write once and declines it once in the
//! host's own dialog. Where a host has an approval of its own in front of mcpguard's
//! question, a test shows that the setting the README names leaves mcpguard's question as the
//! only one. The hosts are installed pinned into `.peers/` by `scripts/install-peers.sh`. Slow (a
//! host starts in a second or more), so they live in a module of their own.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
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

/// What a stand-in answers to one request: status, content type and body.
type Answer = (u16, &'static str, String);

/// A model API stand-in on 127.0.0.1: every request is recorded and answered by `answer` from
/// its path and JSON body. Returns its base URL and what it received.
fn stand_in(answer: fn(&str, &Value) -> Answer) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen: Seen = Arc::default();
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || serve_one(stream, &log, answer));
        }
    });
    (url, seen)
}

/// Reads one HTTP request and answers it, then closes the connection (`connection: close`), so
/// that the hosts' keep-alive clients open a new one for the next request and the reading stays
/// one request per connection.
fn serve_one(mut stream: TcpStream, seen: &Seen, answer: fn(&str, &Value) -> Answer) {
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
    let (status, kind, payload) = answer(&path, &req);
    let reason = if status == 200 { "OK" } else { "Not Found" };
    let _ = write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{payload}",
        payload.len()
    );
}

/// Server-sent events, one `event:`/`data:` pair per value (the value's `type` names the event).
fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "event: {}\ndata: {e}\n\n",
                e["type"].as_str().unwrap_or("message")
            )
        })
        .collect()
}

/// A Gemini API stand-in (`GOOGLE_GEMINI_BASE_URL`). `streamGenerateContent` is the
/// conversation: a call of the declared function whose name ends in the tool `wanted_call` picks
/// while no function response is in the contents, then text echoing that response. Any other `generateContent` is
/// one of Gemini CLI's own side questions (the model router's classifier, the next-speaker
/// check): answered with JSON that fits them.
fn gemini_answer(path: &str, req: &Value) -> Answer {
    let part = if path.contains(":streamGenerateContent") {
        let response = req["contents"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["parts"].as_array().into_iter().flatten())
            .find_map(|p| p.get("functionResponse"));
        let texts: Vec<&str> = req["contents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["role"] == "user")
            .flat_map(|c| c["parts"].as_array().into_iter().flatten())
            .filter_map(|p| p["text"].as_str())
            .collect();
        let (tool, args) = wanted_call(&texts);
        let declared = req["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| t["functionDeclarations"].as_array().into_iter().flatten())
            .filter_map(|f| f["name"].as_str())
            .find(|n| n.ends_with(tool));
        match (response, declared) {
            (Some(r), _) => json!({"text": format!("FINAL: {}", r["response"])}),
            (None, Some(name)) => json!({"functionCall": {"name": name, "args": args}}),
            (None, None) => json!({"text": format!("FINAL: no {tool} tool was declared")}),
        }
    } else {
        json!({"text": json!({"complexity_reasoning": "stand-in", "complexity_score": 10,
                              "reasoning": "stand-in", "next_speaker": "user"}).to_string()})
    };
    let answer = json!({
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    });
    if path.contains(":streamGenerateContent") {
        (200, "text/event-stream", format!("data: {answer}\r\n\r\n"))
    } else {
        (200, "application/json", answer.to_string())
    }
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
    let log = server_log(dir.path());
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
    let (url, seen) = stand_in(gemini_answer);

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
    assert_answer_echoes_the_result(&stdout, &stderr, &seen);

    assert_pinned_echo_reached_the_server(&log);
}

/// Gemini CLI does not advertise elicitation, so mcpguard cannot ask through it: a write waits
/// for `mcpguard approvals` (or the desktop), and once a person approves it there it reaches the
/// server and its result reaches Gemini's answer.
#[test]
fn gemini_cli_write_is_approved_out_of_band_and_reaches_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = server_log(dir.path());
    let args = guarded_argv(
        &snap,
        &digest,
        &[],
        &["--log".into(), log.display().to_string()],
    );
    let (home, work) = (dir.path().join("home"), dir.path().join("work"));
    std::fs::create_dir_all(home.join(".gemini")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let runtime = runtime_dir(dir.path());
    let settings = json!({
        "mcpServers": {"fixture": {"command": mcpguard(), "args": args, "trust": true,
                                   "env": {"XDG_RUNTIME_DIR": runtime,
                                           "DBUS_SYSTEM_BUS_ADDRESS": approving_bus()}}},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
    });
    std::fs::write(home.join(".gemini/settings.json"), settings.to_string()).unwrap();
    let (url, _seen) = stand_in(gemini_answer);
    let approver = approve_when_asked(runtime, "write_note");
    let out = run_bounded(&mut gemini(
        &home,
        &work,
        &url,
        &["-p", "Write a note for today."],
    ));
    approver.join().expect("the approval was given");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "gemini -p: {stdout}\n{stderr}");
    let answer = stdout
        .lines()
        .find(|l| l.starts_with("FINAL: "))
        .unwrap_or_else(|| panic!("no final answer; stdout: {stdout}\nstderr: {stderr}"));
    assert!(
        !answer.contains("consent_required") && !answer.contains("approval_required"),
        "the approved write's result reaches the answer: {answer}"
    );
    assert!(
        received(&log)
            .iter()
            .any(|m| m["method"] == "tools/call" && m["params"]["name"] == "write_note"),
        "the approved write reaches the server"
    );
}

/// The tool a stand-in calls and its arguments, from the person's prompt (`texts`, the user
/// messages): the guarded write `write_note` when it asks for a note, the read `echo` otherwise.
fn wanted_call(texts: &[&str]) -> (&'static str, Value) {
    if texts.iter().any(|t| t.contains("Write a note")) {
        (
            "write_note",
            json!({"path": "notes/today.txt", "body": MARK}),
        )
    } else {
        ("echo", json!({"text": MARK}))
    }
}

/// The ids the Claude stand-in gives its two tool uses, so that the results coming back can be
/// told apart.
const SEARCH_ID: &str = "toolu_search";
const TOOL_USE_ID: &str = "toolu_call";

/// Whether `name` is Claude Code's name of the MCP tool `tool` (`mcp__SERVER__TOOL`).
fn is_mcp_tool(name: &str, tool: &str) -> bool {
    name.starts_with("mcp__") && name.strip_suffix(tool).is_some_and(|n| n.ends_with("__"))
}

/// Every string in `v`, depth first.
fn strings(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) => vec![s],
        Value::Array(a) => a.iter().flat_map(strings).collect(),
        Value::Object(o) => o.values().flat_map(strings).collect(),
        _ => vec![],
    }
}

/// An Anthropic Messages API stand-in (`ANTHROPIC_BASE_URL`). Claude Code defers MCP tools by
/// default: its first request only names them in a system message and offers `ToolSearch` to
/// load their schemas. So the stand-in does what a model does: it loads the deferred
/// `mcp__…__TOOL` (the tool `wanted_call` picks) with `ToolSearch`, calls it once its schema is
/// among the request's tools, and then answers with text that echoes the result. Answers stream
/// (server-sent events) when the request asks for it, as the real API's do.
fn claude_answer(path: &str, req: &Value) -> Answer {
    if path.starts_with("/v1/messages/count_tokens") {
        return (
            200,
            "application/json",
            json!({"input_tokens": 1}).to_string(),
        );
    }
    if !path.starts_with("/v1/messages") {
        let error =
            json!({"type": "error", "error": {"type": "not_found_error", "message": "stand-in"}});
        return (404, "application/json", error.to_string());
    }
    let blocks: Vec<&Value> = req["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().into_iter().flatten())
        .collect();
    let result_of = |id: &str| {
        blocks
            .iter()
            .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
    };
    let user: Vec<&str> = req["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .flat_map(|m| strings(&m["content"]))
        .collect();
    let (tool, args) = wanted_call(&user);
    let loaded = req["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .find(|n| is_mcp_tool(n, tool));
    // The deferred tools are named in a system message of `messages` (Claude Code 2.1 sends one
    // there, besides the top-level `system` prompt).
    let deferred = strings(&req["messages"])
        .into_iter()
        .flat_map(|s| s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')))
        .find(|w| is_mcp_tool(w, tool));
    let tool_use = |id: &str, name: &str, input: Value| {
        (
            json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        )
    };
    let text = |t: String| {
        (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": t}),
            "end_turn",
        )
    };
    let (start, delta, stop) = match (result_of(TOOL_USE_ID), loaded, deferred) {
        (Some(r), _, _) => text(format!("FINAL: {}", r["content"])),
        (None, Some(name), _) => tool_use(TOOL_USE_ID, name, args),
        (None, None, Some(name)) if result_of(SEARCH_ID).is_none() => tool_use(
            SEARCH_ID,
            "ToolSearch",
            json!({"query": format!("select:{name}")}),
        ),
        _ => text(format!("FINAL: no MCP tool {tool} reached the model")),
    };
    let message = json!({"id": "msg_stand_in", "type": "message", "role": "assistant",
        "model": req["model"], "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1}});
    if req["stream"] != true {
        let mut block = start.clone();
        match delta["type"].as_str() {
            Some("text_delta") => block["text"] = delta["text"].clone(),
            _ => {
                block["input"] =
                    serde_json::from_str(delta["partial_json"].as_str().unwrap()).unwrap()
            }
        }
        let mut whole = message;
        whole["content"] = json!([block]);
        whole["stop_reason"] = json!(stop);
        return (200, "application/json", whole.to_string());
    }
    let events = [
        json!({"type": "message_start", "message": message}),
        json!({"type": "content_block_start", "index": 0, "content_block": start}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 1}}),
        json!({"type": "message_stop"}),
    ];
    (200, "text/event-stream", sse(&events))
}

/// Claude Code (its native binary) with its own HOME, the stand-in as its API, and the
/// traffic that is not the conversation (telemetry, error reports, update checks) turned off
/// with its documented switch. The variables that would point it at another configuration or
/// credential are removed, so that only this HOME is read.
fn claude(home: &Path, work: &Path, url: &str, args: &[&str]) -> Command {
    let claude = argv(&peers()["claude"]);
    let mut cmd = Command::new(&claude[0]);
    cmd.args(&claude[1..])
        .args(args)
        .current_dir(work)
        .env("HOME", home)
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", "stand-in")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    for var in [
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CONFIG_DIR",
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "MCPGUARD_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// The `error` entries of Claude Code's MCP logs of the server `fixture`
/// (`~/.cache/claude-cli-nodejs/<project>/mcp-logs-fixture/*.jsonl`), where it records every
/// line a server writes to stderr as an error.
fn claude_mcp_errors(home: &Path) -> Vec<String> {
    fn walk(dir: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.parent().and_then(|p| p.file_name()) == Some("mcp-logs-fixture".as_ref())
            {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                found.extend(
                    text.lines()
                        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                        .filter_map(|e| e["error"].as_str().map(str::to_string)),
                );
            }
        }
    }
    let mut found = Vec::new();
    walk(&home.join(".cache/claude-cli-nodejs"), &mut found);
    found
}

/// The host's final answer (its `FINAL: ` line on stdout, which the stand-in wrote from the
/// tool result) echoes the guarded tool's result.
fn assert_answer_echoes_the_result(stdout: &str, stderr: &str, seen: &Seen) {
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
}

/// The fixture was initialized in the pinned 2025-11-25 and received the host's `echo` call
/// with its argument; returns the `initialize` it received.
fn assert_pinned_echo_reached_the_server(log: &Path) -> Value {
    let received = received(log);
    let init = received
        .iter()
        .find(|m| m["method"] == "initialize")
        .expect("initialize")
        .clone();
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
    init
}

/// The JSON lines the fixture server logged (every message it received).
fn received(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A guarded fixture added to Claude Code with its own `claude mcp add-json --scope user`
/// (which writes `~/.claude.json`), and a Messages API stand-in: the temporary directory, HOME,
/// the working directory, the fixture's log, and the stand-in's URL and requests.
fn claude_setup() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf, String, Seen) {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = server_log(dir.path());
    let args = guarded_argv(
        &snap,
        &digest,
        &[],
        &["--log".into(), log.display().to_string()],
    );
    let (home, work) = (dir.path().join("home"), dir.path().join("work"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let (url, seen) = stand_in(claude_answer);
    // mcpguard's approval sockets live here, so that the test's `mcpguard approvals` finds this
    // host's mcpguard and no other.
    let runtime = runtime_dir(dir.path());
    let server = json!({"type": "stdio", "command": mcpguard(), "args": args,
                        "env": {"XDG_RUNTIME_DIR": runtime,
                                "DBUS_SYSTEM_BUS_ADDRESS": approving_bus()}})
    .to_string();
    let out = run_bounded(&mut claude(
        &home,
        &work,
        &url,
        &["mcp", "add-json", "--scope", "user", "fixture", &server],
    ));
    assert!(
        out.status.success(),
        "claude mcp add-json: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, home, work, log, url, seen)
}

/// The system bus whose polkitd lets `mcpguard approvals approve` (run by this test as root)
/// approve (`support::polkit_rig::allowing_root`): out-of-band approvals need the trusted path.
fn approving_bus() -> String {
    crate::support::polkit_rig::allowing_root()
        .unwrap_or_else(|| "unix:path=/nonexistent/mcpguard-test-system-bus".into())
}

/// A private runtime directory (0700) for mcpguard's approval sockets under `base`.
fn runtime_dir(base: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = base.join("runtime");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// Plays the person at a terminal: waits for the first approval pending in `runtime`'s
/// mcpguard, checks that its question names the tool, approves it with `mcpguard approvals
/// approve ID`, and returns the id.
fn approve_when_asked(runtime: PathBuf, tool: &'static str) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(50);
        loop {
            let out = run_bounded(
                Command::new(mcpguard())
                    .args(["approvals", "list", "--json"])
                    .env("XDG_RUNTIME_DIR", &runtime),
            );
            let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            if let Some(item) = doc["pending"].as_array().and_then(|p| p.first()) {
                assert_eq!(item["tool"], tool, "{item}");
                let id = item["id"].as_str().unwrap().to_string();
                let out = crate::support::at_terminal(
                    &["approvals", "approve", &id],
                    &[("XDG_RUNTIME_DIR", &runtime)],
                );
                // The approved call may run and the host end the session before `approve`
                // reads the outcome; the caller checks that the write reached the server.
                let said = String::from_utf8_lossy(&out.stderr);
                assert!(
                    out.status.success() || said.contains("ended before it said what became"),
                    "approvals approve: {said}"
                );
                return id;
            }
            assert!(
                std::time::Instant::now() < until,
                "no approval was ever pending: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    })
}

/// Allows every tool of the server `fixture` in Claude Code's user settings, as the README's
/// ask-once section says (`permissions.allow` in `~/.claude/settings.json`).
fn claude_allow_fixture(home: &Path) {
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    let settings = json!({"permissions": {"allow": ["mcp__fixture"]}});
    std::fs::write(home.join(".claude/settings.json"), settings.to_string()).unwrap();
}

/// `claude -p PROMPT --output-format json`: its result object (the final answer is `result`).
fn claude_p(home: &Path, work: &Path, url: &str, prompt: &str) -> Value {
    let out = run_bounded(&mut claude(
        home,
        work,
        url,
        &["-p", prompt, "--output-format", "json"],
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "claude -p: {stdout}\n{stderr}");
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("claude -p printed no JSON ({e}): {stdout}\n{stderr}"))
}

/// Claude Code runs mcpguard over a default snapshot: `claude mcp list` reports it connected, and
/// `claude -p` loads the deferred `echo` tool, calls it through mcpguard, and the result reaches
/// the final answer. The server's tools are allowed in Claude Code's settings, so that its own
/// permission question does not stand in front (`-p` has nobody to ask), and `echo` is a read
/// that mcpguard lets through without asking either. Claude Code records a server's stderr as
/// errors in its MCP logs, so a healthy start at mcpguard's default level must leave no
/// `mcpguard:` line there; with `MCPGUARD_LOG=info` the lines do appear, which shows that the
/// check can fail.
#[test]
fn claude_code_connects_to_a_default_snapshot_quietly_and_its_tool_result_reaches_the_answer() {
    let (_dir, home, work, log, url, seen) = claude_setup();
    claude_allow_fixture(&home);

    let out = run_bounded(claude(&home, &work, &url, &["mcp", "list"]).env("MCPGUARD_LOG", "info"));
    let listed =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("fixture:") && l.ends_with("Connected")),
        "claude mcp list: {listed}"
    );
    let errors = claude_mcp_errors(&home);
    assert!(
        errors.iter().any(|e| e.contains("mcpguard: info:")),
        "with MCPGUARD_LOG=info, Claude Code records mcpguard's start-up lines: {errors:?}"
    );
    std::fs::remove_dir_all(home.join(".cache/claude-cli-nodejs")).unwrap();

    let result = claude_p(&home, &work, &url, "Echo a greeting with the echo tool.");
    let answer = result["result"].as_str().unwrap_or_default();
    assert!(
        answer.starts_with("FINAL: ") && answer.contains(MARK),
        "the tool result reaches the answer: {result}\nrequests: {:?}",
        seen.lock()
            .unwrap()
            .iter()
            .map(|(path, _)| path.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["permission_denials"], json!([]), "{result}");

    let requests = seen.lock().unwrap().clone();
    let schema = requests
        .iter()
        .flat_map(|(_, r)| r["tools"].as_array().cloned().unwrap_or_default())
        .find(|t| t["name"] == "mcp__fixture__echo")
        .map(|t| t["input_schema"].clone())
        .expect("ToolSearch loaded the echo tool into the request's tools");
    assert_eq!(
        schema["properties"]["text"]["type"], "string",
        "the reviewed schema reached the model: {schema}"
    );

    let errors = claude_mcp_errors(&home);
    assert!(
        !errors.iter().any(|e| e.contains("mcpguard:")),
        "a healthy start is quiet at the default level: {errors:?}"
    );

    assert_pinned_echo_reached_the_server(&log);
}

/// Claude Code has a permission question of its own in front of mcpguard's. Without the
/// server's tools in `permissions.allow`, it stops even the reviewed read (`claude -p` has nobody
/// to ask, so it denies) and mcpguard never sees the call. With them allowed, as the README says,
/// a write reaches mcpguard, whose question is then the only one: headless `claude -p` answers
/// elicitation with `cancel` in milliseconds, so the write waits for `mcpguard approvals`, and
/// once approved there it reaches the server.
#[test]
fn claude_code_asks_once_when_the_guarded_servers_tools_are_allowed() {
    let (_dir, home, work, log, url, _seen) = claude_setup();

    let result = claude_p(&home, &work, &url, "Echo a greeting with the echo tool.");
    let denied: Vec<&str> = result["permission_denials"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["tool_name"].as_str())
        .collect();
    assert_eq!(
        denied,
        ["mcp__fixture__echo"],
        "Claude Code's own permission stops the call: {result}"
    );
    assert!(
        !received(&log).iter().any(|m| m["method"] == "tools/call"),
        "a call Claude Code denied never reaches the server"
    );

    claude_allow_fixture(&home);
    // The write reaches mcpguard, whose question is the only one. Headless `claude -p` answers it
    // with `cancel` at once, which mcpguard does not take for the person's answer: the write
    // waits for `mcpguard approvals`, where the person (this test) approves it.
    let approver = approve_when_asked(_dir.path().join("runtime"), "write_note");
    let result = claude_p(&home, &work, &url, "Write a note for today.");
    approver.join().expect("the approval was given");
    let answer = result["result"].as_str().unwrap_or_default();
    assert_eq!(result["permission_denials"], json!([]), "{result}");
    assert!(
        answer.starts_with("FINAL: ") && !answer.contains("consent_required"),
        "the approved write's result reaches the answer: {result}"
    );
    let received = received(&log);
    assert!(
        received
            .iter()
            .any(|m| m["method"] == "tools/call" && m["params"]["name"] == "write_note"),
        "the approved write reaches the server: {received:?}"
    );
}

/// The call id the Codex stand-in gives its function call.
const CALL_ID: &str = "call_stand_in";

/// The user messages of a Responses API request's `input`.
fn codex_user_texts(req: &Value) -> Vec<&str> {
    req["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["role"] == "user")
        .flat_map(|i| strings(&i["content"]))
        .collect()
}

/// An OpenAI Responses API stand-in (a custom `model_providers` entry with
/// `wire_api = "responses"`). Codex 0.171 offers each MCP server's tools as a `namespace` tool
/// (`mcp__SERVER`) holding one function per tool, so the stand-in answers the first request with
/// a `function_call` of the wanted tool in that namespace, and the request that carries the
/// call's output with a message echoing it. The stream is the Responses API's server-sent events
/// (`response.created`, `response.output_item.done`, `response.completed`).
fn codex_answer(path: &str, req: &Value) -> Answer {
    if !path.ends_with("/responses") {
        let error = json!({"error": {"message": "stand-in", "type": "not_found"}});
        return (404, "application/json", error.to_string());
    }
    let (tool, args) = wanted_call(&codex_user_texts(req));
    let output = req["input"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["type"] == "function_call_output" && i["call_id"] == CALL_ID);
    let namespace = req["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| {
            t["type"] == "namespace" && t["name"].as_str().is_some_and(|n| n.starts_with("mcp__"))
        })
        .find(|t| {
            t["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|f| f["name"] == tool)
        })
        .and_then(|t| t["name"].as_str());
    let message = |text: String| {
        json!({"type": "message", "role": "assistant", "id": "msg_stand_in",
               "content": [{"type": "output_text", "text": text, "annotations": []}]})
    };
    let item = match (output, namespace) {
        (Some(o), _) => message(format!("FINAL: {}", o["output"])),
        (None, Some(ns)) => {
            json!({"type": "function_call", "id": "fc_stand_in", "call_id": CALL_ID,
                                   "namespace": ns, "name": tool, "arguments": args.to_string()})
        }
        (None, None) => message(format!("FINAL: no MCP tool {tool} was offered")),
    };
    let events = [
        json!({"type": "response.created", "response": {"id": "resp_stand_in"}}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": "resp_stand_in",
               "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}}),
    ];
    (200, "text/event-stream", sse(&events))
}

/// `$CODEX_HOME/config.toml` as Codex documents it: the stand-in as a custom model provider
/// (its key read from an environment variable that holds a dummy), and mcpguard as the stdio MCP
/// server `fixture`. `approval` is the server's `default_tools_approval_mode`, left out when
/// `None` (Codex's default, `auto`).
fn codex_config(url: &str, args: &[String], approval: Option<&str>, runtime: &Path) -> String {
    let mut fixture = toml::Table::new();
    fixture.insert("command".into(), mcpguard().display().to_string().into());
    fixture.insert("args".into(), args.to_vec().into());
    fixture.insert(
        "env".into(),
        toml::Table::from_iter([
            (
                "XDG_RUNTIME_DIR".to_string(),
                runtime.display().to_string().into(),
            ),
            (
                "DBUS_SYSTEM_BUS_ADDRESS".to_string(),
                approving_bus().into(),
            ),
        ])
        .into(),
    );
    if let Some(mode) = approval {
        fixture.insert("default_tools_approval_mode".into(), mode.into());
    }
    let mut provider = toml::Table::new();
    provider.insert("name".into(), "stand-in".into());
    provider.insert("base_url".into(), format!("{url}/v1").into());
    provider.insert("wire_api".into(), "responses".into());
    provider.insert("env_key".into(), "MCPGUARD_STAND_IN_KEY".into());
    let mut config = toml::Table::new();
    config.insert("model".into(), "stand-in".into());
    config.insert("model_provider".into(), "stand-in".into());
    config.insert("check_for_update_on_startup".into(), false.into());
    config.insert(
        "model_providers".into(),
        toml::Table::from_iter([("stand-in".to_string(), provider.into())]).into(),
    );
    config.insert(
        "mcp_servers".into(),
        toml::Table::from_iter([("fixture".to_string(), fixture.into())]).into(),
    );
    toml::to_string(&config).unwrap()
}

/// `codex exec` (through its npm launcher, which finds the native binary) with its own HOME and
/// `CODEX_HOME`, outside a Git repository (`--skip-git-repo-check`). The variables that would
/// point it at OpenAI's own provider are removed.
fn codex_exec(home: &Path, work: &Path, prompt: &str) -> Command {
    let mut cmd = codex(home, work);
    cmd.args(["exec", "--skip-git-repo-check", prompt]);
    cmd
}

/// Codex with its own HOME and `CODEX_HOME`, the stand-in's key, and the variables that would
/// point it at another endpoint or make mcpguard talkative removed; the interactive interface
/// when no arguments are added.
fn codex(home: &Path, work: &Path) -> Command {
    let codex = argv(&peers()["codex"]);
    let mut cmd = Command::new(&codex[0]);
    cmd.args(&codex[1..])
        .current_dir(work)
        .env("HOME", home)
        .env("CODEX_HOME", home.join(".codex"))
        .env("MCPGUARD_STAND_IN_KEY", "stand-in");
    for var in ["OPENAI_API_KEY", "OPENAI_BASE_URL", "MCPGUARD_LOG"] {
        cmd.env_remove(var);
    }
    cmd
}

/// A guarded fixture for Codex in a fresh temporary directory: the directory, HOME, the
/// working directory, the fixture's log and mcpguard's arguments.
fn codex_setup() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = server_log(dir.path());
    let args = guarded_argv(
        &snap,
        &digest,
        &[],
        &["--log".into(), log.display().to_string()],
    );
    let (home, work) = (dir.path().join("home"), dir.path().join("work"));
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    (dir, home, work, log, args)
}

/// Codex, configured in `$CODEX_HOME/config.toml` with the guarded server's tools approved by
/// Codex itself (mcpguard decides), connects to a default snapshot; `codex exec` calls the
/// reviewed `echo` through mcpguard and the result reaches its final message.
#[test]
fn codex_connects_to_a_default_snapshot_and_its_tool_result_reaches_the_answer() {
    let (_dir, home, work, log, args) = codex_setup();
    let (url, seen) = stand_in(codex_answer);
    std::fs::write(
        home.join(".codex/config.toml"),
        codex_config(&url, &args, Some("approve"), &runtime_dir(_dir.path())),
    )
    .unwrap();

    let out = run_bounded(&mut codex_exec(
        &home,
        &work,
        "Echo a greeting with the echo tool.",
    ));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "codex exec: {stdout}\n{stderr}");
    assert_answer_echoes_the_result(&stdout, &stderr, &seen);

    assert_pinned_echo_reached_the_server(&log);
}

/// Codex has a tool approval of its own in front of mcpguard's question. Left at its default
/// (`auto`), it stops a destructive MCP tool before mcpguard sees the call (`codex exec` runs
/// with approval policy `never`, so it refuses instead of asking; in the terminal it asks, and
/// then mcpguard asks again). With `default_tools_approval_mode = "approve"` on the guarded
/// server, as the README says, Codex leaves the decision to mcpguard, whose question is the only
/// one: `codex exec` answers every elicitation with a decline, so mcpguard refuses the write and
/// the server never receives it either way.
#[test]
fn codex_asks_once_when_its_own_approval_is_left_to_mcpguard() {
    for approval in [None, Some("approve")] {
        let (_dir, home, work, log, args) = codex_setup();
        let (url, _seen) = stand_in(codex_answer);
        std::fs::write(
            home.join(".codex/config.toml"),
            codex_config(&url, &args, approval, &runtime_dir(_dir.path())),
        )
        .unwrap();

        // With Codex's own approval left to mcpguard, its `decline` comes at once: the write
        // waits for `mcpguard approvals`, where the person (this test) approves it.
        let approver = approval
            .is_some()
            .then(|| approve_when_asked(_dir.path().join("runtime"), "write_note"));
        let out = run_bounded(&mut codex_exec(&home, &work, "Write a note for today."));
        if let Some(a) = approver {
            a.join().expect("the approval was given");
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "codex exec: {stdout}\n{stderr}");
        let answer = stdout
            .lines()
            .find(|l| l.starts_with("FINAL: "))
            .unwrap_or_else(|| panic!("no final answer; stdout: {stdout}\nstderr: {stderr}"));
        let reached = received(&log)
            .iter()
            .any(|m| m["method"] == "tools/call" && m["params"]["name"] == "write_note");
        match approval {
            None => assert!(
                !reached && answer.contains("approval"),
                "Codex's own approval stops the call before mcpguard: {answer}"
            ),
            Some(_) => assert!(
                reached && !answer.contains("consent_required"),
                "mcpguard held the write until it was approved out of band: {answer}\n{stderr}"
            ),
        }
        let received = received(&log);
        assert!(
            received.iter().any(|m| m["method"] == "initialize"),
            "Codex started the guarded server: {received:?}"
        );
    }
}

/// Marks Claude Code's first-run questions as answered in `~/.claude.json` (the file
/// `claude mcp add-json` wrote): onboarding done, the working directory trusted, and the
/// stand-in's API key accepted, so that the interactive interface opens on the conversation.
fn claude_skip_first_run(home: &Path, work: &Path) {
    let path = home.join(".claude.json");
    let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    doc["hasCompletedOnboarding"] = json!(true);
    doc["theme"] = json!("dark");
    doc["customApiKeyResponses"] = json!({"approved": ["stand-in"], "rejected": []});
    doc["projects"][work.display().to_string()] =
        json!({"hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true});
    std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
}

/// How many `tools/list` requests the fixture has received.
fn lists_of(log: &Path) -> usize {
    received(log)
        .iter()
        .filter(|m| m["method"] == "tools/list")
        .count()
}

/// Waits (up to a minute) until the fixture has received more than `before` `tools/list`
/// requests: the host has connected the guarded server and listed its tools, so a prompt typed
/// now can use them. Fails with the host's screen.
fn wait_until_listed(log: &Path, before: usize, tmux: &crate::support::tmux::Tmux, host: &str) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while lists_of(log) <= before {
        assert!(
            std::time::Instant::now() < until,
            "{host} never listed the guarded tools:\n{}",
            tmux.screen()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The `tools/call`s of `tool` the fixture server received.
fn calls_of(log: &Path, tool: &str) -> usize {
    received(log)
        .iter()
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)
        .count()
}

/// Waits for a host's confirmation dialog (every one of `markers` on the screen), answers it
/// with `keys` two seconds later, as a person would, and waits for the model's final answer:
/// the dialog's screen and the last screen.
fn answer_dialog(
    tmux: &crate::support::tmux::Tmux,
    markers: &[&str],
    keys: &[&str],
) -> (String, String) {
    use std::time::Duration;
    let dialog = tmux.wait_for(markers, Duration::from_secs(60)).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    tmux.keys(keys);
    let done = tmux
        .wait_for(&["FINAL: "], Duration::from_secs(60))
        .unwrap();
    (dialog, done)
}

/// Runs Claude Code's interactive interface in a terminal (tmux), types "Write a note for
/// today." once the guarded server has listed its tools (Claude Code connects its servers while
/// the interface opens, as a person sees), waits for mcpguard's question in Claude Code's
/// elicitation dialog, reads it for two seconds as a person would, types `keys`, and returns the
/// dialog's screen and the screen once the turn has ended.
fn claude_tui_write(
    dir: &Path,
    home: &Path,
    work: &Path,
    url: &str,
    log: &Path,
    keys: &[&str],
) -> (String, String) {
    use crate::support::tmux::Tmux;
    use std::time::Duration;
    let listed = lists_of(log);
    let tmux = Tmux::start(dir, &claude(home, work, url, &[]));
    wait_until_listed(log, listed, &tmux, "Claude Code");
    std::thread::sleep(Duration::from_secs(1));
    tmux.keys(&["Write a note for today.", "Enter"]);
    let (dialog, done) = answer_dialog(&tmux, &["requests your input", "Accept", "Decline"], keys);
    tmux.keys(&["/exit", "Enter"]);
    (dialog, done)
}

/// Claude Code's interactive interface, run in a terminal (tmux) as a person runs it, asks
/// mcpguard's question for a write in its own elicitation dialog, whose first lines carry the
/// server, the tool and the arguments (Claude Code folds the rest). Approved there once (the box
/// ticked, then Accept), the write reaches the server and its result the answer on screen;
/// declined there once (by a person, two seconds after it appeared), the write never reaches the
/// server and mcpguard's refusal is what the model gets. The server's tools are allowed in
/// Claude Code's settings as the README says, so mcpguard's question is the only one.
#[test]
fn claude_code_interactive_dialog_approves_a_write_once_and_declines_it_once() {
    let (dir, home, work, log, url, _seen) = claude_setup();
    claude_allow_fixture(&home);
    claude_skip_first_run(&home, &work);

    let (dialog, done) = claude_tui_write(
        dir.path(),
        &home,
        &work,
        &url,
        &log,
        &["Space", "Down", "Enter"],
    );
    // The dialog as drawn last (the scrollback can hold an earlier, partly drawn frame).
    let all: Vec<&str> = dialog.lines().collect();
    let head = all
        .iter()
        .rposition(|l| l.contains("requests your input"))
        .unwrap();
    let lines: Vec<&str> = all[head + 1..]
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .take(3)
        .collect();
    assert_eq!(
        lines,
        [
            r#"mcpguard: allow the AI to call "write_note" on the MCP server "fixture"?"#,
            &format!(r#"Arguments: body="{MARK}", path="notes/today.txt""#),
            "Approve runs this one call once, now; Decline refuses it. No answer within 60 s refuses it.",
        ],
        "the dialog's first three lines are the question:\n{dialog}"
    );
    assert!(
        done.contains("FINAL: ") && done.contains("wrote "),
        "the approved write's result reaches the answer:\n{done}"
    );
    assert_eq!(
        calls_of(&log, "write_note"),
        1,
        "the approved write reached the server"
    );

    let (_, done) = claude_tui_write(
        dir.path(),
        &home,
        &work,
        &url,
        &log,
        &["Down", "Right", "Enter"],
    );
    let answer = done
        .lines()
        .find(|l| l.contains("FINAL: "))
        .unwrap_or_default();
    assert!(
        answer.contains("declined"),
        "mcpguard's refusal of the declined write reaches the answer:\n{done}"
    );
    assert_eq!(
        calls_of(&log, "write_note"),
        1,
        "the declined write never reaches the server"
    );
}

/// fast-agent's configuration as its documentation writes it (`fastagent.config.yaml` in the
/// working directory, the server under `mcp.servers`), for a guarded fixture whose approval
/// sockets live in `runtime`: the temporary directory, the working directory and the fixture's
/// log.
fn fast_agent_setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let log = server_log(dir.path());
    let args = guarded_argv(
        &snap,
        &digest,
        &[],
        &["--log".into(), log.display().to_string()],
    );
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    let runtime = runtime_dir(dir.path());
    let quoted = |s: &str| Value::String(s.to_string()).to_string();
    let mut yaml = String::from("default_model: passthrough\n\nmcp:\n  servers:\n    fixture:\n");
    yaml += &format!(
        "      command: {}\n      args:\n",
        quoted(&mcpguard().display().to_string())
    );
    for a in &args {
        yaml += &format!("        - {}\n", quoted(a));
    }
    yaml += &format!(
        "      env:\n        XDG_RUNTIME_DIR: {}\n",
        quoted(&runtime.display().to_string())
    );
    std::fs::write(work.join("fastagent.config.yaml"), yaml).unwrap();
    (dir, work, log)
}

/// fast-agent with its own HOME, in `work` (where it reads `fastagent.config.yaml`).
fn fast_agent(home: &Path, work: &Path, args: &[&str]) -> Command {
    let fa = argv(&peers()["fast_agent"]);
    let mut cmd = Command::new(&fa[0]);
    cmd.args(&fa[1..])
        .args(args)
        .current_dir(work)
        .env("HOME", home)
        .env_remove("MCPGUARD_LOG");
    cmd
}

/// fast-agent's passthrough model turns `***CALL_TOOL NAME JSON` into a call of the MCP tool
/// NAME (`SERVER__TOOL`), so that no model endpoint is needed.
fn call_tool(tool: &str, args: &Value) -> String {
    format!("***CALL_TOOL fixture__{tool} {args}")
}

/// `fast-agent go --model passthrough -m "***CALL_TOOL fixture__echo …"` in `work`: checks that it
/// succeeded and that the echoed text is its final answer; returns what it printed.
fn fast_agent_echo(home: &Path, work: &Path) -> (String, String) {
    let message = call_tool("echo", &json!({"text": MARK}));
    let out = run_bounded(&mut fast_agent(
        home,
        work,
        &[
            "go",
            "--model",
            "passthrough",
            "--servers",
            "fixture",
            "-m",
            &message,
        ],
    ));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "fast-agent go: {stdout}\n{stderr}");
    let answer = stdout.trim_end().lines().last().unwrap_or_default();
    assert_eq!(
        serde_json::from_str::<Value>(answer).ok(),
        Some(json!({"text": MARK})),
        "the tool result is the final answer: {stdout}"
    );
    (stdout, stderr)
}

/// fast-agent (on CPython 3.13, which it needs) runs mcpguard over a default snapshot: `fast-agent
/// check` lists the guarded server, and a one-shot `fast-agent go` calls the reviewed `echo`
/// through mcpguard; the result comes back as the passthrough model's final answer. fast-agent
/// probes the 2026-07-28 `server/discover` first, so the server must still be initialized in the
/// pinned 2025-11-25; and the run prints no mcpguard line at the default level.
#[test]
fn fast_agent_connects_to_a_default_snapshot_and_its_tool_result_reaches_the_answer() {
    let (dir, work, log) = fast_agent_setup();
    let out = run_bounded(&mut fast_agent(dir.path(), &work, &["check"]));
    let checked = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        checked
            .lines()
            .any(|l| l.contains("fixture") && l.contains("STDIO")),
        "fast-agent check lists the guarded server: {checked}"
    );

    let (stdout, stderr) = fast_agent_echo(dir.path(), &work);
    assert!(
        !stdout.contains("mcpguard:") && !stderr.contains("mcpguard:"),
        "a healthy run is quiet at the default level: {stdout}\n{stderr}"
    );
    let init = assert_pinned_echo_reached_the_server(&log);
    assert_eq!(init["params"]["clientInfo"]["name"], "fast-agent-mcp");
    assert_eq!(calls_of(&log, "echo"), 1, "one call reached the server");
}

/// fast-agent shows mcpguard's question for a write in its elicitation form, in its terminal
/// interface (driven in tmux as a person drives it): the three-line question first, the box to
/// tick, then Accept / Decline. Ticked and accepted, the write reaches the server and its result
/// the screen; declined (by a person, two seconds after it appeared), the write never reaches the
/// server and mcpguard's refusal is the tool's answer.
#[test]
fn fast_agent_elicitation_form_approves_a_write_once_and_declines_it_once() {
    use crate::support::tmux::Tmux;
    use std::time::Duration;
    let (dir, work, log) = fast_agent_setup();
    let tmux = Tmux::start(
        dir.path(),
        &fast_agent(
            dir.path(),
            &work,
            &["go", "--model", "passthrough", "--servers", "fixture"],
        ),
    );
    wait_until_listed(&log, 0, &tmux, "fast-agent");
    tmux.wait_for(&["❯"], Duration::from_secs(30)).unwrap();
    let write = call_tool(
        "write_note",
        &json!({"path": "notes/today.txt", "body": MARK}),
    );

    // Approve: tick the box (Space), move to Accept (Tab), press it (Enter).
    tmux.keys(&[&write, "Enter"]);
    let form = tmux
        .wait_for(
            &["Elicitation Request", "[ ] Yes", "Accept"],
            Duration::from_secs(60),
        )
        .unwrap();
    for line in [
        r#"mcpguard: allow the AI to call "write_note" on the MCP server "fixture"?"#,
        &format!(r#"Arguments: body="{MARK}", path="notes/today.txt""#),
        "Approve runs this one call once, now; Decline refuses it.",
    ] {
        assert!(form.contains(line), "the form shows {line:?}:\n{form}");
    }
    std::thread::sleep(Duration::from_secs(2));
    tmux.keys(&["Space"]);
    tmux.wait_for(&["[*] Yes"], Duration::from_secs(10))
        .unwrap();
    tmux.keys(&["Tab", "Enter"]);
    tmux.wait_for(&["wrote "], Duration::from_secs(30)).unwrap();
    assert_eq!(
        calls_of(&log, "write_note"),
        1,
        "the approved write reached the server"
    );

    // Decline: move past Accept to Decline (Tab, Tab) and press it.
    // The first form may still be in the scrollback, so this waits for a second one.
    let forms = |screen: &str| screen.matches("Elicitation Request").count();
    let before = forms(&tmux.screen());
    tmux.keys(&[&write, "Enter"]);
    tmux.wait_until("a second form", Duration::from_secs(60), |screen| {
        forms(screen) > before && screen.contains("[ ] Yes")
    })
    .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    tmux.keys(&["Tab", "Tab", "Enter"]);
    let screen = tmux
        .wait_for(
            &["the person declined in the host channel"],
            Duration::from_secs(30),
        )
        .unwrap();
    assert!(screen.contains("consent_required"), "{screen}");
    assert_eq!(
        calls_of(&log, "write_note"),
        1,
        "the declined write never reaches the server"
    );
    tmux.keys(&["C-d"]);
}

/// The whole way a person takes with fast-agent: its `fastagent.config.yaml` (with a comment)
/// starts the fixture directly; `mcpguard wrap` rewrites the entry in place, the snapshot is
/// captured and reviewed, `wrap --pin` records its digest; then the real fast-agent, reading
/// the file as it is, starts the server through mcpguard, and a call of the reviewed `echo`
/// comes back as the answer. The comment is still there.
#[test]
fn fast_agent_runs_the_server_through_the_entry_mcpguard_wrap_wrote() {
    use crate::wrap::{wrap, wrap_for_fixture};
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fastagent.config.yaml");
    let log = server_log(dir.path());
    let quoted = |s: &str| Value::String(s.to_string()).to_string();
    let original = format!(
        "default_model: passthrough\n\nmcp:\n  servers:\n    fixture:  # the guarded test server\n      command: {}\n      args: [\"--log\", {}]\n",
        quoted(&crate::support::fixture().display().to_string()),
        quoted(&log.display().to_string())
    );
    std::fs::write(&config, &original).unwrap();
    let (out, _policy) = wrap_for_fixture(&config, dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    reviewed_snapshot(dir.path(), &[]);
    let out = wrap(&config, &["--pin"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wrapped = std::fs::read_to_string(&config).unwrap();
    assert!(
        wrapped.contains("    fixture:  # the guarded test server\n")
            && wrapped.contains(&quoted(&mcpguard().display().to_string())),
        "{wrapped}"
    );

    // HOME apart from the folder the policy grants for write: a write grant that holds the
    // user's shell start-up files and configuration is refused at start.
    let home = tempfile::tempdir().unwrap();
    fast_agent_echo(home.path(), dir.path());
    // mcpguard lists the server's tools again before it lets a call through, under ids of its
    // own; fast-agent talking to the server directly would not.
    let received = received(&log);
    assert!(
        received.iter().any(|m| m["method"] == "tools/list"
            && m["id"]
                .as_str()
                .is_some_and(|id| id.starts_with("mcpguard-"))),
        "the server ran under mcpguard: {received:?}"
    );
    assert_eq!(calls_of(&log, "echo"), 1);
}

/// Runs Codex's interactive interface in a terminal (tmux) over the guarded fixture, with the
/// working directory trusted and the server's tools approved by Codex itself (as the README
/// says), types "Write a note for today.", waits for mcpguard's question in Codex's form, reads it
/// for two seconds as a person would, types `keys`, and returns the form's screen and the screen
/// once the turn has ended.
fn codex_tui_write(keys: &[&str], log_of: impl FnOnce(&Path)) -> (String, String) {
    use crate::support::tmux::Tmux;
    use std::time::Duration;
    let (dir, home, work, log, args) = codex_setup();
    let (url, _seen) = stand_in(codex_answer);
    let mut config = codex_config(&url, &args, Some("approve"), &runtime_dir(dir.path()));
    config += &format!(
        "\n[projects.{}]\ntrust_level = \"trusted\"\n",
        Value::String(work.display().to_string())
    );
    std::fs::write(home.join(".codex/config.toml"), config).unwrap();
    let tmux = Tmux::start(dir.path(), &codex(&home, &work));
    tmux.wait_for(&["Ask Codex to do anything"], Duration::from_secs(60))
        .unwrap();
    wait_until_listed(&log, 0, &tmux, "Codex");
    // Codex takes keys that arrive in a burst for a paste, where Enter is a new line; so the
    // Enter comes a second after the text, as a person's would.
    tmux.keys(&["Write a note for today."]);
    std::thread::sleep(Duration::from_secs(1));
    tmux.keys(&["Enter"]);
    let (form, done) = answer_dialog(&tmux, &["mcpguard: allow the AI", "enter to submit"], keys);
    log_of(&log);
    (form, done)
}

/// Codex's interactive interface, run in a terminal (tmux), asks mcpguard's question in its own
/// form: the three lines of the question, then the box as True / False. True submitted, the
/// write reaches the server and its result the answer on screen; False submitted (the person
/// did not approve, two seconds after the form appeared), the write never reaches the server and
/// mcpguard's refusal is what the model gets. Codex's own approval is off for the server, as the
/// README says, so mcpguard's question is the only one.
#[test]
fn codex_interactive_form_approves_a_write_once_and_declines_it_once() {
    let (form, done) = codex_tui_write(&["Up", "Enter"], |log| {
        assert_eq!(
            calls_of(log, "write_note"),
            1,
            "the approved write reached the server"
        )
    });
    for line in [
        r#"mcpguard: allow the AI to call "write_note" on the MCP server "fixture"?"#,
        &format!(r#"Arguments: body="{MARK}", path="notes/today.txt""#),
        "Approve runs this one call once, now; Decline refuses it. No answer within 60 s refuses it.",
    ] {
        assert!(form.contains(line), "the form shows {line:?}:\n{form}");
    }
    assert!(
        done.contains("wrote "),
        "the approved write's result reaches the answer:\n{done}"
    );

    let (_, done) = codex_tui_write(&["Enter"], |log| {
        assert_eq!(
            calls_of(log, "write_note"),
            0,
            "the declined write never reaches the server"
        )
    });
    assert!(
        done.contains("did not tick approve"),
        "mcpguard's refusal reaches the answer:\n{done}"
    );
}

/// The fixture's log, in a folder of its own: the fixture's grant is the log's folder, and a
/// grant that holds the host's HOME (its shell start-up files, `.config`, `.local`) is refused
/// at start, so the log cannot sit beside `home/`.
fn server_log(dir: &Path) -> PathBuf {
    let folder = dir.join("server");
    std::fs::create_dir_all(&folder).unwrap();
    folder.join("server.log")
}
