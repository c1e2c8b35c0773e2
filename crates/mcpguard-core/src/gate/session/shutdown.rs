//! Invalidation and shutdown: a `list_changed` after binding invalidates the review for the rest
//! of the process (held calls refused, open questions withdrawn), and when the server goes away
//! every pending request is answered.

use super::*;

impl Session {
    /// The review no longer holds, for the rest of the process.
    pub(super) fn invalidate(&mut self, why: &str, out: &mut Vec<Out>) {
        if self.invalidated.is_some() {
            return;
        }
        self.invalidated = Some(why.to_string());
        // A standing approval was given for the reviewed tools as they were; none survives.
        self.standing.clear();
        self.audit(out, || AuditNote {
            detail: Some(why.to_string()),
            ..AuditNote::new(EventKind::ReviewInvalidated)
        });
        out.push(Out::Diag(
            Level::Error,
            format!("the review is invalidated: {why}. Every further call is refused; capture and review the server again, then restart mcpguard"),
        ));
        for p in self.host_requests.values_mut() {
            if let PendingKind::Call(call) = &mut p.kind {
                call.indeterminate = true;
            }
        }
        // A question still with the person is about a call that can no longer run: withdraw it
        // rather than let the person approve something that will be refused anyway.
        self.withdraw_questions(
            "mcpguard: the review was invalidated",
            |tool| {
                Refusal::new(
                    code::REVIEW_INVALIDATED,
                    Category::Drift,
                    format!("refused {tool:?} before dispatch: {why}"),
                )
            },
            out,
        );
        let queued = std::mem::take(&mut self.serial_queue);
        for Call { id, tool, .. } in queued {
            let r = Refusal::new(
                code::REVIEW_INVALIDATED,
                Category::Drift,
                format!("refused {tool:?} before dispatch: {why}"),
            );
            self.refuse_call(&id, &tool, r, out);
        }
        let held = std::mem::take(&mut self.held);
        for h in held {
            match h.what {
                HeldWhat::List => respond(out, &h.id, self.list_result(Vec::new())),
                HeldWhat::Call(Call { tool, .. }) => {
                    let r = Refusal::new(
                        code::REVIEW_INVALIDATED,
                        Category::Drift,
                        format!("refused {tool:?} before dispatch: {why}"),
                    );
                    self.refuse_call(&h.id, &tool, r, out);
                }
            }
        }
    }

    /// The server's output ended (it exited or closed stdout): every pending host request gets
    /// an answer, so no host waits forever. A dispatched call's outcome is unknown.
    pub fn server_closed(&mut self, why: &str, out: &mut Vec<Out>) {
        let mut pending: Vec<(Id, Pending)> = self.host_requests.drain();
        pending.sort_by_cached_key(|(id, _)| id.to_string());
        for (id, p) in pending {
            match p.kind {
                PendingKind::Call(call) => {
                    let tool = call.tool;
                    let mut r = Refusal::new(
                        code::UNKNOWN_DISPATCH_OUTCOME,
                        Category::UnknownOutcome,
                        format!("the MCP server {why} while {tool:?} ran; its outcome is unknown. Do not retry automatically: check what the call did"),
                    );
                    r.outcome_known = false;
                    self.refuse_call(&id, &tool, r, out);
                }
                _ => out.push(Out::Host(Bytes::from(message::error_response(
                    Some(&id),
                    codes::SERVER_GONE,
                    &format!(
                        "mcpguard: the MCP server {why} before answering this {} request",
                        p.method
                    ),
                    None,
                )))),
            }
        }
        for h in std::mem::take(&mut self.held) {
            match h.what {
                HeldWhat::List => refuse_to_host(
                    Some(&h.id),
                    codes::SERVER_GONE,
                    &format!("the MCP server {why} before tools/list was verified"),
                    out,
                ),
                HeldWhat::Call(Call { tool, .. }) => {
                    let r = Refusal::new(
                        code::UPSTREAM_ERROR,
                        Category::Upstream,
                        format!("the MCP server {why}; {tool:?} was not dispatched"),
                    );
                    self.refuse_call(&h.id, &tool, r, out);
                }
            }
        }
        self.withdraw_questions(
            "mcpguard: the MCP server is gone",
            |tool| {
                Refusal::new(
                    code::UPSTREAM_ERROR,
                    Category::Upstream,
                    format!("the MCP server {why}; {tool:?} was not dispatched"),
                )
            },
            out,
        );
        for Call { id, tool, .. } in std::mem::take(&mut self.serial_queue) {
            let r = Refusal::new(
                code::UPSTREAM_ERROR,
                Category::Upstream,
                format!("the MCP server {why}; {tool:?} was not dispatched"),
            );
            self.refuse_call(&id, &tool, r, out);
        }
        self.own_requests.clear();
        self.server_requests.clear();
        self.walk = None;
        self.modern_server_closed(why, out);
    }
}
