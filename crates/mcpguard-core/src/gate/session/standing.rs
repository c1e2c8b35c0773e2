//! Standing approvals, narrowly, against the fatigue of being asked the same harmless question
//! again and again: "allow identical calls (same tool, same canonical arguments) for N minutes"
//! (`confirmation.allow_identical`, `identical_for`) and "allow this tool for this session"
//! (`confirmation.allow_tool_for_session`). Both are off unless the policy allows them, are
//! bound to the pinned snapshot (the binding digest includes its digest; a session has one pin),
//! expire (identical calls after `identical_for`, a tool's with the process), never cover a call
//! whose review marks an argument as `authority`, and are dropped when the review is
//! invalidated. Every use is audited with the approval it rests on.

use super::*;
use crate::policy::Scope;

/// One standing approval.
#[derive(Debug, Clone)]
pub(super) struct Standing {
    /// What it covers.
    what: Covers,
    /// The session clock after which it no longer holds (`None`: until mcpguard ends).
    until_ms: Option<u64>,
    /// The approval it was given with, for the audit log.
    from: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Covers {
    /// Calls whose binding digest (snapshot, tool, canonical arguments) is this one.
    Identical(String),
    /// Every call of this tool.
    Tool(String),
}

impl Session {
    /// The scopes the person may choose for `call`: always `once`; the standing ones the policy
    /// allows, unless an argument of the tool is an authority input.
    pub(super) fn scopes_for(&self, call: &Call) -> Vec<Scope> {
        let c = &self.config.policy.confirmation;
        let mut scopes = vec![Scope::Once];
        if !call.authority && call.asked.is_none() {
            if c.allow_identical {
                scopes.push(Scope::Identical);
            }
            if c.allow_tool_for_session {
                scopes.push(Scope::Tool);
            }
        }
        scopes
    }

    /// Whether a standing approval covers `call` (then it is marked approved and the use is
    /// audited); expired ones are forgotten on the way.
    pub(super) fn standing_covers(
        &mut self,
        call: &mut Call,
        arguments: &Value,
        out: &mut Vec<Out>,
    ) -> bool {
        if call.authority || call.asked.is_some() || self.invalidated.is_some() {
            return false;
        }
        let now = self.clock_ms;
        self.standing
            .retain(|s| s.until_ms.is_none_or(|until| now < until));
        let binding = self.binding_of(&call.tool, arguments);
        let Some(s) = self.standing.iter().find(|s| match &s.what {
            Covers::Identical(b) => *b == binding,
            Covers::Tool(t) => *t == call.tool,
        }) else {
            return false;
        };
        let what = match &s.what {
            Covers::Identical(_) => "identical calls".to_string(),
            Covers::Tool(t) => format!("every call of {t:?} for this session"),
        };
        let detail = format!(
            "covered by the standing approval {} ({what}); approval {binding}",
            s.from
        );
        out.push(Out::Diag(
            Level::Info,
            format!("call {} of {:?} is {detail}", call.id, call.tool),
        ));
        self.audit(out, || AuditNote {
            tool: Some(call.tool.clone()),
            arguments: Some(arguments.clone()),
            outcome: Some("confirmed"),
            detail: Some(detail),
            ..AuditNote::new(EventKind::CallConfirmed)
        });
        call.approval = Approval::Confirmed(binding);
        true
    }

    /// Records the standing approval the person chose with an approval, when the policy allows
    /// that scope for the call; returns what was granted, in words (for the answer and the
    /// audit record).
    pub(super) fn grant(&mut self, call: &Call, binding: &str, from: &str, scope: Scope) -> String {
        if scope == Scope::Once {
            return "this call only".to_string();
        }
        if !self.scopes_for(call).contains(&scope) {
            let why = if call.authority {
                "the review marks an argument of this tool as authority".to_string()
            } else if let Some(asked) = call.asked {
                let (does, key) = asked.words();
                format!("an argument {does}, which is asked about call by call ({key})")
            } else if scope == Scope::Identical {
                "the policy does not allow it (confirmation.allow_identical)".to_string()
            } else {
                "the policy does not allow it (confirmation.allow_tool_for_session)".to_string()
            };
            return format!(
                "this call only: a standing approval ({}) was asked for, but {why}",
                scope.name()
            );
        }
        let (what, until_ms, words) = match scope {
            Scope::Identical => {
                let ms = u64::try_from(self.config.policy.confirmation.identical_for.as_millis())
                    .unwrap_or(u64::MAX);
                (
                    Covers::Identical(binding.to_string()),
                    Some(self.clock_ms.saturating_add(ms)),
                    format!("identical calls for {} s", ms / 1000),
                )
            }
            _ => (
                Covers::Tool(call.tool.clone()),
                None,
                format!("every call of {:?} until mcpguard ends", call.tool),
            ),
        };
        self.standing.push(Standing {
            what,
            until_ms,
            from: from.to_string(),
        });
        words
    }
}
