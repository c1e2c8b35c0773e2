//! The reviewer's view of a snapshot (`mcpguard show`) and the input-schema review aid.
//!
//! A reviewer approves exactly what the model will read, so this view shows every field of every
//! Tool object in full: nothing abridged, nothing dropped because it is unknown, and nothing the
//! terminal would hide. Every string (member names included) goes through [`reveal`], which shows
//! control, bidi, zero-width and Unicode TAG characters as `\u{XXXX}` markers, and each string that
//! contains such a character also gets a loud `!! hidden characters in <pointer>` line at the top
//! of its tool, because a marker buried in a long schema is easy to miss.
//!
//! Newlines and tabs are the exception to the warning (not to the rendering): multi-line
//! descriptions are ordinary, they are shown as real line breaks in prose and as `\n` escapes in
//! JSON, and warning about every one of them would bury the warnings that matter.
//!
//! [`schema_findings`] is the review aid of the governance profile's "Input schemas" section: it
//! points at the places where an input schema lets a model send more than a reviewer can bound.
//! Its findings are advice for the reviewer; the local policy decides whether any of them blocks.
//!
//! Everything here is pure and total: a tool that is not an object, `toolPages` that is not an
//! array or a schema of any shape renders with notes instead of a panic. Walks are iterative or
//! explicitly bounded so that nesting depth cannot exhaust the stack (printing a `Value` recurses
//! inside serde_json, so documents are meant to come from `crate::snapshot::strict::parse_strict`).
//!
//! Pure text rendering of snapshot documents; nothing of live connections, the policy or processes.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;

use serde_json::{Map, Value};

use crate::snapshot::diff::{display_name, escape_token, reveal, visible_json};
use crate::wire::injection::{self, Label};
use crate::wire::sanitize::{is_hidden, needs_cleaning, Clean};

// ---------------------------------------------------------------------------------------------
// The reviewer's view.

/// The Tool members of MCP 2025-11-25, shown first and in this order; any other member follows as
/// an "unknown field", in document order.
const TOOL_FIELDS: [&str; 9] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "execution",
    "icons",
    "_meta",
];

// The reviewer assertions of the seed's table, in its order, shared with the validator.
use crate::snapshot::manifest::ASSERTIONS;

/// The labeller's findings in the server's instructions and in the title and description of
/// every tool of a server entry (of the tool `only`, when given), one line per tool and field: each label with the signals that made it and where it is (byte
/// ranges of the field), never the passage itself (the reviewer reads it in the view; capture
/// prints these lines where a quote would put the instruction in a terminal or a log). Read
/// with the catalogue's names and the tool the text belongs to, as results are. Links and
/// base64 runs alone are left out: descriptions carry them all the time.
pub fn label_lines(key: &str, entry: &Value, only: Option<&str>) -> Vec<String> {
    let Ok(tools) = crate::snapshot::manifest::tools(key, entry) else {
        return Vec::new();
    };
    let catalogue = injection::Context::new(tools.iter().map(|(n, _, _)| n.as_str()));
    let mut out = Vec::new();
    // The server's own instructions first (the model reads them too), unless one tool is asked.
    let server = only.is_none().then(|| {
        (
            "the server's instructions".to_string(),
            "instructions",
            entry,
            catalogue.clone(),
        )
    });
    let each = tools
        .iter()
        .filter(|(name, _, _)| only.is_none_or(|o| o == name))
        .flat_map(|(name, _, tool)| {
            ["title", "description"].map(|field| {
                (
                    format!("tool {}", display_name(name)),
                    field,
                    tool,
                    catalogue.clone().answering(name),
                )
            })
        });
    for (whose, field, holder, ctx) in server.into_iter().chain(each) {
        let Some(text) = holder.get(field).and_then(Value::as_str) else {
            continue;
        };
        // One entry per label and signals, with every place it was found.
        let mut found: Vec<(String, Vec<String>)> = Vec::new();
        for f in injection::findings_in(text, &ctx)
            .iter()
            .filter(|f| !matches!(f.label, Label::Link | Label::EncodedPayload))
        {
            let what = if f.signals.is_empty() {
                f.label.to_string()
            } else {
                format!("{} ({})", f.label, f.signals.join(" + "))
            };
            let at = format!("{}-{}", f.at.start, f.at.end);
            match found.iter_mut().find(|(w, _)| *w == what) {
                Some((_, places)) => places.push(at),
                None => found.push((what, vec![at])),
            }
        }
        let found: Vec<String> = found
            .into_iter()
            .map(|(what, places)| format!("{what} at bytes {}", places.join(", ")))
            .collect();
        if !found.is_empty() {
            let what = if field == "instructions" {
                whose.clone()
            } else {
                format!("{whose}: {field}")
            };
            out.push(format!("{what}: {}", found.join("; ")));
        }
    }
    out
}

/// Renders one server entry of a snapshot: its `serverInfo`, `instructions`, `capabilities` and
/// any other member, the page structure with notes on anything a capture should not contain
/// (duplicate or missing names, reviews for tools that are not there), and then every tool in
/// catalogue order through [`render_tool`] with its review.
pub fn render_server(key: &str, entry: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "server {}", display_name(key));
    if suspicious(key) {
        let _ = writeln!(
            out,
            "!! hidden characters in the server key: {}",
            code_points(key)
        );
    }
    let Value::Object(members) = entry else {
        out.push_str("!! the server entry is not a JSON object:\n");
        block(&mut out, "    ", &pretty(entry));
        warn_hidden(&mut out, entry, "", "");
        return out;
    };

    // Warnings first, for everything shown at server level; each tool warns for itself below.
    for (name, value) in members {
        if name == "toolPages" || name == "reviews" {
            continue;
        }
        warn_hidden_member(&mut out, name, value, "");
    }

    for name in ["serverInfo", "instructions", "capabilities"] {
        match members.get(name) {
            Some(value) => field(&mut out, name, value, name == "instructions"),
            None if name == "serverInfo" => out.push_str("  serverInfo: (missing)\n"),
            None => {}
        }
    }
    for (name, value) in members {
        if !matches!(
            name.as_str(),
            "serverInfo" | "instructions" | "capabilities" | "toolPages" | "reviews"
        ) {
            field(&mut out, &unknown_label(name), value, false);
        }
    }

    let reviews = members.get("reviews");
    let review_map = match reviews {
        Some(Value::Object(map)) => Some(map),
        Some(other) => {
            out.push_str("!! reviews is not a JSON object:\n");
            block(&mut out, "    ", &pretty(other));
            None
        }
        None => None,
    };

    // The page structure, then the tools in catalogue order.
    let mut tools: Vec<&Value> = Vec::new();
    match members.get("toolPages") {
        None => out.push_str("!! toolPages is missing: this entry has no catalogue\n"),
        Some(Value::Array(pages)) => {
            let _ = writeln!(out, "  toolPages: {}", plural(pages.len(), "page"));
            for (p, page) in pages.iter().enumerate() {
                page_summary(&mut out, p, page, &mut tools);
            }
        }
        Some(other) => {
            out.push_str("!! toolPages is not a JSON array:\n");
            block(&mut out, "    ", &pretty(other));
        }
    }

    // A reviewed name must occur exactly once across pages (capture rule 2 of the seed).
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for tool in &tools {
        match tool.get("name").and_then(Value::as_str) {
            Some(name) => *counts.entry(name).or_default() += 1,
            None => out.push_str("!! a tool entry has no string name\n"),
        }
    }
    for (name, count) in &counts {
        if *count > 1 {
            let _ = writeln!(
                out,
                "!! tool name {} occurs {count} times; a reviewed name must occur exactly once",
                display_name(name)
            );
        }
    }
    if let Some(map) = review_map {
        for (name, review) in map {
            if !counts.contains_key(name.as_str()) {
                let _ = writeln!(
                    out,
                    "!! review for {} names no tool in this catalogue: {}",
                    display_name(name),
                    visible_json(review)
                );
            }
        }
    }

    for tool in tools {
        let review = tool
            .get("name")
            .and_then(Value::as_str)
            .and_then(|name| review_map.and_then(|map| map.get(name)));
        out.push('\n');
        out.push_str(&render_tool(tool, review));
    }
    out
}

/// One line (plus notes) per page, collecting the page's tool entries.
fn page_summary<'a>(out: &mut String, p: usize, page: &'a Value, tools: &mut Vec<&'a Value>) {
    let Value::Object(members) = page else {
        let _ = writeln!(
            out,
            "!! page {p} is not a JSON object: {}",
            visible_json(page)
        );
        return;
    };
    let mut line = format!("    page {p}: ");
    match members.get("tools") {
        Some(Value::Array(list)) => {
            line.push_str(&plural(list.len(), "tool"));
            tools.extend(list);
        }
        Some(other) => {
            let _ = write!(line, "tools is not an array: {}", visible_json(other));
        }
        None => line.push_str("no tools member"),
    }
    if let Some(cursor) = members.get("nextCursor") {
        let _ = write!(line, ", nextCursor {}", visible_json(cursor));
    }
    let _ = writeln!(out, "{line}");
    for (name, value) in members {
        if name != "tools" && name != "nextCursor" {
            let _ = writeln!(
                out,
                "    page {p} {}: {}",
                unknown_label(name),
                visible_json(value)
            );
        }
    }
}

/// Renders one Tool object the way a reviewer must see it, followed by its review (or
/// `NOT REVIEWED`) and the review aid's findings for its `inputSchema`.
pub fn render_tool(tool: &Value, review: Option<&Value>) -> String {
    let mut out = String::new();
    let Value::Object(members) = tool else {
        out.push_str("tool (not a JSON object)\n");
        warn_hidden(&mut out, tool, "", "");
        block(&mut out, "    ", &pretty(tool));
        render_review(&mut out, review);
        return out;
    };
    match members.get("name") {
        Some(Value::String(name)) => {
            let _ = writeln!(out, "tool {}", display_name(name));
        }
        _ => out.push_str("tool (no string name)\n"),
    }

    warn_hidden(&mut out, tool, "", "");
    if let Some(review) = review {
        warn_hidden(&mut out, review, "", "review ");
    }

    for name in TOOL_FIELDS {
        match members.get(name) {
            Some(value) => field(&mut out, name, value, name == "description"),
            None => match name {
                "name" | "inputSchema" => {
                    let _ = writeln!(out, "  {name}: (missing)");
                }
                "description" => out.push_str("  description: (none)\n"),
                _ => {}
            },
        }
    }
    for (name, value) in members {
        if !TOOL_FIELDS.contains(&name.as_str()) {
            field(&mut out, &unknown_label(name), value, false);
        }
    }

    render_review(&mut out, review);

    if let Some(schema) = members.get("inputSchema") {
        let findings = schema_findings(schema);
        if findings.is_empty() {
            out.push_str("  inputSchema review aid: no findings\n");
        } else {
            out.push_str("  inputSchema review aid (pointers into inputSchema):\n");
            for f in findings {
                let pointer = if f.pointer.is_empty() {
                    "(root)".to_owned()
                } else {
                    reveal(&f.pointer, Clean::LINE)
                };
                let _ = writeln!(out, "  ? {pointer}: {} [{}]", f.message, f.rule);
            }
        }
        let open = open_schemas(schema);
        if open.is_empty() {
            out.push_str("  arguments: closed: members the inputSchema does not declare are refused (policy [arguments])
");
        } else {
            out.push_str("  arguments: closed, except where the inputSchema is open (any member passes there); members it does not declare are refused elsewhere (policy [arguments]):
");
            for (pointer, keyword) in open {
                let pointer = if pointer.is_empty() {
                    "(root)".to_owned()
                } else {
                    reveal(&pointer, Clean::LINE)
                };
                let _ = writeln!(out, "  ~ {pointer}: open ({keyword} is not false)");
            }
        }
    }
    out
}

/// The places in an input schema that allow members it does not declare, as (pointer to the
/// subschema, keyword): each subschema whose `additionalProperties` or `unevaluatedProperties`
/// is present and not `false`. mcpguard's closed-arguments check leaves objects there open; it
/// refuses undeclared members everywhere else. Subschemas under `not` and `propertyNames` are
/// skipped: they do not admit members.
pub fn open_schemas(schema: &Value) -> Vec<(String, &'static str)> {
    let mut open = Vec::new();
    let mut pending = vec![(String::new(), schema)];
    while let Some((pointer, node)) = pending.pop() {
        if let Value::Object(map) = node {
            for keyword in ["additionalProperties", "unevaluatedProperties"] {
                if map.get(keyword).is_some_and(|v| v != &Value::Bool(false)) {
                    open.push((pointer.clone(), keyword));
                }
            }
        }
        for child in children(node).into_iter().rev() {
            if child.suffix != "/not" && child.suffix != "/propertyNames" {
                pending.push((format!("{pointer}{}", child.suffix), child.node));
            }
        }
    }
    open
}

fn render_review(out: &mut String, review: Option<&Value>) {
    let members = match review {
        None => {
            out.push_str("  !! NOT REVIEWED\n");
            return;
        }
        Some(Value::Object(members)) => members,
        Some(other) => {
            let _ = writeln!(
                out,
                "  !! review is not a JSON object: {}",
                visible_json(other)
            );
            return;
        }
    };
    out.push_str("  review:\n");
    for name in ["reviewer", "reviewedAt", "sideEffect"] {
        match members.get(name) {
            Some(value) => {
                let _ = writeln!(out, "    {name}: {}", visible_json(value));
            }
            None if name == "sideEffect" => out.push_str(
                "    sideEffect: (not recorded: the local policy classifies the tool, or it is a write)\n",
            ),
            None => {
                let _ = writeln!(out, "    {name}: (missing)");
            }
        }
    }
    match members.get("assertions") {
        Some(Value::Object(assertions)) => {
            out.push_str("    assertions:\n");
            for name in ASSERTIONS {
                let shown = assertions
                    .get(name)
                    .map_or_else(|| "(missing)".to_owned(), visible_json);
                let _ = writeln!(out, "      {name}: {shown}");
            }
            for (name, value) in assertions {
                if !ASSERTIONS.contains(&name.as_str()) {
                    let _ = writeln!(
                        out,
                        "      {}: {}",
                        unknown_label(name),
                        visible_json(value)
                    );
                }
            }
        }
        Some(other) => {
            let _ = writeln!(out, "    assertions: {}", visible_json(other));
        }
        None => out.push_str("    assertions: (missing)\n"),
    }
    match members.get("inputChannels") {
        Some(Value::Object(channels)) if !channels.is_empty() => {
            out.push_str("    inputChannels:\n");
            for (pointer, class) in channels {
                let pointer = if pointer.is_empty() {
                    "\"\" (the whole arguments object)".to_owned()
                } else {
                    reveal(pointer, Clean::LINE)
                };
                let _ = writeln!(out, "      {pointer}: {}", visible_json(class));
            }
        }
        Some(other) => {
            let _ = writeln!(out, "    inputChannels: {}", visible_json(other));
        }
        None => out.push_str("    inputChannels: (missing)\n"),
    }
    for (name, value) in members {
        if !matches!(
            name.as_str(),
            "reviewer" | "reviewedAt" | "sideEffect" | "assertions" | "inputChannels"
        ) {
            let _ = writeln!(out, "    {}: {}", unknown_label(name), visible_json(value));
        }
    }
}

/// Writes one member. Prose (`description`, `instructions`) keeps its line breaks behind a `|`
/// gutter, so that the reviewer reads it as the model does and can still see where it ends;
/// scalars are compact JSON on the label's line; objects and arrays are pretty JSON below it.
fn field(out: &mut String, label: &str, value: &Value, prose: bool) {
    match value {
        Value::String(text) if prose && !text.is_empty() => {
            let _ = writeln!(out, "  {label}:");
            for line in reveal(text, Clean::TEXT).split('\n') {
                let _ = writeln!(out, "    | {line}");
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let _ = writeln!(out, "  {label}:");
            block(out, "    ", &pretty(value));
        }
        Value::Object(members) if !members.is_empty() => {
            let _ = writeln!(out, "  {label}:");
            block(out, "    ", &pretty(value));
        }
        _ => {
            let _ = writeln!(out, "  {label}: {}", visible_json(value));
        }
    }
}

fn unknown_label(name: &str) -> String {
    format!(
        "unknown field {}",
        visible_json(&Value::String(name.to_owned()))
    )
}

fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// Pretty JSON with every hidden character visible. serde_json escapes C0 controls inside strings
/// itself; `reveal` takes care of the rest, in member names as well as values.
fn pretty(value: &Value) -> String {
    // Serializing a Value into a String cannot fail (no I/O, no non-string keys, no NaN).
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    reveal(&text, Clean::TEXT)
}

fn block(out: &mut String, indent: &str, text: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "{indent}{line}");
    }
}

/// Whether `s` holds a hidden character that deserves a warning: anything [`needs_cleaning`]
/// finds except newline and tab (see the module documentation).
fn suspicious(s: &str) -> bool {
    needs_cleaning(s) && s.chars().any(|c| is_hidden(c) && c != '\n' && c != '\t')
}

/// The distinct hidden characters of `s` as `U+XXXX`, in order of first appearance. Listing them
/// also tells a literal `\u{202E}` typed into a description apart from a real U+202E.
fn code_points(s: &str) -> String {
    const SHOWN: usize = 12;
    let mut seen: Vec<char> = Vec::new();
    for c in s.chars() {
        if is_hidden(c) && c != '\n' && c != '\t' && !seen.contains(&c) {
            seen.push(c);
        }
    }
    let mut text: Vec<String> = seen
        .iter()
        .take(SHOWN)
        .map(|c| format!("U+{:04X}", *c as u32))
        .collect();
    if seen.len() > SHOWN {
        text.push(format!("and {} more", seen.len() - SHOWN));
    }
    text.join(" ")
}

/// Warns about one member of an object whose own pointer is `base`.
fn warn_hidden_member(out: &mut String, name: &str, value: &Value, base: &str) {
    let pointer = format!("{base}/{}", escape_token(name));
    if suspicious(name) {
        let _ = writeln!(
            out,
            "!! hidden characters in the member name at {}: {}",
            reveal(&pointer, Clean::LINE),
            code_points(name)
        );
    }
    warn_hidden(out, value, &pointer, "");
}

/// Writes a `!! hidden characters in <pointer>` line for every string and member name under
/// `value` that holds a hidden character. `prefix` says which document the pointers are in.
fn warn_hidden(out: &mut String, value: &Value, base: &str, prefix: &str) {
    let mut pending = vec![(base.to_owned(), value)];
    while let Some((pointer, value)) = pending.pop() {
        match value {
            Value::String(s) if suspicious(s) => {
                let at = if pointer.is_empty() {
                    "the value itself".to_owned()
                } else {
                    reveal(&pointer, Clean::LINE)
                };
                let _ = writeln!(
                    out,
                    "!! hidden characters in {prefix}{at}: {}",
                    code_points(s)
                );
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate().rev() {
                    pending.push((format!("{pointer}/{i}"), item));
                }
            }
            Value::Object(members) => {
                // Member names first, in document order, then the values depth first.
                for name in members.keys() {
                    if suspicious(name) {
                        let _ = writeln!(
                            out,
                            "!! hidden characters in {prefix}the member name at {}: {}",
                            reveal(&format!("{pointer}/{}", escape_token(name)), Clean::LINE),
                            code_points(name)
                        );
                    }
                }
                for (name, item) in members.iter().rev() {
                    pending.push((format!("{pointer}/{}", escape_token(name)), item));
                }
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The input-schema review aid.

/// One place where an input schema admits more than a reviewer can bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// RFC 6901 pointer into the schema (the empty string is the schema itself).
    pub pointer: String,
    /// One of the stable rule codes below.
    pub rule: &'static str,
    /// A fixed sentence for the reviewer; it never quotes schema content.
    pub message: String,
}

/// A string without `maxLength`. `enum` and `const` also bound a string; `format` does not,
/// because under JSON Schema 2020-12 `format` is an annotation unless a validator opts in to
/// asserting it, and even asserted formats such as `uri` or `email` have no length limit.
pub const UNBOUNDED_STRING: &str = "unbounded-string";
/// An array without `maxItems` (a closed tuple, `items: false` after `prefixItems`, also counts).
pub const UNBOUNDED_ARRAY: &str = "unbounded-array";
/// An object without `additionalProperties: false` (or `unevaluatedProperties: false`), or any
/// non-empty `patternProperties`: members nobody reviewed can be sent.
pub const OPEN_OBJECT: &str = "open-object";
/// More than [`MAX_NESTING`] levels of `properties`/`items`, or a recursive reference.
pub const DEEP_NESTING: &str = "deep-nesting";
/// A `$ref`/`$dynamicRef` that is not a local `#…` fragment, or a `$schema` that is not a
/// json-schema.org dialect: another document whose content the reviewer never saw.
pub const EXTERNAL_REF: &str = "external-ref";
/// A schema position with no `type`, `enum`, `const` or `$ref` (for example `{}` or `true`): it
/// accepts strings, arrays and objects of any size. Not in the original list of five rules; added
/// because such a schema is the least bounded of all and fits none of them exactly.
pub const ANY_VALUE: &str = "any-value";
/// A local reference that does not resolve inside the schema, or one that is not a string.
pub const UNRESOLVED_REF: &str = "unresolved-ref";

/// The deepest nesting of `properties`/`items` levels that passes without a finding.
pub const MAX_NESTING: usize = 8;

/// Combinations of `anyOf`/`oneOf` branches examined per schema position; beyond this the extra
/// branches are ignored, which can only add findings (their bounds are not credited).
const MAX_ALTERNATIVES: usize = 64;
/// Nested `allOf`/`anyOf`/`oneOf` levels folded into one schema position.
const MAX_COMBINATOR_DEPTH: usize = 16;
/// Schema positions visited while measuring nesting through references before giving up.
const MAX_STEPS: usize = 100_000;

/// Returns the review aid's findings for one input schema, sorted by pointer then rule.
///
/// Every schema position where the instance can hold a value is checked: `properties`,
/// `patternProperties`, `additionalProperties`, `unevaluatedProperties`, `items` (both forms),
/// `prefixItems`, `additionalItems`, `unevaluatedItems` and every `$defs`/`definitions` entry.
/// `allOf` branches are folded into their position (one branch's `type` and another's
/// `maxLength` bound the same value) and each `anyOf`/`oneOf` branch is checked as one
/// alternative together with what encloses it, so the finding points at the branch that is
/// unbounded. Positions under `not`, `if`, `contains` and `propertyNames` are only checked for
/// references, because they do not admit values on their own. Local references are followed to
/// measure nesting; they are resolved against the schema root (embedded `$id` resources are not
/// treated as separate documents).
pub fn schema_findings(schema: &Value) -> Vec<Finding> {
    let mut found = Findings::default();
    let anchors = collect_anchors(schema);
    check_positions(schema, &anchors, &mut found);
    DepthWalk::new(schema, &anchors, &mut found).run();
    found.into_vec()
}

#[derive(Default)]
struct Findings(BTreeMap<(String, &'static str), String>);

impl Findings {
    /// Records a finding once per (pointer, rule), keeping the first message.
    fn add(&mut self, pointer: &str, rule: &'static str, message: &str) {
        self.0
            .entry((pointer.to_owned(), rule))
            .or_insert_with(|| message.to_owned());
    }

    fn into_vec(self) -> Vec<Finding> {
        self.0
            .into_iter()
            .map(|((pointer, rule), message)| Finding {
                pointer,
                rule,
                message,
            })
            .collect()
    }
}

/// How a subschema relates to the schema that contains it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Describes a value nested one level down (a member or an item).
    Value,
    /// A `$defs`/`definitions` entry: a value position reached through references.
    Def,
    /// Applies to the same value as its parent (`allOf`, `anyOf`, `oneOf`, `then`, …).
    Branch,
    /// Does not admit values on its own (`not`, `if`, `contains`, `propertyNames`).
    Inert,
}

struct Child<'a> {
    suffix: String,
    node: &'a Value,
    role: Role,
    /// How many `properties`/`items` levels deeper the child's value is.
    level: usize,
}

fn push_child<'a>(out: &mut Vec<Child<'a>>, suffix: String, node: &'a Value, role: Role) {
    // Only objects and booleans are schemas; anything else is refused by validators and admits
    // nothing, so there is nothing below it to check.
    if node.is_object() || node.is_boolean() {
        let level = match role {
            Role::Value => 1,
            _ => 0,
        };
        out.push(Child {
            suffix,
            node,
            role,
            level,
        });
    }
}

/// The subschemas directly inside `node`, in document order.
fn children(node: &Value) -> Vec<Child<'_>> {
    let Value::Object(map) = node else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, value) in map {
        let k = escape_token(key);
        match key.as_str() {
            "properties" | "patternProperties" | "dependentSchemas" | "dependencies" | "$defs"
            | "definitions" => {
                let role = match key.as_str() {
                    "properties" | "patternProperties" => Role::Value,
                    "dependentSchemas" | "dependencies" => Role::Branch,
                    _ => Role::Def,
                };
                if let Value::Object(members) = value {
                    for (name, sub) in members {
                        push_child(&mut out, format!("/{k}/{}", escape_token(name)), sub, role);
                    }
                }
            }
            "additionalProperties"
            | "unevaluatedProperties"
            | "additionalItems"
            | "unevaluatedItems" => push_child(&mut out, format!("/{k}"), value, Role::Value),
            "items" | "prefixItems" => match value {
                Value::Array(list) => {
                    for (i, sub) in list.iter().enumerate() {
                        push_child(&mut out, format!("/{k}/{i}"), sub, Role::Value);
                    }
                }
                _ => push_child(&mut out, format!("/{k}"), value, Role::Value),
            },
            // An item schema, so one level down, but it only has to match some of the items.
            "contains" if value.is_object() || value.is_boolean() => out.push(Child {
                suffix: format!("/{k}"),
                node: value,
                role: Role::Inert,
                level: 1,
            }),
            "propertyNames" | "not" | "if" => {
                push_child(&mut out, format!("/{k}"), value, Role::Inert)
            }
            "then" | "else" => push_child(&mut out, format!("/{k}"), value, Role::Branch),
            "allOf" | "anyOf" | "oneOf" => {
                if let Value::Array(list) = value {
                    for (i, sub) in list.iter().enumerate() {
                        push_child(&mut out, format!("/{k}/{i}"), sub, Role::Branch);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// What one schema position (with its `allOf` branches and one choice of `anyOf`/`oneOf`
/// branches) says about the values it admits.
#[derive(Clone, Default)]
struct Facts<'a> {
    /// The admitted JSON types; `None` means any type.
    types: Option<BTreeSet<&'a str>>,
    /// Nothing is admitted (`false`, a non-schema, or contradictory types).
    never: bool,
    /// `enum` or `const`: a finite set of values.
    enumerated: bool,
    /// `$ref`/`$dynamicRef`: the target bounds the value and is checked where it is defined.
    referenced: bool,
    max_length: bool,
    max_items: bool,
    closed_object: bool,
}

fn own_facts(node: &Value) -> Facts<'_> {
    match node {
        Value::Bool(true) => Facts::default(),
        Value::Object(m) => {
            let types = match m.get("type") {
                Some(Value::String(t)) => Some(BTreeSet::from([t.as_str()])),
                Some(Value::Array(list)) => Some(list.iter().filter_map(Value::as_str).collect()),
                _ => None,
            };
            let is_false = |key: &str| m.get(key) == Some(&Value::Bool(false));
            Facts {
                never: types.as_ref().is_some_and(BTreeSet::is_empty),
                types,
                enumerated: m.contains_key("enum") || m.contains_key("const"),
                referenced: m.contains_key("$ref") || m.contains_key("$dynamicRef"),
                max_length: m.get("maxLength").is_some_and(Value::is_number),
                max_items: m.get("maxItems").is_some_and(Value::is_number)
                    || is_false("items")
                    || (m.get("items").is_some_and(Value::is_array) && is_false("additionalItems")),
                closed_object: is_false("additionalProperties")
                    || is_false("unevaluatedProperties"),
            }
        }
        _ => Facts {
            never: true,
            ..Facts::default()
        },
    }
}

/// Both sets of facts at once: a value must satisfy each of them.
fn merge<'a>(a: &Facts<'a>, b: &Facts<'a>) -> Facts<'a> {
    let types = match (&a.types, &b.types) {
        (None, t) | (t, None) => t.clone(),
        (Some(x), Some(y)) => {
            let mut both = BTreeSet::new();
            for t in x {
                if y.contains(t) {
                    both.insert(*t);
                } else if (*t == "integer" && y.contains("number"))
                    || (*t == "number" && y.contains("integer"))
                {
                    both.insert("integer");
                }
            }
            Some(both)
        }
    };
    Facts {
        never: a.never || b.never || types.as_ref().is_some_and(BTreeSet::is_empty),
        types,
        enumerated: a.enumerated || b.enumerated,
        referenced: a.referenced || b.referenced,
        max_length: a.max_length || b.max_length,
        max_items: a.max_items || b.max_items,
        closed_object: a.closed_object || b.closed_object,
    }
}

struct Alternative<'a> {
    facts: Facts<'a>,
    /// The `anyOf`/`oneOf` branch this alternative chose, if any; findings point there.
    at: Option<String>,
}

fn alternatives<'a>(node: &'a Value, pointer: &str, depth: usize) -> Vec<Alternative<'a>> {
    let mut alts = vec![Alternative {
        facts: own_facts(node),
        at: None,
    }];
    let Value::Object(m) = node else {
        return alts;
    };
    if depth >= MAX_COMBINATOR_DEPTH {
        return alts;
    }
    if let Some(Value::Array(branches)) = m.get("allOf") {
        for (i, branch) in branches.iter().enumerate() {
            let sub = alternatives(branch, &format!("{pointer}/allOf/{i}"), depth + 1);
            alts = product(alts, sub);
        }
    }
    for keyword in ["anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = m.get(keyword) {
            let mut union = Vec::new();
            for (i, branch) in branches.iter().enumerate() {
                let at = format!("{pointer}/{keyword}/{i}");
                for mut alt in alternatives(branch, &at, depth + 1) {
                    alt.at.get_or_insert_with(|| at.clone());
                    union.push(alt);
                }
            }
            if !union.is_empty() {
                alts = product(alts, union);
            }
        }
    }
    alts
}

fn product<'a>(left: Vec<Alternative<'a>>, right: Vec<Alternative<'a>>) -> Vec<Alternative<'a>> {
    if left.len().saturating_mul(right.len()) > MAX_ALTERNATIVES {
        // Each real combination is `left ∧ right`, which admits no more than `left` alone; so
        // checking `left` alone finds at least what the combinations would, never less.
        return left;
    }
    let mut out = Vec::with_capacity(left.len() * right.len());
    for l in &left {
        for r in &right {
            out.push(Alternative {
                facts: merge(&l.facts, &r.facts),
                at: r.at.clone().or_else(|| l.at.clone()),
            });
        }
    }
    out
}

fn check_alternative(alt: &Alternative, pointer: &str, found: &mut Findings) {
    let f = &alt.facts;
    if f.never || f.enumerated || f.referenced {
        return;
    }
    let at = alt.at.as_deref().unwrap_or(pointer);
    let Some(types) = &f.types else {
        found.add(
            at,
            ANY_VALUE,
            "accepts any JSON value: no type, enum, const or $ref restricts it, so strings, arrays and objects of any size pass",
        );
        return;
    };
    if types.contains("string") && !f.max_length {
        found.add(
            at,
            UNBOUNDED_STRING,
            "string without maxLength (enum or const would also bound it; format does not)",
        );
    }
    if types.contains("array") && !f.max_items {
        found.add(at, UNBOUNDED_ARRAY, "array without maxItems");
    }
    if types.contains("object") && !f.closed_object {
        found.add(
            at,
            OPEN_OBJECT,
            "object without additionalProperties: false: the schema accepts members nobody reviewed (mcpguard refuses those it does not declare unless the object is open, see \"arguments:\" below)",
        );
    }
}

/// Walks every schema position once (without following references) for the bound rules and the
/// reference rules.
fn check_positions(root: &Value, anchors: &Anchors, found: &mut Findings) {
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Mode {
        /// A position that admits values: its bounds are checked.
        Value,
        /// Part of an enclosing position, already folded into its alternatives.
        Branch,
        /// Admits nothing on its own: only references are checked.
        Inert,
    }
    let mut pending = vec![(root, String::new(), Mode::Value)];
    while let Some((node, pointer, mode)) = pending.pop() {
        if let Value::Object(m) = node {
            check_refs(root, anchors, m, &pointer, found);
            if mode != Mode::Inert {
                if let Some(Value::Object(patterns)) = m.get("patternProperties") {
                    if !patterns.is_empty() {
                        found.add(
                            &format!("{pointer}/patternProperties"),
                            OPEN_OBJECT,
                            "patternProperties accepts any number of members whose names match a pattern",
                        );
                    }
                }
            }
        }
        if mode == Mode::Value {
            for alt in alternatives(node, &pointer, 0) {
                check_alternative(&alt, &pointer, found);
            }
        }
        for child in children(node).into_iter().rev() {
            let next = match (mode, child.role) {
                (Mode::Inert, _) | (_, Role::Inert) => Mode::Inert,
                (_, Role::Value | Role::Def) => Mode::Value,
                (_, Role::Branch) => Mode::Branch,
            };
            pending.push((child.node, format!("{pointer}{}", child.suffix), next));
        }
    }
}

fn is_local(reference: &str) -> bool {
    reference.is_empty() || reference.starts_with('#')
}

fn check_refs(
    root: &Value,
    anchors: &Anchors,
    m: &Map<String, Value>,
    pointer: &str,
    found: &mut Findings,
) {
    for keyword in ["$ref", "$dynamicRef"] {
        let Some(reference) = m.get(keyword) else {
            continue;
        };
        let at = format!("{pointer}/{}", escape_token(keyword));
        match reference {
            Value::String(r) if is_local(r) => {
                if resolve(root, anchors, r).is_none() {
                    found.add(
                        &at,
                        UNRESOLVED_REF,
                        "local reference that does not resolve inside this schema",
                    );
                }
            }
            Value::String(_) => found.add(
                &at,
                EXTERNAL_REF,
                "reference to another document: it must never be fetched, so what it allows was not reviewed",
            ),
            _ => found.add(&at, UNRESOLVED_REF, "reference that is not a string"),
        }
    }
    if let Some(Value::String(dialect)) = m.get("$schema") {
        let known = dialect.starts_with("https://json-schema.org/")
            || dialect.starts_with("http://json-schema.org/");
        if !known {
            found.add(
                &format!("{pointer}/$schema"),
                EXTERNAL_REF,
                "meta-schema outside json-schema.org: a validator might fetch it",
            );
        }
    }
}

/// `$anchor` and `$dynamicAnchor` names, each with the pointer and schema it names.
type Anchors<'a> = HashMap<String, (String, &'a Value)>;

fn collect_anchors(root: &Value) -> Anchors<'_> {
    let mut anchors = Anchors::new();
    let mut pending = vec![(root, String::new())];
    while let Some((node, pointer)) = pending.pop() {
        if let Value::Object(m) = node {
            for keyword in ["$anchor", "$dynamicAnchor"] {
                if let Some(Value::String(name)) = m.get(keyword) {
                    anchors
                        .entry(name.clone())
                        .or_insert_with(|| (pointer.clone(), node));
                }
            }
        }
        for child in children(node) {
            pending.push((child.node, format!("{pointer}{}", child.suffix)));
        }
    }
    anchors
}

/// Resolves a local reference (`#`, `#/json/pointer` with percent-encoding, or `#anchor`) to the
/// pointer and schema it names.
fn resolve<'a>(
    root: &'a Value,
    anchors: &Anchors<'a>,
    reference: &str,
) -> Option<(String, &'a Value)> {
    let fragment = reference.strip_prefix('#').unwrap_or(reference);
    let fragment = percent_decode(fragment)?;
    if fragment.is_empty() {
        Some((String::new(), root))
    } else if fragment.starts_with('/') {
        root.pointer(&fragment).map(|node| (fragment.clone(), node))
    } else {
        anchors
            .get(&fragment)
            .map(|(pointer, node)| (pointer.clone(), *node))
    }
}

fn percent_decode(s: &str) -> Option<String> {
    if !s.contains('%') {
        return Some(s.to_owned());
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let digit = |b: u8| char::from(b).to_digit(16);
            out.push(u8::try_from(digit(hex[0])? * 16 + digit(hex[1])?).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Measures `properties`/`items` nesting from the root, following local references, and finds
/// recursion. Depth first on an explicit stack: `on_path` holds the pointers of the schemas being
/// expanded, so reaching one of them again is recursion, which makes nesting unbounded.
struct DepthWalk<'a, 'f> {
    root: &'a Value,
    anchors: &'f Anchors<'a>,
    found: &'f mut Findings,
    on_path: HashSet<String>,
    /// (target, depth) pairs already expanded through a reference; expanding one again at the
    /// same depth cannot find anything new, and skipping it keeps shared definitions linear.
    explored: HashSet<(String, usize)>,
    frames: Vec<Frame<'a>>,
    steps: usize,
}

struct Frame<'a> {
    pointer: String,
    /// Subschemas still to visit: (pointer, schema, depth), next one last.
    pending: Vec<(String, &'a Value, usize)>,
}

impl<'a, 'f> DepthWalk<'a, 'f> {
    fn new(root: &'a Value, anchors: &'f Anchors<'a>, found: &'f mut Findings) -> Self {
        DepthWalk {
            root,
            anchors,
            found,
            on_path: HashSet::new(),
            explored: HashSet::new(),
            frames: Vec::new(),
            steps: 0,
        }
    }

    fn run(mut self) {
        self.enter(self.root, String::new(), 0);
        while let Some(frame) = self.frames.last_mut() {
            match frame.pending.pop() {
                Some((pointer, node, depth)) => {
                    self.steps += 1;
                    if self.steps > MAX_STEPS {
                        self.found.add(
                            "",
                            DEEP_NESTING,
                            "schema too intricate to measure its nesting; treat it as unbounded",
                        );
                        return;
                    }
                    self.enter(node, pointer, depth);
                }
                None => {
                    if let Some(done) = self.frames.pop() {
                        self.on_path.remove(&done.pointer);
                    }
                }
            }
        }
    }

    fn enter(&mut self, node: &'a Value, pointer: String, depth: usize) {
        if depth > MAX_NESTING {
            self.found.add(
                &pointer,
                DEEP_NESTING,
                "more than 8 levels of nested properties or items",
            );
            return;
        }
        if !self.on_path.insert(pointer.clone()) {
            self.found.add(
                &pointer,
                DEEP_NESTING,
                "schema that contains itself: nesting depth is unbounded",
            );
            return;
        }
        let mut pending = Vec::new();
        if let Value::Object(m) = node {
            for keyword in ["$ref", "$dynamicRef"] {
                let Some(Value::String(reference)) = m.get(keyword) else {
                    continue;
                };
                if !is_local(reference) {
                    continue;
                }
                let Some((target_pointer, target)) = resolve(self.root, self.anchors, reference)
                else {
                    continue;
                };
                if self.on_path.contains(&target_pointer) {
                    self.found.add(
                        &format!("{pointer}/{}", escape_token(keyword)),
                        DEEP_NESTING,
                        "recursive reference: nesting depth is unbounded",
                    );
                } else if self.explored.insert((target_pointer.clone(), depth)) {
                    pending.push((target_pointer, target, depth));
                }
            }
        }
        for child in children(node) {
            // `false` admits no value, so it cannot nest one (`additionalProperties: false` is the
            // usual case); definitions are reached only through references.
            if child.role != Role::Def && child.node != &Value::Bool(false) {
                pending.push((
                    format!("{pointer}{}", child.suffix),
                    child.node,
                    depth + child.level,
                ));
            }
        }
        pending.reverse();
        self.frames.push(Frame { pointer, pending });
    }
}

#[cfg(test)]
mod tests;
