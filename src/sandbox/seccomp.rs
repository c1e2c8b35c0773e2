//! The seccomp filter: what Landlock cannot restrict on the kernels mcpguard runs on (UDP and
//! other socket families, UNIX sockets, io_uring, ptrace, cross-process memory access).
//!
//! The BPF program is computed in the parent as a plain `Vec<libc::sock_filter>`; the child
//! only hands a pointer to it to the kernel. It is written with a tiny assembler (labels resolved
//! to relative jumps) rather than a crate such as `seccompiler`, because the program is short,
//! and this way every instruction is visible and the unit tests run it through an interpreter.
//!
//! Shape: the architecture is checked first (a foreign architecture, or the x32 ABI on x86_64,
//! kills the process: its system call numbers mean something else); then a short list of
//! system calls is denied with EPERM; `socket(2)` is decided by its family, type and protocol;
//! everything else is allowed (Landlock does the confining).

use std::io;

/// The audit architecture of the build target, which is the only one the filter admits.
#[cfg(target_arch = "x86_64")]
pub const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
pub const AUDIT_ARCH: u32 = 0xC000_00B7;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("mcpguard's seccomp filter knows x86_64 and aarch64 only");

/// x86_64 system calls with this bit set are the x32 ABI.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// Offsets in `struct seccomp_data`: nr (i32), arch (u32), instruction pointer (u64), args
/// (6 × u64). Both supported architectures are little-endian, so an argument's low 32 bits are
/// at its offset; `socket(2)` takes `int`s, so the kernel uses exactly those bits.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const fn off_arg(i: u32) -> u32 {
    16 + 8 * i
}

pub const RET_ALLOW: u32 = 0x7fff_0000;
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
pub const RET_ERRNO: u32 = 0x0005_0000;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

/// What the profile allows; the rest of the filter is fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    pub allow_udp: bool,
    pub allow_unix: bool,
    pub allow_other_sockets: bool,
}

/// System calls always refused inside the sandbox, with their names for the report.
pub fn denied_syscalls() -> [(&'static str, libc::c_long); 6] {
    [
        ("io_uring_setup", libc::SYS_io_uring_setup),
        ("io_uring_enter", libc::SYS_io_uring_enter),
        ("io_uring_register", libc::SYS_io_uring_register),
        ("ptrace", libc::SYS_ptrace),
        ("process_vm_readv", libc::SYS_process_vm_readv),
        ("process_vm_writev", libc::SYS_process_vm_writev),
    ]
}

enum Jump {
    Next,
    To(&'static str),
}

enum Insn {
    Load(u32),
    And(u32),
    Ret(u32),
    /// if A == k goto t else goto f
    Jeq(u32, Jump, Jump),
    Jge(u32, Jump, Jump),
    Label(&'static str),
}

/// Resolves labels to relative offsets. Panics only on a mistake in the fixed program below
/// (a missing label or a jump over more than 255 instructions), which the unit tests exercise.
fn assemble(prog: &[Insn]) -> Vec<libc::sock_filter> {
    let mut labels = std::collections::HashMap::new();
    let mut pc = 0usize;
    for insn in prog {
        match insn {
            Insn::Label(name) => {
                labels.insert(*name, pc);
            }
            _ => pc += 1,
        }
    }
    let mut out = Vec::with_capacity(pc);
    let offset = |from: usize, j: &Jump| -> u8 {
        match j {
            Jump::Next => 0,
            Jump::To(l) => {
                let target = *labels.get(l).expect("label defined");
                let distance = target
                    .checked_sub(from + 1)
                    .expect("BPF jumps only forward");
                u8::try_from(distance).expect("jump fits in 8 bits")
            }
        }
    };
    let insn = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    for i in prog {
        let at = out.len();
        match i {
            Insn::Label(_) => continue,
            Insn::Load(off) => out.push(insn(LD_W_ABS, 0, 0, *off)),
            Insn::And(k) => out.push(insn(AND_K, 0, 0, *k)),
            Insn::Ret(k) => out.push(insn(RET_K, 0, 0, *k)),
            Insn::Jeq(k, t, f) => out.push(insn(JEQ_K, offset(at, t), offset(at, f), *k)),
            Insn::Jge(k, t, f) => out.push(insn(JGE_K, offset(at, t), offset(at, f), *k)),
        }
    }
    out
}

/// The filter for `opts`.
pub fn program(opts: Options) -> Vec<libc::sock_filter> {
    use Insn::*;
    use Jump::{Next, To};
    let deny_socket = RET_ERRNO | libc::EACCES as u32;
    let verdict = |allowed: bool| if allowed { RET_ALLOW } else { deny_socket };
    let mut p = vec![
        Load(OFF_ARCH),
        Jeq(AUDIT_ARCH, To("arch_ok"), Next),
        Ret(RET_KILL_PROCESS),
        Label("arch_ok"),
        Load(OFF_NR),
    ];
    if cfg!(target_arch = "x86_64") {
        p.push(Jge(X32_SYSCALL_BIT, Next, To("native")));
        p.push(Ret(RET_KILL_PROCESS));
        p.push(Label("native"));
    }
    // Neither architecture's native ABI has the `socketcall` multiplexer, so `socket` below is
    // the only way to create a socket.
    for (_, nr) in denied_syscalls() {
        p.push(Jeq(nr as u32, To("eperm"), Next));
    }
    p.extend([
        Jeq(libc::SYS_socket as u32, To("socket"), Next),
        Ret(RET_ALLOW),
        Label("eperm"),
        Ret(RET_ERRNO | libc::EPERM as u32),
        Label("socket"),
        Load(off_arg(0)),
        Jeq(libc::AF_UNIX as u32, To("unix"), Next),
        Jeq(libc::AF_INET as u32, To("inet"), Next),
        Jeq(libc::AF_INET6 as u32, To("inet"), To("other")),
        Label("inet"),
        Load(off_arg(1)),
        And(!((libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) as u32)),
        Jeq(libc::SOCK_STREAM as u32, To("stream"), Next),
        Jeq(libc::SOCK_DGRAM as u32, To("dgram"), To("other")),
        // TCP is Landlock's: a stream socket with protocol 0 or TCP. MPTCP, SCTP and the
        // like are other protocols, which Landlock's TCP rules do not cover.
        Label("stream"),
        Load(off_arg(2)),
        Jeq(0, To("allow"), Next),
        Jeq(libc::IPPROTO_TCP as u32, To("allow"), To("other")),
        // UDP: a datagram socket with protocol 0 or UDP. ICMP "ping" sockets are other.
        Label("dgram"),
        Load(off_arg(2)),
        Jeq(0, To("udp"), Next),
        Jeq(libc::IPPROTO_UDP as u32, To("udp"), To("other")),
        // The verdicts come last: classic BPF only jumps forward.
        Label("udp"),
        Ret(verdict(opts.allow_udp)),
        Label("unix"),
        Ret(verdict(opts.allow_unix)),
        Label("other"),
        Ret(verdict(opts.allow_other_sockets)),
        Label("allow"),
        Ret(RET_ALLOW),
    ]);
    assemble(&p)
}

/// Whether this kernel can run seccomp filters that return errors (Linux 4.14 and later with
/// CONFIG_SECCOMP_FILTER).
pub fn available() -> bool {
    let action: u32 = RET_ERRNO;
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

    /// Runs the program over one system call, as the kernel would.
    fn run(prog: &[libc::sock_filter], arch: u32, nr: i64, args: [u64; 3]) -> u32 {
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
            match i.code {
                LD_W_ABS => {
                    let o = i.k as usize;
                    acc = u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
                }
                AND_K => acc &= i.k,
                RET_K => return i.k,
                JEQ_K => pc += usize::from(if acc == i.k { i.jt } else { i.jf }),
                JGE_K => pc += usize::from(if acc >= i.k { i.jt } else { i.jf }),
                c => panic!("unknown opcode {c:#x}"),
            }
        }
    }

    const EPERM: u32 = RET_ERRNO | libc::EPERM as u32;
    const EACCES: u32 = RET_ERRNO | libc::EACCES as u32;

    fn socket(prog: &[libc::sock_filter], family: i32, ty: i32, proto: i32) -> u32 {
        run(
            prog,
            AUDIT_ARCH,
            libc::SYS_socket,
            [family as u64, ty as u64, proto as u64],
        )
    }

    #[test]
    fn the_strict_filter_decides_each_case() {
        let strict = program(Options {
            allow_udp: false,
            allow_unix: false,
            allow_other_sockets: false,
        });
        assert!(strict.len() < 64, "{} instructions", strict.len());
        // Another architecture's numbers mean other calls: kill.
        assert_eq!(run(&strict, 0x4000_0003, 1, [0; 3]), RET_KILL_PROCESS);
        if cfg!(target_arch = "x86_64") {
            assert_eq!(
                run(&strict, AUDIT_ARCH, 0x4000_0000 + 41, [0; 3]),
                RET_KILL_PROCESS
            );
        }
        for (name, nr) in denied_syscalls() {
            assert_eq!(run(&strict, AUDIT_ARCH, nr, [0; 3]), EPERM, "{name}");
        }
        assert_eq!(
            run(&strict, AUDIT_ARCH, libc::SYS_openat, [0; 3]),
            RET_ALLOW
        );
        let tcp = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
        assert_eq!(socket(&strict, libc::AF_INET, tcp, 0), RET_ALLOW);
        assert_eq!(
            socket(
                &strict,
                libc::AF_INET6,
                libc::SOCK_STREAM,
                libc::IPPROTO_TCP
            ),
            RET_ALLOW
        );
        assert_eq!(
            socket(&strict, libc::AF_INET, libc::SOCK_STREAM, 262),
            EACCES,
            "MPTCP is not covered by Landlock's TCP rules"
        );
        let udp = libc::SOCK_DGRAM | libc::SOCK_CLOEXEC;
        assert_eq!(socket(&strict, libc::AF_INET, udp, 0), EACCES);
        assert_eq!(
            socket(&strict, libc::AF_INET6, libc::SOCK_DGRAM, libc::IPPROTO_UDP),
            EACCES
        );
        assert_eq!(
            socket(&strict, libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_ICMP),
            EACCES
        );
        assert_eq!(socket(&strict, libc::AF_UNIX, libc::SOCK_STREAM, 0), EACCES);
        assert_eq!(socket(&strict, libc::AF_NETLINK, libc::SOCK_RAW, 0), EACCES);
        assert_eq!(socket(&strict, libc::AF_PACKET, libc::SOCK_RAW, 0), EACCES);
        // The upper half of an int argument is ignored by the kernel, and so by the filter.
        assert_eq!(
            run(
                &strict,
                AUDIT_ARCH,
                libc::SYS_socket,
                [
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
        let udp = program(Options {
            allow_udp: true,
            allow_unix: false,
            allow_other_sockets: false,
        });
        assert_eq!(socket(&udp, libc::AF_INET, libc::SOCK_DGRAM, 0), RET_ALLOW);
        assert_eq!(
            socket(&udp, libc::AF_INET, libc::SOCK_DGRAM, libc::IPPROTO_ICMP),
            EACCES
        );
        assert_eq!(socket(&udp, libc::AF_UNIX, libc::SOCK_STREAM, 0), EACCES);
        let unix = program(Options {
            allow_udp: false,
            allow_unix: true,
            allow_other_sockets: false,
        });
        assert_eq!(socket(&unix, libc::AF_UNIX, libc::SOCK_DGRAM, 0), RET_ALLOW);
        assert_eq!(socket(&unix, libc::AF_INET, libc::SOCK_DGRAM, 0), EACCES);
        let other = program(Options {
            allow_udp: false,
            allow_unix: false,
            allow_other_sockets: true,
        });
        assert_eq!(
            socket(&other, libc::AF_NETLINK, libc::SOCK_RAW, 0),
            RET_ALLOW
        );
        assert_eq!(socket(&other, libc::AF_INET, libc::SOCK_DGRAM, 0), EACCES);
        assert_eq!(
            run(&other, AUDIT_ARCH, libc::SYS_ptrace, [0; 3]),
            EPERM,
            "ptrace stays denied whatever the options"
        );
    }
}
