//! The team lock file (issue 17): `mcpguard lock check` runs each locked server live under the
//! sandbox, against the fixture server: current, then drifted after a rug pull, then failed when
//! the server cannot start, with exit codes for CI; the JUnit report is read by a real XML parser
//! (Python's xml.etree) and the JSON one by serde; `wrap --from-lock` writes a host configuration
//! whose entry, run as the host would run it, serves the reviewed tools.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::gate::{reviewed_snapshot, tool_names};
use crate::support::{fixture, mcpguard, reads_policy, reads_policy_with, Peer};

fn lock_check(lock: &Path, format: &str) -> Output {
    Command::new(mcpguard())
        .args(["lock", "check"])
        .arg(lock)
        .args(["--format", format, "--timeout", "20s"])
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// One `[servers.KEY]` table.
fn server(key: &str, command: &[String], snapshot: &str, sha256: &str) -> String {
    format!(
        "[servers.{key}]\ncommand = {command:?}\nsnapshot = {snapshot:?}\nsha256 = {sha256:?}\npackage = \"cargo:mcpguard-fixture@1.0.0\"\npolicy = {:?}\n\n",
        reads_policy().display().to_string()
    )
}

/// A copy of the reviewed snapshot under another server key; returns its file name and digest.
fn copy_as(dir: &Path, snap: &Path, key: &str) -> (String, String) {
    let mut doc: Value = serde_json::from_slice(&std::fs::read(snap).unwrap()).unwrap();
    let entry = doc["servers"]["fixture"].clone();
    doc["servers"] = json!({ key: entry });
    let name = format!("{key}.snapshot.json");
    let path = dir.join(&name);
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let digest = crate::support::hash(&path);
    (name, digest)
}

/// `mcpguard wrap --from-lock LOCK CONFIG`, with this build's mcpguard in the entries.
fn wrap_from_lock(lock: &Path, config: &Path) -> Output {
    Command::new(mcpguard())
        .args(["wrap", "--from-lock"])
        .arg(lock)
        .arg(config)
        .arg("--mcpguard")
        .arg(mcpguard())
        .output()
        .unwrap()
}

fn fixture_cmd(extra: &[&str]) -> Vec<String> {
    std::iter::once(fixture().display().to_string())
        .chain(extra.iter().map(|s| s.to_string()))
        .collect()
}

#[test]
fn lock_check_reports_current_then_drifted_then_failed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (snap, digest) = reviewed_snapshot(d, &[]);
    let lock = d.join("mcpguard.lock");
    let write = |command: Vec<String>| {
        std::fs::write(
            &lock,
            format!(
                "version = 1\n\n{}",
                server("fixture", &command, "fixture.snapshot.json", &digest)
            ),
        )
        .unwrap();
    };

    write(fixture_cmd(&[]));
    let o = lock_check(&lock, "text");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        stdout(&o).starts_with(&format!(
            "fixture: current (sha256 {digest}, cargo:mcpguard-fixture@1.0.0)\n"
        )),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).ends_with("1 servers: 1 current, 0 drifted, 0 failed\n"));

    // The same server, rug-pulled: echo's description changed since the review.
    write(fixture_cmd(&["--rug-pull-after", "0"]));
    let o = lock_check(&lock, "text");
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let text = stdout(&o);
    assert!(
        text.starts_with(&format!(
            "fixture: DRIFTED: the live server differs from {}",
            snap.display()
        )),
        "{text}"
    );
    assert!(
        text.contains("echo") && text.contains("Ignore previous instructions"),
        "the diff shows the change: {text}"
    );

    // A server that cannot start.
    write(vec!["/bin/false".into()]);
    let o = lock_check(&lock, "text");
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    assert!(
        stdout(&o).starts_with("fixture: FAILED: the server could not be checked live"),
        "{}",
        stdout(&o)
    );

    // A program that does not exist, and a snapshot changed after it was locked.
    write(vec!["/nonexistent/mcp-server".into()]);
    let o = lock_check(&lock, "text");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stdout(&o).contains("fixture: FAILED: the server cannot start:"),
        "{}",
        stdout(&o)
    );
    std::fs::write(
        &lock,
        format!(
            "version = 1\n\n{}",
            server(
                "fixture",
                &fixture_cmd(&[]),
                "fixture.snapshot.json",
                &"0".repeat(64)
            )
        ),
    )
    .unwrap();
    let o = lock_check(&lock, "text");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stdout(&o).contains(&format!(
            "hashes to {digest} but the lock pins {}",
            "0".repeat(64)
        )),
        "{}",
        stdout(&o)
    );

    // A package pin the command does not name: the launcher could run another version.
    let floating = server(
        "fixture",
        &fixture_cmd(&[]),
        "fixture.snapshot.json",
        &digest,
    )
    .replace("cargo:mcpguard-fixture@1.0.0", "npm:@example/fixture@1.0.0");
    std::fs::write(&lock, format!("version = 1\n\n{floating}")).unwrap();
    let o = lock_check(&lock, "text");
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("fixture: FAILED: the command does not name the pinned package \"@example/fixture@1.0.0\""), "{}", stdout(&o));

    // An unusable lock file names its line.
    std::fs::write(&lock, "version = 1\n[servers.x]\ncommand = [\"a\"]\nsnapshot = \"s\"\nsha256 = \"0\"\nmystery = 1\n").unwrap();
    let o = lock_check(&lock, "text");
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{}:6:", lock.display())) && err.contains("mystery"),
        "{err}"
    );
}

#[test]
fn junit_and_json_reports_are_read_by_real_parsers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_snap, digest) = reviewed_snapshot(d, &[]);
    let (drifty, drifty_sha) = copy_as(d, &d.join("fixture.snapshot.json"), "drifty");
    let (broken, broken_sha) = copy_as(d, &d.join("fixture.snapshot.json"), "broken");
    let lock = d.join("team.lock");
    std::fs::write(
        &lock,
        format!(
            "version = 1\n\n{}{}{}",
            server(
                "fixture",
                &fixture_cmd(&[]),
                "fixture.snapshot.json",
                &digest
            ),
            server(
                "drifty",
                &fixture_cmd(&["--schema-drift"]),
                &drifty,
                &drifty_sha
            ),
            server("broken", &["/bin/false".to_string()], &broken, &broken_sha),
        ),
    )
    .unwrap();

    let o = lock_check(&lock, "junit");
    assert_eq!(o.status.code(), Some(2), "a failed server dominates");
    let xml = d.join("report.xml");
    std::fs::write(&xml, &o.stdout).unwrap();
    let py = Command::new("python3")
        .arg("-c")
        .arg(
            r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root.find("testsuite")
print(root.tag, suite.get("tests"), suite.get("failures"), suite.get("errors"))
for case in suite.findall("testcase"):
    props = {p.get("name"): p.get("value") for p in case.find("properties")}
    kind = "failure" if case.find("failure") is not None else "error" if case.find("error") is not None else "ok"
    body = (case.find(kind).text or "") if kind != "ok" else ""
    print(case.get("name"), kind, props["package"], "maxLength" in body)
"#,
        )
        .arg(&xml)
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "python could not parse the JUnit report: {}\n{}",
        String::from_utf8_lossy(&py.stderr),
        stdout(&o)
    );
    assert_eq!(
        String::from_utf8_lossy(&py.stdout),
        "testsuites 3 1 1\nbroken error cargo:mcpguard-fixture@1.0.0 False\ndrifty failure cargo:mcpguard-fixture@1.0.0 True\nfixture ok cargo:mcpguard-fixture@1.0.0 False\n"
    );

    let o = lock_check(&lock, "json");
    assert_eq!(o.status.code(), Some(2));
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        report["summary"],
        json!({"current": 1, "drifted": 1, "failed": 1})
    );
    let by_key = |k: &str| {
        report["servers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["key"] == k)
            .unwrap()
            .clone()
    };
    assert_eq!(by_key("fixture")["status"], "current");
    assert!(by_key("drifty")["diff"]
        .as_str()
        .unwrap()
        .contains("maxLength"));
    assert!(by_key("broken")["error"]
        .as_str()
        .unwrap()
        .contains("could not be checked live"));
}

#[test]
fn wrap_from_lock_writes_a_pinned_host_entry_that_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (_snap, digest) = reviewed_snapshot(d, &[]);
    let lock = d.join("mcpguard.lock");
    std::fs::write(
        &lock,
        format!(
            "version = 1\n\n{}",
            server(
                "fixture",
                &fixture_cmd(&[]),
                "fixture.snapshot.json",
                &digest
            )
        ),
    )
    .unwrap();
    let config = d.join("claude_desktop_config.json");
    std::fs::write(
        &config,
        "{\n  \"mcpServers\": {\n    \"remote\": {\"url\": \"https://example.test/mcp\"}\n  }\n}\n",
    )
    .unwrap();
    let o = wrap_from_lock(&lock, &config);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("added: \"fixture\" from"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    assert_eq!(
        doc["mcpServers"]["remote"]["url"], "https://example.test/mcp",
        "other entries are kept"
    );
    let entry = &doc["mcpServers"]["fixture"];
    assert_eq!(entry["command"], mcpguard().display().to_string());
    let args: Vec<String> = entry["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    let snap_abs: PathBuf = d.join("fixture.snapshot.json");
    assert_eq!(
        &args[..6],
        [
            "--manifest",
            &snap_abs.display().to_string(),
            "--sha256",
            &digest,
            "--server",
            "fixture"
        ]
    );

    // Run the entry the way the host would.
    let mut p = Peer::start(entry["command"].as_str().unwrap(), &args);
    p.initialize();
    let list = p.request(1, "tools/list", json!({}));
    assert!(tool_names(&list).contains(&"echo"), "{list}");
    let r = p.request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "locked"}}),
    );
    assert_eq!(r["result"]["structuredContent"]["text"], "locked", "{r}");
    p.close_stdin();
    p.wait();
}

#[test]
fn lock_add_writes_an_entry_that_lock_check_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (snap, digest) = reviewed_snapshot(d, &[]);
    let lock = d.join("mcpguard.lock");
    let add = |key: &str, extra: &[&str]| {
        Command::new(mcpguard())
            .args(["lock", "add", key, "--snapshot"])
            .arg(&snap)
            .arg("--lock")
            .arg(&lock)
            .arg("--policy")
            .arg(reads_policy())
            .args(extra)
            .arg("--")
            .arg(fixture())
            .output()
            .unwrap()
    };
    let o = add("fixture", &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).starts_with(&format!(
        "added server \"fixture\" in {} (sha256 {digest})",
        lock.display()
    )));
    let written: toml::Table = std::fs::read_to_string(&lock).unwrap().parse().unwrap();
    assert_eq!(written["version"].as_integer(), Some(1));
    let entry = &written["servers"]["fixture"];
    assert_eq!(
        entry["snapshot"].as_str(),
        Some("fixture.snapshot.json"),
        "relative to the lock's folder"
    );
    assert_eq!(entry["sha256"].as_str(), Some(digest.as_str()));
    assert_eq!(
        entry["command"].as_array().unwrap()[0].as_str(),
        Some(fixture().display().to_string().as_str())
    );
    let o = lock_check(&lock, "text");
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));

    // Adding again replaces the entry; a key the snapshot lacks, or a pin the command does not
    // name, is refused and leaves the file as it was.
    let o = add("fixture", &[]);
    assert!(String::from_utf8_lossy(&o.stderr).starts_with("updated server \"fixture\""));
    let before = std::fs::read(&lock).unwrap();
    let o = add("other", &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("the lock's key must be the snapshot's server key"));
    let o = add("fixture", &["--package", "npm:@example/fixture@2.0.0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not name the pinned package"));
    assert_eq!(std::fs::read(&lock).unwrap(), before);
}

/// `lock add --sandbox-env NAME` records the name as `sandbox_env`; `lock check`
/// passes that variable to the server, and `wrap --from-lock` writes it as `--sandbox-env`. The
/// server here is a shell that starts the fixture only when the variable has reached it, so
/// without the name the check fails, which shows that the check can fail. A name the flag would
/// refuse (TMPDIR) is refused in a hand-written lock too, at its line.
#[test]
fn a_variable_named_in_the_lock_reaches_the_server_in_check_and_in_wrapped_entries() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (snap, _digest) = reviewed_snapshot(d, &[]);
    let lock = d.join("mcpguard.lock");
    let script = format!(
        "test \"$LOCK_TEST_VAR\" = from-the-environment && exec {}",
        fixture().display()
    );
    // The shell runs the fixture, whose folder the sandbox must then let it execute.
    let policy = d.join("policy.toml");
    std::fs::write(
        &policy,
        reads_policy_with(&format!(
            "[sandbox]\nexecute = [\"/usr\", \"/bin\", \"/lib\", \"/lib64\", {:?}]\n",
            fixture().parent().unwrap().display().to_string()
        )),
    )
    .unwrap();
    let add = |extra: &[&str]| {
        let o = Command::new(mcpguard())
            .args(["lock", "add", "fixture", "--snapshot"])
            .arg(&snap)
            .arg("--lock")
            .arg(&lock)
            .arg("--policy")
            .arg(&policy)
            .args(extra)
            .args(["--", "/bin/sh", "-c", &script])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let check = || {
        Command::new(mcpguard())
            .args(["lock", "check"])
            .arg(&lock)
            .args(["--timeout", "20s"])
            .env("LOCK_TEST_VAR", "from-the-environment")
            .output()
            .unwrap()
    };

    add(&[]);
    let o = check();
    assert_eq!(
        o.status.code(),
        Some(2),
        "without the name the server cannot start: {}",
        stdout(&o)
    );

    add(&["--sandbox-env", "LOCK_TEST_VAR"]);
    let text = std::fs::read_to_string(&lock).unwrap();
    let written: toml::Table = text.parse().unwrap();
    assert_eq!(
        written["servers"]["fixture"]["sandbox_env"],
        toml::Value::Array(vec!["LOCK_TEST_VAR".into()])
    );
    let o = check();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}{}",
        stdout(&o),
        String::from_utf8_lossy(&o.stderr)
    );

    let config = d.join("claude_desktop_config.json");
    std::fs::write(&config, "{\"mcpServers\": {}}\n").unwrap();
    let o = wrap_from_lock(&lock, &config);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    let args: Vec<&str> = doc["mcpServers"]["fixture"]["args"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        args.windows(2)
            .any(|w| w == ["--sandbox-env", "LOCK_TEST_VAR"]),
        "{args:?}"
    );

    std::fs::write(&lock, text.replace("\"LOCK_TEST_VAR\"", "\"TMPDIR\"")).unwrap();
    let o = check();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("servers.fixture.sandbox_env: TMPDIR"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
