//! `mcpguard wrap` on real configuration files of each host format: what it rewrites, what it
//! keeps, what it refuses, and that a wrapped entry, run the way the host runs it, fails closed
//! until its snapshot is reviewed and pinned and then guards the server.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::gate::{reviewed_snapshot, tool_names};
use crate::support::{fixture, mcpguard, reads_policy_with, run_bounded, Peer};

pub fn wrap(config: &Path, extra: &[&str]) -> Output {
    run_bounded(Command::new(mcpguard()).arg("wrap").arg(config).args(extra))
}

/// Wraps `config` with its snapshots in `dir` and the policy every wrapped fixture starts with:
/// the fixture's tools are reads, and the sandbox lets the fixture write its log in `dir` (the
/// lists a policy names replace the defaults). Returns what wrap did and the policy's path.
pub fn wrap_for_fixture(config: &Path, dir: &Path) -> (Output, PathBuf) {
    let policy = dir.join("policy.toml");
    std::fs::write(
        &policy,
        reads_policy_with(&format!(
            "[sandbox]\nread_write = [\"$TMPDIR\", \"/dev/null\", {:?}]\n",
            dir.display().to_string()
        )),
    )
    .unwrap();
    let args = [
        "--snapshot-dir",
        dir.to_str().unwrap(),
        "--policy",
        policy.to_str().unwrap(),
    ];
    (wrap(config, &args), policy)
}

/// Each text, written as `file` and wrapped, is refused with exit status 1 and a message holding
/// its reason, and left untouched without a backup.
fn refused_whole(file: &str, cases: &[(&str, &str)]) {
    for (text, why) in cases {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(file);
        std::fs::write(&config, text).unwrap();
        let out = wrap(&config, &["--snapshot-dir", dir.path().to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(stderr(&out).contains(why), "{text}: {}", stderr(&out));
        assert_eq!(
            &std::fs::read_to_string(&config).unwrap(),
            text,
            "untouched"
        );
        assert!(backups(dir.path()).is_empty(), "{text}: no backup");
    }
}

/// The fixture's entry, wrapped by [`wrap_for_fixture`] with its `FIXTURE_MODE` variable passed
/// by name, read by `entry` as the host reads it: it runs mcpguard with the expected arguments;
/// after capture and review `--pin` records the digest; and the entry, run the way the host runs
/// it, serves the reviewed fixture.
fn wrapped_fixture_is_pinned_and_guards(
    config: &Path,
    dir: &Path,
    policy: &Path,
    log: &Path,
    entry: impl Fn() -> (String, Vec<String>),
) {
    let (command, args) = entry();
    assert_eq!(command, mcpguard().display().to_string());
    let fixture_s = fixture().display().to_string();
    let log_s = log.display().to_string();
    let want = wrapped_args(
        dir,
        "fixture",
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--sandbox-env",
            "FIXTURE_MODE",
        ],
        &[&fixture_s, "--log", &log_s],
    );
    assert_eq!(args, want);
    let (snap, digest) = reviewed_snapshot(dir, &[]);
    assert_eq!(snap, dir.join("fixture.snapshot.json"));
    let out = wrap(config, &["--pin"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let (command, args) = entry();
    assert_eq!(args[3], digest);
    let mut p = Peer::start_with(
        Command::new(&command)
            .args(&args)
            .env("FIXTURE_MODE", "plain"),
    );
    let init = p.initialize();
    assert_eq!(
        init["result"]["serverInfo"]["name"], "mcpguard-fixture",
        "{init}"
    );
    let list = p.request(1, "tools/list", json!({}));
    assert!(tool_names(&list).contains(&"echo"), "{list}");
    p.close_stdin();
    assert!(p.wait().success());
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
    refused_whole("config.json", &cases);
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
    let (out, _policy) = wrap_for_fixture(&config, dir.path());
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
    let (out, policy) = wrap_for_fixture(&config, dir.path());
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
    let entry = || {
        let doc: toml::Table = toml::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
        let e = &doc["mcp_servers"]["fixture"];
        let args: Vec<String> = e["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect();
        (e["command"].as_str().unwrap().to_string(), args)
    };
    assert_eq!(backups(dir.path()).len(), 1);
    wrapped_fixture_is_pinned_and_guards(&config, dir.path(), &policy, &log, entry);
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

/// Checks that `new` is `original` with only the `changed` snippets (found in this order in the
/// original) replaced, every other byte kept, and returns the text that replaced each.
fn replaced(original: &str, new: &str, changed: &[&str]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut rest = original;
    for c in changed {
        let at = rest
            .find(c)
            .unwrap_or_else(|| panic!("{c:?} is not in the original"));
        kept.push(&rest[..at]);
        rest = &rest[at + c.len()..];
    }
    kept.push(rest);
    let mut out = Vec::new();
    assert!(new.starts_with(kept[0]), "the start changed:\n{new}");
    let mut at = kept[0].len();
    for (i, piece) in kept.iter().enumerate().skip(1) {
        let found = if i == kept.len() - 1 {
            assert!(new.ends_with(piece), "the end changed:\n{new}");
            new.len() - piece.len()
        } else {
            at + new[at..]
                .find(piece)
                .unwrap_or_else(|| panic!("{piece:?} is not kept:\n{new}"))
        };
        out.push(new[at..found].to_string());
        at = found + piece.len();
    }
    out
}

/// Wraps `original` as `file` in a new directory, checks that a second wrap changes nothing, and
/// returns the new text, what wrap said, and the snapshot directory.
fn wrap_twice(file: &str, original: &str) -> (tempfile::TempDir, String, String, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join(file);
    std::fs::write(&config, original).unwrap();
    let snaps = dir.path().join("snaps");
    let args = ["--snapshot-dir", snaps.to_str().unwrap()];
    let out = wrap(&config, &args);
    assert!(out.status.success(), "{file}: {}", stderr(&out));
    let new = std::fs::read_to_string(&config).unwrap();
    let again = wrap(&config, &args);
    assert!(again.status.success(), "{file}: {}", stderr(&again));
    assert!(
        stderr(&again).contains("nothing to change"),
        "{}",
        stderr(&again)
    );
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        new,
        "{file}: the second wrap changed it"
    );
    assert_eq!(backups(dir.path()).len(), 1, "{file}: one backup");
    (dir, new, stderr(&out), snaps)
}

/// A YAML list of double-quoted strings as wrap writes it (block `- "a"` lines or flow
/// `["a", "b"]`), read with JSON's string rules, which agree with YAML's double quotes for the
/// characters of these tests.
fn yaml_strings(text: &str) -> Vec<String> {
    let t = text.trim();
    if t.starts_with('[') {
        return serde_json::from_str(t).unwrap_or_else(|e| panic!("{t}: {e}"));
    }
    t.lines()
        .map(|l| {
            let item = l
                .trim()
                .strip_prefix("- ")
                .unwrap_or_else(|| panic!("{l:?}"));
            serde_json::from_str(item).unwrap_or_else(|e| panic!("{item}: {e}"))
        })
        .collect()
}

fn quoted(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// VS Code's `.vscode/mcp.json` and user `settings.json` are JSONC: comments and trailing commas
/// are kept, with every other byte, and only the stdio entry's command and arguments change.
#[test]
fn vscode_jsonc_files_keep_their_comments_and_trailing_commas() {
    let mcp_json = r#"{
  // Servers for this workspace.
  "inputs": [
    {"type": "promptString", "id": "token", "password": true},
  ],
  "servers": {
    "time": {
      "type": "stdio",
      "command": "uvx", // from PyPI
      "args": ["mcp-server-time", "--local-timezone=UTC",],
      "env": {"TZ": "UTC"},
    },
    /* the hosted one */
    "docs": {"type": "http", "url": "https://example.test/mcp"},
  },
}
"#;
    let settings_json = r#"// User settings
{
    "editor.fontSize": 13,
    "mcp": {
        "servers": {
            "time": {"command": "uvx", "env": {"TZ": "UTC"}}, // one line, no args
            "docs": {"type": "sse", "url": "https://example.test/sse"},
        },
    },
    "workbench.colorTheme": "Default Dark",
}
"#;
    let server = ["uvx", "mcp-server-time", "--local-timezone=UTC"];
    let (_d, new, said, snaps) = wrap_twice("mcp.json", mcp_json);
    assert!(said.contains("left alone: \"docs\""), "{said}");
    let parts = replaced(
        mcp_json,
        &new,
        &[
            "\"uvx\"",
            "[\"mcp-server-time\", \"--local-timezone=UTC\",]",
        ],
    );
    assert_eq!(parts[0], quoted(&mcpguard().display().to_string()));
    let args: Vec<String> = serde_json::from_str(&parts[1]).unwrap();
    assert_eq!(
        args,
        wrapped_args(&snaps, "time", &["--sandbox-env", "TZ"], &server)
    );
    assert!(
        parts[1].starts_with("[\n        \"--manifest\",\n") && parts[1].ends_with("\n      ]"),
        "laid out like the file: {}",
        parts[1]
    );

    let (_d, new, said, snaps) = wrap_twice("settings.json", settings_json);
    assert!(said.contains("left alone: \"docs\""), "{said}");
    assert!(
        !said.contains("read plain JSON only"),
        "VS Code reads JSONC: {said}"
    );
    // The entry had no `args`: they are added after the command, on the entry's one line.
    let parts = replaced(settings_json, &new, &["\"uvx\""]);
    let want_args = wrapped_args(&snaps, "time", &["--sandbox-env", "TZ"], &["uvx"]);
    assert_eq!(
        parts[0],
        format!(
            "{}, \"args\": [{}]",
            quoted(&mcpguard().display().to_string()),
            want_args
                .iter()
                .map(|a| quoted(a))
                .collect::<Vec<_>>()
                .join(", ")
        )
    );
}

/// Zed's `settings.json` (JSONC, `context_servers`): a custom server in the current form
/// (`"source": "custom"`, `command`, `args`) and one in the older nested form (`"command":
/// {"path", "args"}`) are wrapped; a server an extension provides and a remote one are left alone.
#[test]
fn zed_settings_are_wrapped_in_both_custom_forms() {
    let original = r#"// Zed settings
{
  "theme": "One Dark",
  "context_servers": {
    "time": {
      "source": "custom",
      "command": "uvx",
      "args": ["mcp-server-time"],
      "env": {},
    },
    "git": {
      "command": {
        "path": "uvx",
        "args": ["mcp-server-git"],
      },
      "settings": {},
    },
    "postgres-context-server": {
      "source": "extension",
      "settings": {"database_url": "postgresql://localhost/db"},
    },
    "remote": {"url": "https://example.test/mcp"},
  },
}
"#;
    let (_d, new, said, snaps) = wrap_twice("settings.json", original);
    for note in [
        "left alone: \"postgres-context-server\" is a server a Zed extension provides",
        "left alone: \"remote\" is a remote server",
        "wrapped: \"time\"",
        "wrapped: \"git\"",
    ] {
        assert!(said.contains(note), "{note}: {said}");
    }
    let parts = replaced(
        original,
        &new,
        &[
            "\"uvx\"",
            "[\"mcp-server-time\"]",
            "\"uvx\"",
            "[\"mcp-server-git\"]",
        ],
    );
    let ours = quoted(&mcpguard().display().to_string());
    assert_eq!(parts[0], ours);
    assert_eq!(parts[2], ours, "the nested form's `path`");
    let args = |t: &str| serde_json::from_str::<Vec<String>>(t).unwrap();
    assert_eq!(
        args(&parts[1]),
        wrapped_args(&snaps, "time", &[], &["uvx", "mcp-server-time"])
    );
    assert_eq!(
        args(&parts[3]),
        wrapped_args(&snaps, "git", &[], &["uvx", "mcp-server-git"])
    );
}

/// fast-agent's `fastagent.config.yaml` (`mcp.servers`): comments, quoting and layout are kept;
/// a block list stays a block list, a flow list a flow list, missing `args` are added on a line
/// of their own; an `http` server is left alone.
#[test]
fn fast_agent_yaml_is_wrapped_keeping_comments_and_layout() {
    let original = "# fast-agent configuration\ndefault_model: passthrough\n\nlogger:\n  level: error\n\nmcp:\n  servers:\n    # the local clock\n    time:\n      command: uvx   # from PyPI\n      args: [\"mcp-server-time\"]\n      env:\n        TZ: UTC\n    fetch:\n      transport: stdio\n      command: \"uvx\"\n      args:\n        - mcp-server-fetch\n    tool:\n      command: /opt/tools/server # no args\n      cwd: /tmp\n    docs:\n      transport: http\n      url: \"https://example.test/mcp\"\n";
    let (_d, new, said, snaps) = wrap_twice("fastagent.config.yaml", original);
    assert!(
        said.contains("left alone: \"docs\" is a remote server"),
        "{said}"
    );
    let parts = replaced(
        original,
        &new,
        &[
            "uvx",
            "[\"mcp-server-time\"]",
            "\"uvx\"",
            "- mcp-server-fetch",
            "/opt/tools/server # no args",
        ],
    );
    let ours = quoted(&mcpguard().display().to_string());
    assert_eq!(parts[0], ours);
    assert_eq!(
        yaml_strings(&parts[1]),
        wrapped_args(
            &snaps,
            "time",
            &["--sandbox-env", "TZ"],
            &["uvx", "mcp-server-time"]
        )
    );
    assert!(
        parts[1].starts_with('['),
        "a flow list stays one: {}",
        parts[1]
    );
    assert_eq!(parts[2], ours);
    assert!(
        parts[3].starts_with("- \"--manifest\"\n        - "),
        "a block list stays one, at its indentation: {}",
        parts[3]
    );
    assert_eq!(
        yaml_strings(&parts[3]),
        wrapped_args(&snaps, "fetch", &[], &["uvx", "mcp-server-fetch"])
    );
    let (command, args) = parts[4]
        .split_once(" # no args\n      args: ")
        .unwrap_or_else(|| {
            panic!(
                "args on a line of their own after the comment: {}",
                parts[4]
            )
        });
    assert_eq!(command, ours);
    assert_eq!(
        yaml_strings(args),
        wrapped_args(&snaps, "tool", &[], &["/opt/tools/server"])
    );
}

/// Goose's `config.yaml` (`extensions`, written by Goose with keys sorted and lists at the key's
/// indentation): the stdio extension's `cmd` and `args` are wrapped and its `envs` passed by
/// name; the builtin and the remote extension are left alone.
#[test]
fn goose_yaml_is_wrapped_leaving_builtins_and_remotes() {
    let original = "GOOSE_PROVIDER: openai\nGOOSE_MODEL: gpt-4o\nextensions:\n  developer:\n    bundled: true\n    display_name: Developer\n    enabled: true\n    name: developer\n    timeout: 300\n    type: builtin\n  memory:\n    args:\n    - -y\n    - '@modelcontextprotocol/server-memory'\n    cmd: npx\n    enabled: true\n    envs:\n      MEMORY_FILE_PATH: /home/you/memory.jsonl\n    name: memory\n    timeout: 300\n    type: stdio\n  search:\n    enabled: true\n    name: search\n    type: streamable_http\n    uri: https://example.test/mcp\n";
    let (_d, new, said, snaps) = wrap_twice("config.yaml", original);
    assert!(
        said.contains("left alone: \"developer\" is a Goose builtin extension"),
        "{said}"
    );
    assert!(
        said.contains("left alone: \"search\" is a remote server"),
        "{said}"
    );
    assert!(
        !said.contains("/home/you/memory.jsonl"),
        "a variable's value was printed: {said}"
    );
    let parts = replaced(
        original,
        &new,
        &["- -y\n    - '@modelcontextprotocol/server-memory'", "npx"],
    );
    assert_eq!(
        yaml_strings(&parts[0]),
        wrapped_args(
            &snaps,
            "memory",
            &["--sandbox-env", "MEMORY_FILE_PATH"],
            &["npx", "-y", "@modelcontextprotocol/server-memory"]
        )
    );
    assert!(
        parts[0].starts_with("- \"--manifest\"\n    - "),
        "{}",
        parts[0]
    );
    assert_eq!(parts[1], quoted(&mcpguard().display().to_string()));
}

/// What a splice could silently break in YAML is refused with the thing to change by hand.
#[test]
fn yaml_it_cannot_edit_safely_is_refused_whole() {
    let cases = [
        (
            "defaults: &d {command: uvx}\nmcp:\n  servers:\n    time: *d\n",
            "uses an alias (*name)",
        ),
        (
            "mcp:\n  servers:\n    time:\n      command: !env CMD\n",
            "uses a tag (!name)",
        ),
        (
            "a: 1\n---\nmcp:\n  servers: {}\n",
            "more than one YAML document",
        ),
        (
            "mcp:\n  targets:\n    - name: fetch\n      target: uvx mcp-server-fetch\n",
            "`mcp.targets` shorthand",
        ),
        (
            "extensions:\n  x:\n    type: stdio\n    cmd: [npx]\n",
            "`command` is not a non-empty string",
        ),
    ];
    refused_whole("config.yaml", &cases);
}

/// The whole way for a YAML host: fast-agent's configuration wrapped (with the variable names
/// its `fastagent.secrets.yaml` sets for the server passed by name, never their values), pinned
/// after review, and the entry, read as fast-agent reads it and run that way, guards the server.
#[test]
fn fast_agent_entry_is_wrapped_pinned_and_guards_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fastagent.config.yaml");
    let log = dir.path().join("server.log");
    let original = format!(
        "default_model: passthrough\nmcp:\n  servers:\n    fixture:   # the test server\n      command: {}\n      args:\n        - --log\n        - {}\n",
        quoted(&fixture().display().to_string()),
        quoted(&log.display().to_string())
    );
    std::fs::write(&config, &original).unwrap();
    std::fs::write(
        dir.path().join("fastagent.secrets.yaml"),
        "mcp:\n  servers:\n    fixture:\n      env:\n        FIXTURE_MODE: secret-plain-value\n",
    )
    .unwrap();
    let (out, policy) = wrap_for_fixture(&config, dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("fastagent.secrets.yaml sets for it (FIXTURE_MODE)"),
        "{}",
        stderr(&out)
    );
    assert!(
        !stderr(&out).contains("secret-plain-value"),
        "{}",
        stderr(&out)
    );
    let entry = || {
        let text = std::fs::read_to_string(&config).unwrap();
        let parts = replaced(
            &original,
            &text,
            &[
                &quoted(&fixture().display().to_string()),
                &format!("- --log\n        - {}", quoted(&log.display().to_string())),
            ],
        );
        let command: String = serde_json::from_str(&parts[0]).unwrap();
        (command, yaml_strings(&parts[1]))
    };
    wrapped_fixture_is_pinned_and_guards(&config, dir.path(), &policy, &log, entry);
}

/// A file a Windows editor wrote keeps its byte-order mark and its CRLF line breaks, also on the
/// lines wrap adds.
#[test]
fn a_byte_order_mark_and_crlf_line_breaks_are_kept() {
    let original = "\u{feff}{\r\n  \"mcpServers\": {\r\n    \"time\": {\r\n      \"command\": \"uvx\"\r\n    }\r\n  }\r\n}\r\n";
    let (_d, new, said, snaps) = wrap_twice("claude_desktop_config.json", original);
    assert!(!said.contains("read plain JSON only"), "{said}");
    assert!(new.starts_with('\u{feff}'), "{new:?}");
    assert_eq!(
        new.matches('\n').count(),
        new.matches("\r\n").count(),
        "a bare LF was written: {new:?}"
    );
    let parts = replaced(original, &new, &["\"uvx\""]);
    let want = wrapped_args(&snaps, "time", &[], &["uvx"]);
    let (command, args) = parts[0].split_once(",\r\n      \"args\": ").unwrap();
    assert_eq!(command, quoted(&mcpguard().display().to_string()));
    assert_eq!(serde_json::from_str::<Vec<String>>(args).unwrap(), want);
}

/// Comments in a file of the `mcpServers` shape are kept, and the person is told that Claude
/// Desktop, Claude Code and Cursor do not read them.
#[test]
fn comments_in_an_mcp_servers_file_are_kept_with_a_warning() {
    let original = "{\n  // mine\n  \"mcpServers\": {\"time\": {\"command\": \"uvx\"}}\n}\n";
    let (_d, new, said, _) = wrap_twice("mcp.json", original);
    assert!(said.contains("has comments or trailing commas; they are kept, but Claude Desktop, Claude Code and Cursor read plain JSON only"), "{said}");
    assert!(new.starts_with("{\n  // mine\n"), "{new}");
}

/// Issue 33 (item 1): the data paths a Claude Desktop entry names, in its arguments
/// (`--db-path FILE`, a positional folder) and in its `env` (`NOTES_DIR`), become grants of the
/// wrapped entry: `--yes` applies the proposal (read-write for data names, read-only otherwise);
/// without a terminal and without `--yes` the proposal is only printed, with the command that
/// applies it; and that command, on the already wrapped file, adds the grant to the entry's
/// mcpguard options instead of refusing, keeping its pin.
#[test]
fn wrap_proposes_the_data_paths_an_entry_names_as_grants() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let db = dir.path().join("notes.db");
    let notes = dir.path().join("notes");
    let docs = dir.path().join("docs");
    std::fs::write(&db, "").unwrap();
    std::fs::create_dir(&notes).unwrap();
    std::fs::create_dir(&docs).unwrap();
    let s = |p: &Path| p.display().to_string();
    let doc = json!({"mcpServers": {
        "sqlite": {"command": "uvx", "args": ["mcp-server-sqlite", "--db-path", s(&db)]},
        "notes": {"command": "node", "args": ["/opt/notes/index.js", s(&docs)],
                  "env": {"NOTES_DIR": s(&notes), "API_KEY": "k-123"}}}});
    let text = serde_json::to_string_pretty(&doc).unwrap();
    let config = dir.path().join("claude_desktop_config.json");

    // --yes: every proposal applied.
    std::fs::write(&config, &text).unwrap();
    let out = wrap(
        &config,
        &["--snapshot-dir", snaps.to_str().unwrap(), "--yes"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let new = read_json(&config);
    assert_eq!(
        strings(&new["mcpServers"]["sqlite"]["args"]),
        wrapped_args(
            &snaps,
            "sqlite",
            &["--sandbox-write", db.to_str().unwrap()],
            &[
                "uvx",
                "mcp-server-sqlite",
                "--db-path",
                db.to_str().unwrap()
            ]
        )
    );
    assert_eq!(
        strings(&new["mcpServers"]["notes"]["args"]),
        wrapped_args(
            &snaps,
            "notes",
            &[
                "--sandbox-read",
                docs.to_str().unwrap(),
                "--sandbox-write",
                notes.to_str().unwrap(),
                "--sandbox-env",
                "NOTES_DIR",
                "--sandbox-env",
                "API_KEY"
            ],
            &["node", "/opt/notes/index.js", docs.to_str().unwrap()]
        )
    );
    assert!(
        stderr(&out).contains("(from env NOTES_DIR)"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("k-123"), "{}", stderr(&out));

    // No terminal, no --yes: proposed, not applied, with the command that applies it.
    std::fs::write(&config, &text).unwrap();
    let out = wrap(&config, &["--snapshot-dir", snaps.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    let apply = format!(
        "apply them with: mcpguard wrap {} --entry notes --sandbox-read {} --sandbox-write {}",
        config.display(),
        docs.display(),
        notes.display()
    );
    assert!(said.contains(&apply), "{said}");
    let new = read_json(&config);
    assert_eq!(
        strings(&new["mcpServers"]["notes"]["args"]),
        wrapped_args(
            &snaps,
            "notes",
            &["--sandbox-env", "NOTES_DIR", "--sandbox-env", "API_KEY"],
            &["node", "/opt/notes/index.js", docs.to_str().unwrap()]
        ),
        "nothing granted without a person's yes"
    );

    // The printed command, on the wrapped file: the entry's options change, the pin stays.
    let out = wrap(
        &config,
        &[
            "--entry",
            "notes",
            "--sandbox-read",
            docs.to_str().unwrap(),
            "--sandbox-write",
            notes.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let new = read_json(&config);
    let mut want = wrapped_args(
        &snaps,
        "notes",
        &["--sandbox-env", "NOTES_DIR", "--sandbox-env", "API_KEY"],
        &["node", "/opt/notes/index.js", docs.to_str().unwrap()],
    );
    let at = want.iter().position(|a| a == "--").unwrap();
    want.splice(
        at..at,
        [
            "--sandbox-read".to_string(),
            s(&docs),
            "--sandbox-write".into(),
            s(&notes),
        ],
    );
    assert_eq!(strings(&new["mcpServers"]["notes"]["args"]), want);
    assert!(
        stderr(&out).contains("changed the mcpguard options of \"notes\""),
        "{}",
        stderr(&out)
    );
    // Again: nothing to add, nothing changed.
    let before = std::fs::read(&config).unwrap();
    let out = wrap(
        &config,
        &[
            "--entry",
            "notes",
            "--sandbox-write",
            notes.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(&config).unwrap(), before);

    // A TCP destination is an option of the entry too, never dropped.
    let out = wrap(
        &config,
        &["--entry", "notes", "--sandbox-connect", "127.0.0.1:5432"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let new = read_json(&config);
    let args = strings(&new["mcpServers"]["notes"]["args"]);
    let at = args.iter().position(|a| *a == "--").unwrap();
    assert!(
        args[..at]
            .windows(2)
            .any(|w| w[0] == "--sandbox-connect" && w[1] == "127.0.0.1:5432"),
        "{args:?}"
    );
}

/// On a terminal, `wrap` asks about each proposed grant, the proposal as the default: Enter
/// keeps it, `r` makes it read-only, `n` leaves it out.
#[test]
fn wrap_on_a_terminal_asks_about_each_proposed_grant() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let db = dir.path().join("notes.db");
    let notes = dir.path().join("notes");
    let docs = dir.path().join("docs");
    std::fs::write(&db, "").unwrap();
    std::fs::create_dir(&notes).unwrap();
    std::fs::create_dir(&docs).unwrap();
    let s = |p: &Path| p.display().to_string();
    let doc = json!({"mcpServers": {
        "sqlite": {"command": "uvx", "args": ["mcp-server-sqlite", "--db-path", s(&db)]},
        "notes": {"command": "node", "args": ["/opt/notes/index.js", s(&docs)],
                  "env": {"NOTES_DIR": s(&notes)}}}});
    let config = dir.path().join("claude_desktop_config.json");
    std::fs::write(&config, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let args: Vec<std::ffi::OsString> = vec![
        "wrap".into(),
        config.clone().into(),
        "--snapshot-dir".into(),
        snaps.clone().into(),
    ];
    let wait = std::time::Duration::from_secs(30);
    let mut t = mcpguard::cli::pty::Session::spawn(&mcpguard(), &args, &[]).unwrap();
    for (path, default, reply) in [(&db, "[w]", ""), (&docs, "[r]", "n"), (&notes, "[w]", "r")] {
        let prompt = format!("names {}", path.display());
        t.expect(&prompt, wait).unwrap_or_else(|e| panic!("{e}"));
        t.expect(default, wait).unwrap_or_else(|e| panic!("{e}"));
        t.send_line(reply).unwrap();
    }
    let (status, _) = t.wait(wait).unwrap();
    assert!(status.success());
    let new = read_json(&config);
    assert_eq!(
        strings(&new["mcpServers"]["sqlite"]["args"]),
        wrapped_args(
            &snaps,
            "sqlite",
            &["--sandbox-write", db.to_str().unwrap()],
            &[
                "uvx",
                "mcp-server-sqlite",
                "--db-path",
                db.to_str().unwrap()
            ]
        )
    );
    assert_eq!(
        strings(&new["mcpServers"]["notes"]["args"]),
        wrapped_args(
            &snaps,
            "notes",
            &[
                "--sandbox-read",
                notes.to_str().unwrap(),
                "--sandbox-env",
                "NOTES_DIR"
            ],
            &["node", "/opt/notes/index.js", docs.to_str().unwrap()]
        )
    );
}

/// Through the real binary and the real `server-filesystem`, as its README configures it (the
/// folder it serves as a positional argument): `wrap --yes` grants that folder, the printed
/// capture, a review and `wrap --pin` follow, and the entry started exactly as the host starts
/// it reads a file of the folder with no hand edit of the configuration. The same entry without
/// the proposed grant cannot read it (the sandbox denies the folder), so the grant is what made
/// it work.
#[test]
fn a_wrapped_server_filesystem_reads_its_folder_with_no_hand_edit() {
    // Under the home directory, which the default sandbox does not open (a folder under /tmp
    // might be readable anyway, and the contrast at the end would prove nothing).
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/root"), PathBuf::from);
    let dir = tempfile::tempdir_in(&home).unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let root = dir.path().join("data").canonicalize().unwrap();
    std::fs::write(root.join("hello.txt"), "hello from the data folder\n").unwrap();
    let mut server = crate::interop::argv(&crate::interop::peers()["server_filesystem"]);
    server.push(root.display().to_string());
    let snaps = dir.path().join("snaps");
    let config = dir.path().join("claude_desktop_config.json");
    let doc = json!({"mcpServers": {"files": {"command": server[0], "args": server[1..]}}});
    std::fs::write(&config, serde_json::to_string_pretty(&doc).unwrap()).unwrap();

    let out = wrap(
        &config,
        &["--snapshot-dir", snaps.to_str().unwrap(), "--yes"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let args: Vec<String> = strings(&read_json(&config)["mcpServers"]["files"]["args"])
        .into_iter()
        .map(str::to_string)
        .collect();
    let grant = ["--sandbox-read".to_string(), root.display().to_string()];
    assert!(args.windows(2).any(|w| w == grant), "{args:?}");

    // The capture wrap printed, then a review of read_text_file, then `wrap --pin`.
    let snap = snaps.join("files.snapshot.json");
    let mut capture = Command::new(mcpguard());
    capture
        .args(["capture", "--server", "files", "--out"])
        .arg(&snap)
        .args(&grant)
        .arg("--")
        .args(&server);
    let out = run_bounded(&mut capture);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run_bounded(Command::new(mcpguard()).arg("review").arg(&snap).args([
        "--server",
        "files",
        "--tool",
        "read_text_file",
        "--reviewer",
        "itest@example.test",
        "--side-effect",
        "read",
        "--assert",
        "headless=true",
        "--assert",
        "independentCalls=true",
        "--assert",
        "modelBacked=false",
        "--assert",
        "sideEffects=",
        "--assert",
        "concurrency=safe",
        "--assert",
        "referenceBasedIO=true",
        "--channel",
        "/path=data",
        "--channel",
        "/head=data",
        "--channel",
        "/tail=data",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let out = wrap(&config, &["--pin"]);
    assert!(out.status.success(), "{}", stderr(&out));

    let entry = read_json(&config)["mcpServers"]["files"].clone();
    let args: Vec<String> = strings(&entry["args"])
        .into_iter()
        .map(str::to_string)
        .collect();
    let read = |args: &[String]| {
        let mut p = Peer::start(entry["command"].as_str().unwrap(), args);
        p.initialize();
        let path = root.join("hello.txt").display().to_string();
        p.request(
            1,
            "tools/call",
            json!({"name": "read_text_file", "arguments": {"path": path}}),
        )
    };
    let r = read(&args);
    assert!(
        r.to_string().contains("hello from the data folder"),
        "the wrapped entry, as the host starts it, did not read its folder: {r}"
    );
    // Without the proposed grant the sandbox keeps the folder from the server.
    let at = args.windows(2).position(|w| w == grant).unwrap();
    let mut without = args.clone();
    without.drain(at..at + 2);
    let r = read(&without);
    assert!(
        !r.to_string().contains("hello from the data folder"),
        "the folder was readable without the grant, so this test proves nothing: {r}"
    );
}

/// Attack: an entry naming the folder that holds the host configuration (or the snapshots) is
/// not granted it even with `--yes` — a server that could write there could unwrap itself or
/// replace its reviewed snapshot. The proposal names what it left out and how to grant it.
#[test]
fn wrap_never_proposes_the_folders_that_guard_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    std::fs::create_dir(&snaps).unwrap();
    let config = dir.path().join("claude_desktop_config.json");
    let doc = json!({"mcpServers": {
        "evil": {"command": "node", "args": ["/opt/x/index.js", "--allow-dir", dir.path().display().to_string()],
                 "env": {"DATA_DIR": snaps.display().to_string()}}}});
    std::fs::write(&config, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let out = wrap(
        &config,
        &["--snapshot-dir", snaps.to_str().unwrap(), "--yes"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let args = read_json(&config)["mcpServers"]["evil"]["args"].clone();
    assert!(
        !strings(&args)
            .iter()
            .any(|a| a.starts_with("--sandbox-write") || a.starts_with("--sandbox-read")),
        "{args}"
    );
    let said = stderr(&out);
    assert!(
        said.contains(&format!(
            "not proposed for \"evil\": {} (from argument --allow-dir): it holds or lies in",
            dir.path().display()
        )),
        "{said}"
    );
    assert!(said.contains("(from env DATA_DIR)"), "{said}");
}

/// Issue 33, item 7: two host configurations (Claude Desktop's and Cursor's) with a server of the
/// same name get a snapshot each in the default snapshot folder, so capturing, reviewing,
/// pinning and updating one never breaks the other's pinned digest; and however many times a
/// configuration is rewritten (wrap, pin, update), two backups remain beside it: the original
/// from before mcpguard's first change and the one from before the latest.
#[test]
fn two_host_configurations_keep_their_own_snapshots_and_bounded_backups() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let xdg = dir.path().join("xdg");
    std::fs::create_dir_all(&home).unwrap();
    let run = |args: &[&std::ffi::OsStr]| {
        let out = run_bounded(
            Command::new(mcpguard())
                .args(args)
                .env("HOME", &home)
                .env("XDG_CONFIG_HOME", &xdg),
        );
        assert!(out.status.success(), "mcpguard {args:?}: {}", stderr(&out));
        out
    };
    let os = |s: &str| std::ffi::OsString::from(s);
    let mut configs = Vec::new();
    for (folder, file) in [
        ("claude", "claude_desktop_config.json"),
        ("cursor", "mcp.json"),
    ] {
        std::fs::create_dir_all(dir.path().join(folder)).unwrap();
        let config = dir.path().join(folder).join(file);
        std::fs::write(
            &config,
            json!({"mcpServers": {"notes": {"command": fixture().display().to_string()}}})
                .to_string(),
        )
        .unwrap();
        configs.push((config.clone(), std::fs::read(&config).unwrap()));
        run(&[&os("wrap"), config.as_os_str()]);
    }
    let pinned = |config: &Path| {
        let doc = read_json(config);
        let args: Vec<String> = strings(&doc["mcpServers"]["notes"]["args"])
            .iter()
            .map(|s| s.to_string())
            .collect();
        (PathBuf::from(&args[1]), args[3].clone())
    };
    let (snap_a, _) = pinned(&configs[0].0);
    let (snap_b, _) = pinned(&configs[1].0);
    assert_ne!(
        snap_a, snap_b,
        "one server name, two host configurations, one snapshot"
    );
    for s in [&snap_a, &snap_b] {
        assert!(
            s.starts_with(xdg.join("mcpguard/snapshots")),
            "{}",
            s.display()
        );
    }
    // Each host's snapshot is captured, reviewed and pinned on its own.
    for ((config, _), snap) in configs.iter().zip([&snap_a, &snap_b]) {
        run(&[
            &os("capture"),
            &os("--server"),
            &os("notes"),
            &os("--out"),
            snap.as_os_str(),
            &os("--"),
            fixture().as_os_str(),
        ]);
        run(&[
            &os("review"),
            snap.as_os_str(),
            &os("--tool"),
            &os("add"),
            &os("--reviewer"),
            &os("me@example.test"),
            &os("--side-effect"),
            &os("read"),
            &os("--assert"),
            &os("headless=true"),
            &os("--assert"),
            &os("independentCalls=true"),
            &os("--assert"),
            &os("modelBacked=false"),
            &os("--assert"),
            &os("sideEffects="),
            &os("--assert"),
            &os("concurrency=safe"),
            &os("--assert"),
            &os("referenceBasedIO=true"),
            &os("--channel"),
            &os("/a=data"),
            &os("--channel"),
            &os("/b=data"),
        ]);
        run(&[&os("wrap"), &os("--pin"), config.as_os_str()]);
        assert_eq!(pinned(config).1, crate::support::hash(snap));
    }
    // Claude's server changes (echo's annotation; add, the reviewed tool, stays) and is
    // updated: Claude's pin follows, Cursor's still holds.
    let (_, before) = pinned(&configs[0].0);
    let pinned_a = std::fs::read(&configs[0].0).unwrap();
    run(&[
        &os("update"),
        snap_a.as_os_str(),
        &os("--yes"),
        &os("--config"),
        configs[0].0.as_os_str(),
        &os("--"),
        fixture().as_os_str(),
        &os("--annotation-drift"),
    ]);
    let (_, after) = pinned(&configs[0].0);
    assert_ne!(after, before);
    assert_eq!(after, crate::support::hash(&snap_a));
    assert_eq!(
        pinned(&configs[1].0).1,
        crate::support::hash(&snap_b),
        "updating one host's server broke the other host's pin"
    );
    // Claude's file was written three times (wrap, pin, update): two backups remain, the
    // original and the pinned file from before the update.
    let saved = backups(configs[0].0.parent().unwrap());
    assert_eq!(saved.len(), 2, "{saved:?}");
    assert_eq!(std::fs::read(&saved[0]).unwrap(), configs[0].1);
    assert_eq!(std::fs::read(&saved[1]).unwrap(), pinned_a);
    // A file that only looks like a backup is never removed.
    let mine = configs[0]
        .0
        .with_file_name("claude_desktop_config.json.bak-mine");
    std::fs::write(&mine, "keep").unwrap();
    run(&[&os("wrap"), &os("--pin"), configs[0].0.as_os_str()]);
    run(&[
        &os("update"),
        snap_a.as_os_str(),
        &os("--yes"),
        &os("--config"),
        configs[0].0.as_os_str(),
        &os("--"),
        fixture().as_os_str(),
    ]);
    assert!(mine.exists());
    assert_eq!(
        backups(configs[0].0.parent().unwrap()).len(),
        3,
        "two ours and the person's"
    );
}

/// Issue 33 (the database grant too broad): `--db-path ~/Documents/x.db` used to grant all of
/// ~/Documents read-write. The folder holds other files, so `wrap --yes` grants the database
/// file alone and says why (its journal cannot be granted before it exists) with the command
/// that grants the folder on purpose. The attack: a server started under exactly the grants wrap
/// wrote (through `sandbox-check`) can still write the database, but not the other file beside it.
#[test]
fn a_database_among_other_files_is_granted_as_the_file_not_its_folder() {
    crate::sandbox::require_landlock();
    let dir = tempfile::tempdir().unwrap();
    let snaps = dir.path().join("snaps");
    let docs = dir.path().join("home/Documents");
    std::fs::create_dir_all(&docs).unwrap();
    let db = docs.join("x.db");
    let taxes = docs.join("taxes.txt");
    std::fs::write(&db, "").unwrap();
    std::fs::write(&taxes, "mine\n").unwrap();
    let doc = json!({"mcpServers": {
        "sqlite": {"command": "uvx", "args": ["mcp-server-sqlite", "--db-path", db.display().to_string()]}}});
    let config = dir.path().join("claude_desktop_config.json");
    std::fs::write(&config, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
    let out = wrap(
        &config,
        &["--snapshot-dir", snaps.to_str().unwrap(), "--yes"],
    );
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    let args: Vec<String> = strings(&read_json(&config)["mcpServers"]["sqlite"]["args"])
        .into_iter()
        .map(String::from)
        .collect();
    let end = args.iter().position(|a| a == "--").unwrap();
    let grants: Vec<&[String]> = args[..end]
        .windows(2)
        .filter(|w| w[0].starts_with("--sandbox-"))
        .collect();
    assert_eq!(
        grants,
        [["--sandbox-write".to_string(), db.display().to_string()].as_slice()],
        "{said}"
    );
    assert!(
        said.contains(&format!(
            "database {} (from argument --db-path) is granted as the file alone: its folder {} holds 1 other entry",
            db.display(),
            docs.display()
        )) && said.contains(&format!(
            "--entry sqlite --sandbox-write {}",
            docs.display()
        )),
        "{said}"
    );

    let mut check = Command::new(mcpguard());
    check.arg("sandbox-check");
    for g in &grants {
        check.args(g.iter());
    }
    let out = run_bounded(check.args(["--", "/bin/sh", "-c"]).arg(format!(
        "echo row >> '{}' && echo pwned > '{}'",
        db.display(),
        taxes.display()
    )));
    assert_eq!(
        std::fs::read_to_string(&db).unwrap(),
        "row\n",
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&taxes).unwrap(),
        "mine\n",
        "the file beside the database was written: {}",
        stderr(&out)
    );
    assert!(!out.status.success());
}
