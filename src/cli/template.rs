//! The review template: `mcpguard review FILE [--server KEY] --template` writes, as TOML on
//! stdout, one review of every unreviewed tool with every answer PROPOSED and a comment beside
//! each answer saying where the proposal came from (the tool name's verb, the server's
//! annotations, the argument's name or schema format, or the cautious default). The person edits
//! what they disagree with and records the file with `mcpguard review FILE --from review.toml`,
//! which validates every review exactly as a review given by flags.
//!
//! The module also owns the reading of a `--from` file (JSON or this TOML, one data model:
//! tool name -> review, plus an optional top-level `reviewer` string) and the hint each refused
//! answer carries: the flag or the field to add, never a bare JSON pointer. And it owns the
//! proposals themselves, which the terminal review (`cli::interactive`) offers as its defaults:
//! the operation class from the name's verb and the server's hints, each argument's channel.
//!
//! Annotations are the server's own words. A proposal that rests on them only ever gets a
//! flagged comment, and when they contradict the tool's name in the permissive direction (a
//! `delete_*` tool claiming `readOnlyHint`), the template proposes no operation class at all: the
//! answer reads `"decide: ..."`, which `--from` refuses until the person writes one. A template
//! fed back unread can therefore never record a server's claim of harmlessness against its name.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Map, Value};

use crate::snapshot::manifest;

/// Where a review came from, for the hint a refused answer carries.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    /// `--tool`, `--assert`, `--channel`, `--side-effect`, `--reviewer`.
    Flags,
    /// `--from FILE`.
    File(&'a Path),
}

/// The hint for a problem of one review: `rel` is the problem's pointer below
/// `/servers/KEY/reviews/TOOL` (tokens unescaped), `kind` its kind. It names the flag to add
/// (flags) or the field to set in the file, in dotted form valid inside the tool's TOML table.
pub fn hint(
    tool: &str,
    rel: &[String],
    kind: &manifest::ProblemKind,
    source: Source<'_>,
) -> String {
    let field = rel.join(".");
    let values = |key: &str| -> &'static str {
        match key {
            "headless" | "independentCalls" | "referenceBasedIO" => "true",
            "modelBacked" => "true or false",
            "sideEffects" => "a list, [] for none",
            "concurrency" => "\"safe\" or \"serialize\"",
            "sideEffect" => "\"read\", \"create\", \"update\" or \"delete\"",
            _ => "a value",
        }
    };
    let flag_values = |key: &str| -> String {
        match key {
            "headless" | "independentCalls" | "referenceBasedIO" => format!("{key}=true"),
            "modelBacked" => "modelBacked=true|false".into(),
            "sideEffects" => "sideEffects=A,B (empty for none)".into(),
            "concurrency" => "concurrency=safe|serialize".into(),
            _ => format!("{key}=VALUE"),
        }
    };
    let argument = match kind {
        // When the answer is there but says the tool is unsuitable, no flag fixes that.
        manifest::ProblemKind::Unsuitable => {
            return "if that is your answer, leave the tool unreviewed (it is then not served)"
                .into()
        }
        // An unclassified argument is named in the hint only when its pointer is plain: one
        // that Rust's debug form shows as it is, without escapes. A quote, a backslash, a control
        // or hidden character would need escaping in both the flag and the TOML key.
        manifest::ProblemKind::Unclassified(p) if format!("{p:?}") == format!("\"{p}\"") => {
            Some(p.clone())
        }
        _ => None,
    };
    let shown = crate::snapshot::diff::display_name(tool);
    match source {
        Source::Flags => match rel.first().map(String::as_str) {
            Some("reviewer") => "say who reviewed with --reviewer ID".into(),
            Some("reviewedAt") => "give --reviewed-at INSTANT (RFC 3339), or leave it out for now".into(),
            Some("sideEffect") => "give --side-effect read|create|update|delete".into(),
            Some("assertions") => match rel.get(1) {
                Some(k) if manifest::ASSERTIONS.contains(&k.as_str()) => {
                    format!("give --assert {}", flag_values(k))
                }
                Some(k) => format!("drop --assert {k}=...: the assertions are {}", manifest::ASSERTIONS.join(", ")),
                None => "give the six --assert flags: headless=true independentCalls=true modelBacked=false sideEffects= concurrency=safe referenceBasedIO=true (your answers)".into(),
            },
            Some("inputChannels") => match (rel.get(1), argument) {
                (Some(p), _) => format!("give --channel {p}=data|instruction|authority for an argument the tool has"),
                (None, Some(p)) => format!("give --channel {p}=data|instruction|authority"),
                (None, None) => "give --channel POINTER=data|instruction|authority for the argument named".into(),
            },
            _ => String::new(),
        },
        Source::File(path) => {
            let at = format!("in {}, tool {shown}", path.display());
            match rel.first().map(String::as_str) {
                Some("reviewer") => format!(
                    "{at}: set reviewer = \"you@example.com\" (or once at the top of the file, or pass --reviewer ID)"
                ),
                Some("sideEffect") => format!("{at}: set sideEffect = {}", values("sideEffect")),
                Some("assertions") => match rel.get(1) {
                    Some(k) if manifest::ASSERTIONS.contains(&k.as_str()) => {
                        format!("{at}: set assertions.{k} = {}", values(k))
                    }
                    Some(k) => format!("{at}: remove assertions.{k} (the assertions are {})", manifest::ASSERTIONS.join(", ")),
                    None => format!("{at}: add the table assertions with the six answers ({})", manifest::ASSERTIONS.join(", ")),
                },
                Some("inputChannels") => match (rel.get(1), argument) {
                    (Some(p), _) => format!("{at}: in inputChannels, {:?} must be an argument of the tool with = \"data\", \"instruction\" or \"authority\"", p),
                    (None, Some(p)) => format!("{at}: add inputChannels.\"{p}\" = \"data\", \"instruction\" or \"authority\""),
                    (None, None) => format!("{at}: add the argument named to inputChannels"),
                },
                _ => format!("{at}: set {field}"),
            }
        }
    }
}

/// A `--from` file: the reviews by tool name, and the file's top-level reviewer.
pub type ReviewsFile = (Vec<(String, Value)>, Option<String>);

/// Reads a `--from` file: JSON when its first character is `{`, otherwise TOML (a TOML document
/// cannot start with `{`). Returns the reviews by tool name and the file's top-level `reviewer`
/// (a string member: a review is always a table, so the two cannot be confused).
pub fn read_reviews(path: &Path) -> Result<ReviewsFile, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let text_start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| bytes[i]);
    let doc = if text_start == Some(b'{') {
        crate::snapshot::strict::parse_strict(&bytes)
            .map_err(|e| format!("{}: {e}", path.display()))?
    } else {
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            format!(
                "{}: not UTF-8 (a review file is JSON or TOML text)",
                path.display()
            )
        })?;
        let table: toml::Table = toml::from_str(text)
            .map_err(|e| format!("{}: not a review file (JSON or TOML): {e}", path.display()))?;
        toml_to_json(toml::Value::Table(table))
    };
    let obj = doc.as_object().ok_or_else(|| {
        format!(
            "{}: expected tables of tool name -> review (see `mcpguard review --template`)",
            path.display()
        )
    })?;
    let mut reviewer = None;
    let mut reviews = Vec::new();
    for (key, value) in obj {
        match value {
            Value::String(s) if key == "reviewer" => {
                // The template's placeholder is an empty string: no reviewer yet.
                if !s.trim().is_empty() {
                    reviewer = Some(s.clone());
                }
            }
            Value::Object(_) => reviews.push((key.clone(), value.clone())),
            _ => {
                return Err(format!(
                    "{}: {} is not a review: each tool's review is a table (only reviewer may be a string at the top)",
                    path.display(),
                    crate::snapshot::diff::display_name(key)
                ))
            }
        }
    }
    Ok((reviews, reviewer))
}

fn toml_to_json(v: toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        toml::Value::Boolean(b) => Value::Bool(b),
        // An unquoted date is taken as its text (reviewedAt is validated as RFC 3339 later).
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => Value::Object(
            t.into_iter()
                .map(|(k, v)| (k, toml_to_json(v)))
                .collect::<Map<String, Value>>(),
        ),
    }
}

/// A TOML basic string: quotes, backslashes and every control character escaped (TOML allows
/// none but tab unescaped, and DEL not at all).
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Server text for a comment: hidden characters visible and on one line, because a newline
/// inside a comment would let a description write answers into the template.
fn comment_text(s: &str, max: usize) -> String {
    let shown = crate::snapshot::diff::reveal(s, crate::wire::sanitize::Clean::LINE);
    let mut out: String = shown
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(max)
        .collect();
    if shown.chars().count() > max {
        out.push('…');
    }
    out
}

/// A proposed operation class: `None` when the template must not propose one.
pub(crate) struct ClassProposal {
    pub class: Option<&'static str>,
    /// Where the proposal comes from (or, with no class, why there is none), after "proposed".
    pub why: String,
    /// Set when the proposal rests on the server's own claims or they contradict the name: the
    /// person must look.
    pub flag: Option<String>,
    /// The class a prompt offers when it must offer one: `class`, or with none proposed the
    /// stricter of the classes in conflict (the terminal review asks; the template leaves it
    /// to be written).
    pub default: &'static str,
}

/// The operation class proposed for a tool, from its name's verb and the server's annotations:
/// the one answer of the review template and of the terminal review (`review --interactive`).
/// The server's hints only ever move the proposal toward caution (a read-named tool the server
/// says writes is proposed `update`, an update it calls destructive `delete`); a hint toward
/// harmlessness that contradicts the name proposes nothing.
pub(crate) fn propose_class(name: &str, tool: &Value) -> ClassProposal {
    let hint = |k: &str| {
        tool.pointer(&format!("/annotations/{k}"))
            .and_then(Value::as_bool)
    };
    let (ro, de) = (hint("readOnlyHint"), hint("destructiveHint"));
    let (by_name, verb) = class_of_name(name);
    let p =
        |class: Option<&'static str>, why: String, flag: Option<String>, default| ClassProposal {
            class,
            why,
            flag,
            default: class.unwrap_or(default),
        };
    match (by_name, ro, de) {
        (Some(c), Some(true), _) if c != "read" => p(
            None,
            format!("the name's verb {verb:?} says {c}, the server's readOnlyHint says read-only"),
            Some(format!(
                "CONFLICT: the server claims {} is read-only, its name says {c}; a server can claim anything, so nothing is proposed: write the class yourself",
                crate::snapshot::diff::display_name(name)
            )),
            if de == Some(true) { "delete" } else { c },
        ),
        (Some("read"), _, Some(true)) | (Some("read"), Some(false), _) => p(
            Some("update"),
            format!("the name's verb {verb:?} reads like a read, but the server's hints say it writes: the cautious class is proposed"),
            Some("the name and the server's hints disagree: check what it does".into()),
            "update",
        ),
        // A destructive update is proposed as the stricter class: the server says the tool
        // may destroy what it touches, which is what `delete` tells a policy.
        (Some("update"), _, Some(true)) => p(
            Some("delete"),
            format!("from the server's destructiveHint: the name's verb {verb:?} says update, and a destructive update is the stricter delete"),
            None,
            "delete",
        ),
        (Some(c), _, _) => p(
            Some(c),
            format!(
                "from the name's verb {verb:?}{}",
                if ro == Some(true) { " (the server's readOnlyHint agrees)" } else { "" }
            ),
            None,
            c,
        ),
        (None, Some(true), Some(true)) => p(
            None,
            "the server's hints say both read-only and destructive".into(),
            Some("CONFLICT: readOnlyHint and destructiveHint are both true; nothing is proposed: write the class yourself".into()),
            "delete",
        ),
        (None, _, Some(true)) => p(Some("delete"), "from the server's destructiveHint".into(), None, "delete"),
        (None, Some(true), _) => p(
            Some("read"),
            "only from the server's own readOnlyHint (a hint, not a fact)".into(),
            Some("read rests only on what the server says about itself: check it".into()),
            "read",
        ),
        _ => p(
            Some("update"),
            "nothing says what it does, so the cautious answer (a write) is proposed".into(),
            None,
            "update",
        ),
    }
}

/// The schema of one argument location (object properties and array items only).
fn schema_at<'a>(schema: &'a Value, tokens: &[String]) -> Option<&'a Value> {
    let mut here = schema;
    for t in tokens {
        here = match here.pointer(&format!("/properties/{}", manifest::escape_token(t))) {
            Some(s) => s,
            None => here.get("items")?,
        };
    }
    Some(here)
}

/// String formats that name a target or an identity.
const AUTHORITY_FORMATS: [&str; 8] = [
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
];

/// The template of every unreviewed tool of `server` in `file`, and a summary for stderr.
pub fn render(
    file: &Path,
    server: &str,
    reviewer: Option<&str>,
) -> Result<(String, String), String> {
    let m = manifest::load(file)?;
    let entry = m.server(server).map_err(|p| p.to_string())?.clone();
    let tools = manifest::tools(server, &entry).map_err(|ps| {
        ps.iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("\n  ")
    })?;
    let unreviewed: Vec<(String, Value)> = tools
        .into_iter()
        .filter(|(n, _, _)| manifest::review_of(&entry, n).is_none())
        .map(|(n, _, t)| (n, t))
        .collect();
    let shown_file = comment_text(&file.display().to_string(), 200);
    let shown_server = comment_text(server, 100);
    let cmd_file = comment_text(&crate::cli::shell_quote(&file.display().to_string()), 200);
    let cmd_server = comment_text(&crate::cli::shell_quote(server), 100);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# mcpguard review template for server {shown_server} of {shown_file}\n\
         # (snapshot digest {}), {} unreviewed tool(s).\n\
         #\n\
         # Every answer below is a PROPOSAL, with a comment saying where it came from. Read each\n\
         # tool (`mcpguard show {cmd_file} --server {cmd_server} --tool NAME` shows everything the\n\
         # model sees), change what is wrong, delete the tables of a tool you do not want served\n\
         # (it stays unreviewed and is not served), then record this file:\n\
         #   mcpguard review {cmd_file} --server {cmd_server} --from THIS_FILE\n\
         # Answers marked `!!` rest on the server's own claims or contradict each other: check them.\n\
         # An answer reading \"decide: ...\" must be replaced before the file is accepted.\n\
         # The format is documented in docs/review.md.\n",
        m.digest,
        unreviewed.len()
    );
    let _ = writeln!(
        out,
        "reviewer = {}   # who reviews (an e-mail address or another stable identity); or pass --reviewer ID\n",
        quote(reviewer.unwrap_or(""))
    );
    let mut answers = 0usize;
    let mut flagged = Vec::new();
    let mut undecided = Vec::new();
    for (i, (name, tool)) in unreviewed.iter().enumerate() {
        let shown = crate::snapshot::diff::display_name(name);
        let key = quote(name);
        let _ = writeln!(
            out,
            "# ======== [{}/{}] tool {} ========",
            i + 1,
            unreviewed.len(),
            comment_text(&shown, 200)
        );
        for field in ["title", "description"] {
            if let Some(text) = tool.get(field).and_then(Value::as_str) {
                let _ = writeln!(out, "# {field}: {}", comment_text(text, 300));
                let found = crate::wire::injection::findings(text);
                if !found.is_empty() {
                    let list: Vec<String> = found.iter().map(|f| f.label.to_string()).collect();
                    let _ = writeln!(
                        out,
                        "# !! instruction-like text in the {field} ({}): read the whole tool with `mcpguard show`",
                        list.join(", ")
                    );
                    flagged.push(shown.clone());
                }
            }
        }
        if let Some(a) = tool.get("annotations").and_then(Value::as_object) {
            let hints: Vec<String> = a
                .iter()
                .filter(|(k, _)| k.ends_with("Hint"))
                .map(|(k, v)| {
                    format!(
                        "{}={}",
                        comment_text(k, 40),
                        comment_text(&v.to_string(), 40)
                    )
                })
                .collect();
            if !hints.is_empty() {
                let _ = writeln!(
                    out,
                    "# the server's annotations (its own claims, never facts): {}",
                    hints.join(" ")
                );
            }
        }
        let class = propose_class(name, tool);
        let _ = writeln!(out, "[{key}]");
        match class.class {
            Some(c) => {
                let _ = writeln!(out, "sideEffect = {}   # proposed {}", quote(c), class.why);
            }
            None => {
                let _ = writeln!(
                    out,
                    "sideEffect = \"decide: read, create, update or delete\"   # nothing proposed: {}",
                    class.why
                );
                undecided.push(shown.clone());
            }
        }
        if let Some(f) = &class.flag {
            let _ = writeln!(out, "# !! {f}");
            flagged.push(shown.clone());
        }
        answers += 1;
        let cautious = class.class.unwrap_or("update");
        let ann = |k: &str| {
            tool.pointer(&format!("/annotations/{k}"))
                .and_then(Value::as_bool)
        };
        let _ = writeln!(out, "[{key}.assertions]");
        let _ = writeln!(
            out,
            "headless = true   # proposed: the call needs no interface and no person at the time (must be true to be served)"
        );
        let _ = writeln!(
            out,
            "independentCalls = true   # proposed: a call's meaning does not depend on earlier calls or a session (must be true)"
        );
        let _ = writeln!(
            out,
            "modelBacked = false   # proposed: the tool itself runs no model (set true if it does)"
        );
        let (effects, why) = match (cautious, ann("openWorldHint")) {
            ("read", Some(true)) => (
                "[]".to_string(),
                "a read has none; the server's openWorldHint says it reaches outside: name that class if it matters to your policy".to_string(),
            ),
            ("read", _) => ("[]".into(), "a read has no side effects".into()),
            (c, _) => (format!("[{}]", quote(c)), format!("follows the operation class {c}")),
        };
        let _ = writeln!(out, "sideEffects = {effects}   # proposed: {why}");
        let (conc, why) = if cautious == "read" {
            ("safe", "a read may overlap other calls".to_string())
        } else if ann("idempotentHint") == Some(true) {
            (
                "serialize",
                "a write is serialized; the server's idempotentHint does not make overlapping calls safe".to_string(),
            )
        } else {
            (
                "serialize",
                "a write is serialized (calls do not overlap)".to_string(),
            )
        };
        let _ = writeln!(out, "concurrency = {}   # proposed: {why}", quote(conc));
        let _ = writeln!(
            out,
            "referenceBasedIO = true   # proposed: inputs and outputs are JSON values or references, not local handles (must be true)"
        );
        answers += 6;
        let schema = tool.get("inputSchema").cloned().unwrap_or(Value::Null);
        let locations = manifest::argument_locations(&schema);
        let _ = writeln!(out, "[{key}.inputChannels]");
        if locations.is_empty() {
            let _ = writeln!(out, "# (the tool takes no arguments)");
        }
        for pointer in locations {
            let tokens = manifest::pointer_tokens(&pointer).unwrap_or_default();
            let format = schema_at(&schema, &tokens)
                .and_then(|s| s.get("format"))
                .and_then(Value::as_str);
            let (class, why) = match format {
                Some(f) if AUTHORITY_FORMATS.contains(&f) => (
                    "authority",
                    format!("proposed: its schema's format {f:?} names a target or an identity"),
                ),
                _ => {
                    let (c, why) = propose_channel(&pointer, None);
                    (c, why)
                }
            };
            let _ = writeln!(
                out,
                "{} = {}   # {}",
                quote(&pointer),
                quote(class),
                comment_text(&why, 200)
            );
            answers += 1;
        }
        out.push('\n');
    }
    let mut summary = format!(
        "wrote a review template of {} unreviewed tool(s) of server {:?}: {answers} proposed answer(s)",
        unreviewed.len(),
        server
    );
    flagged.dedup();
    if !flagged.is_empty() {
        let _ = write!(
            summary,
            "; check the ones marked !! ({})",
            flagged.join(", ")
        );
    }
    if !undecided.is_empty() {
        let _ = write!(
            summary,
            "; write the operation class of {} yourself (the template proposes none)",
            undecided.join(", ")
        );
    }
    let _ = write!(
        summary,
        "; then record it: mcpguard review {} --server {} --from FILE",
        crate::cli::shell_quote(&file.display().to_string()),
        crate::cli::shell_quote(server)
    );
    Ok((out, summary))
}

/// Verbs that name what a tool does, by class, matched against the first word of its name.
const READ_VERBS: [&str; 17] = [
    "get", "list", "read", "search", "find", "fetch", "lookup", "look", "show", "describe",
    "query", "view", "count", "check", "stat", "inspect", "browse",
];
const CREATE_VERBS: [&str; 8] = [
    "create", "add", "new", "insert", "post", "upload", "send", "make",
];
const DELETE_VERBS: [&str; 8] = [
    "delete", "remove", "rm", "drop", "destroy", "purge", "clear", "erase",
];

const UPDATE_VERBS: [&str; 14] = [
    "update", "set", "edit", "write", "modify", "rename", "move", "replace", "patch", "put",
    "save", "run", "execute", "exec",
];

/// The operation class the first word of a tool's name suggests, and that word.
pub(crate) fn class_of_name(name: &str) -> (Option<&'static str>, String) {
    let verb = words(name).into_iter().next().unwrap_or_default();
    let class = if READ_VERBS.contains(&verb.as_str()) {
        Some("read")
    } else if CREATE_VERBS.contains(&verb.as_str()) {
        Some("create")
    } else if DELETE_VERBS.contains(&verb.as_str()) {
        Some("delete")
    } else if UPDATE_VERBS.contains(&verb.as_str()) {
        Some("update")
    } else {
        None
    };
    (class, verb)
}

/// Argument names that usually choose a target or an identity: proposed as `authority`.
const AUTHORITY_WORDS: [&str; 42] = [
    "path",
    "paths",
    "file",
    "filename",
    "files",
    "dir",
    "directory",
    "folder",
    "url",
    "uri",
    "link",
    "endpoint",
    "host",
    "hostname",
    "domain",
    "server",
    "command",
    "cmd",
    "exec",
    "script",
    "shell",
    "program",
    "recipient",
    "recipients",
    "to",
    "cc",
    "bcc",
    "email",
    "address",
    "account",
    "user",
    "username",
    "owner",
    "repo",
    "repository",
    "org",
    "tenant",
    "workspace",
    "channel",
    "bucket",
    "destination",
    "target",
];

/// The proposed channel of one argument and why: the previous review's (for the pointer or an
/// ancestor), else `authority` for names like path or recipient, else `data`.
pub(crate) fn propose_channel(pointer: &str, previous: Option<&Value>) -> (&'static str, String) {
    if let Some(channels) = previous
        .and_then(|r| r.get("inputChannels"))
        .and_then(Value::as_object)
    {
        let found = channels
            .iter()
            .filter(|(k, _)| {
                pointer == k.as_str() || k.is_empty() || pointer.starts_with(&format!("{k}/"))
            })
            .max_by_key(|(k, _)| k.len());
        if let Some((_, class)) = found {
            if let Some(c) = manifest::CHANNEL_CLASSES
                .iter()
                .find(|c| class.as_str() == Some(c))
            {
                return (c, "your previous review".into());
            }
        }
    }
    let last = manifest::pointer_tokens(pointer)
        .and_then(|t| t.last().cloned())
        .unwrap_or_default();
    match words(&last)
        .into_iter()
        .find(|w| AUTHORITY_WORDS.contains(&w.as_str()))
    {
        Some(w) => (
            "authority",
            format!("proposed: {w:?} usually names a target or an identity"),
        ),
        None => ("data", "data by default".into()),
    }
}

/// The lowercase words of an identifier: split at non-alphanumerics and camelCase humps.
pub(crate) fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        cur.extend(c.to_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quoting_and_comments_keep_server_text_inert() {
        assert_eq!(quote("a\"b\\c\n\u{7f}"), "\"a\\\"b\\\\c\\u000A\\u007F\"");
        let c = comment_text("x\ny = 1\r\n[t]", 100);
        assert!(!c.contains('\n') && !c.contains('\r'), "{c}");
        let parsed: toml::Table =
            toml::from_str(&format!("# {c}\n{} = 1\n", quote("a\u{7f}\"\n"))).unwrap();
        assert_eq!(parsed.len(), 1);
    }

    #[test]
    fn a_name_that_contradicts_a_read_only_claim_gets_no_class() {
        let t = json!({"annotations": {"readOnlyHint": true}});
        let p = propose_class("delete_all", &t);
        assert_eq!(p.class, None);
        assert!(p.flag.unwrap().starts_with("CONFLICT"));
        assert_eq!(propose_class("get_note", &t).class, Some("read"));
        assert!(propose_class("get_note", &t).flag.is_none());
        let p = propose_class("frobnicate", &t);
        assert_eq!(p.class, Some("read"));
        assert!(p.flag.is_some());
        let w = json!({"annotations": {"destructiveHint": true}});
        assert_eq!(propose_class("get_note", &w).class, Some("update"));
        assert_eq!(
            propose_class("frobnicate", &json!({})).class,
            Some("update")
        );
    }

    /// A tool named with an update verb that the server calls destructive is proposed as the
    /// stricter `delete` (it was `update` here and `delete` in the terminal review); without the
    /// hint, or with it false, the name's update stands.
    #[test]
    fn a_destructive_update_proposes_the_stricter_class() {
        let destructive = json!({"annotations": {"readOnlyHint": false, "destructiveHint": true}});
        let p = propose_class("write_file", &destructive);
        assert_eq!((p.class, p.default), (Some("delete"), "delete"));
        assert!(p.why.contains("destructiveHint"), "{}", p.why);
        assert!(p.flag.is_none());
        let additive = json!({"annotations": {"destructiveHint": false}});
        assert_eq!(propose_class("write_file", &additive).class, Some("update"));
        assert_eq!(
            propose_class("write_file", &json!({})).class,
            Some("update")
        );
        // A conflict proposes nothing, and offers a prompt the stricter side.
        let both = json!({"annotations": {"readOnlyHint": true, "destructiveHint": true}});
        let p = propose_class("write_file", &both);
        assert_eq!((p.class, p.default), (None, "delete"));
        let p = propose_class(
            "delete_all",
            &json!({"annotations": {"readOnlyHint": true}}),
        );
        assert_eq!((p.class, p.default), (None, "delete"));
        let p = propose_class("add_note", &json!({"annotations": {"readOnlyHint": true}}));
        assert_eq!((p.class, p.default), (None, "create"));
    }

    #[test]
    fn hints_name_flags_and_fields() {
        let rel = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let other = manifest::ProblemKind::Other;
        assert_eq!(
            hint(
                "t",
                &rel(&["assertions", "concurrency"]),
                &other,
                Source::Flags
            ),
            "give --assert concurrency=safe|serialize"
        );
        let f = hint(
            "t",
            &rel(&["inputChannels"]),
            &manifest::ProblemKind::Unclassified("/b".into()),
            Source::File(Path::new("r.toml")),
        );
        assert_eq!(f, "in r.toml, tool t: add inputChannels.\"/b\" = \"data\", \"instruction\" or \"authority\"");
        assert!(hint("t", &rel(&["reviewer"]), &other, Source::Flags).contains("--reviewer ID"));
    }

    /// The hints follow the kind `validate_review` gives each problem, not the problem's words:
    /// an assertion answered false is answered by leaving the tool unreviewed, an unclassified
    /// argument is named when its pointer is plain and only described when it is not.
    #[test]
    fn hints_follow_the_kind_of_each_review_problem() {
        let tool = json!({"inputSchema": {"type": "object", "properties": {
            "b": {"type": "string"}, "c\"d": {"type": "string"}, "e\u{7f}": {"type": "string"}}}});
        let review = json!({"reviewer": "me", "reviewedAt": "2026-01-01T00:00:00Z",
            "assertions": {"headless": false, "independentCalls": true, "modelBacked": false,
                           "sideEffects": [], "concurrency": "safe", "referenceBasedIO": true},
            "inputChannels": {}});
        let at = "/servers/s/reviews/t";
        let problems =
            manifest::validate_review(at, &tool, &review, &manifest::Acceptance::default());
        let hints: Vec<(String, String, String)> = problems
            .iter()
            .map(|p| {
                let rel = manifest::pointer_tokens(p.pointer.strip_prefix(at).unwrap()).unwrap();
                (
                    p.pointer.clone(),
                    hint("t", &rel, &p.kind, Source::Flags),
                    hint("t", &rel, &p.kind, Source::File(Path::new("r.toml"))),
                )
            })
            .collect();
        let unsuitable =
            "if that is your answer, leave the tool unreviewed (it is then not served)";
        let c = "/servers/s/reviews/t/inputChannels";
        assert_eq!(
            hints,
            [
                (
                    "/servers/s/reviews/t/assertions/headless".to_string(),
                    unsuitable.to_string(),
                    unsuitable.to_string()
                ),
                (
                    c.into(),
                    "give --channel /b=data|instruction|authority".into(),
                    "in r.toml, tool t: add inputChannels.\"/b\" = \"data\", \"instruction\" or \"authority\"".into()
                ),
                (
                    c.into(),
                    "give --channel POINTER=data|instruction|authority for the argument named".into(),
                    "in r.toml, tool t: add the argument named to inputChannels".into()
                ),
                (
                    c.into(),
                    "give --channel POINTER=data|instruction|authority for the argument named".into(),
                    "in r.toml, tool t: add the argument named to inputChannels".into()
                ),
            ]
        );
        assert_eq!(problems[0].kind, manifest::ProblemKind::Unsuitable);
        assert_eq!(
            problems[1].kind,
            manifest::ProblemKind::Unclassified("/b".into())
        );
    }
}
