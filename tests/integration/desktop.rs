//! The desktop confirmation channel through the real binary: a real `dbus-daemon --session` on a
//! private address, the test notification service (`examples/notification_service.rs`) on it,
//! and a host without elicitation. The service is shown the question's three lines with Approve
//! and Deny actions and presses one. Deny refuses the write; Approve only starts the trusted
//! path (polkit, `approvals::polkit`), so a press, which any program of the user can make on the
//! session bus, approves nothing by itself: here no system bus answers, and the write stays
//! held. Without a notification service on the bus the channel is off and the terminal still
//! works.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::gate::{calls_received, guarded_argv, reviewed_snapshot};
use crate::support::{mcpguard, reads_policy_with, Peer};

/// A process ended when the test ends, whatever happens.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts a session bus listening on a socket in `dir`; returns it and its address.
fn session_bus(dir: &Path) -> (Running, String) {
    let mut child = Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--print-address"])
        .arg(format!("--address=unix:path={}", dir.join("bus").display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("dbus-daemon (Debian's dbus package, installed by scripts/install-peers.sh)");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("unix:"), "dbus-daemon printed {line:?}");
    (Running(child), line.trim().to_string())
}

fn service_binary() -> PathBuf {
    crate::support::fixture().with_file_name("notification_service")
}

/// Starts the test notification service, pressing `press`, once it owns its name.
fn notification_service(address: &str, press: &str, log: &Path) -> Running {
    let mut child = Command::new(service_binary())
        .args(["--press", press, "--log"])
        .arg(log)
        .env("DBUS_SESSION_BUS_ADDRESS", address)
        .stdout(Stdio::piped())
        .spawn()
        .expect("notification_service (cargo build --examples)");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    Running(child)
}

/// mcpguard over the logged fixture for a host without elicitation, on the bus at `address`
/// (`None`: the variable is not passed, as many hosts do; the bus is then found in the runtime
/// directory).
fn guarded(dir: &Path, runtime: &Path, address: Option<&str>, log: &Path, audit: &Path) -> Peer {
    let (snap, digest) = reviewed_snapshot(dir, &[]);
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, reads_policy_with("")).unwrap();
    let argv = guarded_argv(
        &snap,
        &digest,
        &[
            "--policy".into(),
            policy.display().to_string(),
            "--audit-log".into(),
            audit.display().to_string(),
        ],
        &["--log".into(), log.display().to_string()],
    );
    let mut cmd = Command::new(mcpguard());
    cmd.args(&argv)
        .env("XDG_RUNTIME_DIR", runtime)
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        // No system bus, so no polkit: whatever a developer's machine runs, a press of Approve
        // here is a press, not an authentication.
        .env(
            "DBUS_SYSTEM_BUS_ADDRESS",
            "unix:path=/nonexistent/mcpguard-test-system-bus",
        )
        .env("MCPGUARD_LOG", "info");
    if let Some(a) = address {
        cmd.env("DBUS_SESSION_BUS_ADDRESS", a);
    }
    let mut p = Peer::start_with(&mut cmd);
    p.initialize();
    p
}

fn records(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn a_desktop_notification_denies_a_write_and_its_approve_button_alone_approves_nothing() {
    for (press, pass_address) in [("approve", true), ("deny", true), ("approve", false)] {
        let dir = tempfile::tempdir().unwrap();
        let runtime = tempfile::tempdir().unwrap();
        // The bus listens at <runtime>/bus, where mcpguard looks when it is not told.
        let (_bus, address) = session_bus(runtime.path());
        let shown = dir.path().join("notifications.jsonl");
        let _service = notification_service(&address, press, &shown);
        let log = dir.path().join("server.log");
        let audit = dir.path().join("audit.jsonl");
        let mut p = guarded(
            dir.path(),
            runtime.path(),
            pass_address.then_some(address.as_str()),
            &log,
            &audit,
        );
        p.send_json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "write_note", "arguments": {"path": "/notes/a", "body": "<b>hi</b>"}}}));
        if press == "approve" {
            // The press started the trusted path, which cannot run here: nothing is approved,
            // the proxy says why, and the write waits until the terminal denies it.
            let until = Instant::now() + Duration::from_secs(20);
            while !p.stderr().contains("was not approved") {
                assert!(Instant::now() < until, "no verdict: {}", p.stderr());
                std::thread::sleep(Duration::from_millis(100));
            }
            let said = p.stderr();
            assert!(said.contains("the system bus cannot be reached"), "{said}");
            assert!(said.contains("install polkitd"), "{said}");
            assert!(calls_received(&log).is_empty(), "{said}");
            let listed = Command::new(mcpguard())
                .args(["approvals", "list", "--json"])
                .env("XDG_RUNTIME_DIR", runtime.path())
                .output()
                .unwrap();
            let doc: Value = serde_json::from_slice(&listed.stdout).unwrap();
            let id = doc["pending"][0]["id"].as_str().unwrap().to_string();
            let out = Command::new(mcpguard())
                .args(["approvals", "deny", &id])
                .env("XDG_RUNTIME_DIR", runtime.path())
                .output()
                .unwrap();
            assert!(out.status.success());
        }
        let (r, _) = p.recv_response(&json!(1));
        let what = format!(
            "{press} (address passed: {pass_address}): {r}\n{}",
            p.stderr()
        );
        let notified = records(&shown);
        let n = notified
            .iter()
            .find(|n| n.get("notify").is_some())
            .unwrap_or_else(|| panic!("no notification: {notified:?}\n{what}"));
        assert_eq!(n["app"], "mcpguard");
        assert!(
            n["summary"].as_str().unwrap().contains("\"write_note\""),
            "{n}"
        );
        assert!(
            n["body"].as_str().unwrap().starts_with("Arguments: "),
            "{n}"
        );
        assert_eq!(
            n["actions"],
            json!(["approve", "Approve", "deny", "Deny"]),
            "{n}"
        );
        let audit_text = std::fs::read_to_string(&audit).unwrap();
        if press == "approve" {
            assert!(
                r.to_string().contains("denied it in the terminal channel"),
                "{what}"
            );
            assert!(calls_received(&log).is_empty(), "{what}");
            assert!(!audit_text.contains("\"confirmed\""), "{audit_text}");
        } else {
            assert_eq!(
                r["result"]["_meta"]["dev.mcpguard/refusal"]["code"], "consent_required",
                "{what}"
            );
            assert!(
                r.to_string().contains("denied it in the desktop channel"),
                "{what}"
            );
            assert!(calls_received(&log).is_empty(), "{what}");
        }
    }
}

/// A question answered in the terminal is withdrawn from the desktop.
#[test]
fn an_answer_elsewhere_withdraws_the_notification() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let (_bus, address) = session_bus(dir.path());
    let shown = dir.path().join("notifications.jsonl");
    let _service = notification_service(&address, "none", &shown);
    let log = dir.path().join("server.log");
    let mut p = guarded(
        dir.path(),
        runtime.path(),
        Some(&address),
        &log,
        &dir.path().join("audit.jsonl"),
    );
    p.send_json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "write_note", "arguments": {"path": "/notes/a", "body": "x"}}}));
    let until = Instant::now() + Duration::from_secs(20);
    while !records(&shown).iter().any(|n| n.get("notify").is_some()) {
        assert!(Instant::now() < until, "no notification: {}", p.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = Command::new(mcpguard())
        .args(["approvals", "list", "--json"])
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = doc["pending"][0]["id"].as_str().unwrap().to_string();
    let out = Command::new(mcpguard())
        .args(["approvals", "deny", &id])
        .env("XDG_RUNTIME_DIR", runtime.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    let (r, _) = p.recv_response(&json!(1));
    assert!(r.to_string().contains("terminal channel"), "{r}");
    let until = Instant::now() + Duration::from_secs(10);
    while !records(&shown).iter().any(|n| n.get("closed").is_some()) {
        assert!(
            Instant::now() < until,
            "the notification was not withdrawn: {:?}",
            records(&shown)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(calls_received(&log).is_empty());
}
