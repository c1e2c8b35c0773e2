//! Results of calls: checked against the reviewed output schema, error text sanitized (the raw
//! text kept for the audit log), the call's pending entry settled.

use super::*;

impl Session {
    pub(super) fn call_response(
        &mut self,
        id: &Id,
        tool: &str,
        indeterminate: bool,
        msg: &Message<'_>,
        line: Bytes,
        out: &mut Vec<Out>,
    ) {
        if indeterminate {
            let mut r = Refusal::new(
                code::UNKNOWN_DISPATCH_OUTCOME,
                Category::UnknownOutcome,
                format!("the review was invalidated while {tool:?} ran; its outcome is unknown and is not exposed as reviewed output. Do not retry automatically: check what the call did"),
            );
            r.outcome_known = false;
            return self.refuse_call(id, tool, r, out);
        }
        if msg.kind == Kind::ErrorResponse {
            if self.config.redact_errors {
                let err: Value = msg
                    .error
                    .and_then(|e| serde_json::from_str(e.get()).ok())
                    .unwrap_or(Value::Null);
                self.audit_raw_error(
                    tool,
                    err.get("message")
                        .and_then(Value::as_str)
                        .unwrap_or_default(),
                    out,
                );
                let v = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "error": {
                    "code": err.get("code").cloned().unwrap_or(json!(-32603)),
                    "message": format!("mcpguard: {tool:?} failed; the server's error text is withheld by policy (errors.text = \"redacted\") [{}]", code::UPSTREAM_ERROR)
                }});
                out.push(Out::Host(Bytes::from(
                    serde_json::to_vec(&v).unwrap_or_default(),
                )));
                return;
            }
            out.push(Out::Host(sanitized_error(id, msg).unwrap_or(line)));
            return;
        }
        let Some(raw) = msg.result else {
            return out.push(Out::Host(line));
        };
        let mut result = match strict::parse_strict_str(raw.get()) {
            Ok(v) => v,
            Err(e) => {
                let r = Refusal::new(
                    code::UPSTREAM_ERROR,
                    Category::Upstream,
                    format!("the server's result for {tool:?} is not acceptable: {e}"),
                );
                return self.refuse_call(id, tool, r, out);
            }
        };
        if result.get("isError") == Some(&Value::Bool(true)) {
            if self.config.redact_errors {
                let text: Vec<&str> = result
                    .get("content")
                    .and_then(Value::as_array)
                    .map(|c| {
                        c.iter()
                            .filter_map(|b| b.get("text").and_then(Value::as_str))
                            .collect()
                    })
                    .unwrap_or_default();
                self.audit_raw_error(tool, &text.join("\n"), out);
                let r = Refusal::new(
                    code::UPSTREAM_ERROR,
                    Category::Upstream,
                    format!("{tool:?} reported an error; its text is withheld by policy (errors.text = \"redacted\")"),
                );
                return self.refuse_call(id, tool, r, out);
            }
            if refusal::clean_error_result(&mut result) {
                return respond(out, id, result);
            }
            return out.push(Out::Host(line));
        }
        let output = match &self.config.mode {
            Mode::Pinned(pin) => pin
                .tool(tool)
                .and_then(|t| t.output.as_ref().map(|_| pin.clone())),
            _ => None,
        };
        if let Some(pin) = output {
            let schema = pin.tool(tool).and_then(|t| t.output.as_ref());
            let verdict = match (result.get("structuredContent"), schema) {
                (None, _) => Err("the result has no structuredContent although the reviewed tool declares an outputSchema".to_string()),
                (Some(sc), Some(schema)) => schema
                    .validate(sc)
                    .map_err(|v| format!("structuredContent does not match the reviewed outputSchema: {}", crate::gate::schema::summary(&v))),
                (Some(_), None) => Ok(()),
            };
            if let Err(why) = verdict {
                let r = Refusal::new(
                    code::OUTPUT_CONTRACT,
                    Category::OutputContract,
                    format!("the result of {tool:?} was withheld: {why}"),
                );
                return self.refuse_call(id, tool, r, out);
            }
            if self.config.structured_only {
                // Only the declared contract crosses: the validated structuredContent, and its
                // canonical JSON as the one text block (no free-text content from the server).
                let sc = result
                    .get("structuredContent")
                    .cloned()
                    .unwrap_or(Value::Null);
                let text = String::from_utf8(crate::snapshot::canonical::canonical_bytes(&sc))
                    .unwrap_or_default();
                return respond(
                    out,
                    id,
                    json!({"content": [{"type": "text", "text": text}], "structuredContent": sc}),
                );
            }
        }
        out.push(Out::Host(line));
    }

    /// Keeps the server's raw error text for the auditor only.
    pub(super) fn audit_raw_error(&self, tool: &str, text: &str, out: &mut Vec<Out>) {
        self.audit(out, || AuditNote {
            tool: Some(tool.to_string()),
            detail: Some(text.to_string()),
            ..AuditNote::new(EventKind::ErrorTextRaw)
        });
    }
}

/// A JSON-RPC error from the server with its message sanitized and `data` dropped (error text
/// can carry internal details and injected instructions). `None` when it needs no change.
pub(super) fn sanitized_error(id: &Id, msg: &Message<'_>) -> Option<Bytes> {
    let err: Value = serde_json::from_str(msg.error?.get()).ok()?;
    let text = err
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let clean = refusal::clean_error_text(text);
    if clean == text && err.get("data").is_none() {
        return None;
    }
    let code = err.get("code").cloned().unwrap_or(json!(-32603));
    let v = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "error": {"code": code, "message": clean}});
    Some(Bytes::from(serde_json::to_vec(&v).unwrap_or_default()))
}
