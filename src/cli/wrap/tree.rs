//! The parsed configuration file as a tree of values that know where their text is, shared by
//! the JSON(C) and YAML readers, and the splices that change a few of them.
//!
//! `wrap` changes only the `command` and `args` of the entries it wraps. Re-serializing a whole
//! document would lose what its parser does not keep (comments, trailing commas, quoting, key
//! order in some parsers), so each reader builds this tree with byte spans and the writer of
//! each format replaces just the spans of the values that change. Every edited file is read back
//! by the same reader and compared with the values meant before it is written (see
//! `super::edit`), so a wrong span cannot write a file that says something else.

use std::ops::Range;

use serde_json::{Map, Value};

/// One value of the document and the bytes of the text it was read from.
#[derive(Debug, Clone)]
pub(super) struct Node {
    /// The bytes of the value itself: from its first character to its last (the quotes of a
    /// string, the brackets of a flow collection; the first item's dash to the last item's end
    /// of a YAML block sequence).
    pub span: Range<usize>,
    pub kind: Kind,
    /// Set when the value (not its children) uses a YAML feature that a splice could silently
    /// break or that changes what the host reads (anchor, alias, tag, merge key, block scalar):
    /// the words for the refusal.
    pub odd: Option<&'static str>,
}

#[derive(Debug, Clone)]
pub(super) enum Kind {
    Scalar(Value),
    Seq { items: Vec<Node>, flow: bool },
    Map { members: Vec<Member>, flow: bool },
}

#[derive(Debug, Clone)]
pub(super) struct Member {
    pub key: String,
    /// The bytes of the key, quotes included.
    pub key_span: Range<usize>,
    pub value: Node,
}

impl Node {
    /// The value as JSON, for classification and for the read-back comparison.
    pub fn to_value(&self) -> Value {
        match &self.kind {
            Kind::Scalar(v) => v.clone(),
            Kind::Seq { items, .. } => Value::Array(items.iter().map(Node::to_value).collect()),
            Kind::Map { members, .. } => Value::Object(
                members
                    .iter()
                    .map(|m| (m.key.clone(), m.value.to_value()))
                    .collect::<Map<String, Value>>(),
            ),
        }
    }

    pub fn member(&self, key: &str) -> Option<&Member> {
        match &self.kind {
            Kind::Map { members, .. } => members.iter().find(|m| m.key == key),
            _ => None,
        }
    }

    /// The node at a path of member names.
    pub fn at(&self, path: &[&str]) -> Option<&Node> {
        path.iter()
            .try_fold(self, |node, key| node.member(key).map(|m| &m.value))
    }

    /// The first reason found in this node or below why it must not be edited by a splice.
    pub fn first_odd(&self) -> Option<&'static str> {
        if let Some(why) = self.odd {
            return Some(why);
        }
        match &self.kind {
            Kind::Scalar(_) => None,
            Kind::Seq { items, .. } => items.iter().find_map(Node::first_odd),
            Kind::Map { members, .. } => members.iter().find_map(|m| m.value.first_odd()),
        }
    }
}

/// Replaces byte ranges of `text`. The ranges must not overlap; an insertion is an empty range.
/// Ranges at the same place keep the order they were given in.
pub(super) fn splice(text: &str, mut edits: Vec<(Range<usize>, String)>) -> Result<String, String> {
    edits.sort_by_key(|(r, _)| (r.start, r.end));
    let mut out = String::with_capacity(text.len() + 256);
    let mut at = 0;
    for (range, new) in edits {
        if range.start < at || range.end > text.len() || range.start > range.end {
            return Err(format!(
                "two changes overlap at byte {} (a bug in mcpguard's editor)",
                range.start
            ));
        }
        out.push_str(&text[at..range.start]);
        out.push_str(&new);
        at = range.end;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

/// The start of the line that holds byte `at`.
pub(super) fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// The end of the line that holds byte `at` (the position of its line break, `\r\n` or `\n`,
/// or the text's end).
pub(super) fn line_end(text: &str, at: usize) -> usize {
    let end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    if end > at && text[..end].ends_with('\r') {
        end - 1
    } else {
        end
    }
}

/// The line break the file uses: new lines written into a CRLF file get CRLF too.
pub(super) fn newline_of(text: &str) -> &'static str {
    if text.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    }
}

/// The whitespace that begins the line holding byte `at`.
pub(super) fn indentation_at(text: &str, at: usize) -> &str {
    let start = line_start(text, at);
    let line = &text[start..];
    let end = line
        .find(|c: char| c != ' ' && c != '\t')
        .unwrap_or(line.len());
    &line[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splices_replace_and_insert_in_order() {
        let text = "abcdef";
        let out = splice(
            text,
            vec![(4..4, "X".into()), (1..3, "BC".into()), (4..4, "Y".into())],
        )
        .unwrap();
        assert_eq!(out, "aBCdXYef");
        assert!(splice(text, vec![(1..4, "".into()), (2..3, "".into())]).is_err());
    }

    #[test]
    fn lines_are_found() {
        let text = "a\n  bc\nd";
        assert_eq!(line_start(text, 4), 2);
        assert_eq!(line_end(text, 4), 6);
        assert_eq!(indentation_at(text, 5), "  ");
        assert_eq!(line_end("ab\r\ncd", 1), 2);
        assert_eq!(newline_of("a\r\nb"), "\r\n");
        assert_eq!(newline_of("a\nb"), "\n");
    }
}
