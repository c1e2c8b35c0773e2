//! The snapshot subcommands: canonicalize, hash, capture, review, show, check, diff.
//!
//! Each returns `Ok(exit code)` or an error message; the binary prints messages on stderr.
//! Everything that writes a snapshot writes it atomically.
//!
//! Only the command line's layer calls them; nothing below `cli` imports this module.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use serde_json::{json, Map, Value};

use crate::process::capture::{self, Limits};
use crate::snapshot::canonical;
use crate::snapshot::manifest::{self, Acceptance, Manifest, PROFILE};
use crate::snapshot::strict;

pub type CmdResult = Result<u8, String>;

fn read_input(file: Option<&Path>) -> Result<Vec<u8>, String> {
    match file {
        None => read_stdin(),
        Some(p) if p == Path::new("-") => read_stdin(),
        Some(p) => std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display())),
    }
}

fn read_stdin() -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    std::io::stdin()
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read standard input: {e}"))?;
    Ok(buf)
}

fn name_of(file: Option<&Path>) -> String {
    file.filter(|p| *p != Path::new("-"))
        .map_or("standard input".to_string(), |p| p.display().to_string())
}

/// `mcpguard canonicalize [FILE|-]`
pub fn canonicalize(file: Option<&Path>) -> CmdResult {
    let bytes = read_input(file)?;
    let value = strict::parse_strict(&bytes).map_err(|e| format!("{}: {e}", name_of(file)))?;
    let mut out = std::io::stdout().lock();
    out.write_all(&canonical::canonical_bytes(&value))
        .and_then(|_| out.flush())
        .map_err(|e| format!("cannot write standard output: {e}"))?;
    Ok(0)
}

/// `mcpguard hash FILE`
pub fn hash(file: &Path) -> CmdResult {
    let bytes = read_input(Some(file))?;
    let value =
        strict::parse_strict(&bytes).map_err(|e| format!("{}: {e}", name_of(Some(file))))?;
    println!("{}", canonical::digest(&value));
    Ok(0)
}

/// Options of `mcpguard capture`.
pub struct CaptureArgs<'a> {
    pub server: &'a str,
    pub out: &'a Path,
    pub expires_in: Duration,
    /// The policy's `review.max_validity`: the longest `--expires-in` accepted.
    pub max_validity: jiff::SignedDuration,
    pub protocol_version: &'a str,
    pub force: bool,
    pub limits: Limits,
    pub timeout: Duration,
    pub max_message_bytes: usize,
    pub command: &'a [std::ffi::OsString],
    /// The pinned package the command runs (`cli::launch::for_capture`), recorded in the entry.
    pub package: Option<Value>,
    /// The sandbox the server runs in (`None`: the policy turns it off).
    pub sandbox: Option<std::sync::Arc<crate::sandbox::Prepared>>,
}

/// `mcpguard capture --server KEY --out FILE [--expires-in D] [--protocol-version V] -- CMD`
pub fn capture(args: CaptureArgs<'_>) -> CmdResult {
    let max_validity = args.max_validity;
    let expires_in = jiff::SignedDuration::try_from(args.expires_in)
        .map_err(|e| format!("--expires-in is out of range: {e}"))?;
    if expires_in > max_validity || expires_in.is_zero() {
        return Err(format!(
            "--expires-in must be more than zero and at most the policy's maximum validity ({} days): review.max_validity",
            max_validity.as_secs() / 86_400
        ));
    }
    if args.out.exists() && !args.force {
        return Err(format!(
            "{} exists; capture to a new file and compare with `mcpguard diff OLD NEW`, or pass --force to replace it",
            args.out.display()
        ));
    }
    let captured = capture::capture_command(
        args.command,
        args.protocol_version,
        &args.limits,
        args.max_message_bytes,
        args.timeout,
        args.sandbox.as_ref(),
    )
    .map_err(|e| format!("capture failed: {e}"))?;
    let now = Timestamp::now();
    let expires = now
        .checked_add(expires_in)
        .map_err(|e| format!("--expires-in is out of range: {e}"))?;
    let mut entry = captured.entry;
    if let (Some(package), Some(obj)) = (args.package, entry.as_object_mut()) {
        obj.insert("package".into(), package);
    }
    let mut servers = Map::new();
    servers.insert(args.server.to_string(), entry);
    let doc = json!({
        "profile": PROFILE,
        "protocolVersion": captured.protocol_version,
        "capturedAt": rfc3339(now),
        "expiresAt": rfc3339(expires),
        "servers": servers,
    });
    let bytes = manifest::to_pretty(&doc);
    let written = if args.force {
        manifest::write_atomic(args.out, &bytes)
    } else {
        // The file may have appeared while the server was being listed.
        manifest::write_atomic_new(args.out, &bytes)
    };
    written.map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => format!(
            "{} appeared during the capture and was left as it is; capture to a new file, or pass --force to replace it",
            args.out.display()
        ),
        _ => format!("cannot write {}: {e}", args.out.display()),
    })?;
    let m = Manifest::new(doc);
    let count = manifest::tools(
        args.server,
        m.server(args.server).map_err(|p| p.to_string())?,
    )
    .map(|t| t.len())
    .unwrap_or(0);
    eprintln!(
        "captured {count} tools of server {:?} (protocol {}) into {}; it expires at {}",
        args.server,
        captured.protocol_version,
        args.out.display(),
        rfc3339(expires)
    );
    // The labeller's signals per tool, without the passages: the reviewer reads them in `show`.
    let labelled = m
        .server(args.server)
        .map(|e| crate::snapshot::reviewview::label_lines(args.server, e, None))
        .unwrap_or_default();
    for line in &labelled {
        eprintln!("instruction-like text in {line}");
    }
    if !labelled.is_empty() {
        eprintln!(
            "{} field(s) carry instruction-like text; read them whole with `mcpguard show {} --server {} [--tool NAME]` before you review",
            labelled.len(),
            args.out.display(),
            args.server
        );
    }
    eprintln!(
        "next: review each tool you want served (`mcpguard show {0}`, then `mcpguard review {0} --server {1} --tool NAME ...`)",
        args.out.display(),
        args.server
    );
    println!("{}", m.digest);
    Ok(0)
}

pub use crate::snapshot::manifest::rfc3339;

/// One review as given on the command line or in a reviews file.
pub struct ReviewArgs<'a> {
    pub file: &'a Path,
    pub server: &'a str,
    pub tool: Option<&'a str>,
    pub reviewer: Option<&'a str>,
    pub asserts: &'a [String],
    pub channels: &'a [String],
    /// The operation class (`sideEffect`): read, create, update or delete.
    pub side_effect: Option<&'a str>,
    pub reviewed_at: Option<&'a str>,
    pub from: Option<&'a Path>,
    /// Sign each recorded review with this SSH private key (`--sign`).
    pub sign: Option<&'a Path>,
}

/// The server a review command is about: `--server KEY`, or the snapshot's only server.
pub fn review_server(file: &Path, server: Option<&str>) -> Result<String, String> {
    if let Some(s) = server {
        return Ok(s.to_string());
    }
    let m = manifest::load(file)?;
    let keys: Vec<String> = m
        .servers()
        .map_err(|p| p.to_string())?
        .keys()
        .cloned()
        .collect();
    match keys.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!(
            "{} has {} servers ({}): say which one with --server KEY",
            file.display(),
            keys.len(),
            keys.iter()
                .map(|k| crate::snapshot::diff::display_name(k))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// `mcpguard review FILE --server KEY (--tool NAME --reviewer ID --assert K=V... --channel P=C... | --from FILE)`
pub fn review(args: ReviewArgs<'_>) -> CmdResult {
    let mut m = manifest::load(args.file)?;
    let reviewed_at = match args.reviewed_at {
        Some(t) => rfc3339(
            t.parse::<Timestamp>()
                .map_err(|e| format!("--reviewed-at: not an RFC 3339 instant ({e})"))?,
        ),
        None => rfc3339(Timestamp::now()),
    };
    let mut new_reviews: Vec<(String, Value)> = Vec::new();
    if let Some(from) = args.from {
        let (reviews, file_reviewer) = super::template::read_reviews(from)?;
        if reviews.is_empty() {
            return Err(format!(
                "{}: no review in it: nothing was recorded (each tool's review is a table; `mcpguard review {} --template` writes one for every unreviewed tool)",
                from.display(),
                super::shell_quote(&args.file.display().to_string())
            ));
        }
        // A tool's own reviewer wins, then --reviewer, then the file's top-level reviewer.
        let reviewer = args.reviewer.map(str::to_string).or(file_reviewer);
        if reviewer.is_none() {
            let without: Vec<String> = reviews
                .iter()
                .filter(|(_, r)| {
                    r.get("reviewer")
                        .and_then(Value::as_str)
                        .is_none_or(|s| s.trim().is_empty())
                })
                .map(|(n, _)| crate::snapshot::diff::display_name(n))
                .collect();
            if !without.is_empty() {
                return Err(format!(
                    "{}: no reviewer for {}: nothing was recorded; set reviewer = \"you@example.com\" at the top of {} (or in each tool's table), or pass --reviewer ID",
                    from.display(),
                    without.join(", "),
                    from.display()
                ));
            }
        }
        for (tool, mut r) in reviews {
            if let Some(o) = r.as_object_mut() {
                if let Some(reviewer) = &reviewer {
                    o.entry("reviewer").or_insert_with(|| json!(reviewer));
                }
                o.entry("reviewedAt").or_insert_with(|| json!(reviewed_at));
            }
            new_reviews.push((tool, r));
        }
    } else {
        let tool = args
            .tool
            .ok_or("name the tool with --tool NAME (or give many reviews with --from FILE); run `mcpguard review FILE --server KEY` on a terminal to be asked about each unreviewed tool")?;
        let reviewer = args.reviewer.ok_or("say who reviewed with --reviewer ID")?;
        let mut assertions = Map::new();
        for a in args.asserts {
            let (k, v) = a
                .split_once('=')
                .ok_or_else(|| format!("--assert {a:?}: expected NAME=VALUE"))?;
            assertions.insert(k.to_string(), assertion_value(k, v)?);
        }
        let mut channels = Map::new();
        for c in args.channels {
            let (p, class) = c.rsplit_once('=').ok_or_else(|| {
                format!("--channel {c:?}: expected POINTER=CLASS, e.g. /path=data")
            })?;
            channels.insert(p.to_string(), json!(class));
        }
        let mut review = Map::new();
        review.insert("reviewer".into(), json!(reviewer));
        review.insert("reviewedAt".into(), json!(reviewed_at));
        if let Some(class) = args.side_effect {
            review.insert("sideEffect".into(), json!(class));
        }
        review.insert("assertions".into(), Value::Object(assertions));
        review.insert("inputChannels".into(), Value::Object(channels));
        new_reviews.push((tool.to_string(), Value::Object(review)));
    }

    let entry = m.server(args.server).map_err(|p| p.to_string())?.clone();
    let tools = manifest::tools(args.server, &entry).map_err(|ps| join_problems(&ps))?;
    let mut problems = Vec::new();
    for (name, review) in &new_reviews {
        let at = format!(
            "/servers/{}/reviews/{}",
            manifest::escape_token(args.server),
            manifest::escape_token(name)
        );
        match tools.iter().find(|(n, _, _)| n == name) {
            None => problems.push(format!(
                "tool {name:?} is not in the capture of server {:?}",
                args.server
            )),
            Some((_, _, tool)) => {
                let source = match args.from {
                    Some(f) => super::template::Source::File(f),
                    None => super::template::Source::Flags,
                };
                // Each problem names the flag or the field that answers it, not only where
                // in the snapshot it would land.
                for p in manifest::validate_review(&at, tool, review, &Acceptance::default()) {
                    let rel = p
                        .pointer
                        .strip_prefix(&at)
                        .and_then(manifest::pointer_tokens)
                        .unwrap_or_default();
                    let hint = super::template::hint(name, &rel, &p.kind, source);
                    problems.push(if hint.is_empty() {
                        p.to_string()
                    } else {
                        format!("{p} — {hint}")
                    });
                }
            }
        }
    }
    if !problems.is_empty() {
        return Err(format!(
            "{}: the review was not recorded:\n  {}",
            args.file.display(),
            problems.join("\n  ")
        ));
    }
    if let Some(key) = args.sign {
        super::signed::sign_reviews(&m, args.server, key, &mut new_reviews)?;
    }
    let reviews = m.doc["servers"][args.server]
        .as_object_mut()
        .map(|e| e.entry("reviews").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
        .ok_or("the server entry's reviews are not an object")?;
    for (name, r) in &new_reviews {
        reviews.insert(name.clone(), r.clone());
    }
    let m = Manifest::new(m.doc);
    manifest::write_atomic(args.file, &manifest::to_pretty(&m.doc))
        .map_err(|e| format!("cannot write {}: {e}", args.file.display()))?;
    let classless: Vec<String> = new_reviews
        .iter()
        .filter(|(_, r)| manifest::reviewed_side_effect(r).is_none())
        .map(|(n, _)| crate::snapshot::diff::display_name(n))
        .collect();
    if !classless.is_empty() {
        eprintln!(
            "note: no operation class recorded for {}: a write unless the policy classifies it (record one with --side-effect read|create|update|delete)",
            classless.join(", ")
        );
    }
    eprintln!(
        "recorded {} review(s) in {}; the snapshot's digest changed, pin the new one:",
        new_reviews.len(),
        args.file.display()
    );
    println!("{}", m.digest);
    Ok(0)
}

fn assertion_value(name: &str, v: &str) -> Result<Value, String> {
    let boolean = |v: &str| match v {
        "true" => Ok(json!(true)),
        "false" => Ok(json!(false)),
        _ => Err(format!("--assert {name}={v}: expected true or false")),
    };
    match name {
        "headless" | "independentCalls" | "modelBacked" | "referenceBasedIO" => boolean(v),
        "sideEffects" => Ok(Value::Array(
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| json!(s))
                .collect(),
        )),
        "concurrency" => match v {
            "safe" | "serialize" => Ok(json!(v)),
            _ => Err(format!(
                "--assert concurrency={v}: expected safe or serialize"
            )),
        },
        _ => Err(format!(
            "--assert {name}: unknown assertion (expected one of {})",
            manifest::ASSERTIONS.join(", ")
        )),
    }
}

fn join_problems(ps: &[manifest::Problem]) -> String {
    ps.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// Options of `mcpguard check`.
pub struct CheckArgs<'a> {
    pub file: &'a Path,
    pub sha256: Option<&'a str>,
    pub server: Option<&'a str>,
    pub command: &'a [std::ffi::OsString],
    pub timeout: Duration,
    pub max_message_bytes: usize,
    pub limits: Limits,
    pub acceptance: Acceptance,
    /// The policy's `review.allowed_signers`, when it names one.
    pub signers: Option<crate::snapshot::signature::AllowedSigners>,
    /// The sandbox a live check runs the server in (`None`: off, or no command).
    pub sandbox: Option<std::sync::Arc<crate::sandbox::Prepared>>,
    /// The package record of the install a runner command starts (`cli::launch::for_check`),
    /// compared with the snapshot's as part of the live entry.
    pub package: Option<Value>,
}

/// `mcpguard check FILE [--sha256 HEX] [--server KEY] [-- CMD]`: offline validation and, with a
/// command, comparison with the live server. Exit 0 only when everything holds.
pub fn check(args: CheckArgs<'_>) -> CmdResult {
    let m = manifest::load(args.file)?;
    let mut failures: Vec<String> = Vec::new();
    if let Some(want) = args.sha256 {
        if !want.eq_ignore_ascii_case(&m.digest) {
            failures.push(format!(
                "digest mismatch: the file hashes to {} but {want} was pinned",
                m.digest
            ));
        }
    }
    for p in manifest::validate(&m, Timestamp::now(), &args.acceptance) {
        failures.push(p.to_string());
    }
    for line in super::signed::review_lines(&m, args.signers.as_ref(), Timestamp::now()) {
        match line {
            Ok(note) => eprintln!("note: {note}"),
            // Without an allowed-signers file a bad signature is reported, not fatal: the
            // policy did not ask for signed reviews, and the gate would serve the tool.
            Err(bad) if args.signers.is_none() => eprintln!("warning: {bad}"),
            Err(bad) => failures.push(format!("{bad}; this tool would not be served")),
        }
    }
    let servers: Vec<String> = m
        .servers()
        .map(|s| s.keys().cloned().collect())
        .unwrap_or_default();
    for key in &servers {
        if let Ok(entry) = m.server(key) {
            if let Ok(tools) = manifest::tools(key, entry) {
                let unreviewed: Vec<&str> = tools
                    .iter()
                    .filter(|(n, _, _)| manifest::review_of(entry, n).is_none())
                    .map(|(n, _, _)| n.as_str())
                    .collect();
                if !unreviewed.is_empty() {
                    eprintln!(
                        "note: server {key:?}: {} of {} tools are not reviewed and will not be served: {}",
                        unreviewed.len(),
                        tools.len(),
                        unreviewed.join(", ")
                    );
                }
            }
        }
    }
    if !args.command.is_empty() {
        let key = match (args.server, servers.as_slice()) {
            (Some(k), _) => k.to_string(),
            (None, [only]) => only.clone(),
            (None, _) => {
                return Err(
                    "the snapshot has several servers: say which one runs with --server KEY".into(),
                )
            }
        };
        let entry = m.server(&key).map_err(|p| p.to_string())?;
        let version = m
            .protocol_version()
            .unwrap_or(crate::protocol::DEFAULT_PROTOCOL_VERSION);
        match capture::capture_command(
            args.command,
            version,
            &args.limits,
            args.max_message_bytes,
            args.timeout,
            args.sandbox.as_ref(),
        ) {
            Err(e) => failures.push(format!("live check of server {key:?} failed: {e}")),
            Ok(mut live) => {
                if let (Some(p), Some(o)) = (&args.package, live.entry.as_object_mut()) {
                    o.insert("package".into(), p.clone());
                }
                if live.protocol_version != version {
                    failures.push(format!(
                        "drift: the server negotiated protocol {} but {version} is pinned",
                        live.protocol_version
                    ));
                }
                let drift = live_drift(&key, entry, &live.entry);
                if drift.is_empty() {
                    eprintln!("live server {key:?} matches the snapshot");
                } else {
                    failures.push(format!(
                        "drift between the snapshot and the live server {key:?}:\n{drift}"
                    ));
                }
            }
        }
    }
    if failures.is_empty() {
        eprintln!("{}: ok (sha256 {})", args.file.display(), m.digest);
        println!("{}", m.digest);
        Ok(0)
    } else {
        Err(format!(
            "{}: check failed:\n  {}",
            args.file.display(),
            failures.join("\n  ")
        ))
    }
}

/// The drift between a pinned server entry and a live capture, as readable text (empty when
/// identical where it matters: serverInfo, instructions, capabilities and every Tool object).
pub fn live_drift(key: &str, pinned: &Value, live: &Value) -> String {
    let mut pinned = pinned.clone();
    let mut live = live.clone();
    // Reviews are not observed live; they are not drift.
    for v in [&mut pinned, &mut live] {
        // The install's content digest is one machine's; a live check compares the package's
        // identity (`cli::launch::without_content`), and the start checks the content.
        crate::cli::launch::without_content(v);
        if let Some(o) = v.as_object_mut() {
            o.remove("reviews");
        }
        // Cache directives of the modern era (ttlMs, cacheScope) describe a result, not a Tool
        // or the server: they are kept as captured but a change is not drift.
        crate::gate::modern::strip_cache_fields(v);
    }
    let wrap = |entry: Value| json!({"servers": {key: entry}});
    let changes = crate::snapshot::diff::diff_documents(&wrap(pinned), &wrap(live));
    crate::snapshot::diff::render(&changes)
}

/// `mcpguard show FILE [--server KEY] [--tool NAME] [--policy FILE]`
pub fn show(
    file: &Path,
    server: Option<&str>,
    tool: Option<&str>,
    signers: Option<&crate::snapshot::signature::AllowedSigners>,
) -> CmdResult {
    let m = manifest::load(file)?;
    let mut out = String::new();
    out.push_str(&format!(
        "snapshot {}\n  profile {}\n  protocolVersion {}\n  capturedAt {}\n  expiresAt {}\n  sha256 {}\n\n",
        file.display(),
        m.doc.get("profile").and_then(Value::as_str).unwrap_or("?"),
        m.protocol_version().unwrap_or("?"),
        m.doc.get("capturedAt").and_then(Value::as_str).unwrap_or("?"),
        m.doc.get("expiresAt").and_then(Value::as_str).unwrap_or("?"),
        m.digest
    ));
    let servers = m.servers().map_err(|p| p.to_string())?;
    let mut found_tool = false;
    for (key, entry) in servers {
        if server.is_some_and(|s| s != key) {
            continue;
        }
        match tool {
            None => out.push_str(&crate::snapshot::reviewview::render_server(key, entry)),
            Some(name) => {
                if let Ok(tools) = manifest::tools(key, entry) {
                    if let Some((_, _, t)) = tools.iter().find(|(n, _, _)| n == name) {
                        found_tool = true;
                        out.push_str(&format!("server {key}\n"));
                        out.push_str(&crate::snapshot::reviewview::render_tool(
                            t,
                            manifest::review_of(entry, name),
                        ));
                    }
                }
            }
        }
        // What the labeller found, and why, after the text it points into.
        let labelled = crate::snapshot::reviewview::label_lines(key, entry, tool);
        if !labelled.is_empty() {
            out.push_str(&format!(
                "\n!! instruction-like text (server {key}; labels, the signals that made them, byte ranges):\n"
            ));
            for line in labelled {
                out.push_str(&format!("  {line}\n"));
            }
        }
    }
    if let Some(name) = tool {
        if !found_tool {
            return Err(format!("no tool {name:?} in {}", file.display()));
        }
    }
    let mut signatures = String::new();
    for line in super::signed::review_lines(&m, signers, Timestamp::now()) {
        let text = line.unwrap_or_else(|bad| bad);
        let wanted = |field: &str, want: Option<&str>| {
            want.is_none_or(|w| text.contains(&format!("{field} {w:?}")))
        };
        if wanted("server", server) && wanted("tool", tool) {
            signatures.push_str(&format!("  {text}\n"));
        }
    }
    if !signatures.is_empty() {
        out.push_str(&format!("\nreview signatures:\n{signatures}"));
    }
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .map_err(|e| format!("cannot write standard output: {e}"))?;
    Ok(0)
}

/// `mcpguard diff OLD NEW`: exit 0 when identical, 1 when they differ.
pub fn diff(old: &Path, new: &Path) -> CmdResult {
    let a = manifest::load(old)?;
    let b = manifest::load(new)?;
    let changes = crate::snapshot::diff::diff_documents(&a.doc, &b.doc);
    if changes.is_empty() {
        eprintln!("no differences");
        return Ok(0);
    }
    print!("{}", crate::snapshot::diff::render(&changes));
    Ok(1)
}

/// `mcpguard policy check [FILE]`: exit 0 and the effective policy (the managed floor, then
/// FILE) with where each value came from, when valid.
pub fn policy_check(file: Option<&Path>) -> CmdResult {
    let layered = crate::policy::load_layered(file).map_err(|e| e.to_string())?;
    for w in layered.policy.warnings() {
        eprintln!("warning: {w}");
    }
    print!("{}", layered.effective_toml());
    let name = file.map_or("the built-in default policy".to_string(), |f| {
        f.display().to_string()
    });
    match &layered.floor {
        Some(floor) => eprintln!("{name}: ok over the managed floor {floor}"),
        None => eprintln!("{name}: ok"),
    }
    Ok(0)
}

/// `mcpguard audit verify FILE`: exit 0 when the whole chain holds.
pub fn audit_verify(file: &Path) -> CmdResult {
    let r = crate::audit::verify(file).map_err(|e| e.to_string())?;
    println!(
        "{}: {} records, chain intact; head {} (record it elsewhere to detect a cut tail)",
        file.display(),
        r.records,
        r.head
    );
    Ok(0)
}

/// `mcpguard show FILE --report`: the content-trust report of every reviewed tool.
pub fn trust_report(file: &Path, server: Option<&str>) -> CmdResult {
    let m = manifest::load(file)?;
    let servers = m.servers().map_err(|p| p.to_string())?;
    let mut out = String::new();
    for (key, entry) in servers {
        if server.is_none_or(|s| s == key) {
            out.push_str(&crate::snapshot::trust::report(key, entry));
        }
    }
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .map_err(|e| format!("cannot write standard output: {e}"))?;
    Ok(0)
}

/// The `--call NAME ARGUMENTS` pairs of `sandbox-check --learn`, each ARGUMENTS a JSON object.
pub fn learn_calls(raw: &[String]) -> Result<Vec<(String, Value)>, String> {
    raw.chunks(2)
        .map(|pair| {
            let [name, args] = pair else {
                return Err("--call takes a tool name and a JSON object".to_string());
            };
            let v: Value = serde_json::from_str(args)
                .map_err(|e| format!("--call {name}: {args:?} is not JSON ({e}); write a JSON object such as '{{\"path\": \"/tmp/x\"}}'"))?;
            if !v.is_object() {
                return Err(format!("--call {name}: the arguments must be a JSON object, not {args:?}"));
            }
            Ok((name.clone(), v))
        })
        .collect()
}

/// `sandbox-check --learn`: runs `command` as an MCP server under `prepared` (whose observer
/// notes every denial), initializes it, lists its tools, makes `calls`, and prints the grants
/// it was refused, folded to folders where that is sensible
/// (`sandbox::observe::learned_grants`). Exit status 0 when nothing was refused, 3 otherwise;
/// 1 when the session failed.
fn learn_grants(
    command: &[std::ffi::OsString],
    prepared: &std::sync::Arc<crate::sandbox::Prepared>,
    calls: &[(String, Value)],
) -> CmdResult {
    use crate::process::{capture, client::Client};
    use std::time::Duration;
    if prepared.observer.is_none() {
        return Err("sandbox-check --learn needs the sandbox's denial observer (Landlock, seccomp user notification, and sandbox.explain_denials = true)".into());
    }
    let mut client = Client::start(command, 16 << 20, Duration::from_secs(30), Some(prepared))
        .map_err(|e| e.to_string())?;
    let mut failed = None;
    match capture::capture(
        &mut client,
        crate::protocol::DEFAULT_PROTOCOL_VERSION,
        &capture::Limits::default(),
    ) {
        Ok(c) => {
            let tools: usize = c.entry["toolPages"]
                .as_array()
                .map(|pages| {
                    pages
                        .iter()
                        .map(|p| p["tools"].as_array().map_or(0, Vec::len))
                        .sum()
                })
                .unwrap_or(0);
            eprintln!("mcpguard: learn: the server initialized and listed {tools} tool(s)");
            for (name, args) in calls {
                match client.request(
                    "tools/call",
                    serde_json::json!({"name": name, "arguments": args}),
                ) {
                    Ok(r) => eprintln!(
                        "mcpguard: learn: called {name}: {}",
                        if r["isError"] == true {
                            "it answered with an error"
                        } else {
                            "it answered"
                        }
                    ),
                    Err(e) => eprintln!("mcpguard: learn: called {name}: {e}"),
                }
            }
        }
        Err(e) => failed = Some(e),
    }
    client.shutdown(Duration::from_secs(2));
    // The observer compares a call with the grants just after letting it go on.
    std::thread::sleep(Duration::from_millis(100));
    let grants = crate::sandbox::observe::learned_grants();
    let mut out = String::new();
    if grants.is_empty() {
        out.push_str("learn: the sandbox refused nothing in this run\n");
    } else {
        out.push_str("learn: grants this run needed (flags, for one run or a wrapped entry):\n");
        for (flag, value) in grants.flags() {
            out.push_str(&format!("  {flag} {value}\n"));
        }
        out.push_str("learn: the same as a policy:\n");
        out.push_str(&grants.toml());
    }
    std::io::stdout()
        .lock()
        .write_all(out.as_bytes())
        .map_err(|e| format!("cannot write standard output: {e}"))?;
    if let Some(e) = failed {
        return Err(format!(
            "sandbox-check --learn: the session with the server failed: {e}"
        ));
    }
    Ok(if grants.is_empty() { 0 } else { 3 })
}

/// `mcpguard sandbox-check [--policy FILE] [--sandbox-read P] [--sandbox-write P] [-- CMD...]`:
/// prints the kernel's Landlock ABI, what the profile asks and what this kernel enforces (text,
/// or one JSON object with `--log-format json`), then runs CMD under exactly that sandbox with
/// mcpguard's stdio. Exit status: CMD's (128 + signal when it was killed); without CMD, 1 when
/// `require` would refuse to start a server, else 0.
pub fn sandbox_check(
    policy: &crate::policy::Policy,
    extra: &crate::sandbox::Extra,
    command: &[std::ffi::OsString],
    json: bool,
    learn: Option<&[(String, Value)]>,
) -> CmdResult {
    use crate::policy::{PathContext, SandboxMode};
    use crate::process::child;
    use crate::sandbox::{self, Kernel};
    use std::os::unix::process::ExitStatusExt;

    let kernel = Kernel::probe();
    let mut out = std::io::stdout().lock();
    let run = |sandbox: Option<&std::sync::Arc<sandbox::Prepared>>| -> CmdResult {
        if let (Some(calls), Some(prepared)) = (learn, sandbox) {
            return learn_grants(command, prepared, calls);
        }
        let mut c =
            child::spawn_with(command, sandbox, child::Io::Inherit).map_err(|e| e.to_string())?;
        let status = c
            .wait()
            .map_err(|e| format!("waiting for the command: {e}"))?;
        if !status.success() && sandbox.is_some_and(|s| s.observer.is_some()) {
            // The command failed: what the sandbox denied it is said at the default level.
            // The observer compares a call with the grants just after letting it go on, so
            // the last one may still be on its way.
            std::thread::sleep(std::time::Duration::from_millis(100));
            child::name_held_denials();
        }
        Ok(match (status.code(), status.signal()) {
            (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
            (None, Some(sig)) => u8::try_from(128 + sig).unwrap_or(1),
            _ => 1,
        })
    };
    let write = |out: &mut std::io::StdoutLock<'_>, text: &str| {
        out.write_all(text.as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| format!("cannot write standard output: {e}"))
    };

    if policy.sandbox.mode == SandboxMode::Off {
        let text = if json {
            format!(
                "{}\n",
                json!({"mode": "off", "landlock_abi": kernel.landlock.version(), "seccomp": kernel.seccomp, "lines": []})
            )
        } else {
            format!(
                "kernel: Linux {}\nlandlock: ABI {}\nsandbox.mode: off\nverdict: no sandbox; the command runs unconfined, with your whole environment\n",
                kernel.release,
                kernel.landlock.version()
            )
        };
        write(&mut out, &text)?;
        drop(out);
        return if command.is_empty() { Ok(0) } else { run(None) };
    }

    let program = if command.is_empty() {
        None
    } else {
        match child::resolve_program(command) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("mcpguard: error: {e}");
                return Ok(u8::try_from(e.exit_code).unwrap_or(1));
            }
        }
    };
    let tmp = sandbox::PrivateTmp::create()
        .map_err(|e| format!("cannot create the private temporary directory: {e}"))?;
    let ctx = PathContext::from_process(Some(tmp.path().to_path_buf()));
    let env: Vec<_> = std::env::vars_os().collect();
    let args = command.get(1..).unwrap_or_default();
    let req = sandbox::resolve(&sandbox::Inputs {
        profile: &policy.sandbox,
        program: program.as_deref(),
        args,
        extra,
        ctx: &ctx,
        env: &env,
    })?;
    let report = sandbox::plan(&req, &kernel);
    let text = if json {
        format!(
            "{}\n",
            serde_json::to_string(&report).map_err(|e| e.to_string())?
        )
    } else {
        report.text()
    };
    write(&mut out, &text)?;
    drop(out);
    if program.is_none() {
        let refuses = policy.sandbox.mode == SandboxMode::Require && !report.dropped().is_empty();
        return Ok(u8::from(refuses));
    }
    let prepared = match sandbox::prepare(req, &kernel) {
        Ok(p) => std::sync::Arc::new(p),
        Err(e) => {
            eprintln!("mcpguard: error: refusing to run the command: {}", e.0);
            return Ok(1);
        }
    };
    let code = run(Some(&prepared));
    drop(tmp);
    code
}
