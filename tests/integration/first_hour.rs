//! The first hour of a new user (issue 33): a Claude Desktop configuration holding published
//! servers written the way their READMEs write them (`uvx NAME ARGS`, a data path in the
//! arguments or in `env`), then `mcpguard wrap --yes`, the capture and review commands wrap
//! prints, `wrap --pin`, and each entry started exactly as the host starts it (the command, the
//! arguments and the `env` of the wrapped file, with NO edit of the file) completes a read call
//! whose result equals the one of the same call made to the server started directly.
//!
//! The servers come from PyPI, pinned, through `scripts/peers-first-hour/install.sh` (called by
//! `scripts/install-peers.sh`), which fills a uv cache in `.peers/first-hour`; here uv works
//! offline from it, so the test needs no registry. The notes server is hand-written on the
//! Python SDK (tests/data/first_hour/notes_server.py) and keeps its notes in the folder its
//! `env` names.
//!
//! It is slow (every server is installed into mcpguard's package store at capture and checked at
//! every start), so it lives in a module of its own: `cargo test --test integration first_hour`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::reviews::{record_reviews, scripted_reviews};
use crate::support::{mcpguard, run_bounded, show, Peer};

/// How long one answer of a server may take: the first start of a Python server on a busy
/// machine imports its whole dependency tree, and mcpguard hashes the pinned install first.
const ANSWER: Duration = Duration::from_secs(90);

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers")
}

/// A new user: a HOME of their own, a uv that works offline from the filled cache (as if the
/// registry had been reached once), and mcpguard on PATH.
struct User {
    dir: tempfile::TempDir,
}

impl User {
    fn new() -> User {
        crate::sandbox::require_landlock();
        let cache = peers().join("first-hour/uv-cache");
        assert!(
            cache.is_dir(),
            "{} is missing: run scripts/install-peers.sh",
            cache.display()
        );
        let dir = tempfile::tempdir().unwrap();
        for d in ["home", "data", "data/notes", "data/workbooks"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        User { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The environment the host runs with: the user's, which the host passes on to the
    /// servers it starts.
    fn host(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let bin = mcpguard();
        let path = format!(
            "{}:{}:{}",
            bin.parent().unwrap().display(),
            peers().join("uv/bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("HOME", self.path("home"))
            .env("PATH", path)
            .env("LANG", "C.UTF-8")
            .env("MCPGUARD_PACKAGE_DIR", self.path("store"))
            .env("UV_CACHE_DIR", peers().join("first-hour/uv-cache"))
            .env("UV_OFFLINE", "1")
            .env("UV_NO_PROGRESS", "1")
            .env("UV_TOOL_DIR", self.path("home/uv-tools"));
        cmd
    }

    /// Starts one entry of a host configuration the way the host does: its command with its
    /// arguments, its `env` added to the host's environment.
    fn start_entry(&self, entry: &Value) -> Peer {
        let mut cmd = self.host(entry["command"].as_str().unwrap());
        for a in entry["args"].as_array().into_iter().flatten() {
            cmd.arg(a.as_str().unwrap());
        }
        for (k, v) in entry["env"].as_object().into_iter().flatten() {
            cmd.env(k, v.as_str().unwrap());
        }
        Peer::start_with(&mut cmd)
    }
}

/// Sends a request and waits for its answer, for up to [`ANSWER`].
fn request(peer: &mut Peer, id: i64, method: &str, params: Value) -> Value {
    peer.send_json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    let until = Instant::now() + ANSWER;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let Some(line) = peer.recv_timeout(left) else {
            panic!(
                "no answer to {method} within {ANSWER:?}; stderr:\n{}",
                peer.stderr()
            );
        };
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        if v.get("id") == Some(&json!(id)) && v.get("method").is_none() {
            return v;
        }
    }
}

/// Initializes a session and makes one `tools/call`, returning its whole answer.
fn call(peer: &mut Peer, tool: &str, arguments: Value) -> Value {
    let init = request(
        peer,
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "first-hour", "version": "0"}}),
    );
    assert!(
        init.get("result").is_some(),
        "initialize: {init}\n{}",
        peer.stderr()
    );
    peer.send_json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    request(
        peer,
        1,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

/// The text of a call's result, asserted to be a success.
fn ok_text(answer: &Value, peer: &Peer, what: &str) -> String {
    let result = answer
        .get("result")
        .unwrap_or_else(|| panic!("{what}: {answer}\n{}", peer.stderr()));
    assert_ne!(
        result["isError"],
        json!(true),
        "{what}: {answer}\n{}",
        peer.stderr()
    );
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

fn stop(mut peer: Peer) -> String {
    peer.close_stdin();
    peer.wait_timeout(Duration::from_secs(20));
    peer.stderr()
}

/// A page on 127.0.0.1 for the fetch server (`/robots.txt` is not found, which lets the fetch
/// go on). It answers at most `limit` requests, then stops on its own.
fn serve_page(limit: usize) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(900);
        let mut served = 0;
        while served < limit && Instant::now() < until {
            let Ok((mut s, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            served += 1;
            let _ = s.set_nonblocking(false);
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap_or(0);
            let head = String::from_utf8_lossy(&buf[..n]);
            let (status, body) = if head.starts_with("GET /page.html ") {
                (
                    "200 OK",
                    "<html><head><title>Tide table</title></head><body><h1>Tide table</h1>\
                     <p>High water at 06:12 and 18:40.</p></body></html>",
                )
            } else {
                ("404 Not Found", "not here")
            };
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// The read call each server gets, and the tool's name (reviewed as a read).
struct ReadCall {
    tool: &'static str,
    arguments: Value,
}

/// Makes each server's data with the server itself, started directly (as the user would have
/// made it before wrapping): a sqlite table, a workbook, a duckdb table, a note.
fn make_data(u: &User, config: &Value) {
    let servers = &config["mcpServers"];
    let mut sqlite = u.start_entry(&servers["sqlite"]);
    for (i, sql) in [
        "CREATE TABLE tides (place TEXT, high TEXT)",
        "INSERT INTO tides VALUES ('Brest', '06:12'), ('Cherbourg', '08:05')",
    ]
    .iter()
    .enumerate()
    {
        let tool = if i == 0 {
            "create_table"
        } else {
            "write_query"
        };
        let answer = if i == 0 {
            call(&mut sqlite, tool, json!({"query": sql}))
        } else {
            request(
                &mut sqlite,
                2,
                "tools/call",
                json!({"name": tool, "arguments": {"query": sql}}),
            )
        };
        ok_text(&answer, &sqlite, tool);
    }
    stop(sqlite);

    let book = u.path("data/workbooks/tides.xlsx");
    let mut excel = u.start_entry(&servers["excel"]);
    let book_s = book.display().to_string();
    let a = call(&mut excel, "create_workbook", json!({"path": book_s}));
    ok_text(&a, &excel, "create_workbook");
    let a = request(
        &mut excel,
        2,
        "tools/call",
        json!({"name": "write_range", "arguments": {"path": book_s, "sheet": "Sheet1",
            "rows": [["place", "high"], ["Brest", "06:12"]], "at": "A1"}}),
    );
    ok_text(&a, &excel, "write_range");
    stop(excel);

    // The README's read-write form, on the same file, once, to make the table.
    let mut rw = servers["duckdb"].clone();
    rw["args"]
        .as_array_mut()
        .unwrap()
        .push(json!("--read-write"));
    let mut duck = u.start_entry(&rw);
    let a = call(
        &mut duck,
        "execute_query",
        json!({"sql": "CREATE TABLE tides AS SELECT 'Brest' AS place, '06:12' AS high"}),
    );
    ok_text(&a, &duck, "duckdb create");
    stop(duck);

    std::fs::write(u.path("data/notes/tides.md"), "High water at 06:12.\n").unwrap();
}

/// The entries as their READMEs write them, with this user's data paths.
fn readme_config(u: &User, port: u16) -> (Value, BTreeMap<&'static str, ReadCall>) {
    let notes_server =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/first_hour/notes_server.py");
    let python = peers().join("venv/bin/python");
    let d = |p: &str| u.path(p).display().to_string();
    let config = json!({"mcpServers": {
        // The README's line runs mcp-server-sqlite on the newest `mcp`, 2.x, on which it fails
        // (`'Server' object has no attribute 'list_resources'`), so the user adds the SDK it
        // was written for, the way uv's documentation says: `--with`.
        "sqlite": {"command": "uvx", "args": ["--with", "mcp==1.30.0", "mcp-server-sqlite", "--db-path", d("data/tides.db")]},
        "excel": {"command": "uvx", "args": ["excel-mcp-server", "stdio", "--allow-dir", d("data/workbooks")]},
        "pandoc": {"command": "uvx", "args": ["mcp-pandoc"]},
        "duckdb": {"command": "uvx", "args": ["mcp-server-motherduck", "--db-path", d("data/tides.duckdb")]},
        // A page on this machine: the server's own option for loopback addresses.
        "fetch": {"command": "uvx", "args": ["mcp-server-fetch", "--allow-private-ips"]},
        "notes": {"command": python.display().to_string(), "args": [notes_server.display().to_string()],
                  "env": {"NOTES_DIR": d("data/notes")}},
    }});
    let mut reads = BTreeMap::new();
    reads.insert(
        "sqlite",
        ReadCall {
            tool: "read_query",
            arguments: json!({"query": "SELECT place, high FROM tides ORDER BY place"}),
        },
    );
    reads.insert(
        "excel",
        ReadCall {
            tool: "read_range",
            arguments: json!({"path": d("data/workbooks/tides.xlsx"), "sheet": "Sheet1"}),
        },
    );
    reads.insert(
        "pandoc",
        ReadCall {
            tool: "convert-contents",
            arguments: json!({"contents": "# Tides\n\nHigh water at *06:12*.", "input_format": "markdown",
                "output_format": "html"}),
        },
    );
    reads.insert(
        "duckdb",
        ReadCall {
            tool: "execute_query",
            arguments: json!({"sql": "SELECT place, high FROM tides"}),
        },
    );
    reads.insert(
        "fetch",
        ReadCall {
            tool: "fetch",
            // `raw`: the page as served. Simplified to markdown, the server runs readabilipy,
            // which runs `npm install` into its own package folder at the first call (a run-time
            // install, from the registry, which the sandbox rightly denies).
            arguments: json!({"url": format!("http://127.0.0.1:{port}/page.html"), "raw": true}),
        },
    );
    reads.insert(
        "notes",
        ReadCall {
            tool: "read_note",
            arguments: json!({"name": "tides.md"}),
        },
    );
    (config, reads)
}

/// Runs one command line exactly as `wrap` printed it, with the shell, from the user's host
/// environment (mcpguard is on PATH), with `env` set as the note of `wrap` asks.
fn run_printed(u: &User, line: &str, env: Option<&Value>) -> Output {
    let mut cmd = u.host("sh");
    cmd.args(["-c", line]);
    for (k, v) in env.and_then(Value::as_object).into_iter().flatten() {
        cmd.env(k, v.as_str().unwrap());
    }
    capture_bounded(&mut cmd)
}

/// How long one capture may take: it installs the package twice from uv's cache (duckdb's wheel
/// is large), hashes the install, and starts the server under the sandbox; on a busy machine
/// that takes longer than the other commands' bound.
const CAPTURE: Duration = Duration::from_secs(400);

/// Runs `cmd` to its end, killing it (and failing) after [`CAPTURE`]. `cmd` is a shell running
/// a printed line, so it starts a process group of its own and the timeout kills that whole
/// group: the shell, the mcpguard it started and the installers mcpguard runs outside the
/// sandbox (the sandboxed server dies with mcpguard, by its parent-death signal).
fn capture_bounded(cmd: &mut Command) -> Output {
    use std::os::unix::process::CommandExt;
    let what = format!("{cmd:?}");
    let child = cmd
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(CAPTURE) {
        Ok(out) => out.unwrap_or_else(|e| panic!("{what}: {e}")),
        Err(_) => {
            // SAFETY: kill has no memory preconditions. The child leads its own process group
            // (`process_group(0)`) and is not yet reaped, so -pid names only that group.
            unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
            panic!("{what} did not finish within {CAPTURE:?}");
        }
    }
}

/// The scripted review (`review --from`): every tool reviewed, the ones the test calls as
/// reads, every argument a data channel.
fn review(u: &User, snap: &Path, key: &str, reads: &[&str]) {
    let doc: Value = serde_json::from_slice(&std::fs::read(snap).unwrap()).unwrap();
    record_reviews(
        u.host(mcpguard()),
        snap,
        key,
        Some("new-user@example.com"),
        &scripted_reviews(&doc, key, reads),
        &u.path(&format!("{key}.reviews.json")),
    );
}

/// `wrap --pin` of the host configuration `config_file`, as the user runs it, asserted to succeed.
fn pin(u: &User, config_file: &Path) {
    let out = run_bounded(u.host(mcpguard()).arg("wrap").arg("--pin").arg(config_file));
    assert!(out.status.success(), "wrap --pin: {}", show(&out));
}

/// Reads the capture commands from what `wrap` printed, by server name: the line after
/// `mcpguard capture --server NAME`.
fn printed_captures(stderr: &str) -> BTreeMap<String, (String, PathBuf)> {
    let mut out = BTreeMap::new();
    for line in stderr.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("mcpguard capture --server ") else {
            continue;
        };
        let mut words = rest.split(' ');
        let name = words.next().unwrap().trim_matches('\'').to_string();
        assert_eq!(words.next(), Some("--out"), "{line}");
        let snap = PathBuf::from(words.next().unwrap().trim_matches('\''));
        out.insert(name, (line.to_string(), snap));
    }
    out
}

/// Issue 33's proof: every entry, as its README writes it, runs wrapped and sandboxed with no
/// edit of the configuration, and answers a read as the server answers it unwrapped.
#[test]
fn readme_entries_run_wrapped_with_no_hand_edit() {
    let u = User::new();
    // The fetch server fetches `/robots.txt` and then the page, once directly and once wrapped.
    let port = serve_page(16);
    let (config, reads) = readme_config(&u, port);
    make_data(&u, &config);

    // The direct (unwrapped) answers, from the entries as the README writes them.
    let mut direct = BTreeMap::new();
    for (name, read) in &reads {
        let mut peer = u.start_entry(&config["mcpServers"][*name]);
        let answer = call(&mut peer, read.tool, read.arguments.clone());
        let text = ok_text(&answer, &peer, &format!("direct {name}"));
        stop(peer);
        direct.insert(*name, (answer["result"].clone(), text));
    }
    for (name, answers) in [
        ("sqlite", "Cherbourg"),
        ("excel", "Brest"),
        ("duckdb", "Brest"),
        ("fetch", "High water"),
        ("notes", "06:12"),
        ("pandoc", "<em>06:12</em>"),
    ] {
        assert!(
            direct[name].1.contains(answers),
            "{name}: {:?}",
            direct[name]
        );
    }

    // The user's Claude Desktop configuration, and `wrap --yes`. The fetch server reaches the
    // page's port through a policy (`tcp_connect`) until `--sandbox-connect` exists.
    let config_file = u.path("home/.config/Claude/claude_desktop_config.json");
    std::fs::create_dir_all(config_file.parent().unwrap()).unwrap();
    std::fs::write(&config_file, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let policy = u.path("home/.config/mcpguard-net.toml");
    std::fs::write(
        &policy,
        format!("[sandbox]\ntcp_connect = [{port}]\nallow_udp = false\n"),
    )
    .unwrap();
    let out = run_bounded(
        u.host(mcpguard())
            .arg("wrap")
            .arg(&config_file)
            .arg("--yes")
            .arg("--policy")
            .arg(&policy),
    );
    assert!(out.status.success(), "wrap: {}", show(&out));
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    let captures = printed_captures(&said);
    assert_eq!(
        captures.keys().map(String::as_str).collect::<Vec<_>>(),
        reads.keys().copied().collect::<Vec<_>>(),
        "{said}"
    );

    // The capture and review it prints, run as printed (the notes server's `env` set, as the
    // note says), then `wrap --pin`.
    let mut failed = Vec::new();
    for (name, (line, snap)) in &captures {
        // mcp-pandoc depends on the `pandoc` PyPI package, which publishes no wheel: the
        // person allows exactly its source build (the refusal names this flag).
        let line = if name == "pandoc" {
            line.replacen(
                "mcpguard capture ",
                "mcpguard capture --build-from-source pandoc ",
                1,
            )
        } else {
            line.clone()
        };
        let out = run_printed(&u, &line, config["mcpServers"][name.as_str()].get("env"));
        if out.status.success() {
            review(&u, snap, name, &[reads[name.as_str()].tool]);
        } else {
            failed.push(format!("{line}: {}", show(&out)));
        }
    }
    assert!(failed.is_empty(), "captures failed:\n{}", failed.join("\n"));
    pin(&u, &config_file);
    let wrapped: Value = serde_json::from_slice(&std::fs::read(&config_file).unwrap()).unwrap();

    // Each entry started as the host starts it, from the wrapped file as it is.
    for (name, read) in &reads {
        let entry = &wrapped["mcpServers"][*name];
        let mut peer = u.start_entry(entry);
        let answer = call(&mut peer, read.tool, read.arguments.clone());
        let result = answer.get("result").cloned();
        let stderr = stop(peer);
        if result.as_ref() != Some(&direct[name].0) {
            failed.push(format!(
                "{name}: wrapped answer {answer}\n  direct result {}\n  mcpguard's stderr:\n{stderr}",
                direct[name].0
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));

    // The `--with` package is part of the pin: the entry edited to run sqlite with another SDK
    // release is refused before anything starts, naming both.
    let mut other = wrapped["mcpServers"]["sqlite"].clone();
    for a in other["args"].as_array_mut().unwrap() {
        if a == "mcp==1.30.0" {
            *a = json!("mcp==1.29.0");
        }
    }
    let mut peer = u.start_entry(&other);
    let status = peer.wait_timeout(Duration::from_secs(60));
    let stderr = peer.stderr();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("with --with mcp==1.29.0")
            && stderr.contains("pinned it with --with mcp==1.30.0"),
        "{stderr}"
    );
}

/// Given too little: the notes entry as wrap wrote it, less the grant of its notes folder (the
/// data path a person removes, or one wrap could not see). The read fails, and what mcpguard says
/// at its default level names the path that was denied and the exact flag that grants it.
#[test]
fn a_missing_grant_is_named_with_its_flag() {
    let u = User::new();
    let (config, reads) = readme_config(&u, 9);
    std::fs::write(u.path("data/notes/tides.md"), "High water at 06:12.\n").unwrap();
    let notes_dir = u.path("data/notes").display().to_string();
    let config = json!({"mcpServers": {"notes": config["mcpServers"]["notes"].clone()}});
    let config_file = u.path("home/.config/Claude/claude_desktop_config.json");
    std::fs::create_dir_all(config_file.parent().unwrap()).unwrap();
    std::fs::write(&config_file, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    let out = run_bounded(
        u.host(mcpguard())
            .arg("wrap")
            .arg(&config_file)
            .arg("--yes"),
    );
    assert!(out.status.success(), "wrap: {}", show(&out));
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        said.contains(&format!("--sandbox-write {notes_dir} (from env NOTES_DIR)")),
        "{said}"
    );
    let (line, snap) = &printed_captures(&said)["notes"];
    let out = run_printed(&u, line, config["mcpServers"]["notes"].get("env"));
    assert!(out.status.success(), "{line}: {}", show(&out));
    review(&u, snap, "notes", &["read_note"]);
    pin(&u, &config_file);
    let mut entry: Value = serde_json::from_slice::<Value>(&std::fs::read(&config_file).unwrap())
        .unwrap()["mcpServers"]["notes"]
        .clone();
    let args = entry["args"].as_array_mut().unwrap();
    let at = args
        .iter()
        .position(|a| a == "--sandbox-write")
        .expect("the grant wrap added");
    assert_eq!(args[at + 1], json!(notes_dir));
    args.drain(at..at + 2);

    let mut peer = u.start_entry(&entry);
    let read = &reads["notes"];
    let answer = call(&mut peer, read.tool, read.arguments.clone());
    let stderr = stop(peer);
    assert_eq!(
        answer["result"]["isError"],
        json!(true),
        "{answer}\n{stderr}"
    );
    let note = u.path("data/notes/tides.md").display().to_string();
    assert!(
        stderr.contains(&note) && stderr.contains("EACCES"),
        "the denied path is named: {stderr}"
    );
    assert!(
        stderr.contains(&format!("--sandbox-read {notes_dir}"))
            || stderr.contains(&format!("--sandbox-write {notes_dir}")),
        "the exact flag is named: {stderr}"
    );
}
