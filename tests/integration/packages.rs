//! Package runners as server READMEs launch them (`npx -y PKG@V`, `uvx PKG==V`), with published
//! servers: capture pins the package into mcpguard's store outside the sandbox, and every later
//! run starts that install under the default sandbox and the built-in policy (no policy file),
//! offline, with no option beyond the data the server is given (issue 12). npm and uv work from caches that `scripts/install-peers.sh`
//! filled and are told to stay offline, so nothing here needs a registry; inside the sandbox the
//! network is closed anyway.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use crate::support::reviews::{record_reviews, scripted_reviews};
use crate::support::{mcpguard, run_bounded, show, Peer};

const MEMORY: &str = "@modelcontextprotocol/server-memory";
const MEMORY_VERSION: &str = "2026.8.31";
const THINKING: &str = "@modelcontextprotocol/server-sequential-thinking@2026.8.31";
const TIME: &str = "mcp-server-time==2026.10.19";
const GIT: &str = "mcp-server-git==2026.10.19";

/// The tools the tests call, which the reviews record as reads.
const READS: [&str; 4] = [
    "read_graph",
    "sequentialthinking",
    "convert_time",
    "git_status",
];

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers")
}

/// A scratch user: its own HOME and package store, npm and uv offline on the filled caches.
struct User {
    dir: tempfile::TempDir,
    /// Variables a host configuration's `env` would set for the server.
    host_env: Vec<(String, PathBuf)>,
}

impl User {
    fn new() -> User {
        crate::sandbox::require_landlock();
        let cache = peers().join("runner-cache");
        assert!(
            cache.join("npm").is_dir() && cache.join("uv").is_dir(),
            "{} is missing: run scripts/install-peers.sh",
            cache.display()
        );
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        User {
            dir,
            host_env: Vec::new(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The pinned install of the memory server in this user's package store.
    fn memory_install(&self) -> PathBuf {
        self.path("store/npm").join(format!(
            "@modelcontextprotocol+server-memory@{MEMORY_VERSION}"
        ))
    }

    fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let cache = peers().join("runner-cache");
        let path = format!(
            "{}:{}",
            peers().join("uv/bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut cmd = Command::new(program);
        cmd.env("HOME", self.path("home"))
            .env("PATH", path)
            .env("MCPGUARD_PACKAGE_DIR", self.path("store"))
            .env("npm_config_cache", cache.join("npm"))
            .env("npm_config_offline", "true")
            .env("npm_config_update_notifier", "false")
            .env("UV_CACHE_DIR", cache.join("uv"))
            .env("UV_OFFLINE", "1")
            .env("UV_NO_PROGRESS", "1");
        for (k, v) in &self.host_env {
            cmd.env(k, v);
        }
        cmd
    }

    fn mcpguard(&self) -> Command {
        self.command(mcpguard())
    }

    /// Captures `server` into FILE, reviews every tool (every argument a data channel), and
    /// returns the snapshot's file and digest, and what capture said on stderr.
    fn capture_and_review(
        &self,
        key: &str,
        opts: &[&str],
        server: &[&str],
    ) -> (PathBuf, String, String) {
        let file = self.path(&format!("{key}.json"));
        let out = run_bounded(
            self.mcpguard()
                .args(["capture", "--server", key, "--out"])
                .arg(&file)
                .args(opts)
                .arg("--")
                .args(server),
        );
        assert!(out.status.success(), "capture: {}", show(&out));
        let said = String::from_utf8_lossy(&out.stderr).into_owned();
        let doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        let digest = record_reviews(
            self.mcpguard(),
            &file,
            key,
            Some("itest@example.com"),
            &scripted_reviews(&doc, key, &READS),
            &self.path(&format!("{key}.reviews.json")),
        );
        (file, digest, said)
    }

    /// The proxy for `file`'s server `key`, running `server`.
    fn guarded(
        &self,
        file: &Path,
        digest: &str,
        key: &str,
        opts: &[&str],
        server: &[&str],
    ) -> Peer {
        let mut cmd = self.mcpguard();
        cmd.arg("--manifest")
            .arg(file)
            .args(["--sha256", digest, "--server", key])
            .args(opts)
            .arg("--")
            .args(server);
        Peer::start_with(&mut cmd)
    }
}

/// Initializes `peer` and returns the result of one `tools/call`.
fn call(peer: &mut Peer, tool: &str, arguments: Value) -> Value {
    let init = peer.initialize();
    assert!(
        init.get("result").is_some(),
        "initialize: {init}\n{}",
        peer.stderr()
    );
    let r = peer.request(
        1,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    );
    r.get("result")
        .cloned()
        .unwrap_or_else(|| panic!("tools/call {tool}: {r}\n{}", peer.stderr()))
}

/// The pinned install started directly, unsandboxed, the way `npx`/`uvx` would start it once
/// installed (the direct session to compare with; npx itself insists on the registry's full
/// package document, which an offline cache filled by `npm install` does not hold).
fn direct(u: &User, file: &Path, key: &str, args: &[&str]) -> Peer {
    let p = package_of(file, key);
    let name = p["name"].as_str().unwrap();
    let folder = format!(
        "{}@{}",
        name.replace('/', "+"),
        p["version"].as_str().unwrap()
    );
    let mut cmd = if p["ecosystem"] == "npm" {
        let pkg = u
            .path("store/npm")
            .join(folder)
            .join("node_modules")
            .join(name);
        let manifest: Value =
            serde_json::from_slice(&std::fs::read(pkg.join("package.json")).unwrap()).unwrap();
        let bin = &manifest["bin"];
        let rel = bin
            .as_str()
            .or_else(|| bin[p["bin"].as_str().unwrap()].as_str())
            .unwrap();
        let mut cmd = u.command("node");
        cmd.arg(pkg.join(rel));
        cmd
    } else {
        u.command(
            u.path("store/pypi")
                .join(folder)
                .join("bin")
                .join(p["bin"].as_str().unwrap()),
        )
    };
    cmd.args(args);
    Peer::start_with(&mut cmd)
}

fn package_of(file: &Path, key: &str) -> Value {
    let doc: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    doc["servers"][key]["package"].clone()
}

#[test]
fn npx_memory_server_is_pinned_and_runs_offline_with_the_host_env() {
    let u = User::new();
    let memory_file = u.path("data/memory.jsonl");
    std::fs::write(
        &memory_file,
        "{\"type\":\"entity\",\"name\":\"pinned\",\"entityType\":\"test\",\"observations\":[\"from the host env\"]}\n",
    )
    .unwrap();
    let data = u.path("data").display().to_string();
    let spec = format!("{MEMORY}@{MEMORY_VERSION}");
    let server = ["npx", "-y", spec.as_str()];
    let opts = [
        "--sandbox-write",
        data.as_str(),
        "--sandbox-env",
        "MEMORY_FILE_PATH",
    ];
    // The host configuration's `env` reaches mcpguard as its environment.
    let mut u = u;
    u.host_env
        .push(("MEMORY_FILE_PATH".into(), memory_file.clone()));
    let (file, digest, said) = u.capture_and_review("memory", &opts, &server);
    for want in [
        "pinned @modelcontextprotocol/server-memory@2026.8.31",
        "MEMORY_FILE_PATH",
    ] {
        assert!(
            said.contains(want),
            "capture does not say {want:?}:\n{said}"
        );
    }
    // The value of a passed variable never appears in mcpguard's own words.
    assert!(!said.contains(&memory_file.display().to_string()), "{said}");
    let package = package_of(&file, "memory");
    assert_eq!(package["ecosystem"], "npm");
    assert_eq!(package["name"], MEMORY);
    assert_eq!(package["version"], MEMORY_VERSION);
    assert!(
        package["integrity"]
            .as_str()
            .unwrap()
            .starts_with("sha512-"),
        "{package}"
    );

    let mut guarded = u.guarded(&file, &digest, "memory", &opts, &server);
    let through = call(&mut guarded, "read_graph", json!({}));
    assert_ne!(through["isError"], true, "{through}\n{}", guarded.stderr());
    assert_eq!(
        through["structuredContent"]["entities"][0]["observations"][0], "from the host env",
        "the server did not read the file the host's env named: {through}"
    );
    // The same call straight to `npx` (unsandboxed, the way the host would run it without
    // mcpguard) gives the same result.
    let mut direct = direct(&u, &file, "memory", &[]);
    assert_eq!(call(&mut direct, "read_graph", json!({})), through);
}

#[test]
fn a_changed_package_version_or_install_is_refused_before_the_server_starts() {
    let u = User::new();
    let spec = format!("{MEMORY}@{MEMORY_VERSION}");
    let (file, digest, _) = u.capture_and_review("memory", &[], &["npx", "-y", &spec]);
    // Another version in the host configuration: refused, naming both.
    let other = format!("{MEMORY}@2026.1.26");
    let out = run_bounded(u.mcpguard().arg("--manifest").arg(&file).args([
        "--sha256", &digest, "--server", "memory", "--", "npx", "-y", &other,
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    for want in [
        "refusing to start the server",
        "@modelcontextprotocol/server-memory@2026.1.26",
        "@modelcontextprotocol/server-memory@2026.8.31",
        "mcpguard update",
    ] {
        assert!(stderr.contains(want), "missing {want:?}:\n{stderr}");
    }
    assert!(
        !stderr.contains("Knowledge Graph"),
        "the server started:\n{stderr}"
    );
    // The install changed under the pin (another version's lockfile): refused too.
    let lock = u.memory_install().join("package-lock.json");
    let text = std::fs::read_to_string(&lock).unwrap();
    std::fs::write(
        &lock,
        text.replace("\"version\": \"2026.8.31\"", "\"version\": \"2026.9.9\""),
    )
    .unwrap();
    let out = run_bounded(u.mcpguard().arg("--manifest").arg(&file).args([
        "--sha256", &digest, "--server", "memory", "--", "npx", "-y", &spec,
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr.contains("holds @modelcontextprotocol/server-memory 2026.9.9")
            && stderr.contains("not the pinned"),
        "{stderr}"
    );
    // A missing install (a new machine) is refused with what to do.
    std::fs::remove_dir_all(u.path("store")).unwrap();
    let out = run_bounded(u.mcpguard().arg("--manifest").arg(&file).args([
        "--sha256", &digest, "--server", "memory", "--", "npx", "-y", &spec,
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr.contains("is not installed") && stderr.contains("capture again"),
        "{stderr}"
    );
}

#[test]
fn npx_sequential_thinking_runs_pinned_and_equals_the_direct_session() {
    let u = User::new();
    let server = ["npx", "-y", THINKING];
    let (file, digest, _) = u.capture_and_review("thinking", &[], &server);
    assert_eq!(
        package_of(&file, "thinking")["bin"],
        "mcp-server-sequential-thinking"
    );
    let args = json!({"thought": "one", "nextThoughtNeeded": false, "thoughtNumber": 1, "totalThoughts": 1});
    let mut guarded = u.guarded(&file, &digest, "thinking", &[], &server);
    let through = call(&mut guarded, "sequentialthinking", args.clone());
    assert_ne!(through["isError"], true, "{through}\n{}", guarded.stderr());
    let mut direct = direct(&u, &file, "thinking", &[]);
    assert_eq!(call(&mut direct, "sequentialthinking", args), through);
}

#[test]
fn uvx_time_server_is_pinned_and_runs_offline() {
    let u = User::new();
    let server = ["uvx", TIME, "--local-timezone", "UTC"];
    let (file, digest, _) = u.capture_and_review("time", &[], &server);
    let package = package_of(&file, "time");
    assert_eq!(package["ecosystem"], "pypi");
    assert_eq!(package["version"], "2026.10.19");
    assert!(
        package["integrity"]
            .as_str()
            .unwrap()
            .starts_with("record-sha256:"),
        "{package}"
    );
    let args = json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"});
    let mut guarded = u.guarded(&file, &digest, "time", &[], &server);
    let through = call(&mut guarded, "convert_time", args.clone());
    assert_ne!(through["isError"], true, "{through}\n{}", guarded.stderr());
    assert!(through.to_string().contains("21:00"), "{through}");
    let mut direct = direct(&u, &file, "time", &["--local-timezone", "UTC"]);
    assert_eq!(call(&mut direct, "convert_time", args), through);
}

/// The git server from PyPI, given one repository: `--sandbox-write` of that repository is the
/// only option, both as `uvx` runs it (a console script) and as a venv module (`python -m`).
#[test]
fn the_git_server_runs_pinned_with_only_its_repository_granted() {
    let u = User::new();
    let repo = u.path("data/repo");
    std::fs::create_dir(&repo).unwrap();
    let git = |args: &[&str]| {
        let out = run_bounded(u.command("git").arg("-C").arg(&repo).args(args));
        assert!(out.status.success(), "git {args:?}: {}", show(&out));
    };
    git(&["init", "-q"]);
    git(&[
        "-c",
        "user.email=t@example.com",
        "-c",
        "user.name=t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "first",
    ]);
    std::fs::write(repo.join("new.txt"), "untracked\n").unwrap();
    let repo_s = repo.display().to_string();
    let opts = ["--sandbox-write", repo_s.as_str()];
    let args = json!({"repo_path": repo_s});

    let server = ["uvx", GIT, "--repository", repo_s.as_str()];
    let (file, digest, _) = u.capture_and_review("git", &opts, &server);
    let mut guarded = u.guarded(&file, &digest, "git", &opts, &server);
    let through = call(&mut guarded, "git_status", args.clone());
    assert_ne!(through["isError"], true, "{through}\n{}", guarded.stderr());
    assert!(through.to_string().contains("new.txt"), "{through}");
    let mut direct_peer = direct(&u, &file, "git", &["--repository", &repo_s]);
    assert_eq!(call(&mut direct_peer, "git_status", args.clone()), through);

    // The same install as a module of its virtual environment.
    let p = package_of(&file, "git");
    let python = u
        .path("store/pypi")
        .join(format!("mcp-server-git@{}", p["version"].as_str().unwrap()))
        .join("bin/python");
    let python = python.display().to_string();
    let module = [
        python.as_str(),
        "-m",
        "mcp_server_git",
        "--repository",
        repo_s.as_str(),
    ];
    let (file, digest, _) = u.capture_and_review("gitmodule", &opts, &module);
    let mut guarded = u.guarded(&file, &digest, "gitmodule", &opts, &module);
    assert_eq!(call(&mut guarded, "git_status", args), through);
}

/// A new release gets in only through `mcpguard update`: it resolves the package again, pins the
/// new version, carries the reviews of the tools that did not change, and the proxy then runs
/// the new install (and refuses the old request).
#[test]
fn update_pins_a_new_package_release_and_carries_the_unchanged_reviews() {
    let u = User::new();
    let old_spec = format!("{MEMORY}@2026.7.4");
    let (file, _, _) = u.capture_and_review("memory", &[], &["npx", "-y", &old_spec]);
    assert_eq!(package_of(&file, "memory")["version"], "2026.7.4");
    let before: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let new_spec = format!("{MEMORY}@{MEMORY_VERSION}");
    let out = run_bounded(
        u.mcpguard()
            .arg("update")
            .arg(&file)
            .args(["--server", "memory", "--yes"])
            .args(["--", "npx", "-y", &new_spec]),
    );
    assert!(out.status.success(), "update: {}", show(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!("package: {old_spec}")) && said.contains(&format!("-> {new_spec}")),
        "the update does not name the package change:\n{said}"
    );
    let after: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(
        after["servers"]["memory"]["package"]["version"],
        MEMORY_VERSION
    );
    let tools = |doc: &Value| -> std::collections::BTreeMap<String, Value> {
        doc["servers"]["memory"]["toolPages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|p| p["tools"].as_array().unwrap().clone())
            .map(|t| (t["name"].as_str().unwrap().to_string(), t))
            .collect()
    };
    let (old_tools, new_tools) = (tools(&before), tools(&after));
    let reviews = &after["servers"]["memory"]["reviews"];
    let mut carried = 0;
    for (name, tool) in &new_tools {
        if old_tools.get(name) == Some(tool) {
            carried += 1;
            assert_eq!(
                reviews[name], before["servers"]["memory"]["reviews"][name],
                "the review of unchanged {name} was not carried"
            );
        } else {
            assert!(
                reviews.get(name).is_none(),
                "changed {name} kept its review"
            );
        }
    }
    // The two releases list the same tools: every review is carried, and only the package
    // record (which the digest covers) changed.
    assert_eq!(carried, new_tools.len(), "reviews carried");
    let digest = String::from_utf8(out.stdout).unwrap().trim().to_string();
    // The old request no longer matches the pin; the new one starts the new install.
    let mut guarded = u.guarded(&file, &digest, "memory", &[], &["npx", "-y", &new_spec]);
    let init = guarded.initialize();
    assert!(init.get("result").is_some(), "{init}\n{}", guarded.stderr());
    let out = run_bounded(u.mcpguard().arg("--manifest").arg(&file).args([
        "--sha256", &digest, "--server", "memory", "--", "npx", "-y", &old_spec,
    ]));
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
}

/// A grant the server needs only for a call never shows at capture: the memory server starts
/// and lists its tools without its file, then fails the first call that opens it. mcpguard reads
/// the permission error in the tool's error text and says what the sandbox most likely denied
/// and which flag grants it (never echoing the error text itself).
#[test]
fn a_call_failing_on_a_path_the_sandbox_denied_is_explained() {
    let mut u = User::new();
    let memory_file = u.path("data/memory.jsonl");
    std::fs::write(&memory_file, "").unwrap();
    u.host_env
        .push(("MEMORY_FILE_PATH".into(), memory_file.clone()));
    let spec = format!("{MEMORY}@{MEMORY_VERSION}");
    let server = ["npx", "-y", spec.as_str()];
    let opts = ["--sandbox-env", "MEMORY_FILE_PATH"];
    let (file, digest, _) = u.capture_and_review("memory", &opts, &server);
    let mut guarded = u.guarded(&file, &digest, "memory", &opts, &server);
    let r = call(&mut guarded, "read_graph", json!({}));
    assert_eq!(r["isError"], true, "the file is not granted: {r}");
    let data = u.path("data").display().to_string();
    let said = guarded.wait_stderr("failed with a permission error");
    for want in [
        "the call of \"read_graph\" failed with a permission error in mcpguard's sandbox",
        &format!("{} (EACCES)", memory_file.display()),
        &format!("--sandbox-read {data}"),
        "mcpguard sandbox-check",
    ] {
        assert!(said.contains(want), "missing {want:?}:\n{said}");
    }
}

/// The pinned install is the server's code, granted to read and execute, never to write: a
/// server (here node itself, started the way the pinned command starts it, with the install's
/// script on its command line so the node preset grants the same tree) cannot change the code
/// that later runs are checked against, while the same write works unsandboxed.
#[test]
fn the_pinned_install_cannot_be_written_by_the_server() {
    let u = User::new();
    let spec = format!("{MEMORY}@{MEMORY_VERSION}");
    let (file, _, _) = u.capture_and_review("memory", &[], &["npx", "-y", &spec]);
    let pkg = u.memory_install().join("node_modules").join(MEMORY);
    assert_eq!(package_of(&file, "memory")["version"], MEMORY_VERSION);
    let script = pkg.join("package.json").display().to_string();
    let target = pkg.join("injected.js");
    let code = format!(
        "try {{ require('fs').writeFileSync({:?}, 'x'); console.log('WROTE') }} catch (e) {{ console.log(e.code) }}",
        target.display().to_string()
    );
    let sandboxed =
        run_bounded(
            u.mcpguard()
                .args(["sandbox-check", "--", "node", "-e", &code, &script]),
        );
    let said = String::from_utf8_lossy(&sandboxed.stdout);
    // Landlock refuses it (EACCES), and under the mount namespace the tree is read-only too
    // (EROFS, which the kernel reports first).
    assert!(
        !said.contains("WROTE") && (said.contains("EACCES") || said.contains("EROFS")),
        "{}",
        show(&sandboxed)
    );
    assert!(!target.exists());
    let direct = run_bounded(u.command("node").args(["-e", &code, &script]));
    assert!(
        String::from_utf8_lossy(&direct.stdout).contains("WROTE"),
        "unsandboxed the write works: {}",
        show(&direct)
    );
}

/// Issue 31: the pinned package is checked by its content, not its label. An entry point edited
/// in mcpguard's package store (or a file planted beside the package) keeps the version, the
/// lockfile and the `RECORD` text; before content pinning it ran as "the pinned" package. Now
/// the start is refused with both digests and what to do, and a fresh capture does not adopt
/// the edited install: it installs clean and records the clean content again.
#[test]
fn an_edited_install_in_the_package_store_is_refused_and_never_adopted() {
    let u = User::new();
    let spec = format!("{MEMORY}@{MEMORY_VERSION}");
    let server = ["npx", "-y", spec.as_str()];
    let (file, digest, _) = u.capture_and_review("memory", &[], &server);
    let pkg = u.memory_install().join("node_modules").join(MEMORY);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(pkg.join("package.json")).unwrap()).unwrap();
    let entry = pkg.join(
        manifest["bin"]
            .as_str()
            .unwrap_or_else(|| manifest["bin"]["mcp-server-memory"].as_str().unwrap()),
    );
    let original = std::fs::read(&entry).unwrap();
    // The attacker's line, after the `#!` line of the entry point.
    let text = String::from_utf8(original.clone()).unwrap();
    let (shebang, rest) = text.split_once('\n').unwrap();
    std::fs::write(
        &entry,
        format!("{shebang}\nconsole.error('EDITED-ENTRY-POINT-RAN');\n{rest}"),
    )
    .unwrap();
    let start = || {
        run_bounded(u.mcpguard().arg("--manifest").arg(&file).args([
            "--sha256", &digest, "--server", "memory", "--", "npx", "-y", &spec,
        ]))
    };
    let out = start();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("EDITED-ENTRY-POINT-RAN"),
        "the edited entry point ran as the pinned package:\n{}",
        show(&out)
    );
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let pinned = package_of(&file, "memory")["content"]
        .as_str()
        .expect("the package record holds the install's content digest")
        .to_string();
    assert!(pinned.starts_with("sha256:"), "{pinned}");
    for want in [
        "refusing to start the server",
        "are not the ones that were pinned",
        pinned.as_str(),
        "mcpguard update",
    ] {
        assert!(stderr.contains(want), "missing {want:?}:\n{stderr}");
    }
    // A capture now does not adopt the edited install: it installs the package clean, and the
    // content it records is the clean one.
    let again = u.path("again.json");
    let out = run_bounded(
        u.mcpguard()
            .args(["capture", "--server", "memory", "--out"])
            .arg(&again)
            .arg("--")
            .args(server),
    );
    assert!(out.status.success(), "capture: {}", show(&out));
    assert_eq!(package_of(&again, "memory")["content"], pinned.as_str());
    assert_eq!(
        std::fs::read(&entry).unwrap(),
        original,
        "the edit was adopted"
    );
    let out = start();
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("refusing"),
        "the clean install is refused: {}",
        show(&out)
    );

    // PyPI: a `.pth` file planted in site-packages runs at every interpreter start, yet leaves
    // the version and RECORD as they were.
    let server = ["uvx", TIME, "--local-timezone", "UTC"];
    let (file, digest, _) = u.capture_and_review("time", &[], &server);
    let version = package_of(&file, "time")["version"]
        .as_str()
        .unwrap()
        .to_string();
    let lib = u
        .path("store/pypi")
        .join(format!("mcp-server-time@{version}"))
        .join("lib");
    let site = std::fs::read_dir(&lib)
        .unwrap()
        .map(|e| e.unwrap().path().join("site-packages"))
        .find(|p| p.is_dir())
        .unwrap();
    std::fs::write(
        site.join("zz-planted.pth"),
        "import sys; sys.stderr.write('PLANTED-PTH-RAN\\n')\n",
    )
    .unwrap();
    let out = run_bounded(u.mcpguard().arg("--manifest").arg(&file).args([
        "--sha256",
        &digest,
        "--server",
        "time",
        "--",
        "uvx",
        TIME,
        "--local-timezone",
        "UTC",
    ]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("PLANTED-PTH-RAN"), "{}", show(&out));
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(
        stderr.contains("are not the ones that were pinned"),
        "{stderr}"
    );
    // `update` reinstalls clean too: the planted file is gone afterwards.
    let out = run_bounded(
        u.mcpguard()
            .arg("update")
            .arg(&file)
            .args(["--server", "time", "--yes", "--"])
            .args(server),
    );
    assert!(out.status.success(), "update: {}", show(&out));
    assert!(
        !site.join("zz-planted.pth").exists(),
        "update adopted the planted file"
    );
}

/// Issue 32: `lock check` and `check --server` compare a pinned npx/uvx server's package with
/// the install it runs. Before, a live capture had no package record, so every such server was
/// reported as drifted at `/package`. Now they are current, also on a fresh machine (an empty
/// package store: the pinned version is installed for the check), and red when the package
/// differs from the pin.
#[test]
fn lock_check_and_live_check_compare_pinned_packages() {
    let u = User::new();
    let memory = format!("{MEMORY}@{MEMORY_VERSION}");
    let (mem_file, mem_digest, _) = u.capture_and_review("memory", &[], &["npx", "-y", &memory]);
    let time = ["uvx", TIME, "--local-timezone", "UTC"];
    let (time_file, time_digest, _) = u.capture_and_review("time", &[], &time);
    let lock = u.path("mcpguard.lock");
    let write_lock = |mem_digest: &str, time_digest: &str| {
        std::fs::write(
            &lock,
            format!(
                "version = 1\n\n[servers.memory]\ncommand = [\"npx\", \"-y\", {memory:?}]\nsnapshot = \"memory.json\"\n\
                 sha256 = {mem_digest:?}\npackage = \"npm:{memory}\"\n\n[servers.time]\ncommand = {time:?}\n\
                 snapshot = \"time.json\"\nsha256 = {time_digest:?}\npackage = \"pypi:{TIME}\"\n"
            ),
        )
        .unwrap();
    };
    write_lock(&mem_digest, &time_digest);
    let lock_check = || run_bounded(u.mcpguard().args(["lock", "check"]).arg(&lock));
    let o = lock_check();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert!(text.contains("2 servers: 2 current"), "{text}");
    let live_check = |file: &Path, key: &str, server: &[&str]| {
        run_bounded(
            u.mcpguard()
                .arg("check")
                .arg(file)
                .args(["--server", key, "--"])
                .args(server),
        )
    };
    let o = live_check(&mem_file, "memory", &["npx", "-y", &memory]);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    let o = live_check(&time_file, "time", &time);
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));

    // A fresh checkout: no package store on this machine. The check installs the pinned
    // versions (offline, from the caches) and they are the pinned packages.
    std::fs::remove_dir_all(u.path("store")).unwrap();
    let o = lock_check();
    assert_eq!(o.status.code(), Some(0), "fresh machine: {}", show(&o));

    // The package changes: the registry's tarball for the pinned npm version is not the one
    // the snapshot pinned (here the pin's integrity is what changed, re-locked), and on a
    // fresh machine the check installs it and reports the drift at /package.
    let doc = |f: &Path| -> Value { serde_json::from_slice(&std::fs::read(f).unwrap()).unwrap() };
    let mut m = doc(&mem_file);
    m["servers"]["memory"]["package"]["integrity"] = json!("sha512-another-tarball");
    std::fs::write(&mem_file, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let hash = |f: &Path| {
        let o = run_bounded(u.mcpguard().arg("hash").arg(f));
        assert!(o.status.success(), "{}", show(&o));
        String::from_utf8(o.stdout).unwrap().trim().to_string()
    };
    let mem_digest = hash(&mem_file);
    write_lock(&mem_digest, &time_digest);
    std::fs::remove_dir_all(u.path("store")).unwrap();
    let o = lock_check();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(1), "{}", show(&o));
    assert!(
        text.contains("memory: DRIFTED")
            && text.contains("integrity")
            && text.contains("time: current"),
        "{text}"
    );
    // The PyPI package installed on this machine differs from its pin (its RECORD): red too,
    // in `lock check` and in `check --server`.
    let mut t = doc(&time_file);
    t["servers"]["time"]["package"]["integrity"] = json!("record-sha256:00");
    std::fs::write(&time_file, serde_json::to_vec_pretty(&t).unwrap()).unwrap();
    let time_digest = hash(&time_file);
    write_lock(&mem_digest, &time_digest);
    let o = lock_check();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(2), "{}", show(&o));
    assert!(
        text.contains("time: FAILED") && text.contains("record-sha256:00"),
        "{text}"
    );
    let o = live_check(&time_file, "time", &time);
    assert_ne!(o.status.code(), Some(0), "{}", show(&o));
}

/// A pinned PyPI install never builds a source distribution: building one runs the package's own
/// build backend, outside the sandbox and before any review. The attack is a package offered only
/// as an sdist whose in-tree build backend writes a file the moment it is imported; `capture`
/// must refuse it, say why and how to install it by hand, and the backend must never run.
#[test]
fn a_source_only_package_is_refused_and_its_build_script_never_runs() {
    let u = User::new();
    let links = u.path("links");
    let src = u.path("src/evilpkg-1.0");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::create_dir_all(&links).unwrap();
    let canary = u.path("built-outside-the-sandbox");
    std::fs::write(
        src.join("pyproject.toml"),
        "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n\n[project]\nname = \"evilpkg\"\nversion = \"1.0\"\n",
    )
    .unwrap();
    std::fs::write(
        src.join("backend.py"),
        format!(
            "open({:?}, 'w').write('ran')\ndef get_requires_for_build_wheel(config_settings=None):\n    return []\n",
            canary.display().to_string()
        ),
    )
    .unwrap();
    std::fs::write(
        src.join("PKG-INFO"),
        "Metadata-Version: 2.1\nName: evilpkg\nVersion: 1.0\n",
    )
    .unwrap();
    let tar = Command::new("tar")
        .arg("czf")
        .arg(links.join("evilpkg-1.0.tar.gz"))
        .arg("-C")
        .arg(u.path("src"))
        .arg("evilpkg-1.0")
        .status()
        .unwrap();
    assert!(tar.success());
    let file = u.path("evil.json");
    let out = run_bounded(
        u.mcpguard()
            .env("UV_FIND_LINKS", &links)
            .env("UV_NO_INDEX", "1")
            .args(["capture", "--server", "evil", "--out"])
            .arg(&file)
            .args(["--", "uvx", "evilpkg==1.0"]),
    );
    assert!(
        !canary.exists(),
        "the package's build backend ran outside the sandbox: {}",
        show(&out)
    );
    assert!(!out.status.success(), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("wheels only") && stderr.contains("uv venv"),
        "the refusal says why and how to install it by hand: {}",
        show(&out)
    );
}

/// The in-tree PEP 517 backend of a test sdist: it writes `canary` the moment a build imports
/// it (so a test sees whether its build script ran), and builds a pure-python wheel of package
/// `name` 1.0 that requires `deps` and installs a console script `name` running a minimal MCP
/// server over stdio (one tool, `hello`).
fn sdist(links: &Path, src: &Path, name: &str, deps: &[&str], canary: &Path) {
    let dir = src.join(format!("{name}-1.0"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("pyproject.toml"),
        format!("[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n\n[project]\nname = \"{name}\"\nversion = \"1.0\"\ndependencies = {deps:?}\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("PKG-INFO"),
        format!("Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"),
    )
    .unwrap();
    let server = r#"import json, sys
def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        m = json.loads(line)
        if 'id' not in m:
            continue
        method = m.get('method')
        if method == 'initialize':
            r = {'protocolVersion': m['params'].get('protocolVersion', '2025-06-18'), 'capabilities': {'tools': {}}, 'serverInfo': {'name': 'NAME', 'version': '1.0'}}
        elif method == 'tools/list':
            r = {'tools': [{'name': 'hello', 'description': 'Says hello.', 'inputSchema': {'type': 'object', 'properties': {}}}]}
        elif method == 'ping':
            r = {}
        else:
            print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'error': {'code': -32601, 'message': 'unknown method'}}), flush=True)
            continue
        print(json.dumps({'jsonrpc': '2.0', 'id': m['id'], 'result': r}), flush=True)
"#
    .replace("NAME", name);
    let backend = format!(
        r#"import base64, hashlib, os, zipfile
NAME = {name:?}
open({canary:?}, 'a').write('built ' + NAME + '\n')
SERVER = {server:?}
DEPS = {deps:?}
def get_requires_for_build_wheel(config_settings=None):
    return []
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    info = NAME + '-1.0.dist-info'
    files = {{
        NAME + '/__init__.py': SERVER.encode(),
        info + '/METADATA': ('Metadata-Version: 2.1\nName: ' + NAME + '\nVersion: 1.0\n' + ''.join('Requires-Dist: ' + d + '\n' for d in DEPS)).encode(),
        info + '/WHEEL': b'Wheel-Version: 1.0\nGenerator: mcpguard-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n',
        info + '/entry_points.txt': ('[console_scripts]\n' + NAME + ' = ' + NAME + ':main\n').encode(),
    }}
    name = NAME + '-1.0-py3-none-any.whl'
    record = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), 'w') as z:
        for path, data in files.items():
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()
            record.append(path + ',sha256=' + digest + ',' + str(len(data)))
        record.append(info + '/RECORD,,')
        z.writestr(info + '/RECORD', '\n'.join(record) + '\n')
    return name
"#,
        canary = canary.display().to_string(),
    );
    std::fs::write(dir.join("backend.py"), backend).unwrap();
    let tar = Command::new("tar")
        .arg("czf")
        .arg(links.join(format!("{name}-1.0.tar.gz")))
        .arg("-C")
        .arg(src)
        .arg(format!("{name}-1.0"))
        .status()
        .unwrap();
    assert!(tar.success());
}

/// `--build-from-source` allows exactly the packages it names: with two source-only packages
/// (a server and its dependency), naming the server builds it, and the dependency is still
/// refused with its build script never run. Naming both installs them; the snapshot's package
/// record says what was built from source (`builtFromSource`, shown by `show` and covered by
/// the digest), and a start refuses the install when the record does not say so.
#[test]
fn build_from_source_builds_only_what_it_names_and_the_record_says_so() {
    let mut u = User::new();
    let links = u.path("links");
    let src = u.path("src");
    std::fs::create_dir_all(&links).unwrap();
    let good = u.path("built-goodpkg");
    let other = u.path("built-otherpkg");
    sdist(&links, &src, "goodpkg", &["otherpkg"], &good);
    sdist(&links, &src, "otherpkg", &[], &other);
    // A cache of its own (the built wheels must not land in the shared runner cache), the
    // sdists as the only index.
    u.host_env.push(("UV_CACHE_DIR".into(), u.path("uv-cache")));
    u.host_env.push(("UV_FIND_LINKS".into(), links.clone()));
    u.host_env.push(("UV_NO_INDEX".into(), PathBuf::from("1")));
    let file = u.path("one.json");
    let out = run_bounded(
        u.mcpguard()
            .args(["capture", "--server", "good", "--out"])
            .arg(&file)
            .args([
                "--build-from-source",
                "goodpkg",
                "--",
                "uvx",
                "goodpkg==1.0",
            ]),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{}", show(&out));
    assert!(
        !other.exists(),
        "the build script of otherpkg, which was not named, ran outside the sandbox: {}",
        show(&out)
    );
    assert!(
        stderr.contains("--build-from-source otherpkg") && stderr.contains("wheels only"),
        "the refusal names the package to allow: {}",
        show(&out)
    );
    assert!(!file.exists(), "{}", show(&out));

    // Both named: both built, recorded, shown.
    let opts = [
        "--build-from-source",
        "goodpkg",
        "--build-from-source",
        "otherpkg",
    ];
    let server = ["uvx", "goodpkg==1.0"];
    let (file, digest, _) = u.capture_and_review("good", &opts, &server);
    assert!(good.exists() && other.exists());
    let record = package_of(&file, "good");
    assert_eq!(
        record["builtFromSource"],
        json!(["goodpkg", "otherpkg"]),
        "{record}"
    );
    let shown = run_bounded(u.mcpguard().arg("show").arg(&file));
    assert!(
        String::from_utf8_lossy(&shown.stdout).contains("builtFromSource"),
        "{}",
        show(&shown)
    );
    let run = |file: &Path, digest: &str| {
        let mut cmd = u.mcpguard();
        cmd.arg("--manifest")
            .arg(file)
            .args(["--sha256", digest, "--server", "good", "--"])
            .args(server)
            .stdin(std::process::Stdio::null());
        run_bounded(&mut cmd)
    };
    let started = run(&file, &digest);
    assert!(
        !String::from_utf8_lossy(&started.stderr).contains("built from source for"),
        "{}",
        show(&started)
    );
    // The same snapshot with a record that does not say what was built from source (one from
    // before mcpguard recorded it, or edited and pinned again): the start is refused.
    let mut doc: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    doc["servers"]["good"]["package"]
        .as_object_mut()
        .unwrap()
        .remove("builtFromSource");
    let edited = u.path("edited.json");
    std::fs::write(&edited, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let checked = run_bounded(u.mcpguard().arg("check").arg(&edited));
    let edited_digest = String::from_utf8_lossy(&checked.stdout).trim().to_string();
    assert_eq!(edited_digest.len(), 64, "{}", show(&checked));
    let refused = run(&edited, &edited_digest);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{}", show(&refused));
    assert!(
        stderr.contains("was built from source for goodpkg, otherpkg")
            && stderr.contains("says nothing (wheels only)")
            && stderr.contains("--build-from-source"),
        "{stderr}"
    );
}
