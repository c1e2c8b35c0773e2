//! `wrap` of a JSON, JSONC or YAML configuration by splices: the file is read into a tree with
//! spans, its entries into their common view (`super::hosts`), the views rewritten by
//! `super::rewrite`, and then only the values that changed are replaced in the text. Every other
//! byte — comments, trailing commas, key order, quoting, indentation — stays as it was.
//!
//! Fail closed: the edited text is read back by the same reader, and unless it says exactly what
//! was meant (the old document with the changed entries' new values), nothing is written.

use std::ops::Range;

use serde_json::{Map, Value};

use super::hosts::{self, Dialect, Format, Syntax, Viewed};
use super::jsonc::{self, Layout};
use super::tree::{self, Kind, Node};
use super::{rewrite, Rewritten, WrapArgs};

/// The keys of the view that `wrap` writes into existing entries.
const WRITTEN: [&str; 2] = ["command", "args"];

/// Wraps (or pins) the servers of one JSON or YAML file; the new text and what was done.
pub(super) fn run(
    text: &str,
    syntax: Syntax,
    args: &WrapArgs<'_>,
    shown: &str,
) -> Result<(String, Rewritten), String> {
    let parse = |t: &str| match syntax {
        Syntax::Json => jsonc::parse(t),
        Syntax::Yaml => super::yaml::parse(t),
    };
    let tree = parse(text).map_err(|e| match syntax {
        Syntax::Json => format!(
            "{shown} is not JSON (comments and trailing commas are understood), so mcpguard will not rewrite it ({e}); nothing was changed"
        ),
        Syntax::Yaml => format!(
            "{shown} is not YAML mcpguard can edit, so it will not rewrite it ({e}); nothing was changed"
        ),
    })?;
    let refuse = |why: String| format!("refusing to change {shown}: {why}; nothing was changed");
    let doc = tree.to_value();
    let format = hosts::detect(&doc, syntax).map_err(refuse)?;
    let servers_node = tree
        .at(format.path())
        .filter(|n| matches!(n.kind, Kind::Map { .. }))
        .ok_or_else(|| refuse(format!("{} is not an object", format.describe())))?;
    let Kind::Map { members, .. } = &servers_node.kind else {
        unreachable!("checked just above");
    };
    let mut views = Map::new();
    let mut dialects: Vec<(String, &'static Dialect)> = Vec::new();
    let mut notes = Vec::new();
    for m in members {
        if let Some(why) = m.value.first_odd() {
            return Err(refuse(format!(
                "server {:?} uses {why}, which mcpguard does not edit (the host could read the edited entry differently); write the entry out plainly, or wrap it by hand as README.md shows",
                m.key
            )));
        }
        match hosts::view(format, &m.key, &m.value.to_value()).map_err(&refuse)? {
            Viewed::Entry { view, dialect } => {
                views.insert(m.key.clone(), view);
                dialects.push((m.key.clone(), dialect));
            }
            Viewed::Skip(note) => notes.push(note),
        }
    }
    if format == Format::McpServers {
        notes.extend(super::unwrapped_claude_code_projects(&doc));
    }
    let before = views.clone();
    let mut outcome = rewrite(&mut views, args, shown)?;
    notes.append(&mut outcome.notes);
    outcome.notes = notes;

    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut expected = doc.clone();
    let mut added: Vec<(String, Value)> = Vec::new();
    for (name, new) in &views {
        let entry_path: Vec<&str> = format
            .path()
            .iter()
            .copied()
            .chain([name.as_str()])
            .collect();
        let old = before.get(name);
        if old == Some(new) {
            continue;
        }
        let dialect = dialects
            .iter()
            .find(|(n, _)| n == name)
            .map_or(&hosts::PLAIN, |(_, d)| *d);
        match (old, servers_node.member(name)) {
            (Some(old), Some(member)) if only_written_keys_differ(old, new) => {
                let node = &member.value;
                let mut native = node.to_value();
                for key in WRITTEN {
                    let (Some(value), Some(path)) = (new.get(key), dialect.path(key)) else {
                        continue;
                    };
                    if old.get(key) == Some(value) {
                        continue;
                    }
                    edits.push(set(text, syntax, node, path, dialect, value)?);
                    hosts::set_at(&mut native, path, value.clone());
                }
                hosts::set_at(&mut expected, &entry_path, native);
            }
            (_, member) => {
                let native = hosts::native_entry(format, new).ok_or_else(|| {
                    refuse(format!(
                        "--from-lock would add or replace the whole entry {name:?}, and mcpguard writes only the command and arguments of existing entries into {}; add a local entry {name:?} with any command by hand, then run again",
                        format.describe()
                    ))
                })?;
                match member {
                    Some(m) => {
                        let layout = Layout::of(text, &m.value, m.key_span.start);
                        edits.push((m.value.span.clone(), layout.render(&native)));
                    }
                    None => added.push((name.clone(), native.clone())),
                }
                hosts::set_at(&mut expected, &entry_path, native);
            }
        }
    }
    if !added.is_empty() {
        edits.extend(add_members(text, servers_node, &added));
    }
    if edits.is_empty() {
        return Ok((text.to_string(), outcome));
    }
    let updated = tree::splice(text, edits)?;
    // Read back: the new text must say exactly what was meant, and nothing else may differ.
    let back = parse(&updated).map(|t| t.to_value());
    if back.as_ref() != Ok(&expected) {
        return Err(format!(
            "refusing to change {shown}: mcpguard's edit of it did not read back as intended (a layout the editor does not know{}); nothing was changed. Wrap it by hand as README.md shows, and please report this",
            back.err().map(|e| format!(": {e}")).unwrap_or_default()
        ));
    }
    Ok((updated, outcome))
}

/// Whether two views of an entry differ only in the keys `wrap` writes into existing entries.
/// A `type: "stdio"` that `--from-lock` dropped does not count: the host reads the same entry.
fn only_written_keys_differ(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut o = v.as_object().cloned().unwrap_or_default();
        for k in WRITTEN {
            o.remove(k);
        }
        if o.get("type").and_then(Value::as_str) == Some("stdio") {
            o.remove("type");
        }
        o
    };
    old.is_object() && new.is_object() && strip(old) == strip(new)
}

/// The splice that sets the value at `path` in the entry `node`: the old value's text replaced,
/// or, when the key is missing (an entry without `args`), a new member after the command.
fn set(
    text: &str,
    syntax: Syntax,
    node: &Node,
    path: &[&str],
    dialect: &Dialect,
    value: &Value,
) -> Result<(Range<usize>, String), String> {
    let (last, parents) = path.split_last().ok_or("an empty path")?;
    let parent = node
        .at(parents)
        .ok_or_else(|| format!("the entry has no {}", parents.join(".")))?;
    if let Some(member) = parent.member(last) {
        let old = &member.value;
        let new = match syntax {
            Syntax::Json => Layout::of(text, node, member.key_span.start).render(value),
            Syntax::Yaml => super::yaml::render(value, Some(old), text)?,
        };
        return Ok((old.span.clone(), new));
    }
    let Kind::Map { members, flow } = &parent.kind else {
        return Err("the entry is not an object".into());
    };
    // After the command, where a reader looks for the arguments; else after the last key.
    let command_key = dialect.command.last().copied().unwrap_or("command");
    let after = members
        .iter()
        .find(|m| m.key == command_key)
        .or(members.last())
        .ok_or("the entry is empty")?;
    match syntax {
        Syntax::Json => {
            let layout = Layout::of(text, node, after.key_span.start);
            Ok(jsonc::member_after(after, last, value, &layout))
        }
        Syntax::Yaml => {
            let rendered = super::yaml::render(value, None, text)?;
            // The keys wrap adds (`args`) are plain words, written as the hosts' own files do.
            let key = if last.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                (*last).to_string()
            } else {
                super::yaml::quote(last)
            };
            if *flow {
                let at = after.value.span.end;
                Ok((at..at, format!(", {key}: {rendered}")))
            } else {
                // A new line at the key's column, after whatever ends the line (a comment).
                let at = tree::line_end(text, after.value.span.end);
                let column = text
                    [tree::line_start(text, after.key_span.start)..after.key_span.start]
                    .chars()
                    .count();
                Ok((at..at, format!("\n{}{key}: {rendered}", " ".repeat(column))))
            }
        }
    }
}

/// The splices that add new members at the end of the servers object (JSON only: YAML entries
/// are never added, see `hosts::native_entry`).
fn add_members(
    text: &str,
    servers: &Node,
    added: &[(String, Value)],
) -> Vec<(Range<usize>, String)> {
    let Kind::Map { members, .. } = &servers.kind else {
        return Vec::new();
    };
    match members.last() {
        Some(last) => {
            let layout = Layout::of(text, servers, last.key_span.start);
            added
                .iter()
                .map(|(k, v)| jsonc::member_after(last, k, v, &layout))
                .collect()
        }
        None => {
            // An empty `{}` says nothing of the layout; the file as a whole does.
            let layout = Layout {
                indent: tree::indentation_at(text, servers.span.start).to_string(),
                unit: jsonc::indent_unit(text),
                multiline: text.trim_end().contains('\n'),
            };
            vec![jsonc::fill_empty(servers, added, &layout)]
        }
    }
}
