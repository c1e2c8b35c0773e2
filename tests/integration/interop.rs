//! Interoperability with real MCP peers (the Python `mcp` SDK client, the TypeScript reference
//! servers, `mcp-server-time`, the Inspector CLI): through `mcpguard --allow-unpinned` every
//! observable result equals the direct connection's, except what the gate changes on purpose
//! (named where it applies). The peers are installed by `scripts/install-peers.sh`
//! (`scripts/test.sh` runs it first); without them these tests fail and say so.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};

use crate::support::{mcpguard, reads_policy};

pub fn peers() -> Value {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = root.join(".peers/paths.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{} is missing ({e}): install the real MCP peers with scripts/install-peers.sh (scripts/test.sh does it)", path.display())
    });
    serde_json::from_str(&text).expect("paths.json")
}

pub fn argv(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("argv")
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The command that runs the Python SDK client driver (tests/peers/client.py).
pub fn python_command(mode: &str, calls: &[(&str, Value)], server: &[String]) -> Command {
    python_command_with(mode, &[], calls, server)
}

/// `python_command` with extra driver options (`--elicit accept`, ...).
pub fn python_command_with(
    mode: &str,
    extra: &[&str],
    calls: &[(&str, Value)],
    server: &[String],
) -> Command {
    let p = peers();
    let driver = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/peers/client.py");
    let mut cmd = Command::new(p["python"].as_str().unwrap());
    cmd.arg(driver)
        .args(["--mode", mode, "--timeout", "40", "--settle", "0.3"])
        .args(extra);
    for (tool, args) in calls {
        cmd.args(["--call", tool, "--args", &args.to_string()]);
    }
    cmd.arg("--").args(server);
    cmd
}

/// Runs a prepared Python client command (bounded) and returns its transcript and stderr
/// (where the server's stderr, and so mcpguard's, goes); a failed run or a missing transcript
/// fails the test with both outputs.
pub fn run_python(cmd: &mut Command) -> (Value, String) {
    let out = crate::support::run_bounded(cmd);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "client.py failed: {stderr}");
    let t = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "client.py printed no JSON ({e}): {}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (t, stderr)
}

/// Runs the Python SDK client driver and returns its transcript.
pub fn python_client(mode: &str, calls: &[(&str, Value)], server: &[String]) -> Value {
    let mut cmd = python_command(mode, calls, server);
    let out = cmd.output().expect("run client.py");
    assert!(
        out.status.success(),
        "client.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "client.py printed no JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// `mcpguard --allow-unpinned -- <server...>`
pub fn guarded(server: &[String]) -> Vec<String> {
    let mut v = vec![
        mcpguard().display().to_string(),
        "--allow-unpinned".to_string(),
        "--policy".to_string(),
        reads_policy().display().to_string(),
    ];
    v.extend(crate::support::sandbox_grants(&server[1..]));
    v.push("--".to_string());
    v.extend_from_slice(server);
    v
}

/// Compares two transcripts, ignoring only what differs between any two runs.
fn assert_same(direct: &Value, through: &Value, what: &str) {
    assert_eq!(
        direct["ok"], true,
        "{what}: the direct run failed: {direct}"
    );
    for key in [
        "protocol_version",
        "server_info",
        "instructions",
        "tools",
        "tool_names",
        "calls",
        "notifications",
        "server_requests",
        "errors",
        "ok",
    ] {
        assert_eq!(
            direct[key], through[key],
            "{what}: `{key}` differs through mcpguard"
        );
    }
    // The gate removes the capabilities it blocks (prompts, resources, completions, tasks) on
    // purpose; everything else must be as the server said.
    let mut caps = direct["server_capabilities"].clone();
    if let Some(c) = caps.as_object_mut() {
        for blocked in ["prompts", "resources", "completions", "tasks"] {
            c.remove(blocked);
        }
    }
    assert_eq!(
        caps, through["server_capabilities"],
        "{what}: server capabilities differ beyond the blocked ones"
    );
}

/// Runs each mode directly and through mcpguard. mcpguard answers `server/discover` with
/// method-not-found (the gate pins the legacy handshake), so an `auto` client through mcpguard
/// must see exactly what a `legacy` client sees directly.
fn check_server(server: Vec<String>, calls: &[(&str, Value)], modes: &[&str]) {
    let direct_legacy = python_client("legacy", calls, &server);
    for mode in modes {
        let through = python_client(mode, calls, &guarded(&server));
        assert_same(
            &direct_legacy,
            &through,
            &format!(
                "{} ({mode} through mcpguard vs legacy direct)",
                server.join(" ")
            ),
        );
    }
}

#[test]
fn python_sdk_with_server_everything() {
    let server = argv(&peers()["server_everything"]);
    check_server(
        server,
        &[
            ("echo", json!({"message": "hello through mcpguard"})),
            ("get-sum", json!({"a": 2, "b": 40})),
        ],
        &["legacy", "auto"],
    );
}

#[test]
fn python_sdk_with_server_filesystem() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("note.txt"), "café ☕\n").unwrap();
    let dir_path = dir.path().canonicalize().unwrap().display().to_string();
    let mut server = argv(&peers()["server_filesystem"]);
    server.push(dir_path.clone());
    let file = format!("{dir_path}/note.txt");
    check_server(
        server,
        &[
            ("list_allowed_directories", json!({})),
            ("read_text_file", json!({"path": file})),
        ],
        &["legacy", "auto"],
    );
}

#[test]
fn python_sdk_with_mcp_server_time() {
    // `convert_time` with a fixed instant is deterministic within a run, unlike the current time.
    let server = argv(&peers()["server_time"]);
    check_server(
        server,
        &[(
            "convert_time",
            json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
        )],
        &["legacy", "auto"],
    );
}

/// mcp-server-fetch starts and lists its tool under the default sandbox (no network: fetching
/// itself needs `tcp_connect = [80, 443]` and `allow_udp = true` in the policy).
#[test]
fn python_sdk_with_mcp_server_fetch() {
    let server = argv(&peers()["server_fetch"]);
    check_server(server, &[], &["legacy"]);
}

fn inspector(args: &[&str], server: &[String]) -> (i32, Value) {
    let p = peers();
    let cli = argv(&p["inspector"]);
    let out = Command::new(&cli[0])
        .args(&cli[1..])
        .args(["-q", "--format", "json"])
        .args(args)
        .arg("--")
        .args(server)
        .output()
        .expect("run the inspector");
    let text = if out.stdout.is_empty() {
        &out.stderr
    } else {
        &out.stdout
    };
    let v = serde_json::from_slice(text).unwrap_or_else(|e| {
        panic!(
            "inspector printed no JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn inspector_cli_through_mcpguard() {
    // server-everything is left out here: the Inspector advertises `roots`, which the gate removes
    // on purpose, and server-everything lists a different set of tools for different client
    // capabilities. The Python client, which advertises none, covers it above.
    let p = peers();
    let dir = tempfile::tempdir().unwrap();
    let mut filesystem = argv(&p["server_filesystem"]);
    filesystem.push(dir.path().display().to_string());
    for server in [filesystem, argv(&p["server_time"])] {
        let direct = inspector(&["--method", "tools/list"], &server);
        let through = inspector(&["--method", "tools/list"], &guarded(&server));
        assert_eq!(direct.0, 0, "{}", direct.1);
        assert_eq!(
            direct,
            through,
            "tools/list differs through mcpguard for {}",
            server.join(" ")
        );
    }
    let server = argv(&p["server_everything"]);
    let call = [
        "--method",
        "tools/call",
        "--tool-name",
        "echo",
        "--tool-args-json",
        r#"{"message":"hi"}"#,
    ];
    let direct = inspector(&call, &server);
    let through = inspector(&call, &guarded(&server));
    assert_eq!(direct.0, 0, "{}", direct.1);
    assert_eq!(direct, through);
}
