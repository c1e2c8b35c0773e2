//! The refusal contract: the shape of every refusal mcpguard returns for a tool call (stable code,
//! category, retryable, outcomeKnown, carried in `_meta["dev.mcpguard/refusal"]`), and the hygiene
//! of server error text passed on to the model.
//!
//! Plain data and pure functions, and the one process-wide bound on error text (`errors.max_length`,
//! set once at start); it knows nothing of the session or of processes.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{json, Value};

use crate::wire::sanitize::{self, Clean};

/// The error categories of the refusal contract (seed 004).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Category {
    Input,
    Policy,
    Drift,
    Authorization,
    Upstream,
    OutputContract,
    UnknownOutcome,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Input => "input",
            Category::Policy => "policy",
            Category::Drift => "drift",
            Category::Authorization => "authorization",
            Category::Upstream => "upstream",
            Category::OutputContract => "output-contract",
            Category::UnknownOutcome => "unknown-outcome",
        }
    }
}

/// A refusal or replacement of a tool call's outcome, as the host will see it.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub code: &'static str,
    pub category: Category,
    pub retryable: bool,
    pub outcome_known: bool,
    pub message: String,
}

impl Refusal {
    pub fn new(code: &'static str, category: Category, message: impl Into<String>) -> Self {
        Refusal {
            code,
            category,
            retryable: false,
            outcome_known: true,
            message: message.into(),
        }
    }

    /// The contract object: stable code, category, retryable, outcomeKnown, message.
    pub fn contract(&self) -> Value {
        json!({
            "code": self.code,
            "category": self.category.as_str(),
            "retryable": self.retryable,
            "outcomeKnown": self.outcome_known,
            "message": self.message,
        })
    }

    /// The tool execution error result (`isError: true`) carrying the contract.
    ///
    /// The contract always travels in `_meta` under [`REFUSAL_META`], and also as
    /// `structuredContent` unless the tool may declare an `outputSchema`
    /// (`tool_may_declare_output_schema`): TypeScript SDK clients and the Inspector validate a
    /// present `structuredContent` against the tool's `outputSchema` even when `isError` is
    /// true, and would turn the refusal into a schema error that hides its code and message.
    pub fn to_result(&self, tool_may_declare_output_schema: bool) -> Value {
        let contract = self.contract();
        let mut result = json!({
            "content": [{"type": "text", "text": format!("mcpguard: {} [{}]", self.message, self.code)}],
            "isError": true,
            "_meta": {REFUSAL_META: contract.clone()}
        });
        if !tool_may_declare_output_schema {
            result["structuredContent"] = contract;
        }
        result
    }
}

/// The `_meta` key under which every refusal carries its contract.
pub const REFUSAL_META: &str = "dev.mcpguard/refusal";

/// Stable refusal codes.
pub mod code {
    pub const NOT_PINNED: &str = "not_pinned";
    pub const REVIEW_INVALIDATED: &str = "review_invalidated";
    pub const TOOL_DRIFT: &str = "tool_drift";
    pub const INVALID_ARGUMENTS: &str = "invalid_arguments";
    /// The arguments carry a member the reviewed `inputSchema` does not declare (closed
    /// arguments, policy `[arguments]`).
    pub const UNDECLARED_ARGUMENT: &str = "undeclared_argument";
    pub const CAPABILITY_DENIED: &str = "capability_denied";
    /// A call's arguments carry a secret-shaped value (policy `[secrets]`, `secrets.arguments`).
    pub const SECRET_IN_ARGUMENTS: &str = "secret_in_arguments";
    /// An argument value breaks a local rule (`[arguments.tools.<name>.rules]`) or names a
    /// cloud metadata address (`arguments.refuse_metadata_urls`).
    pub const ARGUMENT_RULE: &str = "argument_rule";
    /// A result carried secret-shaped values and the policy refuses such results
    /// (`secrets.results = "refuse"`).
    pub const SECRET_IN_RESULT: &str = "secret_in_result";
    /// A result carried instruction-like text and the policy refuses such results
    /// (`results.injection = "refuse"`).
    pub const INJECTION_IN_RESULT: &str = "injection_in_result";
    pub const OUTPUT_CONTRACT: &str = "output_contract_violation";
    pub const UNKNOWN_DISPATCH_OUTCOME: &str = "UNKNOWN_DISPATCH_OUTCOME";
    pub const UPSTREAM_ERROR: &str = "upstream_error";
    pub const VERIFICATION_FAILED: &str = "verification_failed";
    pub const TOO_MANY_CALLS: &str = "too_many_calls";
    /// A write needs a person's approval and none can be asked for (the host did not advertise
    /// elicitation, or the policy refuses such calls).
    pub const APPROVAL_REQUIRED: &str = "approval_required";
    /// The person asked did not approve: declined, cancelled, did not answer in time, or the
    /// host's answer was an error or malformed.
    pub const CONSENT_REQUIRED: &str = "consent_required";
}

/// Longest error text from the server that is passed on (after sanitizing), in characters,
/// unless the policy's `errors.max_length` says otherwise.
pub const MAX_ERROR_TEXT: usize = 2048;

/// The policy's `errors.max_length`, set once by the proxy before the session starts. Server
/// error text is cleaned in many places (results, JSON-RPC errors, walks, handshakes, both
/// eras), and one process serves one policy, so the bound lives here rather than being
/// threaded through each of them.
static MAX_ERROR_CHARS: AtomicUsize = AtomicUsize::new(MAX_ERROR_TEXT);

/// Sets the longest server error text, in characters, that reaches the host
/// (`errors.max_length`).
pub fn set_max_error_length(chars: usize) {
    MAX_ERROR_CHARS.store(chars, Ordering::Relaxed);
}

/// Makes server error text safe for a model: hidden characters visible, escapes removed,
/// length bounded to `errors.max_length` characters (with a marker saying how much was cut).
pub fn clean_error_text(s: &str) -> String {
    let clean = sanitize::clean(
        s,
        Clean {
            keep_newlines: true,
            max_bytes: usize::MAX,
        },
    );
    cut_chars(clean, MAX_ERROR_CHARS.load(Ordering::Relaxed))
}

/// `text` cut to `max` characters, with a marker naming how many were cut and the key.
fn cut_chars(text: String, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => {
            let rest = text[at..].chars().count();
            format!(
                "{}…[{rest} more characters cut: errors.max_length]",
                &text[..at]
            )
        }
        None => text,
    }
}

/// Sanitizes the text blocks of an `isError: true` result in place; returns whether anything
/// changed. Non-text blocks of an error result are dropped: error content is diagnostic only.
pub fn clean_error_result(result: &mut Value) -> bool {
    let mut changed = false;
    if let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) {
        let before = content.len();
        content.retain(|b| b.get("type").and_then(Value::as_str) == Some("text"));
        changed |= content.len() != before;
        for block in content.iter_mut() {
            if let Some(text) = block.get("text").and_then(Value::as_str) {
                let clean = clean_error_text(text);
                if clean != text {
                    block["text"] = Value::String(clean);
                    changed = true;
                }
            }
        }
    }
    if let Some(obj) = result.as_object_mut() {
        // structuredContent of an error is not validated; it could carry the same injected text.
        if obj.remove("structuredContent").is_some() {
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_shape_follows_the_error_contract() {
        let r = Refusal::new(code::INVALID_ARGUMENTS, Category::Input, "bad /a");
        let want = json!({"code": "invalid_arguments", "category": "input", "retryable": false, "outcomeKnown": true, "message": "bad /a"});
        let v = r.to_result(false);
        assert_eq!(v["isError"], true);
        assert_eq!(v["structuredContent"], want);
        assert_eq!(v["_meta"][REFUSAL_META], want);
        assert_eq!(
            v["content"][0]["text"],
            "mcpguard: bad /a [invalid_arguments]"
        );
        let v = r.to_result(true);
        assert!(
            v.get("structuredContent").is_none(),
            "no structuredContent when the tool may declare an outputSchema"
        );
        assert_eq!(v["_meta"][REFUSAL_META], want);
    }

    #[test]
    fn error_results_are_cleaned() {
        let mut r = json!({"content": [{"type": "text", "text": "\u{1b}[31mboom\u{202e} token"}, {"type": "image", "data": "x", "mimeType": "image/png"}], "structuredContent": {"x": 1}, "isError": true});
        assert!(clean_error_result(&mut r));
        assert_eq!(
            r,
            json!({"content": [{"type": "text", "text": "boom\\u{202E} token"}], "isError": true})
        );
    }
}
