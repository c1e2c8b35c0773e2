//! Landlock through raw system calls: the ABI probe and the ruleset, built in the parent; only
//! `landlock_restrict_self` runs in the forked child.
//!
//! Raw `libc::syscall` rather than the `landlock` crate: the crate's `restrict_self` is meant to
//! be called by the process that built the ruleset, and what it does around the system call
//! (status bookkeeping, error values that allocate) is not promised to be async-signal-safe. The
//! kernel interface is three system calls and two small structs, and the constants below are the
//! stable UAPI values of `<linux/landlock.h>`.

// This module's `unsafe`: the Landlock system calls, which libc does not wrap (each block with its `// SAFETY:`).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

// Access rights for files (ABI 1 unless noted).
pub const FS_EXECUTE: u64 = 1 << 0;
pub const FS_WRITE_FILE: u64 = 1 << 1;
pub const FS_READ_FILE: u64 = 1 << 2;
pub const FS_READ_DIR: u64 = 1 << 3;
pub const FS_REMOVE_DIR: u64 = 1 << 4;
pub const FS_REMOVE_FILE: u64 = 1 << 5;
pub const FS_MAKE_CHAR: u64 = 1 << 6;
pub const FS_MAKE_DIR: u64 = 1 << 7;
pub const FS_MAKE_REG: u64 = 1 << 8;
pub const FS_MAKE_SOCK: u64 = 1 << 9;
pub const FS_MAKE_FIFO: u64 = 1 << 10;
pub const FS_MAKE_BLOCK: u64 = 1 << 11;
pub const FS_MAKE_SYM: u64 = 1 << 12;
/// ABI 2: link or rename a file into another directory.
pub const FS_REFER: u64 = 1 << 13;
/// ABI 3: truncate a file.
pub const FS_TRUNCATE: u64 = 1 << 14;
/// ABI 5: ioctl on character and block devices.
pub const FS_IOCTL_DEV: u64 = 1 << 15;

/// ABI 4: TCP bind and connect.
pub const NET_BIND_TCP: u64 = 1 << 0;
pub const NET_CONNECT_TCP: u64 = 1 << 1;

/// ABI 6: IPC scoping.
pub const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
pub const SCOPE_SIGNAL: u64 = 1 << 1;

/// The rights a rule on a file that is not a directory may carry; the others make
/// `landlock_add_rule` fail with EINVAL.
pub const FILE_RIGHTS: u64 = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE | FS_TRUNCATE | FS_IOCTL_DEV;

const RULE_PATH_BENEATH: libc::c_int = 1;
const RULE_NET_PORT: libc::c_int = 2;
const CREATE_RULESET_VERSION: libc::c_uint = 1 << 0;

/// `struct landlock_ruleset_attr` (three u64; older kernels take a prefix of it).
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr`, which the kernel declares packed (12 bytes).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `struct landlock_net_port_attr`.
#[repr(C)]
struct NetPortAttr {
    allowed_access: u64,
    port: u64,
}

/// What this kernel's Landlock is, as far as mcpguard cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Abi {
    /// The ABI version (1 and up).
    Available(u32),
    /// No Landlock, and why in words a user can act on.
    Unavailable(String),
}

impl Abi {
    pub fn version(&self) -> u32 {
        match self {
            Abi::Available(v) => *v,
            Abi::Unavailable(_) => 0,
        }
    }
}

/// Asks the kernel for its Landlock ABI version.
pub fn probe() -> Abi {
    // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag only
    // returns a number; it reads no memory of ours.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if v > 0 {
        return Abi::Available(u32::try_from(v).unwrap_or(u32::MAX));
    }
    let err = io::Error::last_os_error();
    Abi::Unavailable(match err.raw_os_error() {
        Some(libc::ENOSYS) => "this kernel was built without Landlock (it needs Linux 5.13 or later with CONFIG_SECURITY_LANDLOCK)".into(),
        Some(libc::EOPNOTSUPP) => "Landlock is built in but not enabled: add `landlock` to the kernel's lsm= boot parameter".into(),
        _ => format!("the Landlock ABI probe failed: {err}"),
    })
}

/// The file-system rights this ABI can restrict.
pub fn handled_fs(abi: u32) -> u64 {
    if abi == 0 {
        return 0;
    }
    let mut m = (1 << 13) - 1;
    if abi >= 2 {
        m |= FS_REFER;
    }
    if abi >= 3 {
        m |= FS_TRUNCATE;
    }
    if abi >= 5 {
        m |= FS_IOCTL_DEV;
    }
    m
}

/// The network rights this ABI can restrict.
pub fn handled_net(abi: u32) -> u64 {
    if abi >= 4 {
        NET_BIND_TCP | NET_CONNECT_TCP
    } else {
        0
    }
}

/// The scopes this ABI can restrict.
pub fn scopes(abi: u32) -> u64 {
    if abi >= 6 {
        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
    } else {
        0
    }
}

/// A ruleset under construction in the parent. Its descriptor is close-on-exec (the kernel
/// always sets it), so the server never inherits it.
#[derive(Debug)]
pub struct Ruleset {
    fd: OwnedFd,
}

impl Ruleset {
    /// Creates a ruleset that handles `fs` and `net` rights and the `scoped` scopes, sized for
    /// `abi` (older kernels refuse the fields they do not know).
    pub fn new(abi: u32, fs: u64, net: u64, scoped: u64) -> io::Result<Ruleset> {
        let attr = RulesetAttr {
            handled_access_fs: fs,
            handled_access_net: net,
            scoped,
        };
        let size = match abi {
            0 => return Err(io::Error::from_raw_os_error(libc::ENOSYS)),
            1..=3 => 8,
            4 | 5 => 16,
            _ => std::mem::size_of::<RulesetAttr>(),
        };
        // SAFETY: `attr` is a live, initialised struct of at least `size` bytes; the kernel
        // copies it and keeps no pointer.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &attr as *const RulesetAttr,
                size,
                0u32,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel returned a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        Ok(Ruleset { fd })
    }

    /// Allows `access` beneath the file or directory opened as `parent` (an O_PATH descriptor).
    pub fn allow_path(&self, parent: &OwnedFd, access: u64) -> io::Result<()> {
        self.allow_path_fd(parent.as_raw_fd(), access)
    }

    /// [`Ruleset::allow_path`] on a raw descriptor: one system call, no allocation, so that the
    /// forked child can add the rule for a mount it made (the private TMPDIR's tmpfs, whose
    /// root Landlock does not see through the directory it covers: a rule on a mount point is
    /// ignored for the mount on top of it).
    pub fn allow_path_fd(&self, parent: libc::c_int, access: u64) -> io::Result<()> {
        let attr = PathBeneathAttr {
            allowed_access: access,
            parent_fd: parent,
        };
        // SAFETY: `attr` is a live packed struct matching the kernel's layout; both
        // descriptors are open for the duration of the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Allows `access` (bind and/or connect) on TCP `port`.
    pub fn allow_port(&self, port: u16, access: u64) -> io::Result<()> {
        let attr = NetPortAttr {
            allowed_access: access,
            port: u64::from(port),
        };
        // SAFETY: `attr` is a live struct matching the kernel's layout; the descriptor is open.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_NET_PORT,
                &attr as *const NetPortAttr,
                0u32,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Enforces the ruleset on the calling thread. Runs in the forked child between fork and exec:
/// one raw system call, no allocation (the error only reads errno).
pub fn restrict_self(ruleset_fd: RawFd) -> io::Result<()> {
    // SAFETY: landlock_restrict_self takes a descriptor and flags; it touches no memory of ours.
    let r = unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset_fd, 0u32) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_abi_handles_what_it_introduced() {
        assert_eq!(handled_fs(0), 0);
        assert_eq!(handled_fs(1), 0x1fff);
        assert_eq!(handled_fs(2) & FS_REFER, FS_REFER);
        assert_eq!(handled_fs(2) & FS_TRUNCATE, 0);
        assert_eq!(handled_fs(3) & FS_TRUNCATE, FS_TRUNCATE);
        assert_eq!(handled_fs(4) & FS_IOCTL_DEV, 0);
        assert_eq!(handled_fs(5) & FS_IOCTL_DEV, FS_IOCTL_DEV);
        assert_eq!(handled_net(3), 0);
        assert_eq!(handled_net(4), NET_BIND_TCP | NET_CONNECT_TCP);
        assert_eq!(scopes(5), 0);
        assert_eq!(scopes(6), SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL);
        assert_eq!(std::mem::size_of::<PathBeneathAttr>(), 12);
        assert_eq!(std::mem::size_of::<RulesetAttr>(), 24);
    }
}
