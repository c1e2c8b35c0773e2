//! The 2026-07-28 era's part of the session state machine.
//!
//! The pure decisions are in `crate::gate::modern`; this module applies them to the conversation.
//! It is a child of `session` so that it can use the session's state, and it is kept apart so
//! that the legacy state machine reads as before: `session` calls in here only from a few
//! marked hooks (host requests before the method dispatch, server responses before their
//! correlation, the answer to `tools/list`, the rebuilt `tools/call`, list-change notifications,
//! and mcpguard's own requests and their answers).
//!
//! What the hooks enforce: every host request carries the pinned version in its envelope
//! (otherwise `-32022`); `initialize` is refused the same way; `server/discover` is answered
//! from the snapshot after the live one was checked; every result that names the server must
//! name the pinned one; `input_required` results that ask for a blocked capability never reach
//! the host; a `requestState` comes back only for the tool it was issued for, once; host
//! `subscriptions/listen` streams are relayed, and mcpguard opens one of its own so that a tool
//! list change is noticed even when the host does not listen.
//!
//! Write confirmation goes through mcpguard's own `input_required` elicitation: the question's
//! `requestState` is an HMAC over its number and the call's approval binding, single-use, and
//! taken out of the retry before the server sees it.

use std::collections::HashSet;

use bytes::Bytes;
use serde_json::{json, Value};

use super::results::{Checked, Members};
use super::{
    approval_params, codes, host_answer, refuse_to_host, respond, AuditNote, Call, Confirming,
    Dispatched, Era, HostAnswer, Level, Mode, Out, Pending, PendingKind, Phase, Purpose, Session,
};
use crate::audit::event::EventKind;
use crate::gate::modern::{self, EnvelopeError, InputRequired};
use crate::gate::refusal::{code, Category, Refusal};
use crate::policy::Classification;
use crate::protocol::{self, methods};
use crate::snapshot::strict;
use crate::wire::message::{self, Id, Kind, Message};

/// Most `requestState` values relayed to the host and not yet returned. Older ones are
/// forgotten first; their retries are then refused.
const MAX_OUTSTANDING_STATES: usize = 256;

/// The modern era's part of the session state.
#[derive(Debug, Default)]
pub(super) struct ModernState {
    /// Host `server/discover` requests waiting for the live one.
    held_discover: Vec<Id>,
    /// mcpguard's own `server/discover` is in flight.
    discovering: bool,
    /// Streams the host opened (`subscriptions/listen` ids, as JSON text).
    host_streams: HashSet<String>,
    /// mcpguard's own listen stream (its request id as JSON text), once opened.
    own_stream: Option<String>,
    /// Each `requestState` relayed to the host with the tool it belongs to.
    states: Vec<(String, String)>,
    /// mcpguard's own confirmation questions not answered yet: number → when it was asked. The
    /// call each is about needs no keeping: the state's HMAC covers its approval binding.
    approvals: std::collections::HashMap<u64, u64>,
    next_approval: u64,
}

/// What a modern host's `tools/call` carries for mcpguard's own confirmation.
#[derive(Debug, Default)]
pub(super) struct Mrtr {
    /// The request's client capabilities include form elicitation.
    client_can_elicit: bool,
    /// mcpguard's own `requestState` and the host's answer to its question, on a retry.
    approval: Option<(String, Option<Value>)>,
}

impl Session {
    fn pinned_version(&self) -> &str {
        match &self.config.mode {
            Mode::Pinned(pin) => &pin.protocol_version,
            _ => protocol::MODERN_VERSIONS[0],
        }
    }

    /// Hook: a host request in the modern era, before the method dispatch. Returns true when
    /// the request was answered, refused or taken over here.
    pub(super) fn modern_host_request(
        &mut self,
        id: &Id,
        method: &str,
        msg: &Message<'_>,
        line: &Bytes,
        out: &mut Vec<Out>,
    ) -> bool {
        let params: Option<Value> = msg
            .params
            .and_then(|p| strict::parse_strict_str(p.get()).ok());
        let pinned = self.pinned_version().to_string();
        if method == methods::INITIALIZE {
            let requested = params
                .as_ref()
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str)
                .unwrap_or("?");
            let hint = if crate::protocol::LEGACY_VERSIONS.contains(&requested) {
                super::handshake::capture_hint(requested)
            } else {
                "capture and review the server again at your client's version (`mcpguard capture --protocol-version`)".to_string()
            };
            let why = format!("refused initialize: the host asked for protocol {requested}, but the reviewed snapshot pins {pinned}, which has no initialize handshake (use server/discover and the per-request envelope); {hint}");
            out.push(Out::Diag(Level::Warn, format!("{why} (request {id})")));
            out.push(Out::Host(modern::unsupported_version(
                Some(id),
                requested,
                &pinned,
                &why,
            )));
            return true;
        }
        if let Err(e) = modern::check_envelope(params.as_ref(), &pinned) {
            match e {
                EnvelopeError::Malformed(why) => refuse_to_host(
                    Some(id),
                    message::INVALID_PARAMS,
                    &format!("refused {method}: {why}"),
                    out,
                ),
                EnvelopeError::Version { requested } => {
                    let why = format!("refused {method} at protocol {requested}: the reviewed snapshot pins {pinned}");
                    out.push(Out::Diag(Level::Warn, format!("{why} (request {id})")));
                    out.push(Out::Host(modern::unsupported_version(
                        Some(id),
                        &requested,
                        &pinned,
                        &why,
                    )));
                }
            }
            return true;
        }
        self.open_own_stream(out);
        match method {
            methods::SERVER_DISCOVER => {
                self.modern.held_discover.push(id.clone());
                if !self.modern.discovering {
                    self.modern.discovering = true;
                    self.request_to_server(methods::SERVER_DISCOVER, None, Purpose::Discover, out);
                }
                true
            }
            methods::SUBSCRIPTIONS_LISTEN => {
                self.host_listen(id, params, line, out);
                true
            }
            methods::TOOLS_CALL => !self.request_state_is_ours(id, params.as_ref(), out),
            _ => false,
        }
    }

    /// mcpguard listens for tool list changes itself, so that a change invalidates the review
    /// even when the host never opens a stream. A server without streams answers with an
    /// error, which only means that no change can be announced.
    fn open_own_stream(&mut self, out: &mut Vec<Out>) {
        if self.modern.own_stream.is_some() || !matches!(self.config.mode, Mode::Pinned(_)) {
            return;
        }
        let id = self.request_to_server(
            methods::SUBSCRIPTIONS_LISTEN,
            Some(json!({"notifications": {"toolsListChanged": true}})),
            Purpose::Listen,
            out,
        );
        self.modern.own_stream = Some(id.to_json());
    }

    /// A host `subscriptions/listen`: relayed with only the notification types the policy
    /// passes; its id becomes a stream whose notifications reach the host.
    fn host_listen(&mut self, id: &Id, params: Option<Value>, line: &Bytes, out: &mut Vec<Out>) {
        let Some(mut params) = params.and_then(|p| match p {
            Value::Object(m) => Some(m),
            _ => None,
        }) else {
            refuse_to_host(
                Some(id),
                message::INVALID_PARAMS,
                "refused subscriptions/listen: params must be an object",
                out,
            );
            return;
        };
        let filter = params
            .get("notifications")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let (kept, removed) = modern::filter_listen(&filter, &self.config.capabilities);
        let line = if removed.is_empty() {
            line.clone()
        } else {
            out.push(Out::Diag(
                Level::Info,
                format!(
                    "the server does not see the host's subscription to {} (blocked by policy)",
                    removed.join(", ")
                ),
            ));
            params.insert("notifications".into(), Value::Object(kept));
            let v = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "method": methods::SUBSCRIPTIONS_LISTEN, "params": params});
            Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
        };
        self.modern.host_streams.insert(id.to_json());
        self.forward_request(
            id.clone(),
            methods::SUBSCRIPTIONS_LISTEN,
            PendingKind::Plain,
            line,
            out,
        );
    }

    /// A `tools/call` that carries a `requestState` is an MRTR retry. The state is
    /// attacker-controlled data (it travelled through the host): it is accepted only when the
    /// server issued it in this session for the same tool, and only once. Returns false (and
    /// refuses the call) otherwise.
    fn request_state_is_ours(
        &mut self,
        id: &Id,
        params: Option<&Value>,
        out: &mut Vec<Out>,
    ) -> bool {
        let Some(state) = params.and_then(|p| p.get("requestState")) else {
            return true;
        };
        // mcpguard's own confirmation state: checked (HMAC, binding, single use) when the
        // call is classified, and never forwarded.
        if state
            .as_str()
            .is_some_and(|s| s.starts_with(modern::APPROVAL_STATE_PREFIX))
        {
            return true;
        }
        let tool = params
            .and_then(|p| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let found = state.as_str().and_then(|s| {
            self.modern
                .states
                .iter()
                .position(|(t, st)| *t == tool && st == s)
        });
        match found {
            Some(i) => {
                self.modern.states.remove(i);
                true
            }
            None => {
                let r = Refusal::new(
                    code::INVALID_ARGUMENTS,
                    Category::Input,
                    format!("refused {tool:?}: its requestState was not issued by the server for this tool in this session (or was already used); call the tool again without it"),
                );
                self.refuse_call(id, &tool, r, out);
                false
            }
        }
    }

    /// Hook: takes mcpguard's own confirmation state (and the answer to its question) out of a
    /// modern `tools/call`, rebuilding the line so that the server never sees them, and notes
    /// whether the request's client capabilities allow asking.
    pub(super) fn take_own_approval(
        &self,
        params: &mut serde_json::Map<String, Value>,
        id: &Id,
        line: &mut Bytes,
    ) -> Mrtr {
        if self.config.era != Era::Modern {
            return Mrtr::default();
        }
        let client_can_elicit = params
            .get("_meta")
            .and_then(|m| m.get(protocol::CLIENT_CAPABILITIES_META))
            .and_then(|c| c.get("elicitation"))
            .and_then(Value::as_object)
            .is_some_and(|e| e.is_empty() || e.contains_key("form"));
        let ours = params
            .get("requestState")
            .and_then(Value::as_str)
            .is_some_and(|s| s.starts_with(modern::APPROVAL_STATE_PREFIX));
        let approval = if ours {
            let state = params
                .remove("requestState")
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let answer = params
                .remove("inputResponses")
                .and_then(|r| r.get(modern::APPROVAL_INPUT_KEY).cloned());
            let v = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "method": methods::TOOLS_CALL, "params": params});
            *line = Bytes::from(serde_json::to_vec(&v).unwrap_or_default());
            Some((state, answer))
        } else {
            None
        };
        Mrtr {
            client_can_elicit,
            approval,
        }
    }

    /// A write that needs confirmation from a modern host: the first call gets mcpguard's own
    /// `input_required` question (form elicitation, an HMAC-bound `requestState`); the retry
    /// carrying that state and an approval goes on, once, for exactly the same call.
    pub(super) fn confirm_modern(
        &mut self,
        call: Call,
        class: &Classification,
        arguments: Value,
        mrtr: Mrtr,
        out: &mut Vec<Out>,
    ) {
        let binding = self.binding_of(&call.tool, &arguments);
        let timeout_ms =
            u64::try_from(self.config.policy.confirmation.timeout.as_millis()).unwrap_or(u64::MAX);
        match mrtr.approval {
            Some((state, answer)) => {
                let question = self.question(&call, class, &arguments, &binding);
                let checked = self.check_approval(&state, &binding, timeout_ms);
                let asked_ms = checked.as_ref().map_or(self.clock_ms, |&t| t);
                let c = Confirming {
                    call,
                    binding,
                    arguments,
                    asked_ms,
                    host_asked: false,
                    offered: None,
                    question,
                    host_note: None,
                    scope: crate::policy::Scope::Once,
                    progress_ms: self.clock_ms,
                };
                let answer = match (checked, answer) {
                    (Err(why), _) => {
                        self.settle(c, Err(why), out);
                        return;
                    }
                    (Ok(_), None) => HostAnswer::Failed(
                        "the retry carries no answer to mcpguard's question".into(),
                    ),
                    (Ok(t), Some(a)) => host_answer(&a, self.clock_ms.saturating_sub(t)),
                };
                self.host_answered(c, answer, out);
            }
            None if mrtr.client_can_elicit && self.host_listed() => {
                let n = self.modern.next_approval;
                self.modern.next_approval += 1;
                if self.modern.approvals.len() >= MAX_OUTSTANDING_STATES {
                    // Forget the oldest question; its retry is then refused.
                    if let Some(&oldest) = self.modern.approvals.keys().min() {
                        self.modern.approvals.remove(&oldest);
                    }
                }
                self.modern.approvals.insert(n, self.clock_ms);
                let state = modern::approval_token(&self.config.secret, n, &binding);
                let question = self.question(&call, class, &arguments, &binding);
                let server_info = match &self.config.mode {
                    Mode::Pinned(pin) => pin.server_info.clone(),
                    _ => Value::Null,
                };
                out.push(Out::Diag(
                    Level::Info,
                    format!(
                        "call {} of {:?} is a write: asking the person through the host's input_required (approval {})",
                        call.id,
                        call.tool,
                        &binding[..12]
                    ),
                ));
                respond(
                    out,
                    &call.id,
                    json!({
                        "resultType": "input_required",
                        "inputRequests": {modern::APPROVAL_INPUT_KEY: {"method": methods::ELICITATION_CREATE, "params": approval_params(&question)}},
                        "requestState": state,
                        "_meta": {protocol::SERVER_INFO_META: server_info},
                    }),
                );
            }
            // The host's question would end this request, so the out-of-band channels hold the
            // call itself until a person answers there.
            None if self.out_of_band_ready() => {
                let question = self.question(&call, class, &arguments, &binding);
                let mut c = Confirming {
                    call,
                    binding,
                    arguments,
                    asked_ms: self.clock_ms,
                    host_asked: false,
                    offered: None,
                    question,
                    host_note: None,
                    scope: crate::policy::Scope::Once,
                    progress_ms: self.clock_ms,
                };
                self.offer(&mut c, out);
                let key = self.offer_key();
                self.confirming.insert(key, c);
            }
            None => {
                let why = if self.host_listed() {
                    "this request's client capabilities do not include form elicitation"
                } else {
                    "confirmation.channels does not list \"host\""
                };
                self.nobody_to_ask(call, class, why, out);
            }
        }
    }

    /// Checks mcpguard's own `requestState` on a retry: issued in this session and not used yet
    /// (it is used up now, whatever the outcome), its HMAC matching this very call, in time.
    fn check_approval(
        &mut self,
        state: &str,
        binding: &str,
        timeout_ms: u64,
    ) -> Result<u64, String> {
        let Some(n) = modern::approval_number(state) else {
            return Err("mcpguard's approval state is malformed".into());
        };
        let Some(asked_ms) = self.modern.approvals.remove(&n) else {
            return Err("the approval was already used, or was not issued in this session".into());
        };
        if modern::approval_token(&self.config.secret, n, binding) != state {
            return Err("the approval was given for another call (other tool or arguments)".into());
        }
        if self.clock_ms.saturating_sub(asked_ms) >= timeout_ms {
            return Err(format!("no answer within {} s", timeout_ms / 1000));
        }
        Ok(asked_ms)
    }

    /// Hook: the `tools/call` bytes that reach the server.
    pub(super) fn forwardable_call(
        &self,
        params: &serde_json::Map<String, Value>,
        line: Bytes,
    ) -> Bytes {
        match self.config.era {
            Era::Modern => modern::forwardable_call(
                params,
                line,
                &self.config.capabilities,
                &self.config.policy.capabilities.pass_meta,
            ),
            Era::Legacy => {
                super::minimal_call(params, line, &self.config.policy.capabilities.pass_meta)
            }
        }
    }

    /// Hook: the result of a `tools/list` answered from the snapshot.
    pub(super) fn list_result(&self, tools: Vec<Value>) -> Value {
        let mut result = json!({"tools": tools});
        if let Mode::Pinned(pin) = &self.config.mode {
            if let Some(m) = &pin.modern {
                modern::decorate_list(&mut result, &pin.server_info, m);
            }
        }
        result
    }

    /// Hook: a `tools/call` result mcpguard makes itself, completed for a modern host.
    pub(super) fn own_result(&self, mut result: Value) -> Value {
        if let Mode::Pinned(pin) = &self.config.mode {
            if pin.modern.is_some() {
                modern::decorate_result(&mut result, &pin.server_info);
            }
        }
        result
    }

    /// Hook: the params of a request mcpguard sends itself carry the envelope.
    pub(super) fn own_params(&self, params: Option<Value>) -> Option<Value> {
        match self.config.era {
            Era::Modern => Some(modern::stamp(params, self.pinned_version())),
            Era::Legacy => params,
        }
    }

    /// Hook: whether a server notification reaches the host. In the modern era, notifications
    /// that belong to a stream reach the host only when the host opened that stream; those of
    /// mcpguard's own stream (and of none) stop here.
    pub(super) fn notification_for_host(&self, msg: &Message<'_>) -> bool {
        if self.config.era == Era::Legacy {
            return true;
        }
        let head = msg
            .params
            .map(|p| modern::head(p.get()))
            .unwrap_or_default();
        head.subscription_id
            .is_some_and(|s| self.modern.host_streams.contains(&s.to_string()))
    }

    /// Hook: a server response in the modern era, before correlation. Checks the identity
    /// the result reports and takes over `input_required` results of calls. Returns true when
    /// the response was dealt with here.
    pub(super) fn modern_response(
        &mut self,
        id: &Id,
        msg: &Message<'_>,
        line: &Bytes,
        out: &mut Vec<Out>,
    ) -> bool {
        let Mode::Pinned(pin) = self.config.mode.clone() else {
            return false;
        };
        if msg.kind != Kind::Response {
            return false;
        }
        let head = msg
            .result
            .map(|r| modern::head(r.get()))
            .unwrap_or_default();
        if let Err(why) = modern::check_server_info(head.server_info.as_ref(), &pin.server_info) {
            self.identity_changed(id, &why, out);
            return true;
        }
        if head.result_type.as_deref() != Some("input_required") {
            return false;
        }
        let Some(Pending {
            kind: PendingKind::Call(call),
            ..
        }) = self.host_requests.get(id)
        else {
            return false;
        };
        // A call that ran while the review was invalidated is answered by the drift path.
        if call.indeterminate {
            return false;
        }
        let (tool, progress) = (call.tool.clone(), call.progress.clone());
        // The head above is a quick scan; the strict parse decides. A result it refuses
        // (duplicate members, a lone surrogate, a depth over the bound) or one whose strict
        // reading is not `input_required` after all is refused as the server's fault, never
        // relayed and never assumed away: the call gets an answer either way.
        let parsed = msg
            .result
            .map(|r| strict::parse_strict_str(r.get()).map_err(|e| e.to_string()))
            .unwrap_or_else(|| Err("it has no result".to_string()));
        self.host_requests.remove(id);
        if let Some(t) = &progress {
            self.progress_tokens.remove(t);
        }
        let verdict = match &parsed {
            Ok(result) => modern::classify_input_required(result, &self.config.capabilities),
            Err(_) => InputRequired::No,
        };
        match verdict {
            InputRequired::No => {
                let why = match parsed {
                    Err(e) => e,
                    Ok(_) => "its resultType is not \"input_required\" when read strictly".into(),
                };
                let r = Refusal::new(
                    code::UPSTREAM_ERROR,
                    Category::Upstream,
                    format!("the server's input_required result for {tool:?} is not acceptable: {why}. Nothing was relayed; the server must send well-formed JSON"),
                );
                self.refuse_call(id, &tool, r, out);
            }
            InputRequired::Allowed { request_state } => {
                // The questions reach the host and its model as text (a message, a system
                // prompt, a form's titles and descriptions), so they get the checks a result
                // gets; the opaque state and the result type are the server's and pass as sent.
                let raw = msg.result.map(|r| r.get()).unwrap_or("null");
                let mut v = parsed.unwrap_or(Value::Null);
                let content = self.config.content.clone();
                let checked = if content.scans_injection() || content.result_may_hold_secrets(raw) {
                    self.check_server_part(
                        &format!("the input_required result of {tool:?} (call {id})"),
                        raw,
                        &mut v,
                        "/result",
                        Members {
                            keep: &["resultType", "requestState"],
                            prose: &[],
                        },
                        out,
                    )
                } else {
                    Checked::Unchanged
                };
                let relayed = match checked {
                    Checked::Unchanged => line.clone(),
                    Checked::Changed => Bytes::from(
                        serde_json::to_vec(
                            &json!({"jsonrpc": "2.0", "id": id.to_json_value(), "result": v}),
                        )
                        .unwrap_or_default(),
                    ),
                    Checked::Withheld(c, why) => {
                        let r = Refusal::new(
                            c,
                            Category::Policy,
                            format!("{tool:?} asked the host for input, and its question was withheld: {why}"),
                        );
                        self.refuse_call(id, &tool, r, out);
                        self.release_serial(&tool, out);
                        return true;
                    }
                };
                if let Some(state) = request_state {
                    if self.modern.states.len() >= MAX_OUTSTANDING_STATES {
                        self.modern.states.remove(0);
                    }
                    self.modern.states.push((tool.clone(), state));
                }
                out.push(Out::Host(relayed));
            }
            InputRequired::Blocked { why } => {
                self.audit(out, || AuditNote {
                    tool: Some(tool.clone()),
                    detail: Some(why.clone()),
                    outcome: Some("refused"),
                    ..AuditNote::new(EventKind::CapabilityBlocked)
                });
                let r = Refusal::new(
                    code::CAPABILITY_DENIED,
                    Category::Policy,
                    format!("{tool:?} did not complete: {why}. The host was not asked; allow the capability in the policy if this tool needs it"),
                );
                self.refuse_call(id, &tool, r, out);
            }
        }
        self.release_serial(&tool, out);
        true
    }

    /// A result named another server than the pinned one: the answer is withheld and the
    /// session refuses everything from now on (as a changed identity at a legacy handshake).
    fn identity_changed(&mut self, id: &Id, why: &str, out: &mut Vec<Out>) {
        let why = format!("{why}; capture and review the server again");
        self.invalidate(&why, out);
        if !matches!(self.phase, Phase::Failed(_)) {
            out.push(Out::Diag(
                Level::Error,
                format!("refused the session: {why}"),
            ));
            self.phase = Phase::Failed(why.clone());
        }
        if let Some(purpose) = self.own_requests.remove(id) {
            match purpose {
                Purpose::ListPage { .. } => self.walk_failed(&why, out),
                Purpose::Discover => self.discover_failed(&why, out),
                Purpose::Ping | Purpose::Listen => {}
            }
            return;
        }
        let Some(p) = self.host_requests.remove(id) else {
            return;
        };
        match p.kind {
            PendingKind::Call(call) => {
                let Dispatched { tool, progress, .. } = *call;
                if let Some(t) = &progress {
                    self.progress_tokens.remove(t);
                }
                let mut r = Refusal::new(
                    code::UNKNOWN_DISPATCH_OUTCOME,
                    Category::Drift,
                    format!("the result of {tool:?} was withheld: {why}. The call ran on a server that is not the reviewed one; check what it did"),
                );
                r.outcome_known = false;
                self.refuse_call(id, &tool, r, out);
                self.release_serial(&tool, out);
            }
            _ => refuse_to_host(Some(id), codes::PIN_MISMATCH, &why, out),
        }
    }

    /// Hook: the answer to one of mcpguard's own modern requests.
    pub(super) fn modern_own_response(
        &mut self,
        purpose: Purpose,
        msg: &Message<'_>,
        out: &mut Vec<Out>,
    ) {
        match purpose {
            Purpose::Discover => self.live_discover(msg, out),
            Purpose::Listen => {
                let what = if msg.kind == Kind::Response {
                    "was closed by the server; later tool list changes may go unnoticed".to_string()
                } else {
                    let err = msg
                        .error
                        .map(|e| crate::gate::refusal::clean_error_text(e.get()))
                        .unwrap_or_default();
                    format!("was refused by the server ({err}); it cannot announce tool list changes, and every call still re-verifies the live list")
                };
                out.push(Out::Diag(
                    Level::Debug,
                    format!("mcpguard's own subscriptions/listen stream {what}"),
                ));
            }
            Purpose::Ping | Purpose::ListPage { .. } => {}
        }
    }

    fn live_discover(&mut self, msg: &Message<'_>, out: &mut Vec<Out>) {
        self.modern.discovering = false;
        let Mode::Pinned(pin) = self.config.mode.clone() else {
            return;
        };
        let Some(m) = &pin.modern else { return };
        let live = match (
            msg.kind,
            msg.result.map(|r| strict::parse_strict_str(r.get())),
        ) {
            (Kind::Response, Some(Ok(v))) => v,
            (Kind::Response, Some(Err(e))) => {
                return self.discover_failed(
                    &format!("the live server/discover result is not acceptable: {e}"),
                    out,
                )
            }
            _ => {
                let err = msg
                    .error
                    .map(|e| crate::gate::refusal::clean_error_text(e.get()))
                    .unwrap_or_default();
                return self.discover_failed(
                    &format!("the server answered the live server/discover with an error: {err}"),
                    out,
                );
            }
        };
        if let Err(why) = modern::check_discover(&live, &pin.protocol_version, &pin.server_info) {
            let why = format!("{why}; capture and review the server again");
            self.invalidate(&why, out);
            self.phase = Phase::Failed(why.clone());
            return self.discover_failed(&why, out);
        }
        let instructions = match (live.get("instructions"), &pin.instructions) {
            (None, _) => None,
            (Some(l), Some(p)) if crate::snapshot::canonical::canonical_eq(l, p) => Some(p),
            (Some(_), pinned) => {
                out.push(Out::Diag(
                    Level::Warn,
                    if pinned.is_some() {
                        "withheld the server's instructions: they differ from the reviewed snapshot"
                    } else {
                        "withheld the server's instructions: the snapshot has none reviewed"
                    }
                    .to_string(),
                ));
                None
            }
        };
        let (answer, removed) = modern::discover_answer(
            &pin.protocol_version,
            &pin.server_info,
            m,
            instructions,
            &self.config.capabilities,
        );
        self.handshake_pinned(&removed, out);
        for id in std::mem::take(&mut self.modern.held_discover) {
            respond(out, &id, answer.clone());
        }
        // As after a legacy handshake, the review binds at the first live verification.
        if !self.bound && self.walk.is_none() {
            self.need_walk(out);
        }
    }

    fn discover_failed(&mut self, why: &str, out: &mut Vec<Out>) {
        self.modern.discovering = false;
        for id in std::mem::take(&mut self.modern.held_discover) {
            refuse_to_host(
                Some(&id),
                codes::VERIFICATION_FAILED,
                &format!("server/discover could not be verified against the live server: {why}"),
                out,
            );
        }
    }

    /// Hook: the session ends; host `server/discover` requests still waiting are answered.
    pub(super) fn modern_server_closed(&mut self, why: &str, out: &mut Vec<Out>) {
        for id in std::mem::take(&mut self.modern.held_discover) {
            refuse_to_host(
                Some(&id),
                codes::SERVER_GONE,
                &format!("the MCP server {why} before server/discover was verified"),
                out,
            );
        }
        self.modern.discovering = false;
    }
}

#[cfg(test)]
mod tests;
