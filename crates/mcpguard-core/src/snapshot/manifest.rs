//! The reviewed snapshot ("manifest"), in the `openudon.mcp-tool-manifest.0.1` shape.
//!
//! The document is kept as the exact JSON value that was parsed (strictly: duplicate member names
//! are errors). Nothing is projected into typed structs and re-serialized, because the pin is the
//! SHA-256 of the RFC 8785 canonical form of *this* value: a typed model would drop unknown
//! fields and silently change what was reviewed. Accessors read the value and report problems by
//! JSON pointer.
//!
//! Knows the snapshot format; nothing of live servers, the gate's state, the policy or processes
//! (its only IO is reading and atomically writing the snapshot file).

use std::path::Path;

use jiff::Timestamp;
use serde_json::{Map, Value};

use crate::snapshot::canonical;
use crate::snapshot::strict;

pub const PROFILE: &str = "openudon.mcp-tool-manifest.0.1";

/// The six reviewer assertions of the seed, in the order they are shown.
pub const ASSERTIONS: [&str; 6] = [
    "headless",
    "independentCalls",
    "modelBacked",
    "sideEffects",
    "concurrency",
    "referenceBasedIO",
];

/// The operation classes a review may record in `sideEffect`: seed 004's closed `sideEffect`
/// vocabulary. Anything but `read` is a write.
pub const SIDE_EFFECT_CLASSES: [&str; 4] = ["read", "create", "update", "delete"];

/// The input-channel classes of the seed.
pub const CHANNEL_CLASSES: [&str; 3] = ["data", "instruction", "authority"];

/// A loaded snapshot and its digest.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub doc: Value,
    /// Lowercase hex SHA-256 of the canonical bytes of `doc`.
    pub digest: String,
}

/// A problem with a snapshot, located by JSON pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub pointer: String,
    pub message: String,
    /// What kind of problem it is, for code that answers it (the review hints): the message is
    /// for people and may be reworded, the kind is what code matches on.
    pub kind: ProblemKind,
}

/// The kinds of [`Problem`] that code tells apart; everything else is [`ProblemKind::Other`],
/// answered by where its pointer lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProblemKind {
    /// A reviewer assertion that must be true is answered false: the tool is outside what a
    /// snapshot can make safe, and no flag or field makes the review acceptable.
    Unsuitable,
    /// An argument location of the tool's inputSchema that no `inputChannels` entry covers; the
    /// location's RFC 6901 pointer.
    Unclassified(String),
    /// Any other problem.
    Other,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "at {}: {}", self.pointer, self.message)
        }
    }
}

fn problem(pointer: impl Into<String>, message: impl Into<String>) -> Problem {
    Problem {
        pointer: pointer.into(),
        message: message.into(),
        kind: ProblemKind::Other,
    }
}

impl Problem {
    fn of_kind(mut self, kind: ProblemKind) -> Problem {
        self.kind = kind;
        self
    }
}

/// Escapes one RFC 6901 reference token.
pub fn escape_token(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// Splits an RFC 6901 pointer into unescaped tokens; `None` if it is not a valid pointer.
pub fn pointer_tokens(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/')
        .map(|t| {
            // `~` must be followed by 0 or 1.
            let mut out = String::with_capacity(t.len());
            let mut chars = t.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => out.push('~'),
                        Some('1') => out.push('/'),
                        _ => return None,
                    }
                } else {
                    out.push(c);
                }
            }
            Some(out)
        })
        .collect()
}

/// Reads and strictly parses a snapshot file, computing its digest.
pub fn load(path: &Path) -> Result<Manifest, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    from_bytes(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// Strictly parses snapshot bytes.
pub fn from_bytes(bytes: &[u8]) -> Result<Manifest, String> {
    let doc = strict::parse_strict(bytes).map_err(|e| e.to_string())?;
    Ok(Manifest::new(doc))
}

impl Manifest {
    pub fn new(doc: Value) -> Self {
        let digest = canonical::digest(&doc);
        Manifest { doc, digest }
    }

    /// The `servers` object, or a problem.
    pub fn servers(&self) -> Result<&Map<String, Value>, Problem> {
        self.doc
            .get("servers")
            .and_then(Value::as_object)
            .ok_or_else(|| problem("/servers", "missing or not an object"))
    }

    /// One server entry.
    pub fn server(&self, key: &str) -> Result<&Value, Problem> {
        let servers = self.servers()?;
        servers.get(key).ok_or_else(|| {
            let known: Vec<&str> = servers.keys().map(String::as_str).collect();
            problem(
                "/servers",
                format!(
                    "no server {key:?} in this snapshot (it has: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                ),
            )
        })
    }

    pub fn protocol_version(&self) -> Option<&str> {
        self.doc.get("protocolVersion").and_then(Value::as_str)
    }

    pub fn expires_at(&self) -> Result<Timestamp, Problem> {
        instant(&self.doc, "expiresAt")
    }
}

fn instant(doc: &Value, field: &str) -> Result<Timestamp, Problem> {
    let text = doc
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| problem(format!("/{field}"), "missing or not a string"))?;
    text.parse::<Timestamp>().map_err(|e| {
        problem(
            format!("/{field}"),
            format!("not an RFC 3339 instant ({e})"),
        )
    })
}

/// Every Tool object of a server entry, across all pages, with its pointer. A name occurring
/// twice is a problem: the seed requires each selected name to occur exactly once. The objects
/// are copies; [`tool_refs`] borrows them instead.
pub fn tools(
    server_key: &str,
    entry: &Value,
) -> Result<Vec<(String, String, Value)>, Vec<Problem>> {
    tool_refs(server_key, entry).map(|tools| {
        tools
            .into_iter()
            .map(|(name, pointer, tool)| (name.to_string(), pointer, tool.clone()))
            .collect()
    })
}

/// Like [`tools`], borrowing every Tool object and its name from `entry`: start-up validates
/// and pins from these without copying the catalogue. Duplicate names are found through a hash
/// set, so a catalogue of a thousand tools costs a thousand look-ups, not half a million
/// comparisons.
pub fn tool_refs<'a>(
    server_key: &str,
    entry: &'a Value,
) -> Result<Vec<(&'a str, String, &'a Value)>, Vec<Problem>> {
    let base = format!("/servers/{}", escape_token(server_key));
    let mut problems = Vec::new();
    let mut out: Vec<(&'a str, String, &'a Value)> = Vec::new();
    let mut seen: std::collections::HashMap<&'a str, usize> = std::collections::HashMap::new();
    let Some(pages) = entry.get("toolPages").and_then(Value::as_array) else {
        return Err(vec![problem(
            format!("{base}/toolPages"),
            "missing or not an array",
        )]);
    };
    if pages.is_empty() {
        problems.push(problem(
            format!("{base}/toolPages"),
            "no pages were captured",
        ));
    }
    for (p, page) in pages.iter().enumerate() {
        let Some(list) = page.get("tools").and_then(Value::as_array) else {
            problems.push(problem(
                format!("{base}/toolPages/{p}/tools"),
                "missing or not an array",
            ));
            continue;
        };
        for (t, tool) in list.iter().enumerate() {
            let pointer = format!("{base}/toolPages/{p}/tools/{t}");
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                problems.push(problem(pointer, "a Tool without a string name"));
                continue;
            };
            if let Some(&first) = seen.get(name) {
                problems.push(problem(
                    pointer.clone(),
                    format!(
                        "tool {name:?} occurs twice (first at {}); each name must occur exactly once",
                        out[first].1
                    ),
                ));
                continue;
            }
            seen.insert(name, out.len());
            out.push((name, pointer, tool));
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

/// What the local policy accepts of reviews (the policy issue fills this from TOML).
#[derive(Debug, Clone)]
pub struct Acceptance {
    pub allow_model_backed: bool,
    /// Side-effect classes the policy refuses.
    pub forbidden_side_effects: Vec<String>,
    /// Longest accepted time between capture and expiry.
    pub max_validity: jiff::SignedDuration,
}

impl Default for Acceptance {
    fn default() -> Self {
        Acceptance {
            allow_model_backed: true,
            forbidden_side_effects: Vec::new(),
            max_validity: jiff::SignedDuration::from_hours(30 * 24),
        }
    }
}

/// Checks the document as a whole: profile, instants, expiry at `now`, and for every server the
/// capture and every review. Returns every problem found, not just the first.
pub fn validate(m: &Manifest, now: Timestamp, acceptance: &Acceptance) -> Vec<Problem> {
    let mut problems = Vec::new();
    match m.doc.get("profile").and_then(Value::as_str) {
        Some(PROFILE) => {}
        Some(other) => problems.push(problem(
            "/profile",
            format!("unknown profile {other:?}; expected {PROFILE:?}"),
        )),
        None => problems.push(problem(
            "/profile",
            format!("missing; expected {PROFILE:?}"),
        )),
    }
    if m.protocol_version().is_none() {
        problems.push(problem("/protocolVersion", "missing or not a string"));
    }
    let captured = instant(&m.doc, "capturedAt");
    let expires = instant(&m.doc, "expiresAt");
    match (&captured, &expires) {
        (Ok(c), Ok(e)) => {
            if e <= c {
                problems.push(problem(
                    "/expiresAt",
                    "expiry is not after the capture time",
                ));
            } else if e.duration_since(*c) > acceptance.max_validity {
                problems.push(problem(
                    "/expiresAt",
                    format!(
                        "the snapshot is valid for longer than the policy allows ({}); capture again with a shorter --expires-in, or raise review.max_validity in the policy",
                        fmt_days(acceptance.max_validity)
                    ),
                ));
            }
            if *e <= now {
                problems.push(problem(
                    "/expiresAt",
                    format!("the snapshot expired at {e}; renew it with `mcpguard update FILE -- <server command>` if the server is unchanged (no second review), or capture and review it again"),
                ));
            }
        }
        _ => {
            problems.extend(captured.err());
            problems.extend(expires.err());
        }
    }
    match m.servers() {
        Err(p) => problems.push(p),
        Ok(servers) => {
            if servers.is_empty() {
                problems.push(problem("/servers", "no servers were captured"));
            }
            for (key, entry) in servers {
                problems.extend(validate_server(key, entry, acceptance));
            }
        }
    }
    problems
}

fn fmt_days(d: jiff::SignedDuration) -> String {
    let secs = d.as_secs();
    if secs % 86_400 == 0 {
        format!("{} days", secs / 86_400)
    } else {
        format!("{secs} seconds")
    }
}

/// Checks one server entry: identity present, tools well-formed, and every review complete and
/// acceptable. A tool without a review is not a problem here (it is simply never served); a
/// review of a tool that is not in the capture is.
pub fn validate_server(key: &str, entry: &Value, acceptance: &Acceptance) -> Vec<Problem> {
    let base = format!("/servers/{}", escape_token(key));
    let mut problems = Vec::new();
    if !entry.get("serverInfo").is_some_and(Value::is_object) {
        problems.push(problem(
            format!("{base}/serverInfo"),
            "missing or not an object",
        ));
    }
    let tools: std::collections::HashMap<&str, &Value> = match tool_refs(key, entry) {
        Ok(t) => t.into_iter().map(|(name, _, tool)| (name, tool)).collect(),
        Err(p) => {
            problems.extend(p);
            Default::default()
        }
    };
    let reviews = match entry.get("reviews") {
        None => return problems,
        Some(Value::Object(r)) => r,
        Some(_) => {
            problems.push(problem(format!("{base}/reviews"), "not an object"));
            return problems;
        }
    };
    for (name, review) in reviews {
        let at = format!("{base}/reviews/{}", escape_token(name));
        match tools.get(name.as_str()) {
            None => problems.push(problem(
                at,
                format!("a review of tool {name:?}, which is not in the capture"),
            )),
            Some(tool) => problems.extend(validate_review(&at, tool, review, acceptance)),
        }
    }
    problems
}

/// The seed's table "Reviewer assertions define the qualifying subset", plus the input-channel
/// rules, plus the local policy's acceptance.
pub fn validate_review(
    at: &str,
    tool: &Value,
    review: &Value,
    acceptance: &Acceptance,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let Some(review) = review.as_object() else {
        return vec![problem(at, "a review must be an object")];
    };
    match review.get("reviewer").and_then(Value::as_str) {
        Some(r) if !r.trim().is_empty() => {}
        _ => problems.push(problem(
            format!("{at}/reviewer"),
            "missing: who reviewed this tool?",
        )),
    }
    match review
        .get("reviewedAt")
        .and_then(Value::as_str)
        .map(str::parse::<Timestamp>)
    {
        Some(Ok(_)) => {}
        Some(Err(e)) => problems.push(problem(
            format!("{at}/reviewedAt"),
            format!("not an RFC 3339 instant ({e})"),
        )),
        None => problems.push(problem(format!("{at}/reviewedAt"), "missing")),
    }
    match review.get("sideEffect") {
        None => {}
        Some(Value::String(s)) if SIDE_EFFECT_CLASSES.contains(&s.as_str()) => {}
        Some(_) => problems.push(problem(
            format!("{at}/sideEffect"),
            "the operation class must be \"read\", \"create\", \"update\" or \"delete\" (seed 004's sideEffect)",
        )),
    }
    let a_at = format!("{at}/assertions");
    match review.get("assertions").and_then(Value::as_object) {
        None => problems.push(problem(
            a_at,
            "missing: the six reviewer assertions are required",
        )),
        Some(a) => {
            for must_be_true in ["headless", "independentCalls", "referenceBasedIO"] {
                match a.get(must_be_true) {
                    Some(Value::Bool(true)) => {}
                    Some(Value::Bool(false)) => problems.push(
                        problem(
                            format!("{a_at}/{must_be_true}"),
                            format!("{must_be_true} is false: such a tool is outside what a snapshot can make safe"),
                        )
                        .of_kind(ProblemKind::Unsuitable),
                    ),
                    _ => problems.push(problem(format!("{a_at}/{must_be_true}"), "must be stated as true")),
                }
            }
            match a.get("modelBacked") {
                Some(Value::Bool(true)) if !acceptance.allow_model_backed => problems.push(problem(
                    format!("{a_at}/modelBacked"),
                    "the tool is model-backed and the local policy does not accept model-backed tools (review.allow_model_backed = false)",
                )),
                Some(Value::Bool(_)) => {}
                _ => problems.push(problem(format!("{a_at}/modelBacked"), "must be stated as true or false")),
            }
            match a.get("sideEffects").and_then(Value::as_array) {
                None => problems.push(problem(
                    format!("{a_at}/sideEffects"),
                    "must be an explicit list of side-effect classes (an empty list when there are none)",
                )),
                Some(list) => {
                    for (i, e) in list.iter().enumerate() {
                        match e.as_str() {
                            Some(s) if !s.is_empty() => {
                                if acceptance.forbidden_side_effects.iter().any(|f| f == s) {
                                    problems.push(problem(
                                        format!("{a_at}/sideEffects/{i}"),
                                        format!("side effect {s:?} is forbidden by the local policy (review.forbidden_side_effects)"),
                                    ));
                                }
                            }
                            _ => problems.push(problem(format!("{a_at}/sideEffects/{i}"), "must be a non-empty string")),
                        }
                    }
                }
            }
            match a.get("concurrency").and_then(Value::as_str) {
                Some("safe") | Some("serialize") => {}
                _ => problems.push(problem(
                    format!("{a_at}/concurrency"),
                    "must be \"safe\" or \"serialize\"",
                )),
            }
            for key in a.keys() {
                if !ASSERTIONS.contains(&key.as_str()) {
                    problems.push(problem(
                        format!("{a_at}/{}", escape_token(key)),
                        "unknown assertion",
                    ));
                }
            }
        }
    }
    let c_at = format!("{at}/inputChannels");
    match review.get("inputChannels").and_then(Value::as_object) {
        None => problems.push(problem(
            c_at,
            "missing: every argument must be classified as data, instruction or authority",
        )),
        Some(channels) => {
            let schema = tool.get("inputSchema").unwrap_or(&Value::Null);
            for (pointer, class) in channels {
                let here = format!("{c_at}/{}", escape_token(pointer));
                match class.as_str() {
                    Some(c) if CHANNEL_CLASSES.contains(&c) => {}
                    _ => problems.push(problem(
                        here.clone(),
                        "the class must be \"data\", \"instruction\" or \"authority\"",
                    )),
                }
                match pointer_tokens(pointer) {
                    None => problems.push(problem(
                        here,
                        format!("{pointer:?} is not an RFC 6901 pointer"),
                    )),
                    Some(tokens) if tokens.is_empty() => {}
                    Some(tokens) => {
                        if !schema_admits(schema, &tokens) {
                            problems.push(problem(
                                here,
                                format!("{pointer:?} names no argument location the tool's inputSchema admits"),
                            ));
                        }
                    }
                }
            }
            let classified: Vec<Vec<String>> =
                channels.keys().filter_map(|p| pointer_tokens(p)).collect();
            for missing in unclassified(schema, &mut Vec::new(), &classified) {
                problems.push(
                    problem(
                        c_at.clone(),
                        format!(
                            "argument {missing:?} is not classified (data, instruction or authority)"
                        ),
                    )
                    .of_kind(ProblemKind::Unclassified(missing)),
                );
            }
        }
    }
    problems
}

/// Whether the schema admits a value at the location named by `tokens` (object properties by
/// name, array items by index).
fn schema_admits(schema: &Value, tokens: &[String]) -> bool {
    let Some((first, rest)) = tokens.split_first() else {
        return true;
    };
    let Some(obj) = schema.as_object() else {
        // `true` or an absent schema admits anything.
        return schema.as_bool().unwrap_or(false);
    };
    if let Some(prop) = obj.get("properties").and_then(|p| p.get(first.as_str())) {
        return schema_admits(prop, rest);
    }
    if let Some(items) = obj.get("items") {
        if first.parse::<usize>().is_ok() || first == "-" {
            return schema_admits(items, rest);
        }
    }
    match obj.get("additionalProperties") {
        Some(Value::Bool(false)) => false,
        Some(extra @ Value::Object(_)) => schema_admits(extra, rest),
        _ => {
            // An open object admits any member, at any depth.
            obj.get("type").and_then(Value::as_str) == Some("object")
                || obj.contains_key("properties")
        }
    }
}

/// Top-level-first list of argument locations (as pointers) that no classification covers. A
/// location is covered by a pointer to itself or to an ancestor, or when it is an object whose
/// declared properties are all covered.
fn unclassified(schema: &Value, path: &mut Vec<String>, classified: &[Vec<String>]) -> Vec<String> {
    let covered = |p: &[String]| classified.iter().any(|c| p.starts_with(c));
    if covered(path) {
        return Vec::new();
    }
    let props = schema.get("properties").and_then(Value::as_object);
    match props {
        Some(props) if !props.is_empty() => {
            let mut missing = Vec::new();
            for name in props.keys() {
                path.push(name.clone());
                missing.extend(unclassified(&props[name], path, classified));
                path.pop();
            }
            missing
        }
        _ if path.is_empty() => Vec::new(), // A tool without arguments needs no classification.
        _ => vec![path
            .iter()
            .map(|t| format!("/{}", escape_token(t)))
            .collect()],
    }
}

/// The operation class a review records (`sideEffect`), when it records one as a string.
pub fn reviewed_side_effect(review: &Value) -> Option<&str> {
    review.get("sideEffect").and_then(Value::as_str)
}

/// The argument locations of an input schema that a review's `inputChannels` must cover, as
/// pointers, top level first: each declared property, and the properties of a declared object
/// property instead of the object itself.
pub fn argument_locations(schema: &Value) -> Vec<String> {
    unclassified(schema, &mut Vec::new(), &[])
}

/// The review of `tool` in a server entry, if any.
pub fn review_of<'a>(entry: &'a Value, tool: &str) -> Option<&'a Value> {
    entry.get("reviews").and_then(|r| r.get(tool))
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, fsync, rename.
/// A crash leaves either the old file or the new one, never half of either.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_via_temp(path, bytes, |tmp| std::fs::rename(tmp, path))
}

/// Like [`write_atomic`], but never replaces an existing file: if `path` exists when the
/// snapshot is put in place, it fails with `AlreadyExists` and leaves both files untouched.
/// `capture` without `--force` needs this because the file can appear while the server is being
/// listed, after the early existence check.
pub fn write_atomic_new(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_via_temp(path, bytes, |tmp| {
        // link(2) never replaces its target, so "exists" is decided atomically.
        match std::fs::hard_link(tmp, path) {
            Ok(()) => {
                let _ = std::fs::remove_file(tmp);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(e),
            // A filesystem without hard links: the best that remains is check, then rename.
            Err(_) if path.symlink_metadata().is_err() => std::fs::rename(tmp, path),
            Err(_) => Err(std::io::ErrorKind::AlreadyExists.into()),
        }
    })
}

fn write_via_temp(
    path: &Path,
    bytes: &[u8],
    finish: impl FnOnce(&Path) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        finish(&tmp)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Serializes a snapshot for writing: pretty JSON (member order kept) and a final newline. The
/// digest never depends on this layout; it is computed over the canonical form.
pub fn to_pretty(doc: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec_pretty(doc).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// An instant as the snapshot writes it (`reviewedAt`, `capturedAt`, `expiresAt`): RFC 3339 in
/// UTC with whole seconds, as the seed's examples write instants.
pub fn rfc3339(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(reviews: Value) -> Manifest {
        Manifest::new(json!({
            "profile": PROFILE,
            "protocolVersion": "2025-11-25",
            "capturedAt": "2026-11-01T00:00:00Z",
            "expiresAt": "2026-11-08T00:00:00Z",
            "servers": {"s": {
                "serverInfo": {"name": "x", "version": "1"},
                "toolPages": [{"tools": [
                    {"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}, "opts": {"type": "object", "properties": {"a": {}, "b": {}}}}}},
                    {"name": "noargs", "inputSchema": {"type": "object"}}
                ]}],
                "reviews": reviews
            }}
        }))
    }

    fn good_review(channels: Value) -> Value {
        json!({"reviewer": "r@example.test", "reviewedAt": "2026-11-01T01:00:00Z",
               "assertions": {"headless": true, "independentCalls": true, "modelBacked": false,
                              "sideEffects": [], "concurrency": "safe", "referenceBasedIO": true},
               "inputChannels": channels})
    }

    fn check(reviews: Value, now: &str) -> Vec<String> {
        let now: Timestamp = now.parse().unwrap();
        validate(&doc(reviews), now, &Acceptance::default())
            .iter()
            .map(|p| p.to_string())
            .collect()
    }

    const NOW: &str = "2026-11-02T00:00:00Z";

    /// Every problem of `doc` at [`NOW`], as text.
    fn problems(doc: Value) -> Vec<String> {
        validate(
            &Manifest::new(doc),
            NOW.parse().unwrap(),
            &Acceptance::default(),
        )
        .iter()
        .map(|p| p.to_string())
        .collect()
    }

    #[test]
    fn complete_reviews_pass() {
        let r = json!({"echo": good_review(json!({"/text": "data", "/opts": "instruction"})), "noargs": good_review(json!({}))});
        assert_eq!(check(r, NOW), Vec::<String>::new());
        let nested = json!({"echo": good_review(json!({"/text": "data", "/opts/a": "data", "/opts/b": "authority"}))});
        assert_eq!(check(nested, NOW), Vec::<String>::new());
        for class in SIDE_EFFECT_CLASSES {
            let mut r = good_review(json!({}));
            r["sideEffect"] = json!(class);
            assert_eq!(
                check(json!({"noargs": r}), NOW),
                Vec::<String>::new(),
                "{class}"
            );
            assert_eq!(reviewed_side_effect(&r), Some(class));
        }
    }

    #[test]
    fn review_rules_of_the_seed() {
        let base = |f: &dyn Fn(&mut Value)| {
            let mut r = good_review(json!({"/text": "data", "/opts": "data"}));
            f(&mut r);
            check(json!({"echo": r}), NOW)
        };
        type Edit = Box<dyn Fn(&mut Value)>;
        let cases: Vec<(&str, Edit, &str)> = vec![
            (
                "headless false",
                Box::new(|r| r["assertions"]["headless"] = json!(false)),
                "/assertions/headless: headless is false",
            ),
            (
                "independentCalls missing",
                Box::new(|r| {
                    r["assertions"]
                        .as_object_mut()
                        .unwrap()
                        .remove("independentCalls");
                }),
                "/assertions/independentCalls: must be stated as true",
            ),
            (
                "modelBacked unknown",
                Box::new(|r| r["assertions"]["modelBacked"] = json!("unknown")),
                "/assertions/modelBacked: must be stated",
            ),
            (
                "sideEffects missing",
                Box::new(|r| {
                    r["assertions"]
                        .as_object_mut()
                        .unwrap()
                        .remove("sideEffects");
                }),
                "/assertions/sideEffects: must be an explicit list",
            ),
            (
                "concurrency unknown",
                Box::new(|r| r["assertions"]["concurrency"] = json!("unknown")),
                "/assertions/concurrency: must be \"safe\" or \"serialize\"",
            ),
            (
                "referenceBasedIO false",
                Box::new(|r| r["assertions"]["referenceBasedIO"] = json!(false)),
                "/assertions/referenceBasedIO",
            ),
            (
                "extra assertion",
                Box::new(|r| r["assertions"]["trustMe"] = json!(true)),
                "/assertions/trustMe: unknown assertion",
            ),
            (
                "no reviewer",
                Box::new(|r| r["reviewer"] = json!("")),
                "/reviewer: missing",
            ),
            (
                "bad class",
                Box::new(|r| r["inputChannels"]["/text"] = json!("code")),
                "the class must be",
            ),
            (
                "bad pointer",
                Box::new(|r| r["inputChannels"]["text"] = json!("data")),
                "is not an RFC 6901 pointer",
            ),
            (
                "unknown location",
                Box::new(|r| r["inputChannels"]["/text/x"] = json!("data")),
                "names no argument location",
            ),
            (
                "unknown operation class",
                Box::new(|r| r["sideEffect"] = json!("write")),
                "/sideEffect: the operation class must be",
            ),
            (
                "operation class not a string",
                Box::new(|r| r["sideEffect"] = json!(["read"])),
                "/sideEffect: the operation class must be",
            ),
            (
                "unclassified",
                Box::new(|r| {
                    r["inputChannels"].as_object_mut().unwrap().remove("/opts");
                }),
                "argument \"/opts/a\" is not classified",
            ),
        ];
        for (name, edit, want) in cases {
            let got = base(&*edit);
            assert!(got.iter().any(|p| p.contains(want)), "{name}: {got:?}");
        }
    }

    #[test]
    fn expiry_and_validity() {
        assert!(check(json!({}), "2026-11-09T00:00:00Z")
            .iter()
            .any(|p| p.contains("expired at")));
        let mut m = doc(json!({}));
        m.doc["expiresAt"] = json!("2027-06-01T00:00:00Z");
        let got = problems(m.doc);
        assert!(
            got.iter()
                .any(|p| p.contains("longer than the policy allows (30 days)")),
            "{got:?}"
        );
    }

    #[test]
    fn duplicate_names_and_orphan_reviews() {
        let mut m = doc(json!({"ghost": good_review(json!({}))}));
        m.doc["servers"]["s"]["toolPages"]
            .as_array_mut()
            .unwrap()
            .push(json!({"tools": [{"name": "echo", "inputSchema": {}}]}));
        let got = problems(m.doc);
        assert!(
            got.iter()
                .any(|p| p.contains("/toolPages/1/tools/0: tool \"echo\" occurs twice")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|p| p.contains("/reviews/ghost: a review of tool \"ghost\"")),
            "{got:?}"
        );
    }

    #[test]
    fn write_atomic_new_never_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        write_atomic_new(&path, b"first").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        let e = write_atomic_new(&path, b"second").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        write_atomic(&path, b"third").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"third");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["s.json"], "no temporary file is left");
    }

    #[test]
    fn pointers() {
        assert_eq!(pointer_tokens(""), Some(vec![]));
        assert_eq!(
            pointer_tokens("/a~1b/c~0d/"),
            Some(vec!["a/b".into(), "c~d".into(), "".into()])
        );
        assert_eq!(pointer_tokens("a"), None);
        assert_eq!(pointer_tokens("/a~2"), None);
    }
}
