//! The managed policy floor (issue 17), through the real binary guarding the fixture server: a
//! floor named by `MCPGUARD_SYSTEM_POLICY` is read first; a user policy that would loosen it is
//! refused before the server starts, naming the floor's file and line; a user policy can still
//! refuse more; `policy check` shows where each value came from.

use std::path::Path;
use std::process::Command;

use serde_json::json;

use crate::gate::{calls_received, guarded_argv, reviewed_snapshot, tool_names};
use crate::support::{mcpguard, reads_policy_with, Peer};

const FLOOR: &str = "# Managed by the administrators.\n[capabilities]\nsampling = false\n\n[review]\nrefused_tools = [\"add\"]\n";

fn guarded(snap: &Path, digest: &str, floor: &Path, policy: &Path, log: &Path) -> Peer {
    let argv = guarded_argv(
        snap,
        digest,
        &["--policy".into(), policy.display().to_string()],
        &["--log".into(), log.display().to_string()],
    );
    Peer::start_with(
        Command::new(mcpguard())
            .args(&argv)
            .env("MCPGUARD_SYSTEM_POLICY", floor),
    )
}

#[test]
fn a_floor_that_blocks_sampling_cannot_be_reenabled_by_a_user_policy() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (snap, digest) = reviewed_snapshot(d, &[]);
    let floor = d.join("floor.toml");
    std::fs::write(&floor, FLOOR).unwrap();
    let user = d.join("user.toml");
    let text = reads_policy_with("[capabilities]\nsampling = true\n");
    let line = text.lines().position(|l| l == "sampling = true").unwrap() + 1;
    std::fs::write(&user, &text).unwrap();

    // The proxy refuses to start, and the server never runs.
    let log = d.join("server.log");
    let mut p = guarded(&snap, &digest, &floor, &user, &log);
    let status = p.wait();
    assert_eq!(status.code(), Some(1));
    let err = p.stderr();
    assert!(
        err.contains(&format!(
            "{}:{line}:1: capabilities.sampling cannot be loosened: true is looser than the floor's false, which the managed policy floor sets at {}:3",
            user.display(),
            floor.display()
        )),
        "{err}"
    );
    assert!(!log.exists(), "the server was never started");

    // `policy check` refuses it the same way.
    let out = Command::new(mcpguard())
        .args(["policy", "check"])
        .arg(&user)
        .env("MCPGUARD_SYSTEM_POLICY", &floor)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("capabilities.sampling cannot be loosened")
    );

    // Without the floor the same user policy is accepted: the floor is what refuses it.
    let out = Command::new(mcpguard())
        .args(["policy", "check"])
        .arg(&user)
        .env("MCPGUARD_SYSTEM_POLICY", "")
        .env_remove("MCPGUARD_SYSTEM_POLICY")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("sampling = true"));
}

#[test]
fn a_user_policy_over_a_floor_can_still_refuse_more() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (snap, digest) = reviewed_snapshot(d, &[]);
    let floor = d.join("floor.toml");
    std::fs::write(&floor, FLOOR).unwrap();
    let user = d.join("user.toml");
    let text = reads_policy_with("[review]\nrefused_tools = [\"echo\"]\n");
    let line = text
        .lines()
        .position(|l| l.starts_with("refused_tools"))
        .unwrap()
        + 1;
    std::fs::write(&user, &text).unwrap();

    let out = Command::new(mcpguard())
        .args(["policy", "check"])
        .arg(&user)
        .env("MCPGUARD_SYSTEM_POLICY", &floor)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let effective = String::from_utf8_lossy(&out.stdout);
    let (f, u) = (floor.display(), user.display());
    let compact: String = effective.split_whitespace().collect();
    assert!(
        compact.contains("refused_tools=[\"add\",\"echo\",]"),
        "{effective}"
    );
    assert!(
        effective.contains(&format!("# Managed floor: {f}")),
        "{effective}"
    );
    assert!(
        effective.contains(&format!("#   capabilities.sampling = {f}:3\n")),
        "{effective}"
    );
    assert!(
        effective.contains(&format!("#   review.refused_tools = {f}:6 + {u}:{line}\n")),
        "{effective}"
    );
    assert!(
        effective.contains(&format!("#   writes.tools.echo.side_effect = {u}:")),
        "{effective}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("ok over the managed floor {f}"))
    );

    let log = d.join("server.log");
    let mut p = guarded(&snap, &digest, &floor, &user, &log);
    p.initialize();
    let list = p.request(1, "tools/list", json!({}));
    let names = tool_names(&list);
    assert!(
        !names.contains(&"echo") && !names.contains(&"add"),
        "{names:?}"
    );
    assert!(names.contains(&"slow"), "{names:?}");
    for (id, tool, args) in [
        (2, "echo", json!({"text": "x"})),
        (3, "add", json!({"a": 1, "b": 2})),
    ] {
        let r = p.request(id, "tools/call", json!({"name": tool, "arguments": args}));
        assert_eq!(r["error"]["code"], -32602, "{tool}: {r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("the local policy refuses it"),
            "{r}"
        );
    }
    // Sampling stays blocked by the floor: the host never sees the server's request.
    p.send_json(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "ask_sampling", "arguments": {}}}));
    let (r, seen) = p.recv_response(&json!(4));
    assert!(
        seen.iter().all(|m| m
            .get("method")
            .is_none_or(|m| m != "sampling/createMessage")),
        "the host saw {seen:?}"
    );
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("-32601"),
        "{r}"
    );
    p.close_stdin();
    p.wait();
    assert_eq!(calls_received(&log), vec!["ask_sampling"]);
}

#[test]
fn a_named_floor_that_cannot_be_read_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-floor.toml");
    let out = Command::new(mcpguard())
        .args(["policy", "check"])
        .env("MCPGUARD_SYSTEM_POLICY", &missing)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{} (the managed policy floor): cannot read the policy",
            missing.display()
        )),
        "{err}"
    );
    let bad = dir.path().join("floor.toml");
    std::fs::write(&bad, "[capabilities]\nsampling = \"no\"\n").unwrap();
    let out = Command::new(mcpguard())
        .args(["policy", "check"])
        .env("MCPGUARD_SYSTEM_POLICY", &bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:2:", bad.display())), "{err}");
}

#[test]
fn command_line_flags_cannot_loosen_the_floor_either() {
    let dir = tempfile::tempdir().unwrap();
    let floor = dir.path().join("floor.toml");
    let log = dir.path().join("managed.jsonl");
    std::fs::write(
        &floor,
        format!("[audit]\npath = {:?}\n", log.display().to_string()),
    )
    .unwrap();
    let started = dir.path().join("started");
    let out = Command::new(mcpguard())
        .arg("--audit-log")
        .arg(dir.path().join("mine.jsonl"))
        .args(["--allow-unpinned", "--", "/bin/sh", "-c"])
        .arg(format!("touch {}", started.display()))
        .env("MCPGUARD_SYSTEM_POLICY", &floor)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "--audit-log cannot loosen audit.path, which the managed policy floor sets at {}:2",
            floor.display()
        )),
        "{err}"
    );
    assert!(!started.exists() && !log.exists(), "nothing ran");
}

#[test]
fn grants_beyond_the_floors_lists_are_refused_for_capture_too() {
    let dir = tempfile::tempdir().unwrap();
    let floor = dir.path().join("floor.toml");
    std::fs::write(&floor, "[sandbox]\nread_write = []\n").unwrap();
    let out = Command::new(mcpguard())
        .args(["capture", "--server", "fixture", "--out"])
        .arg(dir.path().join("s.json"))
        .arg("--sandbox-write")
        .arg(dir.path())
        .arg("--")
        .arg(crate::support::fixture())
        .env("MCPGUARD_SYSTEM_POLICY", &floor)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "--sandbox-write cannot loosen sandbox.read_write, which the managed policy floor sets at {}:2",
            floor.display()
        )),
        "{err}"
    );
    assert!(!dir.path().join("s.json").exists());
}

/// The attack: a host configuration's `env` sets `MCPGUARD_SYSTEM_POLICY` to a looser file
/// while the administrator's floor exists at /etc/mcpguard/policy.toml. The variable must not
/// replace it. The managed floor is put in place inside a private mount namespace (a copy of
/// /etc bound over /etc), so no other test or process on the machine sees it; the tests run as
/// root, here and in CI.
#[test]
fn the_variable_cannot_replace_an_existing_managed_floor() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let looser = d.join("looser.toml");
    std::fs::write(&looser, "# nothing refused\n").unwrap();
    let etc = d.join("etc");
    let script = format!(
        r#"set -e
cp -a /etc/. {etc}/
mkdir -p {etc}/mcpguard
printf '[review]\nrefused_tools = ["echo"]\n' > {etc}/mcpguard/policy.toml
mount --bind {etc} /etc
exec "$@""#,
        etc = etc.display()
    );
    std::fs::create_dir(&etc).unwrap();
    let run = |args: &[&str]| {
        Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
                "sh",
            ])
            .arg(mcpguard())
            .args(args)
            .env("MCPGUARD_SYSTEM_POLICY", &looser)
            .output()
            .unwrap()
    };
    // The proxy refuses to start (fail closed), naming the variable and the floor.
    let out = run(&["--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "refused MCPGUARD_SYSTEM_POLICY={}",
            looser.display()
        )) && err.contains("/etc/mcpguard/policy.toml exists"),
        "{err}"
    );
    // `policy check` too; and with the variable naming the managed floor itself it is read.
    let out = run(&["policy", "check"]);
    assert_eq!(out.status.code(), Some(1));
    let out = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
            "sh",
        ])
        .arg(mcpguard())
        .args(["policy", "check"])
        .env("MCPGUARD_SYSTEM_POLICY", "/etc/mcpguard/policy.toml")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("\"echo\""),
        "the managed floor is in effect: {text}"
    );
}

/// The attack: a user policy names a destination (`sandbox.connect`) whose port the floor's
/// `sandbox.tcp_connect` leaves out, and runs the server through `sandbox-check`, which used to
/// skip the floor's connect check the proxy and capture made. The check now runs where the
/// policy is layered, so `sandbox-check` refuses before anything starts and the listener on that
/// port is never reached.
#[test]
fn a_user_destination_beyond_the_floors_ports_is_refused_by_sandbox_check() {
    crate::sandbox::require_landlock();
    let dir = tempfile::tempdir().unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let floor = dir.path().join("floor.toml");
    std::fs::write(&floor, "[sandbox]\ntcp_connect = [5432]\n").unwrap();
    let user = dir.path().join("user.toml");
    std::fs::write(
        &user,
        format!("[sandbox]\nconnect = [\"127.0.0.1:{port}\"]\n"),
    )
    .unwrap();
    let out = crate::support::run_bounded(
        Command::new(mcpguard())
            .args(["sandbox-check", "--policy"])
            .arg(&user)
            .args(["--", "/bin/bash", "-c"])
            .arg(format!("exec 3<>/dev/tcp/127.0.0.1/{port}"))
            .env("MCPGUARD_SYSTEM_POLICY", &floor),
    );
    let reached = listener.accept().is_ok();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!reached, "the server reached port {port}: {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("{}:2:", user.display()))
            && err.contains(&format!(
                "sandbox.connect 127.0.0.1:{port} cannot loosen sandbox.tcp_connect, which the managed policy floor sets at {}:2",
                floor.display()
            )),
        "{err}"
    );
}
