//! `wrap` of a JSON, JSONC or YAML configuration by splices: the file is read into a tree with
//! spans, its entries into their common view (`super::hosts`), the views rewritten by
//! `super::rewrite`, and then only the values that changed are replaced in the text. Every other
//! byte — comments, trailing commas, key order, quoting, indentation — stays as it was.
//!
//! Fail closed: the edited text is read back by the same reader, and unless it says exactly what
//! was meant (the old document with the changed entries' new values), nothing is written.

use std::ops::Range;
use std::path::Path;

use serde_json::{Map, Value};

use super::hosts::{self, Dialect, Format, Syntax, Viewed};
use super::jsonc::{self, Layout};
use super::tree::{self, Kind, Node};
use super::{rewrite, Rewritten, WrapArgs};

/// The keys of the view that `wrap` writes into existing entries.
const WRITTEN: [&str; 2] = ["command", "args"];

/// A configuration file read: its tree, its host, and the view of each entry `wrap` may change.
struct Read {
    tree: Node,
    doc: Value,
    format: Format,
    views: Map<String, Value>,
    dialects: Vec<(String, &'static Dialect)>,
    /// What is left alone, said before anything else.
    notes: Vec<String>,
}

fn parse(text: &str, syntax: Syntax) -> Result<Node, String> {
    match syntax {
        Syntax::Json => jsonc::parse(text),
        Syntax::Yaml => super::yaml::parse(text),
    }
}

fn refusal(shown: &str, why: &str) -> String {
    format!("refusing to change {shown}: {why}; nothing was changed")
}

/// Reads the file into the views of its entries, refusing what it does not fully understand.
fn read(text: &str, syntax: Syntax, shown: &str) -> Result<Read, String> {
    let tree = parse(text, syntax).map_err(|e| match syntax {
        Syntax::Json => format!(
            "{shown} is not JSON (comments and trailing commas are understood), so mcpguard will not rewrite it ({e}); nothing was changed"
        ),
        Syntax::Yaml => format!(
            "{shown} is not YAML mcpguard can edit, so it will not rewrite it ({e}); nothing was changed"
        ),
    })?;
    let refuse = |why: String| refusal(shown, &why);
    let doc = tree.to_value();
    let format = hosts::detect(&doc, syntax).map_err(refuse)?;
    let Some(Node {
        kind: Kind::Map { members, .. },
        ..
    }) = tree.at(format.path())
    else {
        return Err(refuse(format!("{} is not an object", format.describe())));
    };
    let mut views = Map::new();
    let mut dialects = Vec::new();
    let mut notes = Vec::new();
    for m in members {
        if let Some(why) = m.value.first_odd() {
            return Err(refuse(format!(
                "server {:?} uses {why}, which mcpguard does not edit (the host could read the edited entry differently); write the entry out plainly, or wrap it by hand as README.md shows",
                m.key
            )));
        }
        match hosts::view(format, &m.key, &m.value.to_value()).map_err(refuse)? {
            Viewed::Entry { view, dialect } => {
                views.insert(m.key.clone(), view);
                dialects.push((m.key.clone(), dialect));
            }
            Viewed::Skip(note) => notes.push(note),
        }
    }
    match format {
        Format::McpServers => {
            notes.extend(super::unwrapped_claude_code_projects(&doc));
            // Claude Desktop, Claude Code and Cursor read these files as plain JSON (a trailing
            // comma breaks Cursor's mcp.json); other hosts of this shape may not. wrap keeps
            // what it found and adds neither, so the person is told rather than the file refused.
            if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
                notes.push(format!(
                    "note: {shown} has comments or trailing commas; they are kept, but Claude Desktop, Claude Code and Cursor read plain JSON only"
                ));
            }
        }
        Format::VsCode | Format::VsCodeSettings => {
            // VS Code sets the variables of an entry's `envFile` too; wrap cannot see their
            // names, and the sandbox removes what is not named.
            for (name, view) in &views {
                if view.get("envFile").is_some() {
                    notes.push(format!(
                        "note: {name:?} reads variables from its `envFile`, which the sandbox removes unless named: add `--sandbox-env VAR` for each before `--` in its arguments (or name them with --entry {name} --sandbox-env VAR when you wrap it)"
                    ));
                }
            }
        }
        Format::FastAgent => {
            let targets = doc.pointer("/mcp/targets").and_then(Value::as_array);
            if let Some(t) = targets.filter(|t| !t.is_empty()) {
                notes.push(format!(
                    "left alone: {} server(s) of the `mcp.targets` shorthand; write them as entries of `mcp.servers` (command, args) and wrap again",
                    t.len()
                ));
            }
        }
        _ => {}
    }
    Ok(Read {
        tree,
        doc,
        format,
        views,
        dialects,
        notes,
    })
}

/// fast-agent merges `fastagent.secrets.yaml` (beside the configuration) into it, and the `env`
/// it sets for a server reaches that server: the names are added to the entries' views so that
/// the sandbox passes them. Only names are read out of it, never values.
fn add_fast_agent_secret_names(
    config: &Path,
    views: &mut Map<String, Value>,
    notes: &mut Vec<String>,
) {
    let Some(secrets) = config
        .parent()
        .map(|d| d.join("fastagent.secrets.yaml"))
        .filter(|p| p.exists())
    else {
        return;
    };
    let shown = secrets.display();
    let doc = match std::fs::read_to_string(&secrets)
        .map_err(|e| e.to_string())
        .and_then(|t| super::yaml::parse(&t))
    {
        Ok(tree) => tree.to_value(),
        Err(e) => {
            notes.push(format!(
                "note: cannot read {shown} ({e}); the variables it sets for servers are not passed to them: add `--sandbox-env VAR` for each before `--` in the server's arguments"
            ));
            return;
        }
    };
    for (name, view) in views.iter_mut() {
        let Some(env) = doc
            .get("mcp")
            .and_then(|m| m.get("servers"))
            .and_then(|s| s.get(name))
            .and_then(|e| e.get("env"))
            .and_then(Value::as_object)
        else {
            continue;
        };
        let Some(obj) = view.as_object_mut() else {
            continue;
        };
        let into = obj
            .entry("env")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(into) = into.as_object_mut() {
            for k in env.keys() {
                into.entry(k.clone()).or_insert(Value::Null);
            }
            notes.push(format!(
                "note: {name:?}: the variables {shown} sets for it ({}) are passed by name as well",
                env.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
}

/// Wraps (or pins) the servers of one JSON or YAML file; the new text and what was done.
pub(super) fn run(
    text: &str,
    syntax: Syntax,
    args: &WrapArgs<'_>,
    shown: &str,
) -> Result<(String, Rewritten), String> {
    // A byte-order mark (which some Windows editors write) is kept and not parsed.
    let (bom, text) = match text.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", text),
    };
    let mut file = read(text, syntax, shown)?;
    if file.format == Format::FastAgent {
        add_fast_agent_secret_names(args.config, &mut file.views, &mut file.notes);
    }
    let mut views = file.views.clone();
    let mut outcome = rewrite(&mut views, args, shown)?;
    let mut notes = std::mem::take(&mut file.notes);
    notes.append(&mut outcome.notes);
    outcome.notes = notes;
    let updated = write(text, syntax, &file, &views).map_err(|why| refusal(shown, &why))?;
    Ok((format!("{bom}{updated}"), outcome))
}

/// The text of the file with the entries' new views written into it: only the values that
/// changed are replaced; the result is read back and must say exactly what was meant.
fn write(
    text: &str,
    syntax: Syntax,
    file: &Read,
    views: &Map<String, Value>,
) -> Result<String, String> {
    let servers_node = file
        .tree
        .at(file.format.path())
        .ok_or("the servers object is gone")?;
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    let mut expected = file.doc.clone();
    let mut added: Vec<(String, Value)> = Vec::new();
    for (name, new) in views {
        let entry_path: Vec<&str> = file
            .format
            .path()
            .iter()
            .copied()
            .chain([name.as_str()])
            .collect();
        let old = file.views.get(name);
        if old == Some(new) {
            continue;
        }
        let dialect = file
            .dialects
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
                let native = hosts::native_entry(file.format, new).ok_or_else(|| {
                    format!(
                        "--from-lock would add or replace the whole entry {name:?}, and mcpguard writes only the command and arguments of existing entries into {}; add a local entry {name:?} with any command by hand, then run again",
                        file.format.describe()
                    )
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
        return Ok(text.to_string());
    }
    let updated = tree::splice(text, edits)?;
    // Read back: the new text must say exactly what was meant, and nothing else may differ.
    let back = parse(&updated, syntax).map(|t| t.to_value());
    if back.as_ref() != Ok(&expected) {
        return Err(format!(
            "mcpguard's edit of it did not read back as intended (a layout the editor does not know{}). Wrap it by hand as README.md shows, and please report this",
            back.err().map(|e| format!(": {e}")).unwrap_or_default()
        ));
    }
    Ok(updated)
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
/// or, when the key is missing (an entry without `args`), a new member after the command. A JSON
/// value is laid out over lines when the object that holds it is (Zed's nested `command` object
/// can be one line inside an entry of several).
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
            Syntax::Json => Layout::of(text, parent, member.key_span.start).render(value),
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
            let layout = Layout::of(text, parent, after.key_span.start);
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
                Ok((
                    at..at,
                    format!(
                        "{}{}{key}: {rendered}",
                        tree::newline_of(text),
                        " ".repeat(column)
                    ),
                ))
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
                newline: tree::newline_of(text),
            };
            vec![jsonc::fill_empty(servers, added, &layout)]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Reads `text`, applies `change` to the views, and writes them back.
    fn rewrite_with(
        text: &str,
        syntax: Syntax,
        change: impl FnOnce(&mut Map<String, Value>),
    ) -> Result<String, String> {
        let file = read(text, syntax, "f")?;
        let mut views = file.views.clone();
        change(&mut views);
        write(text, syntax, &file, &views)
    }

    fn wrap_one(views: &mut Map<String, Value>, name: &str) {
        let v = views.get_mut(name).unwrap();
        v["command"] = json!("/bin/mcpguard");
        v["args"] = json!(["--", "uvx", "t"]);
    }

    #[test]
    fn jsonc_keeps_every_byte_but_the_changed_values() {
        let text = "{\n  // mine\n  \"servers\": {\n    \"t\": {\n      \"command\": \"uvx\", // runner\n      \"env\": {},\n    },\n    \"r\": {\"url\": \"https://e.test\"},\n  },\n}\n";
        let out = rewrite_with(text, Syntax::Json, |v| wrap_one(v, "t")).unwrap();
        assert_eq!(
            out,
            "{\n  // mine\n  \"servers\": {\n    \"t\": {\n      \"command\": \"/bin/mcpguard\",\n      \"args\": [\n        \"--\",\n        \"uvx\",\n        \"t\"\n      ], // runner\n      \"env\": {},\n    },\n    \"r\": {\"url\": \"https://e.test\"},\n  },\n}\n"
        );
    }

    #[test]
    fn yaml_flow_mappings_and_crlf_files_are_edited_in_their_own_style() {
        let text =
            "mcp:\r\n  servers:\r\n    t: {command: uvx}\r\n    u:\r\n      command: uvx # c\r\n";
        let out = rewrite_with(text, Syntax::Yaml, |v| {
            wrap_one(v, "t");
            wrap_one(v, "u");
        })
        .unwrap();
        assert_eq!(
            out,
            "mcp:\r\n  servers:\r\n    t: {command: \"/bin/mcpguard\", args: [\"--\", \"uvx\", \"t\"]}\r\n    u:\r\n      command: \"/bin/mcpguard\" # c\r\n      args: [\"--\", \"uvx\", \"t\"]\r\n"
        );
    }

    #[test]
    fn zed_nested_commands_are_written_where_zed_reads_them() {
        let text =
            "{\"context_servers\": {\"g\": {\"command\": {\"path\": \"uvx\"}, \"settings\": {}}}}";
        let out = rewrite_with(text, Syntax::Json, |v| wrap_one(v, "g")).unwrap();
        assert_eq!(
            out,
            "{\"context_servers\": {\"g\": {\"command\": {\"path\": \"/bin/mcpguard\", \"args\": [\"--\", \"uvx\", \"t\"]}, \"settings\": {}}}}"
        );
        // A one-line `command` object in an entry of several lines stays on its line.
        let text = "{\"context_servers\": {\n  \"g\": {\n    \"command\": {\"path\": \"uvx\"},\n    \"settings\": {}\n  }\n}}";
        let out = rewrite_with(text, Syntax::Json, |v| wrap_one(v, "g")).unwrap();
        assert!(
            out.contains("\n    \"command\": {\"path\": \"/bin/mcpguard\", \"args\": [\"--\", \"uvx\", \"t\"]},\n"),
            "{out}"
        );
    }

    #[test]
    fn a_wrong_span_is_caught_by_the_read_back() {
        let text = "extensions:\n  m:\n    type: stdio\n    cmd: npx\n";
        let mut file = read(text, Syntax::Yaml, "f").unwrap();
        // Shorten the span of `npx` to `np`, as a parser with wrong positions would.
        let Kind::Map { members, .. } = &mut file.tree.kind else {
            panic!()
        };
        let Kind::Map { members, .. } = &mut members[0].value.kind else {
            panic!()
        };
        let Kind::Map { members, .. } = &mut members[0].value.kind else {
            panic!()
        };
        members[1].value.span.end -= 1;
        let mut views = file.views.clone();
        wrap_one(&mut views, "m");
        let e = write(text, Syntax::Yaml, &file, &views).unwrap_err();
        assert!(e.contains("did not read back as intended"), "{e}");
    }

    #[test]
    fn whole_entries_are_written_only_into_json() {
        let yaml = "mcp:\n  servers:\n    r: {url: \"https://e.test\"}\n";
        let e = rewrite_with(yaml, Syntax::Yaml, |v| {
            v.insert("n".into(), json!({"command": "x", "args": []}));
        })
        .unwrap_err();
        assert!(
            e.contains("add a local entry \"n\" with any command by hand"),
            "{e}"
        );
        let json = "{\"context_servers\": {}}";
        let out = rewrite_with(json, Syntax::Json, |v| {
            v.insert("n".into(), json!({"command": "x", "args": []}));
        })
        .unwrap();
        assert_eq!(
            out,
            "{\"context_servers\": {\"n\":{\"source\":\"custom\",\"command\":\"x\",\"args\":[]}}}"
        );
    }

    #[test]
    fn only_command_and_args_count_as_a_small_change() {
        let old = json!({"type": "stdio", "command": "a", "env": {}});
        assert!(only_written_keys_differ(
            &old,
            &json!({"command": "b", "args": [], "env": {}})
        ));
        assert!(!only_written_keys_differ(&old, &json!({"command": "b"})));
        assert!(!only_written_keys_differ(
            &json!({"url": "https://e.test"}),
            &json!({"command": "b"})
        ));
    }
}
