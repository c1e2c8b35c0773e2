//! The sandbox report: what the request asks and what this kernel enforces of it, rule by rule
//! ([`plan`], pure), as text for `mcpguard sandbox-check`, one line for the start-up diagnostics
//! and JSON. A rule is enforced, dropped (the kernel cannot), skipped (nothing to enforce) or a
//! residual risk (a known way out that nothing available closes), and the verdict never claims
//! more than that. It knows the request and the kernel, never the child.

use std::fmt::Write as _;

use serde::Serialize;

use super::{landlock, Kernel, PathState, Request};
use crate::policy::{Limit, Preset, SandboxMode};

/// What happens to one rule on this kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "reason", rename_all = "kebab-case")]
pub enum Status {
    Enforced,
    /// Asked for, but this kernel cannot enforce it.
    Dropped(String),
    /// Nothing to enforce (a path that does not exist, something the policy allows).
    Skipped(String),
    /// A known way out that nothing available here closes: named so that the report never
    /// claims more than it enforces. It does not stop `require` mode (it is not a rule of the
    /// profile this kernel refuses, but a limit of what Linux offers this user).
    Residual(String),
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Line {
    /// The rule's stable name (`layer.what`), the same whatever the line's wording or status:
    /// docs/threat-model.md's table "Every enforced sandbox rule and the probe that proves it"
    /// names the test of each rule the report can print as enforced, and a unit test
    /// (`sandbox::tests::every_rule_the_report_can_enforce_has_a_probe_test`) holds it to that.
    pub id: &'static str,
    pub layer: &'static str,
    pub rule: String,
    #[serde(flatten)]
    pub status: Status,
}

/// What the profile asks and what this kernel enforces, rule by rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub mode: &'static str,
    pub kernel: String,
    pub landlock_abi: u32,
    pub seccomp: bool,
    pub program: Option<String>,
    /// When the server command was a version manager's shim: which, and what it selects.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shim: Option<String>,
    pub preset: String,
    pub lines: Vec<Line>,
}

impl Report {
    /// The rules this kernel cannot enforce.
    pub fn dropped(&self) -> Vec<&Line> {
        self.lines
            .iter()
            .filter(|l| matches!(l.status, Status::Dropped(_)))
            .collect()
    }

    /// The known gaps that stay open on this kernel.
    pub fn residual(&self) -> Vec<&Line> {
        self.lines
            .iter()
            .filter(|l| matches!(l.status, Status::Residual(_)))
            .collect()
    }

    /// The human report, one rule per line.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "kernel: Linux {}", self.kernel);
        let _ = writeln!(
            out,
            "landlock: {}",
            match self.landlock_abi {
                0 => "not available (ABI 0)".to_string(),
                v => format!("ABI {v}"),
            }
        );
        let _ = writeln!(
            out,
            "seccomp: {}",
            if self.seccomp {
                "available"
            } else {
                "not available"
            }
        );
        let _ = writeln!(out, "sandbox.mode: {}", self.mode);
        if let Some(p) = &self.program {
            let _ = writeln!(out, "server program: {p}");
        }
        if let Some(s) = &self.shim {
            let _ = writeln!(out, "  ({s})");
        }
        let _ = writeln!(out, "preset: {}", self.preset);
        let mut layer = "";
        for l in &self.lines {
            if l.layer != layer {
                layer = l.layer;
                let _ = writeln!(out, "{layer}:");
            }
            let status = match &l.status {
                Status::Enforced => "enforced".to_string(),
                Status::Dropped(why) => format!("DROPPED: {why}"),
                Status::Skipped(why) => format!("skipped: {why}"),
                Status::Residual(why) => format!("RESIDUAL RISK: {why}"),
            };
            let _ = writeln!(out, "  {}  [{status}]", l.rule);
        }
        let dropped = self.dropped();
        let residual = self.residual().len();
        let _ = if dropped.is_empty() {
            writeln!(
                out,
                "verdict: the rules above are enforced on this kernel, but {residual} residual risk(s) marked RESIDUAL RISK remain open (nothing this user can use on this kernel closes them)"
            )
        } else {
            writeln!(
                out,
                "verdict: {} rule(s) cannot be enforced on this kernel{}",
                dropped.len(),
                if self.mode == "require" {
                    "; sandbox.mode = \"require\" refuses to start the server"
                } else {
                    "; sandbox.mode = \"best-effort\" starts the server without them"
                }
            )
        };
        out
    }

    /// One line for the start-up diagnostics and the audit record.
    pub fn summary(&self) -> String {
        let count = |f: fn(&Status) -> bool| self.lines.iter().filter(|l| f(&l.status)).count();
        let paths = self
            .lines
            .iter()
            .filter(|l| l.layer == "files" && l.status == Status::Enforced)
            .count();
        format!(
            "sandbox {} (Landlock ABI {}, seccomp {}): {} rules enforced ({} paths), {} dropped, {} skipped, {} residual risks (`mcpguard sandbox-check` lists them)",
            self.mode,
            self.landlock_abi,
            if self.seccomp { "on" } else { "unavailable" },
            count(|s| *s == Status::Enforced),
            paths,
            count(|s| matches!(s, Status::Dropped(_))),
            count(|s| matches!(s, Status::Skipped(_))),
            count(|s| matches!(s, Status::Residual(_))),
        )
    }
}

fn mode_name(mode: SandboxMode) -> &'static str {
    match mode {
        SandboxMode::Require => "require",
        SandboxMode::BestEffort => "best-effort",
        SandboxMode::Off => "off",
    }
}

fn ports(list: &[u16]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The report: what the request asks and what `kernel` enforces of it. Pure.
pub fn plan(req: &Request, kernel: &Kernel) -> Report {
    let abi = kernel.abi();
    let mut lines = Vec::new();
    let mut line = |id: &'static str, layer: &'static str, rule: String, status: Status| {
        lines.push(Line {
            id,
            layer,
            rule,
            status,
        })
    };
    let no_landlock = match &kernel.landlock {
        landlock::Abi::Unavailable(why) => why.clone(),
        landlock::Abi::Available(_) => String::new(),
    };
    let landlock_status = |min: u32, what: &str| {
        if abi >= min {
            Status::Enforced
        } else if abi == 0 {
            Status::Dropped(no_landlock.clone())
        } else {
            Status::Dropped(format!(
                "{what} needs Landlock ABI {min}; this kernel has ABI {abi}"
            ))
        }
    };

    // Files.
    line(
        "files.outside",
        "files",
        "no access to files outside the paths granted below".into(),
        landlock_status(1, ""),
    );
    if abi < 3 {
        line(
            "files.truncate",
            "files",
            "no truncation of files outside the read-write paths".into(),
            landlock_status(3, "restricting truncate(2)"),
        );
    }
    if abi < 5 {
        line(
            "files.device-ioctl",
            "files",
            "no ioctl on devices outside the read-write paths".into(),
            landlock_status(5, "restricting device ioctls"),
        );
    }
    for r in &req.paths {
        let rule = format!(
            "{:<18} {}  ({})",
            r.access.label(),
            r.path.display(),
            r.origin
        );
        let status = match &r.state {
            PathState::Open { .. } => landlock_status(1, ""),
            PathState::Missing => Status::Skipped("does not exist".into()),
            PathState::NotGranted(why) => Status::Skipped(why.clone()),
        };
        line("files.grant", "files", rule, status);
    }
    line(
        "files.proc-self",
        "files",
        format!(
            "{:<18} /proc/self/{{cgroup,mountinfo,status,stat,statm,maps,limits,cmdline,auxv}}  (runtime facts: the server process's own entries)",
            super::Access::Read.label()
        ),
        landlock_status(1, ""),
    );
    let namespaces = &kernel.namespaces;
    let without_namespaces = |what: &str| match namespaces {
        Ok(()) => Status::Enforced,
        Err(why) => Status::Residual(format!("{why}; without a mount namespace {what}")),
    };
    line(
        "files.mount-namespace",
        "files",
        "a mount namespace: every mount read-only and nosuid outside the read-write paths, which are noexec, nosuid and nodev: no chmod, chown, xattr or time changes outside them".into(),
        without_namespaces("the server can change the metadata (mode, owner, times, extended attributes) of any file its user owns, granted or not: Landlock has no hook for it"),
    );
    line(
        "files.frozen-mounts",
        "files",
        "a frozen view of the mounts: private propagation, so a file system the host mounts after the start (removable media, a network share, an automount) never appears inside, writable or not".into(),
        without_namespaces("a file system the host mounts later appears inside with the host's own flags, writable where the host mounted it writable"),
    );
    line(
        "files.no-exec-writable",
        "files",
        "no code run from writable files: not executed (Landlock), not mapped executable by ld.so or mmap (noexec mounts)".into(),
        without_namespaces("`ld.so FILE` and mmap(PROT_EXEC) run code from a writable file"),
    );
    for p in &req.pins {
        let grant = p.grant.display();
        let rel = |v: &[std::path::PathBuf]| -> Vec<String> {
            v.iter()
                .map(|x| x.strip_prefix(&p.grant).unwrap_or(x).display().to_string())
                .collect()
        };
        let read_only = rel(&p.read_only);
        line(
            "files.pinned-trusted",
            "files",
            format!(
                "read-only inside the read-write {grant}: what git, direnv, editors and MCP hosts run or trust later ({}): {}",
                super::pins::TRUSTED
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
                if read_only.is_empty() {
                    "none of them exists".to_string()
                } else {
                    format!("pinned {}", read_only.join(", "))
                }
            ),
            if read_only.is_empty() {
                Status::Skipped("none of them exists at the start".into())
            } else {
                without_namespaces("the server can plant a git hook, a core.fsmonitor command or an editor task there, which runs later outside the sandbox")
            },
        );
        if !p.git.is_empty() {
            line(
                "files.git-read-only",
                "files",
                format!(
                    "read-only inside the read-write {grant}: the .git folder of each repository ({}), as a whole: no control file (commondir, config, hooks, modules, worktrees) can be created in it and no branch or remote ref moved to the server's commits, so the server's git cannot fetch, commit or update the index (grant a .git folder by name, --sandbox-write REPO/.git, for a server that does)",
                    rel(&p.git).join(", "),
                ),
                without_namespaces("the server can create .git/commondir, and git then runs the hooks and configuration of a folder the server chooses"),
            );
        }
        let mut open = vec!["folders more than one level down are not searched".to_string()];
        if p.missing
            .iter()
            .any(|m| m == "commondir" || m.ends_with(".git/commondir"))
        {
            // The one missing name that undoes the rest: git reads hooks and configuration
            // from the folder a commondir names, so a created one sidesteps the pinned
            // `.git/hooks` and `.git/config` entirely. Only a `.git` granted for write by
            // name leaves it open (any other is read-only as a whole).
            open.insert(
                0,
                format!(
                    "a git folder granted for write by name ({}: a .git folder, or a bare repository) that has no commondir lets the server create one, and git then runs the hooks and configuration of a folder the server chooses: the pinned .git/hooks and .git/config do not stop a hostile server there",
                    rel(&p.git_granted)
                        .iter()
                        .map(|g| if g.is_empty() { format!("{grant} itself") } else { g.clone() })
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            );
        }
        // A new repository in a folder the server makes is the server's own: its configuration
        // runs when a person's git (or a git-aware shell prompt) enters that folder.
        open.push("a repository the server creates in a new folder, whose configuration git runs when someone enters that folder".into());
        if !p.missing.is_empty() {
            open.insert(
                0,
                format!(
                    "missing at the start, so nothing covers them and a server could create them: {}",
                    p.missing.join(", ")
                ),
            );
        }
        if !p.links.is_empty() {
            open.push(format!(
                "symbolic links, not pinned: {}",
                p.links.join(", ")
            ));
        }
        if p.partial {
            open.push("only the first 1024 folders one level down were searched".into());
        }
        line(
            "files.trusted-creatable",
            "files",
            format!("trusted files a server could still create inside the read-write {grant}"),
            Status::Residual(format!(
                "{} (move the trusted files out of the grant, or grant a folder beneath it)",
                open.join("; ")
            )),
        );
    }
    line(
        "files.memfd-noexec",
        "files",
        "no executable memfds: memfd_create without MFD_NOEXEC_SEAL refused (seccomp)".into(),
        if !kernel.seccomp {
            Status::Dropped("this kernel cannot run seccomp filters (CONFIG_SECCOMP_FILTER)".into())
        } else if kernel.memfd_noexec_seal {
            Status::Enforced
        } else {
            Status::Residual("this kernel has no MFD_NOEXEC_SEAL (Linux 6.3); memfd_create + fexecve runs code no file rule saw".into())
        },
    );
    line(
        "files.stat",
        "files",
        "stat, access, readlink, getxattr, listxattr and inotify on paths outside the grants".into(),
        Status::Residual(
            "Landlock has no hook for them: the server can learn which files exist, their sizes, times and extended attributes, though not read them".into(),
        ),
    );

    // Network.
    line(
        "network.tcp-connect",
        "network",
        format!("TCP connect only to ports: {}", ports(&req.tcp_connect)),
        landlock_status(4, "restricting TCP"),
    );
    // A destination's address is enforced by the observer (`observe`), which makes the
    // connect itself; `prepare` refuses to start where it cannot (no seccomp).
    let by_address = req.by_address();
    if !by_address.is_empty() {
        let list: Vec<String> = by_address.iter().map(|d| d.to_string()).collect();
        let names = by_address.iter().any(|d| d.needs_dns());
        line(
            "network.tcp-address",
            "network",
            format!(
                "TCP destinations (sandbox.connect, --sandbox-connect): {} (address and port enforced: mcpguard makes these connects itself{})",
                list.join(", "),
                if names {
                    "; a host name allows the addresses mcpguard's resolver gives for it when the server connects, and the server still looks the name up itself"
                } else {
                    ""
                }
            ),
            if abi >= 4 {
                if kernel.seccomp {
                    Status::Enforced
                } else {
                    Status::Dropped("mcpguard enforces a destination's address through seccomp user notification, unavailable here".into())
                }
            } else {
                landlock_status(4, "restricting TCP")
            },
        );
    }
    let any: Vec<String> = req
        .connect
        .iter()
        .filter(|d| req.tcp_connect_any.contains(&d.port))
        .map(|d| d.to_string())
        .collect();
    if !any.is_empty() {
        line(
            "network.tcp-destinations",
            "network",
            format!(
                "TCP destinations (sandbox.connect, --sandbox-connect): {}",
                any.join(", ")
            ),
            if abi >= 4 {
                Status::Residual("only their ports are enforced: sandbox.tcp_connect opens these ports to every address, so the server may connect to any host on them".into())
            } else {
                landlock_status(4, "restricting TCP")
            },
        );
    }
    line(
        "network.tcp-bind",
        "network",
        format!("TCP bind only to ports: {}", ports(&req.tcp_bind)),
        landlock_status(4, "restricting TCP"),
    );
    let seccomp_status = |allowed: bool, key: &str| {
        if allowed {
            Status::Skipped(format!("allowed by sandbox.{key}"))
        } else if kernel.seccomp {
            Status::Enforced
        } else {
            Status::Dropped("this kernel cannot run seccomp filters (CONFIG_SECCOMP_FILTER)".into())
        }
    };
    line(
        "network.udp",
        "network",
        "no UDP sockets (seccomp)".into(),
        seccomp_status(req.allow_udp, "allow_udp"),
    );
    line(
        "network.unix",
        "network",
        "no UNIX sockets of its own; socketpair(2) only for stream and seqpacket pairs, which cannot send to a named socket such as /dev/log (seccomp)".into(),
        seccomp_status(req.allow_unix_sockets, "allow_unix_sockets"),
    );
    line(
        "network.other-families",
        "network",
        "no other socket families: netlink, packet, raw, MPTCP, SCTP... (seccomp)".into(),
        seccomp_status(req.allow_other_sockets, "allow_other_sockets"),
    );
    line(
        "network.tcp-fast-open",
        "network",
        "no TCP Fast Open: MSG_FASTOPEN on sendto/sendmsg, TCP_FASTOPEN(_CONNECT) refused (seccomp); it connects past Landlock".into(),
        seccomp_status(false, ""),
    );
    line(
        "network.listen",
        "network",
        "no listen(): nothing may be bound, and listen() without bind() would take an ephemeral TCP port (seccomp)".into(),
        if !req.listen_denied() {
            Status::Residual(format!(
                "{} lets the server listen, and listen() without bind() takes an ephemeral TCP port that sandbox.tcp_bind does not limit",
                if req.tcp_bind.is_empty() { "sandbox.allow_unix_sockets" } else { "sandbox.tcp_bind" }
            ))
        } else {
            seccomp_status(false, "")
        },
    );

    // Processes.
    let scope = |asked: bool, what: &str, key: &str| {
        if asked {
            landlock_status(6, what)
        } else {
            Status::Skipped(format!("sandbox.{key} = false"))
        }
    };
    line(
        "processes.scope-signals",
        "processes",
        "no signals to processes outside the sandbox, mcpguard included".into(),
        scope(req.scope_signals, "signal scoping", "scope_signals"),
    );
    line(
        "processes.scope-abstract-unix",
        "processes",
        "no connections to abstract UNIX sockets outside the sandbox".into(),
        scope(
            req.scope_abstract_unix_sockets,
            "abstract UNIX socket scoping",
            "scope_abstract_unix_sockets",
        ),
    );
    line(
        "processes.cross-process",
        "processes",
        "no io_uring, ptrace, process_vm_readv/writev, pidfd_getfd, process_madvise (seccomp)"
            .into(),
        seccomp_status(false, ""),
    );
    line(
        "processes.no-new-privs",
        "processes",
        "no_new_privs: no privilege gain through setuid or file capabilities".into(),
        Status::Enforced,
    );
    line(
        "processes.capabilities",
        "processes",
        if kernel.root {
            "every capability dropped (bounding, effective, permitted, inheritable, ambient), securebits locked: root gets none back at exec"
        } else {
            "no capabilities: an ordinary user's (and those of its user namespace) dropped from every set"
        }
        .into(),
        Status::Enforced,
    );
    line(
        "processes.new-session",
        "processes",
        "a new session: no controlling terminal; TIOCSTI and TIOCLINUX refused (seccomp)".into(),
        Status::Enforced,
    );
    line(
        "processes.no-inherited-fds",
        "processes",
        "no inherited descriptors: everything above stdin, stdout and stderr closed at exec".into(),
        Status::Enforced,
    );
    line(
        "processes.pid-namespace",
        "processes",
        "a PID namespace: no descendant outlives the server or mcpguard (even after setsid), other processes invisible by pid".into(),
        without_namespaces("a descendant that calls setsid() leaves the process group and can outlive the server and mcpguard"),
    );
    line(
        "processes.no-control-of-others",
        "processes",
        "no control of other processes: prlimit, setpriority, ioprio_set, sched_set*, migrate_pages name only the caller itself, never a pid, process group or user (seccomp)".into(),
        seccomp_status(false, ""),
    );
    line(
        "processes.ipc-namespace",
        "processes",
        "an IPC namespace: no SysV shared memory, semaphores or message queues, and no POSIX message queues, of the host".into(),
        without_namespaces("the server can list, attach, read and overwrite the SysV shared memory and message queues its user may access (every one, as root)"),
    );
    if !kernel.root {
        line(
            "processes.uid0",
            "processes",
            "uid 0's file permissions: not root, so a root-only file inside a read grant stays unreadable".into(),
            Status::Skipped("mcpguard does not run as root".into()),
        );
    } else if req.drop_root && kernel.namespaces.is_ok() {
        let id = super::isolate::ROOT_SERVER_ID;
        let points: Vec<std::path::PathBuf> = super::prepare::idmap_points(req)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let kept = super::prepare::kept_unmapped(req, &points);
        let mapped: Vec<String> = points.iter().map(|p| p.display().to_string()).collect();
        line(
            "processes.uid0",
            "processes",
            format!(
                "root's server runs as uid and gid {id} in a user namespace of its own, without supplementary groups: a root-only file (mode 0600) inside a read grant stays unreadable outside the ID-mapped folders, and in the read grants under them that keep their real owners{}; {}",
                if kept.is_empty() {
                    String::new()
                } else {
                    let list: Vec<String> = kept.iter().map(|p| p.display().to_string()).collect();
                    format!(" ({})", list.join(", "))
                },
                if mapped.is_empty() {
                    format!("no grant needs a folder ID-mapped (every one is reachable by uid {id})")
                } else {
                    format!(
                        "seen through ID-mapped mounts, where root's files are uid {id}'s and what it creates is root's (Landlock still limits it to its grants): {}",
                        mapped.join(", ")
                    )
                },
            ),
            Status::Enforced,
        );
        if !mapped.is_empty() {
            line(
                "processes.uid0-mapped",
                "processes",
                format!(
                    "root's files inside the ID-mapped folders {} (but the read grants kept with their real owners) are uid {id}'s",
                    mapped.join(", ")
                ),
                Status::Residual(format!(
                    "a root-only file (mode 0600) that a write grant there, or a read grant only root may read, reaches is as readable as under uid 0; keep secrets out of grants under those folders, or grant the files uid {id} may read by their own paths"
                )),
            );
        }
    } else {
        line(
            "processes.uid0",
            "processes",
            "uid 0 keeps its file permissions: without capabilities, the server still reads every root-only file (mode 0600, owner root) inside its read grants, the default /etc/ssl included".into(),
            Status::Residual(if req.drop_root {
                "without a user namespace the server keeps uid 0; run mcpguard as an ordinary user".into()
            } else {
                "sandbox.drop_root = false: the server keeps uid 0; set it to true, or run mcpguard as an ordinary user".into()
            }),
        );
    }
    line(
        "processes.keyrings",
        "processes",
        "no kernel keyrings: add_key, request_key, keyctl (seccomp)".into(),
        seccomp_status(false, ""),
    );
    line(
        "processes.set-id",
        "processes",
        "no new set-user-ID or set-group-ID bit: chmod, open(O_CREAT) and mknod with either bit refused, openat2 off the allowlist (seccomp)".into(),
        seccomp_status(false, ""),
    );
    // The filter stops new bits, not a set-ID file that is already there: written in place
    // through a shared mapping, which does not clear the bit, it becomes the server's program.
    let writable: Vec<String> = req
        .paths
        .iter()
        .filter(|r| matches!(r.state, PathState::Open { .. }))
        .filter(|r| req.tmpdir.as_deref() != Some(r.path.as_path()))
        .filter(|r| {
            matches!(
                r.access,
                super::Access::ReadWrite | super::Access::ReadWriteExecute
            )
        })
        // A granted file (`/dev/null`) counts only when it is set-ID itself.
        .filter(|r| match r.state {
            PathState::Open { dir: true, .. } => true,
            _ => std::fs::metadata(&r.path).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o6000 != 0
            }),
        })
        .map(|r| r.path.display().to_string())
        .collect();
    if !writable.is_empty() {
        line(
            "processes.set-id-existing",
            "processes",
            format!(
                "set-user-ID and set-group-ID files already inside the writable grants {}",
                writable.join(", ")
            ),
            Status::Residual(
                "one that exists at the start can be rewritten in place (a shared mapping keeps its bit) and then runs the server's code with its owner's rights outside the sandbox; keep set-ID programs out of writable grants".into(),
            ),
        );
    }
    line(
        "processes.process-list",
        "processes",
        "the machine's process list in /proc (names and command lines, not memory or environment)".into(),
        Status::Residual(
            "/proc is the host's, so the server can list the machine's processes and read their command lines".into(),
        ),
    );
    line(
        "kernel.privileged",
        "kernel",
        "no mounts, namespaces, modules, kexec, BPF, perf events, fanotify, userfaultfd, clock, host name, accounting, quotas, kernel log, swap or reboot; no namespace flags on clone (seccomp)".into(),
        seccomp_status(false, ""),
    );
    line(
        "kernel.newer-calls",
        "kernel",
        format!(
            "no system call newer than the filter's tables: numbers above {} answered ENOSYS (seccomp)",
            super::seccomp::HIGHEST_KNOWN
        ),
        seccomp_status(false, ""),
    );
    line(
        "kernel.allowlist",
        "kernel",
        format!(
            "deny by default: only the {} system calls of an allowlist shaped like systemd's @system-service reach the kernel, any other is answered ENOSYS (seccomp)",
            super::seccomp::allowed().len()
        ),
        seccomp_status(false, ""),
    );

    // Limits.
    let limit = |name: &str, l: Limit, unit: &str| match l {
        Limit::Max(n) => (format!("{name} at most {n}{unit}"), Status::Enforced),
        Limit::Inherit => (
            format!("{name}: mcpguard's own limit"),
            Status::Skipped("\"inherit\"".into()),
        ),
    };
    let (processes, mut processes_status) = limit(
        "processes (threads included) of the server's user namespace",
        req.limits.processes,
        "",
    );
    if processes_status == Status::Enforced && !kernel.processes_counted_apart(req.drop_root) {
        processes_status = Status::Residual(if kernel.root {
            "the server keeps uid 0 (sandbox.drop_root = false, or no namespaces), and Linux exempts uid 0 from RLIMIT_NPROC: a fork loop meets no limit".into()
        } else {
            "no user namespace here, so the limit would count every process of the user and is not set: a fork loop meets no limit".into()
        });
    }
    let (tmp, mut tmp_status) = limit("private TMPDIR on a tmpfs of", req.limits.tmp_mb, " MiB");
    if let (Status::Enforced, Err(why)) = (&tmp_status, &kernel.namespaces) {
        tmp_status = Status::Residual(format!(
            "{why}; without a mount namespace the private TMPDIR is a directory on the host's file system, with no size limit"
        ));
    }
    for (id, (rule, status)) in [
        (
            "limits.open-files",
            limit("open files", req.limits.open_files, ""),
        ),
        ("limits.processes", (processes, processes_status)),
        (
            "limits.address-space",
            limit("address space", req.limits.address_space_mb, " MiB"),
        ),
        (
            "limits.data",
            limit(
                "data (heap and private writable memory)",
                req.limits.data_mb,
                " MiB",
            ),
        ),
        ("limits.tmp", (tmp, tmp_status)),
    ] {
        line(id, "limits", rule, status);
    }
    line(
        "limits.cgroup",
        "limits",
        "the memory and processes of the whole server together (a cgroup)".into(),
        Status::Residual(match &kernel.cgroup {
            Err(why) => format!(
                "no cgroup v2 subtree is delegated here ({why}): memory is limited per process only (RLIMIT_DATA, RLIMIT_AS), so many processes each under the limit add up"
            ),
            Ok(dir) => format!(
                "a cgroup v2 subtree is delegated at {}, but mcpguard does not create cgroups yet: memory is limited per process only (RLIMIT_DATA, RLIMIT_AS)",
                dir.display()
            ),
        }),
    );
    line(
        "limits.core",
        "limits",
        if req.limits.core_dumps {
            "core dumps allowed".into()
        } else {
            "no core dumps".into()
        },
        match (&kernel.core_pipe, req.limits.core_dumps) {
            (_, true) => Status::Skipped("sandbox.limits.core_dumps = true".into()),
            // The kernel honours RLIMIT_CORE 0 only for a core file; a piped pattern gets the
            // dump whatever the limit (only the value 1 stops it, a guard against recursive
            // crashes), and PR_SET_DUMPABLE 0 does not survive the server's exec.
            (Some(pattern), false) => Status::Residual(format!(
                "core_pattern pipes a crash to a program ({pattern}): the kernel ignores RLIMIT_CORE 0 there, so the host's core helper receives the memory of a crashing server, secrets included"
            )),
            (None, false) => Status::Enforced,
        },
    );

    // Environment.
    let names: Vec<String> = req
        .env
        .passed
        .iter()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    line(
        "environment.passed",
        "environment",
        format!(
            "passed: {}",
            if names.is_empty() {
                "nothing".into()
            } else {
                names.join(", ")
            }
        ),
        Status::Enforced,
    );
    line(
        "environment.removed",
        "environment",
        format!(
            "removed: {}",
            if req.env.removed.is_empty() {
                "nothing".into()
            } else {
                req.env.removed.join(", ")
            }
        ),
        Status::Enforced,
    );
    for (name, rule) in &req.env.for_grants {
        line(
            "environment.preset-values",
            "environment",
            format!("{name} passed with the value a preset granted ({rule})"),
            Status::Enforced,
        );
    }
    if !req.env.for_run.is_empty() {
        line(
            "environment.sandbox-env",
            "environment",
            format!("passed by --sandbox-env: {}", req.env.for_run.join(", ")),
            Status::Enforced,
        );
    }
    if let Some(tmp) = &req.tmpdir {
        line(
            "environment.tmpdir",
            "environment",
            format!(
                "TMPDIR={} (private to this run, removed at exit)",
                tmp.display()
            ),
            Status::Enforced,
        );
    }

    Report {
        mode: mode_name(req.mode),
        kernel: kernel.release.clone(),
        landlock_abi: abi,
        seccomp: kernel.seccomp,
        program: req.program.as_ref().map(|p| p.display().to_string()),
        shim: req.shim.clone(),
        preset: format!(
            "{} ({})",
            match req.preset {
                Preset::None | Preset::Auto => "none",
                Preset::Node => "node",
                Preset::Python => "python",
            },
            req.preset_reason
        ),
        lines,
    }
}
