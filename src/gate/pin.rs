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

use crate::gate::schema::{self, CompiledSchema};
use crate::snapshot::canonical;
use crate::snapshot::manifest::{self, Acceptance, Manifest};
use crate::wire::sanitize::{self, Clean};

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
    pub modern: Option<crate::gate::modern::ModernPin>,
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
    let modern = if crate::protocol::is_modern(&protocol_version) {
        Some(crate::gate::modern::ModernPin::from_entry(entry)?)
    } else if crate::protocol::LEGACY_VERSIONS.contains(&protocol_version.as_str()) {
        None
    } else {
        return Err(format!(
            "the snapshot pins protocol {protocol_version:?}; this gate speaks {} and {}",
            crate::protocol::LEGACY_VERSIONS.join(", "),
            crate::protocol::MODERN_VERSIONS.join(", ")
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
/// One live Tool: its name and its raw JSON text (valid JSON, as the server sent it).
pub type LiveTool = (String, Box<str>);

#[derive(Debug)]
pub struct LivePage {
    pub tools: Vec<LiveTool>,
    pub next_cursor: Option<String>,
}

/// Reads one page result. The page is a `RawValue`, which serde_json has already validated as
/// JSON when the response was parsed; the page is then read in one pass over its text, without
/// a second validation (on the gated path a second serde pass over a 200 KiB page, and a third
/// one per Tool for its name, cost more than everything else mcpguard does for a call). A
/// repeated `tools`, `nextCursor` or Tool `name` member is an error, as it is for the strict
/// parser; other members are ignored.
pub fn parse_page(raw: &RawValue) -> Result<LivePage, String> {
    let bad = |e: String| format!("a live tools/list page is not acceptable: {e}");
    let text = raw.get();
    let b = text.as_bytes();
    let mut tools: Option<Vec<LiveTool>> = None;
    let mut cursor: Option<&str> = None;
    walk_object(text, 0, |key, start| match key {
        "tools" => {
            if tools.is_some() {
                return Err("duplicate member `tools`".into());
            }
            let (end, list) = read_tools(text, start)?;
            tools = Some(list);
            Ok(end)
        }
        "nextCursor" => {
            let end = skip_value(b, start);
            if cursor.replace(&text[start..end]).is_some() {
                return Err("duplicate member `nextCursor`".into());
            }
            Ok(end)
        }
        _ => Ok(skip_value(b, start)),
    })
    .map_err(bad)?;
    let next_cursor = match cursor {
        None | Some("null") => None,
        Some(c) => Some(
            serde_json::from_str::<String>(c)
                .map_err(|_| bad("`nextCursor` is not a string".into()))?,
        ),
    };
    let tools = tools.ok_or_else(|| bad("missing member `tools`".into()))?;
    Ok(LivePage { tools, next_cursor })
}

/// The `tools` array starting at `i`: each Tool's name and raw text, and the index past the
/// array.
fn read_tools(text: &str, mut i: usize) -> Result<(usize, Vec<LiveTool>), String> {
    let b = text.as_bytes();
    if b.get(i) != Some(&b'[') {
        return Err("`tools` is not an array".into());
    }
    i += 1;
    let mut tools = Vec::new();
    loop {
        while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b',') {
            i += 1;
        }
        if i >= b.len() || b[i] == b']' {
            return Ok((i + 1, tools));
        }
        let (end, name) =
            read_tool(text, i).map_err(|e| format!("a live tool has no usable name: {e}"))?;
        tools.push((name, Box::from(&text[i..end])));
        i = end;
    }
}

/// Walks the object that starts at `i` in `raw`, which must be valid JSON (a validated
/// `RawValue` or a part of one), calling `f(key, value start)` for each member; `f` returns the
/// index just past the value (usually [`skip_value`]), so that a caller can read a value while
/// skipping it. Keys are passed decoded (`"n\u0061me"` is `name`). Returns the index past the
/// object. Skipping by brackets and quotes is sound only on valid JSON.
fn walk_object(
    raw: &str,
    mut i: usize,
    mut f: impl FnMut(&str, usize) -> Result<usize, String>,
) -> Result<usize, String> {
    let b = raw.as_bytes();
    let ws = |i: &mut usize| {
        while *i < b.len() && b[*i].is_ascii_whitespace() {
            *i += 1;
        }
    };
    ws(&mut i);
    if b.get(i) != Some(&b'{') {
        return Err("not an object".into());
    }
    i += 1;
    loop {
        ws(&mut i);
        match b.get(i) {
            Some(b'}') => return Ok(i + 1),
            None => return Ok(i),
            Some(b',') => {
                i += 1;
                continue;
            }
            Some(b'"') => {}
            Some(_) => return Err("not an object".into()),
        }
        let (key_end, escaped) = scan_string(b, i);
        let token = &raw[i..key_end];
        let decoded;
        let key = if escaped {
            decoded = serde_json::from_str::<String>(token).map_err(|e| e.to_string())?;
            decoded.as_str()
        } else {
            &token[1..token.len() - 1]
        };
        i = key_end;
        ws(&mut i);
        i += 1; // The `:` that valid JSON has here.
        ws(&mut i);
        i = f(key, i)?;
    }
}

/// The Tool object starting at `i` of valid JSON text (see [`walk_object`]): the index past it
/// and its `name`. A second `name` member is an error, as it is for the strict parser.
fn read_tool(text: &str, i: usize) -> Result<(usize, String), String> {
    let b = text.as_bytes();
    let mut name: Option<&str> = None;
    let end = walk_object(text, i, |key, start| {
        let end = skip_value(b, start);
        if key == "name" && name.replace(&text[start..end]).is_some() {
            return Err("the Tool has two `name` members".into());
        }
        Ok(end)
    })?;
    let name = name.ok_or("the Tool has no `name`")?;
    let name = serde_json::from_str::<String>(name).map_err(|_| "`name` is not a string")?;
    Ok((end, name))
}

/// The index just past the JSON string that starts at `i` (a `"`), in valid JSON. A plain loop:
/// most strings in a catalogue are short keys, for which a vectorised search costs more to set
/// up than it saves.
fn skip_string(b: &[u8], i: usize) -> usize {
    scan_string(b, i).0
}

/// [`skip_string`], also saying whether the string has an escape (keys without one are compared
/// as they are, with no decoding).
fn scan_string(b: &[u8], i: usize) -> (usize, bool) {
    let mut j = i + 1;
    let mut escaped = false;
    while j < b.len() {
        match b[j] {
            b'"' => return (j + 1, escaped),
            b'\\' => {
                escaped = true;
                j += 2;
            }
            _ => j += 1,
        }
    }
    (b.len(), escaped)
}

/// The index just past the JSON value that starts at `i`, in valid JSON.
fn skip_value(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(b'"') => skip_string(b, i),
        Some(b'{') | Some(b'[') => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = skip_string(b, j);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return j + 1;
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            b.len()
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']') && !b[j].is_ascii_whitespace()
            {
                j += 1;
            }
            j
        }
    }
}

/// The live catalogue from one complete `tools/list` walk: name → the Tool as raw JSON text.
#[derive(Debug, Default)]
pub struct LiveCatalogue {
    pub tools: HashMap<String, Box<str>>,
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
        let live = match crate::snapshot::strict::parse_strict_str(raw) {
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
        let changes = crate::snapshot::diff::diff_tool(pin_key, &tool.name, &tool.tool, &live);
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
        // Pages reach `parse_page` as validated RawValues, as they do from the envelope parse.
        let page = |text: &str| parse_page(&serde_json::from_str::<Box<RawValue>>(text).unwrap());
        let one = r#"{"tools": [{"name": "a", "inputSchema": {}}]}"#;
        let pages = vec![page(one).unwrap(), page(one).unwrap()];
        assert!(LiveCatalogue::from_pages(pages)
            .unwrap_err()
            .contains("twice"));
        for bad in [
            r#"{"tools": [], "tools": []}"#,
            r#"{"tools": [{"inputSchema": {}}]}"#,
            r#"{"tools": {}}"#,
            r#"{"tools": [5]}"#,
            r#"{"nextCursor": "c"}"#,
            r#"{"tools": [], "nextCursor": 3}"#,
            r#"{"tools": [], "nextCursor": "a", "next\u0043ursor": "b"}"#,
            r#"[]"#,
        ] {
            assert!(page(bad).is_err(), "{bad}");
        }
        let next = page(r#"{"tools": [], "nextCursor": "c2", "x": 1}"#)
            .unwrap()
            .next_cursor;
        assert_eq!(next.as_deref(), Some("c2"));
        assert_eq!(
            page(r#"{"tools": [], "nextCursor": null}"#)
                .unwrap()
                .next_cursor,
            None
        );
    }

    /// The one-pass page reader agrees with serde_json on pages of every shape: names, the raw
    /// text of each Tool, and the cursor.
    #[test]
    fn the_page_reader_agrees_with_serde_json() {
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        fn value(next: &mut dyn FnMut() -> u64, depth: u32) -> Value {
            let strings = ["", "a\"b", "\\", "x\u{1}y", "名前", "{[\"]}", "name"];
            match next() % if depth > 3 { 4 } else { 6 } {
                0 => Value::Null,
                1 => json!(next() % 2 == 0),
                2 => json!((next() % 2000) as f64 / 7.0 - 100.0),
                3 => json!(strings[(next() % strings.len() as u64) as usize]),
                4 => Value::Array((0..next() % 4).map(|_| value(next, depth + 1)).collect()),
                _ => {
                    let mut m = Map::new();
                    for _ in 0..next() % 4 {
                        let k = strings[(next() % strings.len() as u64) as usize];
                        m.insert(k.to_string(), value(next, depth + 1));
                    }
                    Value::Object(m)
                }
            }
        }
        for round in 0..300 {
            let tools: Vec<Value> = (0..next() % 5)
                .map(|i| {
                    let mut t = match value(&mut next, 1) {
                        Value::Object(m) => m,
                        _ => Map::new(),
                    };
                    t.insert("name".into(), json!(format!("t{round}-{i}\"\u{e9}")));
                    Value::Object(t)
                })
                .collect();
            let mut page = json!({"tools": tools, "extra": value(&mut next, 1)});
            if next() % 2 == 0 {
                page["nextCursor"] = json!(format!("c{round}"));
            }
            let text = serde_json::to_string_pretty(&page).unwrap();
            let raw: Box<RawValue> = serde_json::from_str(&text).unwrap();
            let got = parse_page(&raw).unwrap();
            assert_eq!(got.next_cursor.as_deref(), page["nextCursor"].as_str());
            assert_eq!(got.tools.len(), tools.len());
            for ((name, raw_tool), tool) in got.tools.iter().zip(&tools) {
                assert_eq!(Some(name.as_str()), tool["name"].as_str());
                assert_eq!(&serde_json::from_str::<Value>(raw_tool).unwrap(), tool);
            }
        }
    }

    #[test]
    fn tool_names_are_read_from_valid_json_without_a_second_parse() {
        let ok = [
            (r#"{"name":"echo"}"#, "echo"),
            (
                r#" { "description": "a \"name\": \"x\" {[", "inputSchema": {"properties": {"name": {"type": "string"}}}, "name" : "real" } "#,
                "real",
            ),
            (
                r#"{"n\u0061me":"escaped-key","x":[1,{"name":"nested"}]}"#,
                "escaped-key",
            ),
            (
                r#"{"a":-1.5e3,"b":true,"c":null,"name":"t\u00e9"}"#,
                "t\u{e9}",
            ),
        ];
        for (raw, want) in ok {
            assert_eq!(
                read_tool(raw, 0).map(|(_, n)| n).as_deref(),
                Ok(want),
                "{raw}"
            );
        }
        for raw in [
            r#"{"name":"a","name":"b"}"#,
            r#"{"name":5}"#,
            r#"{"title":"no name"}"#,
            r#"["name","x"]"#,
        ] {
            assert!(read_tool(raw, 0).is_err(), "{raw}");
        }
    }
}
