//! What the policy decides about one call: whether a reviewed tool is refused, and how a call is
//! classified (side effect, idempotency, confirmation) and why.

use super::*;

/// What the reviewed snapshot says about a tool that bears on its classification: the operation
/// class the reviewer recorded (the review's `sideEffect`, seed 004's vocabulary) and whether the
/// review maps any argument to the `authority` input channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reviewed {
    pub side_effect: Option<SideEffect>,
    pub authority: bool,
}

impl Reviewed {
    /// No operation class recorded, no authority channel (an unpinned tool, or an old review).
    pub const NONE: Reviewed = Reviewed {
        side_effect: None,
        authority: false,
    };
    /// No operation class recorded, but an authority channel.
    pub const AUTHORITY: Reviewed = Reviewed {
        side_effect: None,
        authority: true,
    };

    /// A review that records `side_effect`, with or without an authority channel.
    pub fn class(side_effect: SideEffect, authority: bool) -> Reviewed {
        Reviewed {
            side_effect: Some(side_effect),
            authority,
        }
    }
}

impl Policy {
    /// The operation class the policy takes from the review, when `[writes] trust_reviews`
    /// lets it.
    fn trusted_review(&self, reviewed: Reviewed) -> Option<SideEffect> {
        reviewed.side_effect.filter(|_| self.writes.trust_reviews)
    }

    /// Why the policy refuses a reviewed tool outright, if it does. Refused tools are left out of
    /// `tools/list` and calls to them are refused; nothing here can make an unreviewed tool
    /// usable. `reviewed` is the operation class the tool's review records: with `trust_reviews`
    /// it classifies the tool as a `[writes.tools.<name>]` table would.
    pub fn refusal(&self, tool: &str, reviewed: Option<SideEffect>) -> Option<String> {
        if self.review.refused_tools.iter().any(|t| t == tool) {
            return Some(format!(
                "the local policy refuses the tool {tool:?} (review.refused_tools)"
            ));
        }
        let classified = self.writes.tools.contains_key(tool)
            || self
                .trusted_review(Reviewed {
                    side_effect: reviewed,
                    authority: false,
                })
                .is_some();
        if self.writes.default == Unclassified::Refuse && !classified {
            return Some(format!(
                "the tool {tool:?} is not classified in the local policy, which refuses unclassified tools (writes.default = \"refuse\"); add a [writes.tools.{tool}] table to use it{}",
                if self.writes.trust_reviews {
                    ", or record its operation class in the review (`mcpguard review --side-effect`)"
                } else {
                    ""
                }
            ));
        }
        None
    }

    /// Classifies a call to a reviewed tool, from what its review says (`reviewed`) and the
    /// policy.
    ///
    /// The rules, in order: the tool's `[writes.tools.<name>]` table decides when there is one;
    /// otherwise the operation class its review records, when `[writes] trust_reviews` is on
    /// (the default), with the confirmation default of that class; otherwise the tool is
    /// unclassified, and a write. A tool classified as a read, by either, is nevertheless a
    /// write when its review has an authority channel (and then needs confirmation whatever its
    /// read classification said, because that decision was about a read). The confirmation
    /// mode turns the result into a decision.
    pub fn classify(&self, tool: &str, reviewed: Reviewed) -> Classification {
        let table = self.writes.tools.get(tool);
        let (declared, confirmation, idempotency, basis) =
            match (table, self.trusted_review(reviewed)) {
                (Some(c), _) => (
                    Some(c.side_effect),
                    c.confirmation,
                    c.idempotency,
                    Basis::Policy,
                ),
                (None, Some(effect)) => (
                    Some(effect),
                    ConfirmationRequirement::default_for(effect),
                    Idempotency::Unknown,
                    Basis::Review,
                ),
                (None, None) => (
                    None,
                    ConfirmationRequirement::TrustedConfirmationRequired,
                    Idempotency::Unknown,
                    Basis::Unclassified,
                ),
            };
        let (side_effect, basis) = if declared == Some(SideEffect::Read) && reviewed.authority {
            (None, Basis::AuthorityChannel)
        } else {
            (declared, basis)
        };
        let is_write = side_effect != Some(SideEffect::Read);
        let needs_confirmation = match basis {
            Basis::Policy | Basis::Review => {
                confirmation == ConfirmationRequirement::TrustedConfirmationRequired
            }
            Basis::Unclassified
            | Basis::AuthorityChannel
            | Basis::CredentialPath
            | Basis::RemoteCode => true,
        };
        let decision = if let Some(reason) = self.refusal(tool, reviewed.side_effect) {
            Decision::Refuse(reason)
        } else if !needs_confirmation {
            Decision::Forward
        } else {
            self.confirmation_decision(tool)
        };
        Classification {
            side_effect,
            idempotency,
            is_write,
            needs_confirmation,
            basis,
            decision,
        }
    }
}

impl Policy {
    /// What the policy does with a call of `tool` that needs confirmation: ask, forward
    /// unconfirmed or refuse, by `confirmation.mode`.
    fn confirmation_decision(&self, tool: &str) -> Decision {
        match self.confirmation.mode {
            ConfirmationMode::Elicit => Decision::Confirm,
            ConfirmationMode::Allow => Decision::ForwardUnconfirmed,
            ConfirmationMode::Deny => Decision::Refuse(format!(
                "the tool {tool:?} needs confirmation and the local policy refuses such calls (confirmation.mode = \"deny\"); classify it in [writes.tools.{tool}] or set confirmation.mode = \"elicit\""
            )),
        }
    }

    /// `class` for a call of `tool` one of whose arguments asks the person whatever the
    /// tool's class (`basis`: [`Basis::CredentialPath`] or [`Basis::RemoteCode`], found by
    /// `Content::asked_argument`): a call the policy would forward unasked needs confirmation
    /// instead, as a write would; a refusal stays a refusal, and a call that is asked about
    /// already is asked about as it was.
    pub fn confirm_argument(
        &self,
        tool: &str,
        class: Classification,
        basis: Basis,
    ) -> Classification {
        if class.needs_confirmation || matches!(class.decision, Decision::Refuse(_)) {
            return class;
        }
        let decision = match (self.confirmation_decision(tool), basis.argument()) {
            (Decision::Refuse(_), Some((does, key))) => Decision::Refuse(format!(
                "the call of {tool:?} {does}, which needs confirmation, and the local policy refuses such calls (confirmation.mode = \"deny\"); set confirmation.mode = \"elicit\" to be asked, or {key} = false"
            )),
            (other, _) => other,
        };
        Classification {
            needs_confirmation: true,
            basis,
            decision,
            ..class
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
    /// The operation class recorded in the tool's review (`[writes] trust_reviews`).
    Review,
    /// The policy does not classify the tool, so it is a write.
    Unclassified,
    /// Classified as a read (by the policy or the review), but an `authority` input channel
    /// makes it a write.
    AuthorityChannel,
    /// An argument names one of the user's credential files
    /// (`arguments.confirm_credential_paths`), which needs confirmation whatever the class.
    CredentialPath,
    /// An argument downloads code and runs it (`arguments.confirm_remote_code`), which needs
    /// confirmation whatever the class.
    RemoteCode,
}

impl Basis {
    /// For the bases that come from one call's arguments: what the argument does, in words,
    /// and the policy key that turns the question off.
    pub fn argument(self) -> Option<(&'static str, &'static str)> {
        match self {
            Basis::CredentialPath => Some((
                "names one of your credential files",
                "arguments.confirm_credential_paths",
            )),
            Basis::RemoteCode => Some((
                "downloads code and runs it",
                "arguments.confirm_remote_code",
            )),
            _ => None,
        }
    }
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
    /// Every class, in seed 004's order.
    pub const ALL: [SideEffect; 4] = [
        SideEffect::Read,
        SideEffect::Create,
        SideEffect::Update,
        SideEffect::Delete,
    ];

    /// The class spelled `text` in seed 004's vocabulary (`read`, `create`, `update`, `delete`).
    pub fn parse(text: &str) -> Option<SideEffect> {
        SideEffect::ALL.into_iter().find(|e| e.as_str() == text)
    }

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
    /// What a class needs when nothing says otherwise: a read none, a write the person's.
    pub fn default_for(effect: SideEffect) -> ConfirmationRequirement {
        match effect {
            SideEffect::Read => ConfirmationRequirement::NotRequired,
            _ => ConfirmationRequirement::TrustedConfirmationRequired,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ConfirmationRequirement::NotRequired => "not-required",
            ConfirmationRequirement::TrustedConfirmationRequired => "trusted-confirmation-required",
        }
    }
}
