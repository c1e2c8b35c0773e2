//! The pin: the reviewed snapshot made ready for the message path, loaded and verified before the
//! server is spawned (digest, strict parse, expiry, reviews), with each reviewed tool's exact
//! object, canonical bytes and compiled schemas.
//!
//! Start-up cost: the snapshot is parsed, canonicalized and hashed once; validation borrows from
//! the parsed document, and the pin then *moves* each reviewed Tool object and its review out of
//! it (no copy of the catalogue). A tool's canonical bytes, needed only when the tool is called,
//! are computed on its first call. Its schemas are still compiled before the server is spawned,
//! never at the first call: compiling is the only complete check that a schema can be enforced
//! (a remote `$ref`, a bad pattern, an unknown draft), and a snapshot whose schema cannot be
//! enforced must be refused before the server runs. `load_pin` returns a [`Loaded`] pin, which
//! only its `compile` turns into a `Pin`, so that the policy and the signature check can take
//! tools away before anything is compiled for them.
//!
//! Pure data built once; the state machine that applies it is `gate::session`. Nothing here
//! performs IO except `load_pin` reading the snapshot file.

use std::path::Path;

use jiff::Timestamp;
use serde_json::Value;

use crate::gate::schema::{self, CompiledSchema};
use crate::snapshot::canonical;
use crate::snapshot::manifest::{self, Acceptance, Manifest};

/// One reviewed tool, ready for the message path: its exact object and canonical bytes for the
/// drift comparison, and its compiled schemas.
pub struct ReviewedTool {
    pub name: String,
    pub tool: Value,
    /// The RFC 8785 form of `tool`, made on the first call that compares against it.
    canonical: std::sync::OnceLock<Vec<u8>>,
    pub review: Value,
    pub input: Option<CompiledSchema>,
    pub output: Option<CompiledSchema>,
    /// The reviewer asserted `concurrency: serialize`.
    pub serialize: bool,
    /// `execution.taskSupport` is `required`: the tool cannot be called without tasks.
    pub requires_task: bool,
    /// The review maps some argument to the `authority` input channel, which makes every call a
    /// write that needs confirmation (SPEC §4), whatever the policy's classification says.
    pub authority: bool,
    /// The operation class the review records (`sideEffect`), if it records one.
    pub side_effect: Option<crate::policy::SideEffect>,
    /// Where the Tool object is in the snapshot (a JSON pointer), for the messages about it.
    pointer: String,
}

impl ReviewedTool {
    /// The RFC 8785 canonical bytes of the reviewed Tool object, computed once, on first use:
    /// start-up does not pay for tools that are never called.
    pub fn canonical(&self) -> &[u8] {
        self.canonical
            .get_or_init(|| canonical::canonical_bytes(&self.tool))
    }

    /// What the review says that bears on the policy's classification.
    pub fn reviewed(&self) -> crate::policy::Reviewed {
        crate::policy::Reviewed {
            side_effect: self.side_effect,
            authority: self.authority,
        }
    }
}

impl std::fmt::Debug for ReviewedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReviewedTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Everything the gate pins for one server.
#[derive(Debug)]
pub struct Pin {
    pub digest: String,
    pub server_key: String,
    pub protocol_version: String,
    pub server_info: Value,
    pub instructions: Option<Value>,
    /// Reviewed tools in snapshot order.
    pub tools: Vec<ReviewedTool>,
    /// Tools in the capture without a review (never served; named in diagnostics).
    pub unreviewed: Vec<String>,
    /// Reviewed tools the local policy refuses (never served).
    pub refused_by_policy: Vec<String>,
    /// Reviewed tools whose review's signature is not acceptable under `review.allowed_signers`
    /// (never served), each with the reason, which names the reviewer.
    pub refused_reviews: Vec<(String, String)>,
    /// What a 2026-07-28 snapshot pins beyond the above; `None` for a legacy snapshot.
    pub modern: Option<crate::gate::modern::ModernPin>,
    /// The server entry's `package` record (a pinned package runner), kept so that the launch
    /// checks the install against the verified bytes without reading the snapshot again.
    pub package: Option<Value>,
    /// The entry as a review's signature covers it (every member but `toolPages` and
    /// `reviews`: identity, package record, instructions, capabilities, discover record), for
    /// the signature check of `review.allowed_signers`.
    pub signed_entry: Value,
}

impl Pin {
    /// Removes the reviewed tools that the local policy refuses; returns why, per tool. The
    /// policy can only take tools away: nothing here can add one.
    pub fn apply_policy(
        &mut self,
        refusal: impl Fn(&ReviewedTool) -> Option<String>,
    ) -> Vec<String> {
        let mut reasons = Vec::new();
        let tools = std::mem::take(&mut self.tools);
        for t in tools {
            match refusal(&t) {
                Some(why) => {
                    reasons.push(why);
                    self.refused_by_policy.push(t.name);
                }
                None => self.tools.push(t),
            }
        }
        reasons
    }

    /// `[review] require_bounded_write_schemas`: removes every reviewed tool that `is_write`
    /// says is a write and whose reviewed `inputSchema` has a finding of the review view's
    /// schema aid (`reviewview::schema_findings`: a string without `maxLength`, an array
    /// without `maxItems`, an object open to unreviewed members, nesting deeper than the bound
    /// or recursive, an external or unresolved `$ref`, a position that accepts any value);
    /// returns why, per tool, naming each pointer and rule and the key. A call to such a tool
    /// is refused with the same reason. Like the policy, this can only take tools away.
    pub fn withhold_unbounded_writes(
        &mut self,
        is_write: impl Fn(&ReviewedTool) -> bool,
    ) -> Vec<String> {
        self.refuse_reviews(|_, t| {
            if !is_write(t) {
                return Ok(());
            }
            let schema = t.tool.get("inputSchema").unwrap_or(&Value::Null);
            let found = crate::snapshot::reviewview::schema_findings(schema);
            if found.is_empty() {
                return Ok(());
            }
            let listed: Vec<String> = found
                .iter()
                .map(|f| {
                    let at = if f.pointer.is_empty() { "(the schema itself)" } else { &f.pointer };
                    format!("inputSchema {at}: {}", f.rule)
                })
                .collect();
            Err(format!(
                "it is a write whose input schema is unbounded ({}), and the policy serves only bounded write tools ([review] require_bounded_write_schemas = true); bound the schema in the server and capture and review it again, or set require_bounded_write_schemas = false",
                listed.join(", ")
            ))
        })
    }

    /// Removes the reviewed tools whose review `check` does not accept (a signature that is
    /// missing, does not verify, or is by a key not allowed for the reviewer); returns why, per
    /// tool. Like the policy, this can only take tools away.
    pub fn refuse_reviews(
        &mut self,
        check: impl Fn(&Pin, &ReviewedTool) -> Result<(), String>,
    ) -> Vec<String> {
        let mut reasons = Vec::new();
        let tools = std::mem::take(&mut self.tools);
        let mut kept = Vec::new();
        for t in tools {
            match check(self, &t) {
                Err(why) => {
                    reasons.push(format!("tool {:?}: {why}", t.name));
                    self.refused_reviews.push((t.name, why));
                }
                Ok(()) => kept.push(t),
            }
        }
        self.tools = kept;
        reasons
    }

    pub fn tool(&self, name: &str) -> Option<&ReviewedTool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

/// Loads the snapshot, checks its digest against `sha256`, validates it at `now` and builds the
/// pin for `server_key`. Any failure is a message for stderr; the caller must not start the
/// server.
pub fn load_pin(
    path: &Path,
    sha256: &str,
    server_key: &str,
    now: Timestamp,
    acceptance: &Acceptance,
) -> Result<Loaded, String> {
    let m = manifest::load(path)?;
    if !sha256.eq_ignore_ascii_case(&m.digest) {
        return Err(format!(
            "{}: digest mismatch: the snapshot hashes to {} but the host configuration pins {sha256}; \
             if you reviewed a new snapshot, pin its digest (`mcpguard hash {}`)",
            path.display(),
            m.digest,
            path.display()
        ));
    }
    pin_without_schemas(m, server_key, now, acceptance)
        .map(|pin| Loaded {
            pin,
            path: path.display().to_string(),
        })
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// A verified pin whose schemas are not compiled yet: what [`load_pin`] returns. Only
/// [`Loaded::compile`] makes a [`Pin`] of it, so the gate cannot run with a tool whose schemas
/// were skipped. The proxy compiles once the policy and the signature check have taken their
/// tools away, while other threads prepare the sandbox and run the validator's one-time set-up
/// (1.3–2.4 ms, started at the beginning), and still before the server is spawned, so a schema
/// that cannot be enforced refuses the start. A tool taken away first is never served, so its
/// schemas are not compiled.
pub struct Loaded {
    pin: Pin,
    path: String,
}

impl Loaded {
    pub fn pin(&self) -> &Pin {
        &self.pin
    }

    /// For the steps that may take tools away before the compile (policy, signatures).
    pub fn pin_mut(&mut self) -> &mut Pin {
        &mut self.pin
    }

    /// Compiles every served tool's schemas; the error names the file, the tool and the schema.
    pub fn compile(mut self) -> Result<Pin, String> {
        compile_schemas(&mut self.pin).map_err(|e| format!("{}: {e}", self.path))?;
        Ok(self.pin)
    }
}

/// Compiles the input and output schema of every tool of `pin`.
fn compile_schemas(pin: &mut Pin) -> Result<(), String> {
    for t in &mut pin.tools {
        let compile = |field: &str| -> Result<Option<CompiledSchema>, String> {
            match t.tool.get(field) {
                None => Ok(None),
                Some(s) => schema::compile(s)
                    .map(Some)
                    .map_err(|e| format!("{}/{field} of tool {:?}: {e}", t.pointer, t.name)),
            }
        };
        let (input, output) = (compile("inputSchema")?, compile("outputSchema")?);
        t.input = input;
        t.output = output;
    }
    Ok(())
}

/// Builds the pin from a loaded manifest, its schemas compiled (split out for tests and for
/// `wrap`). The manifest is consumed: the reviewed Tool objects and reviews are moved out of it
/// into the pin.
pub fn pin_from_manifest(
    m: Manifest,
    server_key: &str,
    now: Timestamp,
    acceptance: &Acceptance,
) -> Result<Pin, String> {
    let mut pin = pin_without_schemas(m, server_key, now, acceptance)?;
    compile_schemas(&mut pin)?;
    Ok(pin)
}

/// Every check and move of [`pin_from_manifest`] but the schema compile.
fn pin_without_schemas(
    mut m: Manifest,
    server_key: &str,
    now: Timestamp,
    acceptance: &Acceptance,
) -> Result<Pin, String> {
    let problems = manifest::validate(&m, now, acceptance);
    if !problems.is_empty() {
        let list: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        return Err(format!(
            "the snapshot is not acceptable:\n  {}\n(fix the reviews with `mcpguard review`, or capture and review again)",
            list.join("\n  ")
        ));
    }
    let entry = m.server(server_key).map_err(|p| p.to_string())?;
    let protocol_version = m.protocol_version().unwrap_or_default().to_string();
    let modern = if crate::protocol::is_modern(&protocol_version) {
        Some(crate::gate::modern::ModernPin::from_entry(entry)?)
    } else if crate::protocol::LEGACY_VERSIONS.contains(&protocol_version.as_str()) {
        None
    } else {
        return Err(format!(
            "the snapshot pins protocol {protocol_version:?}; this gate speaks {} and {}",
            crate::protocol::LEGACY_VERSIONS.join(", "),
            crate::protocol::MODERN_VERSIONS.join(", ")
        ));
    };
    let all = manifest::tool_refs(server_key, entry).map_err(|ps| {
        ps.iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    // First every check that borrows the document, then the moves out of it.
    let mut reviewed = Vec::new();
    let mut unreviewed = Vec::new();
    for (name, pointer, tool) in all {
        let Some(review) = manifest::review_of(entry, name) else {
            unreviewed.push(name.to_string());
            continue;
        };
        let serialize = review
            .pointer("/assertions/concurrency")
            .and_then(Value::as_str)
            == Some("serialize");
        let requires_task = tool
            .pointer("/execution/taskSupport")
            .and_then(Value::as_str)
            == Some("required");
        let authority = review
            .get("inputChannels")
            .and_then(Value::as_object)
            .is_some_and(|c| c.values().any(|class| class == "authority"));
        // The validation above admits only the four classes, so nothing is lost here.
        let side_effect =
            manifest::reviewed_side_effect(review).and_then(crate::policy::SideEffect::parse);
        reviewed.push((
            pointer.clone(),
            ReviewedTool {
                authority,
                side_effect,
                canonical: std::sync::OnceLock::new(),
                name: name.to_string(),
                tool: Value::Null,
                review: Value::Null,
                input: None,
                output: None,
                serialize,
                requires_task,
                pointer,
            },
        ));
    }
    let server_info = entry.get("serverInfo").cloned().unwrap_or(Value::Null);
    let instructions = entry.get("instructions").cloned();
    let package = entry.get("package").cloned();
    let signed_entry = crate::snapshot::signature::signed_entry(entry);
    let reviews_at = format!(
        "/servers/{}/reviews",
        crate::snapshot::manifest::escape_token(server_key)
    );
    let mut tools = Vec::with_capacity(reviewed.len());
    for (pointer, mut t) in reviewed {
        // The pointers were read off this document just above, so both values are there; the
        // document is not used again after the moves.
        t.tool = m
            .doc
            .pointer_mut(&pointer)
            .map(Value::take)
            .unwrap_or(Value::Null);
        let review_at = format!(
            "{reviews_at}/{}",
            crate::snapshot::manifest::escape_token(&t.name)
        );
        t.review = m
            .doc
            .pointer_mut(&review_at)
            .map(Value::take)
            .unwrap_or(Value::Null);
        tools.push(t);
    }
    Ok(Pin {
        digest: m.digest,
        server_key: server_key.to_string(),
        protocol_version,
        server_info,
        instructions,
        tools,
        unreviewed,
        refused_by_policy: Vec::new(),
        refused_reviews: Vec::new(),
        modern,
        package,
        signed_entry,
    })
}
