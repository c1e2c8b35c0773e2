//! Results of calls: secret-shaped values redacted (or the result refused), checked against the
//! reviewed output schema, instruction-like text labelled (or refused), error text sanitized (the
//! raw text kept for the audit log), the call's pending entry settled. A result none of this
//! changes is forwarded as the server's bytes.

use super::*;
use crate::gate::content::{label_names, label_note, places, record_labels, Detection, Labelled};
use crate::policy::{Injection, SecretInResults};
use crate::wire::injection::Context as LabelContext;

impl Session {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn call_response(
        &mut self,
        id: &Id,
        tool: &str,
        arguments: &[String],
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
            return self.error_response(id, tool, arguments, msg, line, out);
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
        // Whether the result sent on differs from the server's bytes. Only then is it
        // serialized again; every other result is forwarded as the original line.
        let mut changed = false;
        let is_error = result.get("isError") == Some(&Value::Bool(true));
        // The reviewed outputSchema judges what the server sent, before any redaction: a
        // contract the server broke is the server's fault (output_contract_violation), and
        // mcpguard's markers cannot hide or cause that. Error results carry no contract.
        let output = match &self.config.mode {
            Mode::Pinned(pin) if !is_error => pin
                .tool(tool)
                .and_then(|t| t.output.as_ref().map(|_| pin.clone())),
            _ => None,
        };
        if let Some(pin) = &output {
            if let Err(why) = output_verdict(pin, tool, &result) {
                let r = Refusal::new(
                    code::OUTPUT_CONTRACT,
                    Category::OutputContract,
                    format!("the result of {tool:?} was withheld: {why}"),
                );
                return self.refuse_call(id, tool, r, out);
            }
        }
        let content = self.config.content.clone();
        if content.result_may_hold_secrets(raw.get()) {
            let found = content.redact_result(&mut result);
            if !found.is_empty() {
                if !self.secrets_in_result(id, tool, &found, out) {
                    return;
                }
                changed = true;
                // A redacted value or member name can break the contract the server's value
                // met (a pattern, a length, a required member): checked again, and refused
                // rather than passed broken, because SDK clients validate structuredContent.
                let structured = found
                    .iter()
                    .any(|d| d.pointer.starts_with("/structuredContent"));
                if let (Some(pin), true) = (&output, structured) {
                    if let Err(why) = output_verdict(pin, tool, &result) {
                        let r = Refusal::new(
                            code::OUTPUT_CONTRACT,
                            Category::OutputContract,
                            format!("the result of {tool:?} was withheld: {why} (after secret-shaped values were redacted; set secrets.results = \"refuse\" to withhold such results outright, or list the tool's output pointers under [secrets] only if they are known not to be secrets)"),
                        );
                        return self.refuse_call(id, tool, r, out);
                    }
                }
            }
        }
        if is_error {
            if self.config.redact_errors {
                self.audit_raw_error(tool, &error_text(&result), out);
                let r = Refusal::new(
                    code::UPSTREAM_ERROR,
                    Category::Upstream,
                    format!("{tool:?} reported an error; its text is withheld by policy (errors.text = \"redacted\")"),
                );
                return self.refuse_call(id, tool, r, out);
            }
            changed |= refusal::clean_error_result(&mut result);
            out.push(Out::ToolError {
                tool: tool.to_string(),
                text: error_text(&result),
            });
            let ctx = self.label_context(tool, arguments, true);
            let unchanged = (!changed).then(|| raw.get());
            if !self.label_result(id, tool, &ctx, unchanged, &mut result, &mut changed, out) {
                return;
            }
            return self.send_result(id, result, changed, line, out);
        }
        if output.is_some() && self.config.structured_only {
            // Only the declared contract crosses: the validated structuredContent, and its
            // canonical JSON as the one text block (no free-text content from the server).
            let sc = result
                .get("structuredContent")
                .cloned()
                .unwrap_or(Value::Null);
            let text = String::from_utf8(crate::snapshot::canonical::canonical_bytes(&sc))
                .unwrap_or_default();
            result = json!({"content": [{"type": "text", "text": text}], "structuredContent": sc});
            changed = true;
        }
        let ctx = self.label_context(tool, arguments, false);
        let unchanged = (!changed).then(|| raw.get());
        if !self.label_result(id, tool, &ctx, unchanged, &mut result, &mut changed, out) {
            return;
        }
        self.send_result(id, result, changed, line, out);
    }

    /// What the labeller knows about a call's result: the reviewed catalogue's tool names (a
    /// result that orders a call of another of them is a structural signal), the tool that
    /// answered, the call's argument values, whether it is error text. Empty when results are
    /// not labelled.
    fn label_context(&self, tool: &str, arguments: &[String], error: bool) -> LabelContext {
        if !self.config.content.scans_injection() {
            return LabelContext::default();
        }
        self.catalogue
            .clone()
            .answering(tool)
            .arguments(arguments)
            .error(error)
    }

    /// The result as it goes to the host: serialized again only when something changed.
    fn send_result(&self, id: &Id, result: Value, changed: bool, line: Bytes, out: &mut Vec<Out>) {
        if changed {
            respond(out, id, result);
        } else {
            out.push(Out::Host(line));
        }
    }

    /// Secret-shaped values were found (and redacted in place) in a result: audited by kind,
    /// pointer and digest. Returns whether the redacted result goes on; with
    /// `secrets.results = "refuse"` the call is answered with a refusal instead.
    fn secrets_in_result(
        &mut self,
        id: &Id,
        tool: &str,
        found: &[Detection],
        out: &mut Vec<Out>,
    ) -> bool {
        let listed = describe_all(found);
        let refuse = self.config.content.secret_results == SecretInResults::Refuse;
        self.audit(out, || AuditNote {
            tool: Some(tool.to_string()),
            outcome: Some(if refuse { "refused" } else { "redacted" }),
            detail: Some(format!("secret-shaped values in the result: {listed}")),
            ..AuditNote::new(EventKind::SecretDetected)
        });
        if refuse {
            let r = Refusal::new(
                code::SECRET_IN_RESULT,
                Category::Policy,
                format!("the result of {tool:?} was withheld: it carries secret-shaped values ({listed}), and the policy refuses such results (secrets.results = \"refuse\"); set secrets.results = \"redact\" to pass them with each value replaced by a marker"),
            );
            self.refuse_call(id, tool, r, out);
            return false;
        }
        out.push(Out::Diag(
            Level::Warn,
            format!("call {id} of {tool:?}: redacted secret-shaped values in the result before the host saw them: {listed} (secrets.results = \"redact\")"),
        ));
        true
    }

    /// Labels instruction-like text in a result (`[results]`): with `label`, a note is appended
    /// as a last text block and in `_meta`, with `refuse` the call is answered with a refusal.
    /// Returns whether the result goes on.
    /// `raw` is the server's JSON text of the result when `result` is still exactly that (no
    /// redaction, no cleaning): a raw text that cannot carry a counted label is not walked.
    #[allow(clippy::too_many_arguments)]
    fn label_result(
        &mut self,
        id: &Id,
        tool: &str,
        ctx: &LabelContext,
        raw: Option<&str>,
        result: &mut Value,
        changed: &mut bool,
        out: &mut Vec<Out>,
    ) -> bool {
        let content = self.config.content.clone();
        if !content.scans_injection() {
            return true;
        }
        if raw.is_some_and(|raw| !content.result_may_have_labels(raw, ctx)) {
            return true;
        }
        let found = content.label_result_in(result, ctx);
        if found.is_empty() {
            return true;
        }
        let labels = label_names(&found).join(", ");
        let pointers: Vec<&str> = found.iter().map(|f| f.pointer.as_str()).collect();
        let refuse = content.injection == Injection::Refuse;
        self.audit(out, || AuditNote {
            tool: Some(tool.to_string()),
            outcome: Some(if refuse { "refused" } else { "labelled" }),
            detail: Some(format!(
                "instruction-like text in the result: {labels} at {}",
                pointers.join(", ")
            )),
            ..AuditNote::new(EventKind::ResultLabelled)
        });
        if refuse {
            let r = Refusal::new(
                code::INJECTION_IN_RESULT,
                Category::Policy,
                format!("the result of {tool:?} was withheld: it carries instruction-like text ({labels} at {}), and the policy refuses such results (results.injection = \"refuse\"); set results.injection = \"label\" to pass it with a warning note, or narrow results.labels", pointers.join(", ")),
            );
            self.refuse_call(id, tool, r, out);
            return false;
        }
        out.push(Out::Diag(
            Level::Warn,
            format!("call {id} of {tool:?}: the result carries instruction-like text ({labels} at {}); passed with a note (results.injection = \"label\")", pointers.join(", ")),
        ));
        let places = places(result, "", &found, content.counted(), ctx);
        append_label_note(result, &found, &places);
        *changed = true;
        true
    }

    /// A JSON-RPC error from the server: secret-shaped values redacted (or the error withheld),
    /// instruction-like text labelled (or withheld), the text sanitized; with
    /// `errors.text = "redacted"` a fixed message and the raw text for the audit log only.
    fn error_response(
        &mut self,
        id: &Id,
        tool: &str,
        arguments: &[String],
        msg: &Message<'_>,
        line: Bytes,
        out: &mut Vec<Out>,
    ) {
        let err: Value = msg
            .error
            .and_then(|e| serde_json::from_str(e.get()).ok())
            .unwrap_or(Value::Null);
        let original = err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let code = err.get("code").cloned().unwrap_or(json!(-32603));
        let content = self.config.content.clone();
        let mut text = original.to_string();
        let mut withheld: Option<String> = None;
        let mut cleaned = false;
        if let Some((redacted, found)) = content.redact_text("/error/message", original) {
            let listed = describe_all(&found);
            let refuse = content.secret_results == SecretInResults::Refuse;
            self.audit(out, || AuditNote {
                tool: Some(tool.to_string()),
                outcome: Some(if refuse { "refused" } else { "redacted" }),
                detail: Some(format!("secret-shaped values in the error text: {listed}")),
                ..AuditNote::new(EventKind::SecretDetected)
            });
            out.push(Out::Diag(
                Level::Warn,
                format!("call {id} of {tool:?}: secret-shaped values in the server's error text: {listed}"),
            ));
            if refuse {
                withheld = Some(format!(
                    "it carried secret-shaped values ({listed}; secrets.results = \"refuse\")"
                ));
            }
            text = redacted;
        }
        if self.config.redact_errors {
            // The audit log keeps the server's text, with secrets already redacted.
            self.audit_raw_error(tool, &text, out);
            let v = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "error": {
                "code": code,
                "message": format!("mcpguard: {tool:?} failed; the server's error text is withheld by policy (errors.text = \"redacted\") [{}]", code::UPSTREAM_ERROR)
            }});
            out.push(Out::Host(Bytes::from(
                serde_json::to_vec(&v).unwrap_or_default(),
            )));
            return;
        }
        if withheld.is_none() && content.scans_injection() {
            // Labelled as the host will see it: sanitized, so hidden characters are already
            // visible and not labelled again.
            let ctx = self.label_context(tool, arguments, true);
            let clean = refusal::clean_error_text(&text);
            let found = content.label_text_in("/error/message", &clean, &ctx);
            if !found.is_empty() {
                let labels = label_names(&found).join(", ");
                let refuse = content.injection == Injection::Refuse;
                self.audit(out, || AuditNote {
                    tool: Some(tool.to_string()),
                    outcome: Some(if refuse { "refused" } else { "labelled" }),
                    detail: Some(format!(
                        "instruction-like text in the error text: {labels} at /error/message"
                    )),
                    ..AuditNote::new(EventKind::ResultLabelled)
                });
                out.push(Out::Diag(
                    Level::Warn,
                    format!("call {id} of {tool:?}: the server's error text carries instruction-like text ({labels})"),
                ));
                if refuse {
                    withheld = Some(format!("it carried instruction-like text ({labels}; results.injection = \"refuse\")"));
                } else {
                    let at = places(
                        &Value::String(clean.clone()),
                        "/error/message",
                        &found,
                        content.counted(),
                        &ctx,
                    );
                    text = format!("{clean}\n\n{}", tool_note(&labels, &at));
                    // Cleaned and cut already: cutting again would cut the note away.
                    cleaned = true;
                }
            }
        }
        if let Some(why) = withheld {
            let v = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "error": {
                "code": code,
                "message": format!("mcpguard: {tool:?} failed, and the server's error text was withheld: {why} [{}]", code::UPSTREAM_ERROR)
            }});
            out.push(Out::Host(Bytes::from(
                serde_json::to_vec(&v).unwrap_or_default(),
            )));
            return;
        }
        if text == original {
            return out.push(Out::Host(sanitized_error(id, msg).unwrap_or(line)));
        }
        let message = if cleaned {
            text
        } else {
            refusal::clean_error_text(&text)
        };
        let v = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "error": {"code": code, "message": message}});
        out.push(Out::Host(Bytes::from(
            serde_json::to_vec(&v).unwrap_or_default(),
        )));
    }

    /// The answer to a `prompts/*` or `resources/*` request: prompt messages, resource
    /// contents, descriptions and names are text the host gives the model or the person, so they
    /// get the checks a call's result gets (every string and member name, and an error's message
    /// and data). Withheld, the host gets -31004 naming why and the key that changes it.
    pub(super) fn server_part_response(
        &mut self,
        id: &Id,
        method: &str,
        msg: &Message<'_>,
        line: Bytes,
        out: &mut Vec<Out>,
    ) {
        let (member, raw) = match (msg.result, msg.error) {
            (Some(r), _) => ("result", r),
            (None, Some(e)) => ("error", e),
            (None, None) => return out.push(Out::Host(line)),
        };
        let content = self.config.content.clone();
        if !content.scans_injection() && !content.result_may_hold_secrets(raw.get()) {
            return out.push(Out::Host(line));
        }
        let mut v = match strict::parse_strict_str(raw.get()) {
            Ok(v) => v,
            Err(e) => {
                let why = format!("the server's answer to {method} is not acceptable: {e}");
                return self.upstream_failure(
                    Some(id.clone()),
                    codes::BAD_UPSTREAM_RESPONSE,
                    &why,
                    out,
                );
            }
        };
        let what = format!("the {member} of {method} (request {id})");
        match self.check_server_part(
            &what,
            raw.get(),
            &mut v,
            &format!("/{member}"),
            Members::ALL,
            out,
        ) {
            Checked::Unchanged => out.push(Out::Host(line)),
            Checked::Changed => {
                let mut m = json!({"jsonrpc": "2.0", "id": id.to_json_value()});
                m[member] = v;
                out.push(Out::Host(Bytes::from(
                    serde_json::to_vec(&m).unwrap_or_default(),
                )));
            }
            Checked::Withheld(_, why) => {
                let what = format!("withheld {what}: {why}");
                refuse_to_host(Some(id), codes::BAD_UPSTREAM_RESPONSE, &what, out);
            }
        }
    }

    /// A server request that reaches the host (`sampling/createMessage`, `elicitation/create`,
    /// when the policy passes them): its messages, system prompt, question and form titles and
    /// descriptions are text the host gives its model or shows the person, so they get the
    /// checks of a result. Returns the line to relay (the server's bytes when nothing changed),
    /// or why it is withheld, with the key that changes it (the server then gets an error).
    pub(super) fn server_request_text(
        &mut self,
        id: &Id,
        method: &str,
        msg: &Message<'_>,
        line: Bytes,
        out: &mut Vec<Out>,
    ) -> Result<Bytes, String> {
        let Some(raw) = msg.params else {
            return Ok(line);
        };
        let content = self.config.content.clone();
        if !content.scans_injection() && !content.result_may_hold_secrets(raw.get()) {
            return Ok(line);
        }
        let mut v = strict::parse_strict_str(raw.get())
            .map_err(|e| format!("its params are not acceptable JSON: {e}"))?;
        let what = format!("the server's {method} request (id {id})");
        match self.check_server_part(&what, raw.get(), &mut v, "/params", Members::ALL, out) {
            Checked::Unchanged => Ok(line),
            Checked::Changed => {
                let m = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "method": method, "params": v});
                Ok(Bytes::from(serde_json::to_vec(&m).unwrap_or_default()))
            }
            Checked::Withheld(_, why) => Err(format!("withheld {what}: {why}")),
        }
    }

    /// A progress notification for a call in flight: its `message` (and every other string and
    /// name in its params but the host's own `progressToken`) gets the checks of a result.
    /// Withheld, it is dropped with a warning: the call's result still comes.
    pub(super) fn server_progress(&mut self, msg: &Message<'_>, line: Bytes, out: &mut Vec<Out>) {
        let Some(raw) = msg.params else {
            return out.push(Out::Host(line));
        };
        let content = self.config.content.clone();
        if !content.scans_injection() && !content.result_may_hold_secrets(raw.get()) {
            return out.push(Out::Host(line));
        }
        // The params were parsed strictly for the token already; a failure here cannot pass
        // unchecked text.
        let Ok(mut v) = strict::parse_strict_str(raw.get()) else {
            return out.push(Out::Diag(
                Level::Warn,
                "dropped a progress notification whose params are not acceptable JSON".into(),
            ));
        };
        let what = "a progress notification";
        let checked = self.check_server_part(
            what,
            raw.get(),
            &mut v,
            "/params",
            Members {
                keep: &["progressToken"],
                prose: &[],
            },
            out,
        );
        forward_notification(checked, methods::PROGRESS, v, line, what, out);
    }

    /// The content checks of a part `v` of a server message that is not a call's result (`raw`
    /// is its JSON text, for the quick test; `what` names it on stderr and in the audit log;
    /// `prefix` as in `Content::redact_in`, `members` says which top-level members are left
    /// alone and which are prose). Secrets are redacted in place (or the
    /// part withheld with `secrets.results = "refuse"`); instruction-like text is labelled (or
    /// the part withheld with `results.injection = "refuse"`): the note is appended to each
    /// labelled text member (`text`, `description`, `message`, `title`, and the part's own
    /// prose members) and the labels and
    /// pointers are recorded in the part's `_meta["dev.mcpguard/labels"]`, so the shape of the
    /// part does not change. Shared with the log notifications' checks.
    pub(super) fn check_server_part(
        &mut self,
        what: &str,
        raw: &str,
        v: &mut Value,
        prefix: &str,
        members: Members<'_>,
        out: &mut Vec<Out>,
    ) -> Checked {
        let content = self.config.content.clone();
        let mut changed = false;
        if content.result_may_hold_secrets(raw) {
            let found = content.redact_in(v, prefix, members.keep);
            if !found.is_empty() {
                let listed = describe_all(&found);
                let refuse = content.secret_results == SecretInResults::Refuse;
                self.audit(out, || AuditNote {
                    outcome: Some(if refuse { "refused" } else { "redacted" }),
                    detail: Some(format!("secret-shaped values in {what}: {listed}")),
                    ..AuditNote::new(EventKind::SecretDetected)
                });
                if refuse {
                    return Checked::Withheld(code::SECRET_IN_RESULT, format!("it carried secret-shaped values ({listed}), and the policy refuses such text (secrets.results = \"refuse\"); set secrets.results = \"redact\" to pass it with each value replaced by a marker"));
                }
                out.push(Out::Diag(
                    Level::Warn,
                    format!("redacted secret-shaped values in {what} before the host saw them: {listed} (secrets.results = \"redact\")"),
                ));
                changed = true;
            }
        }
        if content.scans_injection() {
            let found = content.label_in(v, prefix, members.keep);
            if !found.is_empty() {
                let labels = label_names(&found).join(", ");
                let pointers: Vec<&str> = found.iter().map(|f| f.pointer.as_str()).collect();
                let refuse = content.injection == Injection::Refuse;
                self.audit(out, || AuditNote {
                    outcome: Some(if refuse { "refused" } else { "labelled" }),
                    detail: Some(format!(
                        "instruction-like text in {what}: {labels} at {}",
                        pointers.join(", ")
                    )),
                    ..AuditNote::new(EventKind::ResultLabelled)
                });
                if refuse {
                    return Checked::Withheld(code::INJECTION_IN_RESULT, format!("it carried instruction-like text ({labels} at {}), and the policy refuses such text (results.injection = \"refuse\"); set results.injection = \"label\" to pass it with a warning note, or narrow results.labels", pointers.join(", ")));
                }
                out.push(Out::Diag(
                    Level::Warn,
                    format!("{what} carries instruction-like text ({labels} at {}); passed with a note (results.injection = \"label\")", pointers.join(", ")),
                ));
                note_labels_in_place(v, prefix, members.prose, &found);
                changed = true;
            }
        }
        if changed {
            Checked::Changed
        } else {
            Checked::Unchanged
        }
    }

    /// A server log message (`notifications/message`). With `[capabilities] logging = false` it
    /// is dropped (the first one audited). Otherwise its params (`logger`, every string and
    /// member name of `data`) get the checks of every other server part (`check_server_part`):
    /// secret-shaped values redacted (or the message dropped with `secrets.results =
    /// "refuse"`), instruction-like text labelled (or the message dropped with
    /// `results.injection = "refuse"`). A message none of this changes is forwarded as the
    /// server's bytes.
    pub(super) fn log_message(&mut self, msg: &Message<'_>, line: Bytes, out: &mut Vec<Out>) {
        if !self.config.capabilities.logging {
            self.logs_dropped += 1;
            if self.logs_dropped == 1 {
                let why = "dropped the server's log messages (notifications/message): the policy turns server logging off ([capabilities] logging = false); only this first one is recorded";
                self.audit(out, || AuditNote {
                    detail: Some(why.to_string()),
                    outcome: Some("refused"),
                    ..AuditNote::new(EventKind::CapabilityBlocked)
                });
                out.push(Out::Diag(Level::Info, why.to_string()));
            }
            return;
        }
        let content = self.config.content.clone();
        let raw = msg.params.map(|p| p.get()).unwrap_or("null");
        if !content.scans_injection() && !content.result_may_hold_secrets(raw) {
            return out.push(Out::Host(line));
        }
        let Ok(mut params) = strict::parse_strict_str(raw) else {
            return out.push(Out::Diag(
                Level::Warn,
                "dropped a server log message whose params are not strict JSON".into(),
            ));
        };
        let what = "a server log message";
        let checked = self.check_server_part(
            what,
            raw,
            &mut params,
            "/params",
            Members {
                keep: &["level"],
                prose: &["data"],
            },
            out,
        );
        forward_notification(checked, methods::MESSAGE, params, line, what, out);
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

/// Every detection, described (`kind at pointer (sha256 …)`), joined.
fn describe_all(found: &[Detection]) -> String {
    found
        .iter()
        .map(Detection::describe)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The text blocks of an error result, one per line: what the audit log keeps of a withheld
/// error and what the process driver reads for the sandbox's explanation.
fn error_text(result: &Value) -> String {
    let blocks: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| {
            c.iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    blocks.join("\n")
}

/// Forwards a server notification after its checks: unchanged, as the server's bytes; changed
/// (redacted or labelled), rebuilt from the checked `params`; withheld, dropped with a warning
/// naming `what` (a notification has no answer to refuse, and the call it concerns still ends).
fn forward_notification(
    checked: Checked,
    method: &str,
    params: Value,
    line: Bytes,
    what: &str,
    out: &mut Vec<Out>,
) {
    match checked {
        Checked::Unchanged => out.push(Out::Host(line)),
        Checked::Changed => {
            let m = json!({"jsonrpc": "2.0", "method": method, "params": params});
            out.push(Out::Host(Bytes::from(
                serde_json::to_vec(&m).unwrap_or_default(),
            )));
        }
        Checked::Withheld(_, why) => {
            out.push(Out::Diag(Level::Warn, format!("dropped {what}: {why}")))
        }
    }
}

/// What the content checks decided about a part of a server message.
pub(super) enum Checked {
    /// Nothing found: the server's bytes go on.
    Unchanged,
    /// Redacted or labelled in place: the part is serialized again.
    Changed,
    /// The policy refuses what was found: the refusal code (`secret_in_result` or
    /// `injection_in_result`) and why, with the key that changes it.
    Withheld(&'static str, String),
}

/// The members whose text a label note is appended to, outside a call's result: the ones a
/// host shows or gives the model as prose. Other labelled strings (a `uri`, a `name`) and
/// labelled member names are only recorded in `_meta`, so no identifier is broken.
const NOTED_MEMBERS: [&str; 5] = ["text", "description", "message", "title", "systemPrompt"];

/// The top-level members of a server part that `check_server_part` treats apart: `keep` are
/// left as they are (a progress token, which the host chose and matches byte for byte; a log
/// level), `prose` are the part's own text besides [`NOTED_MEMBERS`] (a log message's `data`),
/// which gets the label note appended.
#[derive(Clone, Copy)]
pub(super) struct Members<'a> {
    pub keep: &'a [&'a str],
    pub prose: &'a [&'a str],
}

impl Members<'_> {
    /// Every member checked, none prose but [`NOTED_MEMBERS`].
    pub const ALL: Members<'static> = Members {
        keep: &[],
        prose: &[],
    };
}

/// Labels a part of a server message outside a call's result (see `check_server_part`).
fn note_labels_in_place(v: &mut Value, prefix: &str, prose: &[&str], found: &[Labelled]) {
    let labels = label_names(found);
    let note = label_note(
        "the text above came from the server",
        "data",
        &labels.join(", "),
        &[],
    );
    for f in found {
        let Some(local) = f.pointer.strip_prefix(prefix) else {
            continue;
        };
        let last = local.rsplit('/').next().unwrap_or_default();
        let own_prose = local.strip_prefix('/').is_some_and(|m| prose.contains(&m));
        if !NOTED_MEMBERS.contains(&last) && !own_prose {
            continue;
        }
        if let Some(Value::String(s)) = v.pointer_mut(local) {
            if !s.ends_with(&note) {
                s.push_str("\n\n");
                s.push_str(&note);
            }
        }
    }
    if let Some(obj) = v.as_object_mut() {
        record_labels(obj, &labels, found, None);
    }
}

/// The note added to a labelled result or error text ([`label_note`], for a tool's text).
fn tool_note(labels: &str, places: &[String]) -> String {
    label_note(
        "the text above came from the tool",
        "data returned by the tool",
        labels,
        places,
    )
}

/// Appends the label note as a last text block and records the labels, their pointers and
/// places in `_meta["dev.mcpguard/labels"]` for programs.
fn append_label_note(result: &mut Value, found: &[Labelled], places: &[String]) {
    let labels = label_names(found);
    let note = tool_note(&labels.join(", "), places);
    if let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) {
        content.push(json!({"type": "text", "text": note}));
    } else if let Some(obj) = result.as_object_mut() {
        obj.insert("content".into(), json!([{"type": "text", "text": note}]));
    }
    if let Some(obj) = result.as_object_mut() {
        record_labels(obj, &labels, found, Some(places));
    }
}

/// Whether a result meets the reviewed `outputSchema` of `tool`: `structuredContent` present and
/// valid. The reason names the failing keywords, never a value.
fn output_verdict(pin: &Pin, tool: &str, result: &Value) -> Result<(), String> {
    let schema = pin.tool(tool).and_then(|t| t.output.as_ref());
    match (result.get("structuredContent"), schema) {
        (None, _) => Err("the result has no structuredContent although the reviewed tool declares an outputSchema".to_string()),
        (Some(sc), Some(schema)) => schema.validate(sc).map_err(|v| {
            format!(
                "structuredContent does not match the reviewed outputSchema: {}",
                crate::gate::schema::summary(&v)
            )
        }),
        (Some(_), None) => Ok(()),
    }
}
