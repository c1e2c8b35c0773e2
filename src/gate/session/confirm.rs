//! Confirmation of writes: mcpguard's own `elicitation/create` to the person, keyed by
//! mcpguard's request id (so an approval is single-use by construction), the answer turned into a
//! verdict, expiry, and the withdrawal of questions still open.

use super::*;

impl Session {
    /// Sends mcpguard's own `elicitation/create` to the host for `call`: one boolean field,
    /// a message naming the tool, the server and the arguments. The call waits in
    /// `confirming` until the answer, a cancellation or the timeout.
    pub(super) fn ask_person(
        &mut self,
        call: Call,
        class: &Classification,
        arguments: Value,
        out: &mut Vec<Out>,
    ) {
        let binding = self.binding_of(&call.tool, &arguments);
        let params = self.approval_question(&call.tool, class, &arguments, &binding);
        let ask = Id::Str(format!("{}{}", self.own_prefix, self.next_own));
        self.next_own += 1;
        let req = json!({"jsonrpc": "2.0", "id": ask.to_json_value(), "method": methods::ELICITATION_CREATE, "params": params});
        out.push(Out::Diag(
            Level::Info,
            format!(
                "call {} of {:?} is a write: asking the person through the host (approval {})",
                call.id,
                call.tool,
                &binding[..12]
            ),
        ));
        out.push(Out::Host(Bytes::from(
            serde_json::to_vec(&req).unwrap_or_default(),
        )));
        self.confirming.insert(
            ask,
            Confirming {
                call,
                binding,
                arguments,
                asked_ms: self.clock_ms,
            },
        );
    }

    /// The digest the approval of a call of `tool` with `arguments` is bound to.
    pub(super) fn binding_of(&self, tool: &str, arguments: &Value) -> String {
        let snapshot = match &self.config.mode {
            Mode::Pinned(pin) => pin.digest.as_str(),
            _ => "unpinned",
        };
        approval_binding(snapshot, tool, arguments)
    }

    /// The params of mcpguard's own `elicitation/create`: one boolean field and a message naming
    /// the tool, the server and the arguments (both eras ask the same question).
    pub(super) fn approval_question(
        &self,
        tool: &str,
        class: &Classification,
        arguments: &Value,
        binding: &str,
    ) -> Value {
        let server = match &self.config.mode {
            Mode::Pinned(pin) => pin.server_key.clone(),
            _ => "(unpinned)".to_string(),
        };
        let timeout_s = self.config.policy.confirmation.timeout.as_secs().max(1);
        let short = crate::wire::sanitize::Clean {
            keep_newlines: false,
            max_bytes: 200,
        };
        let message = format!(
            "mcpguard asks for your approval.\n\nThe AI wants to call the tool \"{}\" of the MCP server \"{}\". {}.\n\nArguments:\n{}\n\nApprove only if you want this to happen now. This approval is for this one call only (approval {}, expires in {timeout_s} s).",
            crate::wire::sanitize::clean(tool, short),
            crate::wire::sanitize::clean(&server, short),
            write_reason(class),
            argument_summary(arguments),
            &binding[..12],
        );
        json!({
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "approve": {
                        "type": "boolean",
                        "title": "Approve this call",
                        "description": "Tick to let this one call through; leave unticked, decline or cancel to refuse it.",
                        "default": false
                    }
                },
                "required": ["approve"]
            }
        })
    }

    /// The host answered one of mcpguard's confirmation requests. Only `accept` with
    /// `approve: true` lets the call go on; anything else refuses it.
    pub(super) fn confirmation_answer(
        &mut self,
        c: Confirming,
        msg: &Message<'_>,
        out: &mut Vec<Out>,
    ) {
        let verdict = match (msg.kind, msg.result) {
            (Kind::Response, Some(raw)) => match strict::parse_strict_str(raw.get()) {
                Ok(v) => elicit_verdict(&v),
                Err(e) => Err(format!("the host's answer is malformed ({e})")),
            },
            _ => Err("the host answered with an error".to_string()),
        };
        self.settle(c, verdict, out);
    }

    /// Ends a confirmation: the call goes on (re-verified first when pinned) or is refused.
    pub(super) fn settle(
        &mut self,
        c: Confirming,
        verdict: Result<(), String>,
        out: &mut Vec<Out>,
    ) {
        let Confirming {
            mut call,
            binding,
            arguments,
            ..
        } = c;
        match verdict {
            Ok(()) => {
                self.audit(out, || AuditNote {
                    tool: Some(call.tool.clone()),
                    arguments: Some(arguments),
                    outcome: Some("confirmed"),
                    detail: Some(format!("approval {binding}")),
                    ..AuditNote::new(EventKind::CallConfirmed)
                });
                out.push(Out::Diag(
                    Level::Info,
                    format!(
                        "call {} of {:?} was approved by the person",
                        call.id, call.tool
                    ),
                ));
                call.approval = Approval::Confirmed(binding);
                self.proceed(call, out);
            }
            Err(why) => {
                let r = Refusal::new(
                    code::CONSENT_REQUIRED,
                    Category::Authorization,
                    format!(
                        "refused {:?}: it needs a person's approval and did not get it ({why}); it was not run. Do not retry unless the person asks for it",
                        call.tool
                    ),
                );
                self.refuse_call_with(&call.id, &call.tool, r, Some(arguments), out);
            }
        }
    }

    /// Withdraws every confirmation question still with the person (the host is told to drop it)
    /// and refuses its call with `refusal(tool)`. In id order, so the output is deterministic.
    pub(super) fn withdraw_questions(
        &mut self,
        reason: &str,
        refusal: impl Fn(&str) -> Refusal,
        out: &mut Vec<Out>,
    ) {
        let mut asking: Vec<(Id, Confirming)> = self.confirming.drain().collect();
        asking.sort_by_cached_key(|(ask, _)| ask.to_string());
        for (ask, c) in asking {
            out.push(Out::Host(cancel_notification(&ask, reason)));
            self.refuse_call(&c.call.id, &c.call.tool, refusal(&c.call.tool), out);
        }
    }

    /// Confirmations not answered within `confirmation.timeout` are denials; the host is told to
    /// withdraw the question, and a late answer finds nothing to approve.
    pub(super) fn expire_confirmations(&mut self, out: &mut Vec<Out>) {
        let limit =
            u64::try_from(self.config.policy.confirmation.timeout.as_millis()).unwrap_or(u64::MAX);
        let mut expired: Vec<Id> = self
            .confirming
            .iter()
            .filter(|(_, c)| self.clock_ms.saturating_sub(c.asked_ms) >= limit)
            .map(|(id, _)| id.clone())
            .collect();
        expired.sort_by_cached_key(|id| id.to_string());
        for ask in expired {
            let Some(c) = self.confirming.remove(&ask) else {
                continue;
            };
            out.push(Out::Host(cancel_notification(
                &ask,
                "mcpguard: no answer within the confirmation timeout",
            )));
            let why = format!("no answer within {} s", limit / 1000);
            self.settle(c, Err(why), out);
        }
    }
}

/// Reads an elicitation answer (`ElicitResult`): only `accept` with `approve: true` approves.
pub(super) fn elicit_verdict(v: &Value) -> Result<(), String> {
    match v.get("action").and_then(Value::as_str) {
        Some("accept") => {
            if v.pointer("/content/approve") == Some(&Value::Bool(true)) {
                Ok(())
            } else {
                Err("the person did not tick approve".to_string())
            }
        }
        Some("decline") => Err("the person declined".to_string()),
        Some("cancel") => Err("the person dismissed the request".to_string()),
        _ => Err("the host's answer has no valid action".to_string()),
    }
}

/// Why a call needs confirmation, in words for the person and the model.
pub(super) fn write_reason(class: &Classification) -> String {
    use crate::policy::Basis;
    match (class.basis, class.side_effect) {
        (Basis::Unclassified, _) => {
            "The local policy does not classify this tool, so it is treated as a write".into()
        }
        (Basis::AuthorityChannel, _) => {
            "The review marks an argument as an authority input, so the call is treated as a write"
                .into()
        }
        (Basis::Policy, Some(effect)) => format!(
            "The local policy classifies it as a write ({}) that needs confirmation",
            serde_json::to_value(effect)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ),
        (Basis::Policy, None) => "The local policy requires confirmation for it".into(),
        (Basis::Review, Some(effect)) => format!(
            "Its review classifies it as a write ({}), which needs confirmation",
            effect.as_str()
        ),
        (Basis::Review, None) => "Its review requires confirmation for it".into(),
    }
}

/// The digest an approval is bound to: SHA-256 over the canonical JSON of the snapshot digest,
/// the tool name and the arguments, so an approval cannot stand for any other call.
fn approval_binding(snapshot: &str, tool: &str, arguments: &Value) -> String {
    use sha2::{Digest, Sha256};
    let doc = json!({"snapshot": snapshot, "tool": tool, "arguments": arguments});
    let digest = Sha256::digest(crate::snapshot::canonical::canonical_bytes(&doc));
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The arguments as a person can read them: canonical JSON with control and invisible characters
/// made visible, cut at a length a dialog can show (the cut is said).
fn argument_summary(arguments: &Value) -> String {
    const MAX: usize = 1500;
    let text = String::from_utf8(crate::snapshot::canonical::canonical_bytes(arguments))
        .unwrap_or_default();
    let clean = crate::wire::sanitize::clean(
        &text,
        crate::wire::sanitize::Clean {
            keep_newlines: false,
            max_bytes: MAX,
        },
    );
    if text.len() > MAX {
        format!(
            "{clean} (cut: the arguments are {} bytes in all)",
            text.len()
        )
    } else {
        clean
    }
}

/// Seed 004's `operationPolicy` for a classified call.
pub(super) fn operation_policy(class: &Classification) -> Value {
    json!({
        "sideEffect": class.side_effect,
        "idempotency": class.idempotency,
        "automaticRetry": "never",
        "confirmation": if class.needs_confirmation { "trusted-confirmation-required" } else { "not-required" },
        "unknownOutcome": "stop-and-reconcile",
    })
}
