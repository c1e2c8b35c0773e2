//! JSON and JSONC (JSON with comments and trailing commas, which VS Code and Zed read) as a
//! [`Node`] tree with byte spans, and the text of the values `wrap` writes into such a file.
//!
//! The parser is dprint's `jsonc-parser` (its AST keeps every value's byte range); every JSON5
//! extension it could accept beyond comments and trailing commas is turned off, because no host
//! `wrap` knows reads them. Duplicate member names are refused, as `snapshot::strict` refuses
//! them, because hosts disagree on which of two values wins.

use std::ops::Range;

use jsonc_parser::ast;
use serde_json::Value;

use super::tree::{indentation_at, Kind, Member, Node};

/// Parses JSON with comments and trailing commas into a tree.
pub(super) fn parse(text: &str) -> Result<Node, String> {
    let options = jsonc_parser::ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let parsed = jsonc_parser::parse_to_ast(text, &Default::default(), &options)
        .map_err(|e| e.to_string())?;
    let value = parsed.value.ok_or("the file holds no JSON value")?;
    convert(&value, &mut Vec::new())
}

fn range(r: &jsonc_parser::common::Range) -> Range<usize> {
    r.start..r.end
}

/// The tree of one AST value; `path` is where it is, for the duplicate-name message.
fn convert(v: &ast::Value<'_>, path: &mut Vec<String>) -> Result<Node, String> {
    let scalar = |span: Range<usize>, value: Value| Node {
        span,
        kind: Kind::Scalar(value),
        odd: None,
    };
    Ok(match v {
        ast::Value::StringLit(s) => scalar(range(&s.range), Value::String(s.value.to_string())),
        ast::Value::NumberLit(n) => {
            let number: Value = serde_json::from_str(n.value)
                .map_err(|e| format!("the number {} cannot be read: {e}", n.value))?;
            scalar(range(&n.range), number)
        }
        ast::Value::BooleanLit(b) => scalar(range(&b.range), Value::Bool(b.value)),
        ast::Value::NullKeyword(n) => scalar(range(&n.range), Value::Null),
        ast::Value::Array(a) => {
            let mut items = Vec::with_capacity(a.elements.len());
            for (i, e) in a.elements.iter().enumerate() {
                path.push(i.to_string());
                items.push(convert(e, path)?);
                path.pop();
            }
            Node {
                span: range(&a.range),
                kind: Kind::Seq { items, flow: true },
                odd: None,
            }
        }
        ast::Value::Object(o) => {
            let mut members: Vec<Member> = Vec::with_capacity(o.properties.len());
            for p in &o.properties {
                let (key, key_span) = match &p.name {
                    ast::ObjectPropName::String(s) => (s.value.to_string(), range(&s.range)),
                    ast::ObjectPropName::Word(w) => (w.value.to_string(), range(&w.range)),
                };
                if members.iter().any(|m| m.key == key) {
                    let at = if path.is_empty() {
                        String::new()
                    } else {
                        format!(" in /{}", path.join("/"))
                    };
                    return Err(format!("the member name {key:?} appears twice{at}"));
                }
                path.push(key.clone());
                let value = convert(&p.value, path)?;
                path.pop();
                members.push(Member {
                    key,
                    key_span,
                    value,
                });
            }
            Node {
                span: range(&o.range),
                kind: Kind::Map {
                    members,
                    flow: true,
                },
                odd: None,
            }
        }
    })
}

/// The file's indentation unit: the whitespace before the first indented line, as the file's
/// writer chose it (two spaces when nothing is indented).
pub(super) fn indent_unit(text: &str) -> String {
    text.lines()
        .skip(1)
        .map(|l| {
            l.chars()
                .take_while(|c| *c == ' ' || *c == '\t')
                .collect::<String>()
        })
        .find(|w| !w.is_empty())
        .unwrap_or_else(|| "  ".to_string())
}

/// How new values are laid out where they go: over several lines at an indentation, or on one.
pub(super) struct Layout {
    /// The indentation of the line the value begins on.
    pub indent: String,
    pub unit: String,
    pub multiline: bool,
    /// The file's line break.
    pub newline: &'static str,
}

impl Layout {
    /// The layout of a value that replaces or joins `node` (an entry or a member of it): lines
    /// when the entry was written over lines, one line when it was written on one.
    pub fn of(text: &str, entry: &Node, at: usize) -> Layout {
        Layout {
            indent: indentation_at(text, at).to_string(),
            unit: indent_unit(text),
            multiline: text[entry.span.clone()].contains('\n'),
            newline: super::tree::newline_of(text),
        }
    }

    /// The JSON text of `value` laid out this way.
    pub fn render(&self, value: &Value) -> String {
        if !self.multiline {
            return match value {
                // `["a", "b"]`: the one-line form people write by hand.
                Value::Array(items) => format!(
                    "[{}]",
                    items
                        .iter()
                        .map(|v| v.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                other => other.to_string(),
            };
        }
        let mut buf = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(self.unit.as_bytes());
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
        // Serializing a Value into a Vec cannot fail.
        let _ = serde::Serialize::serialize(value, &mut ser);
        let pretty = String::from_utf8(buf).unwrap_or_default();
        pretty.replace('\n', &format!("{}{}", self.newline, self.indent))
    }
}

/// The text that puts a new member `key: value` after `after` (a member of an object written with
/// `layout`): a comma, then the member on a line of its own at the member's indentation, or on the
/// same line for a one-line object. A comma that followed `after` stays after the new member.
pub(super) fn member_after(
    after: &Member,
    key: &str,
    value: &Value,
    layout: &Layout,
) -> (Range<usize>, String) {
    let at = after.value.span.end;
    let key = Value::String(key.to_string());
    let text = if layout.multiline {
        format!(
            ",{}{}{key}: {}",
            layout.newline,
            layout.indent,
            layout.render(value)
        )
    } else {
        format!(", {key}: {}", layout.render(value))
    };
    (at..at, text)
}

/// The text that fills an empty object `{}` at `node` with its first members.
pub(super) fn fill_empty(
    node: &Node,
    members: &[(String, Value)],
    layout: &Layout,
) -> (Range<usize>, String) {
    let object: serde_json::Map<String, Value> = members.iter().cloned().collect();
    (node.span.clone(), layout.render(&Value::Object(object)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn comments_and_trailing_commas_are_read_with_spans() {
        let text = "{\n  // servers\n  \"servers\": {\n    \"a\": {\"command\": \"x\", \"args\": [\"1\",],},\n  },\n}\n";
        let tree = parse(text).unwrap();
        assert_eq!(
            tree.to_value(),
            json!({"servers": {"a": {"command": "x", "args": ["1"]}}})
        );
        let cmd = tree.at(&["servers", "a", "command"]).unwrap();
        assert_eq!(&text[cmd.span.clone()], "\"x\"");
        let args = tree.at(&["servers", "a", "args"]).unwrap();
        assert_eq!(&text[args.span.clone()], "[\"1\",]");
    }

    #[test]
    fn what_no_host_reads_is_refused() {
        for bad in [
            "{\"a\": 1, \"a\": 2}",
            "{a: 1}",
            "{\"a\": 'x'}",
            "{\"a\": 0x10}",
            "{\"a\": 1 \"b\": 2}",
            "{\"a\": NaN}",
            "",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let e = parse("{\"s\": {\"a\": 1, \"a\": 2}}").unwrap_err();
        assert!(e.contains("\"a\" appears twice in /s"), "{e}");
    }

    #[test]
    fn values_are_laid_out_like_their_neighbours() {
        let text = "{\n    \"s\": {\n        \"command\": \"x\"\n    }\n}";
        let tree = parse(text).unwrap();
        let entry = tree.at(&["s"]).unwrap();
        let cmd = entry.member("command").unwrap();
        let layout = Layout::of(text, entry, cmd.key_span.start);
        assert_eq!(layout.indent, "        ");
        assert_eq!(
            layout.render(&json!(["a", "b"])),
            "[\n            \"a\",\n            \"b\"\n        ]"
        );
        let (at, new) = member_after(cmd, "args", &json!(["a"]), &layout);
        let out = super::super::tree::splice(text, vec![(at, new)]).unwrap();
        assert_eq!(
            out,
            "{\n    \"s\": {\n        \"command\": \"x\",\n        \"args\": [\n            \"a\"\n        ]\n    }\n}"
        );
        let one = "{\"s\": {\"command\": \"x\"}}";
        let tree = parse(one).unwrap();
        let entry = tree.at(&["s"]).unwrap();
        let layout = Layout::of(one, entry, entry.span.start);
        assert_eq!(layout.render(&json!(["a", "b"])), "[\"a\", \"b\"]");
    }
}
