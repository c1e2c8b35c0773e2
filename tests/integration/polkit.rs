//! The trusted path of out-of-band approvals with the real components: a private system bus
//! (`dbus-daemon` with a system-bus configuration), Debian's `polkitd`, the shipped action file
//! (`packaging/polkit/io.github.mcpguard.policy`), a test user with a password, mcpguard run as
//! that user, and `mcpguard approvals approve` in a pseudo-terminal, where `pkttyagent` asks for
//! the password. The right password approves once (the server gets the write), a wrong one
//! approves nothing, a denial while the password prompt shows refuses the call and withdraws
//! the authentication, a raw approve on the socket with no agent to ask approves nothing, and a
//! standing approval exists only after the password. The rig (`support::polkit_rig`) runs in a
//! private mount namespace, so the machine's files are left untouched. Root is needed (mounts,
//! another uid); without it the test says so and returns.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::gate::{calls_received, guarded_argv, reviewed_snapshot};
use crate::support::{echo_as_write_policy_with, mcpguard, run_bounded, Peer};

const USER: &str = "mcpguard-pk";

/// The test user's uid, gid and password, made once per test process.
fn test_user() -> &'static (u32, u32, String) {
    static USER_INFO: OnceLock<(u32, u32, String)> = OnceLock::new();
    USER_INFO.get_or_init(|| {
        let exists = Command::new("id").arg(USER).output().unwrap();
        if !exists.status.success() {
            let made = Command::new("useradd")
                .args(["--no-create-home", "--shell", "/usr/sbin/nologin", USER])
                .output()
                .unwrap();
            assert!(
                made.status.success(),
                "useradd: {}",
                String::from_utf8_lossy(&made.stderr)
            );
        }
        let mut seed = [0u8; 12];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut seed))
            .unwrap();
        let password: String = seed.iter().map(|b| format!("{b:02x}")).collect();
        let mut chpasswd = Command::new("chpasswd")
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        chpasswd
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{USER}:{password}\n").as_bytes())
            .unwrap();
        assert!(chpasswd.wait().unwrap().success(), "chpasswd failed");
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").args([flag, USER]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        (id("-u"), id("-g"), password)
    })
}

/// The rig for a person's password: no rule, so polkitd asks the authentication agent.
struct Rig(crate::support::polkit_rig::Rig);

impl Rig {
    /// `None` (said on stderr) when not root: mounts and another uid need it.
    fn start() -> Option<Rig> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: the polkit rig needs root (mount namespace, a test user)");
            return None;
        }
        Some(Rig(crate::support::polkit_rig::Rig::start(None, false)))
    }

    fn holder_pid(&self) -> u32 {
        self.0.holder.id()
    }

    /// `argv` in the rig's mount namespace as the test user, with `runtime` as its
    /// `XDG_RUNTIME_DIR`.
    fn as_user(&self, runtime: &Path, argv: &[&str]) -> Command {
        let (uid, gid, _) = test_user();
        let (uid, gid) = (uid.to_string(), gid.to_string());
        let mut all = vec![
            "setpriv",
            "--reuid",
            &uid,
            "--regid",
            &gid,
            "--clear-groups",
            "--",
        ];
        all.extend_from_slice(argv);
        let mut cmd = self.0.inside(&all);
        cmd.env("XDG_RUNTIME_DIR", runtime).env("HOME", "/");
        cmd
    }

    /// A directory owned by the test user, 0700 (its runtime directory and the server's log).
    fn user_dir(&self, name: &str) -> PathBuf {
        let (uid, gid, _) = test_user();
        let d = self.0.dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        std::os::unix::fs::chown(&d, Some(*uid), Some(*gid)).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    }
}

fn approvals_list(rig: &Rig, runtime: &Path) -> Vec<Value> {
    let out = run_bounded(&mut rig.as_user(
        runtime,
        &[mcpguard().to_str().unwrap(), "approvals", "list", "--json"],
    ));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    doc["pending"].as_array().cloned().unwrap_or_default()
}

fn wait_pending(rig: &Rig, runtime: &Path) -> String {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(id) = approvals_list(rig, runtime)
            .first()
            .and_then(|i| i["id"].as_str())
        {
            return id.to_string();
        }
        assert!(Instant::now() < until, "nothing pending");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `mcpguard approvals approve ID` as the test user in a pseudo-terminal, up to its password
/// prompt (pkttyagent's).
fn approve_at_terminal(rig: &Rig, runtime: &Path, id: &str) -> mcpguard::cli::pty::Session {
    approve_at_terminal_with(rig, runtime, &[id])
}

/// `mcpguard approvals approve ARGS...` (an id, and perhaps a scope), as above.
fn approve_at_terminal_with(
    rig: &Rig,
    runtime: &Path,
    approve_args: &[&str],
) -> mcpguard::cli::pty::Session {
    let (uid, gid, _) = test_user();
    let holder = rig.holder_pid().to_string();
    let (uid, gid) = (uid.to_string(), gid.to_string());
    let program = mcpguard();
    let mut args: Vec<&str> = vec![
        "-t",
        &holder,
        "-m",
        "--",
        "setpriv",
        "--reuid",
        &uid,
        "--regid",
        &gid,
        "--clear-groups",
        "--",
        // The terminal becomes the controlling one, as a person's terminal is (pkttyagent
        // opens /dev/tty).
        "setsid",
        "--wait",
        "--ctty",
        program.to_str().unwrap(),
        "approvals",
        "approve",
    ];
    args.extend_from_slice(approve_args);
    let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
    let mut t = mcpguard::cli::pty::Session::spawn(
        Path::new("/usr/bin/nsenter"),
        &args,
        &[
            ("XDG_RUNTIME_DIR", runtime.to_str().unwrap()),
            ("HOME", "/"),
            (
                "DBUS_SYSTEM_BUS_ADDRESS",
                "unix:path=/run/dbus/system_bus_socket",
            ),
        ],
    )
    .unwrap();
    t.expect("Password:", Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("no password prompt: {e}\n{}", t.screen()));
    // pkttyagent discards what was typed before it turned echo off; let it get there.
    std::thread::sleep(Duration::from_millis(500));
    t
}

fn write_call(p: &mut Peer, id: i64, body: &str) {
    p.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "write_note", "arguments": {"path": "/notes/a", "body": body}}}));
}

fn finished(t: mcpguard::cli::pty::Session) -> (Output, String) {
    let (status, stdout, screen) = t
        .wait_with_screen(Duration::from_secs(30))
        .expect("approve ends");
    (
        Output {
            status,
            stdout: stdout.clone().into_bytes(),
            stderr: screen.clone().into_bytes(),
        },
        format!("{stdout}\n{screen}"),
    )
}

#[test]
fn the_persons_password_approves_once_and_nothing_else_does() {
    let Some(rig) = Rig::start() else { return };
    let (_, _, password) = test_user();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let runtime = rig.user_dir("runtime");
    let logs = rig.user_dir("logs");
    let log = logs.join("server.log");
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    let policy = dir.path().join("policy.toml");
    // `echo` is made a write (its only argument is data), so that it may get a standing
    // approval; `write_note`'s path is an authority, so it is approved once at a time.
    std::fs::write(
        &policy,
        echo_as_write_policy_with(
            "[confirmation]\nallow_identical = true\nidentical_for = \"5m\"\n",
        ),
    )
    .unwrap();
    let argv = guarded_argv(
        &snap,
        &digest,
        &["--policy".into(), policy.display().to_string()],
        &["--log".into(), log.display().to_string()],
    );
    let mut all = vec![mcpguard().display().to_string()];
    all.extend(argv);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let mut p = Peer::start_with(&mut rig.as_user(&runtime, &all));
    p.initialize();

    // 1. A program of the user, without a terminal, asks on the socket (raw JSON, with a
    //    standing scope): polkit runs, but no agent is there for a person to answer, and
    //    nothing is approved.
    write_call(&mut p, 1, "hello");
    let id = wait_pending(&rig, &runtime);
    let sock = runtime.join("mcpguard").join(format!("{}.sock", p.pid()));
    let raw = "import socket,sys,json,time\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\ns.sendall((json.dumps({'op':'answer','id':sys.argv[2],'approve':True,'scope':'tool'})+'\\n').encode())\nprint(s.makefile().readline().strip())\nfor _ in range(100):\n time.sleep(0.1)\n s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall((json.dumps({'op':'status','id':sys.argv[2]})+'\\n').encode())\n st=json.loads(s.makefile().readline())\n if not st['authenticating']:\n  print(json.dumps(st)); break\n";
    let out = run_bounded(&mut rig.as_user(
        &runtime,
        &["/usr/bin/python3", "-c", raw, sock.to_str().unwrap(), &id],
    ));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.starts_with("{\"ok\":false"), "{said}");
    assert!(
        said.contains("no authentication agent"),
        "polkit found nobody to ask: {said}\n{}",
        p.stderr()
    );
    assert!(calls_received(&log).is_empty());
    assert_eq!(approvals_list(&rig, &runtime).len(), 1, "still pending");

    // 2. A wrong password approves nothing; the call stays pending.
    let mut t = approve_at_terminal(&rig, &runtime, &id);
    t.send_line("not-the-password").unwrap();
    let (out, shown) = finished(t);
    assert!(!out.status.success(), "{shown}");
    assert!(shown.contains("not approved"), "{shown}");
    assert!(calls_received(&log).is_empty());
    assert_eq!(approvals_list(&rig, &runtime).len(), 1, "still pending");

    // 3. Denied while the password prompt shows: the call is refused, and the authentication
    //    is withdrawn (the approve command ends without an approval).
    let t = approve_at_terminal(&rig, &runtime, &id);
    let denied = run_bounded(&mut rig.as_user(
        &runtime,
        &[mcpguard().to_str().unwrap(), "approvals", "deny", &id],
    ));
    assert!(
        denied.status.success(),
        "{}",
        String::from_utf8_lossy(&denied.stderr)
    );
    let (r, _) = p.recv_response(&json!(1));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"], "consent_required",
        "{r}"
    );
    let (out, shown) = finished(t);
    assert!(!out.status.success(), "{shown}");
    assert!(calls_received(&log).is_empty());

    // 4. The right password approves this call, once: the server gets it.
    write_call(&mut p, 2, "world");
    let id = wait_pending(&rig, &runtime);
    let mut t = approve_at_terminal(&rig, &runtime, &id);
    t.send_line(password).unwrap();
    let (out, shown) = finished(t);
    assert!(out.status.success(), "{shown}\n{}", p.stderr());
    assert!(shown.contains(&format!("approved {id}")), "{shown}");
    let (r, _) = p.recv_response(&json!(2));
    assert!(r.to_string().contains("wrote 5 bytes"), "{r}");
    assert_eq!(calls_received(&log), vec!["write_note"]);
    // Single use: the same id finds nothing.
    let again = run_bounded(&mut rig.as_user(
        &runtime,
        &[
            "/usr/bin/script",
            "-qc",
            &format!("{} approvals approve {id}", mcpguard().display()),
            "/dev/null",
        ],
    ));
    let again_said = String::from_utf8_lossy(&again.stdout);
    assert!(again_said.contains("not pending"), "{again_said}");
    assert_eq!(calls_received(&log), vec!["write_note"]);

    // 5. A standing approval, given with the password: identical calls pass unasked, another
    //    argument is asked about again.
    let echo = |p: &mut Peer, id: i64, text: &str| {
        p.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"text": text}}}));
    };
    echo(&mut p, 3, "same");
    let id = wait_pending(&rig, &runtime);
    let mut t = approve_at_terminal_with(&rig, &runtime, &[&id, "--scope", "identical"]);
    t.send_line(password).unwrap();
    let (out, shown) = finished(t);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("identical calls for 300 s"), "{shown}");
    let (r, _) = p.recv_response(&json!(3));
    assert_eq!(r["result"]["structuredContent"]["text"], "same", "{r}");
    echo(&mut p, 4, "same");
    let (r, _) = p.recv_response(&json!(4));
    assert_eq!(r["result"]["structuredContent"]["text"], "same", "{r}");
    echo(&mut p, 5, "different");
    let id = wait_pending(&rig, &runtime);
    let denied = run_bounded(&mut rig.as_user(
        &runtime,
        &[mcpguard().to_str().unwrap(), "approvals", "deny", &id],
    ));
    assert!(denied.status.success());
    let (r, _) = p.recv_response(&json!(5));
    assert_eq!(
        r["result"]["_meta"]["dev.mcpguard/refusal"]["code"], "consent_required",
        "{r}"
    );
    assert_eq!(calls_received(&log), vec!["write_note", "echo", "echo"]);
    p.close_stdin();
    p.wait();
}
