//! The child's lifecycle: exit status, end of input, signals, crashes, spawn failures, and no
//! process left behind. Servers here are small shell programs: real processes whose behaviour
//! is obvious from one line.

use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::{host_pid, marker, process_alive, wait_gone, Peer};

fn sh(script: &str) -> Vec<String> {
    ["--grace", "300ms", "--", "sh", "-c", script]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The pid of mcpguard's child (spawned by its main thread).
fn child_of(pid: u32) -> u32 {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
            if let Some(c) = s.split_whitespace().next() {
                return c.parse().unwrap();
            }
        }
        assert!(Instant::now() < until, "mcpguard {pid} has no child");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn exit_code_of_the_server_becomes_mcpguards() {
    let mut p = Peer::guard(&sh("exit 7"));
    assert_eq!(p.wait().code(), Some(7));
}

#[test]
fn death_by_signal_is_reraised() {
    let mut p = Peer::guard(&sh("kill -USR1 $$"));
    assert_eq!(p.wait().signal(), Some(libc::SIGUSR1));
}

#[test]
fn a_command_that_cannot_start_is_a_clear_error() {
    let mut p = Peer::guard(&["--", "/nonexistent/server"]);
    assert_eq!(p.wait().code(), Some(127));
    assert!(
        p.stderr()
            .contains("cannot start the MCP server `/nonexistent/server`"),
        "{}",
        p.stderr()
    );
    let mut p = Peer::guard::<&str>(&[]);
    assert_eq!(p.wait().code(), Some(2));
    assert!(
        p.stderr().contains("-- <server command...>"),
        "{}",
        p.stderr()
    );
}

#[test]
fn end_of_input_closes_the_servers_stdin() {
    // `cat` exits on its own when its stdin closes: no signal is needed.
    let mut p = Peer::guard(&["--grace", "10s", "--", "cat"]);
    p.close_stdin();
    let start = Instant::now();
    assert_eq!(p.wait().code(), Some(0));
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn a_server_ignoring_eof_gets_sigterm_then_one_ignoring_sigterm_gets_sigkill() {
    let mut p = Peer::guard(&sh(
        "trap 'echo got-term >&2; exit 4' TERM; while :; do sleep 0.05; done",
    ));
    p.close_stdin();
    assert_eq!(p.wait().code(), Some(4));
    assert!(p.stderr().contains("[server] got-term"), "{}", p.stderr());

    let mut p = Peer::guard(&sh(
        "trap '' TERM; echo started >&2; while :; do sleep 0.05; done",
    ));
    p.wait_stderr("[server] started");
    p.close_stdin();
    // mcpguard ended the server itself, so it exits with its documented status instead of dying
    // of the SIGKILL it sent (`a_server_mcpguard_had_to_end_gives_exit_status_3`).
    assert_eq!(p.wait().code(), Some(3));
    assert!(p.stderr().contains("sending SIGKILL"), "{}", p.stderr());
}

/// When the host closes and mcpguard has to end the server (SIGTERM after `--grace`, SIGKILL
/// after another), the host sees an ordinary exit with status 3, not its sidecar killed by a
/// signal. A server that exits by itself, or dies of a signal mcpguard did not send, is still
/// mirrored (`exit_code_of_the_server_becomes_mcpguards`, `death_by_signal_is_reraised`).
#[test]
fn a_server_mcpguard_had_to_end_gives_exit_status_3() {
    for (server_args, signal) in [
        (&["--ignore-eof"][..], "SIGTERM"),
        (&["--ignore-eof", "--ignore-sigterm"][..], "SIGKILL"),
    ] {
        let fixture = crate::support::fixture().display().to_string();
        let mut args = vec!["--grace", "300ms", "--allow-unpinned", "--", &fixture];
        args.extend_from_slice(server_args);
        // The explanation is an info line (the proxy prints warnings only by default).
        let mut p = Peer::start_with(
            std::process::Command::new(crate::support::mcpguard())
                .args(&args)
                .env("MCPGUARD_LOG", "info"),
        );
        p.initialize();
        p.close_stdin();
        let status = p.wait();
        assert_eq!(status.signal(), None, "{server_args:?}: {}", p.stderr());
        assert_eq!(status.code(), Some(3), "{server_args:?}: {}", p.stderr());
        assert!(
            p.stderr().contains(&format!(
                "mcpguard ended the server with {signal} after the host closed the connection"
            )),
            "{server_args:?}: {}",
            p.stderr()
        );
    }
}

#[test]
fn host_signals_are_forwarded_to_the_server() {
    for (sig, name) in [
        (libc::SIGTERM, "TERM"),
        (libc::SIGINT, "INT"),
        (libc::SIGHUP, "HUP"),
    ] {
        let script = format!("trap 'echo got-{name} >&2; exit 9' {name}; echo ready >&2; while :; do sleep 0.05; done");
        let mut p = Peer::guard(&sh(&script));
        p.wait_stderr("[server] ready");
        // SAFETY: plain kill(2) on the pid of a child this test owns.
        unsafe { libc::kill(p.pid() as i32, sig) };
        assert_eq!(p.wait().code(), Some(9), "{name}");
        assert!(
            p.stderr().contains(&format!("[server] got-{name}")),
            "{}",
            p.stderr()
        );
    }
}

#[test]
fn a_crash_mid_request_fails_the_pending_requests_and_exits_with_the_crash() {
    let mut p = Peer::guard(&sh("read line; exit 5"));
    p.send_json(&json!({"jsonrpc": "2.0", "id": 41, "method": "ping"}));
    let v = p.recv_json();
    assert_eq!(v["id"], 41);
    assert_eq!(v["error"]["code"], -31001);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exited with status 5"),
        "{v}"
    );
    assert_eq!(p.wait().code(), Some(5));
}

#[test]
fn sigkill_of_mcpguard_takes_the_server_down() {
    let p = Peer::guard(&sh("echo ready >&2; while :; do sleep 0.05; done"));
    p.wait_stderr("[server] ready");
    let server = child_of(p.pid());
    assert!(process_alive(server));
    // SAFETY: plain kill(2) on the pid of a child this test owns.
    unsafe { libc::kill(p.pid() as i32, libc::SIGKILL) };
    assert!(
        wait_gone(server, Duration::from_secs(10)),
        "server {server} survived SIGKILL of mcpguard"
    );
}

#[test]
fn nothing_of_the_server_outlives_it() {
    // The server starts a helper in its process group and exits; the helper must not stay.
    let mut p = Peer::guard(&sh(
        "sleep 1000 & echo grandchild-pid=$! >&2; read line; exit 0",
    ));
    let reported = marker(&p.wait_stderr("grandchild-pid="), "grandchild-pid").unwrap();
    let grandchild = host_pid(p.pid(), reported);
    assert!(process_alive(grandchild));
    p.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert_eq!(p.wait().code(), Some(0));
    assert!(
        wait_gone(grandchild, Duration::from_secs(5)),
        "grandchild {grandchild} outlived the server"
    );
}

/// mcpguard with `MCPGUARD_DEBUG_PANIC` set (a cue compiled only into debug builds, which the
/// tests run): it panics while deciding a frame of that method from that side.
fn guard_panicking_on(cue: &str, script: &str) -> Peer {
    Peer::start_with(
        std::process::Command::new(crate::support::mcpguard())
            .env("MCPGUARD_DEBUG_PANIC", cue)
            .args(sh(script)),
    )
}

#[test]
fn a_panic_deciding_a_host_request_answers_everything_pending_and_stops_the_server() {
    // The server reads and never answers, so the ping stays pending.
    let mut p = guard_panicking_on(
        "host:tools/list",
        "echo ready >&2; while read line; do :; done",
    );
    p.wait_stderr("[server] ready");
    let server = child_of(p.pid());
    p.send_json(&json!({"jsonrpc": "2.0", "id": 41, "method": "ping"}));
    p.send_json(&json!({"jsonrpc": "2.0", "id": 42, "method": "tools/list"}));
    let mut answers = [p.recv_json(), p.recv_json()];
    answers.sort_by_key(|v| v["id"].as_i64());
    let [ping, list] = answers;
    assert_eq!(ping["id"], 41, "{ping}");
    assert_eq!(ping["error"]["code"], -31001, "{ping}");
    assert!(
        ping["error"]["message"]
            .as_str()
            .unwrap()
            .contains("internal error"),
        "{ping}"
    );
    assert_eq!(list["id"], 42, "{list}");
    assert_eq!(list["error"]["code"], -32603, "{list}");
    assert_eq!(p.wait().code(), Some(70), "{}", p.stderr());
    let stderr = p.stderr();
    assert!(
        stderr.contains("internal error: mcpguard panicked in its from-host thread"),
        "{stderr}"
    );
    assert!(stderr.contains("exiting with status 70"), "{stderr}");
    assert!(
        wait_gone(server, Duration::from_secs(5)),
        "server {server} outlived the panic"
    );
}

#[test]
fn a_panic_deciding_a_server_message_answers_the_host_and_stops_the_server() {
    let mut p = guard_panicking_on(
        "server:boom",
        r#"echo ready >&2; read line; echo '{"jsonrpc":"2.0","method":"boom"}'; while read line; do :; done"#,
    );
    p.wait_stderr("[server] ready");
    let server = child_of(p.pid());
    p.send_json(&json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
    let v = p.recv_json();
    assert_eq!(v["id"], 7, "{v}");
    assert_eq!(v["error"]["code"], -31001, "{v}");
    assert_eq!(p.wait().code(), Some(70), "{}", p.stderr());
    assert!(
        p.stderr()
            .contains("internal error: mcpguard panicked in its from-server thread"),
        "{}",
        p.stderr()
    );
    assert!(
        wait_gone(server, Duration::from_secs(5)),
        "server {server} outlived the panic"
    );
}
