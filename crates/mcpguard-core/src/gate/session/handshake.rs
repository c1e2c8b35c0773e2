//! The legacy handshake: `initialize` from the host forwarded with blocked capabilities removed,
//! the version negotiation towards the host (`negotiate`), the server's answer checked against
//! the pin (identity, protocol version), and the failure that ends a session whose server is not
//! the reviewed one.
//!
//! The server is always initialized with the pinned version, because that is the version its
//! catalogue was captured and reviewed in. The host is answered in the version it asked for when
//! the pinned catalogue can be served in it: the legacy revisions differ in fields a client
//! ignores (Tool `title`, `icons`, `annotations`, `outputSchema`, `execution`, `_meta`; serverInfo
//! `icons`, `websiteUrl`; unknown capabilities), and everything mcpguard enforces — the pin, the
//! arguments' and results' schemas, the policy, the confirmation (asked only when the host
//! advertised elicitation) — is enforced by mcpguard itself whatever the host understands. The
//! one thing an older revision cannot do is call a tool that requires tasks.

use crate::protocol::{is_modern, LEGACY_VERSIONS, TASKS_SINCE};

use super::*;

/// How mcpguard answers a host's `initialize` when a legacy snapshot is pinned.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Answer in the version the host asked for (the server still runs the pinned one).
    Asked(String),
    /// Answer with the pinned version and let the host decide, as the spec's negotiation does
    /// for a version the server does not support: the host asked for none, one mcpguard does
    /// not know, or one newer than the snapshot.
    Pinned,
    /// Refuse the initialize: the pinned catalogue cannot be served in the asked version.
    Refuse {
        why: String,
        /// The versions this snapshot could be served in (the error's `data.supported`).
        supported: Vec<&'static str>,
    },
}

/// The capture command that would give a snapshot at `version`, for refusal messages.
pub(super) fn capture_hint(version: &str) -> String {
    format!(
        "capture and review the server again with `mcpguard capture --protocol-version {version}`"
    )
}

/// The version negotiation towards the host (see the module header): `asked` is the host's
/// `protocolVersion`, `tasks_allowed` whether the policy lets tasks through (a tool that
/// requires tasks is refused at every version otherwise, so then it constrains nothing).
pub(super) fn negotiate(asked: Option<&str>, pin: &Pin, tasks_allowed: bool) -> Answer {
    let pinned = pin.protocol_version.as_str();
    let rank = |v: &str| LEGACY_VERSIONS.iter().position(|l| *l == v);
    let Some(asked) = asked else {
        return Answer::Pinned;
    };
    if is_modern(asked) {
        let why = format!(
            "refused initialize: the host asked for protocol {asked}, of the 2026-07-28 era, but the \
             reviewed snapshot pins {pinned}, of the era with initialize, and mcpguard does not \
             translate between eras; {}",
            capture_hint(asked)
        );
        return Answer::Refuse {
            why,
            supported: LEGACY_VERSIONS[..=rank(pinned).unwrap_or(0)].to_vec(),
        };
    }
    let (Some(a), Some(p)) = (rank(asked), rank(pinned)) else {
        return Answer::Pinned;
    };
    if a >= p {
        return if a == p {
            Answer::Asked(asked.to_string())
        } else {
            Answer::Pinned
        };
    }
    let tasks = rank(TASKS_SINCE).unwrap_or(0);
    let needs_tasks = pin.tools.iter().find(|t| t.requires_task && tasks_allowed);
    if let (Some(tool), true) = (needs_tasks, a < tasks && tasks <= p) {
        let why = format!(
            "refused initialize: the host asked for protocol {asked}, but the reviewed snapshot pins \
             {pinned} and its tool {:?} requires task-augmented execution, which exists only from \
             {TASKS_SINCE}; {}, or use a host that speaks {TASKS_SINCE} or later",
            tool.name,
            capture_hint(asked)
        );
        return Answer::Refuse {
            why,
            supported: LEGACY_VERSIONS[tasks..=p].to_vec(),
        };
    }
    Answer::Asked(asked.to_string())
}

impl Session {
    pub(super) fn host_initialize(&mut self, id: Id, msg: &Message<'_>, out: &mut Vec<Out>) {
        if self.phase != Phase::AwaitInitialize {
            refuse_to_host(
                Some(&id),
                message::INVALID_REQUEST,
                "refused a second initialize: the session is already initialized",
                out,
            );
            return;
        }
        let Some(mut params) = object_params(&id, msg, methods::INITIALIZE, out) else {
            return;
        };
        if let Mode::Pinned(pin) = &self.config.mode {
            let asked = params.get("protocolVersion").and_then(Value::as_str);
            let answer = negotiate(asked, pin, self.config.capabilities.tasks);
            let (asked, pinned) = (asked.unwrap_or("?"), pin.protocol_version.clone());
            match answer {
                Answer::Refuse { why, supported } => {
                    self.audit(out, || AuditNote {
                        detail: Some(why.clone()),
                        outcome: Some("refused"),
                        ..AuditNote::new(EventKind::HandshakePinned)
                    });
                    // The spec's error for an unsupported version; the phase stays, so the
                    // host may ask again with a version that can be served.
                    out.push(Out::Diag(Level::Warn, format!("{why} (request {id})")));
                    let data = json!({"supported": supported, "requested": asked});
                    out.push(Out::Host(Bytes::from(message::error_response(
                        Some(&id),
                        message::INVALID_PARAMS,
                        &format!("mcpguard: {why}"),
                        Some(&data),
                    ))));
                    return;
                }
                Answer::Asked(v) if v != pinned => {
                    out.push(Out::Diag(
                        Level::Info,
                        format!("the host asked for protocol {v}: answered in {v}; the server is initialized with the pinned {pinned}"),
                    ));
                    self.host_version = Some(v);
                }
                Answer::Asked(_) => {}
                Answer::Pinned => out.push(Out::Diag(
                    Level::Info,
                    format!("the host asked for protocol {asked}, which this snapshot is not served in: answered with the pinned {pinned} for the host to decide"),
                )),
            }
            params.insert("protocolVersion".into(), json!(pinned));
        }
        // Form elicitation is what mcpguard asks confirmations with: `elicitation: {}` (form
        // implied) or an explicit `form` entry; a host offering only `url` mode cannot be asked.
        self.host_can_elicit = params
            .get("capabilities")
            .and_then(|c| c.get("elicitation"))
            .and_then(Value::as_object)
            .is_some_and(|e| e.is_empty() || e.contains_key("form"));
        if let Some(caps) = params
            .get_mut("capabilities")
            .and_then(Value::as_object_mut)
        {
            let removed = self.config.capabilities.filter_client(caps);
            if !removed.is_empty() {
                out.push(Out::Diag(
                    Level::Info,
                    format!(
                        "the server does not see the host's {} capabilities (blocked by policy)",
                        removed.join(", ")
                    ),
                ));
            }
        }
        let request = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "method": methods::INITIALIZE, "params": params});
        self.phase = Phase::Initializing;
        self.host_requests.insert(
            id,
            Pending {
                method: methods::INITIALIZE.into(),
                kind: PendingKind::Initialize,
            },
        );
        out.push(Out::Server(Bytes::from(
            serde_json::to_vec(&request).unwrap_or_default(),
        )));
    }

    /// The handshake (legacy `initialize`, or the modern `server/discover`) passed its pins: say
    /// which server capabilities the host does not see, and record it.
    pub(super) fn handshake_pinned(&self, removed: &[String], out: &mut Vec<Out>) {
        if !removed.is_empty() {
            out.push(Out::Diag(
                Level::Info,
                format!(
                    "the host does not see the server's {} capabilities (blocked by policy)",
                    removed.join(", ")
                ),
            ));
        }
        self.audit(out, || AuditNote {
            outcome: Some("pinned"),
            ..AuditNote::new(EventKind::HandshakePinned)
        });
    }

    pub(super) fn initialize_response(
        &mut self,
        id: Id,
        msg: &Message<'_>,
        line: Bytes,
        out: &mut Vec<Out>,
    ) {
        if msg.kind == Kind::ErrorResponse {
            self.phase = Phase::AwaitInitialize;
            let err = msg
                .error
                .map(|e| refusal::clean_error_text(e.get()))
                .unwrap_or_default();
            out.push(Out::Diag(
                Level::Warn,
                format!("the server refused initialize: {err}"),
            ));
            out.push(Out::Host(sanitized_error(&id, msg).unwrap_or(line)));
            return;
        }
        let mut result = match msg.result.map(|r| strict::parse_strict_str(r.get())) {
            Some(Ok(Value::Object(r))) => r,
            Some(Err(e)) => {
                return self.fail_handshake(
                    &id,
                    &format!("the server's initialize result is not acceptable: {e}"),
                    out,
                )
            }
            _ => {
                return self.fail_handshake(
                    &id,
                    "the server's initialize result is not an object",
                    out,
                )
            }
        };
        if let Mode::Pinned(pin) = &self.config.mode {
            let pin = pin.clone();
            let negotiated = result
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("?");
            if negotiated != pin.protocol_version {
                let m = format!("the server negotiated protocol {negotiated} but the snapshot pins {}; capture and review the server again", pin.protocol_version);
                return self.fail_handshake(&id, &m, out);
            }
            let info = result.get("serverInfo").cloned().unwrap_or(Value::Null);
            if !crate::snapshot::canonical::canonical_eq(&info, &pin.server_info) {
                let changes = crate::snapshot::diff::diff_documents(
                    &json!({"serverInfo": pin.server_info}),
                    &json!({"serverInfo": info}),
                );
                let pointers: Vec<String> = changes.iter().map(|c| c.pointer.clone()).collect();
                let m = format!(
                    "the server's identity differs from the pinned serverInfo at {}; capture and review the server again",
                    pointers.join(", ")
                );
                return self.fail_handshake(&id, &m, out);
            }
            match (result.get("instructions"), &pin.instructions) {
                (None, _) => {}
                (Some(live), Some(pinned))
                    if crate::snapshot::canonical::canonical_eq(live, pinned) => {}
                (Some(_), pinned) => {
                    result.remove("instructions");
                    out.push(Out::Diag(
                        Level::Warn,
                        if pinned.is_some() {
                            "withheld the server's instructions: they differ from the reviewed snapshot".to_string()
                        } else {
                            "withheld the server's instructions: the snapshot has none reviewed".to_string()
                        },
                    ));
                }
            }
        }
        // The server speaks the pinned version (checked above); the host hears the one it asked
        // for when the catalogue can be served in it (`negotiate`).
        if let Some(v) = &self.host_version {
            result.insert("protocolVersion".into(), json!(v));
        }
        if let Some(caps) = result
            .get_mut("capabilities")
            .and_then(Value::as_object_mut)
        {
            let removed = self.config.capabilities.filter_server(caps);
            self.handshake_pinned(&removed, out);
        } else {
            self.handshake_pinned(&[], out);
        }
        self.phase = Phase::AwaitInitialized;
        respond(out, &id, Value::Object(result));
    }

    pub(super) fn fail_handshake(&mut self, id: &Id, why: &str, out: &mut Vec<Out>) {
        self.audit(out, || AuditNote {
            detail: Some(why.to_string()),
            outcome: Some("refused"),
            ..AuditNote::new(EventKind::HandshakePinned)
        });
        out.push(Out::Diag(
            Level::Error,
            format!("refused the session: {why}"),
        ));
        out.push(Out::Host(Bytes::from(message::error_response(
            Some(id),
            codes::PIN_MISMATCH,
            &format!("mcpguard: {why}"),
            None,
        ))));
        self.phase = Phase::Failed(why.to_string());
    }
}
