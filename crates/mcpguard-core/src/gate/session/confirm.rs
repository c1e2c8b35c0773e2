//! Confirmation of writes: the question a person reads (three lines first: the server and
//! tool, the arguments, what approving does; details after), the channels it goes to
//! (`confirmation.channels`: the host through mcpguard's own `elicitation/create`, and the
//! out-of-band channels the driver runs — `mcpguard approvals` in a terminal, a desktop
//! notification), the answer turned into a verdict, expiry, and the withdrawal of questions still
//! open.
//!
//! A pending confirmation is keyed by the id of mcpguard's elicitation request (or, when only the
//! out-of-band channels have it, by a private id of the same form), so the first answer from any
//! channel removes it and an approval is single-use by construction: a late or repeated answer
//! finds nothing. Those ids are in the host direction's own space (`Session::host_request_id`),
//! which the server never sees, so no server request can stand in for a question. The question and
//! the binding are written in `exact_canonical`, which shows every number as the server receives
//! it; a call with a number that form cannot show as written is refused before anyone is asked.
//! A host that answers decline or cancel faster than a person can read the
//! question ([`HUMAN_MIN_ANSWER_MS`]) did not ask anyone; that answer does not settle the call
//! when an out-of-band channel can still reach the person, and a refusal says which it was.

use super::*;
use crate::policy::{Channel, Scope};

/// Below this time between the question and a decline or cancel, the host answered without
/// showing it to anyone: reading three lines and pressing a button takes a person longer than a
/// second, while headless hosts answer in a few milliseconds (`claude -p` cancels in 3 ms).
pub const HUMAN_MIN_ANSWER_MS: u64 = 1_000;

/// After this long without the host's answer, the question is offered to the out-of-band
/// channels too (the host's stays open; the first answer settles it): some hosts declare
/// elicitation and then never show the question (Cursor drops it).
pub const HOST_SILENCE_MS: u64 = 10_000;

/// While a call waits for a person and the host gave a `progressToken`, mcpguard tells the host
/// this often that the call is alive: hosts whose request timeout is reset by progress (the
/// TypeScript SDK's `resetTimeoutOnProgress`) then keep waiting, and a host shows the person why.
pub const PROGRESS_EVERY_MS: u64 = 5_000;

/// The question a person reads: three lines that fit a folded dialog, then the details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Question {
    /// Line 1: the server and the tool.
    pub headline: String,
    /// Line 2: a compact, sanitized summary of the arguments.
    pub arguments: String,
    /// Line 3: what approving does.
    pub effect: String,
    /// Everything else: why it is asked, the binding, the full arguments.
    pub details: String,
    pub server: String,
    pub tool: String,
    /// What the person may choose an approval to cover.
    pub scopes: Vec<Scope>,
}

impl Question {
    /// The whole question as one message: the three lines, a blank line, the details.
    pub fn text(&self) -> String {
        format!(
            "{}\n{}\n{}\n\n{}",
            self.headline, self.arguments, self.effect, self.details
        )
    }
}

/// How the host answered mcpguard's question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum HostAnswer {
    /// Accepted with approve ticked, for what the person chose.
    Approve(Scope),
    /// A person's refusal (said in words).
    Person(String),
    /// The host answered without asking anyone (too fast for a person).
    NotAsked(String),
    /// The host erred or sent something that is not an answer.
    Failed(String),
}

impl Session {
    /// A write needs a person's approval (legacy era): the question goes to the host when it can
    /// ask and to the out-of-band channels listed before it (or, when the host cannot ask, to
    /// every running out-of-band channel). When no channel can reach anyone the call is refused.
    pub(super) fn ask_person(
        &mut self,
        call: Call,
        class: &Classification,
        arguments: Value,
        out: &mut Vec<Out>,
    ) {
        let host = self.host_listed() && self.host_can_elicit;
        let offer_now = self.out_of_band_ready() && (!host || self.out_of_band_first());
        if !host && !offer_now {
            let why = if self.host_listed() {
                "the host did not advertise form elicitation"
            } else {
                "confirmation.channels does not list \"host\""
            };
            return self.nobody_to_ask(call, class, why, out);
        }
        let binding = self.binding_of(&call.tool, &arguments);
        let question = self.question(&call, class, &arguments, &binding);
        let mut c = Confirming {
            call,
            binding,
            arguments,
            asked_ms: self.clock_ms,
            host_asked: host,
            offered: None,
            question,
            host_note: None,
            scope: Scope::Once,
            progress_ms: self.clock_ms,
        };
        if offer_now {
            self.offer(&mut c, out);
        }
        let key = if host {
            let ask = self.host_request_id();
            let params = approval_params(&c.question);
            let req = json!({"jsonrpc": "2.0", "id": ask.to_json_value(), "method": methods::ELICITATION_CREATE, "params": params});
            out.push(Out::Diag(
                Level::Info,
                format!(
                    "call {} of {:?} is a write: asking the person through the host (approval {})",
                    c.call.id,
                    c.call.tool,
                    &c.binding[..12]
                ),
            ));
            out.push(Out::Host(Bytes::from(
                serde_json::to_vec(&req).unwrap_or_default(),
            )));
            ask
        } else {
            self.offer_key()
        };
        self.confirming.insert(key, c);
    }

    /// Whether every number in the call's arguments, as the server will receive them, can be
    /// shown to the person and bound as written ([`inexact_number`]); refuses the call otherwise.
    pub(super) fn arguments_exact(&mut self, call: &Call, out: &mut Vec<Out>) -> bool {
        let raw = message::parse(&call.line).ok().and_then(|m| {
            m.params.and_then(|p| {
                serde_json::from_str::<
                    std::collections::HashMap<String, Box<serde_json::value::RawValue>>,
                >(p.get())
                .ok()
            })
        });
        let Some((written, shown)) = raw
            .as_ref()
            .and_then(|p| p.get("arguments"))
            .and_then(|a| inexact_number(a.get()))
        else {
            return true;
        };
        let short = |t: &str| {
            if t.len() > 40 {
                format!("{}… ({} characters)", &t[..32], t.len())
            } else {
                t.to_string()
            }
        };
        let r = Refusal::new(
            code::INVALID_ARGUMENTS,
            Category::Input,
            format!(
                "refused {:?}: it needs a person's approval, and its arguments hold the number {} that mcpguard cannot show and bind exactly (it reads as {}), so the person would approve a different value than the server receives; it was not run. Send the value as a string, or as an integer of at most 64 bits or a decimal with at most 15 significant digits",
                call.tool,
                short(&written),
                short(&shown)
            ),
        );
        self.refuse_call(&call.id, &call.tool, r, out);
        false
    }

    /// Refuses a write nobody can be asked about, saying why and what changes it.
    pub(super) fn nobody_to_ask(
        &mut self,
        call: Call,
        class: &Classification,
        host_why: &str,
        out: &mut Vec<Out>,
    ) {
        let channels = &self.config.policy.confirmation.channels;
        let oob_why = if !channels
            .iter()
            .any(|c| matches!(c, Channel::Terminal | Channel::Desktop))
        {
            "confirmation.channels lists no out-of-band channel (\"terminal\", \"desktop\")"
        } else {
            "no out-of-band channel is running in this mcpguard (its start-up diagnostics say why)"
        };
        // A call asked about for a credential file is not helped by classifying its tool.
        let other_ways = if let Some((_, key)) = class.basis.argument() {
            format!("or set {key} = false to let such calls through unasked")
        } else {
            format!(
                "classify the tool as a read in its review (`mcpguard review --side-effect read`) or the policy ([writes.tools.{}]) if it is one, or set confirmation.mode = \"allow\" to forward writes unconfirmed",
                call.tool
            )
        };
        let r = Refusal::new(
            code::APPROVAL_REQUIRED,
            Category::Authorization,
            format!(
                "refused {:?}: {} and needs a person's approval, but mcpguard cannot ask anyone: {host_why}, and {oob_why}; add \"terminal\" to [confirmation] channels and answer with `mcpguard approvals`, use a host that supports elicitation, {other_ways}",
                call.tool,
                write_reason(class),
            ),
        );
        self.refuse_call(&call.id, &call.tool, r, out);
    }

    /// Whether the policy lists the host as a channel.
    pub(super) fn host_listed(&self) -> bool {
        self.config
            .policy
            .confirmation
            .channels
            .contains(&Channel::Host)
    }

    /// Whether an out-of-band channel the policy lists is running in this process.
    pub(super) fn out_of_band_ready(&self) -> bool {
        self.config
            .policy
            .confirmation
            .channels
            .iter()
            .any(|c| *c != Channel::Host && self.config.out_of_band.contains(c))
    }

    /// Whether a running out-of-band channel comes before the host in the policy's order, so it
    /// is offered at once rather than only when the host's answer does not count.
    fn out_of_band_first(&self) -> bool {
        let channels = &self.config.policy.confirmation.channels;
        channels
            .iter()
            .take_while(|c| **c != Channel::Host)
            .any(|c| self.config.out_of_band.contains(c))
    }

    /// A private key for a confirmation only the out-of-band channels have: it has the form of
    /// mcpguard's own request ids, which the host cannot use, so no host response can match it.
    pub(super) fn offer_key(&mut self) -> Id {
        let key = Id::Str(format!("{}offer-{}", self.host_prefix, self.next_host));
        self.next_host += 1;
        key
    }

    /// A fresh id for a question of mcpguard's to the host: in the host direction's own space
    /// (see the module docs of `session`), and never the id of a server request the host still
    /// holds, so one id names one request on the host's side.
    pub(super) fn host_request_id(&mut self) -> Id {
        loop {
            let id = Id::Str(format!("{}{}", self.host_prefix, self.next_host));
            self.next_host += 1;
            if !self.server_requests.contains_key(&id) && !self.confirming.contains_key(&id) {
                return id;
            }
        }
    }

    /// Whether `id` has the form of mcpguard's own questions to the host.
    pub(super) fn is_host_question_id(&self, id: &Id) -> bool {
        matches!(id, Id::Str(s) if s.starts_with(&self.host_prefix))
    }

    /// Offers `c` to the out-of-band channels (once): it gets the id the person answers with.
    pub(super) fn offer(&mut self, c: &mut Confirming, out: &mut Vec<Out>) {
        if c.offered.is_some() {
            return;
        }
        self.next_offer += 1;
        let id = format!("{}-{}", self.config.instance, self.next_offer);
        out.push(Out::Diag(
            Level::Info,
            format!(
                "call {} of {:?} waits for a person's approval {id}: run `mcpguard approvals approve {id}` or `mcpguard approvals deny {id}` (or `mcpguard approvals watch`)",
                c.call.id, c.call.tool
            ),
        ));
        c.offered = Some(id);
    }

    /// The digest the approval of a call of `tool` with `arguments` is bound to.
    pub(super) fn binding_of(&self, tool: &str, arguments: &Value) -> String {
        let snapshot = match &self.config.mode {
            Mode::Pinned(pin) => pin.digest.as_str(),
            _ => "unpinned",
        };
        approval_binding(snapshot, tool, arguments)
    }

    /// The question for `call` with `arguments` (both eras and every channel ask the same one).
    pub(super) fn question(
        &self,
        call: &Call,
        class: &Classification,
        arguments: &Value,
        binding: &str,
    ) -> Question {
        let tool = call.tool.as_str();
        let scopes = self.scopes_for(call);
        let server = match &self.config.mode {
            Mode::Pinned(pin) => pin.server_key.clone(),
            _ => "(unpinned)".to_string(),
        };
        let timeout_s = self.config.policy.confirmation.timeout.as_secs().max(1);
        let short = crate::wire::sanitize::Clean {
            keep_newlines: false,
            max_bytes: 80,
        };
        let tool = crate::wire::sanitize::clean(tool, short);
        let server = crate::wire::sanitize::clean(&server, short);
        Question {
            headline: format!("mcpguard: allow the AI to call \"{tool}\" on the MCP server \"{server}\"?"),
            arguments: format!("Arguments: {}", compact_arguments(arguments)),
            effect: format!(
                "Approve runs this one call once, now{}; Decline refuses it. No answer within {timeout_s} s refuses it.",
                self.standing_offer(&scopes)
            ),
            details: format!(
                "Why you are asked: {}.\nThis approval (binding {}) is bound to the reviewed snapshot, this tool and exactly these arguments; any other call asks again.\nThe arguments in full (canonical JSON, numbers with all their digits):\n{}",
                write_reason(class),
                &binding[..12],
                argument_summary(arguments),
            ),
            server,
            tool,
            scopes,
        }
    }

    /// The standing approvals the person may choose instead, in words for line 3.
    fn standing_offer(&self, scopes: &[Scope]) -> String {
        let mut offers = Vec::new();
        if scopes.contains(&Scope::Identical) {
            let s = self.config.policy.confirmation.identical_for.as_secs();
            offers.push(format!("identical calls for {} min", (s / 60).max(1)));
        }
        if scopes.contains(&Scope::Tool) {
            offers.push("this tool for the session".to_string());
        }
        if offers.is_empty() {
            String::new()
        } else {
            format!(" (or, if you choose, {})", offers.join(" or "))
        }
    }

    /// The host answered one of mcpguard's confirmation requests. Only `accept` with
    /// `approve: true` lets the call go on; a person's refusal refuses it; an answer that came
    /// too fast to be a person's, or an error, leaves it to the out-of-band channels when one
    /// runs (else it refuses, saying which it was).
    pub(super) fn confirmation_answer(
        &mut self,
        c: Confirming,
        msg: &Message<'_>,
        out: &mut Vec<Out>,
    ) {
        let elapsed = self.clock_ms.saturating_sub(c.asked_ms);
        let answer = match (msg.kind, msg.result) {
            (Kind::Response, Some(raw)) => match strict::parse_strict_str(raw.get()) {
                Ok(v) => host_answer(&v, elapsed),
                Err(e) => HostAnswer::Failed(format!("the host's answer is malformed ({e})")),
            },
            _ => HostAnswer::Failed("the host answered with an error".to_string()),
        };
        self.host_answered(c, answer, out);
    }

    /// Acts on the host's answer (both eras).
    pub(super) fn host_answered(
        &mut self,
        mut c: Confirming,
        answer: HostAnswer,
        out: &mut Vec<Out>,
    ) {
        match answer {
            HostAnswer::Approve(scope) => {
                c.scope = scope;
                self.settle(c, Ok(Channel::Host), out);
            }
            HostAnswer::Person(why) => {
                self.settle(c, Err(why), out);
            }
            HostAnswer::NotAsked(why) | HostAnswer::Failed(why) => {
                c.host_asked = false;
                if !self.out_of_band_ready() {
                    self.settle(c, Err(why), out);
                    return;
                }
                out.push(Out::Diag(
                    Level::Info,
                    format!(
                        "call {} of {:?}: {why}; the question stays open for the out-of-band channels",
                        c.call.id, c.call.tool
                    ),
                ));
                c.host_note = Some(why);
                self.offer(&mut c, out);
                let key = self.offer_key();
                self.confirming.insert(key, c);
            }
        }
    }

    /// An answer from an out-of-band channel to the approval offered as `id`. The first answer
    /// settles it; any later one finds nothing. Returns what happened, in words.
    pub fn answer_offer(
        &mut self,
        id: &str,
        approve: bool,
        scope: Scope,
        channel: Channel,
        out: &mut Vec<Out>,
    ) -> Result<String, String> {
        let key = self
            .confirming
            .iter()
            .find(|(_, c)| {
                c.offered.as_deref() == Some(id)
                    && self.clock_ms.saturating_sub(c.asked_ms) < self.confirmation_limit_ms()
            })
            .map(|(k, _)| k.clone());
        let Some(c) = key.and_then(|k| {
            let c = self.confirming.remove(&k)?;
            if c.host_asked {
                out.push(Out::Host(cancel_notification(
                    &k,
                    &format!("mcpguard: answered in the {} channel", channel.name()),
                )));
            }
            Some(c)
        }) else {
            return Err(format!(
                "approval {id} is not pending here: it was already answered, it expired, or its call ended"
            ));
        };
        let tool = c.call.tool.clone();
        if approve {
            let mut c = c;
            c.scope = scope;
            let granted = self.settle(c, Ok(channel), out);
            Ok(format!(
                "approved {id}: the call of {tool:?} goes on (approved for {granted})"
            ))
        } else {
            let why = format!("the person denied it in the {} channel", channel.name());
            self.settle(c, Err(why), out);
            Ok(format!("denied {id}: the call of {tool:?} was refused"))
        }
    }

    /// `confirmation.timeout` in milliseconds.
    fn confirmation_limit_ms(&self) -> u64 {
        u64::try_from(self.config.policy.confirmation.timeout.as_millis()).unwrap_or(u64::MAX)
    }

    /// The approvals waiting in the out-of-band channels, in the order they were offered: id,
    /// server, tool, the three lines, the details and the time left.
    pub fn offers(&self) -> Vec<Value> {
        let limit =
            u64::try_from(self.config.policy.confirmation.timeout.as_millis()).unwrap_or(u64::MAX);
        // A question whose time is up is not offered, even before the next tick removes it: an
        // answer to it would find nothing.
        let mut v: Vec<(&String, &Confirming)> = self
            .confirming
            .values()
            .filter(|c| self.clock_ms.saturating_sub(c.asked_ms) < limit)
            .filter_map(|c| c.offered.as_ref().map(|id| (id, c)))
            .collect();
        v.sort_by_key(|(id, _)| {
            id.rsplit('-')
                .next()
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        });
        v.into_iter()
            .map(|(id, c)| {
                let q = &c.question;
                let left = limit.saturating_sub(self.clock_ms.saturating_sub(c.asked_ms));
                json!({
                    "id": id,
                    "server": q.server,
                    "tool": q.tool,
                    "lines": [q.headline, q.arguments, q.effect],
                    "details": q.details,
                    "hostNote": c.host_note,
                    "scopes": q.scopes.iter().map(|s| s.name()).collect::<Vec<_>>(),
                    "expiresInMs": left,
                })
            })
            .collect()
    }

    /// Ends a confirmation: the call goes on (re-verified first when pinned) or is refused.
    /// Returns what an approval covers, in words (empty for a refusal).
    pub(super) fn settle(
        &mut self,
        c: Confirming,
        verdict: Result<Channel, String>,
        out: &mut Vec<Out>,
    ) -> String {
        let Confirming {
            mut call,
            binding,
            arguments,
            offered,
            scope,
            ..
        } = c;
        let from = offered.clone().unwrap_or_else(|| binding[..12].to_string());
        let offered = offered.map_or(String::new(), |id| format!(" {id}"));
        match verdict {
            Ok(channel) => {
                let granted = self.grant(&call, &binding, &from, scope);
                self.audit(out, || AuditNote {
                    tool: Some(call.tool.clone()),
                    arguments: Some(arguments),
                    outcome: Some("confirmed"),
                    detail: Some(format!(
                        "approval{offered} {binding} given in the {} channel, for {granted}",
                        channel.name()
                    )),
                    ..AuditNote::new(EventKind::CallConfirmed)
                });
                out.push(Out::Diag(
                    Level::Info,
                    format!(
                        "call {} of {:?} was approved by the person ({} channel), for {granted}",
                        call.id,
                        call.tool,
                        channel.name()
                    ),
                ));
                call.approval = Approval::Confirmed(binding);
                self.proceed(call, out);
                granted
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
                String::new()
            }
        }
    }

    /// Withdraws every confirmation question still open (the host is told to drop the ones it
    /// has) and refuses its call with `refusal(tool)`. In id order, so the output is
    /// deterministic.
    pub(super) fn withdraw_questions(
        &mut self,
        reason: &str,
        refusal: impl Fn(&str) -> Refusal,
        out: &mut Vec<Out>,
    ) {
        let mut asking: Vec<(Id, Confirming)> = self.confirming.drain().collect();
        asking.sort_by_cached_key(|(ask, _)| ask.to_string());
        for (ask, c) in asking {
            if c.host_asked {
                out.push(Out::Host(cancel_notification(&ask, reason)));
            }
            self.refuse_call(&c.call.id, &c.call.tool, refusal(&c.call.tool), out);
        }
    }

    /// Questions the host has kept for [`HOST_SILENCE_MS`] without an answer are offered to the
    /// out-of-band channels as well.
    pub(super) fn offer_unanswered(&mut self, out: &mut Vec<Out>) {
        if !self.out_of_band_ready() {
            return;
        }
        let now = self.clock_ms;
        let mut silent: Vec<Id> = self
            .confirming
            .iter()
            .filter(|(_, c)| {
                c.host_asked
                    && c.offered.is_none()
                    && now.saturating_sub(c.asked_ms) >= HOST_SILENCE_MS
            })
            .map(|(k, _)| k.clone())
            .collect();
        silent.sort_by_cached_key(|k| k.to_string());
        for key in silent {
            let Some(mut c) = self.confirming.remove(&key) else {
                continue;
            };
            c.host_note = Some(format!(
                "the host showed no answer within {} s",
                HOST_SILENCE_MS / 1000
            ));
            self.offer(&mut c, out);
            self.confirming.insert(key, c);
        }
    }

    /// Sends `notifications/progress` for each call waiting for a person whose host request
    /// carried a progress token, every [`PROGRESS_EVERY_MS`]: `progress` counts the seconds
    /// waited (so it increases), `total` is the timeout, and the message says what is awaited.
    pub(super) fn progress_while_asking(&mut self, out: &mut Vec<Out>) {
        let limit = self.confirmation_limit_ms();
        let now = self.clock_ms;
        let mut due: Vec<(&Id, &mut Confirming)> = self
            .confirming
            .iter_mut()
            .filter(|(_, c)| {
                c.call.progress.is_some() && now.saturating_sub(c.progress_ms) >= PROGRESS_EVERY_MS
            })
            .collect();
        due.sort_by_cached_key(|(k, _)| k.to_string());
        for (_, c) in due {
            c.progress_ms = now;
            let Some(token) = c
                .call
                .progress
                .as_deref()
                .and_then(|t| serde_json::from_str::<Value>(t).ok())
            else {
                continue;
            };
            let waited = now.saturating_sub(c.asked_ms);
            let left = limit.saturating_sub(waited) / 1000;
            let whom = match &c.offered {
                Some(id) => format!("a person's approval (in the host's dialog or `mcpguard approvals approve {id}`)"),
                None => "a person's approval in the host's dialog".to_string(),
            };
            let n = json!({"jsonrpc": "2.0", "method": methods::PROGRESS, "params": {
                "progressToken": token,
                "progress": waited / 1000,
                "total": limit / 1000,
                "message": format!("mcpguard: {:?} waits for {whom}; {left} s left before it is refused", c.call.tool),
            }});
            out.push(Out::Host(Bytes::from(
                serde_json::to_vec(&n).unwrap_or_default(),
            )));
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
            if c.host_asked {
                out.push(Out::Host(cancel_notification(
                    &ask,
                    "mcpguard: no answer within the confirmation timeout",
                )));
            }
            let mut why = format!("no answer within {} s", limit / 1000);
            if let Some(id) = &c.offered {
                why.push_str(&format!(
                    " (approval {id} was open to `mcpguard approvals`)"
                ));
            }
            if let Some(note) = &c.host_note {
                why.push_str(&format!("; before that, {note}"));
            }
            // What happens next, for the model and the person: nothing runs on its own.
            why.push_str("; nothing runs later on its own: tell the person the call waited for their approval, and call it again only if they want it, so that they are asked again");
            self.settle(c, Err(why), out);
        }
    }
}

/// The params of mcpguard's own `elicitation/create`: the question as its message and one
/// boolean field.
pub(super) fn approval_params(q: &Question) -> Value {
    let mut properties = json!({
        "approve": {
            "type": "boolean",
            "title": "Approve this call",
            "description": "Tick to let this one call through; leave unticked, decline or cancel to refuse it.",
            "default": false
        }
    });
    // The standing approvals the policy allows for this call, as one choice (the default is
    // this call only).
    if q.scopes.len() > 1 {
        let names: Vec<&str> = q.scopes.iter().map(|s| s.name()).collect();
        let titles: Vec<&str> = q
            .scopes
            .iter()
            .map(|s| match s {
                Scope::Once => "This call only",
                Scope::Identical => "Identical calls for a while",
                Scope::Tool => "This tool for the session",
            })
            .collect();
        properties["scope"] = json!({
            "type": "string",
            "title": "Approve for",
            "enum": names,
            "enumNames": titles,
            "default": "once"
        });
    }
    json!({
        "message": q.text(),
        "requestedSchema": {
            "type": "object",
            "properties": properties,
            "required": ["approve"]
        }
    })
}

/// Reads an elicitation answer (`ElicitResult`) that came `elapsed_ms` after the question: only
/// `accept` with `approve: true` approves; a decline or cancel faster than
/// [`HUMAN_MIN_ANSWER_MS`] is the host's, not a person's.
pub(super) fn host_answer(v: &Value, elapsed_ms: u64) -> HostAnswer {
    let fast = elapsed_ms < HUMAN_MIN_ANSWER_MS;
    match v.get("action").and_then(Value::as_str) {
        Some("accept") => {
            if v.pointer("/content/approve") == Some(&Value::Bool(true)) {
                // An unknown or missing scope approves this call only.
                let scope = v
                    .pointer("/content/scope")
                    .and_then(Value::as_str)
                    .and_then(Scope::parse)
                    .unwrap_or(Scope::Once);
                HostAnswer::Approve(scope)
            } else {
                HostAnswer::Person("the person did not tick approve in the host channel".to_string())
            }
        }
        Some(action @ ("decline" | "cancel")) if fast => HostAnswer::NotAsked(format!(
            "the host answered {action} without asking: {elapsed_ms} ms after the question, faster than a person can read it"
        )),
        Some("decline") => HostAnswer::Person("the person declined in the host channel".to_string()),
        Some("cancel") => {
            HostAnswer::Person("the person dismissed the question in the host channel".to_string())
        }
        _ => HostAnswer::Failed("the host's answer has no valid action".to_string()),
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
        (Basis::CredentialPath, _) => {
            "An argument names one of your credential files (a private key, .env, cloud or tool credentials), which is asked about whatever the tool does (arguments.confirm_credential_paths)"
                .into()
        }
        (Basis::RemoteCode, _) => {
            "An argument downloads code and runs it (curl ... | sh, $(wget ...)), which is asked about whatever the tool does (arguments.confirm_remote_code)"
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

/// The digest an approval is bound to: SHA-256 over the exact canonical JSON
/// ([`exact_canonical`]) of the snapshot digest, the tool name and the arguments, so an approval
/// cannot stand for any other call.
fn approval_binding(snapshot: &str, tool: &str, arguments: &Value) -> String {
    use sha2::{Digest, Sha256};
    let doc = json!({"snapshot": snapshot, "tool": tool, "arguments": arguments});
    let digest = Sha256::digest(exact_canonical(&doc));
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// RFC 8785 canonical JSON, except that integers are written with all their digits.
///
/// RFC 8785 writes every number as the IEEE double it denotes, so 9007199254740993 would be
/// shown and bound as 9007199254740992, a value the server does not receive. The strict parser
/// keeps every integer that fits 64 bits exactly (`u64`/`i64`), and every other number is one
/// that [`inexact_number`] found written exactly as the double's shortest form (a call with any
/// other is refused before it is bound), so this form is lossless for the arguments a person
/// approves: two argument texts that a server can read as different values never share it.
pub(super) fn exact_canonical(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_exact(v, &mut out);
    out
}

fn write_exact(v: &Value, out: &mut Vec<u8>) {
    use crate::snapshot::canonical::canonical_bytes;
    match v {
        Value::Number(n) if n.is_u64() || n.is_i64() => {
            out.extend_from_slice(n.to_string().as_bytes())
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_exact(item, out);
            }
            out.push(b']');
        }
        Value::Object(members) => {
            // RFC 8785 orders members by their names' UTF-16 code units.
            let mut keys: Vec<&String> = members.keys().collect();
            keys.sort_by(|a, b| a.encode_utf16().cmp(b.encode_utf16()));
            out.push(b'{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&canonical_bytes(&Value::String(k.clone())));
                out.push(b':');
                write_exact(&members[k], out);
            }
            out.push(b'}');
        }
        other => out.extend_from_slice(&canonical_bytes(other)),
    }
}

/// The first number in the JSON text `raw` (the arguments exactly as the server receives them)
/// whose value mcpguard cannot show and bind as written, with the value it would show instead.
///
/// An integer is exact when it fits 64 bits (the strict parser keeps it as `u64`/`i64`); any
/// other number is read as a double, and is exact only when the double's shortest form (what the
/// question shows) denotes the same decimal value as the text: `0.1` and `1e2` are, `2^53 + 1.0`
/// and `123456789012345678901234` are not. The scan assumes `raw` is valid JSON (the envelope
/// parse checked it) and skips strings.
pub(super) fn inexact_number(raw: &str) -> Option<(String, String)> {
    let bytes = raw.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < bytes.len()
                    && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let token = &raw[start..i];
                if let Some(shown) = shown_if_inexact(token) {
                    return Some((token.to_string(), shown));
                }
            }
            _ => i += 1,
        }
    }
    None
}

/// What mcpguard would show for the number `token` when that is not the value written.
fn shown_if_inexact(token: &str) -> Option<String> {
    let integer = !token.contains(['.', 'e', 'E']);
    if integer && (token.parse::<i64>().is_ok() || token.parse::<u64>().is_ok()) {
        return None;
    }
    let shown = match token
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
    {
        Some(n) => String::from_utf8(crate::snapshot::canonical::canonical_bytes(&Value::Number(
            n,
        )))
        .unwrap_or_default(),
        None => return Some("no finite number".to_string()),
    };
    if !integer && decimal(token) == decimal(&shown) {
        return None;
    }
    Some(shown)
}

/// A decimal number text as (negative, significant digits, exponent of the last digit), so two
/// texts of one value compare equal (`1.50e1` and `15`); `None` for text that is not a number.
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = format!("{int}{frac}");
    let mut exp = exp.checked_sub(i64::try_from(frac.len()).ok()?)?;
    let trimmed = digits.trim_start_matches('0');
    if trimmed.is_empty() {
        return Some((false, String::new(), 0));
    }
    let significant = trimmed.trim_end_matches('0');
    exp = exp.checked_add(i64::try_from(trimmed.len() - significant.len()).ok()?)?;
    Some((negative, significant.to_string(), exp))
}

/// The arguments as a person can read them: canonical JSON with control and invisible characters
/// made visible, cut at a length a dialog can show (the cut is said).
fn argument_summary(arguments: &Value) -> String {
    const MAX: usize = 1500;
    let text = canonical_text(arguments);
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

/// The arguments on one line: `name=value` pairs in canonical order, strings quoted, a long
/// value elided with its length, nested values shown only when short, and the line cut (with
/// how many pairs are left out) before it outgrows a dialog's line. Sanitized, so no value can
/// hide or fake text.
pub(super) fn compact_arguments(arguments: &Value) -> String {
    const LINE: usize = 160;
    let Value::Object(members) = arguments else {
        return compact_value(arguments);
    };
    if members.is_empty() {
        return "(none)".to_string();
    }
    let mut keys: Vec<&String> = members.keys().collect();
    keys.sort();
    let mut line = String::new();
    for (i, k) in keys.iter().enumerate() {
        let pair = format!("{}={}", elide(k, 32, false), compact_value(&members[*k]));
        if !line.is_empty() && line.chars().count() + pair.chars().count() > LINE {
            line.push_str(&format!(", … {} more", keys.len() - i));
            break;
        }
        if !line.is_empty() {
            line.push_str(", ");
        }
        line.push_str(&pair);
    }
    line
}

/// One argument value for the compact line.
fn compact_value(v: &Value) -> String {
    const SHORT: usize = 48;
    match v {
        Value::String(s) => elide(s, SHORT, true),
        Value::Array(items) => {
            let text = canonical_text(v);
            if text.chars().count() <= SHORT {
                crate::wire::sanitize::clean(&text, crate::wire::sanitize::Clean::LINE)
            } else {
                format!("[… {} items, {} chars]", items.len(), text.chars().count())
            }
        }
        Value::Object(members) => {
            let text = canonical_text(v);
            if text.chars().count() <= SHORT {
                crate::wire::sanitize::clean(&text, crate::wire::sanitize::Clean::LINE)
            } else {
                format!(
                    "{{… {} members, {} chars}}",
                    members.len(),
                    text.chars().count()
                )
            }
        }
        other => canonical_text(other),
    }
}

/// `s` sanitized, its first characters only when it has more than `max` (with its length), and
/// quoted as a JSON string when `quote`.
fn elide(s: &str, max: usize, quote: bool) -> String {
    let n = s.chars().count();
    let (head, cut) = if n > max {
        (
            s.chars().take(max.saturating_sub(8)).collect::<String>(),
            true,
        )
    } else {
        (s.to_string(), false)
    };
    let shown = if quote {
        serde_json::to_string(&head).unwrap_or_default()
    } else {
        head
    };
    let shown = crate::wire::sanitize::clean(&shown, crate::wire::sanitize::Clean::LINE);
    if cut {
        let open = shown.strip_suffix('"').unwrap_or(&shown);
        let close = if quote { "\"" } else { "" };
        format!("{open}…{close} ({n} chars)")
    } else {
        shown
    }
}

/// The exact canonical text of `v` ([`exact_canonical`]): what the person reads is the value the
/// server receives.
fn canonical_text(v: &Value) -> String {
    String::from_utf8(exact_canonical(v)).unwrap_or_default()
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
