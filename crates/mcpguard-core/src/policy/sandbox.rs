//! `[sandbox]`: the confinement profile of the server process as the policy states it (mode,
//! runtime preset, paths with placeholders, network, environment allowlist, limits), its
//! validation and its warnings. The `sandbox` folder enforces it; this file only parses and checks.

use std::fmt;
use std::path::PathBuf;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::*;

/// `[sandbox]`: the confinement of the server process (SPEC §5). This module parses and
/// validates it; the sandbox module enforces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Sandbox {
    pub mode: SandboxMode,
    pub preset: Preset,
    /// Paths the server may read (files, and directories recursively).
    pub read: Vec<PolicyPath>,
    /// Paths the server may read, write, create in and remove from.
    pub read_write: Vec<PolicyPath>,
    /// Paths whose files the server may execute (and read).
    pub execute: Vec<PolicyPath>,
    /// TCP ports the server may connect to (any address).
    pub tcp_connect: Vec<u16>,
    /// TCP destinations the server may connect to, as `HOST:PORT` (`127.0.0.1:5432`,
    /// `localhost:8080`, `[::1]:80`, `db.example:5432`). Landlock confines ports only: the port
    /// is enforced, the address is not (a server may reach any host on a listed port), which
    /// `sandbox-check` names as a residual risk.
    pub connect: Vec<Destination>,
    /// TCP ports the server may bind; 0 means an ephemeral port.
    pub tcp_bind: Vec<u16>,
    pub allow_udp: bool,
    /// Creating UNIX sockets with socket(2). Off by default because a UNIX socket reached by path
    /// (the D-Bus session bus, a container engine's socket) is a way out of any sandbox, and
    /// Landlock cannot restrict connecting to one before ABI 9. socketpair(2), which runtimes use
    /// for internal pipes, stays allowed.
    pub allow_unix_sockets: bool,
    /// Socket families other than AF_UNIX, AF_INET and AF_INET6 (netlink, packet, raw, ...).
    pub allow_other_sockets: bool,
    /// Keep the server from signalling processes outside its sandbox (mcpguard included).
    pub scope_signals: bool,
    /// Keep the server from connecting to abstract UNIX sockets outside its sandbox.
    pub scope_abstract_unix_sockets: bool,
    /// When mcpguard runs as root: run the server as uid/gid 65534 in a user namespace of its
    /// own, so that ordinary file permissions bind it (root-only files in a read grant stay
    /// unreadable) and the process limit counts it. A grant that id cannot reach (under the
    /// 0700 /root, or root-owned and granted for writing) is seen through an ID-mapped mount
    /// where root's files are its own.
    pub drop_root: bool,
    /// Name at the default level every open and bind the sandbox refuses, with the flag that
    /// allows it (`sandbox::observe`: each observed call waits for one round trip to
    /// mcpguard). `false` observes no open or bind; the connects of `connect` destinations are
    /// still made by mcpguard, which enforces their address.
    pub explain_denials: bool,
    /// Environment variables passed to the server: exact names, or a prefix ending in `*`.
    pub env: Vec<String>,
    pub limits: SandboxLimits,
}

/// System files that programs read at start-up (the dynamic linker's cache, time zone, TLS roots,
/// name resolution, the user database). `policies/default.toml` spells out the same list.
pub const SYSTEM_READ: [&str; 19] = [
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/locale.alias",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/mime.types",
    "/dev/random",
    "/dev/urandom",
    "/dev/zero",
];

/// The system's programs and libraries, which root owns.
pub const SYSTEM_EXECUTE: [&str; 5] = ["/usr", "/bin", "/sbin", "/lib", "/lib64"];

/// The private temporary directory of the run and `/dev/null`.
pub const DEFAULT_READ_WRITE: [&str; 2] = ["$TMPDIR", "/dev/null"];

/// Variables every program expects, by exact name; nothing secret. The `LC_` names are the
/// locale categories of POSIX and glibc.
pub const DEFAULT_ENV: [&str; 20] = [
    "PATH",
    "HOME",
    "LANG",
    "LANGUAGE",
    "TZ",
    "USER",
    "LOGNAME",
    "LC_ALL",
    "LC_CTYPE",
    "LC_NUMERIC",
    "LC_TIME",
    "LC_COLLATE",
    "LC_MONETARY",
    "LC_MESSAGES",
    "LC_PAPER",
    "LC_NAME",
    "LC_ADDRESS",
    "LC_TELEPHONE",
    "LC_MEASUREMENT",
    "LC_IDENTIFICATION",
];

/// The default profile is the one `policies/default.toml` writes out: system paths, the private
/// temporary directory, no network, a short environment allowlist and the runtime preset chosen
/// from the server command. A policy file that leaves out `[sandbox]`, or some of its keys, gets
/// these values, so a small policy about tools still runs servers confined and usable. (An
/// empty profile would be "restrictive" only in the sense that nothing could start at all.)
impl Default for Sandbox {
    fn default() -> Self {
        let paths = |list: &[&str]| {
            list.iter()
                .map(|p| PolicyPath::parse(p).expect("the built-in sandbox paths are valid"))
                .collect()
        };
        Sandbox {
            mode: SandboxMode::Require,
            preset: Preset::Auto,
            read: paths(&SYSTEM_READ),
            read_write: paths(&DEFAULT_READ_WRITE),
            execute: paths(&SYSTEM_EXECUTE),
            tcp_connect: Vec::new(),
            connect: Vec::new(),
            tcp_bind: Vec::new(),
            allow_udp: false,
            allow_unix_sockets: false,
            allow_other_sockets: false,
            scope_signals: true,
            scope_abstract_unix_sockets: true,
            drop_root: DEFAULT_DROP_ROOT,
            explain_denials: true,
            env: DEFAULT_ENV.iter().map(|s| s.to_string()).collect(),
            limits: SandboxLimits::default(),
        }
    }
}

/// One `sandbox.connect` destination (and `--sandbox-connect`): `HOST:PORT`, where HOST is an
/// IPv4 address, a bracketed IPv6 address or a host name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Destination {
    pub host: String,
    pub port: u16,
}

impl Destination {
    /// Whether reaching it needs a DNS lookup: a name other than `localhost`.
    pub fn needs_dns(&self) -> bool {
        self.host.parse::<std::net::IpAddr>().is_err()
            && !self.host.eq_ignore_ascii_case("localhost")
    }
}

impl TryFrom<String> for Destination {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Destination::parse(&s)
    }
}

impl From<Destination> for String {
    fn from(d: Destination) -> String {
        d.to_string()
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

impl Destination {
    /// Parses `HOST:PORT`; the error says what is wrong and shows the form.
    pub fn parse(s: &str) -> Result<Destination, String> {
        let form = "write HOST:PORT, such as 127.0.0.1:5432, localhost:8080 or [::1]:80";
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (h, p) = rest
                .split_once("]:")
                .ok_or_else(|| format!("{s:?} is not a destination: {form}"))?;
            h.parse::<std::net::Ipv6Addr>()
                .map_err(|_| format!("{s:?}: {h:?} is not an IPv6 address; {form}"))?;
            (h, p)
        } else {
            s.rsplit_once(':')
                .ok_or_else(|| format!("{s:?} has no port: {form}"))?
        };
        if host.contains(':') && !s.starts_with('[') {
            return Err(format!("{s:?}: an IPv6 address goes in brackets; {form}"));
        }
        let name_ok = !host.is_empty()
            && host.len() <= 253
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b':');
        if !name_ok {
            return Err(format!(
                "{s:?}: {host:?} is not a host name or address; {form}"
            ));
        }
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("{s:?}: {port:?} is not a port (1 to 65535); {form}"))?;
        Ok(Destination {
            host: host.to_string(),
            port,
        })
    }
}

/// `sandbox.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Refuse to start the server unless the whole profile is enforced on this kernel.
    #[default]
    Require,
    /// Start with what the kernel can enforce and state exactly what was dropped.
    BestEffort,
    /// No sandbox: the server runs with mcpguard's rights and environment.
    Off,
}

/// `sandbox.preset`: runtime-specific paths the sandbox discovers and adds to the lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    #[default]
    None,
    /// `node` when the server command is node/npx/npm, `python` when it is python/uv/uvx/pipx,
    /// otherwise nothing.
    Auto,
    Node,
    Python,
}

/// `[sandbox.limits]`: resource limits applied to the server process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxLimits {
    /// RLIMIT_NOFILE.
    pub open_files: Limit,
    /// RLIMIT_NPROC (threads count). Applied where the server has its own user namespace, in
    /// which Linux counts only the processes of that namespace; without one it would count every
    /// process of the user (a busy desktop would stop the server), and uid 0 is exempt.
    pub processes: Limit,
    /// RLIMIT_AS in MiB. Inherited by default: V8 and WebAssembly reserve far more address space
    /// than they use, so a plausible-looking cap stops node servers from starting.
    pub address_space_mb: Limit,
    /// RLIMIT_DATA in MiB: the heap and private writable mappings, which is the memory a server
    /// really uses (V8's and WebAssembly's reservations are not writable until used, so they do
    /// not count).
    pub data_mb: Limit,
    /// The size of the tmpfs mounted as the run's private `TMPDIR`, in MiB (where the server has
    /// a mount namespace; `"inherit"` keeps the directory on the host's file system).
    pub tmp_mb: Limit,
    pub core_dumps: bool,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            open_files: Limit::Max(1024),
            processes: Limit::Max(DEFAULT_PROCESSES),
            address_space_mb: Limit::Inherit,
            data_mb: Limit::Max(DEFAULT_DATA_MB),
            tmp_mb: Limit::Max(DEFAULT_TMP_MB),
            core_dumps: false,
        }
    }
}

/// The default `sandbox.drop_root`: on, so that root's server never runs as uid 0 (issue 31).
/// What uid 65534 could not reach otherwise (interpreters and caches under the 0700 `/root`,
/// root-owned project folders granted for writing) it sees through ID-mapped mounts
/// (`sandbox::isolate::Idmapped`).
pub const DEFAULT_DROP_ROOT: bool = true;

/// The default `sandbox.limits.processes`: node starts about a dozen threads, and npx and uv
/// start a few processes each, so this leaves room for a server that runs tools as processes
/// while a fork loop stops quickly.
pub const DEFAULT_PROCESSES: u64 = 512;
/// The default `sandbox.limits.data_mb`: node and python servers use a small part of it.
pub const DEFAULT_DATA_MB: u64 = 4096;
/// The default `sandbox.limits.tmp_mb`.
pub const DEFAULT_TMP_MB: u64 = 512;

/// A resource limit: a number, or `"inherit"` to keep mcpguard's own limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Inherit,
    Max(u64),
}

// ---------------------------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------------------------

/// Where a [`PolicyPath`] starts. Placeholders exist because a shared policy file cannot know the
/// user's home or the run's private temporary directory, and because a relative path would
/// depend on whatever directory the host happened to start mcpguard in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathBase {
    /// `/…`: an absolute path.
    Root,
    /// `~` or `~/…`: mcpguard's `$HOME`.
    Home,
    /// `$TMPDIR`: the private temporary directory mcpguard creates for this run, removes at exit,
    /// and passes to the server as `TMPDIR`. Not the inherited `TMPDIR`, which is shared.
    TmpDir,
    /// `$CWD`: the directory mcpguard was started in (the server inherits it).
    Cwd,
    /// `$XDG_CACHE_HOME` (else `~/.cache`).
    CacheHome,
    /// `$XDG_CONFIG_HOME` (else `~/.config`).
    ConfigHome,
    /// `$XDG_DATA_HOME` (else `~/.local/share`).
    DataHome,
    /// `$XDG_STATE_HOME` (else `~/.local/state`).
    StateHome,
}

const PLACEHOLDERS: [(&str, PathBase); 6] = [
    ("$TMPDIR", PathBase::TmpDir),
    ("$CWD", PathBase::Cwd),
    ("$XDG_CACHE_HOME", PathBase::CacheHome),
    ("$XDG_CONFIG_HOME", PathBase::ConfigHome),
    ("$XDG_DATA_HOME", PathBase::DataHome),
    ("$XDG_STATE_HOME", PathBase::StateHome),
];

/// A path in the policy: absolute, or starting with `~` or one of the placeholders above,
/// followed by `/…` or nothing. `..` components are refused so that what a reader sees is where
/// the rule applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyPath {
    text: String,
    base: PathBase,
    /// The part after the base, without its leading `/` (empty for the base itself).
    pub(super) rest: String,
}

impl PolicyPath {
    /// Parses one path as written in the policy.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.is_empty() {
            return Err("a path must not be empty".into());
        }
        if let Some(c) = text.chars().find(|c| c.is_control()) {
            return Err(format!(
                "path {text:?} contains the control character {:?}",
                c
            ));
        }
        let (base, rest) = if let Some(rest) = text.strip_prefix('/') {
            (PathBase::Root, rest)
        } else if text == "~" {
            (PathBase::Home, "")
        } else if let Some(rest) = text.strip_prefix("~/") {
            (PathBase::Home, rest)
        } else if text.starts_with('$') {
            let (head, rest) = text.split_once('/').unwrap_or((text, ""));
            match PLACEHOLDERS.iter().find(|(name, _)| *name == head) {
                Some((_, base)) => (*base, rest),
                None => {
                    return Err(format!(
                        "path {text:?} starts with the unknown placeholder {head}; the placeholders are {}",
                        PLACEHOLDERS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
                    ))
                }
            }
        } else {
            return Err(format!(
                "path {text:?} is relative; write an absolute path, or start it with ~/ or a placeholder ({})",
                PLACEHOLDERS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
            ));
        };
        if rest.split('/').any(|c| c == "..") {
            return Err(format!(
                "path {text:?} contains \"..\"; write the path it leads to"
            ));
        }
        Ok(PolicyPath {
            text: text.to_string(),
            base,
            rest: rest.trim_end_matches('/').to_string(),
        })
    }

    /// The path as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    pub fn base(&self) -> PathBase {
        self.base
    }

    /// Resolves the path against this run's values. Fails when the base is not known (no home
    /// directory, no private temporary directory), because guessing would grant the wrong path.
    pub fn expand(&self, ctx: &PathContext) -> Result<PathBuf, String> {
        let xdg = |var: &Option<PathBuf>, fallback: &str| -> Option<PathBuf> {
            var.clone()
                .or_else(|| ctx.home.as_ref().map(|h| h.join(fallback)))
        };
        let base = match self.base {
            PathBase::Root => Some(PathBuf::from("/")),
            PathBase::Home => ctx.home.clone(),
            PathBase::TmpDir => ctx.tmpdir.clone(),
            PathBase::Cwd => ctx.cwd.clone(),
            PathBase::CacheHome => xdg(&ctx.cache_home, ".cache"),
            PathBase::ConfigHome => xdg(&ctx.config_home, ".config"),
            PathBase::DataHome => xdg(&ctx.data_home, ".local/share"),
            PathBase::StateHome => xdg(&ctx.state_home, ".local/state"),
        };
        let base = base.ok_or_else(|| {
            format!(
                "cannot resolve {:?}: its base directory is not known in this run",
                self.text
            )
        })?;
        Ok(if self.rest.is_empty() {
            base
        } else {
            base.join(&self.rest)
        })
    }
}

impl fmt::Display for PolicyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The values placeholders resolve to in one run. Kept as plain data so that resolution is a
/// pure function; [`PathContext::from_process`] fills it from the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathContext {
    pub home: Option<PathBuf>,
    pub tmpdir: Option<PathBuf>,
    pub cwd: Option<PathBuf>,
    pub cache_home: Option<PathBuf>,
    pub config_home: Option<PathBuf>,
    pub data_home: Option<PathBuf>,
    pub state_home: Option<PathBuf>,
}

impl PathContext {
    /// Reads `HOME`, the XDG variables and the working directory of this process. Relative values
    /// are ignored, as the XDG base directory specification requires; `tmpdir` is the private
    /// directory the caller created for this run.
    pub fn from_process(tmpdir: Option<PathBuf>) -> Self {
        let abs = |name: &str| {
            std::env::var_os(name)
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
        };
        PathContext {
            home: abs("HOME"),
            tmpdir,
            cwd: std::env::current_dir().ok(),
            cache_home: abs("XDG_CACHE_HOME"),
            config_home: abs("XDG_CONFIG_HOME"),
            data_home: abs("XDG_DATA_HOME"),
            state_home: abs("XDG_STATE_HOME"),
        }
    }
}

impl Serialize for PolicyPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for PolicyPath {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = PolicyPath;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a path string (absolute, or starting with ~/ or a placeholder such as $TMPDIR)")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<PolicyPath, E> {
                PolicyPath::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

impl Serialize for Limit {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Limit::Inherit => s.serialize_str("inherit"),
            Limit::Max(n) => s.serialize_u64(*n),
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Limit;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a positive integer or \"inherit\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Limit, E> {
                u64::try_from(v)
                    .map(Limit::Max)
                    .map_err(|_| E::custom(format!("a limit must not be negative (got {v})")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Limit, E> {
                Ok(Limit::Max(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Limit, E> {
                if v == "inherit" {
                    Ok(Limit::Inherit)
                } else {
                    Err(E::custom(format!(
                        "expected a positive integer or \"inherit\", found {v:?}"
                    )))
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl Policy {
    pub(super) fn validate_sandbox(&self) -> Result<(), Problem> {
        let s = &self.sandbox;
        if let Some(i) = s.tcp_connect.iter().position(|&p| p == 0) {
            return Err(Problem::at_item(
                &["sandbox", "tcp_connect"],
                i,
                "sandbox.tcp_connect cannot contain port 0: nothing listens there",
            ));
        }
        for (i, name) in s.env.iter().enumerate() {
            if let Some(problem) = env_pattern_problem(name) {
                return Err(Problem::at_item(&["sandbox", "env"], i, problem));
            }
        }
        let limits: [(&'static str, Limit, u64, &str); 5] = [
            (
                "open_files",
                s.limits.open_files,
                16,
                "the server needs descriptors for stdio and its runtime",
            ),
            (
                "processes",
                s.limits.processes,
                1,
                "the server itself is a process",
            ),
            (
                "address_space_mb",
                s.limits.address_space_mb,
                64,
                "no runtime starts in less",
            ),
            ("data_mb", s.limits.data_mb, 64, "no runtime starts in less"),
            (
                "tmp_mb",
                s.limits.tmp_mb,
                1,
                "the folder must hold something",
            ),
        ];
        for (key, limit, min, why) in limits {
            if let Limit::Max(n) = limit {
                if n < min {
                    return Err(Problem::at(
                        &["sandbox", "limits", key],
                        format!(
                            "sandbox.limits.{key} must be at least {min} ({why}), or \"inherit\""
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    pub(super) fn sandbox_warnings(&self, w: &mut Vec<String>) {
        let s = &self.sandbox;
        match s.mode {
            SandboxMode::Off => {
                w.push("sandbox.mode = \"off\": the server runs with your full rights and your whole environment".to_string());
                // Compare everything but the mode with the defaults: any difference is a setting
                // the user wrote and may believe is in force.
                let mut rest = s.clone();
                rest.mode = SandboxMode::default();
                if rest != Sandbox::default() {
                    w.push("the other [sandbox] settings have no effect while sandbox.mode = \"off\"".to_string());
                }
                return;
            }
            SandboxMode::BestEffort => w.push(
                "sandbox.mode = \"best-effort\": rules this kernel cannot enforce are dropped (each is reported at start)".to_string(),
            ),
            SandboxMode::Require => {}
        }
        if s.preset == Preset::None && s.read.is_empty() && s.execute.is_empty() {
            w.push("sandbox.read and sandbox.execute are empty and no preset is set: the server cannot run any program".to_string());
        }
        for p in &s.read_write {
            if p.rest.is_empty() && matches!(p.base(), PathBase::Root | PathBase::Home) {
                w.push(format!(
                    "sandbox.read_write contains {:?}: the server may change every file there",
                    p.as_str()
                ));
            }
        }
        // Only a name needs DNS: an address or `localhost` (from /etc/hosts) does not, so a
        // policy of ports or loopback destinations is not warned about UDP.
        if !s.allow_udp {
            for d in s.connect.iter().filter(|d| d.needs_dns()) {
                w.push(format!("sandbox.connect names {d}, whose name needs DNS, but allow_udp is false: DNS over UDP fails, so it resolves only through /etc/hosts or a resolver reached over TCP; write its address instead, or set allow_udp = true"));
            }
        }
        for name in &s.env {
            let upper = name.to_ascii_uppercase();
            if ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL"]
                .iter()
                .any(|m| upper.contains(m))
            {
                w.push(format!("sandbox.env passes {name:?} to the server; make sure the server is meant to see that secret"));
            }
        }
        for (key, list) in [
            ("sandbox.read", &s.read),
            ("sandbox.read_write", &s.read_write),
            ("sandbox.execute", &s.execute),
        ] {
            duplicates(key, list.iter().map(PolicyPath::as_str), w);
        }
        let ports = |l: &[u16]| l.iter().map(u16::to_string).collect::<Vec<_>>();
        duplicates(
            "sandbox.tcp_connect",
            ports(&s.tcp_connect).iter().map(String::as_str),
            w,
        );
        duplicates(
            "sandbox.tcp_bind",
            ports(&s.tcp_bind).iter().map(String::as_str),
            w,
        );
    }
}

/// Environment entries are exact names. A pattern is refused: a prefix such as `LC_*` would pass
/// any variable that starts with it (`LC_SECRET_TOKEN`), and a bare `*` every secret, which is
/// what the allowlist exists to prevent.
pub(super) fn env_pattern_problem(entry: &str) -> Option<String> {
    if let Some(prefix) = entry.strip_suffix('*') {
        return Some(format!(
            "sandbox.env entry {entry:?} {}; list the exact names the server needs (for the locale: \"LC_ALL\", \"LC_CTYPE\", \"LC_MESSAGES\" …)",
            if prefix.is_empty() {
                "would pass every variable".to_string()
            } else {
                format!("is a pattern, which would pass any variable whose name starts with {prefix:?} (such as {prefix}SECRET_TOKEN)")
            }
        ));
    }
    let name = entry;
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some(format!(
            "sandbox.env entry {entry:?} is not a variable name (letters, digits and _, not starting with a digit)"
        ));
    }
    None
}
