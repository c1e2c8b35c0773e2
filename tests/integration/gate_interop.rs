//! Interoperability through the gate: real MCP clients (the Python `mcp` SDK client in legacy and
//! auto mode, the Inspector CLI in its legacy and auto protocol eras) work through
//! `mcpguard --manifest SNAP --sha256 DIGEST --server KEY -- <server...>` against the real
//! server-everything, server-filesystem and mcp-server-time, each pinned by a snapshot that
//! `mcpguard capture` took from it and `mcpguard review --from` reviewed for a few read-only tools.
//!
//! For each server the same session is run directly and through the gate, and the test asserts:
//! the handshake works with the pinned protocol version and the serverInfo of the direct
//! connection (which is also the snapshot's); `tools/list` returns exactly the reviewed Tool
//! objects of the snapshot, in snapshot order; reviewed calls return what they return directly
//! (only truly volatile values masked: the current time and today's date); a call of an unreviewed
//! tool fails (JSON-RPC -32602 for the Python client, which sends it; the Inspector refuses a name
//! it was not listed without calling the server and exits non-zero); and in auto mode both clients
//! probe `server/discover`, get -32601 and fall back to `initialize`.
//!
//! The Inspector prints only results, so its session is observed with a transparent `tee` tap
//! between it and mcpguard: the bytes it sent and received are checked line by line.
//!
//! Peers come from `.peers/` (scripts/install-peers.sh). Every process runs under a deadline.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::interop::{argv, peers, python_command};
use crate::support::{mcpguard, reads_policy, run_bounded as run};

/// The capabilities the gate removes from what the host sees, on purpose.
const BLOCKED_SERVER_CAPABILITIES: [&str; 4] = ["prompts", "resources", "completions", "tasks"];

// ---------------------------------------------------------------------------------------------
// Snapshot

/// A captured and reviewed snapshot of one real server.
struct Reviewed {
    snap: PathBuf,
    digest: String,
    key: &'static str,
    doc: Value,
}

impl Reviewed {
    /// `mcpguard --manifest SNAP --sha256 DIGEST --server KEY -- <server...>`
    fn gate(&self, server: &[String]) -> Vec<String> {
        let mut v = vec![
            mcpguard().display().to_string(),
            "--manifest".into(),
            self.snap.display().to_string(),
            "--sha256".into(),
            self.digest.clone(),
            "--server".into(),
            self.key.into(),
            "--policy".into(),
            reads_policy().display().to_string(),
        ];
        v.extend(crate::support::sandbox_grants(&server[1..]));
        v.push("--".into());
        v.extend_from_slice(server);
        v
    }

    fn entry(&self) -> &Value {
        &self.doc["servers"][self.key]
    }

    fn protocol_version(&self) -> &Value {
        &self.doc["protocolVersion"]
    }

    fn server_info(&self) -> &Value {
        &self.entry()["serverInfo"]
    }

    /// Every Tool object of every captured page, in order.
    fn captured_tools(&self) -> Vec<Value> {
        self.entry()["toolPages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["tools"].as_array().unwrap().iter().cloned())
            .collect()
    }

    /// The reviewed Tool objects exactly as captured, in snapshot order.
    fn reviewed_tools(&self) -> Vec<Value> {
        let reviews = self.entry()["reviews"].as_object().unwrap();
        self.captured_tools()
            .into_iter()
            .filter(|t| reviews.contains_key(t["name"].as_str().unwrap()))
            .collect()
    }
}

/// The reviewer's assertions for a headless, read-only tool without side effects.
fn read_only_assertions() -> Value {
    json!({"headless": true, "independentCalls": true, "modelBacked": false,
           "sideEffects": [], "concurrency": "safe", "referenceBasedIO": true})
}

/// `mcpguard capture` the server, check that each tool to review is read-only and that its
/// channel map classifies every argument its captured inputSchema declares (no more, no less),
/// then `mcpguard review --from` them.
fn capture_and_review(
    dir: &Path,
    key: &'static str,
    server: &[String],
    reviews: &[(&str, Value)],
) -> Reviewed {
    let snap = dir.join(format!("{key}.snapshot.json"));
    let out = run(Command::new(mcpguard())
        .args(["capture", "--server", key, "--out"])
        .arg(&snap)
        .arg("--")
        .args(server));
    assert!(
        out.status.success(),
        "capture of {key} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let captured: Value = serde_json::from_slice(&std::fs::read(&snap).unwrap()).unwrap();
    let tools: Vec<Value> = captured["servers"][key]["toolPages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["tools"].as_array().unwrap().iter().cloned())
        .collect();
    let mut from = serde_json::Map::new();
    for (name, channels) in reviews {
        let tool = tools
            .iter()
            .find(|t| t["name"] == *name)
            .unwrap_or_else(|| panic!("{key}: no tool {name:?} in the capture"));
        assert_eq!(
            tool["annotations"]["readOnlyHint"], true,
            "{key}: {name} is meant to be a read-only tool: {tool}"
        );
        let mut declared: Vec<String> = tool["inputSchema"]["properties"]
            .as_object()
            .map(|p| p.keys().map(|k| format!("/{k}")).collect())
            .unwrap_or_default();
        let mut classified: Vec<String> = channels.as_object().unwrap().keys().cloned().collect();
        declared.sort();
        classified.sort();
        assert_eq!(
            classified, declared,
            "{key}: the review of {name} must classify exactly the arguments of its inputSchema"
        );
        from.insert(
            name.to_string(),
            json!({"reviewer": "interop@example.test", "assertions": read_only_assertions(),
                   "inputChannels": channels}),
        );
    }
    let from_file = dir.join(format!("{key}.reviews.json"));
    std::fs::write(&from_file, Value::Object(from).to_string()).unwrap();
    let out = run(Command::new(mcpguard())
        .arg("review")
        .arg(&snap)
        .args(["--server", key, "--from"])
        .arg(&from_file));
    assert!(
        out.status.success(),
        "review of {key} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let digest = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert_eq!(digest.len(), 64, "review prints the new digest: {digest:?}");
    let doc: Value = serde_json::from_slice(&std::fs::read(&snap).unwrap()).unwrap();
    Reviewed {
        snap,
        digest,
        key,
        doc,
    }
}

// ---------------------------------------------------------------------------------------------
// Volatile values

/// Masks for results that legitimately differ between two runs.
type Mask = fn(&str, &Value) -> Value;

fn unmasked(_tool: &str, result: &Value) -> Value {
    result.clone()
}

const WEEKDAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

/// mcp-server-time: `get_current_time` reports the current instant, and `convert_time` converts a
/// wall-clock time of *today*. The instant of `get_current_time` is masked wherever it occurs
/// (structuredContent and the JSON text block); for both tools, calendar dates and weekday names
/// are masked, so a run that crosses midnight still compares. Everything else (time zones, times
/// of day, offsets, DST flags, time differences) must be equal.
fn mask_time(tool: &str, result: &Value) -> Value {
    let mut text = result.to_string();
    if tool == "get_current_time" {
        if let Some(now) = result
            .pointer("/structuredContent/datetime")
            .and_then(Value::as_str)
        {
            text = text.replace(now, "<now>");
        }
    }
    text = mask_dates(&text);
    for day in WEEKDAYS {
        text = text.replace(day, "<weekday>");
    }
    serde_json::from_str(&text).unwrap()
}

/// Replaces every `dddd-dd-dd` with `<date>`.
fn mask_dates(s: &str) -> String {
    let b = s.as_bytes();
    let shape = |i: usize| {
        i + 10 <= b.len()
            && b[i..i + 10].iter().enumerate().all(|(k, c)| match k {
                4 | 7 => *c == b'-',
                _ => c.is_ascii_digit(),
            })
    };
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < b.len() {
        if shape(i) {
            out.push_str("<date>");
            i += 10;
        } else {
            let c = s[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The Python SDK client

/// Runs tests/peers/client.py in `mode` with `calls` and returns its transcript and stderr (where
/// the server's stderr, and so mcpguard's, goes).
fn python(mode: &str, calls: &[(&str, Value)], server: &[String]) -> (Value, String) {
    crate::interop::run_python(&mut python_command(mode, calls, server))
}

/// What one server's session does: reviewed calls around one call of an unreviewed tool.
struct Session<'a> {
    /// Calls of reviewed tools; the unreviewed call is made between the first and the rest.
    calls: &'a [(&'a str, Value)],
    unreviewed: (&'a str, Value),
    /// Whether the unreviewed tool exists on the server (so the direct call succeeds).
    unreviewed_exists: bool,
    mask: Mask,
}

impl Session<'_> {
    fn all_calls(&self) -> Vec<(&str, Value)> {
        let mut v: Vec<(&str, Value)> = self.calls.iter().map(|(n, a)| (*n, a.clone())).collect();
        v.insert(1, (self.unreviewed.0, self.unreviewed.1.clone()));
        v
    }
}

/// Checks one Python session through the gate against the direct legacy session.
fn check_python(r: &Reviewed, s: &Session<'_>, direct: &Value, through: &Value, mode: &str) {
    let what = format!("{} (Python client, {mode} mode, through the gate)", r.key);
    let ctx = || format!("{what}: transcript {through}");

    // The handshake: in auto mode the probe is refused with method-not-found and the client
    // falls back to initialize; the negotiated version is the pinned one.
    let handshake = through["handshake"].as_array().unwrap();
    let init = match mode {
        "legacy" => {
            assert_eq!(handshake.len(), 1, "{}", ctx());
            &handshake[0]
        }
        "auto" => {
            assert_eq!(handshake.len(), 2, "{}", ctx());
            assert_eq!(handshake[0]["method"], "server/discover", "{}", ctx());
            assert_eq!(
                handshake[0]["error"]["code"],
                -32601,
                "server/discover is answered with method-not-found: {}",
                ctx()
            );
            &handshake[1]
        }
        _ => unreachable!(),
    };
    assert_eq!(init["method"], "initialize", "{}", ctx());
    let result = &init["result"];
    assert_eq!(
        &result["protocolVersion"],
        r.protocol_version(),
        "{}",
        ctx()
    );
    assert_eq!(&result["serverInfo"], r.server_info(), "{}", ctx());
    assert_eq!(through["protocol_version"], *r.protocol_version(), "{what}");
    assert_eq!(
        through["protocol_version"], direct["protocol_version"],
        "{what}"
    );
    assert_eq!(
        through["server_info"], direct["server_info"],
        "{what}: serverInfo"
    );
    assert_eq!(
        through["instructions"], direct["instructions"],
        "{what}: instructions"
    );
    let mut caps = direct["server_capabilities"].clone();
    for blocked in BLOCKED_SERVER_CAPABILITIES {
        caps.as_object_mut().unwrap().remove(blocked);
    }
    assert_eq!(
        through["server_capabilities"], caps,
        "{what}: server capabilities beyond the blocked ones"
    );

    // tools/list: exactly the reviewed Tool objects, each also equal to the live one.
    let reviewed = r.reviewed_tools();
    assert_eq!(
        through["tools"],
        Value::Array(reviewed.clone()),
        "{what}: tools/list must be the reviewed Tool objects of the snapshot"
    );
    let names: Vec<&str> = reviewed
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(through["tool_names"], json!(names), "{what}");
    assert_eq!(through["tools_pages"], 1, "{what}");
    for tool in &reviewed {
        let live = direct["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == tool["name"]);
        assert_eq!(
            live,
            Some(tool),
            "{what}: the reviewed object equals the direct connection's"
        );
    }

    // Calls: reviewed ones as directly; the unreviewed one refused with -32602.
    let calls = through["calls"].as_array().unwrap();
    let direct_calls = direct["calls"].as_array().unwrap();
    assert_eq!(calls.len(), s.all_calls().len(), "{}", ctx());
    for (i, (name, args)) in s.all_calls().iter().enumerate() {
        let (c, d) = (&calls[i], &direct_calls[i]);
        assert_eq!(c["name"], *name, "{}", ctx());
        assert_eq!(c["arguments"], *args, "{}", ctx());
        if *name == s.unreviewed.0 {
            assert_eq!(c["result"], Value::Null, "{}", ctx());
            assert_eq!(
                c["wire_error"]["code"],
                -32602,
                "an unreviewed tool: {}",
                ctx()
            );
            assert_eq!(c["error"]["code"], -32602, "{}", ctx());
            continue;
        }
        assert!(c.get("error").is_none(), "{name}: {}", ctx());
        assert!(c["result"].is_object(), "{name}: {}", ctx());
        assert_eq!(
            (s.mask)(name, &c["result"]),
            (s.mask)(name, &d["result"]),
            "{what}: the result of {name} differs from the direct connection's"
        );
    }
    let errors = through["errors"].as_array().unwrap();
    assert_eq!(
        errors.len(),
        1,
        "only the unreviewed call failed: {}",
        ctx()
    );
    assert_eq!(
        errors[0]["stage"],
        format!("tools/call {}", s.unreviewed.0),
        "{}",
        ctx()
    );
    assert_eq!(through["timed_out"], false, "{}", ctx());

    // What else reached the client is what reaches it directly.
    assert_eq!(
        through["notifications"], direct["notifications"],
        "{what}: notifications"
    );
    assert_eq!(through["server_requests"], json!([]), "{what}");
    assert_eq!(direct["server_requests"], json!([]), "{what}");
}

/// The whole Python part for one server: one direct legacy run, then legacy and auto runs
/// through the gate.
fn python_through_the_gate(r: &Reviewed, server: &[String], s: &Session<'_>) {
    let calls = s.all_calls();
    let (direct, _) = python("legacy", &calls, server);
    // The direct session itself is sound: the pinned version, the snapshot's serverInfo, and the
    // unreviewed tool is served by the server (so only the gate refuses it).
    assert_eq!(
        direct["protocol_version"],
        *r.protocol_version(),
        "{direct}"
    );
    assert_eq!(
        direct["handshake"][0]["result"]["serverInfo"],
        *r.server_info(),
        "{direct}"
    );
    let unreviewed = &direct["calls"][1];
    assert_eq!(unreviewed["name"], s.unreviewed.0);
    if s.unreviewed_exists {
        assert_eq!(direct["ok"], true, "{direct}");
        assert!(unreviewed["result"].is_object(), "{direct}");
    } else {
        assert_eq!(
            direct["errors"].as_array().map(Vec::len),
            Some(1),
            "{direct}"
        );
    }
    for mode in ["legacy", "auto"] {
        let (through, stderr) = python(mode, &calls, &r.gate(server));
        check_python(r, s, &direct, &through, mode);
        assert!(
            stderr.contains(&format!(
                "refused tools/call of unknown tool \"{}\"",
                s.unreviewed.0
            )),
            "the refusal is explained on stderr: {stderr}"
        );
        assert!(
            !stderr.contains("invalidated"),
            "{}: the review stays valid: {stderr}",
            r.key
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The Inspector CLI

/// One Inspector run: its exit code, stdout and stderr, and (when tapped) the JSON-RPC messages
/// it sent and received, in order.
struct Inspected {
    code: i32,
    stdout: Value,
    stderr: String,
    sent: Vec<Value>,
    received: Vec<Value>,
}

impl Inspected {
    /// The response the Inspector received to its first request of `method`.
    fn response_to(&self, method: &str) -> Option<&Value> {
        let id = &self.sent.iter().find(|m| m["method"] == method)?["id"];
        self.received
            .iter()
            .find(|m| m["id"] == *id && m.get("method").is_none())
    }
}

fn json_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Runs the Inspector CLI with `args` against `server`. With `tap`, the server command is wrapped
/// in `sh -c 'tee SENT | <server...> | tee RECEIVED'`, a transparent pipe that records the wire.
fn inspector(args: &[&str], server: &[String], tap: Option<(&Path, &str)>) -> Inspected {
    let cli = argv(&peers()["inspector"]);
    let mut target: Vec<String> = server.to_vec();
    let mut logs = None;
    if let Some((dir, name)) = tap {
        let sent = dir.join(format!("{name}.sent.jsonl"));
        let received = dir.join(format!("{name}.received.jsonl"));
        target = vec![
            "sh".into(),
            "-c".into(),
            r#"sent="$1"; received="$2"; shift 2; tee "$sent" | "$@" | tee "$received""#.into(),
            "tap".into(),
            sent.display().to_string(),
            received.display().to_string(),
        ];
        target.extend_from_slice(server);
        logs = Some((sent, received));
    }
    let out = run(Command::new(&cli[0])
        .args(&cli[1..])
        .args(["--format", "json"])
        .args(args)
        .arg("--")
        .args(&target));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    // The result goes to stdout; an error envelope to stderr (its last line).
    let text = if out.stdout.is_empty() {
        stderr
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .unwrap_or("")
    } else {
        std::str::from_utf8(&out.stdout).unwrap()
    };
    let stdout = serde_json::from_str(text).unwrap_or_else(|e| {
        panic!(
            "the Inspector printed no JSON ({e}): {}{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    let (sent, received) = logs
        .map(|(s, r)| (json_lines(&s), json_lines(&r)))
        .unwrap_or_default();
    Inspected {
        code: out.status.code().unwrap_or(-1),
        stdout,
        stderr,
        sent,
        received,
    }
}

/// The Inspector part for one server.
fn inspector_through_the_gate(
    dir: &Path,
    r: &Reviewed,
    server: &[String],
    call: (&str, Value),
    unreviewed: &str,
    mask: Mask,
) {
    let gate = r.gate(server);
    let reviewed = Value::Array(r.reviewed_tools());

    // tools/list in both eras, with the wire recorded.
    for era in ["legacy", "auto"] {
        let what = format!("{} (Inspector, {era} era, through the gate)", r.key);
        let run = inspector(
            &["--protocol-era", era, "--method", "tools/list"],
            &gate,
            Some((dir, &format!("inspector-{era}"))),
        );
        assert_eq!(run.code, 0, "{what}: {}\n{}", run.stdout, run.stderr);
        assert_eq!(
            run.stdout["result"]["tools"], reviewed,
            "{what}: tools/list must be the reviewed Tool objects of the snapshot"
        );
        let methods: Vec<&str> = run
            .sent
            .iter()
            .filter_map(|m| m["method"].as_str())
            .collect();
        let init_at = methods.iter().position(|m| *m == "initialize");
        assert!(init_at.is_some(), "{what}: sent {methods:?}");
        if era == "auto" {
            assert_eq!(
                methods.first(),
                Some(&"server/discover"),
                "{what}: the auto era probes first: {methods:?}"
            );
            let probe = run.response_to("server/discover").expect("probe answered");
            assert_eq!(probe["error"]["code"], -32601, "{what}: {probe}");
            // A dual-era host's probe is normal behaviour: at the proxy's default level it
            // leaves no line on stderr, which hosts record (some as errors).
            assert!(
                !run.stderr.contains("server/discover is not available"),
                "{what}: the probe is not a warning: {}",
                run.stderr
            );
        } else {
            assert_eq!(init_at, Some(0), "{what}: sent {methods:?}");
        }
        let init = run.response_to("initialize").expect("initialize answered");
        assert_eq!(
            &init["result"]["protocolVersion"],
            r.protocol_version(),
            "{what}: {init}"
        );
        assert_eq!(
            &init["result"]["serverInfo"],
            r.server_info(),
            "{what}: {init}"
        );
        let list = run.response_to("tools/list").expect("tools/list answered");
        assert_eq!(
            list["result"]["tools"], reviewed,
            "{what}: tools/list on the wire"
        );
    }

    // A reviewed call returns what it returns directly.
    let args = call.1.to_string();
    let call_args = [
        "-q",
        "--method",
        "tools/call",
        "--tool-name",
        call.0,
        "--tool-args-json",
        &args,
    ];
    let direct = inspector(&call_args, server, None);
    let through = inspector(&call_args, &gate, None);
    assert_eq!(direct.code, 0, "{}: {}", r.key, direct.stdout);
    assert_eq!(
        through.code, 0,
        "{}: {}\n{}",
        r.key, through.stdout, through.stderr
    );
    assert_eq!(
        mask(call.0, &through.stdout["result"]),
        mask(call.0, &direct.stdout["result"]),
        "{} (Inspector): the result of {} differs from the direct connection's",
        r.key,
        call.0
    );

    // An unreviewed tool is not listed, so the Inspector refuses it without calling the server.
    let refused = inspector(
        &[
            "-q",
            "--method",
            "tools/call",
            "--tool-name",
            unreviewed,
            "--tool-args-json",
            "{}",
        ],
        &gate,
        Some((dir, "inspector-unreviewed")),
    );
    assert_ne!(refused.code, 0, "{}: {}", r.key, refused.stdout);
    assert_eq!(
        refused.stdout["error"]["code"], "tool_not_found",
        "{}: {}",
        r.key, refused.stdout
    );
    assert!(
        !refused.sent.iter().any(|m| m["method"] == "tools/call"),
        "{}: the Inspector sent no tools/call: {:?}",
        r.key,
        refused.sent
    );
}

// ---------------------------------------------------------------------------------------------
// The servers

#[test]
fn python_sdk_and_inspector_through_the_gate_with_server_everything() {
    let dir = tempfile::tempdir().unwrap();
    let server = argv(&peers()["server_everything"]);
    let r = capture_and_review(
        dir.path(),
        "everything",
        &server,
        &[
            ("echo", json!({"/message": "data"})),
            ("get-sum", json!({"/a": "data", "/b": "data"})),
        ],
    );
    let session = Session {
        calls: &[
            ("echo", json!({"message": "hello through the gate"})),
            ("get-sum", json!({"a": 2, "b": 40})),
        ],
        unreviewed: ("get-annotated-message", json!({"messageType": "success"})),
        unreviewed_exists: true,
        mask: unmasked,
    };
    python_through_the_gate(&r, &server, &session);
    inspector_through_the_gate(
        dir.path(),
        &r,
        &server,
        ("echo", json!({"message": "hi"})),
        "get-annotated-message",
        unmasked,
    );
}

#[test]
fn python_sdk_and_inspector_through_the_gate_with_server_filesystem() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("note.txt"), "café ☕\nsecond line\nthird\n").unwrap();
    let root = root.canonicalize().unwrap().display().to_string();
    let note = format!("{root}/note.txt");
    let mut server = argv(&peers()["server_filesystem"]);
    server.push(root.clone());
    // The reviewer treats `path` as data: the server itself confines it to the one allowed root.
    // (Marking it `authority` would make every read a write that needs a person's approval; the
    // confirmation tests in `confirm.rs` exercise exactly that.)
    let r = capture_and_review(
        dir.path(),
        "filesystem",
        &server,
        &[
            ("list_allowed_directories", json!({})),
            (
                "read_text_file",
                json!({"/path": "data", "/head": "data", "/tail": "data"}),
            ),
        ],
    );
    let session = Session {
        calls: &[
            ("list_allowed_directories", json!({})),
            ("read_text_file", json!({"path": note})),
            ("read_text_file", json!({"path": note, "tail": 2})),
        ],
        unreviewed: ("list_directory", json!({"path": root})),
        unreviewed_exists: true,
        mask: unmasked,
    };
    python_through_the_gate(&r, &server, &session);
    inspector_through_the_gate(
        dir.path(),
        &r,
        &server,
        ("read_text_file", json!({"path": note, "head": 1})),
        "list_directory",
        unmasked,
    );
}

#[test]
fn python_sdk_and_inspector_through_the_gate_with_mcp_server_time() {
    // mcp-server-time has two tools and both are reviewed, so the unreviewed call names a tool
    // that is not in the snapshot (the server does not have it either).
    let dir = tempfile::tempdir().unwrap();
    let server = argv(&peers()["server_time"]);
    let r = capture_and_review(
        dir.path(),
        "time",
        &server,
        &[
            ("get_current_time", json!({"/timezone": "data"})),
            (
                "convert_time",
                json!({"/source_timezone": "data", "/time": "data", "/target_timezone": "data"}),
            ),
        ],
    );
    let session = Session {
        calls: &[
            ("get_current_time", json!({"timezone": "Europe/Paris"})),
            (
                "convert_time",
                json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
            ),
        ],
        unreviewed: ("get_time_zones", json!({})),
        unreviewed_exists: false,
        mask: mask_time,
    };
    python_through_the_gate(&r, &server, &session);
    inspector_through_the_gate(
        dir.path(),
        &r,
        &server,
        (
            "convert_time",
            json!({"source_timezone": "America/New_York", "time": "08:30", "target_timezone": "UTC"}),
        ),
        "get_time_zones",
        mask_time,
    );
}

/// server-filesystem with only `read_text_file` reviewed, for the refusal tests below.
fn reviewed_filesystem(dir: &Path) -> (Reviewed, Vec<String>, String) {
    let root = dir.join("root");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("note.txt"), "text\n").unwrap();
    let root = root.canonicalize().unwrap().display().to_string();
    let mut server = argv(&peers()["server_filesystem"]);
    server.push(root.clone());
    let r = capture_and_review(
        dir,
        "filesystem",
        &server,
        &[(
            "read_text_file",
            json!({"/path": "data", "/head": "data", "/tail": "data"}),
        )],
    );
    (r, server, format!("{root}/note.txt"))
}

/// The gate's refusal of a reviewed tool (here: arguments that violate the reviewed inputSchema)
/// reaches the Python SDK client intact: a tool execution error carrying the refusal contract.
#[test]
fn python_sdk_receives_the_gates_refusal_of_invalid_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let (r, server, note) = reviewed_filesystem(dir.path());
    let (t, stderr) = python(
        "legacy",
        &[
            ("read_text_file", json!({"path": 5})),
            ("read_text_file", json!({"path": note})),
        ],
        &r.gate(&server),
    );
    let refused = &t["calls"][0];
    assert!(refused.get("error").is_none(), "{t}");
    assert_eq!(refused["result"]["isError"], true, "{t}");
    assert_eq!(
        refused["result"]["_meta"]["dev.mcpguard/refusal"]["code"], "invalid_arguments",
        "{t}"
    );
    assert_eq!(
        refused["result"]["_meta"]["dev.mcpguard/refusal"]["category"], "input",
        "{t}"
    );
    assert_eq!(
        t["calls"][1]["result"]["structuredContent"]["content"], "text\n",
        "the session goes on: {t}"
    );
    assert_eq!(t["ok"], true, "{t}");
    assert!(
        stderr.contains("do not match the reviewed inputSchema"),
        "{stderr}"
    );
}

/// The same refusal through the Inspector CLI. The Inspector (like the TypeScript SDK 1.32.2
/// client) validates any present `structuredContent` against the tool's `outputSchema` even
/// when `isError` is true, so a refusal of a tool with an outputSchema carries its contract in
/// `_meta` only; this test keeps that working (it failed while the contract was in
/// `structuredContent`: "data must have required property 'content'", exit 1).
#[test]
fn inspector_receives_the_gates_refusal_of_invalid_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let (r, server, _) = reviewed_filesystem(dir.path());
    let run = inspector(
        &[
            "-q",
            "--method",
            "tools/call",
            "--tool-name",
            "read_text_file",
            "--tool-args-json",
            r#"{"path": 5}"#,
        ],
        &r.gate(&server),
        None,
    );
    assert_eq!(
        run.code, 5,
        "the Inspector sees a tool error, not an output-schema mismatch: {}",
        run.stdout
    );
    assert_eq!(run.stdout["result"]["isError"], true, "{}", run.stdout);
    assert_eq!(
        run.stdout["result"]["_meta"]["dev.mcpguard/refusal"]["code"], "invalid_arguments",
        "the refusal's contract reaches the host intact: {}",
        run.stdout
    );
}

#[test]
fn mask_dates_masks_only_calendar_dates() {
    assert_eq!(
        mask_dates(r#"{"datetime":"2026-11-29T12:00:00+00:00","x":"12-34-5678 é 1999-01-0"}"#),
        r#"{"datetime":"<date>T12:00:00+00:00","x":"12-34-5678 é 1999-01-0"}"#
    );
}
