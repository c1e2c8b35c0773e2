//! The content-trust report (seed 000, "UWS 1.9 content trust"): for each reviewed tool, the
//! reviewed input-channel map and the value capability of each location of its output schema.
//!
//! The report is derived from the snapshot alone, deterministically, and never from argument or
//! result values: it says what *could* carry free text towards a model, not what did.
//!
//! Pure; knows the snapshot and nothing of live calls, the policy or processes.

use serde_json::Value;

use crate::snapshot::manifest::{self, escape_token};

/// How much a value at an output location can say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// An unconstrained string: it can carry any text, including instructions.
    FreeText,
    /// A boolean, a number, null, or a closed enum/const: it cannot carry free text.
    ConstrainedScalar,
    /// An object or an array (its members are listed as locations of their own).
    Composite,
    /// No schema, or one too ambiguous to classify (`$ref`, `anyOf`, several types).
    Unknown,
}

impl Capability {
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::FreeText => "free_text",
            Capability::ConstrainedScalar => "constrained_scalar",
            Capability::Composite => "composite",
            Capability::Unknown => "unknown",
        }
    }
}

/// Deepest location reported; deeper schemas are summarized as unknown.
const MAX_DEPTH: usize = 16;

/// Every location of an output schema with its capability, in schema order. Array elements
/// are written `/*` (every element); the root is the empty pointer.
pub fn output_locations(schema: Option<&Value>) -> Vec<(String, Capability)> {
    let mut out = Vec::new();
    match schema {
        None => out.push((String::new(), Capability::Unknown)),
        Some(s) => walk(s, String::new(), 0, &mut out),
    }
    out
}

fn walk(schema: &Value, pointer: String, depth: usize, out: &mut Vec<(String, Capability)>) {
    let Some(obj) = schema.as_object() else {
        out.push((pointer, Capability::Unknown));
        return;
    };
    if depth > MAX_DEPTH {
        out.push((pointer, Capability::Unknown));
        return;
    }
    let ambiguous = ["$ref", "anyOf", "oneOf", "allOf", "if", "$dynamicRef"]
        .iter()
        .any(|k| obj.contains_key(*k));
    let types: Vec<&str> = match obj.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect(),
        _ => Vec::new(),
    };
    let closed = obj.contains_key("enum") || obj.contains_key("const");
    let cap = if closed && !types.iter().any(|t| matches!(*t, "object" | "array")) {
        Capability::ConstrainedScalar
    } else if ambiguous || types.len() != 1 {
        Capability::Unknown
    } else {
        match types[0] {
            "string" => Capability::FreeText,
            "boolean" | "number" | "integer" | "null" => Capability::ConstrainedScalar,
            "object" | "array" => Capability::Composite,
            _ => Capability::Unknown,
        }
    };
    out.push((pointer.clone(), cap));
    if cap != Capability::Composite {
        return;
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            walk(
                sub,
                format!("{pointer}/{}", escape_token(name)),
                depth + 1,
                out,
            );
        }
    }
    if let Some(items) = obj.get("items") {
        walk(items, format!("{pointer}/*"), depth + 1, out);
    }
}

/// The report for every reviewed tool of one server entry.
pub fn report(server_key: &str, entry: &Value) -> String {
    let mut s = format!("server {server_key}\n");
    let Ok(tools) = manifest::tools(server_key, entry) else {
        s.push_str("  (the tool pages are malformed; run `mcpguard check`)\n");
        return s;
    };
    for (name, _, tool) in &tools {
        let Some(review) = manifest::review_of(entry, name) else {
            continue;
        };
        s.push_str(&format!("  tool {name}\n    input channels:\n"));
        let mut channels: Vec<(String, String)> = review
            .get("inputChannels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(p, c)| (p.clone(), c.as_str().unwrap_or("?").to_string()))
                    .collect()
            })
            .unwrap_or_default();
        channels.sort();
        if channels.is_empty() {
            s.push_str("      (no arguments)\n");
        }
        for (p, c) in channels {
            s.push_str(&format!(
                "      {}: {c}\n",
                if p.is_empty() { "(root)" } else { &p }
            ));
        }
        s.push_str("    output locations:\n");
        for (p, cap) in output_locations(tool.get("outputSchema")) {
            let p = if p.is_empty() {
                "(root)".to_string()
            } else {
                p
            };
            s.push_str(&format!("      {p}: {}\n", cap.as_str()));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: Option<Value>, want: &[(&str, &str)]) {
        let got: Vec<(String, &str)> = output_locations(schema.as_ref())
            .into_iter()
            .map(|(p, c)| (p, c.as_str()))
            .collect();
        let want: Vec<(String, &str)> = want.iter().map(|(p, c)| (p.to_string(), *c)).collect();
        assert_eq!(got, want, "{schema:?}");
    }

    #[test]
    fn capabilities_of_output_locations() {
        check(None, &[("", "unknown")]);
        check(
            Some(
                json!({"type": "object", "properties": {"text": {"type": "string"}, "n": {"type": "integer"}}}),
            ),
            &[
                ("", "composite"),
                ("/text", "free_text"),
                ("/n", "constrained_scalar"),
            ],
        );
        check(
            Some(
                json!({"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"]}, "k": {"const": "x"}}}),
            ),
            &[
                ("", "composite"),
                ("/mode", "constrained_scalar"),
                ("/k", "constrained_scalar"),
            ],
        );
        check(
            Some(
                json!({"type": "object", "properties": {"uris": {"type": "array", "items": {"type": "string", "format": "uri"}}}}),
            ),
            &[
                ("", "composite"),
                ("/uris", "composite"),
                ("/uris/*", "free_text"),
            ],
        );
        check(
            Some(
                json!({"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "number"}]}, "y": {}, "z": {"type": ["string", "number"]}, "w": {"type": ["boolean", "null"]}}}),
            ),
            &[
                ("", "composite"),
                ("/x", "unknown"),
                ("/y", "unknown"),
                ("/z", "unknown"),
                ("/w", "constrained_scalar"),
            ],
        );
        check(
            Some(json!({"type": "object", "properties": {"a/b": {"$ref": "#/$defs/t"}}})),
            &[("", "composite"), ("/a~1b", "unknown")],
        );
    }

    #[test]
    fn report_lists_reviewed_tools_only_without_values() {
        let entry = json!({
            "serverInfo": {"name": "s", "version": "1"},
            "toolPages": [{"tools": [
                {"name": "echo", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}},
                {"name": "other", "inputSchema": {"type": "object"}}
            ]}],
            "reviews": {"echo": {"inputChannels": {"/text": "data", "/mode": "instruction"}}}
        });
        let r = report("s", &entry);
        assert_eq!(r, "server s\n  tool echo\n    input channels:\n      /mode: instruction\n      /text: data\n    output locations:\n      (root): composite\n      /text: free_text\n");
    }
}
