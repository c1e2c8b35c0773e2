//! Live catalogue walks: `tools/list` answered from the snapshot after a live walk, the walks
//! mcpguard runs itself (one generation per walk, only a walk that started after a call verifies
//! it), and the release of held calls and lists when a walk completes or fails.

use super::*;
use crate::gate::content::label_names;
use crate::policy::Injection;

/// The longest a live walk may take, whatever the per-call timeout: a host gives a call about a
/// minute (Claude Desktop cancels a stdio call after some 60 s), and the person may already have
/// spent part of it answering the question.
pub const MAX_WALK_MS: u64 = 30_000;

impl Session {
    pub(super) fn host_tools_list(
        &mut self,
        id: Id,
        msg: &Message<'_>,
        _line: Bytes,
        out: &mut Vec<Out>,
    ) {
        let params = msg
            .params
            .and_then(|p| strict::parse_strict_str(p.get()).ok());
        if params.as_ref().and_then(|p| p.get("cursor")).is_some() {
            refuse_to_host(
                Some(&id),
                message::INVALID_PARAMS,
                "invalid cursor: mcpguard lists every reviewed tool on one page",
                out,
            );
            return;
        }
        match &self.config.mode {
            Mode::Unpinned => {
                self.forward_request(id, methods::TOOLS_LIST, PendingKind::Plain, _line, out)
            }
            Mode::NoManifest => {
                respond(out, &id, json!({"tools": []}));
            }
            Mode::Pinned(_) => {
                if self.invalidated.is_some() {
                    respond(out, &id, self.list_result(Vec::new()));
                    return;
                }
                let needs = self.need_walk(out);
                self.held.push(Held {
                    id,
                    needs,
                    what: HeldWhat::List,
                });
            }
        }
    }

    /// Returns the walk generation that satisfies a request arriving now: one that starts after
    /// it. Starts a walk if none runs; otherwise asks for another one after the current.
    pub(super) fn need_walk(&mut self, out: &mut Vec<Out>) -> u64 {
        if self.walk.is_some() {
            self.walk_again = true;
            return self.last_generation + 1;
        }
        self.start_walk(out);
        self.last_generation
    }

    pub(super) fn start_walk(&mut self, out: &mut Vec<Out>) {
        self.last_generation += 1;
        let generation = self.last_generation;
        self.walk = Some(Walk {
            generation,
            started_ms: self.clock_ms,
            pages: Vec::new(),
            cursors: HashSet::new(),
            restart: false,
            restarts: 0,
        });
        self.request_to_server(
            methods::TOOLS_LIST,
            Some(json!({})),
            Purpose::ListPage { generation },
            out,
        );
    }

    pub(super) fn walk_page(&mut self, generation: u64, msg: &Message<'_>, out: &mut Vec<Out>) {
        let Some(walk) = self.walk.as_mut().filter(|w| w.generation == generation) else {
            return;
        };
        let page = match (msg.kind, msg.result) {
            (Kind::Response, Some(raw)) => match catalogue::parse_page(raw) {
                Ok(p) => p,
                Err(e) => return self.walk_failed(&e, out),
            },
            _ => {
                let err = msg
                    .error
                    .map(|e| refusal::clean_error_text(e.get()))
                    .unwrap_or_default();
                return self.walk_failed(
                    &format!("the server answered the live tools/list with an error: {err}"),
                    out,
                );
            }
        };
        let next = page.next_cursor.clone();
        walk.pages.push(page);
        if let Some(cursor) = next {
            if !walk.cursors.insert(cursor.clone()) {
                return self.walk_failed(
                    &format!("the live tools/list repeats the cursor {cursor:?}"),
                    out,
                );
            }
            if walk.pages.len() >= self.config.max_pages {
                let max = self.config.max_pages;
                return self.walk_failed(
                    &format!("the live tools/list has more than {max} pages"),
                    out,
                );
            }
            self.request_to_server(
                methods::TOOLS_LIST,
                Some(json!({"cursor": cursor})),
                Purpose::ListPage { generation },
                out,
            );
            return;
        }
        // The walk is complete.
        let Some(walk) = self.walk.take() else { return };
        if walk.restart && !self.bound {
            if walk.restarts >= 10 {
                return self.walk_failed(
                    "the server kept announcing tool list changes during verification",
                    out,
                );
            }
            self.walk = Some(Walk {
                generation,
                started_ms: walk.started_ms,
                pages: Vec::new(),
                cursors: HashSet::new(),
                restart: false,
                restarts: walk.restarts + 1,
            });
            self.request_to_server(
                methods::TOOLS_LIST,
                Some(json!({})),
                Purpose::ListPage { generation },
                out,
            );
            return;
        }
        match LiveCatalogue::from_pages(walk.pages) {
            Ok(live) => self.walk_complete(generation, live, out),
            Err(e) => self.walk_failed(&e, out),
        }
    }

    pub(super) fn walk_complete(
        &mut self,
        generation: u64,
        live: LiveCatalogue,
        out: &mut Vec<Out>,
    ) {
        let Mode::Pinned(pin) = self.config.mode.clone() else {
            return;
        };
        if !self.bound && self.invalidated.is_none() {
            self.bound = true;
            let drifted: Vec<String> = pin
                .tools
                .iter()
                .filter_map(|t| live.drift(&pin.server_key, t))
                .collect();
            out.push(Out::Diag(
                Level::Info,
                format!(
                    "the review is bound: {} of {} reviewed tools match the live server (snapshot {})",
                    pin.tools.len() - drifted.len(),
                    pin.tools.len(),
                    &pin.digest[..12.min(pin.digest.len())]
                ),
            ));
            for d in drifted {
                out.push(Out::Diag(Level::Warn, format!("{d}; it is not served")));
            }
            self.announce_labelled_tools(&pin, &live, out);
        }
        self.live = Some(live);
        let (ready, waiting): (Vec<Held>, Vec<Held>) = std::mem::take(&mut self.held)
            .into_iter()
            .partition(|h| h.needs <= generation);
        self.held = waiting;
        for h in ready {
            self.release(h, &pin, out);
        }
        if self.walk_again {
            self.walk_again = false;
            if !self.held.is_empty() {
                self.start_walk(out);
            }
        }
    }

    /// A held request's walk completed: answer the list, or dispatch or refuse the call.
    pub(super) fn release(&mut self, h: Held, pin: &Pin, out: &mut Vec<Out>) {
        match h.what {
            HeldWhat::List => {
                // The tools served with a label note, for the audit record.
                let mut noted: Vec<&str> = Vec::new();
                let tools: Vec<Value> = match (&self.invalidated, &self.live) {
                    (None, Some(live)) => pin
                        .tools
                        .iter()
                        .filter(|t| live.drift(&pin.server_key, t).is_none())
                        .map(|t| match self.labelled_tools.get(&t.name) {
                            Some(labelled) => {
                                noted.push(&t.name);
                                labelled.tool.clone()
                            }
                            None => t.tool.clone(),
                        })
                        .collect(),
                    _ => Vec::new(),
                };
                self.audit(out, || AuditNote {
                    detail: Some(if noted.is_empty() {
                        format!("{} reviewed tools listed", tools.len())
                    } else {
                        format!(
                            "{} reviewed tools listed; with a label note on the description: {}",
                            tools.len(),
                            noted.join(", ")
                        )
                    }),
                    ..AuditNote::new(EventKind::ListServed)
                });
                respond(out, &h.id, self.list_result(tools));
            }
            HeldWhat::Call(call) => {
                let tool = call.tool.clone();
                if let Some(why) = &self.invalidated {
                    let r = Refusal::new(code::REVIEW_INVALIDATED, Category::Drift, format!("refused {tool:?} before dispatch: {why}; capture and review the server again"));
                    self.refuse_call(&h.id, &tool, r, out);
                    return;
                }
                let drift = match (pin.tool(&tool), &self.live) {
                    (Some(t), Some(live)) => live.drift(&pin.server_key, t),
                    _ => Some(format!("tool {tool:?} could not be verified")),
                };
                if let Some(d) = drift {
                    self.invalidate(
                        &format!("the live server changed a reviewed tool ({d})"),
                        out,
                    );
                    let r = Refusal::new(code::TOOL_DRIFT, Category::Drift, format!("refused {tool:?} before dispatch: {d}; capture and review the server again"));
                    self.refuse_call(&h.id, &tool, r, out);
                    return;
                }
                self.dispatch_call(call, out);
            }
        }
    }

    /// Says once, when the review is bound, which served tools carry a label note on their
    /// description and where the labels are (never the text): the session is made before
    /// anything can be said, and the person should hear it before the model reads the list, as
    /// a labelled result is warned about when it passes.
    fn announce_labelled_tools(&self, pin: &Pin, live: &LiveCatalogue, out: &mut Vec<Out>) {
        let setting = match self.config.content.injection {
            Injection::Refuse => {
                "results.injection = \"refuse\", which withholds results, not reviewed tools"
            }
            _ => "results.injection = \"label\"",
        };
        for t in &pin.tools {
            let Some(labelled) = self.labelled_tools.get(&t.name) else {
                continue;
            };
            if live.drift(&pin.server_key, t).is_some() {
                continue;
            }
            let where_: Vec<&str> = labelled.found.iter().map(|f| f.pointer.as_str()).collect();
            out.push(Out::Diag(
                Level::Warn,
                format!(
                    "tool {:?}: its reviewed description carries instruction-like text ({} at {}); it is served with a note telling the model it is data ({setting})",
                    t.name,
                    label_names(&labelled.found).join(", "),
                    where_.join(", ")
                ),
            ));
        }
    }

    /// How long a live walk may take before everything waiting on it is refused: the per-call
    /// timeout (a walk is part of serving a call), at most [`MAX_WALK_MS`].
    pub(super) fn walk_bound_ms(&self) -> u64 {
        match self.config.call_timeout_ms {
            0 => MAX_WALK_MS,
            t => t.min(MAX_WALK_MS),
        }
    }

    /// Ends a walk that passed its bound (a server that stopped answering `tools/list`, or a
    /// walk request withheld after an audit failure): every held request is refused, and a late
    /// page of it finds nothing.
    pub(super) fn expire_walk(&mut self, out: &mut Vec<Out>) {
        let bound = self.walk_bound_ms();
        let Some(generation) = self
            .walk
            .as_ref()
            .filter(|w| self.clock_ms.saturating_sub(w.started_ms) >= bound)
            .map(|w| w.generation)
        else {
            return;
        };
        self.own_requests
            .retain(|_, p| !matches!(p, Purpose::ListPage { generation: g } if *g == generation));
        let why = format!(
            "the server did not complete the live tools/list within {} ms (the bound is limits.call_timeout, at most {} s); the call was not run and can be retried once the server answers again",
            bound,
            MAX_WALK_MS / 1000
        );
        self.walk_failed_with(&why, true, out);
    }

    pub(super) fn walk_failed(&mut self, why: &str, out: &mut Vec<Out>) {
        self.walk_failed_with(why, false, out);
    }

    /// Refuses everything held for the walk; `retryable` when a later walk may succeed.
    fn walk_failed_with(&mut self, why: &str, retryable: bool, out: &mut Vec<Out>) {
        self.walk = None;
        self.walk_again = false;
        out.push(Out::Diag(
            Level::Warn,
            format!("live verification failed: {why}"),
        ));
        for h in std::mem::take(&mut self.held) {
            match h.what {
                HeldWhat::List => refuse_to_host(
                    Some(&h.id),
                    codes::VERIFICATION_FAILED,
                    &format!("tools/list could not be verified against the live server: {why}"),
                    out,
                ),
                HeldWhat::Call(Call { tool, .. }) => {
                    let mut r = Refusal::new(code::VERIFICATION_FAILED, Category::Upstream, format!("refused {tool:?} before dispatch: the live catalogue could not be verified ({why})"));
                    r.retryable = retryable;
                    self.refuse_call(&h.id, &tool, r, out);
                }
            }
        }
    }
}
