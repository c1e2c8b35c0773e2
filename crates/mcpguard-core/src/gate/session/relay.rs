//! The two directions of the conversation: frames from the host and from the server, routed by
//! kind and method, with id correlation per direction (host→server, server→host, and mcpguard's
//! own requests carrying the per-process nonce), verdicts for bad input, and the replies mcpguard
//! sends in its own name.
//!
//! Routing only: what a method means is decided in the part that owns it (handshake, walks, calls,
//! results, the modern era).

use super::*;

/// One frame with its envelope parsed, borrowing from the frame. Parsing needs nothing of the
/// session's state, so the driver parses a whole read's frames before it takes the session's
/// lock: the two reader threads then parse at the same time, and only the routing is serialized.
pub enum Parsed<'a> {
    Line {
        line: &'a Bytes,
        msg: Result<Message<'a>, Invalid>,
    },
    TooLong {
        len: usize,
        head: &'a [u8],
    },
}

impl<'a> Parsed<'a> {
    pub fn new(frame: &'a Frame) -> Self {
        match frame {
            Frame::Line(line) => Parsed::Line {
                line,
                msg: message::parse(line),
            },
            Frame::TooLong { len, head } => Parsed::TooLong { len: *len, head },
        }
    }
}

impl Session {
    /// A frame arrived from the host.
    pub fn from_host(&mut self, frame: Frame, out: &mut Vec<Out>) {
        self.from_host_parsed(Parsed::new(&frame), out);
    }

    /// A frame from the host whose envelope was already parsed (outside the driver's lock).
    pub fn from_host_parsed(&mut self, parsed: Parsed<'_>, out: &mut Vec<Out>) {
        let (line, msg) = match parsed {
            Parsed::Line { line, msg } => (line, msg),
            Parsed::TooLong { len, head } => {
                let id = message::salvage_id(&String::from_utf8_lossy(head));
                let msg = format!(
                    "refused a {len}-byte message from the host: the limit is {} bytes (raise it with --max-message-bytes or limits.max_message_bytes in the policy)",
                    self.config.max_message_bytes
                );
                refuse_to_host(id.as_ref(), codes::TOO_LARGE, &msg, out);
                return;
            }
        };
        let msg = match msg {
            Ok(m) => m,
            Err(invalid) => {
                invalid_from_host(invalid, out);
                return;
            }
        };
        note_unknown_members("host", &msg, out);
        match msg.kind {
            Kind::Request => self.host_request(&msg, line.clone(), out),
            Kind::Notification => self.host_notification(&msg, line.clone(), out),
            Kind::Response | Kind::ErrorResponse => {
                // Only a question the host has can be answered by it; the private keys of
                // questions only the out-of-band channels have never match a host response.
                let asked = msg
                    .id
                    .as_ref()
                    .filter(|id| self.confirming.get(id).is_some_and(|c| c.host_asked));
                if let Some(c) = asked.and_then(|id| self.confirming.remove(id)) {
                    return self.confirmation_answer(c, &msg, out);
                }
                let known = msg
                    .id
                    .as_ref()
                    .and_then(|id| self.server_requests.remove(id));
                match known {
                    Some(_) => out.push(Out::Server(line.clone())),
                    // An answer to one of mcpguard's questions that is no longer open: it was
                    // answered (once is all that counts), expired or withdrawn.
                    None if msg.id.as_ref().is_some_and(|id| self.is_host_question_id(id)) => {
                        out.push(Out::Diag(
                            Level::Warn,
                            format!(
                                "dropped a late or repeated answer from the host to mcpguard's question {}: it was already answered, expired or withdrawn, so it approves nothing",
                                msg.id.map_or("null".to_string(), |id| id.to_string())
                            ),
                        ))
                    }
                    None => out.push(Out::Diag(
                        Level::Warn,
                        format!(
                            "dropped a response from the host to request {} that the server never sent (or that was already answered)",
                            msg.id.map_or("null".to_string(), |id| id.to_string())
                        ),
                    )),
                }
            }
        }
    }

    pub(super) fn host_request(&mut self, msg: &Message<'_>, line: Bytes, out: &mut Vec<Out>) {
        let Some(id) = msg.id.clone() else { return };
        let method = msg.method.as_deref().unwrap_or_default();
        if matches!(&id, Id::Str(s) if s.starts_with(&self.own_prefix))
            || self.is_host_question_id(&id)
        {
            let m = format!(
                "refused host request {id}: ids starting with {:?} or {:?} are reserved by mcpguard",
                self.own_prefix, self.host_prefix
            );
            refuse_to_host(Some(&id), codes::ID_CONFLICT, &m, out);
            return;
        }
        if self.host_requests.contains_key(&id)
            || self.held.iter().any(|h| h.id == id)
            || self.confirming.values().any(|c| c.call.id == id)
            || self.serial_queue.iter().any(|c| c.id == id)
        {
            let m = format!("refused host request {id}: another request with this id is still pending (dispatched, waiting for a person, for the live verification or behind a call of the same serialized tool); ids must be unique");
            refuse_to_host(Some(&id), codes::ID_CONFLICT, &m, out);
            return;
        }
        // The server may still answer the call given up on under this id; that late answer must
        // never be taken for the answer to a new request.
        if self.abandoned.contains(&id) {
            let m = format!("refused host request {id}: a call with this id passed the per-call timeout and the server may still answer it; use a new id");
            refuse_to_host(Some(&id), codes::ID_CONFLICT, &m, out);
            return;
        }
        if let Phase::Failed(why) = &self.phase {
            let m = format!("refused {method}: {why}");
            refuse_to_host(Some(&id), codes::PIN_MISMATCH, &m, out);
            return;
        }
        if method == methods::TOOLS_CALL {
            if let Some(m) = self.unchecked_call_members(msg) {
                refuse_to_host(Some(&id), message::INVALID_PARAMS, &m, out);
                return;
            }
        }
        // Modern era: the envelope, initialize, server/discover, listen streams, MRTR retries.
        if self.config.era == Era::Modern && self.modern_host_request(&id, method, msg, &line, out)
        {
            return;
        }
        match method {
            methods::PING => self.forward_request(id, method, PendingKind::Plain, line, out),
            methods::INITIALIZE => self.host_initialize(id, msg, out),
            // Dual-era hosts (Claude Code, fast-agent) probe server/discover on every connection
            // and fall back to initialize on this error: normal behaviour, so not a warning.
            methods::SERVER_DISCOVER => refuse_to_host_at(
                Level::Info,
                Some(&id),
                message::METHOD_NOT_FOUND,
                "server/discover is not available: this snapshot pins a protocol version with initialize; use initialize",
                out,
            ),
            _ if self.phase != Phase::Ready => refuse_to_host(
                Some(&id),
                codes::NOT_INITIALIZED,
                &format!("refused {method}: the session is not initialized yet (send initialize, then notifications/initialized)"),
                out,
            ),
            methods::TOOLS_LIST => self.host_tools_list(id, msg, line, out),
            methods::TOOLS_CALL => self.host_tools_call(id, msg, line, out),
            methods::LOGGING_SET_LEVEL if self.config.capabilities.logging => {
                self.forward_request(id, method, PendingKind::Plain, line, out)
            }
            methods::LOGGING_SET_LEVEL => {
                let why = "logging/setLevel is refused: the policy turns server logging off ([capabilities] logging = false; set it to true to pass server log messages and logging/setLevel)";
                self.audit(out, || AuditNote {
                    detail: Some(why.to_string()),
                    outcome: Some("refused"),
                    ..AuditNote::new(EventKind::CapabilityBlocked)
                });
                refuse_to_host(Some(&id), message::METHOD_NOT_FOUND, why, out)
            }
            m if m.starts_with("prompts/") && self.config.capabilities.prompts => {
                self.forward_request(id, method, PendingKind::Plain, line, out)
            }
            m if m.starts_with("resources/") && self.config.capabilities.resources => {
                self.forward_request(id, method, PendingKind::Plain, line, out)
            }
            m if m.starts_with("tasks/") && self.config.capabilities.tasks => {
                self.forward_request(id, method, PendingKind::Plain, line, out)
            }
            m => refuse_to_host(
                Some(&id),
                message::METHOD_NOT_FOUND,
                &format!("refused {m}: mcpguard does not pass this method (prompts, resources, completions and tasks are excluded unless the policy allows them; unknown methods never pass)"),
                out,
            ),
        }
    }

    pub(super) fn forward_request(
        &mut self,
        id: Id,
        method: &str,
        kind: PendingKind,
        line: Bytes,
        out: &mut Vec<Out>,
    ) {
        self.host_requests.insert(
            id,
            Pending {
                method: method_name(method),
                kind,
            },
        );
        out.push(Out::Server(line));
    }

    pub(super) fn host_notification(&mut self, msg: &Message<'_>, line: Bytes, out: &mut Vec<Out>) {
        let method = msg.method.as_deref().unwrap_or_default();
        match method {
            methods::INITIALIZED if self.phase == Phase::AwaitInitialized => {
                self.phase = Phase::Ready;
                out.push(Out::Server(line));
                if matches!(self.config.mode, Mode::Pinned(_)) {
                    // The binding verification: the review binds when it succeeds.
                    self.need_walk(out);
                }
            }
            methods::CANCELLED => {
                let target = msg
                    .params
                    .and_then(|p| strict::parse_strict_str(p.get()).ok())
                    .and_then(|p| p.get("requestId").and_then(id_of));
                match target {
                    Some(t) if self.host_requests.contains_key(&t) => out.push(Out::Server(line)),
                    Some(t) => {
                        let asking = self
                            .confirming
                            .iter()
                            .find(|(_, c)| c.call.id == t)
                            .map(|(ask, _)| ask.clone());
                        if let Some(ask) = &asking {
                            if self.confirming.remove(ask).is_some_and(|c| c.host_asked) {
                                out.push(Out::Host(cancel_notification(ask, "mcpguard: the call was cancelled")));
                            }
                        }
                        let before = self.held.len() + self.serial_queue.len();
                        self.held.retain(|h| h.id != t);
                        // A call queued behind a call of the same serialized tool was approved
                        // (or needed no approval) but has not reached the server: it never does.
                        self.serial_queue.retain(|c| c.id != t);
                        if self.held.len() + self.serial_queue.len() != before || asking.is_some() {
                            out.push(Out::Diag(Level::Info, format!("the host cancelled request {t} before it was dispatched; it never reaches the server")));
                        }
                    }
                    None => out.push(Out::Diag(Level::Debug, "dropped a cancellation that names no known request".into())),
                }
            }
            methods::ROOTS_LIST_CHANGED if !self.config.capabilities.roots => {
                out.push(Out::Diag(Level::Debug, "dropped notifications/roots/list_changed: roots are not passed to the server".into()))
            }
            methods::ROOTS_LIST_CHANGED | methods::PROGRESS if self.phase == Phase::Ready => {
                out.push(Out::Server(line))
            }
            m => out.push(Out::Diag(
                Level::Info,
                format!("dropped the host notification {m}: mcpguard does not pass it in this phase or at all"),
            )),
        }
    }

    /// A frame arrived from the server.
    pub fn from_server(&mut self, frame: Frame, out: &mut Vec<Out>) {
        self.from_server_parsed(Parsed::new(&frame), out);
    }

    /// A frame from the server whose envelope was already parsed (outside the driver's lock).
    pub fn from_server_parsed(&mut self, parsed: Parsed<'_>, out: &mut Vec<Out>) {
        let (line, msg) = match parsed {
            Parsed::Line { line, msg } => (line, msg),
            Parsed::TooLong { len, head } => {
                let id = message::salvage_id(&String::from_utf8_lossy(head));
                let msg = format!(
                    "dropped a {len}-byte message from the server: the limit is {} bytes (raise it with --max-message-bytes or limits.max_message_bytes in the policy)",
                    self.config.max_message_bytes
                );
                self.upstream_failure(id, codes::BAD_UPSTREAM_RESPONSE, &msg, out);
                return;
            }
        };
        let msg = match msg {
            Ok(m) => m,
            Err(invalid) => {
                let text = format!("dropped a message from the server: {}", invalid.reason);
                self.upstream_failure(invalid.id, codes::BAD_UPSTREAM_RESPONSE, &text, out);
                return;
            }
        };
        note_unknown_members("server", &msg, out);
        match msg.kind {
            Kind::Request => self.server_request(&msg, line.clone(), out),
            Kind::Notification => self.server_notification(&msg, line.clone(), out),
            Kind::Response | Kind::ErrorResponse => {
                let Some(id) = msg.id.clone() else {
                    out.push(Out::Diag(
                        Level::Warn,
                        "dropped an error response from the server that names no request (id null)"
                            .into(),
                    ));
                    return;
                };
                // Modern era: the identity in results, and input_required results of calls.
                if self.config.era == Era::Modern && self.modern_response(&id, &msg, line, out) {
                    return;
                }
                if let Some(purpose) = self.own_requests.remove(&id) {
                    self.own_response(purpose, &msg, out);
                } else if let Some(p) = self.host_requests.remove(&id) {
                    self.server_response(id, p, &msg, line.clone(), out);
                } else if self.abandoned.remove(&id) {
                    out.push(Out::Diag(
                        Level::Warn,
                        format!("dropped the server's late answer to call {id}, which passed the per-call timeout"),
                    ));
                } else {
                    out.push(Out::Diag(
                        Level::Warn,
                        format!("dropped a response from the server to request {id}, which the host never sent (or which was already answered)"),
                    ));
                }
            }
        }
    }

    pub(super) fn server_request(&mut self, msg: &Message<'_>, line: Bytes, out: &mut Vec<Out>) {
        let Some(id) = msg.id.clone() else { return };
        let method = msg.method.as_deref().unwrap_or_default();
        let refuse = |out: &mut Vec<Out>, code: i64, why: String| {
            out.push(Out::Diag(
                Level::Warn,
                format!("refused the server's {method} request: {why}"),
            ));
            out.push(Out::Server(Bytes::from(message::error_response(
                Some(&id),
                code,
                &format!("mcpguard: {why}"),
                None,
            ))));
        };
        if self.server_requests.contains_key(&id) {
            refuse(
                out,
                codes::ID_CONFLICT,
                format!("another request with id {id} is still pending"),
            );
            return;
        }
        // The host must never hold two requests with one id: the answer to the server's could be
        // taken for the answer to mcpguard's question (an approval). mcpguard's question ids are
        // not predictable by the server, so a match is an attack or a broken server.
        if self.is_host_question_id(&id) || self.confirming.contains_key(&id) {
            self.audit(out, || AuditNote {
                detail: Some(format!("the server's {method} request used id {id}, reserved for mcpguard's own questions to the host")),
                outcome: Some("refused"),
                ..AuditNote::new(EventKind::CapabilityBlocked)
            });
            refuse(
                out,
                codes::ID_CONFLICT,
                format!("its id {id} is reserved for mcpguard's own questions to the host; it never reaches the host (a server cannot reuse mcpguard's ids)"),
            );
            return;
        }
        // Modern era: on stdio the server sends no requests; input comes back inside results.
        if self.config.era == Era::Modern {
            let why = format!("{method}: a 2026-07-28 server does not send requests on stdio");
            refuse(out, message::INVALID_REQUEST, why);
            return;
        }
        let caps = &self.config.capabilities;
        let allowed = match method {
            methods::PING => true,
            methods::SAMPLING_CREATE_MESSAGE => caps.sampling,
            methods::ELICITATION_CREATE => caps.elicitation,
            methods::ROOTS_LIST => caps.roots,
            _ => false,
        };
        if !allowed {
            let why = match method {
                methods::SAMPLING_CREATE_MESSAGE
                | methods::ELICITATION_CREATE
                | methods::ROOTS_LIST => {
                    format!("{method} is excluded by policy; it never reaches the host")
                }
                m => format!("{m} is not a server request mcpguard passes"),
            };
            self.audit(out, || AuditNote {
                detail: Some(why.clone()),
                outcome: Some("refused"),
                ..AuditNote::new(EventKind::CapabilityBlocked)
            });
            refuse(out, message::METHOD_NOT_FOUND, why);
            return;
        }
        let line = match method {
            methods::SAMPLING_CREATE_MESSAGE | methods::ELICITATION_CREATE => {
                match self.server_request_text(&id, method, msg, line, out) {
                    Ok(line) => line,
                    Err(why) => {
                        refuse(out, message::INVALID_REQUEST, why);
                        return;
                    }
                }
            }
            _ => line,
        };
        self.server_requests.insert(
            id,
            Pending {
                method: method_name(method),
                kind: PendingKind::Plain,
            },
        );
        out.push(Out::Host(line));
    }

    pub(super) fn server_notification(
        &mut self,
        msg: &Message<'_>,
        line: Bytes,
        out: &mut Vec<Out>,
    ) {
        let method = msg.method.as_deref().unwrap_or_default();
        match method {
            methods::TOOLS_LIST_CHANGED => {
                if let Mode::Pinned(_) = self.config.mode {
                    if self.bound {
                        self.invalidate("the server announced a change of its tool list (notifications/tools/list_changed)", out);
                    } else if let Some(walk) = self.walk.as_mut() {
                        // Before binding, an announcement only means the verification happens
                        // after it: walk again once the current walk ends.
                        walk.restart = true;
                    }
                }
                // Modern era: only notifications of the host's own streams reach it.
                if self.notification_for_host(msg) {
                    out.push(Out::Host(line));
                }
            }
            methods::MESSAGE => self.log_message(msg, line, out),
            methods::PROGRESS => {
                let token = msg
                    .params
                    .and_then(|p| strict::parse_strict_str(p.get()).ok())
                    .and_then(|p| p.get("progressToken").map(|t| t.to_string()));
                match token {
                    Some(t)
                        if self.progress_tokens.contains(&t)
                            || matches!(self.config.mode, Mode::Unpinned) =>
                    {
                        self.server_progress(msg, line, out)
                    }
                    _ => out.push(Out::Diag(
                        Level::Debug,
                        "dropped progress for no call in flight".into(),
                    )),
                }
            }
            methods::CANCELLED => {
                let target = msg
                    .params
                    .and_then(|p| strict::parse_strict_str(p.get()).ok())
                    .and_then(|p| p.get("requestId").and_then(id_of));
                if target.is_some_and(|t| self.server_requests.remove(&t).is_some()) {
                    out.push(Out::Host(line));
                }
            }
            methods::SUBSCRIPTIONS_ACKNOWLEDGED if self.notification_for_host(msg) => {
                out.push(Out::Host(line))
            }
            m => out.push(Out::Diag(
                Level::Info,
                format!("dropped the server notification {m}: mcpguard does not pass it"),
            )),
        }
    }

    pub(super) fn server_response(
        &mut self,
        id: Id,
        pending: Pending,
        msg: &Message<'_>,
        line: Bytes,
        out: &mut Vec<Out>,
    ) {
        match pending.kind {
            // Prompts and resources are text for the model and the person: checked as results.
            PendingKind::Plain
                if pending.method.starts_with("prompts/")
                    || pending.method.starts_with("resources/") =>
            {
                self.server_part_response(&id, &pending.method, msg, line, out)
            }
            PendingKind::Plain => out.push(Out::Host(line)),
            PendingKind::Initialize => self.initialize_response(id, msg, line, out),
            PendingKind::Call(call) => {
                let Dispatched {
                    tool,
                    arguments,
                    progress,
                    indeterminate,
                    ..
                } = *call;
                if let Some(t) = &progress {
                    self.progress_tokens.remove(t);
                }
                self.call_response(&id, &tool, &arguments, indeterminate, msg, line, out);
                self.release_serial(&tool, out);
            }
        }
    }

    /// Sends a request of mcpguard's own to the server; its response is consumed, never
    /// forwarded to the host.
    pub fn request_to_server(
        &mut self,
        method: &str,
        params: Option<Value>,
        purpose: Purpose,
        out: &mut Vec<Out>,
    ) -> Id {
        let id = Id::Str(format!("{}{}", self.own_prefix, self.next_own));
        self.next_own += 1;
        // Modern era: every request carries the envelope.
        let params = self.own_params(params);
        let mut req = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "method": method});
        if let Some(p) = params {
            req["params"] = p;
        }
        self.own_requests.insert(id.clone(), purpose);
        out.push(Out::Server(Bytes::from(
            serde_json::to_vec(&req).unwrap_or_default(),
        )));
        id
    }

    pub(super) fn own_response(&mut self, purpose: Purpose, msg: &Message<'_>, out: &mut Vec<Out>) {
        match purpose {
            Purpose::Ping => {
                let outcome = if msg.kind == Kind::Response {
                    "answered"
                } else {
                    "failed"
                };
                out.push(Out::Diag(
                    Level::Debug,
                    format!("mcpguard's ping to the server {outcome}"),
                ));
            }
            Purpose::ListPage { generation } => self.walk_page(generation, msg, out),
            Purpose::Discover | Purpose::Listen => self.modern_own_response(purpose, msg, out),
        }
    }

    /// A server message could not be relayed. If it was the answer to a pending host request,
    /// the host gets an error instead of waiting forever.
    pub(super) fn upstream_failure(
        &mut self,
        id: Option<Id>,
        code: i64,
        what: &str,
        out: &mut Vec<Out>,
    ) {
        out.push(Out::Diag(Level::Warn, what.to_string()));
        let Some(id) = id else { return };
        if let Some(p) = self.host_requests.remove(&id) {
            out.push(Out::Host(Bytes::from(message::error_response(
                Some(&id),
                code,
                &format!(
                    "mcpguard: the server's answer to this {} request could not be relayed: {what}",
                    p.method
                ),
                None,
            ))));
        } else if let Some(Purpose::ListPage { .. }) = self.own_requests.remove(&id) {
            self.walk_failed(what, out);
        }
    }
}

/// A method name to keep with a pending request. Every message carries one, so the frequent
/// names are kept as static strings rather than allocated per request.
fn method_name(method: &str) -> std::borrow::Cow<'static, str> {
    const COMMON: [&str; 10] = [
        methods::PING,
        methods::TOOLS_CALL,
        methods::TOOLS_LIST,
        methods::INITIALIZE,
        methods::LOGGING_SET_LEVEL,
        methods::SAMPLING_CREATE_MESSAGE,
        methods::ELICITATION_CREATE,
        methods::ROOTS_LIST,
        methods::SUBSCRIPTIONS_LISTEN,
        methods::SERVER_DISCOVER,
    ];
    match COMMON.iter().find(|m| **m == method) {
        Some(m) => std::borrow::Cow::Borrowed(m),
        None => std::borrow::Cow::Owned(method.to_string()),
    }
}

fn invalid_from_host(invalid: Invalid, out: &mut Vec<Out>) {
    let what = format!("refused a message from the host: {}", invalid.reason);
    match &invalid.reason {
        InvalidReason::Batch { ids } => {
            out.push(Out::Diag(Level::Warn, what.clone()));
            for id in ids {
                out.push(Out::Host(Bytes::from(message::error_response(
                    Some(id),
                    message::INVALID_REQUEST,
                    &format!("mcpguard: {what}"),
                    None,
                ))));
            }
        }
        reason => refuse_to_host(invalid.id.as_ref(), reason.code(), &what, out),
    }
}

/// Answers the host with an error when an id is known; always explains on stderr.
pub(super) fn refuse_to_host(id: Option<&Id>, code: i64, what: &str, out: &mut Vec<Out>) {
    refuse_to_host_at(Level::Warn, id, code, what, out);
}

/// `refuse_to_host` with the stderr line at `level`: below a warning for what hosts normally do.
pub(super) fn refuse_to_host_at(
    level: Level,
    id: Option<&Id>,
    code: i64,
    what: &str,
    out: &mut Vec<Out>,
) {
    match id {
        Some(id) => {
            out.push(Out::Diag(level, format!("{what} (request {id})")));
            out.push(Out::Host(Bytes::from(message::error_response(
                Some(id),
                code,
                &format!("mcpguard: {what}"),
                None,
            ))));
        }
        None => out.push(Out::Diag(
            Level::Warn,
            format!("{what}; no request id could be read, so no error response was sent"),
        )),
    }
}

impl Session {
    /// The members of a `tools/call` that mcpguard does not check, described for the refusal;
    /// `None` when there are none. A call is forwarded as its original bytes, so a member the
    /// gate does not know — at the top level beside `jsonrpc`, `id`, `method` and `params`, or
    /// in `params` beside `name`, `arguments`, `_meta` and `task` (and, in the 2026-07-28 era,
    /// `requestState` and `inputResponses`) — would reach the server unchecked. Refused rather
    /// than dropped, so a host learns that what it sent was not passed.
    fn unchecked_call_members(&self, msg: &Message<'_>) -> Option<String> {
        let mut found: Vec<String> = msg
            .unknown_members
            .iter()
            .map(|k| format!("{k:?} (top level)"))
            .collect();
        let known: &[&str] = match self.config.era {
            Era::Legacy => &["name", "arguments", "_meta", "task"],
            Era::Modern => &[
                "name",
                "arguments",
                "_meta",
                "task",
                "requestState",
                "inputResponses",
            ],
        };
        // Only the member names are read here; `object_params` parses the values strictly
        // later (and refuses params that are not an object).
        if let Some(p) = msg.params {
            if let Ok(keys) = serde_json::from_str::<
                std::collections::BTreeMap<String, serde::de::IgnoredAny>,
            >(p.get())
            {
                found.extend(
                    keys.keys()
                        .filter(|k| !known.contains(&k.as_str()))
                        .map(|k| format!("params.{k:?}")),
                );
            }
        }
        if found.is_empty() {
            return None;
        }
        // Named up to a bound: a message of thousands of members gets a short answer.
        let more = found.len().saturating_sub(20);
        let mut sanitized: Vec<String> = found
            .iter()
            .take(20)
            .map(|f| {
                crate::wire::sanitize::clean(
                    f,
                    crate::wire::sanitize::Clean {
                        keep_newlines: false,
                        max_bytes: 200,
                    },
                )
            })
            .collect();
        if more > 0 {
            sanitized.push(format!("and {more} more"));
        }
        Some(format!(
            "refused tools/call: it carries members mcpguard does not check: {}. The server gets only what the gate checked, so a call may carry only jsonrpc, id, method and params, and params only {}",
            sanitized.join(", "),
            known.join(", ")
        ))
    }
}

fn note_unknown_members(from: &str, msg: &Message<'_>, out: &mut Vec<Out>) {
    if !msg.unknown_members.is_empty() {
        out.push(Out::Diag(
            Level::Debug,
            format!(
                "relayed a message from the {from} with members JSON-RPC does not define: {}",
                msg.unknown_members.join(", ")
            ),
        ));
    }
}

fn id_of(v: &Value) -> Option<Id> {
    match v {
        Value::String(s) => Some(Id::Str(s.clone())),
        Value::Number(n) => n.as_i64().map(Id::Int),
        _ => None,
    }
}

/// Sends a result to the host.
pub(super) fn respond(out: &mut Vec<Out>, id: &Id, result: Value) {
    let v = json!({"jsonrpc": "2.0", "id": id.to_json_value(), "result": result});
    out.push(Out::Host(Bytes::from(
        serde_json::to_vec(&v).unwrap_or_default(),
    )));
}

/// The request's params as an object, parsed strictly; otherwise the host gets -32602 and
/// `None` is returned.
pub(super) fn object_params(
    id: &Id,
    msg: &Message<'_>,
    method: &str,
    out: &mut Vec<Out>,
) -> Option<Map<String, Value>> {
    let why = match msg.params.map(|p| strict::parse_strict_str(p.get())) {
        Some(Ok(Value::Object(p))) => return Some(p),
        Some(Err(e)) => format!("refused {method}: {e}"),
        _ => format!("refused {method}: params must be an object"),
    };
    refuse_to_host(Some(id), message::INVALID_PARAMS, &why, out);
    None
}
