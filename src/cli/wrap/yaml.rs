//! YAML (fast-agent's `fastagent.config.yaml`, Goose's `config.yaml`) as a [`Node`] tree with
//! byte spans, and the text of the values `wrap` writes into such a file.
//!
//! A YAML file cannot be re-serialized without losing its comments and layout, so `wrap` splices
//! new text into the spans of the values it changes. The tree is built from the event parser of
//! `saphyr-parser` (the maintained successor of yaml-rust), which reports where each event is.
//! Its end positions of quoted scalars are not exact (an escape moves them), so the end of a
//! quoted scalar is found here by scanning its quotes, the start of a block sequence is moved
//! back to its first dash, and a block collection ends where its last value ends. Whatever the
//! spans, the edited file is read back and compared before it is written.
//!
//! Plain scalars are typed by the YAML 1.2 core schema (null, booleans, numbers), which is
//! enough to tell a string from something else: `wrap` only ever reads strings from the entries.

use std::collections::HashMap;
use std::ops::Range;

use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::Value;

use super::tree::{Kind, Member, Node};

/// A collection being read: its items so far and where it began.
enum Open {
    Seq {
        start: usize,
        flow: bool,
        anchor: usize,
        tagged: bool,
        items: Vec<Node>,
    },
    Map {
        start: usize,
        flow: bool,
        anchor: usize,
        tagged: bool,
        members: Vec<Member>,
        key: Option<(String, Range<usize>)>,
        merge: bool,
    },
}

/// Parses a one-document YAML file into a tree.
pub(super) fn parse(text: &str) -> Result<Node, String> {
    // The parser counts characters; the tree is in bytes.
    let mut bytes: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    bytes.push(text.len());
    let at = |index: usize| bytes.get(index).copied().unwrap_or(text.len());
    let mut stack: Vec<Open> = Vec::new();
    let mut anchors: HashMap<usize, Value> = HashMap::new();
    let mut root: Option<Node> = None;
    let mut documents = 0;
    for event in Parser::new_from_str(text) {
        let (event, span) = event.map_err(|e| {
            format!(
                "{} at line {} column {}",
                e.info(),
                e.marker().line(),
                e.marker().col() + 1
            )
        })?;
        let start = at(span.start.index());
        let end = at(span.end.index());
        let node = match event {
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err("it holds more than one YAML document (`---`); keep the configuration in one".into());
                }
                continue;
            }
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => continue,
            Event::Alias(id) => Node {
                span: start..end,
                kind: Kind::Scalar(anchors.get(&id).cloned().unwrap_or(Value::Null)),
                odd: Some("an alias (*name)"),
            },
            Event::Scalar(value, style, anchor, tag) => {
                let (end, odd) = match style {
                    ScalarStyle::Plain => (end, None),
                    ScalarStyle::SingleQuoted => (quoted_end(text, start, '\'')?, None),
                    ScalarStyle::DoubleQuoted => (quoted_end(text, start, '"')?, None),
                    _ => (end, Some("a block scalar (| or >)")),
                };
                let odd = odd
                    .or(tag.is_some().then_some("a tag (!name)"))
                    .or((anchor != 0).then_some("an anchor (&name)"));
                let value = if style == ScalarStyle::Plain && tag.is_none() {
                    plain(&value)
                } else {
                    Value::String(value.into_owned())
                };
                if anchor != 0 {
                    anchors.insert(anchor, value.clone());
                }
                Node {
                    span: start..end,
                    kind: Kind::Scalar(value),
                    odd,
                }
            }
            Event::SequenceStart(anchor, tag) => {
                push(
                    &mut stack,
                    Open::Seq {
                        start,
                        flow: text[start..].starts_with('['),
                        anchor,
                        tagged: tag.is_some(),
                        items: Vec::new(),
                    },
                )?;
                continue;
            }
            Event::MappingStart(anchor, tag) => {
                push(
                    &mut stack,
                    Open::Map {
                        start,
                        flow: text[start..].starts_with('{'),
                        anchor,
                        tagged: tag.is_some(),
                        members: Vec::new(),
                        key: None,
                        merge: false,
                    },
                )?;
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Open::Seq {
                    start: first,
                    flow,
                    anchor,
                    tagged,
                    items,
                }) => {
                    let span = if flow {
                        first..end
                    } else {
                        dash_before(text, first)..items.last().map_or(first, |n| n.span.end)
                    };
                    let kind = Kind::Seq { items, flow };
                    collection(span, kind, (anchor, tagged, false), &mut anchors)
                }
                _ => return Err("a sequence ends that did not begin (a parser error)".into()),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Open::Map {
                    start: first,
                    flow,
                    anchor,
                    tagged,
                    members,
                    merge,
                    ..
                }) => {
                    let span = if flow {
                        first..end
                    } else {
                        first..members.last().map_or(first, |m| m.value.span.end)
                    };
                    let kind = Kind::Map { members, flow };
                    collection(span, kind, (anchor, tagged, merge), &mut anchors)
                }
                _ => return Err("a mapping ends that did not begin (a parser error)".into()),
            },
        };
        attach(&mut stack, &mut root, node, text)?;
    }
    root.ok_or_else(|| "the file is empty".to_string())
}

fn push(stack: &mut Vec<Open>, open: Open) -> Result<(), String> {
    if stack.len() >= crate::protocol::MAX_JSON_DEPTH {
        return Err(format!(
            "it nests deeper than {} levels",
            crate::protocol::MAX_JSON_DEPTH
        ));
    }
    stack.push(open);
    Ok(())
}

/// A finished collection, marked when it has an anchor, a tag or a merge key (`marks`), and
/// remembered under its anchor for the aliases that follow.
fn collection(
    span: Range<usize>,
    kind: Kind,
    (anchor, tagged, merge): (usize, bool, bool),
    anchors: &mut HashMap<usize, Value>,
) -> Node {
    let odd = if merge {
        Some("a merge key (<<)")
    } else if tagged {
        Some("a tag (!name)")
    } else if anchor != 0 {
        Some("an anchor (&name)")
    } else {
        None
    };
    let node = Node { span, kind, odd };
    if anchor != 0 {
        anchors.insert(anchor, node.to_value());
    }
    node
}

/// Puts a finished node where it belongs: an item, a key, a key's value, or the document.
fn attach(
    stack: &mut [Open],
    root: &mut Option<Node>,
    node: Node,
    text: &str,
) -> Result<(), String> {
    match stack.last_mut() {
        None => *root = Some(node),
        Some(Open::Seq { items, .. }) => items.push(node),
        Some(Open::Map {
            members,
            key,
            merge,
            ..
        }) => match key.take() {
            None => {
                let Kind::Scalar(k) = &node.kind else {
                    return Err(format!(
                        "a mapping key at byte {} is not a plain word or string",
                        node.span.start
                    ));
                };
                let name = match k {
                    Value::String(s) => s.clone(),
                    Value::Null => text[node.span.clone()].to_string(),
                    other => other.to_string(),
                };
                if name == "<<" && matches!(node.kind, Kind::Scalar(Value::String(_))) {
                    *merge = true;
                }
                if members.iter().any(|m| m.key == name) {
                    return Err(format!("the key {name:?} appears twice in one mapping"));
                }
                *key = Some((name, node.span.clone()));
            }
            Some((name, key_span)) => members.push(Member {
                key: name,
                key_span,
                value: node,
            }),
        },
    }
    Ok(())
}

/// The end of the quoted scalar that begins at `start` (just after its closing quote).
fn quoted_end(text: &str, start: usize, quote: char) -> Result<usize, String> {
    let mut chars = text[start..].char_indices();
    if chars.next().map(|(_, c)| c) != Some(quote) {
        return Err(format!(
            "a quoted string at byte {start} does not begin with its quote"
        ));
    }
    while let Some((i, c)) = chars.next() {
        if quote == '"' && c == '\\' {
            chars.next();
        } else if c == quote {
            // In single quotes, `''` is one quote.
            if quote == '\'' && text[start + i + 1..].starts_with('\'') {
                chars.next();
                continue;
            }
            return Ok(start + i + c.len_utf8());
        }
    }
    Err(format!("the quoted string at byte {start} does not end"))
}

/// Where a block sequence's first dash is, given where its first item begins.
fn dash_before(text: &str, first: usize) -> usize {
    let before = text[..first].trim_end_matches([' ', '\t']);
    if before.ends_with('-') {
        before.len() - 1
    } else {
        first
    }
}

/// A plain scalar by the YAML 1.2 core schema.
fn plain(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(i) = s.parse::<i64>() {
            return Value::from(i);
        }
    }
    let numeric = !digits.is_empty()
        && digits.bytes().any(|b| b.is_ascii_digit())
        && digits
            .bytes()
            .all(|b| b.is_ascii_digit() || b"._eE-+".contains(&b))
        && !digits.starts_with(['e', 'E']);
    if numeric {
        if let Some(n) = s.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
            return Value::Number(n);
        }
    }
    if let Some(hex) = s.strip_prefix("0x") {
        if let Ok(i) = i64::from_str_radix(hex, 16) {
            return Value::from(i);
        }
    }
    if let Some(oct) = s.strip_prefix("0o") {
        if let Ok(i) = i64::from_str_radix(oct, 8) {
            return Value::from(i);
        }
    }
    Value::String(s.to_string())
}

/// A string as a YAML double-quoted scalar, every character that needs it escaped.
pub(super) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{85}' => out.push_str("\\N"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            '\u{feff}' => out.push_str("\\uFEFF"),
            c if (c as u32) < 0x20 || c == '\u{7f}' || ('\u{80}'..'\u{a0}').contains(&c) => {
                out.push_str(&format!("\\x{:02X}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The YAML text of a scalar or a list of strings, to replace `old` (a node of the file): a list
/// written as a block sequence on lines of its own stays one, at the same indentation; anything
/// else becomes a one-line flow sequence `["a", "b"]`, which is valid wherever a value is.
pub(super) fn render(value: &Value, old: Option<&Node>, text: &str) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(quote(s)),
        Value::Array(items) => {
            let words = items
                .iter()
                .map(|v| v.as_str().map(quote))
                .collect::<Option<Vec<_>>>()
                .ok_or("only lists of strings are written into YAML")?;
            if let Some(Node {
                kind: Kind::Seq { flow: false, .. },
                span,
                ..
            }) = old
            {
                let prefix = &text[super::tree::line_start(text, span.start)..span.start];
                if !words.is_empty() && prefix.chars().all(|c| c == ' ' || c == '\t') {
                    return Ok(words
                        .iter()
                        .map(|w| format!("- {w}"))
                        .collect::<Vec<_>>()
                        .join(&format!("{}{prefix}", super::tree::newline_of(text))));
                }
            }
            Ok(format!("[{}]", words.join(", ")))
        }
        _ => Err("only strings and lists of strings are written into YAML".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FILE: &str = "# fast-agent\ndefault_model: passthrough\nmcp:\n  servers:\n    time:   # the clock\n      command: \"u\\u0076x\"   # runner\n      args:\n      - mcp-server-time\n      - 'it''s'\n      env: {TZ: UTC}\n    web: {transport: http, url: \"https://example.test/mcp\"}\n    list:\n      args:\n        - a\n\n        # between\n        - b\nlast: 2\n";

    #[test]
    fn spans_cover_exactly_the_values() {
        let tree = parse(FILE).unwrap();
        let cmd = tree.at(&["mcp", "servers", "time", "command"]).unwrap();
        assert_eq!(&FILE[cmd.span.clone()], "\"u\\u0076x\"");
        assert_eq!(cmd.to_value(), json!("uvx"));
        let args = tree.at(&["mcp", "servers", "time", "args"]).unwrap();
        assert_eq!(
            &FILE[args.span.clone()],
            "- mcp-server-time\n      - 'it''s'"
        );
        assert_eq!(args.to_value(), json!(["mcp-server-time", "it's"]));
        let web = tree.at(&["mcp", "servers", "web"]).unwrap();
        assert_eq!(
            &FILE[web.span.clone()],
            "{transport: http, url: \"https://example.test/mcp\"}"
        );
        let list = tree.at(&["mcp", "servers", "list", "args"]).unwrap();
        assert_eq!(
            &FILE[list.span.clone()],
            "- a\n\n        # between\n        - b"
        );
        assert_eq!(tree.at(&["last"]).unwrap().to_value(), json!(2));
    }

    #[test]
    fn what_a_splice_could_break_is_marked() {
        let text =
            "base: &b {command: x}\ns:\n  a: *b\n  c: !custom y\n  d:\n    <<: *b\n  e: |\n    z\n";
        let tree = parse(text).unwrap();
        let odd = |k: &str| tree.at(&["s", k]).unwrap().first_odd();
        assert_eq!(odd("a"), Some("an alias (*name)"));
        assert_eq!(
            tree.at(&["s", "a"]).unwrap().to_value(),
            json!({"command": "x"})
        );
        assert_eq!(odd("c"), Some("a tag (!name)"));
        assert_eq!(odd("d"), Some("a merge key (<<)"));
        assert_eq!(odd("e"), Some("a block scalar (| or >)"));
        assert!(parse("a: 1\n---\nb: 2\n")
            .unwrap_err()
            .contains("more than one YAML document"));
        assert!(parse("a: 1\na: 2\n").unwrap_err().contains("appears twice"));
        assert!(parse("a: [1\n").is_err());
    }

    #[test]
    fn plain_scalars_are_typed_by_the_core_schema() {
        for (s, want) in [
            ("~", json!(null)),
            ("true", json!(true)),
            ("12", json!(12)),
            ("-1.5", json!(-1.5)),
            ("0x1f", json!(31)),
            ("npx", json!("npx")),
            ("-y", json!("-y")),
            ("1.2.3", json!("1.2.3")),
            ("e5", json!("e5")),
            ("yes", json!("yes")),
        ] {
            assert_eq!(plain(s), want, "{s}");
        }
    }

    #[test]
    fn strings_are_quoted_so_yaml_reads_them_back() {
        let nasty = "a \"b\" \\c\n\t\u{7}é\u{2028}#: - [x]";
        let text = format!("k: {}\n", quote(nasty));
        assert_eq!(parse(&text).unwrap().to_value(), json!({"k": nasty}));
        let old = parse(FILE).unwrap();
        let args = old.at(&["mcp", "servers", "time", "args"]).unwrap();
        assert_eq!(
            render(&json!(["--", "x y"]), Some(args), FILE).unwrap(),
            "- \"--\"\n      - \"x y\""
        );
        assert_eq!(render(&json!(["a"]), None, FILE).unwrap(), "[\"a\"]");
    }
}
