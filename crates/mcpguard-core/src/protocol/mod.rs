//! Facts of the protocol that every layer shares: the revisions mcpguard speaks and their eras,
//! the method names it decides on, the `_meta` keys of the 2026-07-28 envelope, the JSON-RPC error codes mcpguard returns, the
//! nesting bound of every JSON parser, and the severity `Level` of diagnostics.
//!
//! The bottom of the house: everyone may import it, and it imports nothing of ours. Only
//! constants and plain types belong here — no decisions, no parsing, no IO.

/// Protocol revisions of the legacy era (with `initialize`) that mcpguard speaks, oldest first
/// (the version negotiation towards the host relies on the order).
pub const LEGACY_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The first legacy revision with task-augmented execution (`params.task`, `tasks/*`): a tool
/// whose `execution.taskSupport` is `required` cannot be called by a host of an older revision.
pub const TASKS_SINCE: &str = "2025-11-25";

/// The version capture asks for when none is given.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-11-25";

/// The protocol revisions of the modern era that mcpguard speaks.
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

/// Whether `version` belongs to the modern era.
pub fn is_modern(version: &str) -> bool {
    MODERN_VERSIONS.contains(&version)
}

/// Which MCP protocol era the connection is pinned to. The era changes the lifecycle (the legacy
/// era has `initialize`; the 2026-07-28 era is stateless) and is decided before any byte flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Protocol revisions up to and including 2025-11-25.
    Legacy,
    /// Protocol revision 2026-07-28 and later (no `initialize`).
    Modern,
}

/// `_meta` keys of the modern envelope.
pub const PROTOCOL_VERSION_META: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";
pub const CLIENT_INFO_META: &str = "io.modelcontextprotocol/clientInfo";
pub const SERVER_INFO_META: &str = "io.modelcontextprotocol/serverInfo";
pub const SUBSCRIPTION_ID_META: &str = "io.modelcontextprotocol/subscriptionId";

/// The spec's error for a request at a protocol version the receiver does not serve; its data
/// is `{supported, requested}`.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The MCP method names mcpguard decides on or sends itself.
pub mod methods {
    /// The legacy handshake's request.
    pub const INITIALIZE: &str = "initialize";
    /// The host's notification that ends the legacy handshake.
    pub const INITIALIZED: &str = "notifications/initialized";
    pub const PING: &str = "ping";
    pub const TOOLS_LIST: &str = "tools/list";
    pub const TOOLS_CALL: &str = "tools/call";
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    pub const CANCELLED: &str = "notifications/cancelled";
    pub const PROGRESS: &str = "notifications/progress";
    /// A log message from the server.
    pub const MESSAGE: &str = "notifications/message";
    pub const ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
    /// (2026-07-28) The server's acknowledgement that a listen stream is open.
    pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
    pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
    /// Server→client: sampling.
    pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
    /// Server→client (and mcpguard's own confirmation question): elicitation.
    pub const ELICITATION_CREATE: &str = "elicitation/create";
    /// Server→client: roots.
    pub const ROOTS_LIST: &str = "roots/list";
    /// (2026-07-28) Replaces the handshake.
    pub const SERVER_DISCOVER: &str = "server/discover";
    /// (2026-07-28) A stream of change notifications.
    pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
}

/// JSON-RPC error codes that mcpguard itself returns. They sit outside -32768..-32000, which
/// JSON-RPC and MCP reserve, as the MCP error-code policy asks of application codes.
pub mod codes {
    /// The server exited or closed its output before answering the request.
    pub const SERVER_GONE: i64 = -31001;
    /// A message from the host was larger than the configured limit.
    pub const TOO_LARGE: i64 = -31002;
    /// The request id is already in use by another pending request, or uses mcpguard's prefix.
    pub const ID_CONFLICT: i64 = -31003;
    /// The server's response to this request could not be relayed (malformed, or larger than the
    /// configured limit).
    pub const BAD_UPSTREAM_RESPONSE: i64 = -31004;
    /// The request is not allowed in the current phase of the handshake.
    pub const NOT_INITIALIZED: i64 = -31005;
    /// The server's identity or protocol version differs from the pinned one.
    pub const PIN_MISMATCH: i64 = -31006;
    /// The live catalogue could not be verified.
    pub const VERIFICATION_FAILED: i64 = -31007;
    /// The audit record of the decision could not be written, so the decision did not take
    /// effect (fail closed).
    pub const AUDIT_FAILED: i64 = -31008;
}

/// The deepest nesting of arrays and objects that any JSON parser of mcpguard accepts
/// (`snapshot::strict` and `wire::message` both use it).
///
/// A document that is a single array or object has depth 1. serde_json refuses the 128th level on
/// its own, but only with a bare "recursion limit exceeded"; keeping our limit below that means our
/// check always fires first and the error can name the JSON pointer where nesting went too deep.
/// Either limit also keeps the recursive descent far away from the end of the stack.
pub const MAX_JSON_DEPTH: usize = 100;

/// Severity of a diagnostic line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}
