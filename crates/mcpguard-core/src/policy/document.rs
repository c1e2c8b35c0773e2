//! The policy document: one typed struct per table, each default the fail-closed choice, and the
//! duration syntax (`N` and one unit) its keys use. The `[sandbox]` table is in `sandbox`.

use std::collections::BTreeMap;

use jiff::SignedDuration;
use serde::{Deserialize, Serialize};

use super::*;

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
    pub arguments: Arguments,
    pub confirmation: Confirmation,
    pub capabilities: Capabilities,
    pub errors: Errors,
    pub output: Output,
    pub secrets: Secrets,
    pub results: Results,
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
    /// An allowed-signers file (git's `gpg.ssh.allowedSignersFile` format). When set, only
    /// reviews signed by a key it lists for the reviewer they name are served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_signers: Option<PolicyPath>,
}

impl Default for Review {
    fn default() -> Self {
        Review {
            max_validity: SignedDuration::from_secs(30 * 86_400),
            allow_model_backed: true,
            forbidden_side_effects: Vec::new(),
            refused_tools: Vec::new(),
            require_bounded_write_schemas: false,
            allowed_signers: None,
        }
    }
}

/// `[writes]`: which tools are writes. The server never decides this (SPEC §4): the policy does,
/// or the person who reviewed the tool, in the review's `sideEffect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Writes {
    /// What a tool is that neither a table below nor (with `trust_reviews`) its review classifies.
    pub default: Unclassified,
    /// Whether the operation class recorded in a tool's review classifies it when the policy
    /// has no `[writes.tools.<name>]` table for it.
    pub trust_reviews: bool,
    /// Per-tool classification in seed 004's `operationPolicy` vocabulary, keyed by tool name.
    /// A table here overrides the review's class.
    pub tools: BTreeMap<String, ToolClass>,
}

impl Default for Writes {
    fn default() -> Self {
        Writes {
            default: Unclassified::default(),
            trust_reviews: true,
            tools: BTreeMap::new(),
        }
    }
}

/// `[arguments]`: what a call's arguments may carry beyond what the reviewed `inputSchema`
/// validates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Arguments {
    /// Refuse members the reviewed `inputSchema` does not declare, wherever it declares
    /// `properties` (or `patternProperties`) without allowing others.
    pub closed: bool,
    /// Refuse a call any of whose string arguments is, or contains, a URL to a cloud metadata
    /// address (169.254.169.254, fd00:ec2::254, metadata.google.internal, …), for every tool.
    pub refuse_metadata_urls: bool,
    /// A call any of whose string arguments names one of the user's credential files (a private
    /// SSH key, `.env`, `.aws/credentials`, `.netrc`, …) needs the person's confirmation, once,
    /// whatever the tool's class: a read of `~/.ssh/id_rsa` is the first step of sending it away.
    pub confirm_credential_paths: bool,
    /// A call any of whose string arguments downloads code and runs it (`curl … | sh`,
    /// `$(wget …)`) needs the person's confirmation, once, whatever the tool's class.
    pub confirm_remote_code: bool,
    /// Per-tool settings, keyed by tool name; each replaces the table's value for that tool.
    pub tools: BTreeMap<String, ArgumentsTool>,
}

impl Default for Arguments {
    fn default() -> Self {
        Arguments {
            closed: true,
            refuse_metadata_urls: true,
            confirm_credential_paths: true,
            confirm_remote_code: true,
            tools: BTreeMap::new(),
        }
    }
}

impl Arguments {
    /// Whether undeclared members are refused in calls of `tool`.
    pub fn closed_for(&self, tool: &str) -> bool {
        self.tools
            .get(tool)
            .and_then(|t| t.closed)
            .unwrap_or(self.closed)
    }
}

/// `[arguments.tools.<name>]`: one tool's argument settings. `closed`, when given, replaces
/// `[arguments]`'s for it; `rules` hold values at JSON pointers to local rules.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArgumentsTool {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub closed: Option<bool>,
    /// Rules for the values at RFC 6901 pointers into the arguments (`/path`, `/paths/*`: a `*`
    /// segment stands for any array index or member name).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub rules: BTreeMap<String, ArgumentRule>,
}

/// `[arguments.tools.<name>.rules."<pointer>"]`: what the string at that pointer may be. Every
/// key given must hold; a value that is not a string is refused.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ArgumentRule {
    /// The value is a path that must lie within one of these folders (a lexical check).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<PolicyPath>>,
    /// The value is a URL whose scheme must be one of these (lowercase).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url_schemes: Option<Vec<String>>,
    /// The value is a URL whose host must be one of these (`example.com`, or `*.example.com`
    /// for its subdomains).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<Vec<String>>,
    /// The value is a URL whose host must not be one of these (same forms as `hosts`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub deny_hosts: Vec<String>,
    /// For a URL rule (any of the three keys above): let loopback, private, link-local and
    /// unique-local addresses (and `localhost`) through. Cloud metadata addresses never pass.
    pub private_addresses: bool,
    /// The value is given to a shell or a command line: shell metacharacters are refused.
    pub command: bool,
    /// The whole value must match this linear-time regular expression.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Longest value, in characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
}

impl ArgumentRule {
    /// Whether the rule reads its value as a URL.
    pub fn is_url_rule(&self) -> bool {
        self.url_schemes.is_some() || self.hosts.is_some() || !self.deny_hosts.is_empty()
    }
}

/// `[secrets]`: secret-shaped values in results, error text and arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Secrets {
    /// What a secret-shaped value in a result or in error text towards the host does.
    pub results: SecretInResults,
    /// What a secret-shaped value in a call's arguments towards the server does.
    pub arguments: SecretInArguments,
    /// Look for the built-in shapes (cloud keys, provider tokens, private keys, JWTs, …).
    pub builtin: bool,
    /// User-given detectors: a name and a linear-time regular expression.
    pub patterns: BTreeMap<String, String>,
    /// Environment variables (of mcpguard, read at start) whose values are secrets.
    pub env: Vec<String>,
    /// Per-tool exceptions, keyed by tool name.
    pub tools: BTreeMap<String, SecretsTool>,
}

impl Default for Secrets {
    fn default() -> Self {
        Secrets {
            results: SecretInResults::Redact,
            arguments: SecretInArguments::Refuse,
            builtin: true,
            patterns: BTreeMap::new(),
            env: Vec::new(),
            tools: BTreeMap::new(),
        }
    }
}

/// `[secrets.tools.<name>]`: one tool's exceptions.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SecretsTool {
    /// Pointers into the arguments (and everything under them; `*` segments as in argument
    /// rules) that may carry secret-shaped values, for a tool that takes a credential.
    pub allow_arguments: Vec<String>,
}

/// `secrets.results`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretInResults {
    /// Each value replaced by a marker naming its kind; the rest of the result kept.
    #[default]
    Redact,
    /// The whole result replaced by a refusal.
    Refuse,
    /// Not looked for.
    Off,
}

/// `secrets.arguments`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecretInArguments {
    /// The call is refused before the server sees it.
    #[default]
    Refuse,
    /// Not looked for.
    Off,
}

/// `[results]`: instruction-like text in results and error text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Results {
    pub injection: Injection,
    /// The labels (`wire::injection` names) that count; the others are not acted on.
    pub labels: Vec<String>,
}

/// Every label name `results.labels` accepts: the names of `wire::injection::Label` (a test in
/// `gate::content` keeps the two lists equal; the policy does not import the wire).
pub const RESULT_LABEL_NAMES: [&str; 12] = [
    "hidden-characters",
    "override-instruction",
    "concealment",
    "imperative",
    "role-markup",
    "link",
    "sensitive-path",
    "encoded-payload",
    "addressed-directive",
    "tool-directive",
    "hidden-directive",
    "encoded-directive",
];

/// The largest compiled size of a pattern in the policy (the same bound as
/// `wire::secrets::PATTERN_SIZE_LIMIT`, which a test keeps equal).
pub const PATTERN_SIZE_LIMIT: usize = 1 << 20;

/// The labels `[results]` acts on by default: the ones that are orders to the model or hide
/// text, and the structural ones (which label only a combination of signals). Links, key-file
/// paths and encoded payloads are left out: ordinary results (a fetched page, a directory
/// listing, an image's data) carry them all the time.
pub const DEFAULT_RESULT_LABELS: [&str; 9] = [
    "hidden-characters",
    "override-instruction",
    "concealment",
    "imperative",
    "role-markup",
    "addressed-directive",
    "tool-directive",
    "hidden-directive",
    "encoded-directive",
];

impl Default for Results {
    fn default() -> Self {
        Results {
            injection: Injection::Label,
            labels: DEFAULT_RESULT_LABELS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

/// `results.injection`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Injection {
    /// Not scanned.
    Off,
    /// The result passes with a note appended that names the labels, a warning and an audit record.
    #[default]
    Label,
    /// The result is replaced by a refusal naming the labels.
    Refuse,
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
pub(super) struct RawToolClass {
    pub(super) side_effect: SideEffect,
    #[serde(default)]
    pub(super) idempotency: Idempotency,
    #[serde(default)]
    pub(super) automatic_retry: AutomaticRetry,
    pub(super) confirmation: Option<ConfirmationRequirement>,
    #[serde(default)]
    pub(super) unknown_outcome: UnknownOutcome,
}

impl From<RawToolClass> for ToolClass {
    fn from(raw: RawToolClass) -> Self {
        let confirmation = raw
            .confirmation
            .unwrap_or(ConfirmationRequirement::default_for(raw.side_effect));
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
    /// Where the person is asked, in order: channels listed before `host` are offered at once,
    /// those after it only when the host cannot ask, answered without asking, or erred.
    pub channels: Vec<Channel>,
    /// Whether the person may answer "allow identical calls (same tool, same canonical
    /// arguments) for `identical_for`" instead of approving one call.
    pub allow_identical: bool,
    /// How long such a standing approval of identical calls lasts.
    #[serde(with = "duration_text")]
    pub identical_for: SignedDuration,
    /// Whether the person may answer "allow this tool for this session".
    pub allow_tool_for_session: bool,
}

impl Default for Confirmation {
    fn default() -> Self {
        Confirmation {
            mode: ConfirmationMode::Elicit,
            timeout: SignedDuration::from_secs(60),
            channels: vec![Channel::Host, Channel::Desktop, Channel::Terminal],
            allow_identical: false,
            identical_for: SignedDuration::from_secs(600),
            allow_tool_for_session: false,
        }
    }
}

/// What one approval lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// This one call, once.
    #[default]
    Once,
    /// Identical calls (same tool, same canonical arguments) for `confirmation.identical_for`.
    Identical,
    /// Every call of this tool until mcpguard ends.
    Tool,
}

impl Scope {
    /// The name used in answers, the audit log and messages.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Once => "once",
            Scope::Identical => "identical",
            Scope::Tool => "tool",
        }
    }

    /// Reads a scope's name.
    pub fn parse(name: &str) -> Option<Scope> {
        [Scope::Once, Scope::Identical, Scope::Tool]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

/// One way of reaching the person who approves writes (`confirmation.channels`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Channel {
    /// The host's own interface, through MCP elicitation.
    Host,
    /// A desktop notification with Approve and Deny actions (freedesktop Notifications on the
    /// session bus).
    Desktop,
    /// `mcpguard approvals` in a terminal, over the user's approval sockets.
    Terminal,
}

impl Channel {
    /// The name used in the policy, the audit log and messages.
    pub fn name(self) -> &'static str {
        match self {
            Channel::Host => "host",
            Channel::Desktop => "desktop",
            Channel::Terminal => "terminal",
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Audit {
    /// The audit log; `None` writes none (`--audit-log` on the command line overrides this).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PolicyPath>,
    pub payload: AuditPayload,
    /// Where records go: the file (`path` or `--audit-log`), the systemd journal, the local
    /// syslog socket; several at once. Every sink gets every record, chained the same way.
    pub sink: Vec<AuditSink>,
    /// The journal's native socket (for tests and unusual systems); `None` is
    /// `/run/systemd/journal/socket`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal_socket: Option<PolicyPath>,
    /// The local syslog socket (for tests and unusual systems); `None` is `/dev/log`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syslog_socket: Option<PolicyPath>,
}

impl Default for Audit {
    fn default() -> Self {
        Audit {
            path: None,
            payload: AuditPayload::default(),
            sink: vec![AuditSink::File],
            journal_socket: None,
            syslog_socket: None,
        }
    }
}

/// One of `audit.sink`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuditSink {
    /// The hash-chained JSON-lines file (`audit.path` or `--audit-log`).
    File,
    /// The systemd journal, through its native protocol, with structured fields.
    Journal,
    /// The local syslog socket, as RFC 5424.
    Syslog,
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
