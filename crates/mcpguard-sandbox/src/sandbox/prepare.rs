//! Building what the forked child applies, in the parent: the Landlock ruleset, the seccomp
//! filters, the isolation and the resource limits ([`prepare`], which also refuses in `require`
//! mode), and applying it in the child ([`Prepared::apply_in_child`], raw system calls only).

// This module's `unsafe`: the ID-mapped mounts and the throwaway user namespace (each block with its `// SAFETY:`).
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::io;
use std::path::PathBuf;

use super::{isolate, landlock, plan, seccomp, Access, Kernel, PathState, Report, Request, Status};
use crate::policy::{Limit, SandboxMode};

/// The Landlock rights for an access class, within what the ruleset handles; a file that is not
/// a directory takes only the rights that apply to files. No grant may create device nodes or
/// issue device ioctls: a device made in a writable directory would reach the whole disk.
pub(super) fn rights(access: Access, handled: u64, dir: bool) -> u64 {
    use landlock::*;
    let read = FS_READ_FILE | FS_READ_DIR;
    let all = handled & !(FS_MAKE_CHAR | FS_MAKE_BLOCK | FS_IOCTL_DEV);
    let m = match access {
        Access::Read => read,
        Access::Execute => read | FS_EXECUTE,
        Access::ReadWrite => all & !FS_EXECUTE,
        Access::ReadWriteExecute => all,
    } & handled;
    if dir {
        m
    } else {
        m & FILE_RIGHTS
    }
}

/// A resource limit to set in the child.
#[derive(Debug, Clone, Copy)]
struct Rlimit {
    which: Resource,
    value: libc::rlimit,
}

#[derive(Debug, Clone, Copy)]
enum Resource {
    NoFile,
    NProc,
    As,
    Data,
    Core,
}

/// Everything the child needs, computed in the parent.
pub struct Prepared {
    pub report: Report,
    /// The program to execute (absolute) and the environment to give it.
    pub program: PathBuf,
    pub env: Vec<(OsString, OsString)>,
    /// `argv[0]` when it must not be the command as written: a shim's interpreter gets its own
    /// path, so that it finds its prefix from it rather than from the shim's folder on PATH.
    pub argv0: Option<OsString>,
    /// The observer that names what the sandbox refused (`observe`), where the kernel can hand
    /// its listener over; started by the spawner once the child runs.
    pub observer: Option<std::sync::Arc<super::observe::Observer>>,
    /// What an explanation of the server's failure needs to know of the grants.
    pub explain: super::explain::Context,
    ruleset: Option<landlock::Ruleset>,
    /// The granted files in /proc, kept open for the run: a procfs inode is made anew when its
    /// dentry is dropped from the cache, and a Landlock rule holds the old inode, so an open
    /// descriptor (which holds the dentry) keeps the rule meaning the file.
    _pinned: Vec<std::os::fd::OwnedFd>,
    /// The Landlock rights of the private TMPDIR, for the rule the child adds on its tmpfs.
    tmp_rights: u64,
    filters: Vec<Vec<libc::sock_filter>>,
    rlimits: Vec<Rlimit>,
    isolation: isolate::Isolation,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("program", &self.program)
            .field("ruleset", &self.ruleset)
            .field("filters", &self.filters.len())
            .field("rlimits", &self.rlimits)
            .field("isolation", &self.isolation)
            .finish_non_exhaustive()
    }
}

/// Why the sandbox cannot be prepared: the refusal of `require` mode, or a system call that
/// failed while building the rules. The message says what to do.
#[derive(Debug)]
pub struct Refused(pub String);

/// Builds everything the child applies. In `require` mode, refuses when any rule of the report
/// is dropped.
pub fn prepare(req: Request, kernel: &Kernel) -> Result<Prepared, Refused> {
    let report = plan(&req, kernel);
    let dropped = report.dropped();
    if req.mode == SandboxMode::Require && !dropped.is_empty() {
        let list: Vec<String> = dropped
            .iter()
            .map(|l| match &l.status {
                Status::Dropped(why) => format!("{} ({why})", l.rule),
                _ => l.rule.clone(),
            })
            .collect();
        let what = if kernel.abi() == 0 {
            "use a kernel ≥ 5.13 with landlock in lsm= (≥ 6.12 for the whole default profile)"
        } else {
            "use a newer kernel (Linux ≥ 6.12 enforces the whole default profile)"
        };
        return Err(Refused(format!(
            "sandbox.mode = \"require\" but this kernel (Linux {}, Landlock ABI {}) cannot enforce: {}. To fix: {what}, or set sandbox.mode = \"best-effort\" (start without these rules) or \"off\" in your policy",
            kernel.release,
            kernel.abi(),
            list.join("; ")
        )));
    }
    let program = req
        .program
        .clone()
        .ok_or_else(|| Refused("no server command to sandbox".into()))?;
    let abi = kernel.abi();
    // The ports of the destinations whose address is enforced: Landlock does not open them,
    // and the observer makes each connect to them itself, to their addresses only. That needs
    // seccomp user notification, which every kernel with Landlock's TCP rules (ABI 4, Linux
    // 6.7) has unless seccomp itself is unavailable; then the start is refused rather than
    // the port opened to every address.
    let by_address = req.by_address();
    let by_address_ports: Vec<u16> = if landlock::handled_net(abi) != 0 {
        by_address.iter().map(|d| d.port).collect()
    } else {
        Vec::new()
    };
    let can_enforce_addresses = kernel.seccomp && super::observe::available();
    if !by_address_ports.is_empty() && !can_enforce_addresses {
        let list: Vec<String> = by_address.iter().map(|d| d.to_string()).collect();
        return Err(Refused(format!(
            "the TCP destinations {} (sandbox.connect, --sandbox-connect) cannot be enforced by address here: mcpguard makes those connects itself through seccomp user notification, which this system does not offer to it. To fix: open their ports to any address with sandbox.tcp_connect = [{}] in the policy, or run where seccomp is available",
            list.join(", "),
            by_address_ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let ruleset = if abi > 0 {
        let handled = landlock::handled_fs(abi);
        let scoped = (if req.scope_signals {
            landlock::SCOPE_SIGNAL
        } else {
            0
        } | if req.scope_abstract_unix_sockets {
            landlock::SCOPE_ABSTRACT_UNIX_SOCKET
        } else {
            0
        }) & landlock::scopes(abi);
        let net = landlock::handled_net(abi);
        let failed = |what: String, e: io::Error| {
            Refused(format!(
                "building the Landlock ruleset failed at {what}: {e}"
            ))
        };
        let rs = landlock::Ruleset::new(abi, handled, net, scoped)
            .map_err(|e| failed("landlock_create_ruleset".into(), e))?;
        for r in &req.paths {
            if let PathState::Open { fd, dir } = &r.state {
                let access = rights(r.access, handled, *dir);
                rs.allow_path(fd, access)
                    .map_err(|e| failed(format!("{}", r.path.display()), e))?;
            }
        }
        if net != 0 {
            for &port in &req.tcp_connect {
                if by_address_ports.contains(&port) {
                    // Opened by the observer, to the destinations' addresses only.
                    continue;
                }
                rs.allow_port(port, landlock::NET_CONNECT_TCP)
                    .map_err(|e| failed(format!("TCP connect port {port}"), e))?;
            }
            for &port in &req.tcp_bind {
                rs.allow_port(port, landlock::NET_BIND_TCP)
                    .map_err(|e| failed(format!("TCP bind port {port}"), e))?;
            }
        }
        Some(rs)
    } else {
        None
    };
    let filters = if kernel.seccomp {
        seccomp::programs(seccomp::Options {
            allow_udp: req.allow_udp,
            allow_unix: req.allow_unix_sockets,
            allow_other_sockets: req.allow_other_sockets,
            deny_listen: req.listen_denied(),
            memfd_noexec_seal: kernel.memfd_noexec_seal,
        })
    } else {
        Vec::new()
    };
    let writable: Vec<(PathBuf, bool)> = req
        .paths
        .iter()
        .filter(|r| matches!(r.state, PathState::Open { .. }))
        .filter_map(|r| match r.access {
            Access::ReadWrite => isolate::writable_grant(&r.path, false),
            Access::ReadWriteExecute => isolate::writable_grant(&r.path, true),
            Access::Read | Access::Execute => None,
        })
        .collect();
    if let (true, true, Ok(()), Some(tmp)) =
        (kernel.root, req.drop_root, &kernel.namespaces, &req.tmpdir)
    {
        // Root's server runs as nobody: its private directory must be its own (the tmpfs
        // mounted over it is, too).
        let id = isolate::ROOT_SERVER_ID;
        std::os::unix::fs::chown(tmp, Some(id), Some(id)).map_err(|e| {
            Refused(format!(
                "cannot give the private temporary directory {} to uid {id} (sandbox.drop_root): {e}",
                tmp.display()
            ))
        })?;
    }
    // After the private directory was given to the server's id, which it must reach too.
    let idmapped = if kernel.root && req.drop_root && kernel.namespaces.is_ok() {
        root_server_idmaps(&req, kernel.seccomp)?
    } else {
        None
    };
    let tmp_mb = match req.limits.tmp_mb {
        Limit::Max(mb) => Some(mb),
        Limit::Inherit => None,
    };
    let tmp = req.tmpdir.as_deref().zip(tmp_mb);
    let pinned = pinned(&req, &writable);
    let isolation = isolate::Isolation::new(
        kernel.namespaces.is_ok(),
        writable,
        pinned,
        tmp,
        req.drop_root,
        idmapped,
    );
    let tmp_rights = rights(Access::ReadWrite, landlock::handled_fs(abi), true);
    let explain = explain_context(&req);
    let pinned = req
        .paths
        .iter()
        .filter(|r| r.path.starts_with("/proc"))
        .filter_map(|r| match &r.state {
            PathState::Open { fd, .. } => fd.try_clone().ok(),
            _ => None,
        })
        .collect();
    let argv0 = req.shim.as_ref().map(|_| program.clone().into_os_string());
    // Only where Landlock decides: without a ruleset nothing denies an open, and the observer
    // would name refusals that never happened.
    // With `sandbox.explain_denials = false` it runs only to make the connects whose address
    // it enforces (and then watches connect alone).
    let wanted = req.explain_denials || !by_address_ports.is_empty();
    let observer = if wanted && ruleset.is_some() && can_enforce_addresses {
        let mut grants = observe_grants(&req, abi);
        if by_address_ports.is_empty() {
            grants.by_address.clear();
        }
        let observer = super::observe::Observer::new(grants).map_err(|e| {
            Refused(format!(
                "preparing the observer of the sandbox's denials failed: {e}"
            ))
        })?;
        Some(std::sync::Arc::new(observer))
    } else {
        None
    };
    Ok(Prepared {
        report,
        argv0,
        observer,
        program,
        env: req.env.passed,
        explain,
        ruleset,
        _pinned: pinned,
        tmp_rights,
        filters,
        rlimits: rlimits(&req.limits, kernel.processes_counted_apart(req.drop_root)),
        isolation,
    })
}

/// The trusted files to pin: those of each grant that is mounted writable (a grant on a
/// read-only file system needs none), held folders with their grant's exec flag.
fn pinned(req: &Request, writable: &[(PathBuf, bool)]) -> isolate::Pinned {
    let mut out = isolate::Pinned::default();
    for p in &req.pins {
        let Some((_, exec)) = writable.iter().find(|(w, _)| *w == p.grant) else {
            continue;
        };
        out.held.extend(p.held.iter().map(|h| (h.clone(), *exec)));
        out.read_only.extend(p.read_only.iter().cloned());
        out.read_only.extend(p.git.iter().cloned());
    }
    out
}

/// The ID-mapped mounts root's server needs (`sandbox.drop_root`, issue 31): for each open
/// grant that uid [`isolate::ROOT_SERVER_ID`] cannot use, the highest folder on its way it may
/// not search, or else the grant itself, is mapped (root's files there become the server's).
/// Landlock still decides what the server may open, so a mapped folder gives it nothing beyond
/// its grants; root-only files inside a grant it can reach unmapped (`/etc/ssl/private`) stay
/// unreadable. Refused, naming the grant, the reason and the key, when a grant stays out of
/// reach even mapped (a folder of another user) or a folder cannot be mapped (a file system
/// without ID-mapped mounts). The mapped folders are added to the report's line.
///
/// Without seccomp (`seccomp`: the kernel has the filter) nothing refuses set-ID bits, and in a
/// mapped folder root's files are the server's, and the files it makes are root's on the host:
/// a writable grant there would let it make a set-user-ID root program. Such a grant is refused
/// before anything is mapped (fail closed), naming the grant and `sandbox.drop_root = false`.
pub(super) fn root_server_idmaps(
    req: &Request,
    seccomp: bool,
) -> Result<Option<isolate::Idmapped>, Refused> {
    let id = isolate::ROOT_SERVER_ID;
    let open: Vec<&super::PathRule> = req
        .paths
        .iter()
        .filter(|r| matches!(r.state, PathState::Open { .. }))
        .collect();
    let mapped = idmap_points(req);
    let paths: Vec<PathBuf> = mapped.iter().map(|(p, _)| p.clone()).collect();
    if !seccomp {
        if let Some(r) = writable_in(&open, &paths) {
            return Err(Refused(format!(
                "sandbox.drop_root: the server runs as uid {id}, and the writable grant {} ({}) must be ID-mapped for it (root's files there become the server's, and its files root's on the host), but this kernel has no seccomp filter to refuse set-user-ID bits, so the server could make a set-user-ID root program there. To fix: move the grant where uid {id} can reach it unmapped, grant it read-only, use a kernel with seccomp, or set sandbox.drop_root = false (the server then keeps uid 0, and `mcpguard sandbox-check` names what that leaves open)",
                r.path.display(),
                r.origin,
            )));
        }
    }
    for r in &open {
        if let Some(why) = unreachable_by(&r.path, id, r.access, &paths) {
            return Err(Refused(format!(
                "sandbox.drop_root: the server runs as uid {id}, which cannot use {} ({}) even with root's files mapped to it: {why}. To fix: move it where uid {id} can reach it (or give it to root), or set sandbox.drop_root = false (the server then keeps uid 0, and `mcpguard sandbox-check` names what that leaves open)",
                r.path.display(),
                r.origin,
            )));
        }
    }
    // Made whether or not a folder needs mapping: it is also the test that this system lets
    // root create the user namespace the server gets (R's, in `isolate`), which the namespace
    // probe does not try for root; failing here names the cause and the key, where the spawn
    // would fail with a bare errno.
    let userns = isolate::root_as_server_userns().map_err(|e| {
        Refused(format!(
            "sandbox.drop_root: the server would run as uid {id} in a user namespace of its own, but this system does not let root create one ({e}; user.max_user_namespaces, or a security module forbids it). To fix: allow user namespaces, or set sandbox.drop_root = false (the server then keeps uid 0, and `mcpguard sandbox-check` names what that leaves open)"
        ))
    })?;
    if mapped.is_empty() {
        return Ok(None);
    }
    let failed = |what: String, e: io::Error| {
        Refused(format!(
            "sandbox.drop_root: the server runs as uid {id}, and {what}: {e}. To fix: move the grant where uid {id} can reach it unmapped, or set sandbox.drop_root = false (the server then keeps uid 0, and `mcpguard sandbox-check` names what that leaves open)"
        ))
    };
    for (p, r) in &mapped {
        isolate::try_idmap(p, &userns).map_err(|e| {
            let why = match e.raw_os_error() {
                Some(libc::EINVAL) => " (its file system, or that of a mount under it, does not support ID-mapped mounts, or it is mapped already)",
                _ => "",
            };
            failed(
                format!(
                    "{} (on the way to {}, {}) cannot be mounted with root's files mapped to it{why}",
                    p.display(),
                    r.path.display(),
                    r.origin
                ),
                e,
            )
        })?;
    }
    let kept = kept_unmapped(req, &paths);
    isolate::Idmapped::new(userns, &paths, &kept)
        .map(Some)
        .map_err(|e| {
            let list: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
            failed(format!("{} cannot be mounted", list.join(", ")), e)
        })
}

/// The read (and execute) grants inside the `mapped` folders that keep their real owners
/// ([`isolate::Idmapped`]): those uid [`isolate::ROOT_SERVER_ID`] may use unmapped once the
/// way to them is open, that hold no writable grant and lie in none (a write grant is bound
/// from the mapped mount, and must stay reachable). A grant only root may read stays mapped, as
/// does any beyond [`isolate::MAX_KEPT`]; the report names those (`report`, `processes.uid0`).
pub(super) fn kept_unmapped(req: &Request, mapped: &[PathBuf]) -> Vec<PathBuf> {
    let id = isolate::ROOT_SERVER_ID;
    let real = |r: &super::PathRule| std::fs::canonicalize(&r.path).ok();
    let open = || {
        req.paths
            .iter()
            .filter(|r| matches!(r.state, PathState::Open { .. }))
    };
    let writable: Vec<PathBuf> = open()
        .filter(|r| matches!(r.access, Access::ReadWrite | Access::ReadWriteExecute))
        .filter_map(real)
        .chain(req.tmpdir.clone())
        .collect();
    let mut kept: Vec<PathBuf> = open()
        .filter(|r| matches!(r.access, Access::Read | Access::Execute))
        .filter_map(|r| {
            let p = real(r)?;
            let inside = mapped.iter().any(|m| p.starts_with(m) && p != *m);
            let clear = !writable
                .iter()
                .any(|w| w.starts_with(&p) || p.starts_with(w));
            let m = std::fs::metadata(&p).ok()?;
            (inside && clear && may(&m, id, false, wanted(r.access, m.is_dir()))).then_some(p)
        })
        .collect();
    kept.sort();
    kept.dedup();
    kept.sort_by_key(|p| p.as_os_str().len());
    kept.truncate(isolate::MAX_KEPT);
    kept
}

/// The first writable grant among `open` that lies in, is or holds one of the `mapped` folders.
fn writable_in<'a>(
    open: &[&'a super::PathRule],
    mapped: &[PathBuf],
) -> Option<&'a super::PathRule> {
    open.iter().copied().find(|r| {
        matches!(r.access, Access::ReadWrite | Access::ReadWriteExecute) && {
            let real = std::fs::canonicalize(&r.path).unwrap_or_else(|_| r.path.clone());
            // A mapped folder inside the grant is written through the grant's rule, too.
            mapped
                .iter()
                .any(|m| real.starts_with(m) || m.starts_with(&real))
        }
    })
}

/// The folders to ID-map for root's server, each with the first grant that needs it: for each
/// open grant uid [`isolate::ROOT_SERVER_ID`] cannot use, the highest folder on its way it may
/// not search, or else the grant itself; none inside another (the clone is recursive). Also
/// read by the report, which names them (before the private TMPDIR is given to the server,
/// which is why it is left out here).
pub(super) fn idmap_points(req: &Request) -> Vec<(PathBuf, &super::PathRule)> {
    let mut points: Vec<(PathBuf, &super::PathRule)> = req
        .paths
        .iter()
        .filter(|r| matches!(r.state, PathState::Open { .. }))
        // The private TMPDIR is given to the server instead (and a tmpfs of its own covers it).
        .filter(|r| req.tmpdir.as_deref() != Some(r.path.as_path()))
        .filter_map(|r| Some((blocked_at(&r.path, isolate::ROOT_SERVER_ID, r.access)?, r)))
        .collect();
    points.sort_by_key(|a| a.0.as_os_str().len());
    let mut mapped: Vec<(PathBuf, &super::PathRule)> = Vec::new();
    for (p, r) in points {
        if !mapped.iter().any(|(m, _)| p.starts_with(m)) {
            mapped.push((p, r));
        }
    }
    mapped
}

/// The permission bits of `m` that apply to uid and gid `id` (with no other group); `mapped`:
/// seen through an ID-mapped mount, where root's files are `id`'s and `id`'s own are nobody's.
fn may(m: &std::fs::Metadata, id: u32, mapped: bool, bits: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let seen = |owner: u32| match owner {
        0 if mapped => id,
        o if mapped && o == id => u32::MAX,
        o => o,
    };
    let mode = m.mode();
    let class = if seen(m.uid()) == id {
        mode >> 6
    } else if seen(m.gid()) == id {
        mode >> 3
    } else {
        mode
    };
    class & bits == bits
}

/// The permission `access` needs on the grant itself (`dir`: it is a folder).
fn wanted(access: Access, dir: bool) -> u32 {
    match access {
        Access::ReadWrite | Access::ReadWriteExecute if dir => 0o7,
        Access::ReadWrite | Access::ReadWriteExecute => 0o6,
        _ if dir => 0o5,
        _ => 0o4,
    }
}

/// Where uid and gid `id` (with no other group) is first stopped on the way to `path` (its
/// real path), with the folders in `mapped` (and everything below them) seen ID-mapped: the
/// highest folder it may not search, or the grant itself when it may not use it with `access`
/// (read, and for a read-write folder write), with that path's metadata. `None` when nothing
/// stops it, or when the path cannot be inspected (Landlock and the kernel decide then).
fn first_block(
    path: &std::path::Path,
    id: u32,
    access: Access,
    mapped: &[PathBuf],
) -> Option<(PathBuf, std::fs::Metadata)> {
    let real = std::fs::canonicalize(path).ok()?;
    let is_mapped = |p: &std::path::Path| mapped.iter().any(|m| p.starts_with(m));
    let mut ancestors: Vec<&std::path::Path> = real.ancestors().skip(1).collect();
    ancestors.reverse();
    for dir in ancestors {
        let m = std::fs::metadata(dir).ok()?;
        if !may(&m, id, is_mapped(dir), 0o1) {
            return Some((dir.to_path_buf(), m));
        }
    }
    let m = std::fs::metadata(&real).ok()?;
    (!may(&m, id, is_mapped(&real), wanted(access, m.is_dir()))).then_some((real, m))
}

/// Where uid `id` is first stopped on the way to `path`, nothing mapped ([`first_block`]).
fn blocked_at(path: &std::path::Path, id: u32, access: Access) -> Option<PathBuf> {
    first_block(path, id, access, &[]).map(|(p, _)| p)
}

/// Why uid `id` cannot use `path` with `access` even with the folders in `mapped` seen
/// ID-mapped ([`first_block`]), in words for the refusal.
fn unreachable_by(
    path: &std::path::Path,
    id: u32,
    access: Access,
    mapped: &[PathBuf],
) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let (at, m) = first_block(path, id, access, mapped)?;
    let note = if mapped.iter().any(|p| at.starts_with(p)) {
        format!(" (mapped, but only root's files become uid {id}'s)")
    } else {
        String::new()
    };
    let owner = format!("mode {:o}, owner {}{note}", m.mode() & 0o7777, m.uid());
    let real = std::fs::canonicalize(path).ok()?;
    Some(if at == real {
        format!("it is {owner}")
    } else {
        format!("{} on the way is {owner}", at.display())
    })
}

/// The grants of the request as the failure explanation reads them; the policy file and the
/// home directory are filled in by the caller that knows them (`sandbox::setup`).
fn explain_context(req: &Request) -> super::explain::Context {
    let mut ctx = super::explain::Context::default();
    for r in &req.paths {
        match &r.state {
            PathState::Open { .. } => ctx.grants.push((r.access, r.path.clone())),
            PathState::NotGranted(why) => ctx
                .not_granted
                .push((r.path.clone(), format!("{}: {why}", r.origin))),
            PathState::Missing => {}
        }
        match r.origin.as_str() {
            "--sandbox-read" => ctx.read.push(r.path.clone()),
            "--sandbox-write" => ctx.write.push(r.path.clone()),
            _ => {}
        }
    }
    ctx
}

/// What the observer compares calls with: the granted paths as real paths (Landlock follows a
/// granted symlink), the ports, and the server's own /proc entries.
fn observe_grants(req: &Request, abi: u32) -> super::observe::Grants {
    let paths = req
        .paths
        .iter()
        .filter(|r| matches!(r.state, PathState::Open { .. }))
        .map(|r| {
            (
                r.access,
                std::fs::canonicalize(&r.path).unwrap_or_else(|_| r.path.clone()),
            )
        })
        .collect();
    super::observe::Grants {
        paths,
        tcp_connect: req.tcp_connect.clone(),
        tcp_bind: req.tcp_bind.clone(),
        allow_udp: req.allow_udp,
        ports_enforced: landlock::handled_net(abi) != 0,
        own_proc: super::presets::OWN_PROC
            .iter()
            .filter_map(|p| p.to_str().ok())
            .filter_map(|p| p.strip_prefix("/proc/self/"))
            .map(str::to_string)
            .collect(),
        by_address: req.by_address(),
        explain: req.explain_denials,
    }
}

/// The limits to set, each capped at mcpguard's own hard limit (raising a hard limit would fail
/// for an unprivileged user, and a lower value is stricter anyway). `nproc` says whether
/// `RLIMIT_NPROC` is set ([`Kernel::processes_counted_apart`]).
fn rlimits(l: &crate::policy::SandboxLimits, nproc: bool) -> Vec<Rlimit> {
    let hard = |which: Resource| {
        let mut cur = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit struct into `cur`, which is live.
        let ok = unsafe { libc::getrlimit(resource_id(which), &mut cur) } == 0;
        if ok {
            cur.rlim_max
        } else {
            libc::RLIM_INFINITY
        }
    };
    let mut out = Vec::new();
    let processes = if nproc { l.processes } else { Limit::Inherit };
    for (which, limit, scale) in [
        (Resource::NoFile, l.open_files, 1u64),
        (Resource::NProc, processes, 1),
        (Resource::As, l.address_space_mb, 1 << 20),
        (Resource::Data, l.data_mb, 1 << 20),
    ] {
        if let Limit::Max(n) = limit {
            let v = n.saturating_mul(scale).min(hard(which));
            out.push(Rlimit {
                which,
                value: libc::rlimit {
                    rlim_cur: v,
                    rlim_max: v,
                },
            });
        }
    }
    if !l.core_dumps {
        out.push(Rlimit {
            which: Resource::Core,
            value: libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            },
        });
    }
    out
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
type ResourceId = libc::__rlimit_resource_t;
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
type ResourceId = libc::c_int;

fn resource_id(r: Resource) -> ResourceId {
    match r {
        Resource::NoFile => libc::RLIMIT_NOFILE,
        Resource::NProc => libc::RLIMIT_NPROC,
        Resource::As => libc::RLIMIT_AS,
        Resource::Data => libc::RLIMIT_DATA,
        Resource::Core => libc::RLIMIT_CORE,
    }
}

impl Prepared {
    /// Applies the sandbox to the calling process. Runs in the forked child between fork and
    /// exec, so only raw, async-signal-safe system calls on memory the parent prepared: no
    /// allocation, no locks, no formatting (`io::Error::last_os_error` only reads errno).
    /// Order: the namespaces (which fork: only the server process returns from them), limits,
    /// capabilities dropped, no_new_privs (Landlock and seccomp require it), Landlock, then
    /// seccomp last so that its filters do not have to allow the calls before them.
    pub fn apply_in_child(&self) -> io::Result<()> {
        self.isolation.enter()?;
        if let (Some(rs), Some(tmp)) = (&self.ruleset, self.isolation.tmpfs()) {
            // SAFETY: open reads the NUL-terminated path prepared in the parent.
            let fd = unsafe {
                libc::open(
                    tmp.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                )
            };
            if fd < 0 {
                return Err(io::Error::last_os_error());
            }
            let added = rs.allow_path_fd(fd, self.tmp_rights);
            // SAFETY: closes the descriptor opened above, once.
            unsafe { libc::close(fd) };
            added?;
        }
        if let Some(rs) = &self.ruleset {
            // The server's own /proc entries (`presets::OWN_PROC`): /proc/self is only known
            // here, in the process that execs the server (after the namespaces' forks). A
            // missing entry is left ungranted, as any missing path is.
            for path in super::presets::OWN_PROC {
                // SAFETY: open reads a NUL-terminated static path.
                let fd = unsafe { libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
                if fd < 0 {
                    continue;
                }
                let added = rs.allow_path_fd(fd, landlock::FS_READ_FILE);
                // SAFETY: closes the descriptor opened above, once.
                unsafe { libc::close(fd) };
                added?;
            }
        }
        for r in &self.rlimits {
            // SAFETY: setrlimit reads one live rlimit struct.
            if unsafe { libc::setrlimit(resource_id(r.which), &r.value) } != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        self.isolation.drop_capabilities()?;
        // SAFETY: prctl(PR_SET_NO_NEW_PRIVS) takes integer arguments only.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some(rs) = &self.ruleset {
            landlock::restrict_self(rs.raw_fd())?;
        }
        for f in &self.filters {
            seccomp::install(f)?;
        }
        // Last: from here on every open and connect waits for mcpguard's observer.
        if let Some(o) = &self.observer {
            o.install_in_child()?;
        }
        Ok(())
    }

    /// The descriptor of the ruleset, for tests that check it is close-on-exec.
    pub fn ruleset_fd(&self) -> Option<i32> {
        self.ruleset.as_ref().map(|r| r.raw_fd())
    }
}
