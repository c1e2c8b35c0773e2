//! The audit log's vocabulary: the stable code of each kind of record ([`EventKind`]), the
//! payload mode, and one record before it is chained ([`Event`]).
//!
//! Plain data and pure functions: the gate uses `EventKind` in its notes without knowing the log.

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::snapshot::canonical::digest;

use super::*;

/// The stable code of each kind of audit record. The codes are a public interface (auditors grep
/// and alert on them), so they never change once released; new kinds get new codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// mcpguard started for a server.
    Start,
    /// The snapshot's digest, strict parse, expiry and reviews were checked before the spawn.
    SnapshotVerified,
    /// The handshake matched the pinned protocol version and server identity.
    HandshakePinned,
    /// A `tools/list` was answered from the snapshot.
    ListServed,
    /// A `tools/call` was forwarded to the server.
    CallAllowed,
    /// A `tools/call` was refused by the gate or the policy.
    CallRefused,
    /// A human approved a write through the host.
    CallConfirmed,
    /// A human declined (or did not answer) the confirmation of a write.
    CallDeniedByUser,
    /// The outcome of a forwarded call is unknown (the server went away, a timeout).
    CallIndeterminate,
    /// The review stopped holding (for example a list change) and calls are refused until it does.
    ReviewInvalidated,
    /// A capability (sampling, elicitation, roots, ...) was removed or a request for it refused.
    CapabilityBlocked,
    /// The sandbox was applied to the child.
    SandboxApplied,
    /// The server process ended.
    ChildExit,
    /// The raw error text of the server, kept for the auditor and never shown to the model.
    ErrorTextRaw,
    /// Secret-shaped values were found in a result or error text (kinds, pointers and digests,
    /// never the values); the outcome says whether they were redacted or the result refused.
    SecretDetected,
    /// Instruction-like text was found in a result or error text (labels and pointers); the
    /// outcome says whether the result was labelled or refused.
    ResultLabelled,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [EventKind; 16] = [
        EventKind::Start,
        EventKind::SnapshotVerified,
        EventKind::HandshakePinned,
        EventKind::ListServed,
        EventKind::CallAllowed,
        EventKind::CallRefused,
        EventKind::CallConfirmed,
        EventKind::CallDeniedByUser,
        EventKind::CallIndeterminate,
        EventKind::ReviewInvalidated,
        EventKind::CapabilityBlocked,
        EventKind::SandboxApplied,
        EventKind::ChildExit,
        EventKind::ErrorTextRaw,
        EventKind::SecretDetected,
        EventKind::ResultLabelled,
    ];

    /// The stable code written in the record's `event` member.
    pub fn code(self) -> &'static str {
        match self {
            EventKind::Start => "start",
            EventKind::SnapshotVerified => "snapshot_verified",
            EventKind::HandshakePinned => "handshake_pinned",
            EventKind::ListServed => "list_served",
            EventKind::CallAllowed => "call_allowed",
            EventKind::CallRefused => "call_refused",
            EventKind::CallConfirmed => "call_confirmed",
            EventKind::CallDeniedByUser => "call_denied_by_user",
            EventKind::CallIndeterminate => "call_indeterminate",
            EventKind::ReviewInvalidated => "review_invalidated",
            EventKind::CapabilityBlocked => "capability_blocked",
            EventKind::SandboxApplied => "sandbox_applied",
            EventKind::ChildExit => "child_exit",
            EventKind::ErrorTextRaw => "error_text_raw",
            EventKind::SecretDetected => "secret_detected",
            EventKind::ResultLabelled => "result_labelled",
        }
    }

    /// The kind with this code, if there is one.
    pub fn from_code(code: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|kind| kind.code() == code)
    }

    /// The `outcome` written when the caller does not name one, so that every record has an
    /// outcome an auditor can filter on without knowing each call site.
    pub fn default_outcome(self) -> &'static str {
        match self {
            EventKind::Start => "started",
            EventKind::SnapshotVerified => "verified",
            EventKind::HandshakePinned => "pinned",
            EventKind::ListServed => "served",
            EventKind::CallAllowed => "allowed",
            EventKind::CallRefused => "refused",
            EventKind::CallConfirmed => "confirmed",
            EventKind::CallDeniedByUser => "denied",
            EventKind::CallIndeterminate => "indeterminate",
            EventKind::ReviewInvalidated => "invalidated",
            EventKind::CapabilityBlocked => "blocked",
            EventKind::SandboxApplied => "applied",
            EventKind::ChildExit => "exited",
            EventKind::ErrorTextRaw => "recorded",
            EventKind::SecretDetected => "detected",
            EventKind::ResultLabelled => "labelled",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// Whether argument and result values are written, or only the digest of the arguments.
///
/// The policy's `audit.payload` (`crate::policy::AuditPayload`) is what users set; this is the
/// writer's own copy so that the log does not depend on how the policy is parsed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Payload {
    /// Only `argsSha256`; no argument or result value. Arguments can hold secrets and personal
    /// data, and a log is read by more people than the conversation was, so this is the default.
    #[default]
    Digests,
    /// `argsSha256` plus the `arguments` and `result` values, for a policy that asks for them.
    Full,
}

/// The SHA-256 (lowercase hex) of the RFC 8785 canonical JSON of a call's arguments: the same
/// arguments give the same digest whatever member order or number spelling the host used.
pub fn args_digest(arguments: &Value) -> String {
    digest(arguments)
}

/// One decision to record. Build it with [`Event::new`] (or [`Event::error_text_raw`]) and the
/// chained setters; [`AuditLog::record`] adds `seq`, `time`, `server`, `snapshot`, `prev` and
/// `hash`.
///
/// The optional members, in the order they appear in a record: `tool`, `argsSha256` (from
/// [`Event::arguments`]), `outcome` (always present), `code` (the refusal code), `durationMs`,
/// `detail`, then in [`Payload::Full`] only `arguments` and `result`, and for
/// [`EventKind::ErrorTextRaw`] only `errorText` and `errorTextBytes`. A record that would be longer
/// than [`MAX_RECORD_BYTES`] with its payload values is written without them and with
/// `"payloadOmitted": "record too long"` instead.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    pub(super) kind: EventKind,
    outcome: Option<Cow<'a, str>>,
    tool: Option<Cow<'a, str>>,
    code: Option<Cow<'a, str>>,
    duration: Option<Duration>,
    detail: Option<Cow<'a, str>>,
    arguments: Option<&'a Value>,
    result: Option<&'a Value>,
    error_text: Option<Cow<'a, str>>,
}

impl<'a> Event<'a> {
    /// An event of `kind` with its default outcome and no optional members.
    pub fn new(kind: EventKind) -> Self {
        Event {
            kind,
            outcome: None,
            tool: None,
            code: None,
            duration: None,
            detail: None,
            arguments: None,
            result: None,
            error_text: None,
        }
    }

    /// An [`EventKind::ErrorTextRaw`] event carrying the server's raw error text. This is the only
    /// way to put server-written text into the log, so that it cannot end up in other records by
    /// accident.
    pub fn error_text_raw(text: impl Into<Cow<'a, str>>) -> Self {
        let mut event = Event::new(EventKind::ErrorTextRaw);
        event.error_text = Some(text.into());
        event
    }

    /// The kind of this event.
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// Replaces the default outcome.
    pub fn outcome(mut self, outcome: impl Into<Cow<'a, str>>) -> Self {
        self.outcome = Some(outcome.into());
        self
    }

    /// The tool the event is about.
    pub fn tool(mut self, name: impl Into<Cow<'a, str>>) -> Self {
        self.tool = Some(name.into());
        self
    }

    /// The call's arguments: their digest is always written as `argsSha256`, the value itself only
    /// in [`Payload::Full`].
    pub fn arguments(mut self, arguments: &'a Value) -> Self {
        self.arguments = Some(arguments);
        self
    }

    /// The call's result: written only in [`Payload::Full`].
    pub fn result(mut self, result: &'a Value) -> Self {
        self.result = Some(result);
        self
    }

    /// The refusal code (the `code` of mcpguard's error contract).
    pub fn code(mut self, code: impl Into<Cow<'a, str>>) -> Self {
        self.code = Some(code.into());
        self
    }

    /// How long the decision or the call took, written in whole milliseconds.
    pub fn duration(mut self, duration: Duration) -> Self {
        self.duration = Some(duration);
        self
    }

    /// A short explanation, cut to [`MAX_DETAIL_BYTES`].
    pub fn detail(mut self, detail: impl Into<Cow<'a, str>>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// The members between `snapshot` and `prev`, in record order. `include_payload` is false in
    /// [`Payload::Digests`] and when a full record would be too long to verify.
    pub(super) fn fields(&self, include_payload: bool) -> Map<String, Value> {
        let mut map = Map::new();
        if let Some(tool) = &self.tool {
            map.insert("tool".into(), Value::from(tool.as_ref()));
        }
        if let Some(arguments) = self.arguments {
            map.insert("argsSha256".into(), Value::from(args_digest(arguments)));
        }
        let outcome = self
            .outcome
            .as_deref()
            .unwrap_or(self.kind.default_outcome());
        map.insert("outcome".into(), Value::from(outcome));
        if let Some(code) = &self.code {
            map.insert("code".into(), Value::from(code.as_ref()));
        }
        if let Some(duration) = self.duration {
            let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
            map.insert("durationMs".into(), Value::from(millis));
        }
        if let Some(detail) = &self.detail {
            map.insert(
                "detail".into(),
                Value::from(cut(detail, MAX_DETAIL_BYTES, "…")),
            );
        }
        if include_payload {
            if let Some(arguments) = self.arguments {
                map.insert("arguments".into(), arguments.clone());
            }
            if let Some(result) = self.result {
                map.insert("result".into(), result.clone());
            }
        }
        if let Some(text) = &self.error_text {
            map.insert(
                "errorText".into(),
                Value::from(cut(text, MAX_ERROR_TEXT_BYTES, "")),
            );
            map.insert("errorTextBytes".into(), Value::from(text.len()));
        }
        map
    }
}

/// Returns `text` cut to at most `max` bytes on a character boundary, with `marker` appended when
/// something was cut (the marker's own bytes count towards `max`).
fn cut<'t>(text: &'t str, max: usize, marker: &str) -> Cow<'t, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let mut end = max.saturating_sub(marker.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}{marker}", &text[..end]))
}
