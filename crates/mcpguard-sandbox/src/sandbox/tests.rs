use super::prepare::rights;
use super::*;

fn os(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    pairs
        .iter()
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}

#[test]
fn the_environment_keeps_only_named_variables() {
    let vars = os(&[
        ("PATH", "/usr/bin"),
        ("HOME", "/home/u"),
        ("LC_ALL", "C"),
        ("GITHUB_TOKEN", "secret"),
        ("LC_SECRET_TOKEN", "secret"),
        ("TMPDIR", "/tmp"),
        ("PATHX", "x"),
    ]);
    let allow: Vec<String> = ["PATH", "HOME", "LC_ALL", "TMPDIR"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let plan = filter_env(&vars, &allow);
    assert_eq!(
        plan.passed,
        os(&[("PATH", "/usr/bin"), ("HOME", "/home/u"), ("LC_ALL", "C")])
    );
    assert_eq!(
        plan.removed,
        ["GITHUB_TOKEN", "LC_SECRET_TOKEN", "TMPDIR", "PATHX"]
    );
}

#[test]
fn rights_follow_the_access_class_and_the_file_type() {
    use landlock::*;
    let h = handled_fs(7);
    assert_eq!(rights(Access::Read, h, true), FS_READ_FILE | FS_READ_DIR);
    assert_eq!(rights(Access::Read, h, false), FS_READ_FILE);
    assert_eq!(rights(Access::Execute, h, false), FS_READ_FILE | FS_EXECUTE);
    let rw = rights(Access::ReadWrite, h, true);
    assert_eq!(rw & FS_EXECUTE, 0, "nothing writable is executable");
    assert_ne!(
        rw & (FS_MAKE_REG | FS_REMOVE_FILE | FS_TRUNCATE | FS_REFER),
        0
    );
    assert_eq!(
        rights(Access::ReadWrite, h, false),
        FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE
    );
    let no_devices = FS_MAKE_CHAR | FS_MAKE_BLOCK | FS_IOCTL_DEV;
    assert_eq!(rights(Access::ReadWriteExecute, h, true), h & !no_devices);
    assert_eq!(rw & no_devices, 0, "no device nodes, no device ioctls");
    // ABI 1 handles neither truncate nor refer, so no rule may carry them.
    assert_eq!(
        rights(Access::ReadWrite, handled_fs(1), true) & FS_TRUNCATE,
        0
    );
}

#[test]
fn automatic_rules_never_grant_the_root_or_home() {
    let home = Path::new("/home/u");
    assert!(too_broad(Path::new("/"), Some(home)));
    assert!(too_broad(Path::new("/home"), Some(home)));
    assert!(too_broad(Path::new("/home/u"), Some(home)));
    assert!(!too_broad(Path::new("/home/u/bin"), Some(home)));
    assert!(!too_broad(Path::new("/usr/bin"), Some(home)));
}

fn request(mode: SandboxMode) -> Request {
    let dir = tempfile::tempdir().unwrap();
    let profile = Sandbox {
        mode,
        preset: Preset::None,
        read: vec![crate::policy::PolicyPath::parse("/nonexistent-mcpguard-test").unwrap()],
        ..Sandbox::default()
    };
    let ctx = PathContext {
        tmpdir: Some(dir.path().to_path_buf()),
        home: Some(PathBuf::from("/nonexistent-home")),
        ..PathContext::default()
    };
    let env = os(&[("PATH", "/usr/bin"), ("API_KEY", "x")]);
    resolve(&Inputs {
        profile: &profile,
        program: Some(Path::new("/usr/bin/true")),
        args: &[],
        extra: &Extra::default(),
        ctx: &ctx,
        env: &env,
    })
    .unwrap()
}

fn kernel(abi: u32, seccomp: bool) -> Kernel {
    Kernel {
        landlock: if abi == 0 {
            landlock::Abi::Unavailable("no Landlock here".into())
        } else {
            landlock::Abi::Available(abi)
        },
        seccomp,
        release: "test".into(),
        namespaces: Ok(()),
        root: false,
        memfd_noexec_seal: true,
        cgroup: Err("cgroup v1 only".into()),
        core_pipe: None,
    }
}

/// A core pattern that pipes to a program ignores RLIMIT_CORE 0: the report must not claim
/// "no core dumps" there, and names the pattern instead.
#[test]
fn a_piped_core_pattern_makes_no_core_dumps_a_residual_risk() {
    let req = request(SandboxMode::Require);
    let find = |k: &Kernel| {
        let r = plan(&req, k);
        let l = r.lines.iter().find(|l| l.id == "limits.core").unwrap();
        (l.status.clone(), r.text())
    };
    let (file, _) = find(&kernel(7, true));
    assert_eq!(file, Status::Enforced);
    let mut piped = kernel(7, true);
    piped.core_pipe = Some("|/usr/lib/systemd/systemd-coredump %P".into());
    let (status, text) = find(&piped);
    assert!(
        matches!(&status, Status::Residual(why) if why.contains("systemd-coredump")),
        "{text}"
    );
}

#[test]
fn the_report_tells_what_each_abi_enforces() {
    let req = request(SandboxMode::Require);
    let full = plan(&req, &kernel(7, true));
    assert!(full.dropped().is_empty(), "{}", full.text());
    let text = full.text();
    assert!(text.contains("/nonexistent-mcpguard-test"), "{text}");
    assert!(text.contains("skipped: does not exist"), "{text}");
    assert!(text.contains("removed: API_KEY"), "{text}");
    assert!(text.contains("passed: PATH, TMPDIR"), "{text}");
    assert!(
        !text.contains("x\n") && !text.contains("=x"),
        "values never appear"
    );

    let dropped = |abi, seccomp| -> Vec<String> {
        plan(&req, &kernel(abi, seccomp))
            .dropped()
            .iter()
            .map(|l| l.rule.clone())
            .collect()
    };
    let five = dropped(5, true);
    assert_eq!(five.len(), 2, "{five:?}");
    assert!(
        five.iter().all(|r| r.contains("outside the sandbox")),
        "{five:?}"
    );
    let four = dropped(4, true);
    assert!(four.iter().any(|r| r.contains("ioctl")), "{four:?}");
    let three = dropped(3, true);
    assert!(three.iter().any(|r| r.contains("TCP connect")), "{three:?}");
    assert!(dropped(2, true).iter().any(|r| r.contains("truncation")));
    let none = dropped(0, true);
    assert!(none.iter().any(|r| r.contains("/usr")), "{none:?}");
    let no_seccomp = dropped(7, false);
    assert_eq!(no_seccomp.len(), 13, "{no_seccomp:?}");
    assert!(no_seccomp.iter().any(|r| r.contains("set-user-ID")));
    assert!(no_seccomp.iter().any(|r| r.starts_with("deny by default")));
    assert!(no_seccomp
        .iter()
        .any(|r| r.contains("newer than the filter")));
    assert!(no_seccomp.iter().any(|r| r.contains("UDP")));
    assert!(no_seccomp.iter().any(|r| r.contains("TCP Fast Open")));
    assert!(no_seccomp.iter().any(|r| r.contains("keyrings")));
}

#[test]
fn the_report_names_what_stays_open_and_never_claims_every_rule() {
    let req = request(SandboxMode::Require);
    let full = plan(&req, &kernel(7, true));
    let text = full.text();
    assert!(!text.contains("every rule"), "{text}");
    let residual: Vec<&str> = full.residual().iter().map(|l| l.rule.as_str()).collect();
    assert!(
        residual.iter().any(|r| r.starts_with("stat, access")),
        "{residual:?}"
    );
    assert!(
        full.lines
            .iter()
            .any(|l| l.rule.starts_with("deny by default") && l.status == Status::Enforced),
        "{text}"
    );
    // stat, /proc's process list and the memory of the whole server (no cgroup).
    assert!(text.contains("3 residual risk(s)"), "{text}");
    // As root the server runs as nobody by default (issue 31), and its processes count...
    let mut root = kernel(7, true);
    root.root = true;
    let as_root = plan(&req, &root);
    assert!(
        as_root.lines.iter().any(|l| l
            .rule
            .starts_with("root's server runs as uid and gid 65534")
            && l.status == Status::Enforced),
        "{}",
        as_root.text()
    );
    // ...and with drop_root = false, uid 0's file permissions and its exemption from the
    // process limit are named.
    let mut keep = request(SandboxMode::Require);
    keep.drop_root = false;
    let kept = plan(&keep, &root);
    let open: Vec<&str> = kept.residual().iter().map(|l| l.rule.as_str()).collect();
    assert!(
        open.iter().any(|r| r.starts_with("uid 0 keeps")),
        "{open:#?}"
    );
    assert!(open.iter().any(|r| r.starts_with("processes")), "{open:#?}");
    assert!(as_root.text().contains("3 residual risk(s)"));
    // Without namespaces the metadata, ld.so, setsid, IPC, later mounts, process count and
    // temporary folder size gaps are named, with the reason.
    let mut k = kernel(7, true);
    k.namespaces = Err("no user namespaces here".into());
    k.memfd_noexec_seal = false;
    let without = plan(&req, &k);
    let open: Vec<String> = without
        .residual()
        .iter()
        .map(|l| format!("{} {:?}", l.rule, l.status))
        .collect();
    assert_eq!(open.len(), 11, "{open:#?}");
    for want in [
        "chmod",
        "ld.so",
        "setsid",
        "MFD_NOEXEC_SEAL",
        "no user namespaces here",
        "SysV shared memory",
        "mounts later",
        "fork loop",
        "no size limit",
    ] {
        assert!(open.iter().any(|r| r.contains(want)), "{want}: {open:#?}");
    }
    assert!(
        without.dropped().is_empty(),
        "residual risks do not stop require mode"
    );
    assert!(without.text().contains("11 residual risk(s)"));
}

#[test]
fn require_refuses_what_the_kernel_cannot_enforce_and_says_what_to_do() {
    let err = prepare(request(SandboxMode::Require), &kernel(0, true)).unwrap_err();
    assert!(err.0.contains("sandbox.mode = \"require\""), "{}", err.0);
    assert!(err.0.contains("Landlock ABI 0"), "{}", err.0);
    assert!(err.0.contains("best-effort"), "{}", err.0);
    let err = prepare(request(SandboxMode::Require), &kernel(5, true)).unwrap_err();
    assert!(
        err.0.contains("signal scoping needs Landlock ABI 6"),
        "{}",
        err.0
    );
    // best-effort starts with what there is, and the report keeps what was dropped.
    let p = prepare(request(SandboxMode::BestEffort), &kernel(0, true)).unwrap();
    assert!(p.ruleset_fd().is_none());
    assert!(!p.report.dropped().is_empty());
}

/// A variable a preset granted a path from reaches the server with that value, although the
/// allowlist does not name it (for uv's cache: the server's private cache, not the user's);
/// one whose path was not granted (too broad) stays removed.
#[test]
fn variables_a_preset_granted_a_path_from_are_passed() {
    let dir = tempfile::tempdir().unwrap();
    let uv_cache = dir.path().join("uv-cache");
    std::fs::create_dir(&uv_cache).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let env = os(&[
        ("PATH", "/usr/bin"),
        ("UV_CACHE_DIR", uv_cache.to_str().unwrap()),
        ("XDG_DATA_HOME", "/"),
        ("SECRET", "x"),
    ]);
    let profile = Sandbox {
        mode: SandboxMode::Require,
        preset: Preset::Python,
        env: vec!["PATH".into()],
        ..Sandbox::default()
    };
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let ctx = PathContext {
        tmpdir: Some(tmp),
        home: Some(home),
        data_home: Some(PathBuf::from("/")),
        ..PathContext::default()
    };
    let req = resolve(&Inputs {
        profile: &profile,
        program: Some(Path::new("/usr/bin/python3")),
        args: &[],
        extra: &Extra::default(),
        ctx: &ctx,
        env: &env,
    })
    .unwrap();
    let passed: Vec<&str> = req
        .env
        .passed
        .iter()
        .map(|(k, _)| k.to_str().unwrap())
        .collect();
    assert!(passed.contains(&"UV_CACHE_DIR"), "{passed:?}");
    // uv's own cache is granted read and execute only, and uv inside the sandbox is pointed at
    // the server's private cache, which is the one granted for write (issue 31).
    let rule = |p: &Path| req.paths.iter().find(|r| r.path == p);
    assert_eq!(rule(&uv_cache).map(|r| r.access), Some(Access::Execute));
    let private = req
        .paths
        .iter()
        .find(|r| r.access == Access::ReadWrite && r.origin.contains("private cache"))
        .expect("the private cache is granted");
    assert!(
        req.env.passed.contains(&(
            OsString::from("UV_CACHE_DIR"),
            private.path.join("uv").into()
        )),
        "with the private value: {:?}",
        req.env.passed
    );
    assert!(!req
        .paths
        .iter()
        .any(|r| r.access == Access::ReadWriteExecute));
    assert!(!req.env.removed.contains(&"UV_CACHE_DIR".to_string()));
    // XDG_DATA_HOME=/ made $XDG_DATA_HOME/uv = /uv, which does not exist: not granted, not passed.
    assert!(req.env.removed.contains(&"XDG_DATA_HOME".to_string()));
    assert!(req.env.removed.contains(&"SECRET".to_string()));
    let text = plan(&req, &kernel(7, true)).text();
    assert!(
        text.contains(
            "UV_CACHE_DIR passed with the value a preset granted (preset python: the server's private cache"
        ),
        "{text}"
    );
}

#[test]
fn withheld_variables_are_those_set_for_this_server_only() {
    let e = |k: &str, v: &str| (OsString::from(k), OsString::from(v));
    let ours = vec![
        e("PATH", "/bin"),
        e("MEMORY_FILE_PATH", "/m"),
        e("HOST_WIDE", "1"),
        e("CHANGED", "new"),
        e("LC_ALL", "C"),
        e("PASSED", "x"),
    ];
    let passed = vec![e("PATH", "/bin"), e("PASSED", "x")];
    let parent = vec![e("HOST_WIDE", "1"), e("CHANGED", "old")];
    assert_eq!(
        crate::sandbox::withheld_notable(&ours, &passed, Some(&parent)),
        ["CHANGED", "MEMORY_FILE_PATH"]
    );
    assert_eq!(
        crate::sandbox::withheld_notable(&ours, &passed, None),
        ["CHANGED", "HOST_WIDE", "MEMORY_FILE_PATH"]
    );
}

#[test]
fn the_memory_of_the_whole_server_is_never_claimed_without_a_cgroup() {
    let req = request(SandboxMode::Require);
    let line = |k: &Kernel| {
        plan(&req, k)
            .lines
            .into_iter()
            .find(|l| l.rule.contains("(a cgroup)"))
            .expect("the cgroup line")
    };
    let v1 = line(&kernel(7, true));
    assert!(
        matches!(&v1.status, Status::Residual(why) if why.contains("cgroup v1 only") && why.contains("RLIMIT_DATA")),
        "{v1:?}"
    );
    // Delegated or not, mcpguard creates no cgroup, so the line stays a residual risk.
    let mut k = kernel(7, true);
    k.cgroup = Ok(PathBuf::from("/sys/fs/cgroup/user.slice/me"));
    let v2 = line(&k);
    assert!(
        matches!(&v2.status, Status::Residual(why) if why.contains("/sys/fs/cgroup/user.slice/me") && why.contains("does not create cgroups")),
        "{v2:?}"
    );
    // The detection runs on this machine without failing (its answer depends on the machine).
    let _ = super::isolate::delegated_cgroup();
}

/// Every id `plan` emits over a matrix of requests and kernels: every key of the profile that
/// changes a line on and off, root or not, with and without namespaces, Landlock ABI 0, 4 and
/// 7, with and without seccomp and `MFD_NOEXEC_SEAL`. Returns (ids ever enforced, all ids).
fn report_ids() -> (
    std::collections::BTreeSet<&'static str>,
    std::collections::BTreeSet<&'static str>,
) {
    use crate::policy::Limit;
    let mut enforced = std::collections::BTreeSet::new();
    let mut all = std::collections::BTreeSet::new();
    for open in [false, true] {
        let mut req = request(SandboxMode::Require);
        req.allow_udp = open;
        req.allow_unix_sockets = open;
        req.allow_other_sockets = open;
        req.scope_signals = !open;
        req.scope_abstract_unix_sockets = !open;
        req.drop_root = !open;
        req.tcp_bind = if open { vec![8080] } else { Vec::new() };
        req.connect = vec![crate::policy::Destination::parse("127.0.0.1:5432").unwrap()];
        // Open, `tcp_connect` also lists the destination's port: only the port holds then.
        req.tcp_connect_any = if open { vec![5432] } else { Vec::new() };
        let limit = if open { Limit::Inherit } else { Limit::Max(64) };
        req.limits = crate::policy::SandboxLimits {
            open_files: limit,
            processes: limit,
            address_space_mb: limit,
            data_mb: limit,
            tmp_mb: limit,
            core_dumps: open,
        };
        req.env.for_grants = vec![("UV_CACHE_DIR".into(), "preset python".into())];
        req.env.for_run = vec!["MEMORY_FILE_PATH".into()];
        req.pins = vec![pins::Pins {
            grant: PathBuf::from("/nonexistent-grant"),
            read_only: if open {
                Vec::new()
            } else {
                vec![PathBuf::from("/nonexistent-grant/.git/hooks")]
            },
            git: if open {
                Vec::new()
            } else {
                vec![PathBuf::from("/nonexistent-grant/.git")]
            },
            ..pins::Pins::default()
        }];
        for abi in [0, 4, 7] {
            for seccomp in [false, true] {
                for root in [false, true] {
                    for namespaces in [true, false] {
                        for seal in [false, true] {
                            let mut k = kernel(abi, seccomp);
                            k.root = root;
                            k.memfd_noexec_seal = seal;
                            if !namespaces {
                                k.namespaces = Err("no user namespaces here".into());
                            }
                            for l in plan(&req, &k).lines {
                                all.insert(l.id);
                                if l.status == Status::Enforced {
                                    enforced.insert(l.id);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    (enforced, all)
}

/// Issue 32's mechanism for the sandbox: docs/threat-model.md's table "Every enforced sandbox
/// rule and the probe that proves it" has a row for every rule id the report can print as
/// `[enforced]`, naming integration tests that exist (`module::function`, a `fn function(` in
/// `tests/integration/module.rs`), and no row for an id the report never prints. A rule that
/// cannot be proven is reported as a residual risk, not enforced.
#[test]
fn every_rule_the_report_can_enforce_has_a_probe_test() {
    // This crate is `crates/mcpguard-sandbox` in the repository.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    let doc = std::fs::read_to_string(root.join("docs/threat-model.md")).unwrap();
    let (_, table) = doc
        .split_once("## Every enforced sandbox rule and the probe that proves it")
        .expect("docs/threat-model.md has the table of sandbox rules and tests");
    let table = table.split("\n#").next().unwrap_or(table);
    let rows: std::collections::BTreeMap<String, String> = table
        .lines()
        .filter_map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let id = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((id.to_string(), cells.get(3)?.to_string()))
        })
        .collect();
    let (enforced, all) = report_ids();
    assert!(
        enforced.len() > 30,
        "the matrix reaches the rules: {enforced:?}"
    );
    let mut problems = Vec::new();
    for id in &enforced {
        let Some(tests) = rows.get(*id) else {
            problems.push(format!("{id}: can be printed as enforced but has no row"));
            continue;
        };
        if tests.is_empty() || tests == "none" {
            problems.push(format!("{id}: names no test"));
            continue;
        }
        for named in tests.split(", ") {
            let named = named.trim_matches('`');
            let Some((module, function)) = named.rsplit_once("::") else {
                problems.push(format!("{id}: {named:?} is not module::function"));
                continue;
            };
            let file = root.join(format!("tests/integration/{module}.rs"));
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            if !text.contains(&format!("fn {function}(")) {
                problems.push(format!("{id}: no test {named} in {}", file.display()));
            }
        }
    }
    // The prose above the table lists the ids never printed as enforced: it must be exactly
    // `all − enforced`, so that it cannot drift either.
    let (_, after) = doc
        .split_once("Ids the report only prints as dropped, skipped or residual (")
        .expect("docs/threat-model.md lists the ids never printed as enforced");
    let listed: std::collections::BTreeSet<&str> = after
        .split_once(')')
        .map_or("", |(list, _)| list)
        .split(',')
        .map(|id| id.trim().trim_matches('`'))
        .collect();
    let never: std::collections::BTreeSet<&str> = all.difference(&enforced).copied().collect();
    if listed != never {
        problems.push(format!(
            "docs/threat-model.md lists {listed:?} as never enforced; the report never prints {never:?} as enforced"
        ));
    }
    for id in rows.keys() {
        if !all.contains(id.as_str()) {
            problems.push(format!("{id}: a row for an id the report never prints"));
        } else if !enforced.contains(id.as_str()) {
            problems.push(format!(
                "{id}: a row for a rule the report never prints as enforced"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Issue 33: a destination's address is enforced where Landlock confines TCP and seccomp is
/// there (mcpguard makes the connect), dropped without seccomp, and a residual risk when
/// `sandbox.tcp_connect` opens its port to every address.
#[test]
fn the_report_says_which_destinations_are_enforced_by_address() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = PathContext {
        tmpdir: Some(dir.path().to_path_buf()),
        home: Some(PathBuf::from("/nonexistent-home")),
        ..PathContext::default()
    };
    let dest = |s: &str| crate::policy::Destination::parse(s).unwrap();
    let profile = Sandbox {
        preset: Preset::None,
        tcp_connect: vec![80],
        connect: vec![dest("127.0.0.1:5432"), dest("127.0.0.1:80")],
        ..Sandbox::default()
    };
    let env = os(&[("PATH", "/usr/bin")]);
    let req = resolve(&Inputs {
        profile: &profile,
        program: Some(Path::new("/usr/bin/true")),
        args: &[],
        extra: &Extra {
            connect: vec![dest("localhost:8080")],
            ..Extra::default()
        },
        ctx: &ctx,
        env: &env,
    })
    .unwrap();
    let shown: Vec<String> = req.by_address().iter().map(|d| d.to_string()).collect();
    assert_eq!(shown, ["127.0.0.1:5432", "localhost:8080"]);
    let line = |r: &Report, what: &str| {
        r.lines
            .iter()
            .find(|l| l.rule.contains(what))
            .cloned()
            .unwrap_or_else(|| panic!("no line with {what}:\n{}", r.text()))
    };
    let full = plan(&req, &kernel(7, true));
    let l = line(
        &full,
        "127.0.0.1:5432, localhost:8080 (address and port enforced",
    );
    assert_eq!(l.status, Status::Enforced);
    let l = line(&full, "--sandbox-connect): 127.0.0.1:80");
    assert!(
        matches!(&l.status, Status::Residual(why) if why.contains("every address")),
        "{l:?}"
    );
    let no_seccomp = plan(&req, &kernel(7, false));
    let l = line(&no_seccomp, "(address and port enforced");
    assert!(matches!(l.status, Status::Dropped(_)), "{l:?}");
}

/// Issue 31, without seccomp: a writable grant root's server reaches only through an ID-mapped
/// folder (here under a 0700 folder) is refused before anything is mapped, since nothing would
/// refuse the set-user-ID bit on a file that is root's on the host. With seccomp the same
/// grant passes this check (whatever the mounts then say on this machine).
#[test]
fn root_server_without_seccomp_refuses_a_mapped_writable_grant() {
    use std::os::unix::fs::PermissionsExt;
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let grant = top.path().join("cache");
    std::fs::create_dir(&grant).unwrap();
    let profile = Sandbox {
        mode: SandboxMode::Require,
        preset: Preset::None,
        read_write: vec![crate::policy::PolicyPath::parse(grant.to_str().unwrap()).unwrap()],
        ..Sandbox::default()
    };
    let private = tempfile::tempdir().unwrap();
    let ctx = PathContext {
        tmpdir: Some(private.path().to_path_buf()),
        home: Some(PathBuf::from("/nonexistent-home")),
        ..PathContext::default()
    };
    let env = os(&[("PATH", "/usr/bin")]);
    let req = resolve(&Inputs {
        profile: &profile,
        program: Some(Path::new("/usr/bin/true")),
        args: &[],
        extra: &Extra::default(),
        ctx: &ctx,
        env: &env,
    })
    .unwrap();
    let points: Vec<PathBuf> = prepare::idmap_points(&req)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    assert_eq!(points, vec![top.path().canonicalize().unwrap()]);
    let err = prepare::root_server_idmaps(&req, false).unwrap_err().0;
    assert!(err.contains(grant.to_str().unwrap()), "{err}");
    assert!(err.contains("seccomp"), "{err}");
    assert!(err.contains("sandbox.drop_root = false"), "{err}");
    // The filter stops new set-ID bits only: one already in a writable grant is named.
    let text = plan(&req, &kernel(7, true)).text();
    assert!(
        text.contains(&format!(
            "set-user-ID and set-group-ID files already inside the writable grants {}  [RESIDUAL RISK: ",
            grant.display()
        )) && text.contains("no new set-user-ID or set-group-ID bit"),
        "{text}"
    );
    if let Err(e) = prepare::root_server_idmaps(&req, true) {
        assert!(!e.0.contains("seccomp filter"), "{}", e.0);
    }
}
