//! Out-of-band approval through the real binary: a host that cannot ask (no elicitation), a
//! write held, `mcpguard approvals list --json` showing it, `deny ID` and the timeout refusing
//! it; another user (uid 65534, where the tests run as root) can neither list nor answer; two
//! mcpguard processes at once; the real Python SDK client with and without elicitation.
//!
//! The approval socket never approves: `approve ID` (or a raw JSON request) only starts the
//! trusted path, the person's authentication through polkit (`tests/integration/polkit.rs` runs
//! it with the real components). Here every proxy is pointed at a system bus that does not exist,
//! so each approval attempt must end unapproved, with the reason and the remedy, and the write
//! must stay held. Each test has a runtime directory of its own (`XDG_RUNTIME_DIR`), so tests
//! running at once never see each other's approvals.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::gate::{calls_received, guarded_argv, reviewed_snapshot};
use crate::support::{echo_as_write_policy_with, mcpguard, reads_policy_with, Peer};

/// `mcpguard approvals ARGS` with `runtime` as its `XDG_RUNTIME_DIR`.
fn approvals(runtime: &Path, args: &[&str]) -> Output {
    // An approval is a person's, typed at a terminal: `approve` refuses without one.
    if args.first() == Some(&"approve") {
        let mut all = vec!["approvals"];
        all.extend_from_slice(args);
        return crate::support::at_terminal(&all, &[("XDG_RUNTIME_DIR", runtime)]);
    }
    crate::support::run_bounded(
        Command::new(mcpguard())
            .arg("approvals")
            .args(args)
            .env("XDG_RUNTIME_DIR", runtime),
    )
}

/// The pending approvals `list --json` shows.
fn pending(runtime: &Path) -> Vec<Value> {
    let out = approvals(runtime, &["list", "--json"]);
    assert!(
        out.status.success(),
        "approvals list: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc["pending"].as_array().cloned().unwrap_or_default()
}

/// Waits until `count` approvals are pending (a write travels through the gate first).
fn wait_pending(runtime: &Path, count: usize) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let p = pending(runtime);
        if p.len() >= count || Instant::now() > until {
            return p;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// mcpguard over the logged fixture, under `policy`, for a host that does not advertise
/// elicitation, with its approval socket in `runtime`.
fn guarded(dir: &Path, runtime: &Path, policy_extra: &str, log: &Path, audit: &Path) -> Peer {
    let (snap, digest) = reviewed_snapshot(dir, &[]);
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, reads_policy_with(policy_extra)).unwrap();
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
    let mut p = Peer::start_with(no_polkit(
        Command::new(mcpguard())
            .args(&argv)
            .env("XDG_RUNTIME_DIR", runtime),
    ));
    p.initialize();
    p
}

/// A proxy whose system bus does not exist, so that polkit cannot be asked whatever the machine
/// runs: the trusted path must fail closed.
fn no_polkit(cmd: &mut Command) -> &mut Command {
    cmd.env(
        "DBUS_SYSTEM_BUS_ADDRESS",
        "unix:path=/nonexistent/mcpguard-test-system-bus",
    )
}

/// Checks that an `approvals approve` ended unapproved because polkit could not be asked.
fn assert_not_approved(out: &Output) {
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("not approved"), "{said}");
    assert!(
        said.contains("the system bus cannot be reached") && said.contains("install polkitd"),
        "the reason and the remedy: {said}"
    );
}

fn write_call(p: &mut Peer, id: i64, body: &str) {
    p.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "write_note", "arguments": {"path": "/notes/a", "body": body}}}));
}

fn text_of(r: &Value) -> String {
    r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_host_without_elicitation_gets_its_write_held_for_the_trusted_path_or_denied_in_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let audit = dir.path().join("audit.jsonl");
    let mut p = guarded(dir.path(), runtime.path(), "", &log, &audit);

    // Nothing pending yet; the write is held, not refused, and not sent.
    assert!(pending(runtime.path()).is_empty());
    write_call(&mut p, 1, "hello");
    let items = wait_pending(runtime.path(), 1);
    assert_eq!(items.len(), 1, "{items:?}\n{}", p.stderr());
    let item = &items[0];
    assert_eq!(item["tool"], "write_note");
    assert_eq!(item["server"], "fixture");
    assert_eq!(item["pid"], p.pid());
    assert!(
        item["lines"][1]
            .as_str()
            .unwrap()
            .contains("body=\"hello\""),
        "{item}"
    );
    assert!(item["expiresInMs"].as_u64().unwrap() > 30_000, "{item}");
    assert!(calls_received(&log).is_empty());
    let id = item["id"].as_str().unwrap().to_string();
    let listed = approvals(runtime.path(), &["list"]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        text.contains(&id) && text.contains("fixture / write_note"),
        "{text}"
    );

    // `approve` in the terminal starts the person's authentication, which cannot run here
    // (no system bus): nothing is approved, the proxy says why, and the write stays held.
    let out = approvals(runtime.path(), &["approve", &id]);
    assert_not_approved(&out);
    assert!(
        p.stderr()
            .contains(&format!("approval {id} was not approved")),
        "{}",
        p.stderr()
    );
    assert!(calls_received(&log).is_empty());
    assert_eq!(pending(runtime.path()).len(), 1, "still pending");
    let out = approvals(runtime.path(), &["deny", &id]);
    assert!(out.status.success());
    let (r, _) = p.recv_response(&json!(1));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"],
        "consent_required"
    );
    let again = approvals(runtime.path(), &["approve", &id]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("not pending"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // Denied in the terminal: refused, never sent.
    write_call(&mut p, 2, "second");
    let items = wait_pending(runtime.path(), 1);
    let id = items[0]["id"].as_str().unwrap().to_string();
    let out = approvals(runtime.path(), &["deny", &id]);
    assert!(out.status.success());
    let (r, _) = p.recv_response(&json!(2));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"],
        "consent_required"
    );
    assert!(
        text_of(&r).contains("denied it in the terminal channel"),
        "{r}"
    );
    assert!(calls_received(&log).is_empty());
    assert!(pending(runtime.path()).is_empty());

    // A malformed id is refused with what ids look like.
    let out = approvals(runtime.path(), &["approve", "nonsense"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not an approval id"));

    p.close_stdin();
    p.wait();
    // The socket is gone with the process.
    assert!(pending(runtime.path()).is_empty());
    let log_text = std::fs::read_to_string(&audit).unwrap();
    assert!(!log_text.contains("\"confirmed\""), "{log_text}");
    assert!(log_text.contains("call_denied_by_user"), "{log_text}");
    assert!(
        !log_text.contains("second"),
        "argument values stay out of the audit log"
    );
}

#[test]
fn an_unanswered_out_of_band_approval_is_a_denial_after_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let audit = dir.path().join("audit.jsonl");
    let mut p = guarded(
        dir.path(),
        runtime.path(),
        "[confirmation]\ntimeout = \"2s\"\n",
        &log,
        &audit,
    );
    write_call(&mut p, 1, "hello");
    let items = wait_pending(runtime.path(), 1);
    let id = items[0]["id"].as_str().unwrap().to_string();
    let (r, _) = p.recv_response(&json!(1));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"],
        "consent_required"
    );
    assert!(text_of(&r).contains("no answer within 2 s"), "{r}");
    let late = approvals(runtime.path(), &["approve", &id]);
    assert!(!late.status.success(), "a late approval finds nothing");
    assert!(calls_received(&log).is_empty());
}

#[test]
fn two_mcpguard_processes_are_listed_and_answered_apart() {
    let dir_a = tempfile::tempdir().unwrap();
    let dir_b = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let (log_a, log_b) = (dir_a.path().join("a.log"), dir_b.path().join("b.log"));
    let mut a = guarded(
        dir_a.path(),
        runtime.path(),
        "",
        &log_a,
        &dir_a.path().join("audit"),
    );
    let mut b = guarded(
        dir_b.path(),
        runtime.path(),
        "",
        &log_b,
        &dir_b.path().join("audit"),
    );
    write_call(&mut a, 1, "from a");
    write_call(&mut b, 1, "from b");
    let items = wait_pending(runtime.path(), 2);
    assert_eq!(items.len(), 2, "{items:?}");
    let id_of = |pid: u32| {
        items
            .iter()
            .find(|i| i["pid"] == pid)
            .and_then(|i| i["id"].as_str())
            .unwrap_or_else(|| panic!("nothing of {pid} in {items:?}"))
            .to_string()
    };
    let (id_a, id_b) = (id_of(a.pid()), id_of(b.pid()));
    assert!(approvals(runtime.path(), &["deny", &id_b]).status.success());
    let (r, _) = b.recv_response(&json!(1));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"],
        "consent_required"
    );
    assert!(calls_received(&log_b).is_empty());
    let left = pending(runtime.path());
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["id"], id_a.as_str());
    assert!(approvals(runtime.path(), &["deny", &id_a]).status.success());
    let (r, _) = a.recv_response(&json!(1));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"],
        "consent_required"
    );
    assert!(calls_received(&log_a).is_empty());
}

/// `mcpguard approvals ARGS` as uid 65534 with no supplementary groups, pointed at `runtime`.
fn approvals_as_nobody(runtime: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(mcpguard());
    cmd.arg("approvals")
        .args(args)
        .env("XDG_RUNTIME_DIR", runtime)
        .current_dir("/");
    // SAFETY: between fork and exec the child only makes the async-signal-safe system calls
    // setgroups, setgid and setuid.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    crate::support::run_bounded(&mut cmd)
}

#[test]
fn another_user_can_neither_list_nor_answer() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: switching to another uid needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    // The other user may reach the runtime directory itself (as on a shared /tmp), only
    // mcpguard's own directory inside it keeps them out.
    std::fs::set_permissions(
        runtime.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let log = dir.path().join("server.log");
    let mut p = guarded(
        dir.path(),
        runtime.path(),
        "",
        &log,
        &dir.path().join("audit"),
    );
    write_call(&mut p, 1, "hello");
    let items = wait_pending(runtime.path(), 1);
    let id = items[0]["id"].as_str().unwrap().to_string();
    let sock_dir = runtime.path().join("mcpguard");
    let mode = std::fs::metadata(&sock_dir).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o700
    );

    for args in [
        vec!["list", "--json"],
        vec!["approve", id.as_str()],
        vec!["deny", id.as_str()],
    ] {
        let out = approvals_as_nobody(runtime.path(), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} as uid 65534: {stderr}");
        assert!(
            stderr.contains("belongs to uid 0, not to you (uid 65534)"),
            "{args:?}: {stderr}"
        );
    }
    // Even knowing the socket's path, the other user cannot connect to it.
    let sock = sock_dir.join(format!("{}.sock", p.pid()));
    let mut cmd = Command::new("python3");
    cmd.args([
        "-c",
        "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ntry:\n s.connect(sys.argv[1]); print('connected')\nexcept OSError as e:\n print('refused', e.errno)",
    ])
    .arg(&sock);
    // SAFETY: as above, only setgroups, setgid and setuid run between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(65534) != 0
                || libc::setuid(65534) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = crate::support::run_bounded(&mut cmd);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with("refused 13"), "EACCES expected: {said}");
    // The approval is untouched: the owner still sees and answers it.
    assert_eq!(pending(runtime.path()).len(), 1);
    assert!(approvals(runtime.path(), &["deny", &id]).status.success());
    let (r, _) = p.recv_response(&json!(1));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"],
        "consent_required"
    );
    assert!(calls_received(&log).is_empty());
}

/// The real Python SDK client, without elicitation and with a callback that cancels at once
/// (as headless hosts do): either way the write waits for the terminal; `approve` there starts
/// the trusted path, which cannot run here, so nothing reaches the server, and `deny` refuses.
#[test]
fn python_sdk_clients_with_and_without_elicitation_wait_for_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, reads_policy_with("")).unwrap();
    for (elicit, approve) in [("none", true), ("cancel", true), ("decline", false)] {
        let runtime = tempfile::tempdir().unwrap();
        let log = dir.path().join(format!("server-{elicit}.log"));
        let mut server = vec![mcpguard().display().to_string()];
        server.extend(guarded_argv(
            &snap,
            &digest,
            &["--policy".into(), policy.display().to_string()],
            &["--log".into(), log.display().to_string()],
        ));
        let mut cmd = crate::interop::python_command_with(
            "legacy",
            &[
                "--elicit",
                elicit,
                "--env",
                &format!("XDG_RUNTIME_DIR={}", runtime.path().display()),
                "--env",
                "DBUS_SYSTEM_BUS_ADDRESS=unix:path=/nonexistent/mcpguard-test-system-bus",
            ],
            &[(
                "write_note",
                json!({"path": "/notes/a", "body": format!("via {elicit}")}),
            )],
            &server,
        );
        let client = std::thread::spawn(move || crate::interop::run_python(&mut cmd));
        let items = wait_pending(runtime.path(), 1);
        assert_eq!(items.len(), 1, "--elicit {elicit}: {items:?}");
        if elicit != "none" {
            assert!(
                items[0]["hostNote"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(&format!("the host answered {elicit} without asking")),
                "{:?}",
                items[0]
            );
        }
        let id = items[0]["id"].as_str().unwrap().to_string();
        if approve {
            assert_not_approved(&approvals(runtime.path(), &["approve", &id]));
            assert!(calls_received(&log).is_empty(), "--elicit {elicit}");
        }
        assert!(approvals(runtime.path(), &["deny", &id]).status.success());
        let (t, stderr) = client.join().unwrap();
        let what = format!("--elicit {elicit}: {t}\n{stderr}");
        let write = &t["calls"][0];
        assert_eq!(
            write["result"]["_meta"]["dev.mcpguard/refusal"]["code"], "consent_required",
            "{what}"
        );
        assert!(calls_received(&log).is_empty(), "{what}");
        if elicit != "none" {
            let message = t["callbacks"][0]["params"]["message"].as_str().unwrap();
            let lines: Vec<&str> = message.lines().collect();
            assert!(lines[0].contains("\"write_note\"") && lines[0].contains("\"fixture\""));
            assert!(
                lines[1].contains(&format!("body=\"via {elicit}\"")),
                "{message}"
            );
            assert!(lines[2].starts_with("Approve runs"), "{message}");
        }
    }
}

/// A standing approval cannot be taken through the socket: `approve --scope identical` only
/// starts the trusted path (which cannot run here), so the identical call that follows is asked
/// about again and nothing reaches the server; a tool whose review marks an argument as
/// authority (`write_note`'s path) is never offered one. (A standing approval given through
/// polkit is in tests/integration/polkit.rs.)
#[test]
fn a_standing_approval_is_not_granted_through_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let audit = dir.path().join("audit.jsonl");
    // `echo` is made a write (its only argument is data), so its calls are confirmed.
    let policy = dir.path().join("standing.toml");
    std::fs::write(
        &policy,
        echo_as_write_policy_with(
            "[confirmation]\nallow_identical = true\nidentical_for = \"5m\"\n",
        ),
    )
    .unwrap();
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
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
    let mut p = Peer::start_with(no_polkit(
        Command::new(mcpguard())
            .args(&argv)
            .env("XDG_RUNTIME_DIR", runtime.path()),
    ));
    p.initialize();
    let echo = |p: &mut Peer, id: i64, text: &str| {
        p.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}}));
    };

    // An authority argument: once only.
    write_call(&mut p, 1, "note");
    let items = wait_pending(runtime.path(), 1);
    assert_eq!(items[0]["scopes"], json!(["once"]), "{items:?}");
    let id = items[0]["id"].as_str().unwrap().to_string();
    assert!(approvals(runtime.path(), &["deny", &id]).status.success());
    p.recv_response(&json!(1));

    echo(&mut p, 3, "same");
    let items = wait_pending(runtime.path(), 1);
    assert_eq!(
        items[0]["scopes"],
        json!(["once", "identical"]),
        "{items:?}"
    );
    let id = items[0]["id"].as_str().unwrap().to_string();
    assert_not_approved(&approvals(
        runtime.path(),
        &["approve", &id, "--scope", "identical"],
    ));
    assert!(approvals(runtime.path(), &["deny", &id]).status.success());
    let (r, _) = p.recv_response(&json!(3));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"],
        "consent_required"
    );

    // The identical call is asked about again: no standing approval was granted.
    echo(&mut p, 4, "same");
    let items = wait_pending(runtime.path(), 1);
    assert_eq!(items.len(), 1, "{items:?}");
    let id = items[0]["id"].as_str().unwrap().to_string();
    assert!(approvals(runtime.path(), &["deny", &id]).status.success());
    let (r, _) = p.recv_response(&json!(4));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"],
        "consent_required"
    );
    assert!(calls_received(&log).is_empty());
    p.close_stdin();
    p.wait();
    let text = std::fs::read_to_string(&audit).unwrap();
    assert!(!text.contains("covered by the standing approval"), "{text}");
}

/// `mcpguard approvals watch` shows each approval as it arrives, with its three lines and the id
/// `approve` takes, and discards what was typed before the question (keys typed while it was
/// idle answer nothing); a denial typed after the question refuses the call, and an approval
/// typed after it starts the trusted path (which cannot run here, so nothing is approved).
#[test]
fn watch_ignores_type_ahead_and_asks_about_each_approval_as_it_arrives() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let mut p = guarded(
        dir.path(),
        runtime.path(),
        "",
        &log,
        &dir.path().join("audit"),
    );
    // A person at a terminal: `watch` refuses to run without one.
    let mut watch = mcpguard::cli::pty::Session::spawn(
        &mcpguard(),
        &["approvals".into(), "watch".into()],
        &[("XDG_RUNTIME_DIR", runtime.path().to_str().unwrap())],
    )
    .unwrap();
    watch
        .expect("watching for approvals", Duration::from_secs(20))
        .unwrap();
    // Typed while nothing was asked (the terminal holds the lines until watch reads them).
    watch.send_line("a").unwrap();
    watch.send_line("d").unwrap();
    write_call(&mut p, 1, "first");
    let id = wait_pending(runtime.path(), 1)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Time for watch to show the question and read the terminal.
    std::thread::sleep(Duration::from_millis(2000));
    assert!(
        calls_received(&log).is_empty(),
        "keys typed before the question answered it: {}",
        watch.screen()
    );
    assert_eq!(pending(runtime.path()).len(), 1, "{}", watch.screen());
    watch
        .expect(&format!("approve {id}?"), Duration::from_secs(20))
        .unwrap();
    assert!(
        watch
            .screen()
            .contains(&format!("Approval {id}  fixture / write_note")),
        "the id approve takes: {}",
        watch.screen()
    );
    // Typed after the question: an approval starts the trusted path, which cannot run here.
    watch.send_line("a").unwrap();
    watch
        .expect("not answered: not approved", Duration::from_secs(20))
        .unwrap();
    assert!(calls_received(&log).is_empty());
    assert_eq!(pending(runtime.path()).len(), 1, "still pending");
    // Shown once per id; a second question for the next call is denied when typed.
    write_call(&mut p, 2, "second");
    let second = next_id(runtime.path(), &[&id]);
    watch
        .expect(&format!("approve {second}?"), Duration::from_secs(20))
        .unwrap();
    watch.send_line("d").unwrap();
    let (r, _) = p.recv_response(&json!(2));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"], "consent_required",
        "{r}"
    );
    assert!(approvals(runtime.path(), &["deny", &id]).status.success());
    p.recv_response(&json!(1));
    // End of input (Ctrl-D on an empty line) ends the watch at its next question.
    write_call(&mut p, 3, "third");
    let third = next_id(runtime.path(), &[&id, &second]);
    watch
        .expect(&format!("approve {third}?"), Duration::from_secs(20))
        .unwrap();
    watch.send_line("\u{4}").unwrap();
    let (_, decided, shown) = watch
        .wait_with_screen(Duration::from_secs(20))
        .expect("watch ends at end of input");
    assert!(
        shown.contains("Arguments: body=\"first\", path=\"/notes/a\""),
        "{shown}"
    );
    assert!(decided.contains("denied "), "{decided}");
    assert!(calls_received(&log).is_empty());
}

/// The id of the first pending approval that is not one of `known`, once there is one.
fn next_id(runtime: &Path, known: &[&str]) -> String {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(id) = pending(runtime)
            .iter()
            .filter_map(|i| i["id"].as_str())
            .find(|id| !known.contains(id))
        {
            return id.to_string();
        }
        assert!(Instant::now() < until, "no new approval pending");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `watch` takes down a question that expired while it was shown, instead of leaving it to be
/// answered.
#[test]
fn watch_takes_down_an_expired_question() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let mut p = guarded(
        dir.path(),
        runtime.path(),
        "[confirmation]\ntimeout = \"2s\"\n",
        &log,
        &dir.path().join("audit"),
    );
    let mut watch = mcpguard::cli::pty::Session::spawn(
        &mcpguard(),
        &["approvals".into(), "watch".into()],
        &[("XDG_RUNTIME_DIR", runtime.path().to_str().unwrap())],
    )
    .unwrap();
    watch
        .expect("watching for approvals", Duration::from_secs(20))
        .unwrap();
    write_call(&mut p, 1, "late");
    watch.expect("[a]pprove", Duration::from_secs(20)).unwrap();
    let (r, _) = p.recv_response(&json!(1));
    assert!(text_of(&r).contains("no answer within 2 s"), "{r}");
    watch
        .expect("is no longer pending", Duration::from_secs(10))
        .unwrap();
    assert!(calls_received(&log).is_empty());
}

/// The attack of issue 30: a program of the user without a terminal (an agent's shell tool)
/// sends the approval socket one JSON line approving the held write, with a standing scope. It
/// approves nothing: the socket only starts the person's authentication, which no program can
/// complete.
#[test]
fn a_raw_json_approval_on_the_socket_approves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let mut p = guarded(
        dir.path(),
        runtime.path(),
        "",
        &log,
        &dir.path().join("audit"),
    );
    write_call(&mut p, 1, "attack");
    let id = wait_pending(runtime.path(), 1)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let sock = runtime
        .path()
        .join("mcpguard")
        .join(format!("{}.sock", p.pid()));
    let out = crate::support::run_bounded(
        Command::new("python3")
            .args([
                "-c",
                "import socket,sys,json\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ns.sendall((json.dumps({'op':'answer','id':sys.argv[2],'approve':True,'scope':'tool'})+'\\n').encode())\nprint(s.makefile().readline().strip())",
            ])
            .arg(&sock)
            .arg(&id)
            .stdin(std::process::Stdio::null()),
    );
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["ok"], false, "{reply}");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        calls_received(&log).is_empty(),
        "the write reached the server: {reply}"
    );
    assert_eq!(pending(runtime.path()).len(), 1, "still pending");
    assert!(
        p.stderr()
            .contains(&format!("approval {id} was not approved")),
        "{}",
        p.stderr()
    );
    assert!(approvals(runtime.path(), &["deny", &id]).status.success());
    let (r, _) = p.recv_response(&json!(1));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"],
        "consent_required"
    );
    assert!(calls_received(&log).is_empty());
}

/// A program gives itself a terminal (`script -qc`) and runs `mcpguard approvals approve`: that
/// approves nothing without the person's authentication.
#[test]
fn approve_under_a_pseudo_terminal_approves_nothing_without_the_trusted_path() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let mut p = guarded(
        dir.path(),
        runtime.path(),
        "",
        &log,
        &dir.path().join("audit"),
    );
    write_call(&mut p, 1, "attack");
    let id = wait_pending(runtime.path(), 1)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let out = crate::support::run_bounded(
        Command::new("script")
            .args([
                "-qc",
                &format!("{} approvals approve {id}", mcpguard().display()),
                "/dev/null",
            ])
            .env("XDG_RUNTIME_DIR", runtime.path())
            .stdin(std::process::Stdio::null()),
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("not approved"), "{said}");
    assert!(calls_received(&log).is_empty(), "{said}");
    assert_eq!(pending(runtime.path()).len(), 1, "still pending");
    assert!(approvals(runtime.path(), &["deny", &id]).status.success());
    p.recv_response(&json!(1));
    assert!(calls_received(&log).is_empty());
}

/// An approval must come from a person at a terminal: a program without one (an agent's shell
/// tool runs commands so) is refused, and the write stays pending; `deny` works anywhere, and
/// `watch` refuses to start.
#[test]
fn approving_without_a_terminal_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let mut p = guarded(
        dir.path(),
        runtime.path(),
        "",
        &log,
        &dir.path().join("audit"),
    );
    write_call(&mut p, 1, "hello");
    let id = wait_pending(runtime.path(), 1)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    for args in [vec!["approve", id.as_str()], vec!["watch"]] {
        let out = crate::support::run_bounded(
            Command::new(mcpguard())
                .arg("approvals")
                .args(&args)
                .env("XDG_RUNTIME_DIR", runtime.path()),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {stderr}");
        assert!(
            stderr.contains("must be run by a person at a terminal"),
            "{args:?}: {stderr}"
        );
    }
    assert_eq!(
        pending(runtime.path()).len(),
        1,
        "the write is still pending"
    );
    let out = approvals(runtime.path(), &["deny", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (r, _) = p.recv_response(&json!(1));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"], "consent_required",
        "{r}"
    );
    assert!(calls_received(&log).is_empty());
}

/// The server approving its own write: a sandbox that lets it create UNIX sockets, and a grant of
/// the approval sockets' folder, put mcpguard's socket within its reach. Its approvals (bare and
/// with a standing scope) reach the socket, and the write still never runs. Two layers, each
/// attacked: as root with the default `drop_root`, the server runs as another uid and the
/// socket refuses it by its peer credentials; as the same uid (`drop_root = false`, and every
/// ordinary user) the socket only starts the person's authentication, which the server cannot
/// complete.
#[test]
fn the_sandboxed_server_cannot_approve_its_own_write_through_the_socket() {
    for extra in ["", "drop_root = false\n"] {
        self_approval_attempt(extra);
    }
}

/// One self-approval attempt, with `extra` added to the `[sandbox]` table of the policy.
fn self_approval_attempt(extra: &str) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    let sockets = runtime.path().join("mcpguard");
    std::fs::create_dir(&sockets).unwrap();
    std::fs::set_permissions(
        &sockets,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let log = dir.path().join("server.log");
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        reads_policy_with(&format!("[sandbox]\nallow_unix_sockets = true\n{extra}")),
    )
    .unwrap();
    let argv = guarded_argv(
        &snap,
        &digest,
        &[
            "--policy".into(),
            policy.display().to_string(),
            "--sandbox-write".into(),
            sockets.display().to_string(),
        ],
        &[
            "--log".into(),
            log.display().to_string(),
            "--approve-own-writes".into(),
            sockets.display().to_string(),
        ],
    );
    let mut p = Peer::start_with(no_polkit(
        Command::new(mcpguard())
            .args(&argv)
            .env("XDG_RUNTIME_DIR", runtime.path()),
    ));
    p.initialize();
    write_call(&mut p, 1, "self-approved");
    let id = wait_pending(runtime.path(), 1)[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The attack reaches the socket (so this test would see an approval if the socket gave
    // one), and each answer it gets says it is not approved.
    let until = Instant::now() + Duration::from_secs(20);
    while !p.stderr().contains("fixture: approval socket said:") && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let said = p.stderr();
    assert!(
        said.contains("fixture: approval socket said:"),
        "the sandboxed server did not reach the approval socket ({extra}): {said}"
    );
    // As root with drop_root the server is another uid, which the socket names and refuses.
    // SAFETY: geteuid has no preconditions.
    let other_uid = unsafe { libc::geteuid() } == 0 && extra.is_empty();
    assert_eq!(
        said.contains("refused: the connecting process runs as uid"),
        other_uid,
        "the peer-credential check ({extra}): {said}"
    );
    assert!(
        !said.contains("\"ok\":true"),
        "the socket approved the server's own write: {said}"
    );
    assert!(
        calls_received(&log).is_empty(),
        "the write reached the server: {said}"
    );
    assert!(approvals(runtime.path(), &["deny", &id]).status.success());
    let (r, _) = p.recv_response(&json!(1));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"], "consent_required",
        "{r}"
    );
    assert!(calls_received(&log).is_empty());
}
