//! Audit records in the system log (issue 17): a real rsyslogd (Debian's rsyslog, installed by
//! `scripts/install-peers.sh` when missing) started by the test on a private socket receives
//! every record as RFC 5424 with the chain fields in its structured data, the same chain the file
//! sink writes; when the daemon goes away, the next call fails closed and never reaches the
//! server. The journal's native protocol is checked field by field on a private datagram socket
//! the test reads, and end to end with a real systemd-journald the test starts in a mount
//! namespace of its own (where systemd is installed), read back with journalctl.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::gate::{calls_received, guarded_with, reviewed_snapshot};
use crate::support::reads_policy_with;

/// A private rsyslogd: its own configuration, socket, work directory and output file.
struct Rsyslog {
    child: Child,
    socket: PathBuf,
    out: PathBuf,
}

impl Rsyslog {
    fn start(dir: &Path) -> Rsyslog {
        let daemon = ["/usr/sbin/rsyslogd", "/sbin/rsyslogd"]
            .into_iter()
            .find(|p| Path::new(p).exists())
            .expect("rsyslogd is not installed: run scripts/install-peers.sh (it installs Debian's rsyslog)");
        let socket = dir.join("log.sock");
        let out = dir.join("received.log");
        let work = dir.join("work");
        std::fs::create_dir_all(&work).unwrap();
        let conf = dir.join("rsyslog.conf");
        // The regular parser chain (not imuxsock's special one) parses the RFC 5424 header.
        std::fs::write(
            &conf,
            format!(
                r#"global(workDirectory="{work}")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket="{socket}" UseSpecialParser="off" ParseHostname="on" RateLimit.Interval="0")
template(name="received" type="string" string="%syslogfacility-text%.%syslogseverity-text% %app-name% %msgid% %structured-data% %msg%\n")
*.* action(type="omfile" file="{out}" template="received")
"#,
                work = work.display(),
                socket = socket.display(),
                out = out.display()
            ),
        )
        .unwrap();
        let child = Command::new(daemon)
            .args(["-n", "-f"])
            .arg(&conf)
            .arg("-i")
            .arg(dir.join("rsyslogd.pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start rsyslogd");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            assert!(
                Instant::now() < deadline,
                "rsyslogd did not create {}",
                socket.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Rsyslog { child, socket, out }
    }

    /// Waits until `n` lines have arrived, and returns them.
    fn lines(&self, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let text = std::fs::read_to_string(&self.out).unwrap_or_default();
            let lines: Vec<String> = text.lines().map(str::to_string).collect();
            if lines.len() >= n {
                return lines;
            }
            assert!(
                Instant::now() < deadline,
                "rsyslogd received only {lines:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn stop(&mut self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn rsyslog_receives_every_chained_record_and_a_dead_daemon_fails_calls_closed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut daemon = Rsyslog::start(d);
    let (snap, digest) = reviewed_snapshot(d, &[]);
    let policy = d.join("policy.toml");
    std::fs::write(
        &policy,
        reads_policy_with(&format!(
            "[audit]\nsink = [\"file\", \"syslog\"]\nsyslog_socket = {:?}\n[limits]\ncall_timeout = \"2s\"\n",
            daemon.socket.display().to_string()
        )),
    )
    .unwrap();
    let file = d.join("audit.jsonl");
    let log = d.join("server.log");
    let mut p = guarded_with(
        &snap,
        &digest,
        &[
            "--policy".into(),
            policy.display().to_string(),
            "--audit-log".into(),
            file.display().to_string(),
        ],
        &["--log".into(), log.display().to_string()],
    );
    p.initialize();
    let r = p.request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "secret-value"}}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["text"], "secret-value",
        "{r}"
    );

    // Everything in the file so far also reached rsyslogd, with the same chain.
    let in_file = records(&file);
    let allowed = in_file
        .iter()
        .position(|r| r["event"] == "call_allowed")
        .expect("call_allowed in the file");
    let got = daemon.lines(allowed + 1);
    for (line, record) in got.iter().zip(&in_file) {
        let event = record["event"].as_str().unwrap();
        assert!(line.starts_with("authpriv."), "{line}");
        assert!(
            line.contains(&format!(
                " mcpguard {event} [mcpguard@32473 event=\"{event}\""
            )),
            "{line}"
        );
        assert!(
            line.contains(&format!("hash=\"{}\"", record["hash"].as_str().unwrap())),
            "{line}"
        );
        assert!(
            line.contains(&format!("prev=\"{}\"", record["prev"].as_str().unwrap())),
            "{line}"
        );
        let json_start = line.find("{\"").unwrap();
        let received: Value = serde_json::from_str(&line[json_start..]).unwrap();
        assert_eq!(&received, record, "the daemon got the file's record");
    }
    let call = &got[allowed];
    assert!(
        call.contains("tool=\"echo\"") && call.contains("outcome=\"forwarded\""),
        "{call}"
    );
    assert!(
        !got.iter().any(|l| l.contains("secret-value")),
        "no argument value in the system log"
    );

    // The daemon goes away: the next decision cannot be recorded, so it does not take effect.
    daemon.stop();
    let r = p.request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "second"}}),
    );
    assert_eq!(r["error"]["code"], -31008, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("could not write the audit record"),
        "{r}"
    );
    // The gate still counts the withheld call as in flight; when its timeout fires, the host,
    // which already has its one answer, gets no second response for the same id.
    let second = p.recv_timeout(Duration::from_secs(4));
    assert!(
        second.is_none(),
        "a second response: {:?}",
        second.map(|b| String::from_utf8_lossy(&b).into_owned())
    );
    let err = p.wait_stderr("withheld");
    assert!(
        err.contains("writing the audit record to the audit log"),
        "{err}"
    );
    assert!(
        err.matches("whose audit record could not be written")
            .count()
            >= 2,
        "the timeout's own answer was withheld too: {err}"
    );
    assert!(err.contains("the syslog sink ("), "{err}");
    p.close_stdin();
    p.wait();
    assert_eq!(
        calls_received(&log),
        vec!["echo"],
        "the second call never reached the server"
    );
    let out = Command::new(crate::support::mcpguard())
        .args(["audit", "verify"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_sink_that_refuses_the_first_record_never_starts_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (snap, digest) = reviewed_snapshot(d, &[]);
    let policy = d.join("policy.toml");
    let missing = d.join("no-daemon.sock");
    std::fs::write(
        &policy,
        reads_policy_with(&format!(
            "[audit]\nsink = [\"syslog\"]\nsyslog_socket = {:?}\n",
            missing.display().to_string()
        )),
    )
    .unwrap();
    let log = d.join("server.log");
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".into(), policy.display().to_string()],
        &["--log".into(), log.display().to_string()],
    );
    assert_eq!(p.wait().code(), Some(1));
    let err = p.stderr();
    assert!(
        err.contains(&format!("the syslog sink ({})", missing.display())),
        "{err}"
    );
    assert!(
        err.contains("audit.syslog_socket"),
        "the key that changes it is named: {err}"
    );
    assert!(err.contains("refusing to start the server"), "{err}");
    assert!(!log.exists(), "the server never started");
}

/// Splits one journal native-protocol datagram into its fields.
fn journal_fields(mut d: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    while !d.is_empty() {
        let nl = d
            .iter()
            .position(|&b| b == b'\n')
            .expect("a field ends with a newline");
        let head = &d[..nl];
        if let Some(eq) = head.iter().position(|&b| b == b'=') {
            out.push((
                String::from_utf8_lossy(&head[..eq]).into(),
                String::from_utf8_lossy(&head[eq + 1..]).into(),
            ));
            d = &d[nl + 1..];
        } else {
            let len = u64::from_le_bytes(d[nl + 1..nl + 9].try_into().unwrap()) as usize;
            let value = &d[nl + 9..nl + 9 + len];
            assert_eq!(d[nl + 9 + len], b'\n');
            out.push((
                String::from_utf8_lossy(head).into(),
                String::from_utf8_lossy(value).into(),
            ));
            d = &d[nl + 10 + len..];
        }
    }
    out
}

#[test]
fn the_journal_sink_sends_structured_fields_over_the_native_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let socket = d.join("journal.sock");
    let journal = UnixDatagram::bind(&socket).unwrap();
    journal
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (snap, digest) = reviewed_snapshot(d, &[]);
    let policy = d.join("policy.toml");
    std::fs::write(
        &policy,
        reads_policy_with(&format!(
            "[audit]\nsink = [\"journal\"]\njournal_socket = {:?}\n",
            socket.display().to_string()
        )),
    )
    .unwrap();
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".into(), policy.display().to_string()],
        &[],
    );
    p.initialize();
    let r = p.request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": 42}}),
    );
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"], "invalid_arguments",
        "{r}"
    );
    let r = p.request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "x"}}),
    );
    assert_eq!(r["result"]["structuredContent"]["text"], "x", "{r}");
    let mut seen: Vec<Vec<(String, String)>> = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    while !seen.iter().any(|f| {
        f.iter()
            .any(|(k, v)| k == "MCPGUARD_EVENT" && v == "call_allowed")
    }) {
        let n = journal.recv(&mut buf).expect("a record within 20 s");
        seen.push(journal_fields(&buf[..n]));
    }
    let get = |fields: &[(String, String)], key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    // Without a file sink the chain lives in memory, from the genesis: every record links.
    let mut prev = "0".repeat(64);
    for f in &seen {
        assert_eq!(get(f, "SYSLOG_IDENTIFIER").as_deref(), Some("mcpguard"));
        assert_eq!(get(f, "MCPGUARD_PREV"), Some(prev.clone()), "{f:?}");
        let record: Value = serde_json::from_str(&get(f, "MCPGUARD_RECORD").unwrap()).unwrap();
        assert_eq!(record["hash"].as_str(), get(f, "MCPGUARD_HASH").as_deref());
        prev = get(f, "MCPGUARD_HASH").unwrap();
    }
    let refused = seen
        .iter()
        .find(|f| get(f, "MCPGUARD_CODE").as_deref() == Some("invalid_arguments"))
        .expect("the refusal is recorded");
    assert_eq!(
        get(refused, "MCPGUARD_TOOL").as_deref(),
        Some("echo"),
        "{refused:?}"
    );
    assert_eq!(
        get(refused, "PRIORITY").as_deref(),
        Some("4"),
        "{refused:?}"
    );
    let allowed = seen.last().unwrap();
    assert_eq!(get(allowed, "MCPGUARD_TOOL").as_deref(), Some("echo"));
    assert_eq!(get(allowed, "PRIORITY").as_deref(), Some("6"));
    assert!(get(allowed, "MESSAGE")
        .unwrap()
        .starts_with("mcpguard call_allowed tool=echo outcome=forwarded"));
    assert!(get(allowed, "MCPGUARD_ARGS_SHA256").is_some());
    p.close_stdin();
    p.wait();
}

/// A private systemd-journald: started in a mount namespace of its own whose `/run` is a folder
/// of the test (so its socket and its volatile journal files are reachable from outside) and
/// whose `/var/log/journal` is a tmpfs (so nothing of the machine's journal is touched).
struct Journald {
    child: Child,
    socket: PathBuf,
    files: PathBuf,
}

impl Journald {
    fn start(dir: &Path) -> Option<Journald> {
        let daemon = [
            "/lib/systemd/systemd-journald",
            "/usr/lib/systemd/systemd-journald",
        ]
        .into_iter()
        .find(|p| Path::new(p).exists())?;
        let run = dir.join("run");
        std::fs::create_dir_all(run.join("systemd/journal")).unwrap();
        std::fs::create_dir_all(run.join("log/journal")).unwrap();
        let script = format!(
            "mount --bind {run} /run && {{ [ ! -d /var/log/journal ] || mount -t tmpfs tmpfs /var/log/journal; }} && exec {daemon}",
            run = run.display()
        );
        let child = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("unshare");
        let socket = run.join("systemd/journal/socket");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !socket.exists() {
            assert!(
                Instant::now() < deadline,
                "systemd-journald did not create {} (the test needs root for its mount namespace)",
                socket.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Journald {
            child,
            socket,
            files: run.join("log/journal"),
        })
    }

    /// The records journalctl reads back from the private journal.
    fn entries(&self, want: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let out = Command::new("journalctl")
                .arg("-D")
                .arg(&self.files)
                .args(["-o", "json", "--no-pager", "SYSLOG_IDENTIFIER=mcpguard"])
                .output()
                .expect("journalctl");
            let entries: Vec<Value> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect();
            if entries.len() >= want {
                return entries;
            }
            assert!(Instant::now() < deadline, "journald has only {entries:?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Journald {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_real_journald_stores_the_structured_fields() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let Some(journal) = Journald::start(d) else {
        eprintln!("systemd-journald is not installed here: the journal sink is checked by the_journal_sink_sends_structured_fields_over_the_native_protocol only");
        return;
    };
    let (snap, digest) = reviewed_snapshot(d, &[]);
    let policy = d.join("policy.toml");
    std::fs::write(
        &policy,
        reads_policy_with(&format!(
            "[audit]\nsink = [\"journal\"]\njournal_socket = {:?}\n",
            journal.socket.display().to_string()
        )),
    )
    .unwrap();
    let mut p = guarded_with(
        &snap,
        &digest,
        &["--policy".into(), policy.display().to_string()],
        &[],
    );
    p.initialize();
    let r = p.request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "to the journal"}}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["text"], "to the journal",
        "{r}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let entries = loop {
        let e = journal.entries(1);
        if e.iter().any(|e| e["MCPGUARD_EVENT"] == "call_allowed") {
            break e;
        }
        assert!(Instant::now() < deadline, "no call_allowed entry: {e:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let call = entries
        .iter()
        .find(|e| e["MCPGUARD_EVENT"] == "call_allowed")
        .unwrap();
    assert_eq!(call["MCPGUARD_TOOL"], "echo", "{call}");
    assert_eq!(call["MCPGUARD_OUTCOME"], "forwarded");
    assert_eq!(call["PRIORITY"], "6");
    assert_eq!(
        call["_TRANSPORT"], "journal",
        "sent over the native protocol"
    );
    let record: Value = serde_json::from_str(call["MCPGUARD_RECORD"].as_str().unwrap()).unwrap();
    assert_eq!(record["hash"], call["MCPGUARD_HASH"]);
    assert!(
        !call.to_string().contains("to the journal"),
        "no argument value in the journal"
    );
    // The chain links from the first entry on.
    let mut prev = "0".repeat(64);
    for e in &entries {
        assert_eq!(e["MCPGUARD_PREV"].as_str(), Some(prev.as_str()), "{e}");
        prev = e["MCPGUARD_HASH"].as_str().unwrap().to_string();
    }
    p.close_stdin();
    p.wait();
}
