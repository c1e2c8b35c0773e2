//! Call admission: a `tools/call` checked statically (reviewed name, valid arguments, capability,
//! in-flight and serial limits), classified by the policy, held for a fresh walk, then dispatched
//! as its original bytes (or the dry-run envelope); refusals in the error contract; per-call
//! timeouts on `tick`.

use super::*;
use crate::gate::content::ArgumentProblem;

impl Session {
    pub(super) fn host_tools_call(
        &mut self,
        id: Id,
        msg: &Message<'_>,
        line: Bytes,
        out: &mut Vec<Out>,
    ) {
        let mut line = line;
        let Some(mut params) = object_params(&id, msg, methods::TOOLS_CALL, out) else {
            return;
        };
        let Some(name) = params
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            refuse_to_host(
                Some(&id),
                message::INVALID_PARAMS,
                "refused tools/call: params.name must be a string",
                out,
            );
            return;
        };
        let in_flight = self
            .host_requests
            .values()
            .filter(|p| matches!(p.kind, PendingKind::Call(_)))
            .count()
            + self
                .held
                .iter()
                .filter(|h| matches!(h.what, HeldWhat::Call(_)))
                .count()
            + self.serial_queue.len()
            + self.confirming.len();
        if in_flight >= self.config.max_calls_in_flight {
            let mut r = Refusal::new(
                code::TOO_MANY_CALLS,
                Category::Policy,
                format!(
                    "refused {name:?}: {in_flight} calls are already in flight, the limit is {} (policy limits.max_calls_in_flight); retry when one finishes",
                    self.config.max_calls_in_flight
                ),
            );
            r.retryable = true;
            self.refuse_call(&id, &name, r, out);
            return;
        }
        let progress = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .map(|t| t.to_string());
        if params.contains_key("task") && !self.config.capabilities.tasks {
            let r = Refusal::new(code::CAPABILITY_DENIED, Category::Policy, format!("refused a task-augmented call of {name:?}: tasks are excluded by policy; call the tool without params.task"));
            self.refuse_call(&id, &name, r, out);
            return;
        }
        let pin = match &self.config.mode {
            Mode::NoManifest => {
                let r = Refusal::new(
                    code::NOT_PINNED,
                    Category::Policy,
                    format!("refused {name:?}: mcpguard runs without a reviewed snapshot and serves no tools; capture and review one (`mcpguard capture`, `mcpguard review`) and start mcpguard with --manifest, --sha256 and --server"),
                );
                self.refuse_call(&id, &name, r, out);
                return;
            }
            Mode::Unpinned => {
                let args = params.get("arguments").cloned().unwrap_or(json!({}));
                if !self.arguments_pass(&id, &name, &args, out) {
                    return;
                }
                let line = minimal_call(&params, line, &self.config.policy.capabilities.pass_meta);
                self.admit(
                    id,
                    name,
                    Reviewed::NONE,
                    args,
                    line,
                    progress,
                    Mrtr::default(),
                    out,
                );
                return;
            }
            Mode::Pinned(pin) => pin.clone(),
        };
        let Some(tool) = pin.tool(&name) else {
            if let Some((_, why)) = pin.refused_reviews.iter().find(|(n, _)| *n == name) {
                let m =
                    format!("refused tools/call of {name:?}: its review is not accepted: {why}");
                refuse_to_host(Some(&id), message::INVALID_PARAMS, &m, out);
                return;
            }
            let why = if pin.refused_by_policy.contains(&name) {
                "the local policy refuses it (see review.refused_tools and writes.default in the policy)"
            } else if pin.unreviewed.contains(&name) {
                "it is in the snapshot but was not reviewed; review it with `mcpguard review` and pin the new digest"
            } else {
                "it is not in the reviewed snapshot; capture and review the server again if it should be"
            };
            let m = format!("refused tools/call of unknown tool {name:?}: {why}");
            refuse_to_host(Some(&id), message::INVALID_PARAMS, &m, out);
            return;
        };
        if let Some(why) = &self.invalidated {
            let r = Refusal::new(code::REVIEW_INVALIDATED, Category::Drift, format!("refused {name:?}: {why}; capture and review the server again, then restart mcpguard"));
            self.refuse_call(&id, &name, r, out);
            return;
        }
        // The gate already knows this tool drifted from its review (the binding walk found it,
        // or a walk since did): nobody is asked about a call that would be refused after the
        // answer anyway.
        if let Some(d) = self
            .live
            .as_ref()
            .and_then(|l| l.drift(&pin.server_key, tool))
        {
            // As when a walk finds it at dispatch: a call of a drifted tool ends the review.
            self.invalidate(
                &format!("the live server changed a reviewed tool ({d})"),
                out,
            );
            let r = Refusal::new(code::TOOL_DRIFT, Category::Drift, format!("refused {name:?}: {d}; the live server no longer serves the reviewed tool, so the call is refused without asking anyone. Capture and review the server again, then restart mcpguard"));
            self.refuse_call(&id, &name, r, out);
            return;
        }
        if tool.requires_task && !self.config.capabilities.tasks {
            let r = Refusal::new(code::CAPABILITY_DENIED, Category::Policy, format!("refused {name:?}: the tool requires task-augmented execution, which is excluded by policy"));
            self.refuse_call(&id, &name, r, out);
            return;
        }
        let args = params
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| json!({}));
        if !args.is_object() {
            let r = Refusal::new(
                code::INVALID_ARGUMENTS,
                Category::Input,
                format!("refused {name:?}: arguments must be an object"),
            );
            self.refuse_call(&id, &name, r, out);
            return;
        }
        if let Some(schema) = &tool.input {
            if let Err(violations) = schema.validate(&args) {
                let r = Refusal::new(
                    code::INVALID_ARGUMENTS,
                    Category::Input,
                    format!(
                        "refused {name:?}: the arguments do not match the reviewed inputSchema: {}",
                        crate::gate::schema::summary(&violations)
                    ),
                );
                self.refuse_call(&id, &name, r, out);
                return;
            }
            if self.config.policy.arguments.closed_for(&name) {
                let undeclared = schema.undeclared(&args);
                if !undeclared.is_empty() {
                    let r = Refusal::new(
                        code::UNDECLARED_ARGUMENT,
                        Category::Input,
                        undeclared_message(&name, &undeclared),
                    );
                    self.refuse_call(&id, &name, r, out);
                    return;
                }
            }
        }
        if !self.arguments_pass(&id, &name, &args, out) {
            return;
        }
        let reviewed = tool.reviewed();
        let mrtr = self.take_own_approval(&mut params, &id, &mut line);
        let line = self.forwardable_call(&params, line);
        self.admit(id, name, reviewed, args, line, progress, mrtr, out);
    }

    /// The value checks of the policy on a call's arguments (`gate::content`): argument rules,
    /// URLs to metadata addresses, secret-shaped values. Refuses the call and returns false
    /// when one fails; the refusal names pointers, rules and kinds, never a value.
    fn arguments_pass(&mut self, id: &Id, name: &str, args: &Value, out: &mut Vec<Out>) -> bool {
        let Some(problem) = self.config.content.check_arguments(name, args) else {
            return true;
        };
        let r = match problem {
            ArgumentProblem::Secrets(found) => {
                let listed: Vec<String> = found.iter().map(|d| d.describe()).collect();
                let pointers: Vec<&str> = found.iter().map(|d| d.pointer.as_str()).collect();
                Refusal::new(
                    code::SECRET_IN_ARGUMENTS,
                    Category::Policy,
                    format!(
                        "refused {name:?}: the arguments carry secret-shaped values ({}), which mcpguard does not send to the server. If the tool is meant to receive this credential, allow the argument in the policy ([secrets.tools.{name}] allow_arguments = [{}]), or set secrets.arguments = \"off\"",
                        listed.join(", "),
                        pointers.iter().map(|p| format!("{p:?}")).collect::<Vec<_>>().join(", ")
                    ),
                )
            }
            ArgumentProblem::Rule { pointer, rule, broken } => Refusal::new(
                code::ARGUMENT_RULE,
                Category::Policy,
                format!(
                    "refused {name:?}: argument {pointer} breaks the local rule {key} of [arguments.tools.{name}.rules.{rule:?}]: {why}. Call the tool with a value the rule allows, or change that rule in the policy",
                    key = broken.key,
                    why = broken.why,
                ),
            ),
            ArgumentProblem::MetadataUrl { pointer, kind } => Refusal::new(
                code::ARGUMENT_RULE,
                Category::Policy,
                format!(
                    "refused {name:?}: argument {} names a URL whose host is {kind}, where cloud machines serve their credentials; mcpguard refuses such URLs for every tool (arguments.refuse_metadata_urls = true in the policy turns this off)",
                    if pointer.is_empty() { "at the top level" } else { pointer.as_str() }
                ),
            ),
        };
        self.refuse_call(id, name, r, out);
        false
    }

    /// The policy's decision on a call that passed the static checks: forward it (after the
    /// live re-verification when pinned), refuse it, or ask the person first.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn admit(
        &mut self,
        id: Id,
        tool: String,
        reviewed: Reviewed,
        arguments: Value,
        line: Bytes,
        progress: Option<String>,
        mrtr: Mrtr,
        out: &mut Vec<Out>,
    ) {
        let mut class = self.config.policy.classify(&tool, reviewed);
        let asked = self.config.content.asked_argument(&arguments);
        if let Some(a) = &asked {
            class = self
                .config
                .policy
                .confirm_argument(&tool, class, a.kind.basis());
            let (does, key) = a.kind.words();
            // What it is in words and the pointer only: the value is the call's, not the log's.
            out.push(Out::Diag(
                Level::Warn,
                format!(
                    "call {id} of {tool:?}: argument {} {does} ({}); it needs the person's confirmation ({key} = false in the policy turns this off)",
                    if a.pointer.is_empty() { "at the top level" } else { a.pointer.as_str() },
                    a.what,
                ),
            ));
        }
        let mut call = Call {
            id,
            tool,
            line,
            progress,
            approval: Approval::NotNeeded,
            authority: reviewed.authority,
            asked: asked.as_ref().map(|a| a.kind),
        };
        // What a person approves must be what the server receives, to the digit.
        if matches!(class.decision, Decision::Confirm) && !self.arguments_exact(&call, out) {
            return;
        }
        match class.decision {
            Decision::Forward => self.proceed(call, out),
            Decision::ForwardUnconfirmed => {
                out.push(Out::Diag(
                    Level::Info,
                    format!(
                        "call {} of {:?} is a write forwarded without confirmation (confirmation.mode = \"allow\")",
                        call.id, call.tool
                    ),
                ));
                call.approval = Approval::Unconfirmed;
                self.proceed(call, out);
            }
            Decision::Confirm if self.standing_covers(&mut call, &arguments, out) => {
                self.proceed(call, out)
            }
            Decision::Refuse(reason) => {
                let code = if class.needs_confirmation {
                    code::APPROVAL_REQUIRED
                } else {
                    code::CAPABILITY_DENIED
                };
                let r = Refusal::new(code, Category::Authorization, format!("refused: {reason}"));
                self.refuse_call(&call.id, &call.tool, r, out);
            }
            Decision::Confirm if self.config.era == Era::Modern => {
                self.confirm_modern(call, &class, arguments, mrtr, out)
            }
            Decision::Confirm => self.ask_person(call, &class, arguments, out),
        }
    }

    /// An allowed call goes to the live re-verification (pinned) or straight to dispatch.
    pub(super) fn proceed(&mut self, call: Call, out: &mut Vec<Out>) {
        if matches!(self.config.mode, Mode::Pinned(_)) {
            let needs = self.need_walk(out);
            self.held.push(Held {
                id: call.id.clone(),
                needs,
                what: HeldWhat::Call(call),
            });
        } else {
            self.dispatch_call(call, out);
        }
    }

    /// Whether the host may hold an outputSchema for this tool: known for pinned tools,
    /// unknown (so assumed) when tools are relayed unpinned.
    pub(super) fn may_have_output(&self, tool: &str) -> bool {
        match &self.config.mode {
            Mode::Pinned(pin) => pin.tool(tool).is_some_and(|t| t.output.is_some()),
            Mode::Unpinned => true,
            Mode::NoManifest => false,
        }
    }

    pub(super) fn audit(&self, out: &mut Vec<Out>, note: impl FnOnce() -> AuditNote) {
        if self.config.audit {
            out.push(Out::Audit(Box::new(note())));
        }
    }

    pub(super) fn refuse_call(&mut self, id: &Id, tool: &str, r: Refusal, out: &mut Vec<Out>) {
        self.refuse_call_with(id, tool, r, None, out);
    }

    /// [`Self::refuse_call`], recording `arguments` (their digest, by default) in the audit log.
    /// The record's event follows from the refusal: an unknown outcome, a person's denial
    /// (`consent_required`), or a refusal by mcpguard.
    pub(super) fn refuse_call_with(
        &mut self,
        id: &Id,
        tool: &str,
        r: Refusal,
        arguments: Option<Value>,
        out: &mut Vec<Out>,
    ) {
        let (kind, outcome) = if !r.outcome_known {
            (EventKind::CallIndeterminate, "indeterminate")
        } else if r.code == code::CONSENT_REQUIRED {
            (EventKind::CallDeniedByUser, "denied")
        } else {
            (EventKind::CallRefused, "refused")
        };
        self.audit(out, || AuditNote {
            tool: Some(tool.to_string()),
            arguments,
            code: Some(r.code),
            detail: Some(r.message.clone()),
            outcome: Some(outcome),
            ..AuditNote::new(kind)
        });
        out.push(Out::Diag(
            Level::Warn,
            format!("call {id} of {tool:?}: {}", r.message),
        ));
        let result = self.own_result(r.to_result(self.may_have_output(tool)));
        respond(out, id, result);
    }

    pub(super) fn dispatch_call(&mut self, call: Call, out: &mut Vec<Out>) {
        if self.config.dry_run {
            return self.dry_run(call, out);
        }
        let serialize = match &self.config.mode {
            Mode::Pinned(pin) => pin.tool(&call.tool).is_some_and(|t| t.serialize),
            _ => false,
        };
        if serialize && !self.serial_busy.insert(call.tool.clone()) {
            self.serial_queue.push(call);
            return;
        }
        let Call {
            id,
            tool,
            line,
            progress,
            approval,
            ..
        } = call;
        if let Some(t) = &progress {
            self.progress_tokens.insert(t.clone());
        }
        let arguments = if self.config.content.scans_injection() {
            let mut values = Vec::new();
            if let Some(args) = call_arguments(&line) {
                string_values(&args, &mut values);
            }
            values
        } else {
            Vec::new()
        };
        self.audit(out, || AuditNote {
            tool: Some(tool.clone()),
            arguments: call_arguments(&line),
            outcome: Some("forwarded"),
            detail: match &approval {
                Approval::NotNeeded => None,
                Approval::Unconfirmed => Some(
                    "a write forwarded without confirmation (confirmation.mode = allow)".into(),
                ),
                Approval::Confirmed(binding) => {
                    Some(format!("approved by the person: approval {binding}"))
                }
            },
            ..AuditNote::new(EventKind::CallAllowed)
        });
        self.host_requests.insert(
            id,
            Pending {
                method: methods::TOOLS_CALL.into(),
                kind: PendingKind::Call(Box::new(Dispatched {
                    arguments,
                    tool,
                    progress,
                    indeterminate: false,
                    dispatched_ms: self.clock_ms,
                })),
            },
        );
        out.push(Out::Server(line));
    }

    /// `--dry-run`: the call passed every check (and confirmation) but is not dispatched; the
    /// host learns what would have been sent (SPEC §3.11, seed 004's dry-run envelope).
    pub(super) fn dry_run(&mut self, call: Call, out: &mut Vec<Out>) {
        let reviewed = match &self.config.mode {
            Mode::Pinned(pin) => pin
                .tool(&call.tool)
                .map_or(Reviewed::NONE, |t| t.reviewed()),
            _ => Reviewed::NONE,
        };
        let class = self.config.policy.classify(&call.tool, reviewed);
        let arguments = call_arguments(&call.line).unwrap_or_else(|| json!({}));
        let approval = match &call.approval {
            Approval::NotNeeded => "no confirmation needed".to_string(),
            Approval::Unconfirmed => {
                "forwarded without confirmation (confirmation.mode = allow)".to_string()
            }
            Approval::Confirmed(b) => format!(
                "approved by the person (approval {})",
                &b[..12.min(b.len())]
            ),
        };
        let kind = if class.is_write { "a write" } else { "a read" };
        let summary = format!(
            "dry run: {:?} ({kind}; {approval}) passed every check and would have been sent to the server; nothing was dispatched",
            call.tool
        );
        let structured = json!({
            "dryRun": true,
            "validatedInput": arguments,
            "operationPolicy": operation_policy(&class),
            "operationSummary": summary,
        });
        self.audit(out, || AuditNote {
            tool: Some(call.tool.clone()),
            arguments: Some(arguments.clone()),
            outcome: Some("dry-run"),
            detail: Some("--dry-run: not dispatched".into()),
            ..AuditNote::new(EventKind::CallAllowed)
        });
        out.push(Out::Diag(
            Level::Info,
            format!(
                "call {} of {:?}: dry run, not dispatched",
                call.id, call.tool
            ),
        ));
        let text = String::from_utf8(crate::snapshot::canonical::canonical_bytes(&structured))
            .unwrap_or_default();
        let result = self.own_result(json!({"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": false}));
        respond(out, &call.id, result);
    }

    /// A call of `tool` finished: the next queued call of a `serialize` tool may go.
    pub(super) fn release_serial(&mut self, tool: &str, out: &mut Vec<Out>) {
        if self.serial_busy.remove(tool) {
            if let Some(pos) = self.serial_queue.iter().position(|c| c.tool == tool) {
                let next = self.serial_queue.remove(pos);
                self.dispatch_call(next, out);
            }
        }
    }

    /// Advances the session clock (milliseconds since the start, from the driver) and gives up
    /// on calls that ran longer than the per-call timeout: the host gets an unknown-outcome
    /// error (the call may have had effects; it is never retried), the server a cancellation,
    /// and a late answer is dropped.
    pub fn tick(&mut self, now_ms: u64, out: &mut Vec<Out>) {
        self.clock_ms = self.clock_ms.max(now_ms);
        self.expire_confirmations(out);
        self.offer_unanswered(out);
        self.progress_while_asking(out);
        self.expire_walk(out);
        let timeout = self.config.call_timeout_ms;
        if timeout == 0 {
            return;
        }
        let mut expired: Vec<Id> = self
            .host_requests
            .iter()
            .filter(|(_, p)| matches!(&p.kind, PendingKind::Call(c) if now_ms.saturating_sub(c.dispatched_ms) >= timeout))
            .map(|(id, _)| id)
            .collect();
        expired.sort_by_cached_key(|id| id.to_string());
        for id in expired {
            let Some(p) = self.host_requests.remove(&id) else {
                continue;
            };
            let PendingKind::Call(call) = p.kind else {
                continue;
            };
            let Dispatched { tool, progress, .. } = *call;
            if let Some(t) = &progress {
                self.progress_tokens.remove(t);
            }
            self.abandoned.insert(id.clone());
            let cancel = json!({"jsonrpc": "2.0", "method": methods::CANCELLED, "params": {"requestId": id.to_json_value(), "reason": "mcpguard: the per-call timeout passed"}});
            out.push(Out::Server(Bytes::from(
                serde_json::to_vec(&cancel).unwrap_or_default(),
            )));
            let mut r = Refusal::new(
                code::UNKNOWN_DISPATCH_OUTCOME,
                Category::UnknownOutcome,
                format!("{tool:?} did not answer within the per-call timeout ({} s); its outcome is unknown. Do not retry automatically: check what the call did", timeout / 1000),
            );
            r.outcome_known = false;
            self.refuse_call(&id, &tool, r, out);
            self.release_serial(&tool, out);
        }
    }
}

/// The refusal text for members the reviewed `inputSchema` does not declare: their pointers
/// (never their values) and how to proceed.
fn undeclared_message(tool: &str, pointers: &[String]) -> String {
    let listed = pointers.join(", ");
    let what = match pointers.len() {
        1 => format!("an argument the reviewed inputSchema does not declare: {listed}"),
        n if n >= crate::gate::schema::MAX_VIOLATIONS => format!(
            "{n} or more arguments the reviewed inputSchema does not declare (the first {n}): {listed}"
        ),
        n => format!("{n} arguments the reviewed inputSchema does not declare: {listed}"),
    };
    format!(
        "refused {tool:?}: the call carries {what}. The reviewer never saw such arguments, so mcpguard does not pass the call to the server; call the tool with the declared arguments only, or, if the schema is known to be incomplete, set closed = false in [arguments.tools.{tool}] of the policy"
    )
}

/// The `arguments` of a `tools/call` line, parsed again off the message path.
fn call_arguments(line: &[u8]) -> Option<Value> {
    message::parse(line)
        .ok()
        .and_then(|m| {
            m.params
                .and_then(|p| serde_json::from_str::<Value>(p.get()).ok())
        })
        .and_then(|p| p.get("arguments").cloned())
}

/// The string values in `v`, at any depth (at most 64), for the labeller's context.
fn string_values(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if out.len() < 64 => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| string_values(x, out)),
        Value::Object(o) => o.values().for_each(|x| string_values(x, out)),
        _ => {}
    }
}

/// A `notifications/cancelled` for a request mcpguard sent to the host.
pub(super) fn cancel_notification(id: &Id, reason: &str) -> Bytes {
    let n = json!({"jsonrpc": "2.0", "method": methods::CANCELLED, "params": {"requestId": id.to_json_value(), "reason": reason}});
    Bytes::from(serde_json::to_vec(&n).unwrap_or_default())
}

/// Rebuilds a `tools/call` with only what the server may get: the name, the arguments, the
/// progress token and the `_meta` keys the policy passes (`capabilities.pass_meta`) (seed 001:
/// the server is not a peer). The original bytes are kept when they already carry nothing else.
pub(super) fn minimal_call(
    params: &Map<String, Value>,
    line: Bytes,
    pass_meta: &[String],
) -> Bytes {
    let passes = |k: &str| k == "progressToken" || pass_meta.iter().any(|p| p == k);
    let meta_ok = params
        .get("_meta")
        .is_none_or(|m| m.as_object().is_some_and(|o| o.keys().all(|k| passes(k))));
    let keys_ok = params
        .keys()
        .all(|k| matches!(k.as_str(), "name" | "arguments" | "_meta"));
    if meta_ok && keys_ok {
        return line;
    }
    let Ok(msg) = message::parse(&line) else {
        return line;
    };
    let mut p = Map::new();
    for key in ["name", "arguments"] {
        if let Some(v) = params.get(key) {
            p.insert(key.into(), v.clone());
        }
    }
    if let Some(meta) = params.get("_meta").and_then(Value::as_object) {
        let kept: Map<String, Value> = meta
            .iter()
            .filter(|(k, _)| passes(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !kept.is_empty() {
            p.insert("_meta".into(), Value::Object(kept));
        }
    }
    let id = msg.id.map_or(Value::Null, |id| id.to_json_value());
    Bytes::from(
        serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": methods::TOOLS_CALL, "params": p}),
        )
        .unwrap_or_default(),
    )
}
