//! The isolation of the server process that does not depend on a list of system calls: a new
//! session, no inherited descriptors, no capabilities, and — where the kernel lets this user
//! create them — PID, mount and IPC namespaces and a size-limited private temporary folder.
//!
//! Why each holds by construction:
//! - **Session.** `setsid` leaves the server without a controlling terminal, so `TIOCSTI` on a
//!   terminal it inherited is refused by the kernel itself (seccomp refuses it as well).
//! - **Descriptors.** Every descriptor above 2 is marked close-on-exec in the child, so the
//!   server starts with its three pipes and nothing the host or mcpguard had open.
//! - **Capabilities.** A server started by root (or holding capabilities in its user namespace)
//!   has every capability removed from all five sets, and the securebits are locked so that
//!   uid 0 cannot regain them at exec.
//! - **PID namespace.** The server runs as the second process of a fresh PID namespace whose
//!   first process is a small reaper (below). When the reaper ends, the kernel kills everything
//!   in the namespace, so a descendant that called `setsid()` cannot outlive the server, and
//!   since the reaper dies with its parent (a parent-death signal), nothing outlives mcpguard
//!   either, however mcpguard ends. Processes outside the namespace are not visible by pid.
//! - **Mount namespace.** Every mount is made read-only and nosuid; each read-write grant is
//!   bind-mounted onto itself writable but noexec, nosuid and nodev (an `rwx` grant keeps
//!   exec). So outside the grants no file's metadata can change (chmod, chown, xattrs, times:
//!   Landlock has no hook for those), and no writable file can be mapped executable (`ld.so
//!   FILE`, `mmap(PROT_EXEC)`), which Landlock's execute right does not cover. The namespace's
//!   mounts are private (`MS_REC|MS_PRIVATE`), not slaves of the host's: a file system the host
//!   mounts later (removable media, a network share, an automount the server triggers) never
//!   appears inside, so nothing arrives after the read-only pass that it did not cover.
//! - **Trusted files inside writable grants.** What git, direnv, editors and hosts run or trust
//!   later (`sandbox::pins`: `.git/hooks`, `.git/config`, `.envrc`, `.vscode` …) is
//!   bind-mounted over itself and left read-only by the pass above; a repository's `.git`
//!   folder is mounted read-only over itself as a whole (its refs included, so no branch can
//!   be pointed at the server's commits): a mount point cannot be renamed or removed (EBUSY),
//!   so the server can neither change those files nor move them away and make new ones, nor
//!   create a new control file such as `.git/commondir`, while the rest of the project stays
//!   writable.
//! - **Private temporary folder.** The run's `TMPDIR` is a fresh tmpfs with a size limit
//!   (`sandbox.limits.tmp_mb`), noexec, nosuid and nodev, mounted over the directory mcpguard
//!   created; what the server writes there counts against that limit, not the host's disk.
//! - **Root stays no root.** Started by root (`sandbox.drop_root`, on by default), the server
//!   runs as uid and gid 65534 (the kernel's overflow id, "nobody") in a user namespace of its
//!   own, with no supplementary groups: ordinary file permissions bind it, so a root-only file
//!   (mode 0600) inside a read grant stays unreadable, and `RLIMIT_NPROC`, from which uid 0 is
//!   exempt, counts its processes in that namespace. The map needs a privileged writer in the
//!   parent namespace, so C writes it for R (below) before R switches to the id.
//! - **ID-mapped folders for root's server.** A grant uid 65534 cannot reach (under the 0700
//!   `/root`, or root-owned and writable) is seen through an ID-mapped mount ([`Idmapped`]) of
//!   the highest folder in the way: `open_tree(OPEN_TREE_CLONE)`, `mount_setattr` with the
//!   mapping of a throw-away user namespace (uid and gid 0 to 65534, made in the parent by
//!   [`root_as_server_userns`]) and `move_mount` over the same path, by C, after the namespace
//!   is made private and before the grants' binds, which inherit the mapping (pins included,
//!   made read-only by the pass below like any other). Root's files there are the server's and
//!   what it creates is root's on disk; Landlock still decides what it may open. A read grant
//!   under a mapped folder that uid 65534 may read unmapped (and that holds no write grant) is
//!   cloned unmapped before the mapping and mounted back on top after it, so its root-only files
//!   stay closed while the way to it goes through the mapped folder.
//! - **IPC namespace.** SysV shared memory, semaphores and message queues and POSIX message
//!   queues are per IPC namespace: the server sees none of the host's and its own vanish with it.
//!
//! For an ordinary user the namespaces need an unprivileged user namespace, which the kernel or
//! the distribution may forbid; [`probe`] tries the exact steps in a throw-away child, and the
//! sandbox report names what is missing as a residual risk instead of claiming it.
//!
//! Process layout with namespaces (C is the process `std::process::Command` forked, whose pid
//! mcpguard knows and whose process group it signals):
//! ```text
//! mcpguard ── C (outside, waits, mirrors the server's exit status)
//!              └── R (pid 1 of the new PID namespace: reaps, ends the namespace with the server)
//!                   └── S (pid 2: the server; Landlock, seccomp, no capabilities)
//! ```
//! C and R run only our own code (raw system calls, no allocation), close every descriptor and
//! never exec; S continues into `std`'s exec. All three share the process group, so the
//! proxy's SIGTERM reaches the server directly (C ignores it; R, as a namespace's first
//! process, is immune to it by the kernel's rule), and its SIGKILL ends C and R as well.
//!
//! Everything here that runs in a child is async-signal-safe: raw system calls on memory the
//! parent prepared (`fork` is a raw `clone` so that no atfork handler runs).

// This module's `unsafe`: the namespace, mount and credential calls of the child between fork and exec (each block with its `// SAFETY:`).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// All securebits set and locked, except `KEEP_CAPS` (cleared, and locked so): uid 0 gets no
/// capabilities at exec, none are kept across a uid change, none can be raised into the ambient
/// set.
const SECUREBITS_LOCKED_DOWN: libc::c_ulong = 0b1110_1111;

/// One read-write grant mounted writable inside the mount namespace, or one trusted file
/// inside it mounted read-only over itself (`sandbox::pins`).
#[derive(Debug)]
struct Bind {
    path: CString,
    /// An `rwx` grant (the python preset's uv directories) keeps exec.
    exec: bool,
    /// A trusted file or folder: read-only, and a mount point, so it can be neither changed
    /// nor renamed, removed or replaced.
    read_only: bool,
}

/// The trusted files of the writable grants (`sandbox::pins`), prepared by the caller: the
/// folders to hold in place (mounted writable over themselves, with the exec flag of their
/// grant) and the files and folders to mount read-only over themselves.
#[derive(Debug, Default)]
pub struct Pinned {
    pub held: Vec<(std::path::PathBuf, bool)>,
    pub read_only: Vec<std::path::PathBuf>,
}

/// The identity maps of an unprivileged user namespace: the user stays who they are.
#[derive(Debug)]
struct IdMaps {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

/// The run's private temporary folder: where to mount the tmpfs and its mount data
/// (`size=…m,mode=0700`).
#[derive(Debug)]
struct Tmpfs {
    path: CString,
    data: CString,
}

/// The id root's server runs as (`sandbox.drop_root`): the overflow id, which owns nothing.
pub const ROOT_SERVER_ID: u32 = 65534;

/// The folders root's server (uid [`ROOT_SERVER_ID`]) could not reach otherwise, seen through
/// ID-mapped mounts in its mount namespace: root's files and folders there appear as the
/// server's own, and what it creates there belongs to root outside. Prepared in the parent
/// ([`root_as_server_userns`], [`try_idmap`]), mounted by C ([`idmap_over_itself`]).
#[derive(Debug)]
pub struct Idmapped {
    /// A user namespace with no process left in it, whose only mapping is uid and gid 0 to
    /// [`ROOT_SERVER_ID`]: the mounts take their mapping from it.
    userns: std::os::fd::OwnedFd,
    /// Each folder (or file) to clone, map and mount over itself; none inside another.
    paths: Vec<CString>,
    /// Read grants inside a mapped folder that keep their real owners: cloned unmapped before
    /// the folder is mapped and mounted back on top of it afterwards, so that a root-only file
    /// in them (a token in `~/.npmrc`'s folder, mode 0600) stays closed to the server, while the
    /// way to them goes through the mapped folder. Shortest first (a grant inside another is
    /// mounted after it); at most [`MAX_KEPT`].
    kept: Vec<CString>,
}

/// The most read grants kept unmapped inside mapped folders: their clones are held in a fixed
/// array in C, which may not allocate. The rest stay mapped, and the report names them.
pub const MAX_KEPT: usize = 32;

impl Idmapped {
    /// The mapping of `paths` through `userns` (from [`root_as_server_userns`]). A path with a
    /// NUL byte cannot be mounted, and is refused.
    /// `kept`: the read grants to mount back unmapped ([`Idmapped::kept`]), at most
    /// [`MAX_KEPT`] (more is refused with `E2BIG`).
    pub fn new(
        userns: std::os::fd::OwnedFd,
        paths: &[std::path::PathBuf],
        kept: &[std::path::PathBuf],
    ) -> io::Result<Idmapped> {
        let c = |list: &[std::path::PathBuf]| {
            list.iter()
                .map(|p| {
                    CString::new(p.as_os_str().as_bytes())
                        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
                })
                .collect::<io::Result<Vec<_>>>()
        };
        if kept.len() > MAX_KEPT {
            return Err(io::Error::from_raw_os_error(libc::E2BIG));
        }
        let mut kept = c(kept)?;
        kept.sort_by_key(|p| p.as_bytes().len());
        Ok(Idmapped {
            userns,
            paths: c(paths)?,
            kept,
        })
    }
}

/// The namespaces to create, prepared in the parent.
#[derive(Debug)]
pub struct Namespaces {
    user: Option<IdMaps>,
    /// Started by root with `drop_root`: R gets a user namespace of its own, whose map C
    /// writes, and switches to [`ROOT_SERVER_ID`].
    drop_root: Option<IdMaps>,
    /// With `drop_root`: the folders mounted ID-mapped before the grants' binds, so that a
    /// grant or pin inside one inherits its mapping.
    idmapped: Option<Idmapped>,
    binds: Vec<Bind>,
    tmp: Option<Tmpfs>,
}

/// What the child does before the sandbox proper: prepared in the parent, applied by
/// [`Isolation::enter`] and [`Isolation::drop_capabilities`] in the child.
#[derive(Debug)]
pub struct Isolation {
    pub namespaces: Option<Namespaces>,
    /// The server will hold capabilities (started by root, or inside a user namespace), so all
    /// of them must go, with the bounding set and the securebits; failing to is an error.
    privileged: bool,
    last_cap: libc::c_ulong,
}

/// Whether this process runs as root (and so would hand the server every capability).
pub fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn id_maps() -> IdMaps {
    // SAFETY: getuid and getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    IdMaps {
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
    }
}

fn last_cap() -> libc::c_ulong {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(40)
}

/// One writable grant to mount, or `None` when it needs no mount: a device (writable on a
/// read-only mount anyway), a path that cannot be resolved, or one already on a read-only mount
/// (which must stay read-only).
pub fn writable_grant(path: &Path, exec: bool) -> Option<(std::path::PathBuf, bool)> {
    let real = std::fs::canonicalize(path).ok()?;
    let meta = std::fs::metadata(&real).ok()?;
    if !(meta.is_dir() || meta.is_file()) {
        return None;
    }
    let c = CString::new(real.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs reads the NUL-terminated path and writes one struct we own.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `st` is live for the call.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 || st.f_flag & libc::ST_RDONLY != 0 {
        return None;
    }
    Some((real, exec))
}

impl Isolation {
    /// The isolation for one run. `namespaces` says whether to create them (the probe passed
    /// and the sandbox is on); `writable` lists the read-write grants ([`writable_grant`]);
    /// `tmp` is the run's private temporary directory and the size of the tmpfs to mount on it
    /// in MiB (`None`: no tmpfs, the directory stays on its file system).
    pub fn new(
        namespaces: bool,
        writable: Vec<(std::path::PathBuf, bool)>,
        pinned: Pinned,
        tmp: Option<(&Path, u64)>,
        drop_root: bool,
        idmapped: Option<Idmapped>,
    ) -> Isolation {
        let root = running_as_root();
        let namespaces = namespaces.then(|| {
            let bind = |p: &Path, exec: bool, read_only: bool| {
                Some(Bind {
                    path: CString::new(p.as_os_str().as_bytes()).ok()?,
                    exec,
                    read_only,
                })
            };
            let mut binds: Vec<Bind> = writable
                .iter()
                .chain(pinned.held.iter())
                .filter_map(|(p, exec)| bind(p, *exec, false))
                .chain(pinned.read_only.iter().filter_map(|p| bind(p, false, true)))
                .collect();
            // A grant inside another is mounted after it, so that it stays on top (a shorter
            // path first); equal paths end up next to each other, so each is mounted once,
            // and a path the policy grants for write by name stays writable (it sorts first).
            binds.sort_by(|a, b| {
                (a.path.as_bytes().len(), a.path.as_bytes(), a.read_only).cmp(&(
                    b.path.as_bytes().len(),
                    b.path.as_bytes(),
                    b.read_only,
                ))
            });
            binds.dedup_by(|a, b| a.path == b.path);
            let drop_root = root && drop_root;
            let owner = if drop_root {
                format!(",uid={ROOT_SERVER_ID},gid={ROOT_SERVER_ID}")
            } else {
                String::new()
            };
            let tmp = tmp.and_then(|(path, mb)| {
                Some(Tmpfs {
                    path: CString::new(path.as_os_str().as_bytes()).ok()?,
                    data: CString::new(format!("size={mb}m,mode=0700{owner}")).ok()?,
                })
            });
            let nobody = format!("{ROOT_SERVER_ID} {ROOT_SERVER_ID} 1\n").into_bytes();
            Namespaces {
                user: (!root).then(id_maps),
                drop_root: drop_root.then(|| IdMaps {
                    uid_map: nobody.clone(),
                    gid_map: nobody,
                }),
                idmapped: if drop_root { idmapped } else { None },
                binds,
                tmp,
            }
        });
        Isolation {
            privileged: root || namespaces.as_ref().is_some_and(|n| n.user.is_some()),
            namespaces,
            last_cap: last_cap(),
        }
    }

    /// Creates the namespaces and the process layout described in the module documentation.
    /// Returns only in the server process S; C and R never return. Runs in the forked child.
    pub fn enter(&self) -> io::Result<()> {
        let Some(ns) = &self.namespaces else {
            return Ok(());
        };
        let Some(maps) = &ns.drop_root else {
            unshare_and_mount(ns)?;
            return self.layout(None);
        };
        unshare_namespaces(ns)?;
        // No supplementary group (root's group 0) may follow the server; R's user namespace
        // forbids setgroups, so they go here, while C is still root.
        // SAFETY: setgroups with a zero count reads nothing.
        check(unsafe { libc::setgroups(0, std::ptr::null()) } as libc::c_long)?;
        self.layout(Some(maps))
    }

    /// C forks R (into a user namespace of its own when `drop_root` has maps, which C writes
    /// before it makes the mounts read-only, /proc included) and R forks S. Returns in S only.
    fn layout(&self, drop_root: Option<&IdMaps>) -> io::Result<()> {
        let status = pipe()?;
        let lifeline = pipe()?;
        let sync = match drop_root {
            Some(_) => Some(pipe()?),
            None => None,
        };
        let init = fork_flags(if sync.is_some() {
            libc::CLONE_NEWUSER as libc::c_ulong
        } else {
            0
        })?;
        if init > 0 {
            if let (Some(maps), Some(sync), Some(ns)) = (drop_root, sync, &self.namespaces) {
                close(sync[0]);
                // R shares this mount namespace, so the mounts made now are R's and S's too.
                // R waits for the outcome (0, or the errno of the step that failed) and S
                // reports a failure as its own, so that mcpguard's spawn fails with it.
                let outcome: libc::c_int =
                    match write_maps_of(init, maps).and_then(|()| mount_all(ns)) {
                        Ok(()) => 0,
                        Err(e) => e.raw_os_error().unwrap_or(libc::EPERM),
                    };
                // SAFETY: write reads the live integer.
                unsafe {
                    libc::write(
                        sync[1],
                        (&outcome as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>(),
                    )
                };
                close(sync[1]);
            }
            outside_waiter(init, status[0], lifeline[1]);
        }
        // R: pid 1 of the new namespace. Become nobody when root's server must not be root.
        let mut failure: Option<io::Error> = None;
        if let Some(sync) = sync {
            close(sync[1]);
            let mut outcome: libc::c_int = libc::EPERM;
            // SAFETY: read writes at most the size of the live integer.
            let n = unsafe {
                libc::read(
                    sync[0],
                    (&mut outcome as *mut libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>(),
                )
            };
            close(sync[0]);
            let id = ROOT_SERVER_ID;
            failure = if n != std::mem::size_of::<libc::c_int>() as isize || outcome != 0 {
                Some(io::Error::from_raw_os_error(if outcome != 0 {
                    outcome
                } else {
                    libc::EPERM
                }))
            // SAFETY: setresgid and setresuid take integers only.
            } else if unsafe { libc::setresgid(id, id, id) } != 0
                // SAFETY: as above.
                || unsafe { libc::setresuid(id, id, id) } != 0
            {
                Some(last_error())
            } else {
                None
            };
        }
        // Die with C, and do not start if C is already gone. (After the change of ids, which
        // clears a parent-death signal.)
        close(lifeline[1]);
        set_parent_death_signal()?;
        let mut pfd = libc::pollfd {
            fd: lifeline[0],
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll reads and writes one live pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 0) } != 0 {
            // SAFETY: _exit ends only this forked process.
            unsafe { libc::_exit(125) };
        }
        let server = fork()?;
        if server > 0 {
            namespace_init(server, status[1]);
        }
        // S: the server. The pipes are close-on-exec.
        if let Some(e) = failure {
            return Err(e);
        }
        reenter_working_directory();
        Ok(())
    }

    /// Where the private TMPDIR's tmpfs is mounted, when it is: the child adds a Landlock rule
    /// for its root (see [`super::landlock::Ruleset::allow_path_fd`]).
    pub fn tmpfs(&self) -> Option<&std::ffi::CStr> {
        self.namespaces
            .as_ref()
            .and_then(|n| n.tmp.as_ref())
            .map(|t| t.path.as_c_str())
    }

    /// Removes every capability (bounding, effective, permitted, inheritable, ambient) and locks
    /// the securebits when the server would hold any. Runs in the forked child.
    pub fn drop_capabilities(&self) -> io::Result<()> {
        if self.privileged {
            for cap in 0..=self.last_cap {
                // SAFETY: prctl with integer arguments only.
                if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } != 0 {
                    let e = io::Error::last_os_error();
                    // A capability newer than this kernel knows does not exist to drop.
                    if e.raw_os_error() != Some(libc::EINVAL) {
                        return Err(e);
                    }
                }
            }
            // SAFETY: prctl with integer arguments only.
            if unsafe { libc::prctl(libc::PR_SET_SECUREBITS, SECUREBITS_LOCKED_DOWN, 0, 0, 0) } != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        // SAFETY: prctl with integer arguments only. Kernels before 4.3 have no ambient set.
        if unsafe {
            libc::prctl(
                libc::PR_CAP_AMBIENT,
                libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
                0,
                0,
                0,
            )
        } != 0
            && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
        {
            return Err(io::Error::last_os_error());
        }
        #[repr(C)]
        struct Header {
            version: u32,
            pid: libc::c_int,
        }
        #[repr(C)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        let header = Header {
            version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
            pid: 0,
        };
        let data = [
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
            Data {
                effective: 0,
                permitted: 0,
                inheritable: 0,
            },
        ];
        // SAFETY: capset reads the live header and the two-element data array (version 3).
        if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Starts a new session (and process group) for the child: no controlling terminal. Runs in the
/// forked child.
pub fn new_session() -> io::Result<()> {
    // SAFETY: setsid has no preconditions; it fails only for a process-group leader.
    if unsafe { libc::setsid() } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Marks every descriptor above 2 close-on-exec, so that the server inherits none of them (the
/// ones the sandbox still needs before exec stay usable until then). Runs in the forked child.
pub fn close_inherited_at_exec() -> io::Result<()> {
    // SAFETY: close_range with integer arguments; it only changes descriptor flags.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            CLOSE_RANGE_CLOEXEC,
        )
    };
    if r == 0 {
        return Ok(());
    }
    // Kernels before 5.11: one fcntl per possible descriptor, up to the limit.
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one live rlimit struct.
    let max = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        lim.rlim_cur.min(1 << 20) as libc::c_int
    } else {
        1 << 16
    };
    for fd in 3..max {
        // SAFETY: fcntl on a number that may not be a descriptor only fails with EBADF.
        unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    Ok(())
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

fn check(r: libc::c_long) -> io::Result<()> {
    if r < 0 {
        Err(last_error())
    } else {
        Ok(())
    }
}

fn set_parent_death_signal() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    check(unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    } as libc::c_long)
}

fn pipe() -> io::Result<[libc::c_int; 2]> {
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into the live array.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } as libc::c_long)?;
    Ok(fds)
}

fn close(fd: libc::c_int) {
    // SAFETY: closing a descriptor this process owns.
    unsafe { libc::close(fd) };
}

/// `fork` as a raw `clone`, so that no atfork handler (which may take locks held by another
/// thread of mcpguard at the first fork) runs. Returns the child's pid, or 0 in the child.
fn fork() -> io::Result<libc::pid_t> {
    fork_flags(0)
}

/// [`fork`] with extra `clone` flags (a new user namespace for R).
fn fork_flags(flags: libc::c_ulong) -> io::Result<libc::pid_t> {
    // SAFETY: clone with SIGCHLD, no new stack and no flag that shares memory duplicates the
    // process like fork; the child continues on a copy of this stack and makes only raw system
    // calls.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            libc::SIGCHLD as libc::c_ulong | flags,
            0,
            0,
            0,
            0,
        )
    };
    if pid < 0 {
        return Err(last_error());
    }
    Ok(pid as libc::pid_t)
}

fn write_file(path: &std::ffi::CStr, content: &[u8]) -> io::Result<()> {
    // SAFETY: open reads the NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: write reads `content`, which is live.
    let n = unsafe { libc::write(fd, content.as_ptr().cast(), content.len()) };
    let err = last_error();
    close(fd);
    if n != content.len() as isize {
        return Err(err);
    }
    Ok(())
}

/// Writes `setgroups` ("deny"), `uid_map` and `gid_map` of process `pid` (in this process's
/// PID namespace, which is the one /proc shows). The path is formatted on the stack: no
/// allocation between fork and exec.
fn write_maps_of(pid: libc::pid_t, maps: &IdMaps) -> io::Result<()> {
    let mut digits = [0u8; 12];
    let mut n = pid as u32;
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for (name, content) in [
        (&b"setgroups"[..], &b"deny"[..]),
        (&b"uid_map"[..], maps.uid_map.as_slice()),
        (&b"gid_map"[..], maps.gid_map.as_slice()),
    ] {
        let mut path = [0u8; 48];
        let mut at = 0;
        for &b in b"/proc/"
            .iter()
            .chain(digits[..len].iter().rev())
            .chain(b"/")
            .chain(name)
        {
            path[at] = b;
            at += 1;
        }
        let path = std::ffi::CStr::from_bytes_until_nul(&path[..=at])
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        write_file(path, content)?;
    }
    Ok(())
}

fn mount_setattr(path: &std::ffi::CStr, flags: libc::c_uint, set: u64, clr: u64) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clr,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr reads the NUL-terminated path and the live attribute struct.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
}

/// `open_tree(path, OPEN_TREE_CLONE | AT_RECURSIVE)`: a detached copy of the mounts at `path`
/// and below, close-on-exec. Raw system call.
fn open_tree_clone(path: &std::ffi::CStr) -> io::Result<libc::c_int> {
    // SAFETY: open_tree reads the NUL-terminated path and takes integer flags.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
        )
    };
    if fd < 0 {
        return Err(last_error());
    }
    Ok(fd as libc::c_int)
}

/// Gives the detached tree `tree` (every mount in it) the mapping of the user namespace
/// `userns`. Raw system call.
fn idmap_tree(tree: libc::c_int, userns: libc::c_int) -> io::Result<()> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: userns as u64,
    };
    // SAFETY: mount_setattr reads the empty NUL-terminated path and the live attribute struct.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    })
}

/// Clones the mounts at `path`, maps them through `userns` and mounts the copy over `path`, in
/// the calling process's mount namespace (C). Raw system calls only.
fn idmap_over_itself(path: &std::ffi::CStr, userns: libc::c_int) -> io::Result<()> {
    let tree = open_tree_clone(path)?;
    let moved = idmap_tree(tree, userns).and_then(|()| move_tree(tree, path));
    close(tree);
    moved
}

/// Mounts the detached tree `tree` on `path` (looked up from the root, so on the mount on top).
/// Raw system call.
fn move_tree(tree: libc::c_int, path: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: move_mount reads the empty path and the NUL-terminated target path.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            path.as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
}

/// Whether `path` can be ID-mapped ([`idmap_over_itself`]): the same clone and mapping, in the
/// parent, on a detached copy that is dropped unmounted (nothing changes in mcpguard's mount
/// namespace). A file system without ID-mapped mounts fails here with the errno the child
/// would meet, so that the refusal can name the path.
pub fn try_idmap(path: &Path, userns: &std::os::fd::OwnedFd) -> io::Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let tree = open_tree_clone(&c)?;
    let mapped = idmap_tree(tree, userns.as_raw_fd());
    close(tree);
    mapped
}

/// A user namespace whose only mapping is uid and gid 0 inside to [`ROOT_SERVER_ID`] outside,
/// for ID-mapped mounts: seen through one, a file root owns belongs to the server, and a file
/// the server creates belongs to root on disk; any other owner is unmapped, which matches no
/// process (only the "other" permission bits apply). Made in the parent (root only): a child
/// cloned into a new user namespace waits in `pause` while the parent writes its maps and opens
/// the namespace, then is killed; the descriptor keeps the namespace alive.
pub fn root_as_server_userns() -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: getpid takes no arguments.
    let parent = unsafe { libc::getpid() };
    let child = fork_flags(libc::CLONE_NEWUSER as libc::c_ulong)?;
    if child == 0 {
        // The throwaway child: raw system calls only, until the parent kills it. Should the
        // parent die first (killed between the fork and the kill below), the child must not
        // outlive it as a paused orphan holding a user namespace: the parent-death signal kills
        // it, and the check after it covers a parent that died before the signal was set.
        // SAFETY: prctl(PR_SET_PDEATHSIG) and getppid take integer arguments only; _exit ends
        // the child without running anything of the parent's.
        unsafe {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) != 0
                || libc::getppid() != parent
            {
                libc::_exit(1);
            }
        }
        loop {
            // SAFETY: pause takes no arguments.
            unsafe { libc::pause() };
        }
    }
    let map = format!("0 {ROOT_SERVER_ID} 1\n").into_bytes();
    let opened = write_maps_of(
        child,
        &IdMaps {
            uid_map: map.clone(),
            gid_map: map,
        },
    )
    .and_then(|()| {
        let path = CString::new(format!("/proc/{child}/ns/user"))
            .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
        // SAFETY: open reads the NUL-terminated path.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(last_error());
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    });
    // SAFETY: kill with integers, to the child forked above (not yet reaped, so its pid is
    // still its own).
    unsafe { libc::kill(child, libc::SIGKILL) };
    wait_for(child);
    opened
}

/// Enters the working directory again by its absolute path, in S. The one inherited from
/// mcpguard is the folder as it was before the mounts above (a grant bound over itself, a
/// folder ID-mapped for root's server), so relative paths would meet the covered mount: read-
/// only, and unmapped. A path lookup from the root lands on the mount on top. A directory the
/// server cannot enter (or whose path does not fit) is left as it was. Raw system calls only.
fn reenter_working_directory() {
    let mut buf = [0u8; 4096];
    // SAFETY: getcwd writes at most `buf.len()` bytes, NUL-terminated, into the live buffer.
    let n = unsafe { libc::syscall(libc::SYS_getcwd, buf.as_mut_ptr(), buf.len()) };
    if n > 0 && buf[0] == b'/' {
        // SAFETY: chdir reads the NUL-terminated path the kernel wrote.
        unsafe { libc::chdir(buf.as_ptr().cast()) };
    }
}

/// The namespaces and mounts, in the calling process (C). Raw system calls only.
fn unshare_and_mount(ns: &Namespaces) -> io::Result<()> {
    unshare_namespaces(ns)?;
    mount_all(ns)
}

/// The namespaces (and an ordinary user's own id maps), in the calling process (C).
fn unshare_namespaces(ns: &Namespaces) -> io::Result<()> {
    let mut flags = libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
    if ns.user.is_some() {
        flags |= libc::CLONE_NEWUSER;
    }
    // SAFETY: unshare with integer flags.
    check(unsafe { libc::unshare(flags) } as libc::c_long)?;
    if let Some(maps) = &ns.user {
        write_file(c"/proc/self/setgroups", b"deny")?;
        write_file(c"/proc/self/uid_map", &maps.uid_map)?;
        write_file(c"/proc/self/gid_map", &maps.gid_map)?;
    }
    Ok(())
}

/// The mounts of the new mount namespace, in the calling process (C): afterwards every mount is
/// read-only, /proc included, so id maps are written before.
fn mount_all(ns: &Namespaces) -> io::Result<()> {
    // Nothing mounted or changed here propagates back to the host, and nothing the host mounts
    // later propagates in (a slave would receive it writable, after the read-only pass below).
    // SAFETY: mount with a NUL-terminated target and null source, type and data.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    } as libc::c_long)?;
    // Before the binds: a grant (or a pin) inside a mapped folder is bound from the mapped
    // mount on top, and a bind mount keeps the mapping of its source.
    if let Some(m) = &ns.idmapped {
        // The read grants that keep their owners are cloned first, from the unmapped tree,
        // and mounted back over the mapped folders afterwards (the lookup of their path lands
        // on the mapped mount on top).
        let mut kept: [libc::c_int; MAX_KEPT] = [-1; MAX_KEPT];
        let mut result = Ok(());
        for (slot, p) in kept.iter_mut().zip(&m.kept) {
            match open_tree_clone(p) {
                Ok(fd) => *slot = fd,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if result.is_ok() {
            for p in &m.paths {
                result = idmap_over_itself(p, m.userns.as_raw_fd());
                if result.is_err() {
                    break;
                }
            }
        }
        for (&fd, p) in kept.iter().zip(&m.kept) {
            if result.is_ok() {
                result = move_tree(fd, p);
            }
            if fd >= 0 {
                close(fd);
            }
        }
        result?;
    }
    for b in &ns.binds {
        // SAFETY: mount reads the NUL-terminated source and target (the same grant).
        check(unsafe {
            libc::mount(
                b.path.as_ptr(),
                b.path.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            )
        } as libc::c_long)?;
    }
    mount_setattr(c"/", AT_RECURSIVE, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 0)?;
    for b in &ns.binds {
        if b.read_only {
            // Covered by the read-only pass above already; said again so that the order of
            // the binds can never make a trusted file writable.
            mount_setattr(
                &b.path,
                0,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                0,
            )?;
            continue;
        }
        let mut set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
        if !b.exec {
            set |= MOUNT_ATTR_NOEXEC;
        }
        mount_setattr(&b.path, 0, set, MOUNT_ATTR_RDONLY)?;
    }
    if let Some(t) = &ns.tmp {
        // Mounted last, so that the read-only pass above does not cover it.
        // SAFETY: mount reads the NUL-terminated source, target, type and data.
        check(unsafe {
            libc::mount(
                c"mcpguard-tmp".as_ptr(),
                t.path.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                t.data.as_ptr().cast(),
            )
        } as libc::c_long)?;
    }
    Ok(())
}

/// Closes every descriptor but `keep` (two at most; -1 for none). `close_range` (Linux 5.9) is
/// always there when this runs: the namespaces need `mount_setattr` (5.12), and the probe
/// refuses them on older kernels.
fn close_all_but(keep: [libc::c_int; 2]) {
    let mut from: libc::c_uint = 0;
    let mut keep = keep;
    keep.sort_unstable();
    for k in keep {
        if k < 0 {
            continue;
        }
        if (k as libc::c_uint) > from {
            // SAFETY: close_range with integer arguments.
            unsafe { libc::syscall(libc::SYS_close_range, from, k as libc::c_uint - 1, 0) };
        }
        from = k as libc::c_uint + 1;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, libc::c_uint::MAX, 0) };
}

fn wait_for(pid: libc::pid_t) -> libc::c_int {
    let mut st: libc::c_int = 0;
    loop {
        // SAFETY: waitpid writes the live status word.
        let r = unsafe { libc::waitpid(pid, &mut st, libc::__WALL) };
        if r == pid || (r < 0 && last_error().raw_os_error() != Some(libc::EINTR)) {
            return st;
        }
    }
}

/// C: waits for the namespace's reaper and ends the way the server ended, so that mcpguard
/// sees the server's own exit status. Ignores the termination signals the proxy sends to the
/// process group: they are meant for the server, which gets them directly.
fn outside_waiter(init: libc::pid_t, status_rd: libc::c_int, lifeline_wr: libc::c_int) -> ! {
    close_all_but([status_rd, lifeline_wr]);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
        set_disposition(sig, libc::SIG_IGN);
    }
    let init_status = wait_for(init);
    let mut server_status: libc::c_int = 0;
    // SAFETY: read writes at most four bytes into the live status word.
    let n = unsafe {
        libc::read(
            status_rd,
            (&mut server_status as *mut libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>(),
        )
    };
    let status = if n == std::mem::size_of::<libc::c_int>() as isize {
        server_status
    } else {
        init_status
    };
    mirror(status)
}

/// R: pid 1 of the namespace. Reaps every orphan; when the server ends, reports its status to C
/// and exits, which makes the kernel kill whatever is left in the namespace.
fn namespace_init(server: libc::pid_t, status_wr: libc::c_int) -> ! {
    close_all_but([status_wr, -1]);
    loop {
        let mut st: libc::c_int = 0;
        // SAFETY: waitpid writes the live status word.
        let r = unsafe { libc::waitpid(-1, &mut st, libc::__WALL) };
        if r == server {
            // SAFETY: write reads the live status word.
            unsafe {
                libc::write(
                    status_wr,
                    (&st as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>(),
                )
            };
            // SAFETY: _exit ends this process (and with it the namespace).
            unsafe { libc::_exit(0) };
        }
        if r < 0 && last_error().raw_os_error() == Some(libc::ECHILD) {
            // SAFETY: as above.
            unsafe { libc::_exit(0) };
        }
    }
}

fn set_disposition(sig: libc::c_int, handler: libc::sighandler_t) {
    // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" action; sigaction reads it.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler;
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Ends this process with `status` (a wait status): the same exit code, or the same signal.
fn mirror(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: setrlimit reads one live struct; sigprocmask and kill take integers and a
        // live, zeroed mask; _exit ends the process if the signal did not.
        unsafe {
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            set_disposition(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
    }
    // SAFETY: _exit ends this process.
    unsafe { libc::_exit(libc::WEXITSTATUS(status)) }
}

/// Whether this user can have the namespaces on this kernel: the same steps as
/// [`Isolation::enter`] (without grants), tried in a throw-away child. `Err` says which step
/// failed, in words a user can act on.
pub fn probe() -> Result<(), String> {
    let ns = Namespaces {
        user: (!running_as_root()).then(id_maps),
        drop_root: None,
        idmapped: None,
        binds: Vec::new(),
        tmp: None,
    };
    let child = fork().map_err(|e| format!("cannot fork to test namespaces: {e}"))?;
    if child == 0 {
        // The probe child: raw system calls only, and its exit code says how far it got.
        let code = match unshare_and_mount(&ns) {
            Err(_) => 1,
            Ok(()) => match fork() {
                Err(_) => 2,
                Ok(0) => 0,
                Ok(pid) => {
                    let st = wait_for(pid);
                    if libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0 {
                        0
                    } else {
                        2
                    }
                }
            },
        };
        // SAFETY: _exit ends only the probe child.
        unsafe { libc::_exit(code) };
    }
    let st = wait_for(child);
    match (libc::WIFEXITED(st), libc::WEXITSTATUS(st)) {
        (true, 0) => Ok(()),
        (true, 1) if ns.user.is_some() => Err(
            "this kernel does not let an ordinary user create user, mount, PID and IPC namespaces (kernel.unprivileged_userns_clone, user.max_user_namespaces or an AppArmor/SELinux rule forbids it)".into(),
        ),
        (true, 1) => Err("creating mount, PID and IPC namespaces failed (a container's seccomp profile or a missing CAP_SYS_ADMIN forbids it)".into()),
        (true, 2) => Err("the first process of a new PID namespace could not be started".into()),
        _ => Err("the namespace test process ended abnormally".into()),
    }
}

/// The cgroup v2 folder this process is in, when it is delegated to this user with the memory
/// and pids controllers (so that a child cgroup for the server could limit the memory and the
/// processes of all of its processes together); otherwise why not, in words for the report.
/// Only detected: mcpguard does not create cgroups yet, so the report names the memory of the
/// whole server as a residual risk either way.
pub fn delegated_cgroup() -> Result<std::path::PathBuf, String> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let rel = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("this process is in no cgroup v2 hierarchy (cgroup v1 only)")?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mount = mounts
        .lines()
        .find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            (right.split(' ').next()? == "cgroup2").then(|| left.split(' ').nth(4))?
        })
        .ok_or("no cgroup v2 file system is mounted")?;
    let rel = rel.trim_start_matches('/');
    let dir = if rel.is_empty() {
        Path::new(mount).to_path_buf()
    } else {
        Path::new(mount).join(rel)
    };
    let controllers = std::fs::read_to_string(dir.join("cgroup.controllers"))
        .map_err(|e| format!("cannot read {}/cgroup.controllers: {e}", dir.display()))?;
    let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
    if !(has("memory") && has("pids")) {
        return Err(format!(
            "the cgroup v2 hierarchy at {} offers the controllers [{}], not memory and pids (they are on cgroup v1 here, or not delegated)",
            dir.display(),
            controllers.split_whitespace().collect::<Vec<_>>().join(" ")
        ));
    }
    for name in ["", "cgroup.procs", "cgroup.subtree_control"] {
        let p = dir.join(name);
        let c = CString::new(p.as_os_str().as_bytes())
            .map_err(|_| format!("{} holds a NUL byte", p.display()))?;
        // SAFETY: access reads the NUL-terminated path.
        if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
            return Err(format!(
                "{} is not writable by this user: the cgroup is not delegated to it",
                p.display()
            ));
        }
    }
    Ok(dir)
}
