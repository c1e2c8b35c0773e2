//! The local policy: a TOML file owned by the person who runs mcpguard (SPEC §1.2).
//!
//! The snapshot says what a human reviewed; the policy says what this machine accepts of it and
//! how calls are handled: review acceptance, write classification and confirmation, which MCP
//! capabilities pass, error hygiene, output, limits, audit and the sandbox profile.
//! `docs/policy.md` is the reference for every key; this module is the one place that parses and
//! validates them, so the gate, the audit log and the sandbox read typed values and never TOML.
//!
//! Architecture invariants:
//! - The policy can only take away. There is no key that adds a tool, widens a pinned Tool object or
//!   turns an unreviewed name into a reviewed one: `[writes.tools.<name>]` classifies a tool the
//!   snapshot already contains (an entry for any other name is inert), and `review.refused_tools`
//!   hides reviewed tools. Admission is decided by the snapshot alone.
//! - Every default is the fail-closed choice, so a missing section never loosens anything: an
//!   unclassified tool is a write, writes need confirmation, excluded capabilities stay blocked and
//!   the sandbox is required.
//! - Parsing is strict: every table rejects unknown keys (a misspelt key that silently kept its
//!   default would be a hole), and every error names `FILE:LINE:COLUMN`.
//! - Nothing here performs IO except [`load`], which reads the one file it is given, and
//!   [`PathContext::from_process`], which reads this process's environment; resolving paths and
//!   classifying calls are pure functions of their arguments.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use jiff::SignedDuration;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest review validity any policy may accept. A snapshot older than a year describes a
/// server nobody has looked at for too long; the cap keeps a typo such as `3650d` from meaning
/// "forever".
pub const MAX_REVIEW_VALIDITY: SignedDuration = SignedDuration::from_secs(365 * 86_400);

/// The longest per-call timeout. Longer values are almost always a unit mistake, and a call that
/// runs for a day holds a slot in `max_calls_in_flight` the whole time.
pub const MAX_CALL_TIMEOUT: SignedDuration = SignedDuration::from_secs(86_400);

/// The longest time mcpguard waits for a human to answer a confirmation. An approval given hours
/// after the request is an approval of a situation the user no longer sees.
pub const MAX_CONFIRMATION_TIMEOUT: SignedDuration = SignedDuration::from_secs(3_600);

/// Bounds on `limits.max_message_bytes`: below 4 KiB ordinary `initialize` results do not fit;
/// above 1 GiB the bound no longer protects memory.
pub const MESSAGE_BYTES_RANGE: (usize, usize) = (4_096, 1 << 30);

/// The shipped default policy, compiled into the binary so that running without `--policy`
/// behaves exactly like `--policy policies/default.toml`.
const BUILTIN_DEFAULT: &str = include_str!("../../policies/default.toml");

/// Why a policy could not be used. The `Display` form is what the user sees.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("{origin}: cannot read the policy: {source}")]
    Read {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML, or a key or value is not acceptable. Line and column are
    /// 1-based; the column counts characters, not bytes.
    #[error("{origin}:{line}:{column}: {message}")]
    Invalid {
        origin: String,
        line: usize,
        column: usize,
        message: String,
    },
}

/// Reads and parses a policy file. Errors name the file as given.
pub fn load(path: &Path) -> Result<Policy, PolicyError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
        origin: origin.clone(),
        source,
    })?;
    parse(&text, &origin)
}

/// Parses a policy from text; `origin` names it in error messages (usually the file path).
pub fn parse(text: &str, origin: &str) -> Result<Policy, PolicyError> {
    let invalid = |span: Option<Range<usize>>, message: String| {
        let (line, column) = span.map_or((1, 1), |s| line_column(text, s.start));
        PolicyError::Invalid {
            origin: origin.to_string(),
            line,
            column,
            message,
        }
    };
    let policy: Policy =
        toml::from_str(text).map_err(|e| invalid(e.span(), reword(e.message())))?;
    if let Err(problem) = policy.validate() {
        // The document parsed above, so it parses again; the spanned tree only serves to point
        // at the offending key. Should it fail anyway, the message still goes out, at 1:1.
        let span = toml::de::DeTable::parse(text).ok().and_then(|doc| {
            problem
                .paths
                .iter()
                .find_map(|p| locate(doc.get_ref(), p, problem.item))
        });
        return Err(invalid(span, problem.message));
    }
    Ok(policy)
}

/// The shipped `policies/default.toml`, as used when no `--policy` is given.
pub fn builtin() -> Result<Policy, PolicyError> {
    parse(BUILTIN_DEFAULT, "builtin:policies/default.toml")
}

/// Turns a byte offset into a 1-based line and character column. Offsets past the end or inside
/// a character are clamped rather than trusted, because they come from another crate.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    for (i, c) in text.char_indices() {
        if i >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

/// Rewrites serde's generic wording into the policy's: TOML has keys, not fields, and the list of
/// valid keys is the useful part of the message. Messages of any other shape pass unchanged.
fn reword(message: &str) -> String {
    let message = message.trim_end();
    if let Some(rest) = message.strip_prefix("unknown field ") {
        if let Some((key, expected)) = rest.split_once(", expected one of ") {
            return format!("unknown key {key}; the valid keys here are {expected}");
        }
        if let Some((key, expected)) = rest.split_once(", expected ") {
            // serde writes two candidates as "`a` or `b`" and one as "`a`".
            return match expected.split_once(" or ") {
                Some((a, b)) => format!("unknown key {key}; the valid keys here are {a}, {b}"),
                None => format!("unknown key {key}; the only valid key here is {expected}"),
            };
        }
        if let Some((key, _)) = rest.split_once(", there are no fields") {
            return format!("unknown key {key}; this table takes no keys");
        }
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        return format!("missing key {rest}");
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        return format!("unknown value {rest}");
    }
    // serde names Rust types where a policy author thinks in TOML types.
    if let Some((head, expected)) = message.rsplit_once(", expected ") {
        let plain = match expected {
            "u16" => Some("a port number from 0 to 65535"),
            "usize" | "u64" | "u32" => Some("a non-negative integer"),
            "a sequence" => Some("an array"),
            e if e.starts_with("struct ") => Some("a table"),
            e if e.starts_with("a map") => Some("a table"),
            _ => None,
        };
        if let Some(plain) = plain {
            return format!("{head}, expected {plain}");
        }
    }
    message.to_string()
}

/// Finds the span of the value at `path` (keys from the root), or of its element `item` when the
/// value is an array, for errors found after parsing.
fn locate(
    root: &toml::de::DeTable<'_>,
    path: &[&str],
    item: Option<usize>,
) -> Option<Range<usize>> {
    let (last, parents) = path.split_last()?;
    let mut table = root;
    for key in parents {
        table = table.get(*key)?.get_ref().as_table()?;
    }
    let value = table.get(*last)?;
    let element = item.and_then(|i| value.get_ref().as_array()?.get(i));
    Some(element.unwrap_or(value).span())
}

/// A validation failure: the message, and the keys it concerns in order of preference (the
/// first one present in the document is where the error points).
struct Problem {
    paths: Vec<Vec<&'static str>>,
    /// The offending element when the value is an array.
    item: Option<usize>,
    message: String,
}

impl Problem {
    fn at(path: &[&'static str], message: impl Into<String>) -> Self {
        Problem {
            paths: vec![path.to_vec()],
            item: None,
            message: message.into(),
        }
    }
    fn at_item(path: &[&'static str], item: usize, message: impl Into<String>) -> Self {
        Problem {
            paths: vec![path.to_vec()],
            item: Some(item),
            message: message.into(),
        }
    }
    fn at_any(paths: &[&[&'static str]], message: impl Into<String>) -> Self {
        Problem {
            paths: paths.iter().map(|p| p.to_vec()).collect(),
            item: None,
            message: message.into(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The document
// ---------------------------------------------------------------------------------------------

/// A parsed, validated policy. `Policy::default()` is the value of a file with no keys at all:
/// every section at its documented, fail-closed default. The sandbox's default is the profile of
/// `policies/default.toml` (system paths, a private temporary directory, no network, a short
/// environment allowlist), so a file without `[sandbox]` still runs servers confined.
///
/// Build it with [`parse`] or [`load`]: deserializing it directly with serde checks each value but
/// skips the ranges and cross-key rules, and loses the line numbers of their errors.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Policy {
    pub review: Review,
    pub writes: Writes,
    pub confirmation: Confirmation,
    pub capabilities: Capabilities,
    pub errors: Errors,
    pub output: Output,
    pub limits: Limits,
    pub audit: Audit,
    pub sandbox: Sandbox,
}

/// `[review]`: which reviews this machine accepts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Review {
    /// Longest accepted time between a snapshot's `capturedAt` and `expiresAt`.
    #[serde(with = "duration_text")]
    pub max_validity: SignedDuration,
    /// Whether tools whose review asserts `modelBacked: true` are acceptable.
    pub allow_model_backed: bool,
    /// Side-effect classes (as reviewers name them in `sideEffects`) that make a review
    /// unacceptable.
    pub forbidden_side_effects: Vec<String>,
    /// Reviewed tools this machine refuses: they are not listed and calls to them are refused.
    pub refused_tools: Vec<String>,
    /// Refuse write tools whose reviewed `inputSchema` is unbounded (the review view's flags).
    pub require_bounded_write_schemas: bool,
}

impl Default for Review {
    fn default() -> Self {
        Review {
            max_validity: SignedDuration::from_secs(30 * 86_400),
            allow_model_backed: true,
            forbidden_side_effects: Vec::new(),
            refused_tools: Vec::new(),
            require_bounded_write_schemas: false,
        }
    }
}

/// `[writes]`: which tools are writes. The server never decides this (SPEC §4).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Writes {
    /// What an unclassified tool is.
    pub default: Unclassified,
    /// Per-tool classification in seed 004's `operationPolicy` vocabulary, keyed by tool name.
    pub tools: BTreeMap<String, ToolClass>,
}

/// `writes.default`: the treatment of a reviewed tool the policy does not classify. There is no
/// "read" value on purpose: treating unknown tools as reads would let the server's own
/// annotations decide, which SPEC §4 forbids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unclassified {
    /// An unclassified tool is a write and needs confirmation.
    #[default]
    Write,
    /// An unclassified tool is refused: only tools the policy classifies are usable.
    Refuse,
}

/// `[writes.tools.<name>]`: one tool's operation policy, with defaults resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RawToolClass")]
pub struct ToolClass {
    pub side_effect: SideEffect,
    pub idempotency: Idempotency,
    pub automatic_retry: AutomaticRetry,
    pub confirmation: ConfirmationRequirement,
    pub unknown_outcome: UnknownOutcome,
}

/// The form in the file, where `confirmation` may be left out and then depends on
/// `side_effect`; [`ToolClass`] is the same with that default resolved, so the effective policy
/// states it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolClass {
    side_effect: SideEffect,
    #[serde(default)]
    idempotency: Idempotency,
    #[serde(default)]
    automatic_retry: AutomaticRetry,
    confirmation: Option<ConfirmationRequirement>,
    #[serde(default)]
    unknown_outcome: UnknownOutcome,
}

impl From<RawToolClass> for ToolClass {
    fn from(raw: RawToolClass) -> Self {
        let confirmation = raw.confirmation.unwrap_or(match raw.side_effect {
            SideEffect::Read => ConfirmationRequirement::NotRequired,
            _ => ConfirmationRequirement::TrustedConfirmationRequired,
        });
        ToolClass {
            side_effect: raw.side_effect,
            idempotency: raw.idempotency,
            automatic_retry: raw.automatic_retry,
            confirmation,
            unknown_outcome: raw.unknown_outcome,
        }
    }
}

/// Seed 004 `sideEffect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SideEffect {
    Read,
    Create,
    Update,
    Delete,
}

/// Seed 004 `idempotency`. `unknown` is what an omitted value means; mcpguard never retries in
/// any case, so this is recorded (dry run, audit) rather than acted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Idempotency {
    Idempotent,
    AtMostOnce,
    NonIdempotent,
    #[default]
    Unknown,
}

/// Seed 004 `automaticRetry`. Only `never` exists: mcpguard does not retry calls on its own
/// (SPEC §3.9), so a policy cannot ask it to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AutomaticRetry {
    #[default]
    Never,
}

/// Seed 004 `confirmation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfirmationRequirement {
    NotRequired,
    TrustedConfirmationRequired,
}

/// Seed 004 `unknownOutcome`. Only `stop-and-reconcile` exists: after a lost write outcome the
/// host gets `UNKNOWN_DISPATCH_OUTCOME` and a person reconciles (SPEC §3.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnknownOutcome {
    #[default]
    StopAndReconcile,
}

/// `[confirmation]`: what happens to a call that needs confirmation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Confirmation {
    pub mode: ConfirmationMode,
    /// How long mcpguard waits for the user's answer; no answer in time is a denial.
    #[serde(with = "duration_text")]
    pub timeout: SignedDuration,
}

impl Default for Confirmation {
    fn default() -> Self {
        Confirmation {
            mode: ConfirmationMode::Elicit,
            timeout: SignedDuration::from_secs(60),
        }
    }
}

/// `confirmation.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfirmationMode {
    /// Ask the user through the host (`elicitation/create`); refuse when the host cannot be asked.
    #[default]
    Elicit,
    /// Refuse every call that needs confirmation.
    Deny,
    /// Forward calls that need confirmation without asking (each is audited as unconfirmed).
    Allow,
}

/// `[capabilities]`: which MCP surfaces pass the gate (SPEC §3.7, §3.8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Capabilities {
    pub sampling: bool,
    pub elicitation: bool,
    pub roots: bool,
    pub tasks: bool,
    pub prompts: bool,
    pub resources: bool,
    pub logging: bool,
    /// `_meta` keys of host requests passed to the server besides `progressToken`.
    pub pass_meta: Vec<String>,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities {
            sampling: false,
            elicitation: false,
            roots: false,
            tasks: false,
            prompts: false,
            resources: false,
            logging: true,
            pass_meta: Vec::new(),
        }
    }
}

/// `[errors]`: hygiene of server error text (SPEC §3.5, §3.10).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Errors {
    /// Longest error text, in characters, that reaches the host.
    pub max_length: usize,
    pub text: ErrorText,
}

impl Default for Errors {
    fn default() -> Self {
        Errors {
            max_length: 2048,
            text: ErrorText::Sanitized,
        }
    }
}

/// `errors.text`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorText {
    /// Server text with controls, escapes and invisible characters removed or made visible.
    #[default]
    Sanitized,
    /// A fixed message and the stable code; the server's text goes to the audit log only.
    Redacted,
}

/// `[output]`: what successful results carry to the host (SPEC §3.10).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Output {
    pub mode: OutputMode,
}

/// `output.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutputMode {
    /// The result as the server sent it (after the output-contract check).
    #[default]
    AsSent,
    /// For tools with an `outputSchema`: only the validated `structuredContent` and its canonical
    /// JSON as the single text block.
    StructuredOnly,
}

/// `[limits]`: bounds on what the proxy holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub max_message_bytes: usize,
    pub max_calls_in_flight: usize,
    #[serde(with = "duration_text")]
    pub call_timeout: SignedDuration,
    /// Most `tools/list` pages followed in one live walk.
    pub max_pages: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: 16 << 20,
            max_calls_in_flight: 64,
            call_timeout: SignedDuration::from_secs(120),
            max_pages: 1000,
        }
    }
}

/// `[audit]`: where decisions are recorded and how much of each call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Audit {
    /// The audit log; `None` writes none (`--audit-log` on the command line overrides this).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PolicyPath>,
    pub payload: AuditPayload,
}

/// `audit.payload`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuditPayload {
    /// SHA-256 digests of canonical arguments; no argument or result values.
    #[default]
    Digests,
    /// Also the argument and result values, and raw server error text.
    Full,
}

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
    /// Environment variables passed to the server: exact names, or a prefix ending in `*`.
    pub env: Vec<String>,
    pub limits: SandboxLimits,
}

/// System files that programs read at start-up (the dynamic linker's cache, time zone, TLS roots,
/// name resolution, the user database). `policies/default.toml` spells out the same list.
pub const SYSTEM_READ: [&str; 18] = [
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
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

/// Variables every program expects; nothing secret.
pub const DEFAULT_ENV: [&str; 8] = [
    "PATH", "HOME", "LANG", "LANGUAGE", "LC_*", "TZ", "USER", "LOGNAME",
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
            tcp_bind: Vec::new(),
            allow_udp: false,
            allow_unix_sockets: false,
            allow_other_sockets: false,
            scope_signals: true,
            scope_abstract_unix_sockets: true,
            env: DEFAULT_ENV.iter().map(|s| s.to_string()).collect(),
            limits: SandboxLimits::default(),
        }
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
    /// RLIMIT_NPROC. Linux counts every process of the user, not only the server's, which is why
    /// the default inherits rather than guessing a number that breaks a busy desktop.
    pub processes: Limit,
    /// RLIMIT_AS in MiB. Inherited by default: V8 and WebAssembly reserve far more address space
    /// than they use, so a plausible-looking cap stops node servers from starting.
    pub address_space_mb: Limit,
    pub core_dumps: bool,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        SandboxLimits {
            open_files: Limit::Max(1024),
            processes: Limit::Inherit,
            address_space_mb: Limit::Inherit,
            core_dumps: false,
        }
    }
}

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
    rest: String,
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

// ---------------------------------------------------------------------------------------------
// Durations
// ---------------------------------------------------------------------------------------------

/// Parses `N` followed by one unit: `s`, `m`, `h` or `d`. One unit only, no fractions and no
/// spaces, so that there is exactly one way to read every value; zero is refused because no
/// duration in the policy is meaningful at zero.
pub fn parse_duration(text: &str) -> Result<SignedDuration, String> {
    let hint = "a duration is a whole number followed by s, m, h or d, e.g. \"90s\", \"30m\", \"12h\", \"30d\"";
    let Some(unit) = text.chars().last() else {
        return Err(format!("empty duration; {hint}"));
    };
    let scale: u64 = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return Err(format!("{text:?} has no unit; {hint}")),
    };
    let digits = &text[..text.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text:?} is not a duration; {hint}"));
    }
    let secs = digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .and_then(|s| i64::try_from(s).ok())
        .ok_or_else(|| format!("{text:?} is too long a duration"))?;
    if secs == 0 {
        return Err(format!("{text:?} is zero; a duration must be positive"));
    }
    Ok(SignedDuration::from_secs(secs))
}

/// Writes a duration in the largest unit that represents it exactly, so that parsing the output
/// gives the same value back.
pub fn format_duration(d: SignedDuration) -> String {
    let secs = d.as_secs();
    for (unit, scale) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if secs != 0 && secs % scale == 0 {
            return format!("{}{unit}", secs / scale);
        }
    }
    format!("{secs}s")
}

/// Serde glue for durations written as text.
mod duration_text {
    use super::{format_duration, parse_duration};
    use jiff::SignedDuration;
    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(d: &SignedDuration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SignedDuration, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = SignedDuration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration string such as \"90s\", \"30m\", \"12h\" or \"30d\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<SignedDuration, E> {
                parse_duration(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

// ---------------------------------------------------------------------------------------------
// Validation, warnings and the effective policy
// ---------------------------------------------------------------------------------------------

impl Policy {
    /// Rules a single value's type cannot express: ranges and rules across keys. The first
    /// problem is reported; fixing it and checking again shows the next.
    fn validate(&self) -> Result<(), Problem> {
        if self.review.max_validity > MAX_REVIEW_VALIDITY {
            return Err(Problem::at(
                &["review", "max_validity"],
                format!(
                    "review.max_validity is {}; the longest accepted validity is 365d",
                    format_duration(self.review.max_validity)
                ),
            ));
        }
        non_empty_entries(
            &self.review.forbidden_side_effects,
            &["review", "forbidden_side_effects"],
        )?;
        non_empty_entries(&self.review.refused_tools, &["review", "refused_tools"])?;
        if self.writes.tools.keys().any(String::is_empty) {
            return Err(Problem::at(
                &["writes", "tools"],
                "writes.tools has an entry with an empty tool name",
            ));
        }
        if self.confirmation.timeout > MAX_CONFIRMATION_TIMEOUT {
            return Err(Problem::at(
                &["confirmation", "timeout"],
                format!(
                    "confirmation.timeout is {}; the longest is 1h",
                    format_duration(self.confirmation.timeout)
                ),
            ));
        }
        non_empty_entries(&self.capabilities.pass_meta, &["capabilities", "pass_meta"])?;
        let (min_bytes, max_bytes) = MESSAGE_BYTES_RANGE;
        if !(min_bytes..=max_bytes).contains(&self.limits.max_message_bytes) {
            return Err(Problem::at(
                &["limits", "max_message_bytes"],
                format!(
                    "limits.max_message_bytes must be between {min_bytes} (4 KiB) and {max_bytes} (1 GiB)"
                ),
            ));
        }
        if !(1..=4096).contains(&self.limits.max_calls_in_flight) {
            return Err(Problem::at(
                &["limits", "max_calls_in_flight"],
                "limits.max_calls_in_flight must be between 1 and 4096",
            ));
        }
        if self.limits.call_timeout > MAX_CALL_TIMEOUT {
            return Err(Problem::at(
                &["limits", "call_timeout"],
                format!(
                    "limits.call_timeout is {}; the longest is 1d",
                    format_duration(self.limits.call_timeout)
                ),
            ));
        }
        if !(1..=100_000).contains(&self.limits.max_pages) {
            return Err(Problem::at(
                &["limits", "max_pages"],
                "limits.max_pages must be between 1 and 100000",
            ));
        }
        if self.errors.max_length < 64 {
            return Err(Problem::at(
                &["errors", "max_length"],
                "errors.max_length must be at least 64 characters, or the error says nothing useful",
            ));
        }
        if self.errors.max_length > self.limits.max_message_bytes {
            return Err(Problem::at_any(
                &[&["errors", "max_length"], &["limits", "max_message_bytes"]],
                format!(
                    "errors.max_length ({}) exceeds limits.max_message_bytes ({}): the error could never be delivered",
                    self.errors.max_length, self.limits.max_message_bytes
                ),
            ));
        }
        if let Some(path) = &self.audit.path {
            if path.base() == PathBase::TmpDir {
                return Err(Problem::at(
                    &["audit", "path"],
                    "audit.path must not be under $TMPDIR: that directory is removed when the server exits, and the log with it",
                ));
            }
            if path.as_str().ends_with('/') || path.rest.is_empty() {
                return Err(Problem::at(
                    &["audit", "path"],
                    format!(
                        "audit.path {:?} names a directory; name the log file",
                        path.as_str()
                    ),
                ));
            }
        }
        self.validate_sandbox()
    }

    fn validate_sandbox(&self) -> Result<(), Problem> {
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
        let limits: [(&'static str, Limit, u64, &str); 3] = [
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

    /// Choices that are valid but weaken or surprise, for `mcpguard policy check` and the start-up
    /// diagnostics. Each is a full sentence.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        match self.confirmation.mode {
            ConfirmationMode::Allow => w.push(
                "confirmation.mode = \"allow\": writes are forwarded without asking anyone; each is audited as unconfirmed".to_string(),
            ),
            ConfirmationMode::Elicit if self.capabilities.elicitation => w.push(
                "capabilities.elicitation = true while confirmations are elicited: the server can show the user prompts that look like mcpguard's own approval requests".to_string(),
            ),
            _ => {}
        }
        if self.capabilities.sampling {
            w.push("capabilities.sampling = true: the server can ask the host's model to generate text, with prompts of its own making".to_string());
        }
        if self.capabilities.roots {
            w.push("capabilities.roots = true: the server learns the host's roots, and some servers widen their file access to them".to_string());
        }
        if self.capabilities.prompts || self.capabilities.resources {
            w.push("capabilities.prompts or capabilities.resources is true: that content reaches the model without being part of the reviewed snapshot".to_string());
        }
        if self
            .capabilities
            .pass_meta
            .iter()
            .any(|k| k == "progressToken")
        {
            w.push("capabilities.pass_meta lists progressToken, which always passes; the entry has no effect".to_string());
        }
        if self.audit.payload == AuditPayload::Full {
            w.push("audit.payload = \"full\": argument and result values, which may include secrets, are written to the audit log".to_string());
        }
        for tool in &self.review.refused_tools {
            if self.writes.tools.contains_key(tool) {
                w.push(format!("tool {tool:?} is in review.refused_tools, so its [writes.tools] classification has no effect"));
            }
        }
        for (name, class) in &self.writes.tools {
            if class.side_effect == SideEffect::Read
                && class.idempotency == Idempotency::NonIdempotent
            {
                w.push(format!("tool {name:?} is classified as a read but non-idempotent; check the classification"));
            }
        }
        for (key, list) in [
            (
                "review.forbidden_side_effects",
                &self.review.forbidden_side_effects,
            ),
            ("review.refused_tools", &self.review.refused_tools),
            ("capabilities.pass_meta", &self.capabilities.pass_meta),
            ("sandbox.env", &self.sandbox.env),
        ] {
            duplicates(key, list.iter().map(String::as_str), &mut w);
        }
        self.sandbox_warnings(&mut w);
        w
    }

    fn sandbox_warnings(&self, w: &mut Vec<String>) {
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
        if !s.tcp_connect.is_empty() && !s.allow_udp {
            w.push("sandbox.tcp_connect allows ports but allow_udp is false: DNS over UDP fails, so host names resolve only through a resolver reached over TCP".to_string());
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

    /// The effective policy as TOML, every default written out, for `mcpguard policy check`.
    /// Parsing the result gives this policy back.
    pub fn effective_toml(&self) -> String {
        let mut out =
            String::from("# The effective mcpguard policy: every key, defaults filled in.\n");
        if self.audit.path.is_none() {
            out.push_str("# audit.path is not set: no audit log unless --audit-log names one.\n");
        }
        out.push('\n');
        match toml::to_string_pretty(self) {
            Ok(body) => out.push_str(&body),
            // Every value here has a TOML form, so this is not expected; the text still says what
            // went wrong instead of printing half a policy.
            Err(e) => out.push_str(&format!("# mcpguard could not render the policy: {e}\n")),
        }
        out
    }

    /// Why the policy refuses a reviewed tool outright, if it does. Refused tools are left out of
    /// `tools/list` and calls to them are refused; nothing here can make an unreviewed tool
    /// usable.
    pub fn refusal(&self, tool: &str) -> Option<String> {
        if self.review.refused_tools.iter().any(|t| t == tool) {
            return Some(format!(
                "the local policy refuses the tool {tool:?} (review.refused_tools)"
            ));
        }
        if self.writes.default == Unclassified::Refuse && !self.writes.tools.contains_key(tool) {
            return Some(format!(
                "the tool {tool:?} is not classified in the local policy, which refuses unclassified tools (writes.default = \"refuse\"); add a [writes.tools.{tool}] table to use it"
            ));
        }
        None
    }

    /// Classifies a call to a reviewed tool. `has_authority_channel` is true when the review maps
    /// any argument to the `authority` input channel.
    ///
    /// The rules, in order: an unclassified tool is a write; a tool the policy classifies as a
    /// read is nevertheless a write when it has an authority channel (and then needs
    /// confirmation whatever its read classification said, because that decision was about a
    /// read); otherwise the tool's own `confirmation` applies. The confirmation mode turns the
    /// result into a decision.
    pub fn classify(&self, tool: &str, has_authority_channel: bool) -> Classification {
        let class = self.writes.tools.get(tool);
        let (side_effect, basis) = match class {
            None => (None, Basis::Unclassified),
            Some(c) if c.side_effect == SideEffect::Read && has_authority_channel => {
                (None, Basis::AuthorityChannel)
            }
            Some(c) => (Some(c.side_effect), Basis::Policy),
        };
        let is_write = side_effect != Some(SideEffect::Read);
        let needs_confirmation = match (basis, class) {
            (Basis::Policy, Some(c)) => {
                c.confirmation == ConfirmationRequirement::TrustedConfirmationRequired
            }
            _ => true,
        };
        let decision = if let Some(reason) = self.refusal(tool) {
            Decision::Refuse(reason)
        } else if !needs_confirmation {
            Decision::Forward
        } else {
            match self.confirmation.mode {
                ConfirmationMode::Elicit => Decision::Confirm,
                ConfirmationMode::Allow => Decision::ForwardUnconfirmed,
                ConfirmationMode::Deny => Decision::Refuse(format!(
                    "the tool {tool:?} needs confirmation and the local policy refuses such calls (confirmation.mode = \"deny\"); classify it in [writes.tools.{tool}] or set confirmation.mode = \"elicit\""
                )),
            }
        };
        Classification {
            side_effect,
            idempotency: class.map_or(Idempotency::Unknown, |c| c.idempotency),
            is_write,
            needs_confirmation,
            basis,
            decision,
        }
    }
}

/// How the policy treats one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    /// The side-effect class, when known. `None` is a write of unknown kind: the tool is
    /// unclassified, or classified as a read but carries an authority channel.
    pub side_effect: Option<SideEffect>,
    pub idempotency: Idempotency,
    pub is_write: bool,
    pub needs_confirmation: bool,
    pub basis: Basis,
    pub decision: Decision,
}

/// Where a classification came from, for audit records and error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The tool's `[writes.tools.<name>]` table.
    Policy,
    /// The policy does not classify the tool, so it is a write.
    Unclassified,
    /// Classified as a read, but an `authority` input channel makes it a write.
    AuthorityChannel,
}

/// What the gate does with the call once the snapshot checks have passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward without asking.
    Forward,
    /// Ask the user through the host; forward only on approval.
    Confirm,
    /// Forward without asking although confirmation was due (`confirmation.mode = "allow"`).
    ForwardUnconfirmed,
    /// Refuse, for the reason given (which says how to change the policy).
    Refuse(String),
}

impl SideEffect {
    /// The seed 004 spelling, for `operationPolicy` objects.
    pub fn as_str(self) -> &'static str {
        match self {
            SideEffect::Read => "read",
            SideEffect::Create => "create",
            SideEffect::Update => "update",
            SideEffect::Delete => "delete",
        }
    }
}

impl Idempotency {
    pub fn as_str(self) -> &'static str {
        match self {
            Idempotency::Idempotent => "idempotent",
            Idempotency::AtMostOnce => "at-most-once",
            Idempotency::NonIdempotent => "non-idempotent",
            Idempotency::Unknown => "unknown",
        }
    }
}

impl ConfirmationRequirement {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmationRequirement::NotRequired => "not-required",
            ConfirmationRequirement::TrustedConfirmationRequired => "trusted-confirmation-required",
        }
    }
}

fn non_empty_entries(list: &[String], path: &[&'static str]) -> Result<(), Problem> {
    if let Some(i) = list.iter().position(|s| s.trim().is_empty()) {
        return Err(Problem::at_item(
            path,
            i,
            format!("{} has an empty entry", path.join(".")),
        ));
    }
    Ok(())
}

/// Environment entries are exact names or a prefix ending in `*`. A bare `*` is refused because it
/// would pass every secret, which is what the allowlist exists to prevent.
fn env_pattern_problem(entry: &str) -> Option<String> {
    let name = entry.strip_suffix('*').unwrap_or(entry);
    if name.is_empty() {
        return Some(format!(
            "sandbox.env entry {entry:?} would pass every variable; name the variables (a prefix such as \"LC_*\" is allowed)"
        ));
    }
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if !first_ok || !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Some(format!(
            "sandbox.env entry {entry:?} is not a variable name (letters, digits and _, not starting with a digit, optionally ending in *)"
        ));
    }
    None
}

fn duplicates<'a>(key: &str, items: impl Iterator<Item = &'a str>, w: &mut Vec<String>) {
    let mut seen = BTreeSet::new();
    let mut reported = BTreeSet::new();
    for item in items {
        if !seen.insert(item) && reported.insert(item) {
            w.push(format!("{key} lists {item:?} more than once"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policies_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("policies")
    }

    fn shipped() -> Vec<(String, Policy)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(policies_dir()).expect("policies/ is readable") {
            let path = entry.expect("directory entry").path();
            if path.extension().is_some_and(|e| e == "toml") {
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                match load(&path) {
                    Ok(p) => out.push((name, p)),
                    Err(e) => panic!("shipped policy does not load: {e}"),
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn shipped_one(name: &str) -> Policy {
        shipped()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("policies/{name} is missing"))
            .1
    }

    #[test]
    fn every_shipped_policy_loads_and_round_trips() {
        let all = shipped();
        let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
        for required in ["default.toml", "strict.toml", "observe.toml"] {
            assert!(
                names.contains(&required),
                "{required} missing from {names:?}"
            );
        }
        for (name, policy) in &all {
            let text = policy.effective_toml();
            let again = parse(&text, name).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
            assert_eq!(&again, policy, "{name} does not round-trip:\n{text}");
        }
    }

    /// The reference must keep up with the code: every key of the effective policy is described
    /// in docs/policy.md, and every TOML example there parses.
    #[test]
    fn the_reference_documents_every_key_and_its_examples_parse() {
        let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/policy.md");
        let doc = std::fs::read_to_string(&doc_path).expect("docs/policy.md is readable");
        let mut full = Policy::default();
        full.audit.path = PolicyPath::parse("~/audit.jsonl").ok();
        full.writes.tools.insert(
            "the_tool".into(),
            ToolClass::from(RawToolClass {
                side_effect: SideEffect::Read,
                idempotency: Idempotency::Unknown,
                automatic_retry: AutomaticRetry::Never,
                confirmation: None,
                unknown_outcome: UnknownOutcome::StopAndReconcile,
            }),
        );
        for line in full.effective_toml().lines() {
            let line = line.trim();
            if let Some(table) = line.strip_prefix('[') {
                let table = table
                    .trim_end_matches(']')
                    .replace("tools.the_tool", "tools.<name>");
                assert!(
                    doc.contains(&format!("`[{table}]`")),
                    "[{table}] is not documented"
                );
            } else if let Some((key, _)) = line.split_once(" = ") {
                assert!(
                    doc.contains(&format!("| `{key}` |")),
                    "key {key} is not documented"
                );
            }
        }
        let mut examples = 0;
        for block in doc.split("```toml\n").skip(1) {
            let Some((example, _)) = block.split_once("```") else {
                panic!("unterminated example in docs/policy.md");
            };
            if let Err(e) = parse(example, "docs/policy.md example") {
                panic!("{e}\n{example}");
            }
            examples += 1;
        }
        assert!(examples > 0);
    }

    #[test]
    fn builtin_is_the_shipped_default() {
        assert_eq!(builtin().unwrap(), shipped_one("default.toml"));
    }

    /// A policy that leaves out `[sandbox]` (or some of its keys) gets default.toml's profile, so
    /// a small policy about tools runs the server confined rather than not at all.
    #[test]
    fn an_omitted_sandbox_section_is_the_shipped_profile() {
        let default = shipped_one("default.toml");
        assert_eq!(parse("", "t.toml").unwrap().sandbox, default.sandbox);
        let p = parse("[review]\nrefused_tools = [\"echo\"]\n", "t.toml").unwrap();
        assert_eq!(p.sandbox, default.sandbox);
        let p = parse("[sandbox]\nallow_udp = true\n", "t.toml").unwrap();
        assert!(p.sandbox.allow_udp);
        assert_eq!(
            p.sandbox.read, default.sandbox.read,
            "other keys keep their defaults"
        );
    }

    #[test]
    fn shipped_policies_behave_as_documented() {
        let default = shipped_one("default.toml");
        assert_eq!(default.confirmation.mode, ConfirmationMode::Elicit);
        assert_eq!(default.sandbox.mode, SandboxMode::Require);
        assert_eq!(
            default.classify("anything", false).decision,
            Decision::Confirm
        );
        assert!(default.warnings().is_empty(), "{:?}", default.warnings());

        let strict = shipped_one("strict.toml");
        assert!(!strict.review.allow_model_backed);
        assert_eq!(strict.output.mode, OutputMode::StructuredOnly);
        assert_eq!(strict.errors.text, ErrorText::Redacted);
        assert!(strict.limits.max_message_bytes < default.limits.max_message_bytes);
        assert!(strict.limits.call_timeout < default.limits.call_timeout);
        assert!(matches!(
            strict.classify("anything", false).decision,
            Decision::Refuse(_)
        ));
        assert!(strict.warnings().is_empty(), "{:?}", strict.warnings());

        let observe = shipped_one("observe.toml");
        let c = observe.classify("anything", true);
        assert!(c.is_write && c.needs_confirmation);
        assert_eq!(c.decision, Decision::ForwardUnconfirmed);
        assert_eq!(observe.sandbox.mode, SandboxMode::Off);
        assert!(observe.audit.path.is_some());
        let caps = &observe.capabilities;
        assert!(
            caps.sampling
                && caps.elicitation
                && caps.roots
                && caps.tasks
                && caps.prompts
                && caps.resources
        );
        assert!(observe
            .warnings()
            .iter()
            .any(|w| w.contains("confirmation.mode = \"allow\"")));

        for (name, preset) in [("node.toml", Preset::Node), ("python.toml", Preset::Python)] {
            let p = shipped_one(name);
            assert_eq!(p.sandbox.preset, preset, "{name}");
            assert_eq!(p.sandbox.mode, SandboxMode::Require, "{name}");
            assert!(p.warnings().is_empty(), "{name}: {:?}", p.warnings());
        }
    }

    /// Unknown keys at every level, written in the ways TOML allows (table headers, dotted keys,
    /// inline tables): each names the key, lists the valid ones and points at the key.
    #[test]
    fn unknown_keys_are_rejected_where_they_stand() {
        let cases: &[(&str, &str, &str)] = &[
            ("colour = 1\n", "t.toml:1:1:", "unknown key `colour`; the valid keys here are `review`, `writes`"),
            ("\n\n[reveiw]\n", "t.toml:3:2:", "unknown key `reveiw`"),
            ("[review]\nmax_validity = \"1d\"\nmax_valdity = \"2d\"\n", "t.toml:3:1:", "unknown key `max_valdity`; the valid keys here are `max_validity`, `allow_model_backed`"),
            ("review.allow_modelbacked = true\n", "t.toml:1:8:", "unknown key `allow_modelbacked`"),
            ("[writes]\ndefualt = \"write\"\n", "t.toml:2:1:", "unknown key `defualt`; the valid keys here are `default`, `tools`"),
            ("[writes.tools.echo]\nside_effect = \"read\"\nconfirmed = true\n", "t.toml:3:1:", "unknown key `confirmed`; the valid keys here are `side_effect`, `idempotency`"),
            ("[writes]\ntools = { echo = { side_effect = \"read\", retry = \"never\" } }\n", "t.toml:2:42:", "unknown key `retry`"),
            ("[confirmation]\nmode = \"elicit\"\ntimeout_s = 5\n", "t.toml:3:1:", "unknown key `timeout_s`; the valid keys here are `mode`, `timeout`"),
            ("[capabilities]\nsampling = false\ncompletions = true\n", "t.toml:3:1:", "unknown key `completions`"),
            ("[errors]\nmax_len = 10\n", "t.toml:2:1:", "unknown key `max_len`; the valid keys here are `max_length`, `text`"),
            ("[output]\nformat = \"as-sent\"\n", "t.toml:2:1:", "unknown key `format`; the only valid key here is `mode`"),
            ("[limits]\n\n\nmax_message_size = 1\n", "t.toml:4:1:", "unknown key `max_message_size`"),
            ("[audit]\nfile = \"/var/log/x\"\n", "t.toml:2:1:", "unknown key `file`; the valid keys here are `path`, `payload`"),
            ("[sandbox]\nmode = \"require\"\nread_only = []\n", "t.toml:3:1:", "unknown key `read_only`"),
            ("[sandbox.limits]\nopen_files = 64\ncpu_seconds = 10\n", "t.toml:3:1:", "unknown key `cpu_seconds`; the valid keys here are `open_files`, `processes`"),
            ("[sandbox]\nlimits = { nofile = 10 }\n", "t.toml:2:12:", "unknown key `nofile`"),
            // The policy has no way to add a tool: there is no such key anywhere.
            ("[tools.extra]\nside_effect = \"read\"\n", "t.toml:1:2:", "unknown key `tools`"),
            ("[review]\nadd_tools = [\"extra\"]\n", "t.toml:2:1:", "unknown key `add_tools`"),
        ];
        for (text, prefix, fragment) in cases {
            check_error(text, prefix, fragment);
        }
    }

    /// Values that are well-formed TOML but not acceptable.
    #[test]
    fn bad_values_are_rejected_with_their_position() {
        let cases: &[(&str, &str, &str)] = &[
            ("[review]\nmax_validity = \"366d\"\n", "t.toml:2:16:", "the longest accepted validity is 365d"),
            ("[review]\nmax_validity = \"0d\"\n", "t.toml:2:16:", "must be positive"),
            ("[review]\nmax_validity = 30\n", "t.toml:2:16:", "expected a duration string"),
            ("[review]\nforbidden_side_effects = [\"x\", \"\"]\n", "t.toml:2:32:", "review.forbidden_side_effects has an empty entry"),
            ("[writes]\ndefault = \"read\"\n", "t.toml:2:11:", "unknown value `read`, expected `write` or `refuse`"),
            ("[writes.tools.echo]\nidempotency = \"idempotent\"\n", "t.toml:1:1:", "missing key `side_effect`"),
            ("[writes.tools.\"\"]\nside_effect = \"read\"\n", "t.toml:1:", "writes.tools has an entry with an empty tool name"),
            ("[writes.tools.echo]\nside_effect = \"write\"\n", "t.toml:2:15:", "expected one of `read`, `create`, `update`, `delete`"),
            ("[writes.tools.echo]\nside_effect = \"read\"\nautomatic_retry = \"on-timeout\"\n", "t.toml:3:19:", "expected `never`"),
            ("[writes.tools.echo]\nside_effect = \"read\"\nunknown_outcome = \"retry\"\n", "t.toml:3:19:", "expected `stop-and-reconcile`"),
            ("[writes.tools.echo]\nside_effect = \"read\"\nconfirmation = \"upload-confirmation-required\"\n", "t.toml:3:16:", "expected `not-required` or `trusted-confirmation-required`"),
            ("[confirmation]\nmode = \"ask\"\n", "t.toml:2:8:", "expected one of `elicit`, `deny`, `allow`"),
            ("[confirmation]\ntimeout = \"2h\"\n", "t.toml:2:11:", "confirmation.timeout is 2h; the longest is 1h"),
            ("[capabilities]\nsampling = \"yes\"\n", "t.toml:2:12:", "expected a boolean"),
            ("[errors]\nmax_length = 10\n", "t.toml:2:14:", "at least 64"),
            ("[errors]\nmax_length = -1\n", "t.toml:2:14:", "expected a non-negative integer"),
            ("[errors]\nmax_length = 8192\n[limits]\nmax_message_bytes = 4096\n", "t.toml:2:14:", "errors.max_length (8192) exceeds limits.max_message_bytes (4096)"),
            ("[limits]\nmax_message_bytes = 100\n", "t.toml:2:21:", "between 4096"),
            ("[limits]\nmax_calls_in_flight = 0\n", "t.toml:2:23:", "between 1 and 4096"),
            ("[limits]\ncall_timeout = \"2d\"\n", "t.toml:2:16:", "the longest is 1d"),
            ("[limits]\nmax_pages = 0\n", "t.toml:2:13:", "between 1 and 100000"),
            ("[audit]\npath = \"audit.jsonl\"\n", "t.toml:2:8:", "is relative"),
            ("[audit]\npath = \"$TMPDIR/audit.jsonl\"\n", "t.toml:2:8:", "must not be under $TMPDIR"),
            ("[audit]\npath = \"~/logs/\"\n", "t.toml:2:8:", "names a directory"),
            ("[audit]\npayload = \"values\"\n", "t.toml:2:11:", "expected `digests` or `full`"),
            ("[sandbox]\nmode = \"on\"\n", "t.toml:2:8:", "expected one of `require`, `best-effort`, `off`"),
            ("[sandbox]\npreset = \"ruby\"\n", "t.toml:2:10:", "expected one of `none`, `auto`, `node`, `python`"),
            ("[sandbox]\nread = [\"/usr\", \"lib\"]\n", "t.toml:2:17:", "path \"lib\" is relative"),
            ("[sandbox]\nread_write = [\"$HOME/x\"]\n", "t.toml:2:15:", "unknown placeholder $HOME"),
            ("[sandbox]\nexecute = [\"~/bin/../.ssh\"]\n", "t.toml:2:12:", "contains \"..\""),
            ("[sandbox]\nread = [\"~user/x\"]\n", "t.toml:2:9:", "is relative"),
            ("[sandbox]\nread = [\"/a\\u0007b\"]\n", "t.toml:2:9:", "control character"),
            ("[sandbox]\ntcp_connect = [443, 65536]\n", "t.toml:2:21:", "expected a port number from 0 to 65535"),
            ("[sandbox]\ntcp_connect = [22, 0]\n", "t.toml:2:20:", "cannot contain port 0"),
            ("[sandbox]\nenv = [\"PATH\", \"*\"]\n", "t.toml:2:16:", "would pass every variable"),
            ("[sandbox]\nenv = [\"1PASSWORD\"]\n", "t.toml:2:8:", "is not a variable name"),
            ("[sandbox]\nenv = [\n  \"A\",\n  \"A-B\",\n]\n", "t.toml:4:3:", "is not a variable name"),
            ("[sandbox.limits]\nopen_files = 3\n", "t.toml:2:14:", "sandbox.limits.open_files must be at least 16"),
            ("[sandbox.limits]\nprocesses = -4\n", "t.toml:2:13:", "must not be negative"),
            ("[sandbox.limits]\naddress_space_mb = \"unlimited\"\n", "t.toml:2:20:", "expected a positive integer or \"inherit\""),
            ("[sandbox.limits]\ncore_dumps = 1\n", "t.toml:2:14:", "expected a boolean"),
            ("review = 3\n", "t.toml:1:10:", "expected a table"),
            // Dotted keys and inline tables are located like table headers.
            ("review.max_validity = \"400d\"\n", "t.toml:1:23:", "the longest accepted validity is 365d"),
            ("review = { max_validity = \"400d\" }\n", "t.toml:1:27:", "the longest accepted validity is 365d"),
            ("errors.max_length = 5000\nlimits = { max_message_bytes = 4096 }\n", "t.toml:1:21:", "exceeds limits.max_message_bytes"),
            ("[review\n", "t.toml:1:8:", ""),
            ("[review]\n[review]\n", "t.toml:2:", "duplicate key"),
        ];
        for (text, prefix, fragment) in cases {
            check_error(text, prefix, fragment);
        }
    }

    fn check_error(text: &str, prefix: &str, fragment: &str) {
        match parse(text, "t.toml") {
            Ok(_) => panic!("accepted:\n{text}"),
            Err(e) => {
                let shown = e.to_string();
                assert!(
                    shown.starts_with(prefix) && shown.contains(fragment),
                    "for:\n{text}\nwanted {prefix} … {fragment}\ngot    {shown}"
                );
            }
        }
    }

    #[test]
    fn columns_count_characters_not_bytes() {
        let e = parse("# é€😀\n[review]\n  \"ünknown\" = 1\n", "t.toml").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t.toml:3:3: unknown key `ünknown`"),
            "{e}"
        );
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("ab", 99), (1, 3));
    }

    #[test]
    fn missing_file_names_the_path() {
        let e = load(Path::new("/nonexistent/mcpguard/policy.toml")).unwrap_err();
        assert!(matches!(e, PolicyError::Read { .. }));
        assert!(
            e.to_string()
                .starts_with("/nonexistent/mcpguard/policy.toml: cannot read the policy"),
            "{e}"
        );
    }

    #[test]
    fn an_empty_file_is_every_default() {
        let p = parse("", "empty").unwrap();
        assert_eq!(p, Policy::default());
        assert_eq!(p.review.max_validity, SignedDuration::from_hours(30 * 24));
        assert!(p.review.allow_model_backed);
        assert!(p.review.forbidden_side_effects.is_empty());
        assert_eq!(p.writes.default, Unclassified::Write);
        assert!(p.writes.tools.is_empty());
        assert_eq!(p.confirmation.mode, ConfirmationMode::Elicit);
        assert_eq!(p.confirmation.timeout, SignedDuration::from_secs(60));
        let c = &p.capabilities;
        assert!(!(c.sampling || c.elicitation || c.roots || c.tasks || c.prompts || c.resources));
        assert!(c.logging);
        assert!(c.pass_meta.is_empty());
        assert_eq!(p.errors.max_length, 2048);
        assert_eq!(p.errors.text, ErrorText::Sanitized);
        assert_eq!(p.output.mode, OutputMode::AsSent);
        assert_eq!(p.limits.max_message_bytes, 16 * 1024 * 1024);
        assert_eq!(p.limits.max_calls_in_flight, 64);
        assert_eq!(p.limits.call_timeout, SignedDuration::from_secs(120));
        assert_eq!(p.limits.max_pages, 1000);
        assert_eq!(p.audit.path, None);
        assert_eq!(p.audit.payload, AuditPayload::Digests);
        let s = &p.sandbox;
        assert_eq!(s.mode, SandboxMode::Require);
        assert_eq!(s.preset, Preset::Auto);
        assert_eq!(s.read.len(), SYSTEM_READ.len());
        assert_eq!(s.execute.len(), SYSTEM_EXECUTE.len());
        let rw: Vec<&str> = s.read_write.iter().map(PolicyPath::as_str).collect();
        assert_eq!(rw, ["$TMPDIR", "/dev/null"]);
        assert!(s.tcp_connect.is_empty() && s.tcp_bind.is_empty());
        assert!(!s.allow_udp && !s.allow_other_sockets);
        assert!(s.scope_signals && s.scope_abstract_unix_sockets);
        assert!(s.env.iter().any(|e| e == "PATH") && !s.env.iter().any(|e| e.contains("TOKEN")));
        assert_eq!(s.limits.open_files, Limit::Max(1024));
        assert_eq!(s.limits.processes, Limit::Inherit);
        assert_eq!(s.limits.address_space_mb, Limit::Inherit);
        assert!(!s.limits.core_dumps);
        assert!(p.warnings().is_empty(), "{:?}", p.warnings());
        // A profile that names no program path still draws the warning.
        let p = parse(
            "[sandbox]\npreset = \"none\"\nread = []\nexecute = []\n",
            "t",
        )
        .unwrap();
        assert!(p
            .warnings()
            .iter()
            .any(|w| w.contains("cannot run any program")));
    }

    #[test]
    fn tool_defaults_follow_the_side_effect() {
        let p = parse(
            "[writes.tools.get]\nside_effect = \"read\"\n[writes.tools.put]\nside_effect = \"update\"\n",
            "t",
        )
        .unwrap();
        let get = &p.writes.tools["get"];
        assert_eq!(get.confirmation, ConfirmationRequirement::NotRequired);
        assert_eq!(get.idempotency, Idempotency::Unknown);
        assert_eq!(get.automatic_retry, AutomaticRetry::Never);
        assert_eq!(get.unknown_outcome, UnknownOutcome::StopAndReconcile);
        let put = &p.writes.tools["put"];
        assert_eq!(
            put.confirmation,
            ConfirmationRequirement::TrustedConfirmationRequired
        );
    }

    /// (policy text, tool, has authority channel, expected side effect, is_write,
    /// needs_confirmation, basis, decision kind).
    #[test]
    fn classification_rules() {
        let text = r#"
            [writes.tools.read_file]
            side_effect = "read"
            idempotency = "idempotent"
            [writes.tools.careful_read]
            side_effect = "read"
            confirmation = "trusted-confirmation-required"
            [writes.tools.append_log]
            side_effect = "create"
            confirmation = "not-required"
            [writes.tools.delete_file]
            side_effect = "delete"
        "#;
        let p = parse(text, "t").unwrap();
        use Basis::*;
        use SideEffect::*;
        type Case = (
            &'static str,
            bool,
            Option<SideEffect>,
            bool,
            bool,
            Basis,
            &'static str,
        );
        let cases: &[Case] = &[
            // A read needs no confirmation.
            (
                "read_file",
                false,
                Some(Read),
                false,
                false,
                Policy,
                "forward",
            ),
            // An authority channel turns a read into a write that needs confirmation.
            (
                "read_file",
                true,
                None,
                true,
                true,
                AuthorityChannel,
                "confirm",
            ),
            // A read may still ask for confirmation when the policy says so.
            (
                "careful_read",
                false,
                Some(Read),
                false,
                true,
                Policy,
                "confirm",
            ),
            // An unclassified tool is a write, with or without an authority channel.
            (
                "unknown_tool",
                false,
                None,
                true,
                true,
                Unclassified,
                "confirm",
            ),
            (
                "unknown_tool",
                true,
                None,
                true,
                true,
                Unclassified,
                "confirm",
            ),
            // A classified write keeps its own confirmation choice.
            (
                "append_log",
                false,
                Some(Create),
                true,
                false,
                Policy,
                "forward",
            ),
            (
                "append_log",
                true,
                Some(Create),
                true,
                false,
                Policy,
                "forward",
            ),
            (
                "delete_file",
                false,
                Some(Delete),
                true,
                true,
                Policy,
                "confirm",
            ),
        ];
        for &(tool, authority, side_effect, is_write, needs, basis, decision) in cases {
            let c = p.classify(tool, authority);
            let what = format!("{tool} (authority: {authority}): {c:?}");
            assert_eq!(c.side_effect, side_effect, "{what}");
            assert_eq!(c.is_write, is_write, "{what}");
            assert_eq!(c.needs_confirmation, needs, "{what}");
            assert_eq!(c.basis, basis, "{what}");
            assert_eq!(kind(&c.decision), decision, "{what}");
        }
        assert_eq!(
            p.classify("read_file", false).idempotency,
            Idempotency::Idempotent
        );
    }

    fn kind(d: &Decision) -> &'static str {
        match d {
            Decision::Forward => "forward",
            Decision::Confirm => "confirm",
            Decision::ForwardUnconfirmed => "unconfirmed",
            Decision::Refuse(_) => "refuse",
        }
    }

    #[test]
    fn confirmation_mode_decides_what_happens_to_a_write() {
        for (mode, expected) in [
            ("elicit", "confirm"),
            ("deny", "refuse"),
            ("allow", "unconfirmed"),
        ] {
            let p = parse(
                &format!(
                    "[confirmation]\nmode = \"{mode}\"\n[writes.tools.r]\nside_effect = \"read\"\n"
                ),
                "t",
            )
            .unwrap();
            assert_eq!(kind(&p.classify("w", false).decision), expected, "{mode}");
            // Reads pass in every mode.
            assert_eq!(kind(&p.classify("r", false).decision), "forward", "{mode}");
        }
        let deny = parse("[confirmation]\nmode = \"deny\"\n", "t").unwrap();
        let Decision::Refuse(why) = deny.classify("w", false).decision else {
            panic!("deny mode must refuse a write");
        };
        assert!(
            why.contains("confirmation.mode = \"deny\"") && why.contains("[writes.tools.w]"),
            "{why}"
        );
    }

    #[test]
    fn the_policy_can_refuse_reviewed_tools() {
        let p = parse(
            "[review]\nrefused_tools = [\"rm\"]\n[writes]\ndefault = \"refuse\"\n[writes.tools.ls]\nside_effect = \"read\"\n[writes.tools.rm]\nside_effect = \"read\"\n",
            "t",
        )
        .unwrap();
        assert!(p.refusal("ls").is_none());
        assert!(p
            .refusal("rm")
            .is_some_and(|r| r.contains("review.refused_tools")));
        assert!(p
            .refusal("cat")
            .is_some_and(|r| r.contains("writes.default = \"refuse\"")));
        assert!(matches!(
            p.classify("rm", false).decision,
            Decision::Refuse(_)
        ));
        assert!(matches!(
            p.classify("cat", false).decision,
            Decision::Refuse(_)
        ));
        assert_eq!(p.classify("ls", false).decision, Decision::Forward);
        assert!(p
            .warnings()
            .iter()
            .any(|w| w.contains("\"rm\" is in review.refused_tools")));
    }

    #[test]
    fn durations() {
        let good = [
            ("1s", 1),
            ("90s", 90),
            ("30m", 1_800),
            ("12h", 43_200),
            ("30d", 2_592_000),
            ("365d", 31_536_000),
            ("007s", 7),
        ];
        for (text, secs) in good {
            assert_eq!(
                parse_duration(text),
                Ok(SignedDuration::from_secs(secs)),
                "{text}"
            );
        }
        let bad = [
            ("", "empty"),
            ("s", "not a duration"),
            ("10", "no unit"),
            ("10 s", "not a duration"),
            ("1.5h", "not a duration"),
            ("-5m", "not a duration"),
            ("+5m", "not a duration"),
            ("1h30m", "not a duration"),
            ("5w", "no unit"),
            ("5S", "no unit"),
            ("0s", "must be positive"),
            ("99999999999999999999d", "too long"),
            ("999999999999999d", "too long"),
            ("5é", "no unit"),
        ];
        for (text, fragment) in bad {
            match parse_duration(text) {
                Ok(d) => panic!("{text:?} parsed as {d:?}"),
                Err(e) => assert!(e.contains(fragment), "{text:?}: {e}"),
            }
        }
        for (secs, text) in [
            (1, "1s"),
            (60, "1m"),
            (90, "90s"),
            (3_600, "1h"),
            (5_400, "90m"),
            (86_400, "1d"),
            (90_000, "25h"),
        ] {
            let d = SignedDuration::from_secs(secs);
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text), Ok(d));
        }
    }

    #[test]
    fn effective_toml_round_trips_a_policy_with_every_key_changed() {
        let text = r#"
            [review]
            max_validity = "90m"
            allow_model_backed = false
            forbidden_side_effects = ["sends_email"]
            refused_tools = ["rm", "weird tool.name"]
            require_bounded_write_schemas = true
            [writes]
            default = "refuse"
            [writes.tools."a.b"]
            side_effect = "update"
            idempotency = "at-most-once"
            confirmation = "not-required"
            [writes.tools.get]
            side_effect = "read"
            idempotency = "non-idempotent"
            [confirmation]
            mode = "allow"
            timeout = "45s"
            [capabilities]
            sampling = true
            elicitation = true
            roots = true
            tasks = true
            prompts = true
            resources = true
            logging = false
            pass_meta = ["traceparent", "progressToken"]
            [errors]
            max_length = 100
            text = "redacted"
            [output]
            mode = "structured-only"
            [limits]
            max_message_bytes = 65536
            max_calls_in_flight = 2
            call_timeout = "1d"
            max_pages = 3
            [audit]
            path = "$XDG_STATE_HOME/mcpguard/a.jsonl"
            payload = "full"
            [sandbox]
            mode = "best-effort"
            preset = "python"
            read = ["/", "~"]
            read_write = ["~", "$CWD/data", "$TMPDIR"]
            execute = ["$XDG_DATA_HOME/uv"]
            tcp_connect = [443, 443]
            tcp_bind = [0, 8080]
            allow_udp = true
            allow_other_sockets = true
            scope_signals = false
            scope_abstract_unix_sockets = false
            env = ["PATH", "LC_*", "GITHUB_TOKEN"]
            [sandbox.limits]
            open_files = 16
            processes = 100
            address_space_mb = 4096
            core_dumps = true
        "#;
        let p = parse(text, "t").unwrap();
        assert_ne!(p, Policy::default());
        let effective = p.effective_toml();
        assert_eq!(parse(&effective, "effective").unwrap(), p, "{effective}");
        // The effective policy states defaults that the file left out.
        assert!(
            effective.contains("unknown_outcome = \"stop-and-reconcile\""),
            "{effective}"
        );
        assert!(
            effective.contains("automatic_retry = \"never\""),
            "{effective}"
        );
        // Every weakening choice above is named.
        let w = p.warnings().join("\n");
        for fragment in [
            "confirmation.mode = \"allow\"",
            "capabilities.sampling",
            "capabilities.roots",
            "prompts or capabilities.resources",
            "progressToken",
            "audit.payload = \"full\"",
            "best-effort",
            "sandbox.read_write contains \"~\"",
            "\"GITHUB_TOKEN\"",
            "sandbox.tcp_connect lists \"443\" more than once",
            "classified as a read but non-idempotent",
        ] {
            assert!(
                w.contains(fragment),
                "no warning with {fragment:?} in:\n{w}"
            );
        }
        // Default values round-trip too.
        let d = Policy::default();
        assert_eq!(parse(&d.effective_toml(), "d").unwrap(), d);
    }

    #[test]
    fn sandbox_off_says_the_rest_is_ignored() {
        let p = parse("[sandbox]\nmode = \"off\"\n", "t").unwrap();
        assert_eq!(p.warnings().len(), 1, "{:?}", p.warnings());
        let p = parse("[sandbox]\nmode = \"off\"\nallow_udp = true\n", "t").unwrap();
        assert!(p.warnings().iter().any(|w| w.contains("no effect")));
    }

    #[test]
    fn tcp_without_udp_mentions_dns() {
        let p = parse("[sandbox]\ntcp_connect = [443]\nread = [\"/usr\"]\n", "t").unwrap();
        assert!(
            p.warnings().iter().any(|w| w.contains("DNS")),
            "{:?}",
            p.warnings()
        );
    }

    #[test]
    fn elicitation_passing_while_confirming_is_flagged() {
        let p = parse("[capabilities]\nelicitation = true\n", "t").unwrap();
        assert!(p
            .warnings()
            .iter()
            .any(|w| w.contains("look like mcpguard's own approval")));
    }

    #[test]
    fn paths_and_placeholders() {
        let ctx = PathContext {
            home: Some("/home/u".into()),
            tmpdir: Some("/tmp/mcpguard-1".into()),
            cwd: Some("/work".into()),
            cache_home: None,
            config_home: Some("/cfg".into()),
            data_home: None,
            state_home: None,
        };
        let cases = [
            ("/usr", PathBase::Root, "/usr"),
            ("/", PathBase::Root, "/"),
            ("/usr/lib/", PathBase::Root, "/usr/lib"),
            ("~", PathBase::Home, "/home/u"),
            ("~/.npm", PathBase::Home, "/home/u/.npm"),
            ("$TMPDIR", PathBase::TmpDir, "/tmp/mcpguard-1"),
            ("$TMPDIR/x", PathBase::TmpDir, "/tmp/mcpguard-1/x"),
            ("$CWD/data", PathBase::Cwd, "/work/data"),
            (
                "$XDG_CACHE_HOME/uv",
                PathBase::CacheHome,
                "/home/u/.cache/uv",
            ),
            ("$XDG_CONFIG_HOME/app", PathBase::ConfigHome, "/cfg/app"),
            (
                "$XDG_DATA_HOME/uv",
                PathBase::DataHome,
                "/home/u/.local/share/uv",
            ),
            (
                "$XDG_STATE_HOME",
                PathBase::StateHome,
                "/home/u/.local/state",
            ),
        ];
        for (text, base, expanded) in cases {
            let p = PolicyPath::parse(text).unwrap();
            assert_eq!(p.base(), base, "{text}");
            assert_eq!(p.as_str(), text);
            assert_eq!(p.expand(&ctx).unwrap(), PathBuf::from(expanded), "{text}");
        }
        let unknown = PathContext::default();
        assert!(PolicyPath::parse("~/x").unwrap().expand(&unknown).is_err());
        assert!(PolicyPath::parse("$TMPDIR")
            .unwrap()
            .expand(&unknown)
            .is_err());
        assert_eq!(
            PolicyPath::parse("/etc").unwrap().expand(&unknown).unwrap(),
            PathBuf::from("/etc")
        );
        for bad in [
            "",
            "usr",
            "./x",
            "~x",
            "$HOME",
            "$TMPDIRX/a",
            "/a/../b",
            "/a/..",
            "$TMPDIR/..",
            "/a\nb",
        ] {
            assert!(PolicyPath::parse(bad).is_err(), "{bad:?} accepted");
        }
        // A ".." inside a name is not a parent reference.
        assert!(PolicyPath::parse("/a/..b/c..").is_ok());
    }

    #[test]
    fn env_patterns() {
        for good in ["PATH", "_X", "LC_*", "npm_config_cache", "A1"] {
            assert_eq!(env_pattern_problem(good), None, "{good}");
        }
        for bad in ["*", "", "1A", "A-B", "A B", "A*B", "**", "É"] {
            assert!(env_pattern_problem(bad).is_some(), "{bad:?} accepted");
        }
    }
}
