//! The semantic difference between two snapshot documents.
//!
//! A reviewer deciding whether to re-approve a server, and `mcpguard check` reporting how a live
//! catalogue drifted from the pinned one, both need to know *what* changed, not merely that the
//! digests differ. This module compares two `openudon.mcp-tool-manifest.0.1` documents the way a
//! person reads them: document fields, then each server's `serverInfo`, `instructions` and
//! `capabilities`, then its tools matched by name, then its reviews.
//!
//! Tools are matched by name across all `toolPages`, not by page position, because a server may
//! re-paginate its catalogue between two captures and that alone does not change what any tool
//! means. The page structure is still part of the pinned value (the seed keeps array order in the
//! digest), so a change in it is reported once, compactly, as the list of names (and the
//! `nextCursor`) of each page.
//!
//! Values are compared as RFC 8785 sees them: object members by name whatever their order, numbers
//! as IEEE doubles (so `1` and `1.0` are equal). Anything the two documents differ in canonically
//! produces at least one [`Change`]; a final check guarantees that even a shape this module does
//! not anticipate cannot make two different documents look identical.
//!
//! Everything here is pure and total: any [`Value`] shape is accepted, and where a document does
//! not have the profile's shape the difference is reported against the raw values instead of being
//! skipped. The walks here are iterative so that nesting depth cannot exhaust the stack; cloning,
//! dropping and printing a `Value` do recurse inside serde_json, which is why documents are meant
//! to come from `crate::snapshot::strict::parse_strict` (at most `MAX_DEPTH` levels deep).
//!
//! Pure; knows snapshot documents, nothing of live connections, the policy or processes.

#![forbid(unsafe_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

use serde_json::{Map, Number, Value};

pub use crate::snapshot::manifest::escape_token;
use crate::wire::sanitize::{clean, is_hidden, Clean};

/// What happened at one JSON pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// Present only in the new document.
    Added,
    /// Present only in the old document.
    Removed,
    /// Present in both with different values (different types count as changed).
    Changed,
}

/// One difference between two snapshot documents.
///
/// `pointer` is an RFC 6901 JSON pointer. When `tool` is set it is relative to that Tool object
/// (the empty pointer means the whole tool, which is how added and removed tools are reported).
/// Otherwise it is relative to the server entry named by `server`, or to the document root when
/// `server` is empty. A server whose key is itself the empty string cannot use the second form
/// without being mistaken for the document, so its server-level changes carry document-relative
/// pointers starting with `/servers/`; its tool changes are unambiguous and stay tool-relative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub server: String,
    pub tool: Option<String>,
    pub pointer: String,
    pub kind: ChangeKind,
    pub old: Option<Value>,
    pub new: Option<Value>,
}

/// The document members shown first, in this order, before any other member sorted by name.
const DOCUMENT_FIELDS: [&str; 4] = ["profile", "protocolVersion", "capturedAt", "expiresAt"];
/// The server entry members shown first, before other members; `toolPages` and `reviews` follow.
const SERVER_FIELDS: [&str; 3] = ["serverInfo", "instructions", "capabilities"];

/// Compares two snapshot documents and returns every difference, in a deterministic order:
/// document fields, then servers sorted by key. Within a server: its own fields, the page
/// structure, tool entries that cannot be matched by name (compared by position), other page
/// members, tools sorted by name, and last the reviews.
pub fn diff_documents(old: &Value, new: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    match (old.as_object(), new.as_object()) {
        (Some(o), Some(n)) => {
            for key in ordered_keys(o, n, &DOCUMENT_FIELDS, &["servers"]) {
                let pointer = format!("/{}", escape_token(&key));
                push_member(&mut out, "", None, &pointer, o.get(&key), n.get(&key));
            }
            diff_servers(&mut out, o.get("servers"), n.get("servers"));
        }
        // A document that is not an object has no profile shape to follow; compare it raw.
        _ => push_values(&mut out, "", None, "", old, new),
    }
    // The walk above is meant to cover every member of both documents. This check turns any gap
    // in it into a visible whole-document change instead of a silent "no difference".
    if out.is_empty() && !json_eq(old, new) {
        out.push(Change {
            server: String::new(),
            tool: None,
            pointer: String::new(),
            kind: ChangeKind::Changed,
            old: Some(old.clone()),
            new: Some(new.clone()),
        });
    }
    out
}

/// Compares two Tool objects (or any two values) leaf by leaf and returns the differences with
/// `server` and `tool` filled in, pointers relative to the tool. The gate uses this to name
/// exactly what drifted in a pinned tool.
pub fn diff_tool(server: &str, tool: &str, old: &Value, new: &Value) -> Vec<Change> {
    let mut out = Vec::new();
    push_values(&mut out, server, Some(tool), "", old, new);
    out
}

/// Whether two values are equal under RFC 8785: objects compare member sets whatever their order,
/// arrays compare element by element, and numbers compare as IEEE doubles (`1 == 1.0`, and
/// integers beyond 2^53 that round to the same double are equal).
pub fn json_eq(a: &Value, b: &Value) -> bool {
    let mut pending = vec![(a, b)];
    while let Some((a, b)) = pending.pop() {
        match (a, b) {
            (Value::Null, Value::Null) => {}
            (Value::Bool(x), Value::Bool(y)) if x == y => {}
            (Value::Number(x), Value::Number(y)) if number_eq(x, y) => {}
            (Value::String(x), Value::String(y)) if x == y => {}
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                pending.extend(x.iter().zip(y));
            }
            (Value::Object(x), Value::Object(y)) if x.len() == y.len() => {
                for (key, value) in x {
                    match y.get(key) {
                        Some(other) => pending.push((value, other)),
                        None => return false,
                    }
                }
            }
            _ => return false,
        }
    }
    true
}

fn number_eq(x: &Number, y: &Number) -> bool {
    // Without serde_json's `arbitrary_precision` (which mcpguard forbids) every Number converts to
    // an f64; the fallback only keeps this total should that ever change.
    match (x.as_f64(), y.as_f64()) {
        (Some(a), Some(b)) => a == b,
        _ => x == y,
    }
}

/// Like [`clean`], but removes nothing: every hidden character, including the ESC and CSI that
/// start terminal escape sequences, is written as a visible `\u{XXXX}` marker.
///
/// `clean` deletes ANSI sequences, which is right for relaying a log line to a terminal but wrong
/// for a reviewer, who must see every character the model will read: two strings that differ only
/// inside an escape sequence would otherwise look identical. The result is passed through `clean`
/// as well, which leaves it unchanged but keeps that function the single authority on what may
/// reach the terminal.
pub fn reveal(s: &str, opts: Clean) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_hidden(c) && !(opts.keep_newlines && (c == '\n' || c == '\t')) {
            let _ = write!(out, "\\u{{{:04X}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    clean(&out, opts)
}

/// Compact JSON for a value with every hidden character visible, on one line.
///
/// serde_json already escapes C0 controls, quotes and backslashes inside strings, and never writes
/// a `\u{` sequence itself, so after [`reveal`] two different values always render differently.
pub fn visible_json(value: &Value) -> String {
    // Serializing a Value into a String cannot fail (no I/O, no non-string keys, no NaN).
    let text = serde_json::to_string(value).unwrap_or_default();
    reveal(&text, Clean::LINE)
}

// ---------------------------------------------------------------------------------------------
// Walking the documents.

/// The union of both objects' member names: `first` in its order (those present), then the rest
/// sorted, leaving out `skip`. Sorting makes the result independent of member order, which
/// RFC 8785 does not consider part of the value either.
fn ordered_keys(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    first: &[&str],
    skip: &[&str],
) -> Vec<String> {
    let mut keys: Vec<String> = first
        .iter()
        .filter(|k| old.contains_key(**k) || new.contains_key(**k))
        .map(|k| (*k).to_owned())
        .collect();
    let rest: BTreeSet<&String> = old
        .keys()
        .chain(new.keys())
        .filter(|k| !first.contains(&k.as_str()) && !skip.contains(&k.as_str()))
        .collect();
    keys.extend(rest.into_iter().cloned());
    keys
}

fn change(
    server: &str,
    tool: Option<&str>,
    pointer: String,
    kind: ChangeKind,
    old: Option<&Value>,
    new: Option<&Value>,
) -> Change {
    Change {
        server: server.to_owned(),
        tool: tool.map(str::to_owned),
        pointer,
        kind,
        old: old.cloned(),
        new: new.cloned(),
    }
}

/// Reports a member that may be absent on either side.
fn push_member(
    out: &mut Vec<Change>,
    server: &str,
    tool: Option<&str>,
    pointer: &str,
    old: Option<&Value>,
    new: Option<&Value>,
) {
    match (old, new) {
        (Some(o), Some(n)) => push_values(out, server, tool, pointer, o, n),
        (Some(o), None) => out.push(change(
            server,
            tool,
            pointer.to_owned(),
            ChangeKind::Removed,
            Some(o),
            None,
        )),
        (None, Some(n)) => out.push(change(
            server,
            tool,
            pointer.to_owned(),
            ChangeKind::Added,
            None,
            Some(n),
        )),
        (None, None) => {}
    }
}

/// The recursive JSON diff: objects by member name (sorted), arrays by index, everything else by
/// [`json_eq`]. It runs on an explicit stack so that deep values cannot overflow the call stack.
fn push_values(
    out: &mut Vec<Change>,
    server: &str,
    tool: Option<&str>,
    base: &str,
    old: &Value,
    new: &Value,
) {
    enum Task<'a> {
        Compare(String, &'a Value, &'a Value),
        Emit(String, ChangeKind, Option<&'a Value>, Option<&'a Value>),
    }
    let mut tasks = vec![Task::Compare(base.to_owned(), old, new)];
    while let Some(task) = tasks.pop() {
        match task {
            Task::Emit(pointer, kind, o, n) => out.push(change(server, tool, pointer, kind, o, n)),
            Task::Compare(pointer, o, n) => match (o, n) {
                (Value::Object(om), Value::Object(nm)) => {
                    let keys: BTreeSet<&String> = om.keys().chain(nm.keys()).collect();
                    // Pushed in reverse so that they are handled in sorted order.
                    for key in keys.into_iter().rev() {
                        let p = format!("{pointer}/{}", escape_token(key));
                        tasks.push(match (om.get(key), nm.get(key)) {
                            (Some(a), Some(b)) => Task::Compare(p, a, b),
                            (a, b) if a.is_some() => Task::Emit(p, ChangeKind::Removed, a, b),
                            (a, b) => Task::Emit(p, ChangeKind::Added, a, b),
                        });
                    }
                }
                (Value::Array(oa), Value::Array(na)) => {
                    for i in (0..oa.len().max(na.len())).rev() {
                        let p = format!("{pointer}/{i}");
                        tasks.push(match (oa.get(i), na.get(i)) {
                            (Some(a), Some(b)) => Task::Compare(p, a, b),
                            (a, b) if a.is_some() => Task::Emit(p, ChangeKind::Removed, a, b),
                            (a, b) => Task::Emit(p, ChangeKind::Added, a, b),
                        });
                    }
                }
                _ if json_eq(o, n) => {}
                _ => tasks.push(Task::Emit(pointer, ChangeKind::Changed, Some(o), Some(n))),
            },
        }
    }
}

fn diff_servers(out: &mut Vec<Change>, old: Option<&Value>, new: Option<&Value>) {
    let (Some(o), Some(n)) = (
        old.and_then(Value::as_object),
        new.and_then(Value::as_object),
    ) else {
        // `servers` is missing or not an object on at least one side: report it raw.
        push_member(out, "", None, "/servers", old, new);
        return;
    };
    let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    for key in keys {
        match (o.get(key), n.get(key)) {
            (Some(a), Some(b)) => diff_server(out, key, a, b),
            (a, b) => push_member(out, key, None, &server_pointer(key, ""), a, b),
        }
    }
}

/// A pointer relative to the server entry, or document-relative for the server named "" (see
/// [`Change`]).
fn server_pointer(key: &str, pointer: &str) -> String {
    if key.is_empty() {
        format!("/servers/{pointer}")
    } else {
        pointer.to_owned()
    }
}

fn diff_server(out: &mut Vec<Change>, key: &str, old: &Value, new: &Value) {
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        push_values(out, key, None, &server_pointer(key, ""), old, new);
        return;
    };
    for member in ordered_keys(o, n, &SERVER_FIELDS, &["toolPages", "reviews"]) {
        let pointer = server_pointer(key, &format!("/{}", escape_token(&member)));
        push_member(out, key, None, &pointer, o.get(&member), n.get(&member));
    }
    diff_catalogues(
        out,
        key,
        &Catalogue::read(o.get("toolPages")),
        &Catalogue::read(n.get("toolPages")),
    );
    let pointer = server_pointer(key, "/reviews");
    push_member(out, key, None, &pointer, o.get("reviews"), n.get("reviews"));
}

/// One side's `toolPages`, taken apart for matching tools by name.
struct Catalogue<'a> {
    /// The raw `toolPages` member, if present.
    raw: Option<&'a Value>,
    /// The first occurrence of each tool name, wherever it is.
    tools: BTreeMap<&'a str, &'a Value>,
    /// Tool entries that cannot be matched by name, by (page, index): entries without a string
    /// `name` and every occurrence of a name after its first.
    unmatched: BTreeMap<(usize, usize), &'a Value>,
    /// Each page's members other than `tools` and `nextCursor`, compared page by page.
    extras: Vec<Option<&'a Map<String, Value>>>,
}

impl<'a> Catalogue<'a> {
    fn read(raw: Option<&'a Value>) -> Self {
        let mut cat = Catalogue {
            raw,
            tools: BTreeMap::new(),
            unmatched: BTreeMap::new(),
            extras: Vec::new(),
        };
        let Some(Value::Array(pages)) = raw else {
            return cat;
        };
        for (p, page) in pages.iter().enumerate() {
            cat.extras.push(page.as_object());
            let Some(Value::Array(tools)) = page.get("tools") else {
                continue;
            };
            for (i, tool) in tools.iter().enumerate() {
                match tool.get("name").and_then(Value::as_str) {
                    Some(name) if !cat.tools.contains_key(name) => {
                        cat.tools.insert(name, tool);
                    }
                    _ => {
                        cat.unmatched.insert((p, i), tool);
                    }
                }
            }
        }
        cat
    }

    /// The page structure: for each page an object with `tools` as the list of names (null for an
    /// entry without a string name) and `nextCursor` when present. Pages and `tools` members that
    /// are not of the expected type appear as they are, so that their changes show here. With
    /// `only` set, names outside that set and entries compared by position are left out, so that
    /// adding or removing a tool does not by itself also count as a change of structure.
    fn layout(&self, only: Option<&BTreeSet<&str>>) -> Option<Value> {
        let raw = self.raw?;
        let Value::Array(pages) = raw else {
            return Some(raw.clone());
        };
        let pages = pages.iter().enumerate().map(|(p, page)| {
            let Value::Object(members) = page else {
                return page.clone();
            };
            let mut shape = Map::new();
            if let Some(tools) = members.get("tools") {
                let names = match tools {
                    Value::Array(list) => Value::Array(
                        list.iter()
                            .enumerate()
                            .filter_map(|(i, t)| {
                                let name = t.get("name").and_then(Value::as_str);
                                match only {
                                    None => Some(name.map_or(Value::Null, Value::from)),
                                    // Unmatched entries are compared by position on their own.
                                    Some(_) if self.unmatched.contains_key(&(p, i)) => None,
                                    Some(set) => {
                                        name.filter(|name| set.contains(name)).map(Value::from)
                                    }
                                }
                            })
                            .collect(),
                    ),
                    other => other.clone(),
                };
                shape.insert("tools".to_owned(), names);
            }
            if let Some(cursor) = members.get("nextCursor") {
                shape.insert("nextCursor".to_owned(), cursor.clone());
            }
            Value::Object(shape)
        });
        Some(Value::Array(pages.collect()))
    }
}

fn diff_catalogues(out: &mut Vec<Change>, key: &str, old: &Catalogue, new: &Catalogue) {
    // Page structure, once: compared over the names both sides have, so that a tool moving to
    // another page, a different number of pages or a changed cursor shows, but an added or
    // removed tool (reported below on its own) does not also count as re-pagination.
    let common: BTreeSet<&str> = old
        .tools
        .keys()
        .filter(|name| new.tools.contains_key(*name))
        .copied()
        .collect();
    let pointer = server_pointer(key, "/toolPages");
    match (old.layout(Some(&common)), new.layout(Some(&common))) {
        (Some(a), Some(b)) if json_eq(&a, &b) => {}
        (None, None) => {}
        (a, b) => {
            let kind = match (&a, &b) {
                (Some(_), None) => ChangeKind::Removed,
                (None, Some(_)) => ChangeKind::Added,
                _ => ChangeKind::Changed,
            };
            out.push(Change {
                server: key.to_owned(),
                tool: None,
                pointer: pointer.clone(),
                kind,
                old: old.layout(None),
                new: new.layout(None),
            });
        }
    }

    // Entries that cannot be matched by name are compared by position.
    let positions: BTreeSet<&(usize, usize)> =
        old.unmatched.keys().chain(new.unmatched.keys()).collect();
    for &(p, i) in positions {
        let at = format!("{pointer}/{p}/tools/{i}");
        push_member(
            out,
            key,
            None,
            &at,
            old.unmatched.get(&(p, i)).copied(),
            new.unmatched.get(&(p, i)).copied(),
        );
    }

    // Other page members (a page-level `_meta`, say) are compared page by page.
    let pages = old.extras.len().max(new.extras.len());
    let empty = Map::new();
    for p in 0..pages {
        let o = old.extras.get(p).copied().flatten().unwrap_or(&empty);
        let n = new.extras.get(p).copied().flatten().unwrap_or(&empty);
        for member in ordered_keys(o, n, &[], &["tools", "nextCursor"]) {
            let at = format!("{pointer}/{p}/{}", escape_token(&member));
            push_member(out, key, None, &at, o.get(&member), n.get(&member));
        }
    }

    // Tools by name.
    let names: BTreeSet<&str> = old.tools.keys().chain(new.tools.keys()).copied().collect();
    for name in names {
        match (old.tools.get(name), new.tools.get(name)) {
            (Some(a), Some(b)) => push_values(out, key, Some(name), "", a, b),
            (a, b) => push_member(out, key, Some(name), "", a.copied(), b.copied()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rendering.

/// Longest value, in characters, shown whole on a summary line.
const SUMMARY_MAX: usize = 72;
/// Characters kept at each end of a value abbreviated on a summary line.
const SUMMARY_KEEP: usize = 32;

/// Renders changes as readable text, grouped by server (in order of first appearance) and, within
/// a server, server-level lines first and then one group per tool.
///
/// Each change is one summary line: `~ /pointer: old -> new`, `+ /pointer: new`, `- /pointer: old`
/// with values as compact JSON. Values longer than a summary line allows are abbreviated in the
/// middle there, and then shown whole on `old:` / `new:` lines underneath, so that nothing a
/// reviewer has to judge is ever cut. Every hidden character is shown as a `\u{XXXX}` marker, so a
/// change that consists only of, say, an inserted zero-width space is visible.
pub fn render(changes: &[Change]) -> String {
    struct Group<'a> {
        server: &'a str,
        lines: Vec<&'a Change>,
        tools: Vec<(&'a str, Vec<&'a Change>)>,
    }
    let mut groups: Vec<Group> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    for c in changes {
        let g = *index.entry(c.server.as_str()).or_insert_with(|| {
            groups.push(Group {
                server: &c.server,
                lines: Vec::new(),
                tools: Vec::new(),
            });
            groups.len() - 1
        });
        let group = &mut groups[g];
        match c.tool.as_deref() {
            // A whole tool added or removed reads best as one line in its server's list.
            Some(_) if c.pointer.is_empty() && c.kind != ChangeKind::Changed => {
                group.lines.push(c);
            }
            Some(tool) => match group.tools.iter_mut().find(|(t, _)| *t == tool) {
                Some((_, list)) => list.push(c),
                None => group.tools.push((tool, vec![c])),
            },
            None => group.lines.push(c),
        }
    }

    let mut out = String::new();
    for group in &groups {
        let whole_server = |c: &&Change| {
            !group.server.is_empty()
                && c.tool.is_none()
                && c.pointer.is_empty()
                && c.kind != ChangeKind::Changed
        };
        // A server that was only added or removed is a single line; anything else gets a header.
        if group.tools.is_empty() && group.lines.len() == 1 && whole_server(&group.lines[0]) {
            let c = group.lines[0];
            let (sign, word) = sign_and_word(c.kind);
            let _ = writeln!(out, "{sign} server {} ({word})", display_name(group.server));
            continue;
        }
        if group.server.is_empty() {
            out.push_str("document:\n");
        } else {
            let _ = writeln!(out, "server {}:", display_name(group.server));
        }
        for c in &group.lines {
            match c.tool.as_deref() {
                Some(tool) => {
                    let (sign, word) = sign_and_word(c.kind);
                    let _ = writeln!(out, "  {sign} tool {} ({word})", display_name(tool));
                }
                None => render_line(&mut out, "  ", c),
            }
        }
        for (tool, list) in &group.tools {
            let _ = writeln!(out, "  tool {}:", display_name(tool));
            for c in list {
                render_line(&mut out, "    ", c);
            }
        }
    }
    out
}

fn sign_and_word(kind: ChangeKind) -> (char, &'static str) {
    match kind {
        ChangeKind::Added => ('+', "added"),
        ChangeKind::Removed => ('-', "removed"),
        ChangeKind::Changed => ('~', "changed"),
    }
}

/// A server key or tool name as shown in headers: bare when it is plain ASCII that cannot be
/// confused with anything else, otherwise quoted as JSON with hidden characters revealed, so
/// that leading spaces, look-alike names and invisible characters all show. Public (it was
/// crate-private before the workspace) because the binary's `cli` shows names the same way.
pub fn display_name(name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.:/@".contains(c));
    if plain {
        name.to_owned()
    } else {
        visible_json(&Value::String(name.to_owned()))
    }
}

fn display_pointer(pointer: &str) -> String {
    if pointer.is_empty() {
        "(whole value)".to_owned()
    } else {
        reveal(pointer, Clean::LINE)
    }
}

fn render_line(out: &mut String, indent: &str, c: &Change) {
    let old = c.old.as_ref().map(visible_json);
    let new = c.new.as_ref().map(visible_json);
    let (sign, _) = sign_and_word(c.kind);
    let pointer = display_pointer(&c.pointer);
    let short_old = old.as_deref().map(abbreviate);
    let short_new = new.as_deref().map(abbreviate);
    let _ = write!(out, "{indent}{sign} {pointer}: ");
    match (&short_old, &short_new) {
        (Some(o), Some(n)) => {
            let _ = write!(out, "{o} -> {n}");
        }
        (Some(v), None) | (None, Some(v)) => out.push_str(v),
        (None, None) => out.push_str("(no value)"),
    }
    if c.kind == ChangeKind::Changed && old.is_some() && old == new {
        // Unreachable for changes made by this module (different values never render alike), but
        // a caller may build its own Change; say so rather than show two identical sides.
        out.push_str(" (the values differ in a way this rendering cannot show)");
    }
    out.push('\n');
    let cut = |full: &Option<String>, short: &Option<String>| full.is_some() && full != short;
    if cut(&old, &short_old) || cut(&new, &short_new) {
        if let Some(o) = &old {
            let _ = writeln!(out, "{indent}    old: {o}");
        }
        if let Some(n) = &new {
            let _ = writeln!(out, "{indent}    new: {n}");
        }
    }
}

/// Abbreviates `text` in the middle when it is longer than a summary line allows. It cuts between
/// whole escape sequences (`\"`, `\u001b`, `\u{200B}`), never inside one, so that a cut cannot
/// forge or hide a marker.
fn abbreviate(text: &str) -> String {
    let atoms = atoms(text);
    let width: usize = atoms.iter().map(|a| a.chars().count()).sum();
    if width <= SUMMARY_MAX {
        return text.to_owned();
    }
    let mut head = String::new();
    for atom in &atoms {
        if head.chars().count() >= SUMMARY_KEEP {
            break;
        }
        head.push_str(atom);
    }
    let mut tail: Vec<&str> = Vec::new();
    let mut tail_width = 0;
    for atom in atoms.iter().rev() {
        if tail_width >= SUMMARY_KEEP {
            break;
        }
        tail_width += atom.chars().count();
        tail.push(atom);
    }
    tail.reverse();
    format!("{head}…{}", tail.concat())
}

/// Splits rendered JSON into the units that must not be cut: `\u{…}` markers, `\uXXXX` escapes,
/// two-character escapes and single characters.
fn atoms(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let len = if c == '\\' {
            let after = &rest[1..];
            if let Some(body) = after.strip_prefix("u{") {
                match body.find('}') {
                    Some(end) if body[..end].chars().all(|h| h.is_ascii_hexdigit()) => 3 + end + 1,
                    _ => 1 + after.chars().next().map_or(0, char::len_utf8),
                }
            } else if after.starts_with('u')
                && after.len() >= 5
                && after.as_bytes()[1..5].iter().all(u8::is_ascii_hexdigit)
            {
                6
            } else {
                1 + after.chars().next().map_or(0, char::len_utf8)
            }
        } else {
            c.len_utf8()
        };
        let (atom, remainder) = rest.split_at(len);
        out.push(atom);
        rest = remainder;
    }
    out
}

pub mod triage;

#[cfg(test)]
pub(crate) mod tests;
