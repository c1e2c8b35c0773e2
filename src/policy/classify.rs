//! What the policy decides about one call: whether a reviewed tool is refused, and how a call is
//! classified (side effect, idempotency, confirmation) and why.

use super::*;

impl Policy {
    /// Why the policy refuses a reviewed tool outright, if it does. Refused tools are left out of
    /// `tools/list` and calls to them are refused; nothing here can make an unreviewed tool
    /// usable.
    pub fn refusal(&self, tool: &str) -> Option<String> {
        if self.review.refused_tools.iter().any(|t| t == tool) {
            return Some(format!(
                "the local policy refuses the tool {tool:?} (review.refused_tools)"
            ));
        }
        if self.writes.default == Unclassified::Refuse && !self.writes.tools.contains_key(tool) {
            return Some(format!(
                "the tool {tool:?} is not classified in the local policy, which refuses unclassified tools (writes.default = \"refuse\"); add a [writes.tools.{tool}] table to use it"
            ));
        }
        None
    }

    /// Classifies a call to a reviewed tool. `has_authority_channel` is true when the review maps
    /// any argument to the `authority` input channel.
    ///
    /// The rules, in order: an unclassified tool is a write; a tool the policy classifies as a
    /// read is nevertheless a write when it has an authority channel (and then needs
    /// confirmation whatever its read classification said, because that decision was about a
    /// read); otherwise the tool's own `confirmation` applies. The confirmation mode turns the
    /// result into a decision.
    pub fn classify(&self, tool: &str, has_authority_channel: bool) -> Classification {
        let class = self.writes.tools.get(tool);
        let (side_effect, basis) = match class {
            None => (None, Basis::Unclassified),
            Some(c) if c.side_effect == SideEffect::Read && has_authority_channel => {
                (None, Basis::AuthorityChannel)
            }
            Some(c) => (Some(c.side_effect), Basis::Policy),
        };
        let is_write = side_effect != Some(SideEffect::Read);
        let needs_confirmation = match (basis, class) {
            (Basis::Policy, Some(c)) => {
                c.confirmation == ConfirmationRequirement::TrustedConfirmationRequired
            }
            _ => true,
        };
        let decision = if let Some(reason) = self.refusal(tool) {
            Decision::Refuse(reason)
        } else if !needs_confirmation {
            Decision::Forward
        } else {
            match self.confirmation.mode {
                ConfirmationMode::Elicit => Decision::Confirm,
                ConfirmationMode::Allow => Decision::ForwardUnconfirmed,
                ConfirmationMode::Deny => Decision::Refuse(format!(
                    "the tool {tool:?} needs confirmation and the local policy refuses such calls (confirmation.mode = \"deny\"); classify it in [writes.tools.{tool}] or set confirmation.mode = \"elicit\""
                )),
            }
        };
        Classification {
            side_effect,
            idempotency: class.map_or(Idempotency::Unknown, |c| c.idempotency),
            is_write,
            needs_confirmation,
            basis,
            decision,
        }
    }
}

/// How the policy treats one call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classification {
    /// The side-effect class, when known. `None` is a write of unknown kind: the tool is
    /// unclassified, or classified as a read but carries an authority channel.
    pub side_effect: Option<SideEffect>,
    pub idempotency: Idempotency,
    pub is_write: bool,
    pub needs_confirmation: bool,
    pub basis: Basis,
    pub decision: Decision,
}

/// Where a classification came from, for audit records and error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The tool's `[writes.tools.<name>]` table.
    Policy,
    /// The policy does not classify the tool, so it is a write.
    Unclassified,
    /// Classified as a read, but an `authority` input channel makes it a write.
    AuthorityChannel,
}

/// What the gate does with the call once the snapshot checks have passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Forward without asking.
    Forward,
    /// Ask the user through the host; forward only on approval.
    Confirm,
    /// Forward without asking although confirmation was due (`confirmation.mode = "allow"`).
    ForwardUnconfirmed,
    /// Refuse, for the reason given (which says how to change the policy).
    Refuse(String),
}

impl SideEffect {
    /// The seed 004 spelling, for `operationPolicy` objects.
    pub fn as_str(self) -> &'static str {
        match self {
            SideEffect::Read => "read",
            SideEffect::Create => "create",
            SideEffect::Update => "update",
            SideEffect::Delete => "delete",
        }
    }
}

impl Idempotency {
    pub fn as_str(self) -> &'static str {
        match self {
            Idempotency::Idempotent => "idempotent",
            Idempotency::AtMostOnce => "at-most-once",
            Idempotency::NonIdempotent => "non-idempotent",
            Idempotency::Unknown => "unknown",
        }
    }
}

impl ConfirmationRequirement {
    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmationRequirement::NotRequired => "not-required",
            ConfirmationRequirement::TrustedConfirmationRequired => "trusted-confirmation-required",
        }
    }
}
