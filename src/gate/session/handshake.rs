//! The legacy handshake: `initialize` from the host forwarded with blocked capabilities removed,
//! the server's answer checked against the pin (identity, protocol version), and the failure
//! that ends a session whose server is not the reviewed one.

use super::*;

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
            let asked = params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("?");
            if asked != pin.protocol_version {
                out.push(Out::Diag(
                    Level::Info,
                    format!("the host asked for protocol {asked}; the server is initialized with the pinned {}", pin.protocol_version),
                ));
            }
            params.insert("protocolVersion".into(), json!(pin.protocol_version));
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
