//! The sandbox, proven with real processes. Each probe tries something the default profile
//! forbids, once under the sandbox (it must fail) and once with `sandbox.mode = "off"` (it must
//! succeed, so that a probe that fails for another reason cannot make a test pass). The probes
//! run through `mcpguard sandbox-check --policy P -- <probe>`, which applies exactly the
//! sandbox the proxy applies, and one test goes through the proxy itself.
//!
//! A kernel without Landlock ABI 6 cannot enforce the default profile: every test here then
//! fails with a message saying so, on stdout and stderr; none passes silently.

use std::net::{TcpListener, UdpSocket};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::support::{mcpguard, run_bounded, Peer};

/// A scratch world: a HOME with a planted canary, and two policies (the default profile, and
/// the same with the sandbox off).
struct World {
    dir: tempfile::TempDir,
    home: PathBuf,
    sandboxed: PathBuf,
    off: PathBuf,
}

const CANARY: &str = "CANARY-7f3a9c";
const SECRET: &str = "hunter2-secret-value";

impl World {
    fn new() -> World {
        require_landlock();
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        std::fs::write(home.join("canary.txt"), CANARY).unwrap();
        // A policy that leaves the sandbox at its defaults (default.toml's profile).
        let sandboxed = dir.path().join("sandboxed.toml");
        std::fs::write(&sandboxed, "[sandbox]\nmode = \"require\"\n").unwrap();
        let off = dir.path().join("off.toml");
        std::fs::write(&off, "[sandbox]\nmode = \"off\"\n").unwrap();
        World {
            dir,
            home,
            sandboxed,
            off,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `mcpguard sandbox-check --policy POLICY [opts] -- probe...` with HOME in the scratch world
    /// and a secret in the environment.
    fn check(&self, policy: &Path, opts: &[&str], probe: &[&str]) -> Output {
        let mut cmd = Command::new(mcpguard());
        cmd.arg("sandbox-check")
            .arg("--policy")
            .arg(policy)
            .args(opts)
            .arg("--")
            .args(probe)
            .env("HOME", &self.home)
            .env("MCPGUARD_TEST_SECRET", SECRET);
        run_bounded(&mut cmd)
    }

    /// Runs `probe` sandboxed and unsandboxed.
    fn both(&self, probe: &[&str]) -> (Output, Output) {
        (
            self.check(&self.sandboxed, &[], probe),
            self.check(&self.off, &[], probe),
        )
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn show(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// The kernel's Landlock ABI as mcpguard reports it; fails loudly when it is too old for the
/// default profile, so these tests never pass without having tested anything.
pub(crate) fn require_landlock() -> u32 {
    let out = run_bounded(Command::new(mcpguard()).args(["sandbox-check", "--log-format", "json"]));
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("sandbox-check printed no JSON ({e}): {}", show(&out)));
    let abi = report["landlock_abi"].as_u64().unwrap_or(0) as u32;
    if abi < 6 || report["seccomp"] != true {
        let msg = format!(
            "SANDBOX TESTS CANNOT RUN ON THIS KERNEL: Landlock ABI {abi} (6 needed), seccomp {}. \
             These tests fail rather than pass without testing anything.",
            report["seccomp"]
        );
        println!("{msg}");
        eprintln!("{msg}");
        panic!("{msg}");
    }
    abi
}

/// The python interpreter of the system (not a pyenv shim, which is a shell script that runs
/// programs from the home directory).
fn python() -> &'static str {
    let p = "/usr/bin/python3";
    assert!(
        Path::new(p).exists(),
        "{p} is needed for the network probes"
    );
    p
}

#[test]
fn sandbox_check_reports_the_kernel_and_every_rule() {
    let abi = require_landlock();
    let w = World::new();
    let out = run_bounded(
        Command::new(mcpguard())
            .args(["sandbox-check", "--policy"])
            .arg(&w.sandboxed)
            .env("HOME", &w.home),
    );
    assert!(out.status.success(), "{}", show(&out));
    let s = text(&out.stdout);
    for want in [
        format!("landlock: ABI {abi}"),
        "sandbox.mode: require".into(),
        "execute            /usr  (sandbox.execute /usr)  [enforced]".into(),
        "TCP connect only to ports: none  [enforced]".into(),
        "no UDP sockets (seccomp)  [enforced]".into(),
        "no signals to processes outside the sandbox, mcpguard included  [enforced]".into(),
        "no core dumps  [enforced]".into(),
        "no TCP Fast Open".into(),
        "a PID namespace: no descendant outlives the server".into(),
        "no kernel keyrings".into(),
        "stat, access, readlink and inotify on paths outside the grants  [RESIDUAL RISK: ".into(),
        // stat, /proc and the memory of the whole server (no cgroup); as root too, since
        // root's server runs as uid 65534 by default (sandbox.drop_root).
        "verdict: the rules above are enforced on this kernel, but 3 residual risk(s)".into(),
        "the memory and processes of the whole server together (a cgroup)  [RESIDUAL RISK: ".into(),
    ] {
        assert!(s.contains(&want), "missing {want:?} in:\n{s}");
    }
    assert!(
        !s.contains("every rule"),
        "the verdict must not claim every rule while residual risks are open:\n{s}"
    );
}

#[test]
fn reading_a_file_outside_the_allowed_set_fails() {
    let w = World::new();
    let probe = ["sh", "-c", "cat \"$HOME/canary.txt\""];
    let (sandboxed, off) = w.both(&probe);
    assert!(
        !text(&sandboxed.stdout).contains(CANARY) && !sandboxed.status.success(),
        "the canary was read inside the sandbox:\n{}",
        show(&sandboxed)
    );
    assert!(
        text(&sandboxed.stderr).contains("Permission denied"),
        "{}",
        show(&sandboxed)
    );
    assert!(
        text(&off.stdout).contains(CANARY),
        "without the sandbox the probe must read the canary:\n{}",
        show(&off)
    );
}

#[test]
fn writing_outside_the_writable_set_fails_and_the_private_tmpdir_works() {
    let w = World::new();
    let target = w.path("outside");
    std::fs::create_dir(&target).unwrap();
    let probe = [
        "sh",
        "-c",
        "echo x > \"$1/written\"; echo y > \"$TMPDIR/private\" && echo tmp-ok; echo tmpdir=$TMPDIR",
        "sh",
        target.to_str().unwrap(),
    ];
    let sandboxed = w.check(&w.sandboxed, &[], &probe);
    assert!(
        !target.join("written").exists(),
        "a file was written outside the sandbox:\n{}",
        show(&sandboxed)
    );
    let s = text(&sandboxed.stdout);
    assert!(
        s.contains("tmp-ok"),
        "the private TMPDIR is writable:\n{}",
        show(&sandboxed)
    );
    let tmpdir = s
        .lines()
        .find_map(|l| l.strip_prefix("tmpdir="))
        .unwrap()
        .to_string();
    assert!(
        !Path::new(&tmpdir).exists(),
        "the private TMPDIR {tmpdir} is removed when the command ends"
    );
    let off = w.check(&w.off, &[], &probe);
    assert!(
        target.join("written").exists(),
        "without the sandbox the write must succeed:\n{}",
        show(&off)
    );
}

#[test]
fn a_granted_directory_is_writable_and_nothing_else_is() {
    let w = World::new();
    let granted = w.path("granted");
    std::fs::create_dir(&granted).unwrap();
    let probe = [
        "sh",
        "-c",
        "echo x > \"$1/ok\"; cat \"$HOME/canary.txt\"",
        "sh",
        granted.to_str().unwrap(),
    ];
    let out = w.check(
        &w.sandboxed,
        &["--sandbox-write", granted.to_str().unwrap()],
        &probe,
    );
    assert!(granted.join("ok").exists(), "{}", show(&out));
    assert!(!text(&out.stdout).contains(CANARY), "{}", show(&out));
}

#[test]
fn executing_a_binary_outside_the_allowed_set_fails() {
    let w = World::new();
    let bin = w.path("bin");
    std::fs::create_dir(&bin).unwrap();
    let copy = bin.join("probe-true");
    std::fs::copy("/usr/bin/true", &copy).unwrap();
    let probe = [
        "sh",
        "-c",
        "\"$1\"; echo status=$?",
        "sh",
        copy.to_str().unwrap(),
    ];
    let (sandboxed, off) = w.both(&probe);
    assert!(
        text(&sandboxed.stdout).contains("status=126"),
        "a binary outside sandbox.execute ran:\n{}",
        show(&sandboxed)
    );
    assert!(text(&off.stdout).contains("status=0"), "{}", show(&off));
}

#[test]
fn tcp_connect_to_a_port_not_allowed_never_reaches_the_listener() {
    let w = World::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let script = "import socket,sys\ns=socket.socket()\ns.settimeout(5)\ntry:\n s.connect(('127.0.0.1', int(sys.argv[1])))\n print('connected')\nexcept OSError as e:\n print('refused', e)\n";
    let probe = [python(), "-c", script, &port];
    let accepted = |l: &TcpListener| {
        // The connect happened before the probe exited; one accept finds it if it exists.
        l.accept().is_ok()
    };
    let sandboxed = w.check(&w.sandboxed, &[], &probe);
    assert!(
        text(&sandboxed.stdout).contains("refused"),
        "{}",
        show(&sandboxed)
    );
    assert!(
        !accepted(&listener),
        "the listener saw a connection from inside the sandbox"
    );
    let off = w.check(&w.off, &[], &probe);
    assert!(text(&off.stdout).contains("connected"), "{}", show(&off));
    assert!(
        accepted(&listener),
        "without the sandbox the listener must see the connection"
    );
}

#[test]
fn udp_send_to_a_loopback_socket_delivers_nothing() {
    let w = World::new();
    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    receiver
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let port = receiver.local_addr().unwrap().port().to_string();
    let script = "import socket,sys\ntry:\n s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n s.sendto(b'ping', ('127.0.0.1', int(sys.argv[1])))\n print('sent')\nexcept OSError as e:\n print('refused', e)\n";
    let probe = [python(), "-c", script, &port];
    let mut buf = [0u8; 16];
    let sandboxed = w.check(&w.sandboxed, &[], &probe);
    assert!(
        text(&sandboxed.stdout).contains("refused"),
        "{}",
        show(&sandboxed)
    );
    assert!(
        receiver.recv_from(&mut buf).is_err(),
        "a datagram arrived from inside the sandbox"
    );
    let off = w.check(&w.off, &[], &probe);
    assert!(text(&off.stdout).contains("sent"), "{}", show(&off));
    let (n, _) = receiver
        .recv_from(&mut buf)
        .expect("without the sandbox the datagram must arrive");
    assert_eq!(&buf[..n], b"ping");
}

#[test]
fn signalling_mcpguard_from_inside_the_sandbox_fails() {
    let w = World::new();
    // $PPID is mcpguard: sandbox-check runs the probe as its direct child.
    let probe = ["sh", "-c", "kill -USR1 $PPID; echo kill-status=$?"];
    let (sandboxed, off) = w.both(&probe);
    assert!(
        text(&sandboxed.stdout).contains("kill-status=1"),
        "{}",
        show(&sandboxed)
    );
    assert_eq!(sandboxed.status.signal(), None, "{}", show(&sandboxed));
    assert_eq!(
        off.status.signal(),
        Some(libc::SIGUSR1),
        "without the sandbox the signal must reach mcpguard:\n{}",
        show(&off)
    );
}

#[test]
fn an_environment_secret_that_is_not_allowlisted_is_absent() {
    let w = World::new();
    let probe = ["sh", "-c", "echo \"secret=[$MCPGUARD_TEST_SECRET]\""];
    let (sandboxed, off) = w.both(&probe);
    assert!(
        text(&sandboxed.stdout).contains("secret=[]"),
        "{}",
        show(&sandboxed)
    );
    assert!(
        text(&off.stdout).contains(&format!("secret=[{SECRET}]")),
        "{}",
        show(&off)
    );
    // A secret the policy names does pass.
    let named = w.path("named.toml");
    std::fs::write(
        &named,
        "[sandbox]\nenv = [\"PATH\", \"MCPGUARD_TEST_SECRET\"]\n",
    )
    .unwrap();
    let passed = w.check(&named, &[], &probe);
    assert!(
        text(&passed.stdout).contains(&format!("secret=[{SECRET}]")),
        "{}",
        show(&passed)
    );
}

/// The proxy applies the same sandbox to the server it starts: the server cannot read the
/// canary, runs with a private TMPDIR that is gone after it exits, and the start-up line says
/// what was enforced.
#[test]
fn the_proxied_server_runs_in_the_sandbox() {
    let w = World::new();
    let mut cmd = Command::new(mcpguard());
    cmd.arg("--policy")
        .arg(&w.sandboxed)
        .args(["--", "sh", "-c"])
        .arg(
            "cat \"$HOME/canary.txt\" >&2 || echo canary-denied >&2; \
             echo tmpdir=$TMPDIR >&2; echo secret=[$MCPGUARD_TEST_SECRET] >&2; read line; exit 0",
        )
        .env("HOME", &w.home)
        .env("MCPGUARD_TEST_SECRET", SECRET)
        // The sandbox's summary is an info line (the proxy prints warnings only by default).
        .env("MCPGUARD_LOG", "info");
    let mut p = Peer::start_with(&mut cmd);
    let stderr = p.wait_stderr("secret=");
    assert!(stderr.contains("[server] canary-denied"), "{stderr}");
    assert!(!stderr.contains(CANARY), "{stderr}");
    assert!(stderr.contains("[server] secret=[]"), "{stderr}");
    assert!(
        stderr.contains("sandbox require (Landlock ABI"),
        "the start-up line states what was enforced: {stderr}"
    );
    let tmpdir = stderr
        .lines()
        .find_map(|l| l.strip_prefix("[server] tmpdir="))
        .unwrap()
        .to_string();
    assert!(Path::new(&tmpdir).is_dir(), "{stderr}");
    p.close_stdin();
    assert!(p.wait().success());
    assert!(
        !Path::new(&tmpdir).exists(),
        "the private TMPDIR {tmpdir} outlived the server"
    );
}

/// A policy that leaves out `[sandbox]` still confines the server (the default profile), and
/// the gated fixture server runs under it.
#[test]
fn a_policy_without_a_sandbox_section_runs_the_fixture_confined() {
    let w = World::new();
    let policy = w.path("tools-only.toml");
    std::fs::write(&policy, "[review]\nrefused_tools = [\"echo\"]\n").unwrap();
    let fixture = crate::support::fixture();
    let out = w.check(&policy, &[], &[fixture.to_str().unwrap(), "--echo-bench"]);
    let s = text(&out.stdout);
    assert!(
        s.contains("the server program's directory)  [enforced]"),
        "{}",
        show(&out)
    );
    assert!(out.status.success(), "{}", show(&out));
}

#[test]
fn sandbox_check_speaks_json_with_log_format_json() {
    let w = World::new();
    let mut cmd = Command::new(mcpguard());
    cmd.args(["sandbox-check", "--log-format", "json", "--policy"])
        .arg(&w.sandboxed)
        .args(["--", "sh", "-c", "echo probe-ran"])
        .env("HOME", &w.home);
    let out = run_bounded(&mut cmd);
    assert!(out.status.success(), "{}", show(&out));
    let s = text(&out.stdout);
    let (first, rest) = s.split_once('\n').unwrap();
    let report: Value = serde_json::from_str(first).unwrap();
    assert_eq!(report["mode"], "require");
    let lines = report["lines"].as_array().unwrap();
    assert!(lines.iter().any(
        |l| l["status"] == "skipped" && l["reason"] == "does not exist"
            || l["status"] == "enforced"
    ));
    assert!(lines.iter().all(|l| l["status"] != "dropped"), "{report}");
    assert_eq!(rest.trim(), "probe-ran");
}

/// A variable a host configuration's `env` sets for the server (here, as the memory server's
/// `MEMORY_FILE_PATH`) is withheld by the sandbox's allowlist unless `--sandbox-env` passes it;
/// at the default level mcpguard names it and the flag, never its value.
#[test]
fn a_withheld_host_variable_is_named_at_the_default_level_with_its_flag() {
    let value = "/tmp/secret-memory-path.jsonl";
    let run = |extra: &[&str]| {
        let out = crate::support::run_bounded(
            std::process::Command::new(crate::support::mcpguard())
                .args(extra)
                .args(["--", "true"])
                .env("MEMORY_FILE_PATH", value)
                .env_remove("MCPGUARD_LOG"),
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run(&[]);
    assert!(
        err.contains("withheld from the server 1 variable(s)")
            && err.contains("MEMORY_FILE_PATH")
            && err.contains("--sandbox-env MEMORY_FILE_PATH"),
        "{err}"
    );
    assert!(!err.contains(value), "never the value: {err}");
    // Passed, it is not named.
    let err = run(&["--sandbox-env", "MEMORY_FILE_PATH"]);
    assert!(!err.contains("withheld from the server"), "{err}");
}

/// Issue 33: the runtime facts runtimes read (duckdb aborts without `/proc/self/cgroup`,
/// `/proc/stat` and `/sys/devices/system/cpu/online`) are readable by the server under the
/// default profile, while another process's `/proc` entries (the host's pid 1 and the test
/// itself) stay unreadable. `exec` keeps the shell's pid, so `/proc/self` is the server's own.
#[test]
fn the_runtime_facts_are_readable_and_other_processes_proc_entries_are_not() {
    let w = World::new();
    let facts = "/proc/self/cgroup /proc/self/status /proc/self/stat /proc/self/maps \
                 /proc/stat /proc/meminfo /proc/cpuinfo /sys/devices/system/cpu/online \
                 /sys/devices/system/cpu/possible";
    let script = format!("exec cat {facts} > /dev/null");
    let out = w.check(&w.sandboxed, &[], &["sh", "-c", &script]);
    assert!(
        out.status.success(),
        "the runtime facts were not readable in the sandbox:\n{}",
        show(&out)
    );
    for other in [
        "/proc/1/status".to_string(),
        format!("/proc/{}/status", std::process::id()),
        format!("/proc/{}/cmdline", std::process::id()),
    ] {
        let script = format!("exec cat {other}");
        let (sandboxed, off) = w.both(&["sh", "-c", &script]);
        assert!(
            !sandboxed.status.success() && text(&sandboxed.stderr).contains("Permission denied"),
            "{other} of another process was readable in the sandbox:\n{}",
            show(&sandboxed)
        );
        assert!(off.status.success(), "{}", show(&off));
    }
}

/// Issue 33: a server that opens an ungranted path and says nothing about it on stderr, then
/// fails, still gets the denial named at the default level, with the path and the flag that
/// grants it (the observer, `sandbox::observe`); the file stays unread. A server that handles
/// the same denial itself (it goes on and exits successfully, as one probing an optional file
/// does) gets it at the debug level only: no noise at the default level.
#[test]
fn a_silent_denial_is_named_at_the_default_level_with_its_path_and_flag() {
    let w = World::new();
    let canary = std::fs::canonicalize(w.home.join("canary.txt")).unwrap();
    let start = |exit: u8, log: Option<&str>| {
        let mut cmd = Command::new(mcpguard());
        cmd.arg("--policy")
            .arg(&w.sandboxed)
            .args(["--", "sh", "-c"])
            .arg(format!(
                "cat \"$HOME/canary.txt\" >/dev/null 2>&1; echo started >&2; read line; exit {exit}"
            ))
            .env("HOME", &w.home)
            .env_remove("MCPGUARD_LOG");
        if let Some(level) = log {
            cmd.env("MCPGUARD_LOG", level);
        }
        let mut p = Peer::start_with(&mut cmd);
        p.wait_stderr("started");
        p.close_stdin();
        let status = p.wait();
        std::thread::sleep(Duration::from_millis(200));
        (status, p.stderr())
    };
    let want = format!(
        "mcpguard: warning: sandbox denied open of {c} (read); allow it with --sandbox-read {c} or sandbox.read = [\"{c}\"]",
        c = canary.display()
    );
    // The server fails after the denial: named at the default level.
    let (status, stderr) = start(3, None);
    assert!(!status.success());
    assert!(stderr.contains(&want), "missing {want:?} in:\n{stderr}");
    assert!(!stderr.contains(CANARY), "{stderr}");
    assert_eq!(
        stderr.matches("sandbox denied open of").count(),
        stderr
            .matches(&format!("open of {} ", canary.display()))
            .count(),
        "only the ungranted path is named:\n{stderr}"
    );
    // The server goes on and succeeds: not at the default level, but at debug.
    let (status, stderr) = start(0, None);
    assert!(status.success(), "{stderr}");
    assert!(
        !stderr.contains("sandbox denied open of"),
        "a denial the server handled is noise at the default level:\n{stderr}"
    );
    let (_, stderr) = start(0, Some("debug"));
    assert!(
        stderr.contains(&format!(
            "sandbox denied open of {} (read)",
            canary.display()
        )),
        "at debug the handled denial is named:\n{stderr}"
    );
}

/// Issue 33: a server connecting to a local TCP listener is refused by default, and the
/// refusal is named at the default level with the address and `--sandbox-connect`; with
/// `--sandbox-connect 127.0.0.1:PORT` it connects, and another port is still refused.
#[test]
fn a_tcp_destination_is_refused_and_named_until_sandbox_connect_grants_it() {
    let w = World::new();
    let granted = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    granted.set_nonblocking(true).unwrap();
    other.set_nonblocking(true).unwrap();
    let port = granted.local_addr().unwrap().port().to_string();
    let other_port = other.local_addr().unwrap().port().to_string();
    // The probe says nothing on stderr: only mcpguard can name the refusal.
    // It fails when a connect was refused (a denial is named at the default level when the
    // server then fails).
    let script = "import socket,sys\nbad=0\nfor p in sys.argv[1:]:\n s=socket.socket()\n s.settimeout(5)\n try:\n  s.connect(('127.0.0.1', int(p)))\n  print('connected', p)\n except OSError:\n  print('refused', p); bad=1\nsys.exit(bad)\n";
    let probe = [python(), "-c", script, &port, &other_port];
    let out = w.check(&w.sandboxed, &[], &probe);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(
        stdout.contains(&format!("refused {port}")),
        "{}",
        show(&out)
    );
    assert!(granted.accept().is_err(), "the listener saw a connection");
    let want = format!(
        "sandbox denied connect to 127.0.0.1:{port} (TCP); allow it with --sandbox-connect 127.0.0.1:{port}"
    );
    assert!(stderr.contains(&want), "missing {want:?}:\n{}", show(&out));

    let flag = format!("127.0.0.1:{port}");
    let out = w.check(&w.sandboxed, &["--sandbox-connect", &flag], &probe);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("connected {port}")),
        "{}",
        show(&out)
    );
    assert!(
        granted.accept().is_ok(),
        "the granted listener saw no connection"
    );
    assert!(
        stdout.contains(&format!("refused {other_port}")),
        "{}",
        show(&out)
    );
    assert!(other.accept().is_err(), "another port was reached");
    assert!(
        text(&out.stderr).contains(&format!("sandbox denied connect to 127.0.0.1:{other_port}")),
        "{}",
        show(&out)
    );
    assert!(
        text(&out.stdout).contains("address and port enforced"),
        "the report says that the address is enforced:\n{}",
        show(&out)
    );
}

/// Issue 33: a real asynchronous client (python asyncio, whose connects are nonblocking and
/// finish with EINPROGRESS) works through the connects mcpguard makes for it: granted
/// `localhost:PORT`, it exchanges a line with a local echo listener, and the sandbox-check
/// report says the address is enforced.
#[test]
fn a_python_asyncio_client_reaches_a_granted_destination() {
    let w = World::new();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let echo = std::thread::spawn(move || {
        use std::io::{BufRead, BufReader, Write};
        let (s, _) = listener.accept().ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).ok()?;
        (&s).write_all(format!("echo {line}").as_bytes()).ok()?;
        Some(line)
    });
    let script = "import asyncio,sys\nasync def main():\n r,w=await asyncio.wait_for(asyncio.open_connection('localhost', int(sys.argv[1])), 10)\n w.write(b'ping-asyncio\\n'); await w.drain()\n print('got', (await asyncio.wait_for(r.readline(), 10)).decode().strip())\n w.close()\nasyncio.run(main())\n";
    let flag = format!("localhost:{port}");
    let out = w.check(
        &w.sandboxed,
        &["--sandbox-connect", &flag],
        &[python(), "-c", script, &port],
    );
    assert!(
        text(&out.stdout).contains("got echo ping-asyncio"),
        "{}",
        show(&out)
    );
    assert_eq!(echo.join().unwrap().as_deref(), Some("ping-asyncio\n"));
    assert!(
        text(&out.stdout).contains(&format!("localhost:{port} (address and port enforced")),
        "{}",
        show(&out)
    );
}

/// Issue 33: `sandbox.explain_denials = false` turns the observer of opens off — the same
/// silent read of an ungranted file is refused and not named — while the destinations of
/// `--sandbox-connect` stay enforced by address (another address on the granted port is
/// refused and named, the granted one connects). The default names the read (see
/// `a_silent_denial_is_named_at_the_default_level_with_its_path_and_flag`).
#[test]
fn explain_denials_false_names_no_open_and_still_enforces_destinations() {
    let w = World::new();
    let quiet = w.path("quiet.toml");
    std::fs::write(
        &quiet,
        "[sandbox]\nmode = \"require\"\nexplain_denials = false\n",
    )
    .unwrap();
    let granted = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = granted.local_addr().unwrap().port();
    let Ok(other) = TcpListener::bind(("127.0.0.2", port)) else {
        panic!("no listener at 127.0.0.2:{port}");
    };
    granted.set_nonblocking(true).unwrap();
    other.set_nonblocking(true).unwrap();
    let script = "import socket,sys,os\ntry:\n open(os.environ['HOME']+'/canary.txt').read(); print('read')\nexcept OSError:\n print('unreadable')\nfor h in ('127.0.0.2','127.0.0.1'):\n s=socket.socket(); s.settimeout(5)\n try:\n  s.connect((h, int(sys.argv[1]))); print('connected', h)\n except OSError:\n  print('refused', h)\nsys.exit(1)\n";
    let flag = format!("127.0.0.1:{port}");
    let run = |policy: &Path| {
        w.check(
            policy,
            &["--sandbox-connect", &flag],
            &[python(), "-c", script, &port.to_string()],
        )
    };
    let canary = std::fs::canonicalize(w.home.join("canary.txt")).unwrap();
    let named_read = format!("sandbox denied open of {}", canary.display());
    let out = run(&quiet);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(stdout.contains("unreadable"), "{}", show(&out));
    assert!(!stderr.contains(&named_read), "{}", show(&out));
    assert!(
        !stderr.contains("sandbox denied open of"),
        "no open is named with explain_denials = false:\n{}",
        show(&out)
    );
    assert!(stdout.contains("refused 127.0.0.2"), "{}", show(&out));
    assert!(other.accept().is_err(), "127.0.0.2 was reached");
    assert!(
        stderr.contains(&format!("sandbox denied connect to 127.0.0.2:{port} (TCP)")),
        "{}",
        show(&out)
    );
    assert!(stdout.contains("connected 127.0.0.1"), "{}", show(&out));
    assert!(granted.accept().is_ok(), "the granted listener saw nothing");
    // The default: the same read is named.
    let out = run(&w.sandboxed);
    assert!(text(&out.stderr).contains(&named_read), "{}", show(&out));
}

/// Issue 33: the observer resolves a path as the server sees it (under `/proc/PID/root`, in the
/// server's mount namespace), not in mcpguard's: a symlink the server made in its private
/// TMPDIR (a tmpfs only its namespace has) to an ungranted file is followed, and the denial
/// names the file it points at. Resolved in mcpguard's namespace, the link does not exist and
/// nothing was named.
#[test]
fn a_denial_through_a_link_in_the_private_tmpdir_names_its_target() {
    let w = World::new();
    let canary = std::fs::canonicalize(w.home.join("canary.txt")).unwrap();
    let out = w.check(
        &w.sandboxed,
        &[],
        &[
            "/bin/sh",
            "-c",
            "ln -s \"$HOME/canary.txt\" \"$TMPDIR/link\" && cat \"$TMPDIR/link\"; echo done; exit 1",
        ],
    );
    assert!(text(&out.stdout).contains("done"), "{}", show(&out));
    assert!(!text(&out.stdout).contains(CANARY), "{}", show(&out));
    let want = format!(
        "sandbox denied open of {c} (read); allow it with --sandbox-read {c}",
        c = canary.display()
    );
    assert!(
        text(&out.stderr).contains(&want),
        "missing {want:?}:\n{}",
        show(&out)
    );
}

/// Issue 33: `sandbox-check --learn -- CMD` runs CMD as an MCP server under the sandbox,
/// initializes it, lists its tools, makes the calls `--call` names, and prints the grants it
/// was refused as flags and as a policy: a server (the Python SDK's) that reads two files of a
/// folder outside its grants and connects to a local port is told `--sandbox-read FOLDER` and
/// `--sandbox-connect 127.0.0.1:PORT`; run again with those flags, the same calls are refused
/// nothing, and the file's text reaches the caller.
#[test]
fn sandbox_check_learn_prints_the_grants_a_server_needed() {
    let w = World::new();
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers/venv");
    let python = venv.join("bin/python");
    assert!(
        python.exists(),
        "{} is needed (scripts/install-peers.sh)",
        python.display()
    );
    let venv = std::fs::canonicalize(&venv).unwrap();
    let server_dir = w.path("server");
    std::fs::create_dir(&server_dir).unwrap();
    let server = server_dir.join("learnme.py");
    std::fs::write(
        &server,
        "import socket\nfrom mcp.server.mcpserver import MCPServer\nm = MCPServer('learnme')\n@m.tool()\ndef read_note(path: str) -> str:\n    try:\n        return open(path).read()\n    except OSError as e:\n        return f'error {e}'\n@m.tool()\ndef ping(port: int) -> str:\n    s = socket.socket(); s.settimeout(3)\n    try:\n        s.connect(('127.0.0.1', port)); return 'connected'\n    except OSError as e:\n        return f'error {e}'\nm.run()\n",
    )
    .unwrap();
    let data = w.path("data");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("a.md"), "note-a").unwrap();
    std::fs::write(data.join("b.md"), "note-b").unwrap();
    let data = std::fs::canonicalize(&data).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let venv_flag = venv.display().to_string();
    let a = json_arg("path", &data.join("a.md").display().to_string());
    let b = json_arg("path", &data.join("b.md").display().to_string());
    let ping = format!("{{\"port\": {port}}}");
    let learn = |extra: &[&str]| {
        let mut opts = vec!["--sandbox-read", &venv_flag];
        opts.extend_from_slice(extra);
        opts.extend([
            "--learn",
            "--call",
            "read_note",
            &a,
            "--call",
            "read_note",
            &b,
            "--call",
            "ping",
            &ping,
        ]);
        w.check(
            &w.sandboxed,
            &opts,
            &[python.to_str().unwrap(), server.to_str().unwrap()],
        )
    };
    let out = learn(&[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{}", show(&out));
    assert!(
        text(&out.stderr).contains("listed 2 tool(s)"),
        "{}",
        show(&out)
    );
    let read_flag = format!("  --sandbox-read {}\n", data.display());
    let connect_flag = format!("  --sandbox-connect 127.0.0.1:{port}\n");
    assert!(
        stdout.contains(&read_flag),
        "missing {read_flag:?}:\n{}",
        show(&out)
    );
    assert!(stdout.contains(&connect_flag), "{}", show(&out));
    assert!(
        stdout.contains(&format!("read = [\"{}\"]", data.display()))
            && stdout.contains(&format!("connect = [\"127.0.0.1:{port}\"]")),
        "{}",
        show(&out)
    );
    // With what it learned, the same run is refused nothing.
    let data_flag = data.display().to_string();
    let dest = format!("127.0.0.1:{port}");
    let out = learn(&["--sandbox-read", &data_flag, "--sandbox-connect", &dest]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        text(&out.stdout).contains("learn: the sandbox refused nothing"),
        "{}",
        show(&out)
    );
    listener.set_nonblocking(true).unwrap();
    assert!(
        listener.accept().is_ok(),
        "the granted port saw no connection"
    );
}

fn json_arg(key: &str, value: &str) -> String {
    serde_json::json!({ key: value }).to_string()
}

/// Issue 33 (run-time installers): a server that runs `npm install` when a call comes (as
/// mcp-server-fetch's readabilipy does) used to wait for the registry the sandbox does not let
/// it reach, for more than a minute, so the host's call hung to its timeout with nothing said.
/// The exec of the install is refused at once: the call's answer comes back within seconds as
/// an error, and mcpguard names what it refused, why, and the flag that grants the registry.
#[test]
fn a_run_time_install_fails_the_call_at_once_and_is_named() {
    let w = World::new();
    let npm = Command::new("sh")
        .args(["-c", "command -v npm"])
        .output()
        .unwrap();
    let npm = text(&npm.stdout).trim().to_string();
    assert!(!npm.is_empty(), "npm is needed (scripts/install-peers.sh)");
    let fixture = crate::support::fixture();
    let mut cmd = Command::new(mcpguard());
    cmd.arg("sandbox-check")
        .arg("--policy")
        .arg(&w.sandboxed)
        .arg("--")
        .arg(&fixture)
        .arg(format!("--run-on-call={npm} install left-pad"))
        .env("HOME", &w.home)
        .env_remove("MCPGUARD_LOG");
    let mut p = Peer::start_with(&mut cmd);
    p.send_json(
        &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hi"}}}),
    );
    let started = std::time::Instant::now();
    let bound = Duration::from_secs(30);
    let answer = loop {
        let left = bound.saturating_sub(started.elapsed());
        let Some(line) = p.recv_timeout(left) else {
            panic!(
                "no answer within {bound:?}: the install still waits for the registry\n{}",
                p.stderr()
            );
        };
        // sandbox-check prints its report on the same standard output first.
        if let Ok(v) = serde_json::from_slice::<Value>(&line) {
            if v["id"] == 1 {
                break v;
            }
        }
    };
    let stderr = p.wait_stderr("sandbox refused");
    assert_eq!(answer["result"]["isError"], true, "{answer}\n{stderr}");
    assert!(
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("Permission denied"),
        "{answer}"
    );
    assert!(
        stderr.contains("sandbox refused `npm install`, which the server started at run time")
            && stderr.contains("--sandbox-connect registry.npmjs.org:443"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("left-pad"),
        "packages are not shown: {stderr}"
    );
}

/// Starts `server` under the proxy with the default sandbox (no snapshot), keeps the host's end
/// open, and returns mcpguard's stderr once the server has failed.
fn failed_start(w: &World, server: &[&str]) -> String {
    let mut cmd = Command::new(mcpguard());
    cmd.arg("--policy")
        .arg(&w.sandboxed)
        .arg("--")
        .args(server)
        .current_dir(w.dir.path())
        .env("HOME", &w.home)
        .env_remove("MCPGUARD_LOG");
    let mut p = Peer::start_with(&mut cmd);
    let status = p.wait_timeout(Duration::from_secs(60));
    assert!(!status.success(), "{}", p.stderr());
    p.stderr()
}

/// Issue 33 (skipped install scripts): a node package whose compiled addon is missing (its
/// install script never ran: `npm --ignore-scripts`, as mcpguard's package store installs) used
/// to be explained as a grant the sandbox may have withheld. It is named as what it is, with
/// the fix, and no grant is suggested for it.
#[test]
fn a_missing_native_addon_is_named_not_blamed_on_the_sandbox() {
    let w = World::new();
    let stderr = failed_start(
        &w,
        &["node", "-e", "require('./build/Release/sqlite3.node')"],
    );
    assert!(
        stderr.contains("compiled addon missing")
            && stderr.contains("its install script (which builds or downloads it) never ran")
            && stderr.contains("--ignore-scripts")
            && stderr.contains("no grant fixes this"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("its stderr named no permission error"),
        "{stderr}"
    );
}

/// Issue 33 (launch shapes): an entry that still starts `uvx PKG` under the sandbox fails on
/// whatever uv reaches first (a file it cannot create, the network), and mcpguard used to
/// suggest a file grant only. It names the launch shape and both fixes: pinning, or starting
/// the server from the virtual environment it was installed in.
#[test]
fn an_entry_still_starting_uvx_is_told_its_launch_shape_and_the_fix() {
    let w = World::new();
    let uvx = Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers/uv/bin/uvx");
    assert!(
        uvx.exists(),
        "{} is needed (scripts/install-peers.sh)",
        uvx.display()
    );
    let stderr = failed_start(&w, &[uvx.to_str().unwrap(), "mcp-server-time"]);
    assert!(
        stderr.contains(
            "the server command starts `uvx`, which resolves the package from the registry"
        ) && stderr.contains("Pin it: `mcpguard capture` with this command")
            && stderr.contains("/path/to/venv/bin/python -m MODULE"),
        "{stderr}"
    );
}
