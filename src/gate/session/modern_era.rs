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

use super::{
    codes, elicit_verdict, refuse_to_host, respond, write_reason, AuditNote, Call, Confirming, Era,
    Level, Mode, Out, Pending, PendingKind, Phase, Purpose, Session,
};
use crate::audit::EventKind;
use crate::gate::modern::{self, EnvelopeError, InputRequired};
use crate::gate::refusal::{code, Category, Refusal};
use crate::policy::Classification;
use crate::protocol;
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
        if method == "initialize" {
            let requested = params
                .as_ref()
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str)
                .unwrap_or("?");
            let why = format!("refused initialize: the reviewed snapshot pins protocol {pinned}, which has no initialize handshake (use server/discover and the per-request envelope); capture and review the server at your client's version to use it");
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
            "server/discover" => {
                self.modern.held_discover.push(id.clone());
                if !self.modern.discovering {
                    self.modern.discovering = true;
                    self.request_to_server("server/discover", None, Purpose::Discover, out);
                }
                true
            }
            "subscriptions/listen" => {
                self.host_listen(id, params, line, out);
                true
            }
            "tools/call" => !self.request_state_is_ours(id, params.as_ref(), out),
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
            "subscriptions/listen",
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
            let v = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "method": "subscriptions/listen", "params": params});
            Bytes::from(serde_json::to_vec(&v).unwrap_or_default())
        };
        self.modern.host_streams.insert(id.to_json());
        self.forward_request(
            id.clone(),
            "subscriptions/listen",
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
            let v = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "method": "tools/call", "params": params});
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
                let verdict = self
                    .check_approval(&state, &binding, timeout_ms)
                    .and_then(|()| match answer {
                        Some(a) => elicit_verdict(&a),
                        None => Err("the retry carries no answer to mcpguard's question".into()),
                    });
                let c = Confirming {
                    call,
                    binding,
                    arguments,
                    asked_ms: self.clock_ms,
                };
                self.settle(c, verdict, out);
            }
            None if mrtr.client_can_elicit => {
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
                let question = self.approval_question(&call.tool, class, &arguments, &binding);
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
                        "inputRequests": {modern::APPROVAL_INPUT_KEY: {"method": "elicitation/create", "params": question}},
                        "requestState": state,
                        "_meta": {protocol::SERVER_INFO_META: server_info},
                    }),
                );
            }
            None => {
                let r = Refusal::new(
                    code::APPROVAL_REQUIRED,
                    Category::Authorization,
                    format!(
                        "refused {:?}: {} and needs a person's approval, but this request's client capabilities do not include form elicitation, so mcpguard cannot ask anyone; use a client that supports elicitation, classify the tool in the policy ([writes.tools.{}]) if it is a read, or set confirmation.mode = \"allow\" to forward writes unconfirmed",
                        call.tool,
                        write_reason(class),
                        call.tool
                    ),
                );
                self.refuse_call(&call.id, &call.tool, r, out);
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
    ) -> Result<(), String> {
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
        Ok(())
    }

    /// Hook: the `tools/call` bytes that reach the server.
    pub(super) fn forwardable_call(
        &self,
        params: &serde_json::Map<String, Value>,
        line: Bytes,
    ) -> Bytes {
        match self.config.era {
            Era::Modern => modern::forwardable_call(params, line, &self.config.capabilities),
            Era::Legacy => super::minimal_call(params, line),
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
            kind:
                PendingKind::Call {
                    tool,
                    progress,
                    indeterminate: false,
                    ..
                },
            ..
        }) = self.host_requests.get(id)
        else {
            return false;
        };
        let (tool, progress) = (tool.clone(), progress.clone());
        let result: Value = msg
            .result
            .and_then(|r| strict::parse_strict_str(r.get()).ok())
            .unwrap_or(Value::Null);
        self.host_requests.remove(id);
        if let Some(t) = &progress {
            self.progress_tokens.remove(t);
        }
        match modern::classify_input_required(&result, &self.config.capabilities) {
            InputRequired::No => unreachable!("the result type was checked above"),
            InputRequired::Allowed { request_state } => {
                if let Some(state) = request_state {
                    if self.modern.states.len() >= MAX_OUTSTANDING_STATES {
                        self.modern.states.remove(0);
                    }
                    self.modern.states.push((tool.clone(), state));
                }
                out.push(Out::Host(line.clone()));
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
            PendingKind::Call { tool, progress, .. } => {
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
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::gate::capabilities::Capabilities;
    use crate::gate::session::Config;
    use crate::gate::{pin, refusal};
    use crate::snapshot::manifest::{Acceptance, Manifest};
    use crate::wire::frame::Frame;

    const V: &str = "2026-07-28";

    fn info() -> Value {
        json!({"name": "fixture", "version": "1.0.0"})
    }

    fn echo() -> Value {
        json!({"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
               "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}})
    }

    fn ask() -> Value {
        json!({"name": "ask", "inputSchema": {"type": "object"}})
    }

    fn page(ttl: u64) -> Value {
        json!({"tools": [echo(), ask()], "ttlMs": ttl, "cacheScope": "private", "resultType": "complete",
               "_meta": {protocol::SERVER_INFO_META: info()}})
    }

    fn with_channels(review: &Value, channels: Value) -> Value {
        let mut r = review.clone();
        r["inputChannels"] = channels;
        r
    }

    fn pin() -> Arc<pin::Pin> {
        let review = json!({"reviewer": "r@example.test", "reviewedAt": "2026-11-01T00:00:00Z",
            "assertions": {"headless": true, "independentCalls": true, "modelBacked": false,
                           "sideEffects": [], "concurrency": "safe", "referenceBasedIO": true},
            "inputChannels": {}});
        let doc = json!({
            "profile": crate::snapshot::manifest::PROFILE, "protocolVersion": V,
            "capturedAt": "2026-11-01T00:00:00Z", "expiresAt": "2026-11-08T00:00:00Z",
            "servers": {"s": {
                "serverInfo": info(), "instructions": "Be nice.",
                "capabilities": {"tools": {"listChanged": true}, "prompts": {}},
                "discover": {"supportedVersions": [V], "ttlMs": 1000, "cacheScope": "private"},
                "toolPages": [page(1000)],
                "reviews": {"echo": with_channels(&review, json!({"/text": "data"})), "ask": review}
            }}
        });
        let now = "2026-11-02T00:00:00Z".parse().unwrap();
        Arc::new(
            pin::pin_from_manifest(&Manifest::new(doc), "s", now, &Acceptance::default()).unwrap(),
        )
    }

    fn meta() -> Value {
        json!({protocol::PROTOCOL_VERSION_META: V, protocol::CLIENT_CAPABILITIES_META: {},
               protocol::CLIENT_INFO_META: {"name": "host", "version": "1"}})
    }

    struct T {
        s: Session,
        seen: super::super::Seen,
    }

    impl std::ops::Deref for T {
        type Target = super::super::Seen;
        fn deref(&self) -> &Self::Target {
            &self.seen
        }
    }

    impl std::ops::DerefMut for T {
        fn deref_mut(&mut self) -> &mut Self::Target {
            &mut self.seen
        }
    }

    impl T {
        fn new(caps: Capabilities) -> T {
            // The tools of these tests are reads, so no call waits for a person's approval.
            Self::with_policy(
                caps,
                "[writes.tools.echo]\nside_effect = \"read\"\n[writes.tools.ask]\nside_effect = \"read\"\n",
            )
        }
        fn with_policy(caps: Capabilities, policy: &str) -> T {
            let policy = crate::policy::parse(policy, "test").unwrap();
            let config = Config {
                era: Era::Modern,
                capabilities: caps,
                policy: std::sync::Arc::new(policy),
                ..Config::new(Mode::Pinned(pin()))
            };
            T {
                s: Session::new(config, "n0nce"),
                seen: Default::default(),
            }
        }
        fn take(&mut self, out: Vec<Out>) {
            self.seen.take(out);
        }
        fn host_says(&mut self, v: Value) {
            let mut out = vec![];
            let line = Bytes::from(serde_json::to_vec(&v).unwrap());
            self.s.from_host(Frame::Line(line), &mut out);
            self.take(out);
        }
        fn server_says(&mut self, v: Value) {
            let mut out = vec![];
            let line = Bytes::from(serde_json::to_vec(&v).unwrap());
            self.s.from_server(Frame::Line(line), &mut out);
            self.take(out);
        }
        /// mcpguard's last own request of `method`.
        fn own(&self, method: &str) -> Value {
            self.server
                .iter()
                .rev()
                .find(|m| {
                    m["method"] == method
                        && m["id"].as_str().is_some_and(|i| i.starts_with("mcpguard-"))
                })
                .cloned()
                .unwrap_or_else(|| panic!("no own {method}; diags: {:?}", self.diags))
        }
        fn answer_own(&mut self, method: &str, result: Value) {
            let id = self.own(method)["id"].clone();
            self.server_says(json!({"jsonrpc": "2.0", "id": id, "result": result}));
        }
        fn request(&mut self, id: i64, method: &str, mut params: Value) {
            params["_meta"] = meta();
            self.host_says(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        }
        /// Lists the tools (which binds the review) and clears what was seen.
        fn bound(mut self) -> T {
            self.request(1, "tools/list", json!({}));
            self.answer_own("tools/list", page(5));
            assert!(self.s.bound, "{:?}", self.diags);
            self.host.clear();
            self.server.clear();
            self.server_raw.clear();
            self
        }
        /// Calls `tool`, lets mcpguard's re-list pass, and returns what the server got.
        fn call(&mut self, id: i64, tool: &str, extra: Value) -> Option<Value> {
            let mut params = json!({"name": tool, "arguments": {}});
            if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
                p.extend(e.clone());
            }
            self.request(id, "tools/call", params);
            if self.host.last().is_some_and(|h| h["id"] == id) {
                return None;
            }
            self.answer_own("tools/list", page(5));
            self.server
                .iter()
                .rev()
                .find(|m| m["id"] == id && m["method"] == "tools/call")
                .cloned()
        }
    }

    #[test]
    fn every_request_carries_the_pinned_version_and_initialize_is_refused() {
        let mut t = T::new(Capabilities::default());
        t.host_says(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}));
        assert_eq!(t.host[0]["error"]["code"], -32022);
        assert_eq!(
            t.host[0]["error"]["data"],
            json!({"supported": [V], "requested": "2025-11-25"})
        );
        t.host_says(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}));
        assert_eq!(t.host[1]["error"]["code"], message::INVALID_PARAMS);
        let mut m = meta();
        m[protocol::PROTOCOL_VERSION_META] = json!("2027-01-01");
        t.host_says(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                           "params": {"name": "echo", "arguments": {}, "_meta": m}}));
        assert_eq!(t.host[2]["error"]["code"], -32022);
        assert_eq!(t.host[2]["error"]["data"]["requested"], "2027-01-01");
        assert!(
            t.server.is_empty(),
            "nothing reaches the server: {:?}",
            t.server
        );
    }

    #[test]
    fn server_discover_is_answered_from_the_snapshot_after_the_live_one() {
        let mut t = T::new(Capabilities::default());
        t.request(1, "server/discover", json!({}));
        assert!(t.host.is_empty());
        // mcpguard's own requests carry the envelope, and it listens for list changes itself.
        let listen = t.own("subscriptions/listen");
        assert_eq!(
            listen["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        let discover = t.own("server/discover");
        assert_eq!(
            discover["params"]["_meta"][protocol::PROTOCOL_VERSION_META],
            V
        );
        t.answer_own(
            "server/discover",
            json!({"supportedVersions": [V], "capabilities": {"tools": {"listChanged": true}, "prompts": {}, "extra": {}},
                   "instructions": "Be nice.", "ttlMs": 1, "cacheScope": "private", "resultType": "complete",
                   "_meta": {protocol::SERVER_INFO_META: info()}}),
        );
        assert_eq!(
            t.host[0]["result"],
            json!({"supportedVersions": [V], "capabilities": {"tools": {"listChanged": true}},
                   "instructions": "Be nice.", "ttlMs": 1000, "cacheScope": "private",
                   "resultType": "complete", "_meta": {protocol::SERVER_INFO_META: info()}})
        );
        // The binding verification follows, as after a legacy handshake.
        t.answer_own("tools/list", page(1000));
        assert!(t.s.bound);
    }

    #[test]
    fn a_live_discover_with_another_identity_fails_the_session() {
        let mut t = T::new(Capabilities::default());
        t.request(1, "server/discover", json!({}));
        t.answer_own(
            "server/discover",
            json!({"supportedVersions": [V], "capabilities": {},
                   "_meta": {protocol::SERVER_INFO_META: {"name": "fixture", "version": "2.0.0"}}}),
        );
        assert_eq!(t.host[0]["error"]["code"], codes::VERIFICATION_FAILED);
        t.request(2, "tools/list", json!({}));
        assert_eq!(t.host[1]["error"]["code"], codes::PIN_MISMATCH);
    }

    #[test]
    fn tools_list_carries_the_captured_cache_fields_and_calls_keep_their_bytes() {
        let mut t = T::new(Capabilities::default());
        t.request(1, "tools/list", json!({}));
        // The live page's cache fields differ from the captured ones: no drift.
        t.answer_own("tools/list", page(5));
        let r = &t.host[0]["result"];
        assert_eq!(r["tools"], json!([echo(), ask()]));
        assert_eq!(
            (r["ttlMs"].clone(), r["resultType"].clone()),
            (json!(1000), json!("complete"))
        );
        assert_eq!(r["_meta"][protocol::SERVER_INFO_META], info());
        let sent = t.call(2, "echo", json!({})).expect("forwarded");
        assert_eq!(sent["params"]["_meta"], meta());
        let raw = t.server_raw.last().unwrap().clone();
        assert!(
            raw.contains("\"io.modelcontextprotocol/clientInfo\""),
            "{raw}"
        );
        t.server_says(json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [], "structuredContent": {"text": "a"},
                             "resultType": "complete", "_meta": {protocol::SERVER_INFO_META: info()}}}));
        assert_eq!(
            t.host.last().unwrap()["result"]["structuredContent"]["text"],
            "a"
        );
    }

    #[test]
    fn a_result_naming_another_server_is_withheld_and_ends_the_session() {
        let mut t = T::new(Capabilities::default()).bound();
        t.call(2, "echo", json!({})).expect("forwarded");
        t.server_says(json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [], "structuredContent": {"text": "a"},
                             "_meta": {protocol::SERVER_INFO_META: {"name": "evil", "version": "1.0.0"}}}}));
        let r = &t.host.last().unwrap()["result"];
        assert_eq!(r["isError"], true);
        assert_eq!(
            r["_meta"][crate::gate::refusal::REFUSAL_META]["outcomeKnown"],
            false
        );
        assert!(t.s.invalidated().is_some());
        t.request(3, "tools/list", json!({}));
        assert_eq!(t.host.last().unwrap()["error"]["code"], codes::PIN_MISMATCH);
    }

    fn input_required(method: &str) -> Value {
        json!({"resultType": "input_required", "requestState": "st-1",
               "inputRequests": {"k": {"method": method, "params": {}}}})
    }

    #[test]
    fn input_requests_for_excluded_capabilities_never_reach_the_host() {
        for method in ["sampling/createMessage", "elicitation/create", "roots/list"] {
            let mut t = T::new(Capabilities::default()).bound();
            t.call(2, "ask", json!({})).expect("forwarded");
            t.server_says(json!({"jsonrpc": "2.0", "id": 2, "result": input_required(method)}));
            let r = &t.host.last().unwrap()["result"];
            assert_eq!(r["isError"], true, "{method}");
            assert_eq!(r["structuredContent"]["code"], code::CAPABILITY_DENIED);
            let text = r["content"][0]["text"].as_str().unwrap();
            assert!(text.contains(method), "{text}");
            assert!(
                !t.host.iter().any(|h| h.to_string().contains("st-1")),
                "{method}"
            );
            assert_eq!(t.s.pending_host_requests(), 0);
        }
    }

    #[test]
    fn allowed_input_requests_are_relayed_and_their_state_is_single_use() {
        let caps = Capabilities {
            elicitation: true,
            ..Capabilities::default()
        };
        let mut t = T::new(caps).bound();
        t.call(2, "ask", json!({})).expect("forwarded");
        t.server_says(
            json!({"jsonrpc": "2.0", "id": 2, "result": input_required("elicitation/create")}),
        );
        assert_eq!(
            t.host.last().unwrap()["result"],
            input_required("elicitation/create")
        );
        // A state the server never issued (or for another tool) is refused before dispatch.
        assert!(t
            .call(3, "ask", json!({"requestState": "forged"}))
            .is_none());
        assert_eq!(t.host.last().unwrap()["result"]["isError"], true);
        assert!(t.call(4, "echo", json!({"requestState": "st-1"})).is_none());
        // The real retry passes once, with its input responses.
        let retry = json!({"requestState": "st-1", "inputResponses": {"k": {"action": "accept", "content": {}}}});
        let sent = t.call(5, "ask", retry.clone()).expect("forwarded");
        assert_eq!(sent["params"]["inputResponses"], retry["inputResponses"]);
        assert!(t.call(6, "ask", retry).is_none(), "single use");
    }

    #[test]
    fn list_changes_invalidate_on_any_stream_and_reach_the_host_only_on_its_own() {
        let mut t = T::new(Capabilities::default()).bound();
        t.request(
            7,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
        );
        let listen = t.server.last().unwrap().clone();
        assert_eq!(
            listen["params"]["notifications"],
            json!({"toolsListChanged": true})
        );
        let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                         "params": {"notifications": {"toolsListChanged": true}, "_meta": {protocol::SUBSCRIPTION_ID_META: 7}}});
        t.server_says(ack.clone());
        assert_eq!(t.host.last().unwrap(), &ack);
        let own: Value = serde_json::from_str(t.s.modern.own_stream.as_deref().unwrap()).unwrap();
        t.call(2, "echo", json!({})).expect("forwarded");
        let before = t.host.len();
        t.server_says(
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                             "params": {"_meta": {protocol::SUBSCRIPTION_ID_META: own}}}),
        );
        assert_eq!(
            t.host.len(),
            before,
            "mcpguard's own stream stays with mcpguard"
        );
        assert!(t.s.invalidated().is_some());
        let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                             "params": {"_meta": {protocol::SUBSCRIPTION_ID_META: 7}}});
        t.server_says(changed.clone());
        assert_eq!(t.host.last().unwrap(), &changed);
        // The call in flight is indeterminate; a new one is refused.
        t.server_says(json!({"jsonrpc": "2.0", "id": 2, "result": {"structuredContent": {"text": "a"}, "content": []}}));
        let r = &t.host.last().unwrap()["result"];
        assert_eq!(
            r["_meta"][crate::gate::refusal::REFUSAL_META]["code"],
            code::UNKNOWN_DISPATCH_OUTCOME
        );
        assert!(t.call(3, "echo", json!({})).is_none());
        assert_eq!(
            t.host.last().unwrap()["result"]["_meta"][crate::gate::refusal::REFUSAL_META]["code"],
            code::REVIEW_INVALIDATED
        );
    }

    #[test]
    fn the_server_sends_no_requests_in_the_modern_era() {
        let caps = Capabilities {
            sampling: true,
            ..Capabilities::default()
        };
        let mut t = T::new(caps).bound();
        t.server_says(
            json!({"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage", "params": {}}),
        );
        assert!(t.host.is_empty());
        assert_eq!(
            t.server.last().unwrap()["error"]["code"],
            message::INVALID_REQUEST
        );
    }

    /// `ask` is a write here (the policy classifies only `echo`).
    fn writes_ask() -> T {
        T::with_policy(
            Capabilities::default(),
            "[writes.tools.echo]\nside_effect = \"read\"\n",
        )
        .bound()
    }

    fn call_ask(t: &mut T, id: i64, elicit: bool, arguments: Value, extra: Value) {
        let mut m = meta();
        if elicit {
            m[protocol::CLIENT_CAPABILITIES_META] = json!({"elicitation": {}});
        }
        let mut params = json!({"name": "ask", "arguments": arguments, "_meta": m});
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        t.host_says(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
    }

    fn approve(state: &Value, approve: bool) -> Value {
        json!({"requestState": state, "inputResponses": {modern::APPROVAL_INPUT_KEY:
            {"action": "accept", "content": {"approve": approve}}}})
    }

    fn refusal(t: &T) -> Value {
        t.host.last().unwrap()["result"]["_meta"][refusal::REFUSAL_META]["code"].clone()
    }

    #[test]
    fn a_modern_write_is_asked_through_input_required_and_its_approval_is_bound_and_single_use() {
        let mut t = writes_ask();
        call_ask(&mut t, 2, true, json!({"n": 1}), json!({}));
        let q = t.host.last().unwrap().clone();
        assert_eq!(q["id"], 2);
        assert_eq!(q["result"]["resultType"], "input_required", "{q}");
        let ask = &q["result"]["inputRequests"][modern::APPROVAL_INPUT_KEY];
        assert_eq!(ask["method"], "elicitation/create");
        assert!(ask["params"]["message"]
            .as_str()
            .unwrap()
            .contains("\"ask\""));
        let state = q["result"]["requestState"].clone();
        assert!(t.server.iter().all(|m| m["method"] != "tools/call"));

        // The retry with the approval goes on; the server never sees mcpguard's state.
        call_ask(&mut t, 3, true, json!({"n": 1}), approve(&state, true));
        t.answer_own("tools/list", page(5));
        let sent = t
            .server
            .iter()
            .find(|m| m["method"] == "tools/call")
            .expect("dispatched after the approval")
            .clone();
        assert!(sent["params"].get("requestState").is_none(), "{sent}");
        assert!(sent["params"].get("inputResponses").is_none(), "{sent}");

        // The same state again: used up.
        call_ask(&mut t, 4, true, json!({"n": 1}), approve(&state, true));
        assert_eq!(refusal(&t), "consent_required");

        // A fresh question, answered for other arguments: refused.
        call_ask(&mut t, 5, true, json!({"n": 1}), json!({}));
        let state = t.host.last().unwrap()["result"]["requestState"].clone();
        call_ask(&mut t, 6, true, json!({"n": 2}), approve(&state, true));
        assert_eq!(refusal(&t), "consent_required");

        // A forged state (the HMAC altered): refused.
        call_ask(&mut t, 7, true, json!({"n": 1}), json!({}));
        let mut forged = t.host.last().unwrap()["result"]["requestState"]
            .as_str()
            .unwrap()
            .to_string();
        let last = forged.pop().unwrap();
        forged.push(if last == '0' { '1' } else { '0' });
        call_ask(
            &mut t,
            8,
            true,
            json!({"n": 1}),
            approve(&json!(forged), true),
        );
        assert_eq!(refusal(&t), "consent_required");

        // Declined: refused.
        call_ask(&mut t, 9, true, json!({"n": 1}), json!({}));
        let state = t.host.last().unwrap()["result"]["requestState"].clone();
        call_ask(&mut t, 10, true, json!({"n": 1}), approve(&state, false));
        assert_eq!(refusal(&t), "consent_required");
        let dispatched = t
            .server
            .iter()
            .filter(|m| m["method"] == "tools/call")
            .count();
        assert_eq!(dispatched, 1, "only the approved call reached the server");

        // A request whose client capabilities lack elicitation cannot be asked.
        call_ask(&mut t, 11, false, json!({"n": 1}), json!({}));
        assert_eq!(refusal(&t), "approval_required");
        assert_eq!(t.host.last().unwrap()["result"]["resultType"], "complete");
    }
}
