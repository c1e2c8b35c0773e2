//! The seccomp filters: what Landlock has no hook for on the kernels mcpguard runs on.
//!
//! Five filters are installed, and the kernel applies the strictest verdict of all of them:
//! 1. a guard, written here, that kills the process for a foreign architecture or the x32 ABI
//!    on x86_64 (their system call numbers mean other calls, and seccompiler's own architecture
//!    check does not look at the x32 bit), and answers ENOSYS to every system call numbered
//!    above [`HIGHEST_KNOWN`]: a call newer than these tables (Linux 6.13's `setxattrat`, 6.15's
//!    `open_tree_attr`, 6.17's `file_setattr` …) never reaches the kernel, so a kernel upgrade
//!    cannot open a door the deny list has not reviewed; ENOSYS is what an older kernel answers,
//!    which libc and the runtimes already handle with a fallback;
//! 2. the deny list, built by `seccompiler` (the rust-vmm filter compiler Firecracker uses):
//!    calls that reach the kernel's most privileged or least confined interfaces, and calls
//!    whose *arguments* make them an escape (TCP Fast Open flags, `listen` when no port may be
//!    bound, process control naming anything but the caller itself, terminal injection,
//!    namespace flags on `clone`, executable memfds), answered with EPERM;
//! 3. `clone3` answered ENOSYS (its flags are in memory, out of a filter's sight), so that libc
//!    falls back to `clone`, whose namespace flags the deny list checks;
//! 4. the socket filter, also built by seccompiler: a socket of a family or type Landlock does
//!    not confine (UDP, UNIX, netlink, raw, MPTCP …) is refused with EACCES unless the profile
//!    allows it; without `allow_unix_sockets`, `socketpair(2)` only makes stream or seqpacket
//!    pairs. A datagram pair's socket could `sendto` (or `connect` to) any named datagram socket
//!    the user may write, such as `/dev/log`; a stream pair is connected from birth, so the
//!    kernel refuses a destination on it (`EISCONN`), and a seqpacket pair ignores one.
//!
//! 5. the allowlist (installed second, right after the guard): the calls of [`allowed`], shaped
//!    like systemd's `@system-service`, pass; every other call is answered ENOSYS, so deny is
//!    the default (issue 31). ENOSYS rather than EPERM because it is what a kernel without the
//!    call answers, which runtimes handle by falling back; the deny list's calls keep their
//!    EPERM (among equally strict answers the kernel keeps the newest filter's). The list was
//!    checked against the calls real node and python servers, npx, uvx and uv run make (the
//!    launch-shape and interoperability tests pass under it); a call a runtime gains later
//!    fails with ENOSYS, which `sandbox-check`'s `deny by default` line names.
//!
//! The programs are computed in the parent as plain `Vec<libc::sock_filter>`; the child only
//! hands pointers to the kernel (see [`install`]).

// This module's `unsafe`: installing the filters (prctl, seccomp) and the probes of what the kernel supports (each block with its `// SAFETY:`).
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::io;

use seccompiler::{
    SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond,
    SeccompFilter, SeccompRule,
};

/// The audit architecture of the build target, which is the only one the filters admit.
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("mcpguard's seccomp filter knows x86_64 and aarch64 only");

#[cfg(target_arch = "x86_64")]
const TARGET: seccompiler::TargetArch = seccompiler::TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const TARGET: seccompiler::TargetArch = seccompiler::TargetArch::aarch64;

/// x86_64 system calls with this bit set are the x32 ABI.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The highest system call number these tables were reviewed against (`mseal`, Linux 6.10, the
/// newest call the `libc` crate names; the same number on x86_64 and aarch64). Anything above
/// is answered ENOSYS by the guard.
pub const HIGHEST_KNOWN: u32 = 462;

pub const RET_ALLOW: u32 = 0x7fff_0000;
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
pub const RET_ERRNO: u32 = 0x0005_0000;

/// `MSG_FASTOPEN`: data on `sendto`/`sendmsg` that opens the connection itself, past Landlock's
/// connect hook.
const MSG_FASTOPEN: u64 = 0x2000_0000;
/// `TCP_FASTOPEN_CONNECT`: makes the next `connect` lazy, so the data-carrying write connects.
const TCP_FASTOPEN_CONNECT: u64 = 30;
/// `TCP_FASTOPEN` on a listening socket (server side); refused with `listen` when no port may
/// be bound.
const TCP_FASTOPEN: u64 = 23;
/// `MFD_NOEXEC_SEAL` (Linux 6.3): a memfd that can never be made executable.
pub const MFD_NOEXEC_SEAL: u64 = 0x0008;
const TIOCSTI: u64 = 0x5412;
/// `fchmodat2` (Linux 6.6), which the `libc` crate names on x86_64 only; the same number on
/// aarch64.
const FCHMODAT2: libc::c_long = 452;
const TIOCLINUX: u64 = 0x541C;
/// `personality(0xffffffff)` only reads the current persona.
const PERSONALITY_QUERY: u64 = 0xffff_ffff;
/// `PRIO_PROCESS` and `IOPRIO_WHO_PROCESS`: the only `which` a server may name, with who = 0.
const PRIO_PROCESS: u64 = 0;
const IOPRIO_WHO_PROCESS: u64 = 1;
/// The type bits of `socket(2)`'s second argument (`SOCK_TYPE_MASK`); the other bits are flags.
const SOCK_TYPE_MASK: u64 = 0xf;

/// The namespace flags of `clone(2)`: a new namespace is a new kernel surface, and a user
/// namespace gives back every capability inside it.
const CLONE_NAMESPACES: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWCGROUP as u64,
];

/// What the profile allows; the rest of the filters is fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub allow_udp: bool,
    pub allow_unix: bool,
    pub allow_other_sockets: bool,
    /// Whether `listen(2)` is refused: no TCP port may be bound and no UNIX socket created, so
    /// nothing legitimate listens, and a `listen` without `bind` would autobind a TCP port that
    /// Landlock never sees.
    pub deny_listen: bool,
    /// Whether this kernel knows `MFD_NOEXEC_SEAL`; then a memfd without it is refused.
    pub memfd_noexec_seal: bool,
}

/// System calls refused whatever their arguments, by group, with the group's name for the
/// report. Calls a given architecture does not have are left out of its list.
pub fn always_denied() -> Vec<(&'static str, Vec<(&'static str, libc::c_long)>)> {
    use libc::*;
    let mut groups = vec![
        (
            "io_uring, ptrace and cross-process memory",
            vec![
                ("io_uring_setup", SYS_io_uring_setup),
                ("io_uring_enter", SYS_io_uring_enter),
                ("io_uring_register", SYS_io_uring_register),
                ("ptrace", SYS_ptrace),
                ("process_vm_readv", SYS_process_vm_readv),
                ("process_vm_writev", SYS_process_vm_writev),
                ("process_madvise", SYS_process_madvise),
                ("pidfd_getfd", SYS_pidfd_getfd),
            ],
        ),
        (
            "kernel keyrings",
            vec![
                ("add_key", SYS_add_key),
                ("request_key", SYS_request_key),
                ("keyctl", SYS_keyctl),
            ],
        ),
        (
            "kernel tracing, BPF and file-access monitoring",
            vec![
                ("perf_event_open", SYS_perf_event_open),
                ("bpf", SYS_bpf),
                ("fanotify_init", SYS_fanotify_init),
                ("userfaultfd", SYS_userfaultfd),
            ],
        ),
        (
            "mounts and namespaces",
            vec![
                ("mount", SYS_mount),
                ("umount2", SYS_umount2),
                ("pivot_root", SYS_pivot_root),
                ("chroot", SYS_chroot),
                ("mount_setattr", SYS_mount_setattr),
                ("move_mount", SYS_move_mount),
                ("open_tree", SYS_open_tree),
                ("fsopen", SYS_fsopen),
                ("fsconfig", SYS_fsconfig),
                ("fsmount", SYS_fsmount),
                ("fspick", SYS_fspick),
                ("unshare", SYS_unshare),
                ("setns", SYS_setns),
                ("open_by_handle_at", SYS_open_by_handle_at),
            ],
        ),
        (
            "kernel modules, kexec, reboot and swap",
            vec![
                ("init_module", SYS_init_module),
                ("finit_module", SYS_finit_module),
                ("delete_module", SYS_delete_module),
                ("kexec_load", SYS_kexec_load),
                ("kexec_file_load", SYS_kexec_file_load),
                ("reboot", SYS_reboot),
                ("swapon", SYS_swapon),
                ("swapoff", SYS_swapoff),
            ],
        ),
        (
            "clock, host name, accounting, quotas and the kernel log",
            vec![
                ("settimeofday", SYS_settimeofday),
                ("clock_settime", SYS_clock_settime),
                ("clock_adjtime", SYS_clock_adjtime),
                ("adjtimex", SYS_adjtimex),
                ("sethostname", SYS_sethostname),
                ("setdomainname", SYS_setdomainname),
                ("acct", SYS_acct),
                ("quotactl", SYS_quotactl),
                ("quotactl_fd", SYS_quotactl_fd),
                ("syslog", SYS_syslog),
                ("vhangup", SYS_vhangup),
            ],
        ),
    ];
    #[cfg(target_arch = "x86_64")]
    groups.push((
        "raw port I/O and obsolete interfaces",
        vec![
            ("iopl", SYS_iopl),
            ("ioperm", SYS_ioperm),
            ("uselib", SYS_uselib),
            ("lookup_dcookie", SYS_lookup_dcookie),
        ],
    ));
    groups
}

fn cond(arg: u8, op: Op, value: u64) -> Cond {
    // Only fixed, valid argument indexes (0 to 5) are used below.
    Cond::new(arg, Len::Dword, op, value).expect("argument index below 6")
}

fn rule(conds: Vec<Cond>) -> SeccompRule {
    SeccompRule::new(conds).expect("a rule has at least one condition")
}

/// A rule that matches when `arg` has `bit` set.
fn has_bit(arg: u8, bit: u64) -> SeccompRule {
    rule(vec![cond(arg, Op::MaskedEq(bit), bit)])
}

/// The calls refused by their arguments, each with the reason for the report.
fn argument_rules(opts: Options) -> Vec<(libc::c_long, Vec<SeccompRule>)> {
    // Process control: only the caller itself (pid 0) may be named; another pid, "all
    // processes of my user" or "my process group" (which holds mcpguard's helper outside the
    // namespaces, and with who = 0 names no pid at all) would change mcpguard, the host or
    // anything else of the user.
    let not_self = |arg: u8| vec![rule(vec![cond(arg, Op::Ne, 0)])];
    let who_rules = |who_process: u64| {
        vec![
            rule(vec![cond(1, Op::Ne, 0)]),
            rule(vec![cond(0, Op::Ne, who_process)]),
        ]
    };
    let mut rules = vec![
        // TCP Fast Open: the connection is made by the write, which Landlock does not see.
        (libc::SYS_sendto, vec![has_bit(3, MSG_FASTOPEN)]),
        (libc::SYS_sendmsg, vec![has_bit(2, MSG_FASTOPEN)]),
        (libc::SYS_sendmmsg, vec![has_bit(3, MSG_FASTOPEN)]),
        (
            libc::SYS_setsockopt,
            vec![
                rule(vec![
                    cond(1, Op::Eq, libc::IPPROTO_TCP as u64),
                    cond(2, Op::Eq, TCP_FASTOPEN_CONNECT),
                ]),
                rule(vec![
                    cond(1, Op::Eq, libc::IPPROTO_TCP as u64),
                    cond(2, Op::Eq, TCP_FASTOPEN),
                ]),
            ],
        ),
        (libc::SYS_prlimit64, not_self(0)),
        (libc::SYS_setpriority, who_rules(PRIO_PROCESS)),
        (libc::SYS_ioprio_set, who_rules(IOPRIO_WHO_PROCESS)),
        (libc::SYS_sched_setaffinity, not_self(0)),
        (libc::SYS_sched_setscheduler, not_self(0)),
        (libc::SYS_sched_setparam, not_self(0)),
        (libc::SYS_sched_setattr, not_self(0)),
        (libc::SYS_migrate_pages, not_self(0)),
        (libc::SYS_move_pages, not_self(0)),
        // Typing into a terminal, or its console control: never something a server needs.
        (
            libc::SYS_ioctl,
            vec![
                rule(vec![cond(1, Op::Eq, TIOCSTI)]),
                rule(vec![cond(1, Op::Eq, TIOCLINUX)]),
            ],
        ),
        // Changing the execution domain (for example turning address randomisation off).
        (
            libc::SYS_personality,
            vec![rule(vec![
                cond(0, Op::Ne, 0),
                cond(0, Op::Ne, PERSONALITY_QUERY),
            ])],
        ),
        (
            libc::SYS_clone,
            CLONE_NAMESPACES.iter().map(|&f| has_bit(0, f)).collect(),
        ),
    ];
    // A set-user-ID or set-group-ID file: inside a writable grant that root's server sees
    // ID-mapped (`isolate::Idmapped`), its files are root's on disk, so either bit would make a
    // program that runs as root for whoever starts it outside (and as uid 0, before
    // `drop_root`, the server could do the same). No server needs to set them: refused on
    // every call that sets a mode, and on every call that creates a file with one (`openat2`,
    // whose mode is in memory, is off the allowlist).
    let set_id = |mode: u8| {
        [libc::S_ISUID, libc::S_ISGID]
            .iter()
            .map(|&bit| has_bit(mode, bit as u64))
            .collect::<Vec<_>>()
    };
    let created_set_id = |flags: u8, mode: u8| {
        let mut out = Vec::new();
        for create in [libc::O_CREAT, libc::O_TMPFILE] {
            for bit in [libc::S_ISUID, libc::S_ISGID] {
                out.push(rule(vec![
                    cond(flags, Op::MaskedEq(create as u64), create as u64),
                    cond(mode, Op::MaskedEq(bit as u64), bit as u64),
                ]));
            }
        }
        out
    };
    rules.extend([
        (libc::SYS_fchmod, set_id(1)),
        (libc::SYS_fchmodat, set_id(2)),
        (FCHMODAT2, set_id(2)),
        (libc::SYS_openat, created_set_id(2, 3)),
        (libc::SYS_mknodat, set_id(2)),
    ]);
    #[cfg(target_arch = "x86_64")]
    rules.extend([
        (libc::SYS_chmod, set_id(1)),
        (libc::SYS_creat, set_id(1)),
        (libc::SYS_open, created_set_id(1, 2)),
        (libc::SYS_mknod, set_id(1)),
    ]);
    if opts.deny_listen {
        rules.push((libc::SYS_listen, vec![]));
    }
    if opts.memfd_noexec_seal {
        // A memfd that may become executable runs code that no file rule ever saw.
        rules.push((
            libc::SYS_memfd_create,
            vec![rule(vec![cond(1, Op::MaskedEq(MFD_NOEXEC_SEAL), 0)])],
        ));
    }
    rules
}

/// The `socketpair(2)` rules: without `allow_unix`, a pair that is neither stream nor seqpacket
/// is refused with EACCES (see the module documentation). Other families have no pairs.
fn socketpair_rules(opts: Options) -> Vec<SeccompRule> {
    if opts.allow_unix {
        return Vec::new();
    }
    (0..=SOCK_TYPE_MASK as i32)
        .filter(|&t| t != libc::SOCK_STREAM && t != libc::SOCK_SEQPACKET)
        .map(|t| {
            rule(vec![
                cond(0, Op::Eq, libc::AF_UNIX as u64),
                cond(1, Op::MaskedEq(SOCK_TYPE_MASK), t as u64),
            ])
        })
        .collect()
}

/// The socket rules: which `socket(2)` calls are refused with EACCES.
fn socket_rules(opts: Options) -> Vec<SeccompRule> {
    let family = |f: i32| cond(0, Op::Eq, f as u64);
    let ty = |t: i32| cond(1, Op::MaskedEq(SOCK_TYPE_MASK), t as u64);
    let proto = |op: Op, p: i32| cond(2, op, p as u64);
    let mut out = Vec::new();
    if !opts.allow_unix {
        out.push(rule(vec![family(libc::AF_UNIX)]));
    }
    for f in [libc::AF_INET, libc::AF_INET6] {
        if !opts.allow_other_sockets {
            // Neither stream nor datagram: raw, packet-style and the rest.
            for t in 0..=SOCK_TYPE_MASK as i32 {
                if t != libc::SOCK_STREAM && t != libc::SOCK_DGRAM {
                    out.push(rule(vec![family(f), ty(t)]));
                }
            }
            // A stream that is not TCP (MPTCP, SCTP): Landlock's TCP rules do not cover it.
            out.push(rule(vec![
                family(f),
                ty(libc::SOCK_STREAM),
                proto(Op::Ne, 0),
                proto(Op::Ne, libc::IPPROTO_TCP),
            ]));
            // A datagram that is not UDP (ICMP "ping" sockets, UDP-Lite).
            out.push(rule(vec![
                family(f),
                ty(libc::SOCK_DGRAM),
                proto(Op::Ne, 0),
                proto(Op::Ne, libc::IPPROTO_UDP),
            ]));
        }
        if !opts.allow_udp {
            for p in [0, libc::IPPROTO_UDP] {
                out.push(rule(vec![
                    family(f),
                    ty(libc::SOCK_DGRAM),
                    proto(Op::Eq, p),
                ]));
            }
        }
    }
    if !opts.allow_other_sockets {
        out.push(rule(vec![
            cond(0, Op::Ne, libc::AF_UNIX as u64),
            cond(0, Op::Ne, libc::AF_INET as u64),
            cond(0, Op::Ne, libc::AF_INET6 as u64),
        ]));
    }
    out
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Vec<libc::sock_filter> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        TARGET,
    )
    .expect("allow and errno are different actions");
    lower(filter)
}

/// A fixed rule set as the kernel's BPF instructions. The rule tables are ours and small, so a
/// failure here is a programming error that every test would show.
fn lower(filter: SeccompFilter) -> Vec<libc::sock_filter> {
    let program: seccompiler::BpfProgram = filter
        .try_into()
        .expect("the fixed rule set compiles to a program within BPF's limits");
    program
        .into_iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect()
}

/// A filter that answers each of `calls` with `errno` whatever its arguments and allows
/// everything else (also what a test uses to stand for a kernel that forbids a call).
pub fn refusing(calls: &[libc::c_long], errno: i32) -> Vec<libc::sock_filter> {
    compile(calls.iter().map(|&nr| (nr, Vec::new())).collect(), errno)
}

/// The architecture guard: kill for a foreign architecture or an x32 system call; ENOSYS for a
/// call numbered above [`HIGHEST_KNOWN`].
fn guard() -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    let i = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let mut p = vec![
        // Offset 4 of `struct seccomp_data` is the architecture, offset 0 the call number.
        i(LD_W_ABS, 0, 0, 4),
        i(JEQ_K, 1, 0, AUDIT_ARCH),
        i(RET_K, 0, 0, RET_KILL_PROCESS),
        i(LD_W_ABS, 0, 0, 0),
    ];
    if cfg!(target_arch = "x86_64") {
        p.push(i(JGE_K, 0, 1, X32_SYSCALL_BIT));
        p.push(i(RET_K, 0, 0, RET_KILL_PROCESS));
    }
    p.push(i(JGE_K, 0, 1, HIGHEST_KNOWN + 1));
    p.push(i(RET_K, 0, 0, RET_ERRNO | libc::ENOSYS as u32));
    p.push(i(RET_K, 0, 0, RET_ALLOW));
    p
}

/// The allowlist: the system calls a service needs, shaped like systemd's `@system-service`
/// set (`@basic-io`, `@file-system`, `@io-event`, `@ipc`, `@network-io`, `@process`,
/// `@resources`, `@signal`, `@sync`, `@timer`, `@aio`, memory and ids). Every other call is
/// answered ENOSYS by the filter built from it ([`allowlist`]): what an older kernel answers, so
/// that libc and the runtimes fall back rather than fail, as for calls above [`HIGHEST_KNOWN`].
/// The deny filters still refuse what they name (and their arguments) with EPERM; this one
/// closes the calls nobody reviewed (`kcmp`, `sysfs`, `ustat`, `name_to_handle_at`, `statmount`
/// and the other newer interfaces). Numbers above what the `libc` crate names are written out
/// (the same on x86_64 and aarch64 from 424 on).
#[rustfmt::skip]
pub fn allowed() -> Vec<libc::c_long> {
    use libc::*;
    let mut calls = vec![
        // @basic-io, @sync
        SYS_read, SYS_write, SYS_readv, SYS_writev, SYS_pread64, SYS_pwrite64, SYS_preadv,
        SYS_pwritev, SYS_preadv2, SYS_pwritev2, SYS_lseek, SYS_close, SYS_close_range, SYS_dup,
        SYS_dup3, SYS_fsync, SYS_fdatasync, SYS_sync, SYS_syncfs,
        // @file-system
        // Not openat2: the mode of a file it creates is in memory, out of the set-ID rules'
        // sight (`argument_rules`); ENOSYS makes its callers fall back to openat.
        SYS_openat, SYS_faccessat, SYS_faccessat2, SYS_fstat, SYS_newfstatat,
        SYS_statx, SYS_statfs, SYS_fstatfs, SYS_chdir, SYS_fchdir, SYS_getcwd, SYS_mkdirat,
        SYS_unlinkat, SYS_renameat2, SYS_linkat, SYS_symlinkat, SYS_readlinkat,
        SYS_fchmod, SYS_fchmodat, SYS_fchown, SYS_fchownat, SYS_truncate,
        SYS_ftruncate, SYS_fallocate, SYS_utimensat, SYS_getdents64, SYS_inotify_init1,
        SYS_inotify_add_watch, SYS_inotify_rm_watch, SYS_fcntl, SYS_flock, SYS_fadvise64,
        SYS_readahead, SYS_copy_file_range, SYS_sendfile, SYS_splice, SYS_tee, SYS_vmsplice,
        SYS_mknodat, SYS_umask, SYS_getxattr, SYS_lgetxattr, SYS_fgetxattr, SYS_listxattr,
        SYS_llistxattr, SYS_flistxattr, SYS_setxattr, SYS_lsetxattr, SYS_fsetxattr,
        SYS_removexattr, SYS_lremovexattr, SYS_fremovexattr, SYS_memfd_create, SYS_ioctl,
        // @io-event, @timer
        SYS_epoll_create1, SYS_epoll_ctl, SYS_epoll_pwait, SYS_epoll_pwait2, SYS_ppoll,
        SYS_pselect6, SYS_eventfd2, SYS_nanosleep, SYS_clock_nanosleep, SYS_clock_gettime,
        SYS_clock_getres, SYS_gettimeofday, SYS_timer_create, SYS_timer_settime,
        SYS_timer_gettime, SYS_timer_getoverrun, SYS_timer_delete, SYS_timerfd_create,
        SYS_timerfd_settime, SYS_timerfd_gettime, SYS_getitimer, SYS_setitimer,
        // @process, @signal
        SYS_clone, SYS_execve, SYS_execveat, SYS_exit, SYS_exit_group, SYS_wait4,
        SYS_waitid, SYS_kill, SYS_tgkill, SYS_tkill, SYS_getpid, SYS_getppid, SYS_gettid,
        SYS_getpgid, SYS_setpgid, SYS_getsid, SYS_setsid, SYS_pidfd_open, SYS_pidfd_send_signal,
        SYS_prctl, SYS_set_tid_address, SYS_set_robust_list, SYS_get_robust_list, SYS_rseq,
        SYS_capget, SYS_capset, SYS_personality, SYS_restart_syscall, SYS_rt_sigaction,
        SYS_rt_sigprocmask, SYS_rt_sigreturn, SYS_rt_sigpending, SYS_rt_sigtimedwait,
        SYS_rt_sigqueueinfo, SYS_rt_tgsigqueueinfo, SYS_rt_sigsuspend, SYS_sigaltstack,
        SYS_signalfd4,
        // memory
        SYS_brk, SYS_mmap, SYS_munmap, SYS_mprotect, SYS_mremap, SYS_madvise, SYS_msync,
        SYS_mincore, SYS_mlock, SYS_mlock2, SYS_munlock, SYS_mlockall, SYS_munlockall,
        SYS_membarrier, SYS_pkey_alloc, SYS_pkey_free, SYS_pkey_mprotect, SYS_mbind,
        SYS_get_mempolicy, SYS_set_mempolicy, SYS_mseal, SYS_futex, SYS_futex_waitv,
        // @resources, ids
        SYS_prlimit64, SYS_getrusage, SYS_getpriority,
        SYS_setpriority, SYS_sched_getaffinity, SYS_sched_setaffinity, SYS_sched_getparam,
        SYS_sched_setparam, SYS_sched_getscheduler, SYS_sched_setscheduler, SYS_sched_getattr,
        SYS_sched_setattr, SYS_sched_yield, SYS_sched_get_priority_max,
        SYS_sched_get_priority_min, SYS_sched_rr_get_interval, SYS_ioprio_get, SYS_ioprio_set,
        SYS_getcpu, SYS_sysinfo, SYS_uname, SYS_times, SYS_getrandom, SYS_getuid, SYS_geteuid,
        SYS_getgid, SYS_getegid, SYS_getresuid, SYS_getresgid, SYS_getgroups, SYS_setuid,
        SYS_setgid, SYS_setreuid, SYS_setregid, SYS_setresuid, SYS_setresgid, SYS_setgroups,
        SYS_setfsuid, SYS_setfsgid,
        // @network-io
        SYS_socket, SYS_socketpair, SYS_connect, SYS_accept, SYS_accept4, SYS_bind, SYS_listen,
        SYS_getsockname, SYS_getpeername, SYS_getsockopt, SYS_setsockopt, SYS_sendto,
        SYS_recvfrom, SYS_sendmsg, SYS_recvmsg, SYS_sendmmsg, SYS_recvmmsg, SYS_shutdown,
        // @ipc (the server's own IPC namespace), @aio
        SYS_pipe2, SYS_shmget, SYS_shmat, SYS_shmdt, SYS_shmctl, SYS_semget, SYS_semop,
        SYS_semtimedop, SYS_semctl, SYS_msgget, SYS_msgsnd, SYS_msgrcv, SYS_msgctl, SYS_mq_open,
        SYS_mq_unlink, SYS_mq_timedsend, SYS_mq_timedreceive, SYS_mq_notify, SYS_mq_getsetattr,
        SYS_io_setup, SYS_io_destroy, SYS_io_submit, SYS_io_cancel, SYS_io_getevents,
        // A server may confine itself further: both only ever take rights away.
        SYS_seccomp, SYS_landlock_create_ruleset, SYS_landlock_add_rule,
        SYS_landlock_restrict_self,
    ];
    // cachestat, map_shadow_stack (glibc's shadow stacks), futex_wake, futex_wait,
    // futex_requeue: newer than the `libc` crate's tables.
    // fchmodat2 too (452; the crate names it on x86_64 only).
    calls.extend([451, 452, 453, 454, 455, 456]);
    // getrlimit, setrlimit and sync_file_range, which the crate names on x86_64 only.
    #[cfg(target_arch = "aarch64")]
    calls.extend([163, 164, 84]);
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        SYS_open, SYS_creat, SYS_access, SYS_stat, SYS_lstat, SYS_mkdir, SYS_rmdir, SYS_unlink,
        SYS_rename, SYS_link, SYS_symlink, SYS_readlink, SYS_chmod, SYS_chown, SYS_lchown,
        SYS_utime, SYS_utimes, SYS_futimesat, SYS_getdents, SYS_inotify_init, SYS_mknod,
        SYS_dup2, SYS_pipe, SYS_epoll_create, SYS_epoll_wait, SYS_poll, SYS_select,
        SYS_eventfd, SYS_signalfd, SYS_pause, SYS_alarm, SYS_time, SYS_fork, SYS_vfork,
        SYS_getpgrp, SYS_arch_prctl, SYS_renameat, SYS_getrlimit, SYS_setrlimit,
        SYS_sync_file_range,
    ]);
    calls
}

/// The allowlist filter: each of [`allowed`] allowed, everything else ENOSYS. Installed before
/// the deny filters, so that a call both refuse keeps their EPERM (the kernel keeps the
/// newest filter's answer among equally strict ones).
fn allowlist() -> Vec<libc::sock_filter> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> =
        allowed().into_iter().map(|nr| (nr, Vec::new())).collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::ENOSYS as u32),
        SeccompAction::Allow,
        TARGET,
    )
    .expect("allow and errno are different actions");
    lower(filter)
}

/// The filters for `opts`, in the order they are installed.
pub fn programs(opts: Options) -> Vec<Vec<libc::sock_filter>> {
    let mut deny: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for (_, calls) in always_denied() {
        for (_, nr) in calls {
            deny.insert(nr, Vec::new());
        }
    }
    for (nr, rules) in argument_rules(opts) {
        deny.insert(nr, rules);
    }
    let mut sockets = BTreeMap::new();
    let socket = socket_rules(opts);
    if !socket.is_empty() {
        sockets.insert(libc::SYS_socket, socket);
    }
    let pairs = socketpair_rules(opts);
    if !pairs.is_empty() {
        sockets.insert(libc::SYS_socketpair, pairs);
    }
    // `clone3` takes its flags in memory, where a filter cannot look, so it could create the
    // namespaces `clone` may not. ENOSYS makes glibc (2.34 and later) fall back to `clone`, as it
    // does on kernels before 5.3, whose flags the deny filter checks.
    let mut out = vec![
        guard(),
        allowlist(),
        compile(deny, libc::EPERM),
        refusing(&[libc::SYS_clone3], libc::ENOSYS),
    ];
    if !sockets.is_empty() {
        out.push(compile(sockets, libc::EACCES));
    }
    out
}

/// Whether this kernel can run seccomp filters that return errors (Linux 4.14 and later with
/// CONFIG_SECCOMP_FILTER).
pub fn available() -> bool {
    action_available(RET_ERRNO)
}

/// Whether this kernel knows the filter return action `action` (`SECCOMP_GET_ACTION_AVAIL`).
pub(super) fn action_available(action: u32) -> bool {
    // SAFETY: SECCOMP_GET_ACTION_AVAIL reads one u32 from the pointer, which is live.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            2 as libc::c_uint, // SECCOMP_GET_ACTION_AVAIL
            0 as libc::c_uint,
            &action as *const u32,
        )
    };
    r == 0
}

/// Whether this kernel knows `MFD_NOEXEC_SEAL` (Linux 6.3): a memfd created with it succeeds.
pub fn memfd_noexec_seal_available() -> bool {
    // SAFETY: memfd_create reads the NUL-terminated name and returns a descriptor we own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_memfd_create,
            c"mcpguard-probe".as_ptr(),
            (libc::MFD_CLOEXEC as u64 | MFD_NOEXEC_SEAL) as libc::c_uint,
        )
    };
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` was just returned by the kernel and is closed once.
    unsafe { libc::close(fd as libc::c_int) };
    true
}

/// Installs `filter` on the calling thread. Runs in the forked child between fork and exec: one
/// raw system call on memory prepared by the parent; no allocation.
pub fn install(filter: &[libc::sock_filter]) -> io::Result<()> {
    let prog = libc::sock_fprog {
        len: filter.len() as libc::c_ushort,
        filter: filter.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `prog` points at `filter`, which outlives the call; the kernel copies the program.
    // no_new_privs was set before, as the kernel requires of an unprivileged caller.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0 as libc::c_uint,
            &prog as *const libc::sock_fprog,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs one classic BPF program over a system call, as the kernel would (the subset of
    /// instructions seccompiler and the guard emit).
    fn run_one(prog: &[libc::sock_filter], arch: u32, nr: i64, args: [u64; 6]) -> u32 {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&(nr as i32).to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let i = prog[pc];
            pc += 1;
            let jump = |cond: bool| usize::from(if cond { i.jt } else { i.jf });
            match i.code {
                0x20 => {
                    let o = i.k as usize;
                    acc = u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
                }
                0x54 => acc &= i.k,
                0x06 => return i.k,
                0x05 => pc += i.k as usize,
                0x15 => pc += jump(acc == i.k),
                0x25 => pc += jump(acc > i.k),
                0x35 => pc += jump(acc >= i.k),
                0x45 => pc += jump(acc & i.k != 0),
                c => panic!("unknown opcode {c:#x}"),
            }
        }
    }

    /// The verdict of all the filters together: the kernel takes the strictest (kill before
    /// errno before allow; among errnos, the last installed filter's).
    fn run(progs: &[Vec<libc::sock_filter>], arch: u32, nr: i64, args: [u64; 6]) -> u32 {
        let rank = |v: u32| match v & 0xffff_0000 {
            RET_KILL_PROCESS => 3,
            RET_ERRNO => 2,
            _ => 1,
        };
        let mut best = RET_ALLOW;
        for p in progs {
            let v = run_one(p, arch, nr, args);
            if rank(v) >= rank(best) && v != RET_ALLOW {
                best = v;
            }
        }
        best
    }

    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
    const EACCES: u32 = RET_ERRNO | libc::EACCES as u32;

    fn strict() -> Vec<Vec<libc::sock_filter>> {
        programs(Options {
            allow_udp: false,
            allow_unix: false,
            allow_other_sockets: false,
            deny_listen: true,
            memfd_noexec_seal: true,
        })
    }

    fn call(progs: &[Vec<libc::sock_filter>], nr: i64, args: &[u64]) -> u32 {
        let mut a = [0u64; 6];
        a[..args.len()].copy_from_slice(args);
        run(progs, AUDIT_ARCH, nr, a)
    }

    fn socket(progs: &[Vec<libc::sock_filter>], family: i32, ty: i32, proto: i32) -> u32 {
        call(
            progs,
            libc::SYS_socket,
            &[family as u64, ty as u64, proto as u64],
        )
    }

    #[test]
    fn foreign_architectures_and_x32_are_killed() {
        let p = strict();
        assert_eq!(run(&p, 0x4000_0003, 1, [0; 6]), RET_KILL_PROCESS);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(
                run(&p, AUDIT_ARCH, 0x4000_0000 + 41, [0; 6]),
                RET_KILL_PROCESS
            );
        }
        assert_eq!(call(&p, libc::SYS_openat, &[]), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_read, &[]), RET_ALLOW);
    }

    #[test]
    fn calls_newer_than_the_tables_are_unknown() {
        let p = strict();
        let enosys = RET_ERRNO | libc::ENOSYS as u32;
        assert_eq!(call(&p, HIGHEST_KNOWN as i64, &[]), RET_ALLOW, "mseal");
        for nr in [HIGHEST_KNOWN + 1, 467 /* open_tree_attr */, 469, 1023] {
            assert_eq!(call(&p, nr as i64, &[]), enosys, "{nr}");
        }
    }

    #[test]
    fn calls_off_the_allowlist_are_unknown_and_denied_ones_keep_eperm() {
        let p = strict();
        let enosys = RET_ERRNO | libc::ENOSYS as u32;
        for nr in [libc::SYS_kcmp, libc::SYS_name_to_handle_at] {
            assert_eq!(call(&p, nr, &[]), enosys, "{nr}");
        }
        #[cfg(target_arch = "x86_64")]
        assert_eq!(call(&p, libc::SYS_sysfs, &[]), enosys);
        for nr in [
            libc::SYS_read,
            libc::SYS_openat,
            libc::SYS_futex,
            libc::SYS_execve,
            454,
        ] {
            assert_eq!(call(&p, nr, &[]), RET_ALLOW, "{nr}");
        }
        assert_eq!(
            call(&p, libc::SYS_mount, &[]),
            EPERM,
            "the deny list's answer"
        );
        assert_eq!(call(&p, libc::SYS_ptrace, &[]), EPERM);
    }

    #[test]
    fn every_listed_call_is_refused() {
        let p = strict();
        for (group, calls) in always_denied() {
            for (name, nr) in calls {
                assert_eq!(call(&p, nr, &[]), EPERM, "{group}: {name}");
            }
        }
    }

    #[test]
    fn arguments_decide_the_escape_calls() {
        let p = strict();
        // TCP Fast Open, by flag, whatever else is set.
        assert_eq!(
            call(&p, libc::SYS_sendto, &[3, 0, 1, MSG_FASTOPEN | 0x40]),
            EPERM
        );
        assert_eq!(call(&p, libc::SYS_sendto, &[3, 0, 1, 0x40]), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_sendmsg, &[3, 0, MSG_FASTOPEN]), EPERM);
        assert_eq!(call(&p, libc::SYS_sendmsg, &[3, 0, 0]), RET_ALLOW);
        assert_eq!(
            call(&p, libc::SYS_sendmmsg, &[3, 0, 1, MSG_FASTOPEN]),
            EPERM
        );
        let tcp = libc::IPPROTO_TCP as u64;
        assert_eq!(
            call(&p, libc::SYS_setsockopt, &[3, tcp, TCP_FASTOPEN_CONNECT]),
            EPERM
        );
        assert_eq!(
            call(&p, libc::SYS_setsockopt, &[3, tcp, 1 /* TCP_NODELAY */]),
            RET_ALLOW
        );
        assert_eq!(call(&p, libc::SYS_listen, &[3, 5]), EPERM);
        // Process control: the caller itself only.
        assert_eq!(call(&p, libc::SYS_prlimit64, &[0, 7, 0, 8]), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_prlimit64, &[1234, 7, 0, 8]), EPERM);
        assert_eq!(call(&p, libc::SYS_setpriority, &[0, 0, 5]), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_setpriority, &[0, 1234, 5]), EPERM);
        assert_eq!(
            call(&p, libc::SYS_setpriority, &[2 /* PRIO_USER */, 0, 5]),
            EPERM
        );
        assert_eq!(
            call(&p, libc::SYS_setpriority, &[1 /* PRIO_PGRP */, 0, 5]),
            EPERM,
            "the caller's process group holds mcpguard's helper"
        );
        assert_eq!(call(&p, libc::SYS_sched_setaffinity, &[99]), EPERM);
        assert_eq!(call(&p, libc::SYS_sched_setaffinity, &[0]), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_ioprio_set, &[1, 99, 0]), EPERM);
        assert_eq!(call(&p, libc::SYS_ioprio_set, &[3 /* USER */, 0]), EPERM);
        assert_eq!(call(&p, libc::SYS_ioprio_set, &[2 /* PGRP */, 0]), EPERM);
        assert_eq!(
            call(&p, libc::SYS_ioprio_set, &[IOPRIO_WHO_PROCESS, 0]),
            RET_ALLOW
        );
        // Terminals.
        assert_eq!(call(&p, libc::SYS_ioctl, &[0, TIOCSTI]), EPERM);
        assert_eq!(call(&p, libc::SYS_ioctl, &[0, TIOCLINUX]), EPERM);
        assert_eq!(call(&p, libc::SYS_ioctl, &[0, libc::TIOCGWINSZ]), RET_ALLOW);
        // The upper half of an int argument is ignored by the kernel, and so by the filter.
        assert_eq!(call(&p, libc::SYS_ioctl, &[0, (1 << 32) | TIOCSTI]), EPERM);
        // Namespaces by clone; a thread or a plain fork is fine.
        assert_eq!(
            call(&p, libc::SYS_clone, &[libc::CLONE_NEWUSER as u64]),
            EPERM
        );
        assert_eq!(
            call(
                &p,
                libc::SYS_clone,
                &[(libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_NEWNET) as u64]
            ),
            EPERM
        );
        let thread = (libc::CLONE_VM
            | libc::CLONE_FS
            | libc::CLONE_FILES
            | libc::CLONE_SIGHAND
            | libc::CLONE_THREAD
            | libc::CLONE_SYSVSEM
            | libc::CLONE_SETTLS
            | libc::CLONE_PARENT_SETTID
            | libc::CLONE_CHILD_CLEARTID) as u64;
        assert_eq!(call(&p, libc::SYS_clone, &[thread]), RET_ALLOW);
        assert_eq!(
            call(&p, libc::SYS_clone, &[libc::SIGCHLD as u64]),
            RET_ALLOW
        );
        assert_eq!(
            call(&p, libc::SYS_clone3, &[0, 88]),
            RET_ERRNO | libc::ENOSYS as u32,
            "clone3 is unknown, so that libc falls back to clone"
        );
        // Executable memfds.
        assert_eq!(call(&p, libc::SYS_memfd_create, &[0, 1]), EPERM);
        assert_eq!(
            call(&p, libc::SYS_memfd_create, &[0, 1 | MFD_NOEXEC_SEAL]),
            RET_ALLOW
        );
        assert_eq!(
            call(&p, libc::SYS_personality, &[PERSONALITY_QUERY]),
            RET_ALLOW
        );
        assert_eq!(call(&p, libc::SYS_personality, &[0x0040000]), EPERM);
    }

    #[test]
    fn no_call_sets_a_set_id_bit() {
        let p = strict();
        let (suid, sgid) = (libc::S_ISUID as u64, libc::S_ISGID as u64);
        let creat = libc::O_CREAT as u64 | libc::O_WRONLY as u64;
        assert_eq!(call(&p, libc::SYS_fchmod, &[3, 0o755]), RET_ALLOW);
        assert_eq!(call(&p, libc::SYS_fchmod, &[3, suid | 0o755]), EPERM);
        assert_eq!(call(&p, libc::SYS_fchmodat, &[3, 0, sgid | 0o755]), EPERM);
        assert_eq!(call(&p, FCHMODAT2, &[3, 0, suid, 0]), EPERM);
        assert_eq!(call(&p, libc::SYS_fchmodat, &[3, 0, 0o644]), RET_ALLOW);
        assert_eq!(
            call(&p, libc::SYS_openat, &[3, 0, creat, suid | 0o755]),
            EPERM
        );
        assert_eq!(
            call(&p, libc::SYS_openat, &[3, 0, libc::O_TMPFILE as u64, sgid]),
            EPERM
        );
        assert_eq!(call(&p, libc::SYS_openat, &[3, 0, creat, 0o755]), RET_ALLOW);
        // Without O_CREAT the mode argument is whatever the register held: never judged.
        assert_eq!(
            call(&p, libc::SYS_openat, &[3, 0, 0, suid | sgid]),
            RET_ALLOW
        );
        assert_eq!(call(&p, libc::SYS_mknodat, &[3, 0, 0o100000 | suid]), EPERM);
        assert_eq!(
            call(&p, libc::SYS_openat2, &[3, 0, 0, 24]),
            RET_ERRNO | libc::ENOSYS as u32,
            "openat2's mode is in memory"
        );
    }

    #[test]
    fn sockets_are_decided_by_family_type_and_protocol() {
        let p = strict();
        let tcp = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
        assert_eq!(socket(&p, libc::AF_INET, tcp, 0), RET_ALLOW);
        assert_eq!(
            socket(&p, libc::AF_INET6, libc::SOCK_STREAM, libc::IPPROTO_TCP),
            RET_ALLOW
        );
        assert_eq!(
            socket(&p, libc::AF_INET, libc::SOCK_STREAM, 262),
            EACCES,
            "MPTCP is not covered by Landlock's TCP rules"
        );
        let udp = libc::SOCK_DGRAM | libc::SOCK_CLOEXEC;
        assert_eq!(socket(&p, libc::AF_INET, udp, 0), EACCES);
        assert_eq!(
            socket(&p, libc::AF_INET6, libc::SOCK_DGRAM, libc::IPPROTO_UDP),
            EACCES
        );
        assert_eq!(
            socket(&p, libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
            EACCES
        );
        assert_eq!(socket(&p, libc::AF_UNIX, libc::SOCK_STREAM, 0), EACCES);
        let pair = |ty: i32| {
            call(
                &p,
                libc::SYS_socketpair,
                &[libc::AF_UNIX as u64, ty as u64, 0, 0],
            )
        };
        assert_eq!(pair(libc::SOCK_STREAM | libc::SOCK_CLOEXEC), RET_ALLOW);
        assert_eq!(pair(libc::SOCK_SEQPACKET), RET_ALLOW);
        assert_eq!(
            pair(libc::SOCK_DGRAM | libc::SOCK_CLOEXEC),
            EACCES,
            "a datagram pair can sendto a named socket"
        );
        assert_eq!(pair(libc::SOCK_RAW), EACCES);
        assert_eq!(socket(&p, libc::AF_NETLINK, libc::SOCK_RAW, 0), EACCES);
        assert_eq!(socket(&p, libc::AF_PACKET, libc::SOCK_RAW, 0), EACCES);
        assert_eq!(
            call(
                &p,
                libc::SYS_socket,
                &[
                    (1u64 << 32) | libc::AF_INET as u64,
                    libc::SOCK_DGRAM as u64,
                    0
                ]
            ),
            EACCES
        );
    }

    #[test]
    fn the_options_open_exactly_their_case() {
        let base = Options {
            allow_udp: false,
            allow_unix: false,
            allow_other_sockets: false,
            deny_listen: false,
            memfd_noexec_seal: false,
        };
        let udp = programs(Options {
            allow_udp: true,
            ..base
        });
        assert_eq!(socket(&udp, libc::AF_INET, libc::SOCK_DGRAM, 0), RET_ALLOW);
        assert_eq!(
            socket(&udp, libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_ICMP),
            EACCES
        );
        assert_eq!(socket(&udp, libc::AF_UNIX, libc::SOCK_STREAM, 0), EACCES);
        let unix = programs(Options {
            allow_unix: true,
            ..base
        });
        assert_eq!(socket(&unix, libc::AF_UNIX, libc::SOCK_DGRAM, 0), RET_ALLOW);
        assert_eq!(
            call(
                &unix,
                libc::SYS_socketpair,
                &[libc::AF_UNIX as u64, libc::SOCK_DGRAM as u64]
            ),
            RET_ALLOW
        );
        assert_eq!(socket(&unix, libc::AF_INET, libc::SOCK_DGRAM, 0), EACCES);
        let other = programs(Options {
            allow_other_sockets: true,
            ..base
        });
        assert_eq!(
            socket(&other, libc::AF_NETLINK, libc::SOCK_RAW, 0),
            RET_ALLOW
        );
        assert_eq!(socket(&other, libc::AF_INET, libc::SOCK_DGRAM, 0), EACCES);
        assert_eq!(
            call(&other, libc::SYS_ptrace, &[]),
            EPERM,
            "ptrace stays denied whatever the options"
        );
        // listen and plain memfds pass when the profile and kernel call for it.
        assert_eq!(call(&programs(base), libc::SYS_listen, &[3, 5]), RET_ALLOW);
        assert_eq!(
            call(&programs(base), libc::SYS_memfd_create, &[0, 1]),
            RET_ALLOW
        );
        let everything = programs(Options {
            allow_udp: true,
            allow_unix: true,
            allow_other_sockets: true,
            ..base
        });
        assert_eq!(everything.len(), 4, "no socket filter is needed");
    }
}
