//! `mcpguard wrap` on real configuration files of each host format: what it rewrites, what it
//! keeps, what it refuses, and that a wrapped entry, run the way the host runs it, fails closed
//! until its snapshot is reviewed and pinned and then guards the server.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::gate::{reviewed_snapshot, tool_names};
use crate::support::{fixture, mcpguard, reads_policy_with, run_bounded, Peer};

fn wrap(config: &Path, extra: &[&str]) -> Output {
    run_bounded(Command::new(mcpguard()).arg("wrap").arg(config).args(extra))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn read_json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn backups(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().contains(".bak-"))
        .collect();
    found.sort();
    found
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The argument vector a wrapped entry must have, with `opts` (sandbox options) before `--`.
fn wrapped_args(snap_dir: &Path, name: &str, opts: &[&str], server: &[&str]) -> Vec<String> {
    let mut want = vec![
        "--manifest".to_string(),
        snap_dir
            .join(format!("{name}.snapshot.json"))
            .display()
            .to_string(),
        "--sha256".into(),
        "PENDING-REVIEW".into(),
        "--server".into(),
        name.into(),
    ];
    want.extend(opts.iter().map(|s| s.to_string()));
    want.push("--".into());
    want.extend(server.iter().map(|s| s.to_string()));
    want
}

#[test]
fn each_host_format_is_wrapped_keeping_everything_else() {
    let cases = [
        (
            "claude_desktop_config.json",
            json!({"globalShortcut": "Ctrl+Space",
                   "mcpServers": {
                       "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/n"], "env": {"K": "v"}},
                       "remote": {"url": "https://example.test/mcp"}},
                   "zLast": true}),
            "/mcpServers",
        ),
        (
            "mcp.json",
            json!({"inputs": [{"type": "promptString", "id": "key"}],
                   "servers": {
                       "files": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/n"], "env": {"K": "v"}},
                       "remote": {"type": "http", "url": "https://example.test/mcp"}}}),
            "/servers",
        ),
        (
            "settings.json",
            json!({"editor.fontSize": 13,
                   "mcp": {"servers": {
                       "files": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/n"], "env": {"K": "v"}},
                       "remote": {"type": "sse", "url": "https://example.test/sse"}}},
                   "workbench.colorTheme": "Default Dark"}),
            "/mcp/servers",
        ),
    ];
    for (file, doc, at) in cases {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(file);
        let original = serde_json::to_string_pretty(&doc).unwrap() + "\n";
        std::fs::write(&config, &original).unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
        let snaps = dir.path().join("snaps");
        let out = wrap(&config, &["--snapshot-dir", snaps.to_str().unwrap()]);
        assert!(out.status.success(), "{file}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("left alone: \"remote\""),
            "{file}: {}",
            stderr(&out)
        );

        let new = read_json(&config);
        let files = new.pointer(&format!("{at}/files")).unwrap();
        assert_eq!(files["command"], mcpguard().display().to_string(), "{file}");
        assert_eq!(
            strings(&files["args"]),
            wrapped_args(
                &snaps,
                "files",
                &["--sandbox-env", "K"],
                &["npx", "-y", "@modelcontextprotocol/server-filesystem", "/n"]
            ),
            "{file}"
        );
        assert_eq!(files["env"], json!({"K": "v"}), "{file}: env is kept");
        assert!(
            stderr(&out).contains("sets environment variables (K): passed to the server by name"),
            "{file}: the variables the host sets are passed by name: {}",
            stderr(&out)
        );
        // Everything that is not a local server's command line is as it was, in the same order.
        let mut expected = doc.clone();
        let entry = expected.pointer_mut(&format!("{at}/files")).unwrap();
        entry["command"] = files["command"].clone();
        entry["args"] = files["args"].clone();
        assert_eq!(
            serde_json::to_string(&new).unwrap(),
            serde_json::to_string(&expected).unwrap(),
            "{file}: other keys and their order are kept"
        );
        assert!(snaps.is_dir(), "{file}: the snapshot directory is created");

        let saved = backups(dir.path());
        assert_eq!(saved.len(), 1, "{file}: one backup");
        assert_eq!(std::fs::read_to_string(&saved[0]).unwrap(), original);
        for p in [&config, &saved[0]] {
            let mode = std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}: the original's permissions", p.display());
        }
    }
}

#[test]
fn wrapping_twice_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("claude_desktop_config.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}})
            .to_string(),
    )
    .unwrap();
    let snaps = dir.path().join("snaps");
    let args = ["--snapshot-dir", snaps.to_str().unwrap()];
    assert!(wrap(&config, &args).status.success());
    let once = std::fs::read(&config).unwrap();
    let out = wrap(&config, &args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("already wrapped: \"time\""),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("nothing to change"),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read(&config).unwrap(), once);
    assert_eq!(
        backups(dir.path()).len(),
        1,
        "no backup when nothing changes"
    );
}

#[test]
fn a_dry_run_prints_the_diff_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    let original = "{\n  \"servers\": {\n    \"time\": {\n      \"type\": \"stdio\",\n      \"command\": \"uvx\",\n      \"args\": [\"mcp-server-time\"]\n    }\n  }\n}\n";
    std::fs::write(&config, original).unwrap();
    let snaps = dir.path().join("snaps");
    let out = wrap(
        &config,
        &["--dry-run", "--snapshot-dir", snaps.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let diff = String::from_utf8(out.stdout).unwrap();
    assert!(
        diff.starts_with(&format!("--- {}\n+++ ", config.display())),
        "{diff}"
    );
    assert!(diff.contains("\n-      \"command\": \"uvx\",\n"), "{diff}");
    assert!(
        diff.contains(&format!(
            "\n+      \"command\": \"{}\",\n",
            mcpguard().display()
        )),
        "{diff}"
    );
    assert!(diff.contains("\n+        \"PENDING-REVIEW\",\n"), "{diff}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), original);
    assert!(backups(dir.path()).is_empty());
    assert!(!snaps.exists(), "a dry run creates nothing");
}

#[test]
fn a_file_it_does_not_understand_is_refused_whole() {
    let cases = [
        ("{\"editor.fontSize\": 13}", "no `mcpServers`"),
        ("[1, 2]", "not a JSON object"),
        ("{\"mcpServers\": {}, \"servers\": {}}", "more than one servers object"),
        ("{\"mcpServers\": []}", "is not an object"),
        // Comments and trailing commas are JSONC, which VS Code and Zed read; JSON5's other
        // extensions are read by no host wrap knows.
        ("{\n  // my servers\n  \"servers\": {'a': {}}\n}", "is not JSON"),
        ("{\"mcpServers\": {\"a\": {\"command\": \"x\"}, \"a\": {\"command\": \"y\"}}}", "\"a\" appears twice in /mcpServers"),
        (
            "{\"mcpServers\": {\"ok\": {\"command\": \"x\"}, \"odd\": {\"type\": \"pipe\", \"command\": \"y\"}}}",
            "type \"pipe\"",
        ),
        ("{\"mcpServers\": {\"ok\": {\"command\": \"x\"}, \"odd\": {\"command\": \"y\", \"args\": [1]}}}", "`args`"),
        ("{\"mcpServers\": {\"odd\": {\"env\": {}}}}", "neither `command` nor `url`"),
    ];
    for (text, why) in cases {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config.json");
        std::fs::write(&config, text).unwrap();
        let out = wrap(&config, &["--snapshot-dir", dir.path().to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(stderr(&out).contains(why), "{text}: {}", stderr(&out));
        assert_eq!(std::fs::read_to_string(&config).unwrap(), text, "untouched");
        assert!(backups(dir.path()).is_empty(), "{text}: no backup");
    }
}

#[test]
fn an_earlier_backup_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("c.json");
    let snaps = dir.path().join("snaps");
    let args = ["--snapshot-dir", snaps.to_str().unwrap()];
    let first = json!({"mcpServers": {"a": {"command": "x"}}}).to_string();
    let second = json!({"mcpServers": {"b": {"command": "y"}}}).to_string();
    std::fs::write(&config, &first).unwrap();
    assert!(wrap(&config, &args).status.success());
    // Within the same second the backup name is taken; wrap must pick another one.
    std::fs::write(&config, &second).unwrap();
    assert!(wrap(&config, &args).status.success());
    let saved = backups(dir.path());
    assert_eq!(saved.len(), 2, "{saved:?}");
    let contents: Vec<String> = saved
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(
        contents.contains(&first) && contents.contains(&second),
        "{contents:?}"
    );
}

#[test]
fn a_wrapped_entry_fails_closed_until_pinned_then_guards_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("claude_desktop_config.json");
    let log = dir.path().join("server.log");
    std::fs::write(
        &config,
        json!({"mcpServers": {"fixture": {"command": fixture().display().to_string(),
                                          "args": ["--log", log.display().to_string()]}}})
        .to_string(),
    )
    .unwrap();
    // The policy every wrapped server starts with: the fixture's tools are reads, and the
    // sandbox lets the fixture write its log (the lists a policy names replace the defaults).
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        reads_policy_with(&format!(
            "[sandbox]\nread_write = [\"$TMPDIR\", \"/dev/null\", {:?}]\n",
            dir.path().display().to_string()
        )),
    )
    .unwrap();
    let out = wrap(
        &config,
        &[
            "--snapshot-dir",
            dir.path().to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let entry = |config: &Path| {
        let doc = read_json(config);
        let e = &doc["mcpServers"]["fixture"];
        let args: Vec<String> = strings(&e["args"]).iter().map(|s| s.to_string()).collect();
        (e["command"].as_str().unwrap().to_string(), args)
    };

    // Run the entry the way the host does: before a snapshot is pinned it refuses to start, says
    // how to capture, review and pin, and the server never runs.
    let (command, args) = entry(&config);
    let out = run_bounded(Command::new(&command).args(&args));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("no reviewed snapshot is pinned for server \"fixture\""),
        "{err}"
    );
    assert!(
        err.contains("mcpguard capture --server fixture --out "),
        "{err}"
    );
    assert!(err.contains("mcpguard wrap --pin"), "{err}");
    assert!(!log.exists(), "the server was started");

    // `--pin` before the snapshot exists changes nothing and says why.
    let out = wrap(&config, &["--pin"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("does not exist yet"),
        "{}",
        stderr(&out)
    );

    // Capture and review (the snapshot path wrap chose is <dir>/fixture.snapshot.json), then pin.
    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    assert_eq!(args[1], snap.display().to_string());
    let out = wrap(&config, &["--pin"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("pinned: \"fixture\" {digest}")),
        "{}",
        stderr(&out)
    );
    let (command, args) = entry(&config);
    assert_eq!(args[3], digest);
    let out = wrap(&config, &["--pin"]);
    assert!(stderr(&out).contains("already pinned"), "{}", stderr(&out));

    // Now the entry guards the server: reviewed tools are served and called.
    let mut p = Peer::start(&command, &args);
    let init = p.initialize();
    assert_eq!(
        init["result"]["serverInfo"]["name"], "mcpguard-fixture",
        "{init}"
    );
    let list = p.request(1, "tools/list", json!({}));
    assert!(tool_names(&list).contains(&"echo"), "{list}");
    let r = p.request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(r["result"]["structuredContent"]["text"], "hi", "{r}");
    p.close_stdin();
    assert!(p.wait().success());
}

#[test]
fn grants_for_one_entry_go_into_its_command_and_the_capture_command_printed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("claude_desktop_config.json");
    let doc = json!({"mcpServers": {
        "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory@2026.8.31"],
                   "env": {"MEMORY_FILE_PATH": "/secret/value/memory.jsonl"}},
        "time": {"command": "uvx", "args": ["mcp-server-time"]}}});
    std::fs::write(&config, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let snaps = dir.path().join("snaps");
    let data = dir.path().join("data");
    // Two local servers: grants without naming one are refused, and nothing changes.
    let out = wrap(
        &config,
        &[
            "--snapshot-dir",
            snaps.to_str().unwrap(),
            "--sandbox-write",
            data.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--entry NAME (local servers: memory, time)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(read_json(&config), doc);
    let out = wrap(
        &config,
        &[
            "--snapshot-dir",
            snaps.to_str().unwrap(),
            "--entry",
            "memory",
            "--sandbox-write",
            data.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let new = read_json(&config);
    let server = ["npx", "-y", "@modelcontextprotocol/server-memory@2026.8.31"];
    assert_eq!(
        strings(&new["mcpServers"]["memory"]["args"]),
        wrapped_args(
            &snaps,
            "memory",
            &[
                "--sandbox-write",
                data.to_str().unwrap(),
                "--sandbox-env",
                "MEMORY_FILE_PATH"
            ],
            &server
        )
    );
    assert_eq!(
        strings(&new["mcpServers"]["time"]["args"]),
        wrapped_args(&snaps, "time", &[], &["uvx", "mcp-server-time"]),
        "the other server gets no grant"
    );
    let said = stderr(&out);
    let capture = format!(
        "mcpguard capture --server memory --out {} --sandbox-write {} --sandbox-env MEMORY_FILE_PATH -- npx -y @modelcontextprotocol/server-memory@2026.8.31",
        snaps.join("memory.snapshot.json").display(),
        data.display()
    );
    assert!(
        said.contains(&capture),
        "the printed capture command is not complete:\n{said}"
    );
    assert!(
        !said.contains("/secret/value"),
        "a variable's value was printed:\n{said}"
    );
}

/// Codex keeps its servers in `config.toml` (`[mcp_servers.NAME]`): wrapped like the JSON
/// formats, with every comment, key and table of the file kept, the entry's `env` passed by
/// name, a remote server left alone; then `--pin` records the digest, and the wrapped entry, run
/// the way Codex runs it, guards the server.
#[test]
fn codex_config_toml_is_wrapped_keeping_its_layout_then_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let log = dir.path().join("server.log");
    let original = format!(
        "# Codex settings\nmodel = \"gpt-5\"\napproval_policy = \"on-request\"\n\n\
         [mcp_servers.fixture]\n# the local test server\ncommand = {:?}\nargs = [\"--log\", {:?}]\n\
         env = {{ FIXTURE_MODE = \"plain\" }}\nstartup_timeout_sec = 20\n\n\
         [mcp_servers.docs]\nurl = \"https://example.test/mcp\"\n\n[profiles.fast]\nmodel = \"gpt-5-mini\"\n",
        fixture().display().to_string(),
        log.display().to_string()
    );
    std::fs::write(&config, &original).unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        reads_policy_with(&format!(
            "[sandbox]\nread_write = [\"$TMPDIR\", \"/dev/null\", {:?}]\n",
            dir.path().display().to_string()
        )),
    )
    .unwrap();
    let out = wrap(
        &config,
        &[
            "--snapshot-dir",
            dir.path().to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("left alone: \"docs\""),
        "{}",
        stderr(&out)
    );
    let text = std::fs::read_to_string(&config).unwrap();
    for kept in [
        "# Codex settings",
        "approval_policy = \"on-request\"",
        "# the local test server",
        "startup_timeout_sec = 20",
        "[mcp_servers.docs]\nurl = \"https://example.test/mcp\"",
        "[profiles.fast]",
        "env = { FIXTURE_MODE = \"plain\" }",
    ] {
        assert!(text.contains(kept), "lost {kept:?}:\n{text}");
    }
    let doc: toml::Table = toml::from_str(&text).unwrap();
    let entry = |doc: &toml::Table| {
        let e = &doc["mcp_servers"]["fixture"];
        let args: Vec<String> = e["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        (e["command"].as_str().unwrap().to_string(), args)
    };
    let (command, args) = entry(&doc);
    assert_eq!(command, mcpguard().display().to_string());
    let snap_s = dir
        .path()
        .join("fixture.snapshot.json")
        .display()
        .to_string();
    let fixture_s = fixture().display().to_string();
    let log_s = log.display().to_string();
    let want: Vec<&str> = vec![
        "--manifest",
        &snap_s,
        "--sha256",
        "PENDING-REVIEW",
        "--server",
        "fixture",
        "--policy",
        policy.to_str().unwrap(),
        "--sandbox-env",
        "FIXTURE_MODE",
        "--",
        &fixture_s,
        "--log",
        &log_s,
    ];
    assert_eq!(args, want);
    assert_eq!(backups(dir.path()).len(), 1);

    let (snap, digest) = reviewed_snapshot(dir.path(), &[]);
    assert_eq!(snap.display().to_string(), snap_s);
    let out = wrap(&config, &["--pin"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: toml::Table = toml::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let (command, args) = entry(&doc);
    assert_eq!(args[3], digest);
    let mut p = Peer::start_with(
        Command::new(&command)
            .args(&args)
            .env("FIXTURE_MODE", "plain"),
    );
    let r = p.request(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "codex-like", "version": "0"}}),
    );
    assert_eq!(r["result"]["serverInfo"]["name"], "mcpguard-fixture", "{r}");
    p.close_stdin();
    assert!(p.wait().success());
}

/// Gemini CLI's `settings.json` (`mcpServers`, remote servers under `httpUrl`) and Claude Code's
/// `~/.claude.json` (user-scope `mcpServers`, and per-project servers that wrap names but leaves).
#[test]
fn gemini_and_claude_code_configurations_are_wrapped() {
    let dir = tempfile::tempdir().unwrap();
    let gemini = dir.path().join("settings.json");
    std::fs::write(
        &gemini,
        serde_json::to_string_pretty(&json!({
            "theme": "Default",
            "mcpServers": {
                "time": {"command": "uvx", "args": ["mcp-server-time"], "timeout": 30000, "trust": false},
                "remote": {"httpUrl": "https://example.test/mcp"}}}))
        .unwrap(),
    )
    .unwrap();
    let snaps = dir.path().join("snaps");
    let out = wrap(&gemini, &["--snapshot-dir", snaps.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("left alone: \"remote\" is a remote server (https://example.test/mcp)"),
        "{}",
        stderr(&out)
    );
    let doc = read_json(&gemini);
    assert_eq!(
        strings(&doc["mcpServers"]["time"]["args"]),
        wrapped_args(&snaps, "time", &[], &["uvx", "mcp-server-time"])
    );
    assert_eq!(doc["mcpServers"]["time"]["timeout"], 30000);

    let claude = dir.path().join(".claude.json");
    std::fs::write(
        &claude,
        serde_json::to_string_pretty(&json!({
            "numStartups": 3,
            "mcpServers": {"memory": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {}}},
            "projects": {"/home/you/app": {"allowedTools": [], "mcpServers": {
                "git": {"type": "stdio", "command": "uvx", "args": ["mcp-server-git"]}}}}}))
        .unwrap(),
    )
    .unwrap();
    let out = wrap(&claude, &["--snapshot-dir", snaps.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(
            "left alone: 1 local-scope server(s) of Claude Code project \"/home/you/app\""
        ) && stderr(&out).contains("git"),
        "{}",
        stderr(&out)
    );
    let doc = read_json(&claude);
    assert_eq!(
        doc["mcpServers"]["memory"]["command"],
        mcpguard().display().to_string()
    );
    assert_eq!(
        doc["projects"]["/home/you/app"]["mcpServers"]["git"]["command"],
        "uvx"
    );
}
