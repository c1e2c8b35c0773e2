//! What the gate enforces, as data and pure functions: the pin (loaded and verified before the
//! server is spawned), the capability filter, and the shapes of refusals.
//!
//! The state machine that applies these to a live conversation is in `session`; nothing here
//! performs IO except `load_pin` reading the snapshot file.

use std::collections::HashMap;
use std::path::Path;

use jiff::Timestamp;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::canonical;
use crate::manifest::{self, Acceptance, Manifest};
use crate::sanitize::{self, Clean};
use crate::schema::{self, CompiledSchema};

/// One reviewed tool, ready for the message path: its exact object and canonical bytes for the
/// drift comparison, and its compiled schemas.
pub struct ReviewedTool {
    pub name: String,
    pub tool: Value,
    pub canonical: Vec<u8>,
    pub review: Value,
    pub input: Option<CompiledSchema>,
    pub output: Option<CompiledSchema>,
    /// The reviewer asserted `concurrency: serialize`.
    pub serialize: bool,
    /// `execution.taskSupport` is `required`: the tool cannot be called without tasks.
    pub requires_task: bool,
    /// The review maps some argument to the `authority` input channel, which makes every call a
    /// write that needs confirmation (SPEC §4), whatever the policy's classification says.
    pub authority: bool,
}

impl std::fmt::Debug for ReviewedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReviewedTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Everything the gate pins for one server.
#[derive(Debug)]
pub struct Pin {
    pub digest: String,
    pub server_key: String,
    pub protocol_version: String,
    pub server_info: Value,
    pub instructions: Option<Value>,
    /// Reviewed tools in snapshot order.
    pub tools: Vec<ReviewedTool>,
    /// Tools in the capture without a review (never served; named in diagnostics).
    pub unreviewed: Vec<String>,
    /// Reviewed tools the local policy refuses (never served).
    pub refused_by_policy: Vec<String>,
    /// What a 2026-07-28 snapshot pins beyond the above; `None` for a legacy snapshot.
    pub modern: Option<crate::modern::ModernPin>,
}

impl Pin {
    /// Removes the reviewed tools that the local policy refuses; returns why, per tool. The
    /// policy can only take tools away: nothing here can add one.
    pub fn apply_policy(&mut self, refusal: impl Fn(&str) -> Option<String>) -> Vec<String> {
        let mut reasons = Vec::new();
        let tools = std::mem::take(&mut self.tools);
        for t in tools {
            match refusal(&t.name) {
                Some(why) => {
                    reasons.push(why);
                    self.refused_by_policy.push(t.name);
                }
                None => self.tools.push(t),
            }
        }
        reasons
    }

    pub fn tool(&self, name: &str) -> Option<&ReviewedTool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// Loads the snapshot, checks its digest against `sha256`, validates it at `now` and builds the
/// pin for `server_key`. Any failure is a message for stderr; the caller must not start the
/// server.
pub fn load_pin(
    path: &Path,
    sha256: &str,
    server_key: &str,
    now: Timestamp,
    acceptance: &Acceptance,
) -> Result<Pin, String> {
    let m = manifest::load(path)?;
    if !sha256.eq_ignore_ascii_case(&m.digest) {
        return Err(format!(
            "{}: digest mismatch: the snapshot hashes to {} but the host configuration pins {sha256}; \
             if you reviewed a new snapshot, pin its digest (`mcpguard hash {}`)",
            path.display(),
            m.digest,
            path.display()
        ));
    }
    pin_from_manifest(&m, server_key, now, acceptance)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Builds the pin from a loaded manifest (split out for tests).
pub fn pin_from_manifest(
    m: &Manifest,
    server_key: &str,
    now: Timestamp,
    acceptance: &Acceptance,
) -> Result<Pin, String> {
    let problems = manifest::validate(m, now, acceptance);
    if !problems.is_empty() {
        let list: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        return Err(format!(
            "the snapshot is not acceptable:\n  {}\n(fix the reviews with `mcpguard review`, or capture and review again)",
            list.join("\n  ")
        ));
    }
    let entry = m.server(server_key).map_err(|p| p.to_string())?;
    let protocol_version = m.protocol_version().unwrap_or_default().to_string();
    let modern = if crate::modern::is_modern(&protocol_version) {
        Some(crate::modern::ModernPin::from_entry(entry)?)
    } else if crate::capture::LEGACY_VERSIONS.contains(&protocol_version.as_str()) {
        None
    } else {
        return Err(format!(
            "the snapshot pins protocol {protocol_version:?}; this gate speaks {} and {}",
            crate::capture::LEGACY_VERSIONS.join(", "),
            crate::modern::MODERN_VERSIONS.join(", ")
        ));
    };
    let all = manifest::tools(server_key, entry).map_err(|ps| {
        ps.iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let mut tools = Vec::new();
    let mut unreviewed = Vec::new();
    for (name, pointer, tool) in all {
        let Some(review) = manifest::review_of(entry, &name) else {
            unreviewed.push(name);
            continue;
        };
        let compile = |field: &str| -> Result<Option<CompiledSchema>, String> {
            match tool.get(field) {
                None => Ok(None),
                Some(s) => schema::compile(s)
                    .map(Some)
                    .map_err(|e| format!("{pointer}/{field} of tool {name:?}: {e}")),
            }
        };
        let input = compile("inputSchema")?;
        let output = compile("outputSchema")?;
        let serialize = review
            .pointer("/assertions/concurrency")
            .and_then(Value::as_str)
            == Some("serialize");
        let requires_task = tool
            .pointer("/execution/taskSupport")
            .and_then(Value::as_str)
            == Some("required");
        let authority = review
            .get("inputChannels")
            .and_then(Value::as_object)
            .is_some_and(|c| c.values().any(|class| class == "authority"));
        tools.push(ReviewedTool {
            authority,
            canonical: canonical::canonical_bytes(&tool),
            name,
            tool,
            review: review.clone(),
            input,
            output,
            serialize,
            requires_task,
        });
    }
    Ok(Pin {
        digest: m.digest.clone(),
        server_key: server_key.to_string(),
        protocol_version,
        server_info: entry.get("serverInfo").cloned().unwrap_or(Value::Null),
        instructions: entry.get("instructions").cloned(),
        tools,
        unreviewed,
        refused_by_policy: Vec::new(),
        modern,
    })
}

/// Which MCP capabilities pass the gate. Everything the seed excludes is blocked by default; the
/// policy issue makes these configurable.
#[derive(Debug, Clone, Default)]
pub struct Capabilities {
    pub sampling: bool,
    pub elicitation: bool,
    pub roots: bool,
    pub tasks: bool,
    pub prompts: bool,
    pub resources: bool,
}

impl Capabilities {
    /// Removes blocked client capabilities from the `initialize` params the server sees,
    /// including the tasks extension (`extensions["io.modelcontextprotocol/tasks"]`) that newer
    /// clients advertise instead of, or beside, the top-level `tasks`.
    pub fn filter_client(&self, caps: &mut Map<String, Value>) -> Vec<String> {
        let mut removed = Vec::new();
        if !self.tasks {
            if let Some(ext) = caps.get_mut("extensions").and_then(Value::as_object_mut) {
                if ext.remove("io.modelcontextprotocol/tasks").is_some() {
                    removed.push("extensions/io.modelcontextprotocol/tasks".to_string());
                }
            }
        }
        for (key, allowed) in [
            ("sampling", self.sampling),
            ("elicitation", self.elicitation),
            ("roots", self.roots),
            ("tasks", self.tasks),
        ] {
            if !allowed && caps.remove(key).is_some() {
                removed.push(key.to_string());
            }
        }
        removed
    }

    /// Removes blocked server capabilities from the `initialize` result the host sees.
    pub fn filter_server(&self, caps: &mut Map<String, Value>) -> Vec<String> {
        let mut removed = Vec::new();
        for (key, allowed) in [
            ("prompts", self.prompts),
            ("resources", self.resources),
            ("tasks", self.tasks),
            ("completions", self.prompts || self.resources),
        ] {
            if !allowed && caps.remove(key).is_some() {
                removed.push(key.to_string());
            }
        }
        removed
    }
}

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
    pub const CAPABILITY_DENIED: &str = "capability_denied";
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

/// Longest error text from the server that is passed on (after sanitizing).
pub const MAX_ERROR_TEXT: usize = 2048;

/// Makes server error text safe for a model: hidden characters visible, escapes removed,
/// length bounded.
pub fn clean_error_text(s: &str) -> String {
    sanitize::clean(
        s,
        Clean {
            keep_newlines: true,
            max_bytes: MAX_ERROR_TEXT,
        },
    )
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

/// One page of a live `tools/list`, read cheaply: each Tool stays raw JSON text and only its
/// name is read. A live walk of a large catalogue happens before every call, so the full strict
/// parse and canonicalization are kept for the few tools that are actually compared.
#[derive(Debug)]
pub struct LivePage {
    pub tools: Vec<(String, Box<RawValue>)>,
    pub next_cursor: Option<String>,
}

/// Reads one page result. A repeated `tools` or `nextCursor` member is an error (serde's derive
/// refuses duplicate fields); other members are ignored.
pub fn parse_page(raw: &str) -> Result<LivePage, String> {
    #[derive(serde::Deserialize)]
    struct Page<'a> {
        #[serde(borrow)]
        tools: Vec<&'a RawValue>,
        #[serde(rename = "nextCursor", default)]
        next_cursor: Option<String>,
    }
    #[derive(serde::Deserialize)]
    struct Named<'a> {
        #[serde(borrow)]
        name: std::borrow::Cow<'a, str>,
    }
    let page: Page<'_> = serde_json::from_str(raw)
        .map_err(|e| format!("a live tools/list page is not acceptable: {e}"))?;
    let mut tools = Vec::with_capacity(page.tools.len());
    for t in page.tools {
        let named: Named<'_> = serde_json::from_str(t.get())
            .map_err(|e| format!("a live tool has no usable name: {e}"))?;
        tools.push((named.name.into_owned(), t.to_owned()));
    }
    Ok(LivePage {
        tools,
        next_cursor: page.next_cursor,
    })
}

/// The live catalogue from one complete `tools/list` walk: name → the Tool as raw JSON text.
#[derive(Debug, Default)]
pub struct LiveCatalogue {
    pub tools: HashMap<String, Box<RawValue>>,
}

impl LiveCatalogue {
    /// Builds the catalogue from the pages of a walk; a name occurring twice is an error.
    pub fn from_pages(pages: Vec<LivePage>) -> Result<Self, String> {
        let mut tools = HashMap::new();
        for page in pages {
            for (name, raw) in page.tools {
                if tools.contains_key(&name) {
                    return Err(format!("the live tools/list names {name:?} twice"));
                }
                tools.insert(name, raw);
            }
        }
        Ok(LiveCatalogue { tools })
    }

    /// Why the live object of `tool` differs from the reviewed one, or `None` if identical.
    /// The live object is parsed strictly (duplicate members are drift) and compared by its
    /// RFC 8785 canonical bytes.
    pub fn drift(&self, pin_key: &str, tool: &ReviewedTool) -> Option<String> {
        let Some(raw) = self.tools.get(&tool.name) else {
            return Some(format!(
                "tool {:?} is no longer in the live catalogue",
                tool.name
            ));
        };
        let live = match crate::strict::parse_strict_str(raw.get()) {
            Ok(v) => v,
            Err(e) => {
                return Some(format!(
                    "the live definition of tool {:?} is not acceptable: {e}",
                    tool.name
                ))
            }
        };
        if canonical::canonical_bytes(&live) == tool.canonical {
            return None;
        }
        let changes = crate::diff::diff_tool(pin_key, &tool.name, &tool.tool, &live);
        let pointers: Vec<String> = changes.iter().map(|c| c.pointer.clone()).collect();
        Some(format!(
            "the live definition of tool {:?} differs from the reviewed one at {}",
            tool.name,
            if pointers.is_empty() {
                "(unknown)".to_string()
            } else {
                pointers.join(", ")
            }
        ))
    }
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

    #[test]
    fn capability_filters() {
        let caps = Capabilities::default();
        let mut c = json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}, "experimental": {}}).as_object().unwrap().clone();
        assert_eq!(
            caps.filter_client(&mut c),
            vec!["sampling", "elicitation", "roots"]
        );
        assert_eq!(Value::Object(c), json!({"experimental": {}}));
        let mut c = json!({"extensions": {"io.modelcontextprotocol/tasks": {}, "io.modelcontextprotocol/skills": {}}}).as_object().unwrap().clone();
        assert_eq!(
            caps.filter_client(&mut c),
            vec!["extensions/io.modelcontextprotocol/tasks"]
        );
        assert_eq!(
            Value::Object(c),
            json!({"extensions": {"io.modelcontextprotocol/skills": {}}})
        );
        let mut s = json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {}, "logging": {}, "completions": {}}).as_object().unwrap().clone();
        assert_eq!(
            caps.filter_server(&mut s),
            vec!["prompts", "resources", "completions"]
        );
        assert_eq!(
            Value::Object(s),
            json!({"tools": {"listChanged": true}, "logging": {}})
        );
    }

    #[test]
    fn live_catalogue_rejects_duplicates() {
        let page = r#"{"tools": [{"name": "a", "inputSchema": {}}]}"#;
        let pages = vec![parse_page(page).unwrap(), parse_page(page).unwrap()];
        assert!(LiveCatalogue::from_pages(pages)
            .unwrap_err()
            .contains("twice"));
        assert!(parse_page(r#"{"tools": [], "tools": []}"#).is_err());
        assert!(parse_page(r#"{"tools": [{"inputSchema": {}}]}"#).is_err());
        let next = parse_page(r#"{"tools": [], "nextCursor": "c2", "x": 1}"#)
            .unwrap()
            .next_cursor;
        assert_eq!(next.as_deref(), Some("c2"));
    }
}
