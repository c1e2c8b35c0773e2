//! The interactive review: on a terminal, `mcpguard review FILE --server KEY` (no `--tool`) walks
//! every unreviewed tool, and `mcpguard update` walks the changed and new ones. For each tool it
//! shows the reviewer's view (every field the model will see, hidden characters visible; for an
//! update, the triage first), then asks each question with a default that Enter accepts: the
//! operation class (read / create / update / delete), the six assertions, and each argument's
//! input channel (`data` by default; `authority` proposed for names such as path, url, command,
//! recipient or account). In an update the defaults are the tool's previous review.
//!
//! The defaults are proposals, never decisions: the reviewer answers every question, and a
//! review is recorded only after the reviewer confirms it and it passes the same validation as
//! `mcpguard review` (`manifest::validate_review`). Each recorded review is written at once
//! (atomically), so stopping half-way keeps what was answered. Prompts go to stderr; stdout
//! carries only the final digest.

use std::io::{BufRead, Write};
use std::path::Path;

use jiff::Timestamp;
use serde_json::{json, Map, Value};

use crate::snapshot::diff::triage::{self, Triage};
use crate::snapshot::manifest::{self, Acceptance, Manifest, SIDE_EFFECT_CLASSES};

use super::template::propose_channel;

/// What to walk.
pub struct Walk<'a> {
    pub file: &'a Path,
    pub server: &'a str,
    /// The tools to ask about, in this order.
    pub tools: &'a [String],
    pub reviewer: Option<&'a str>,
    /// The old server entry of an update, whose reviews give the defaults.
    pub previous: Option<&'a Value>,
    /// The update's triage, shown before each tool.
    pub triage: Option<&'a Triage>,
}

/// Walks the tools on this process's terminal (stdin for answers, stderr for everything else);
/// returns the snapshot's digest afterwards.
pub fn walk(w: &Walk<'_>) -> Result<String, String> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut output = std::io::stderr().lock();
    walk_with(w, &mut input, &mut output)
}

/// `mcpguard review FILE --server KEY [--tool NAME]` on a terminal: every unreviewed tool of the
/// server, or the one tool named (reviewed again, its current review giving the defaults).
pub fn review_unreviewed(
    file: &Path,
    server: &str,
    tool: Option<&str>,
    reviewer: Option<&str>,
) -> Result<u8, String> {
    let m = manifest::load(file)?;
    let entry = m.server(server).map_err(|p| p.to_string())?.clone();
    let tools = manifest::tools(server, &entry).map_err(|ps| {
        ps.iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("\n  ")
    })?;
    if let Some(name) = tool {
        if !tools.iter().any(|(n, _, _)| n == name) {
            return Err(format!(
                "tool {name:?} is not in the capture of server {server:?}"
            ));
        }
        let digest = walk(&Walk {
            file,
            server,
            tools: &[name.to_string()],
            reviewer,
            previous: Some(&entry),
            triage: None,
        })?;
        println!("{digest}");
        return Ok(0);
    }
    let unreviewed: Vec<String> = tools
        .into_iter()
        .filter(|(n, _, _)| manifest::review_of(&entry, n).is_none())
        .map(|(n, _, _)| n)
        .collect();
    if unreviewed.is_empty() {
        eprintln!(
            "every tool of server {server:?} in {} is reviewed",
            file.display()
        );
        println!("{}", m.digest);
        return Ok(0);
    }
    let digest = walk(&Walk {
        file,
        server,
        tools: &unreviewed,
        reviewer,
        previous: None,
        triage: None,
    })?;
    println!("{digest}");
    Ok(0)
}

/// An answer source and a place for questions; `None` from `ask` is the end of input.
struct Prompt<'a, R: BufRead, W: Write> {
    input: &'a mut R,
    output: &'a mut W,
}

impl<R: BufRead, W: Write> Prompt<'_, R, W> {
    fn say(&mut self, text: &str) {
        let _ = self.output.write_all(text.as_bytes());
        let _ = self.output.flush();
    }

    /// Asks `question` until `parse` accepts the answer (Enter gives `default`).
    fn ask<T>(
        &mut self,
        question: &str,
        default: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Option<T> {
        loop {
            self.say(&format!("{question} [{default}]: "));
            let mut line = String::new();
            match self.input.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    self.say("\n");
                    return None;
                }
                Ok(_) => {}
            }
            let answer = line.trim();
            let answer = if answer.is_empty() { default } else { answer };
            match parse(answer) {
                Some(v) => return Some(v),
                None => self.say(&format!("  not understood: {answer:?}\n")),
            }
        }
    }
}

/// Why a walk stopped early.
enum Stop {
    /// The reviewer typed q, or the input ended.
    Quit,
}

/// The walk, over any input and output (the tests drive it without a terminal).
fn walk_with<R: BufRead, W: Write>(
    w: &Walk<'_>,
    input: &mut R,
    output: &mut W,
) -> Result<String, String> {
    let mut p = Prompt { input, output };
    let mut m = manifest::load(w.file)?;
    let previous_reviewer = w
        .previous
        .and_then(|e| e.get("reviews"))
        .and_then(Value::as_object)
        .and_then(|r| r.values().find_map(|r| r.get("reviewer")?.as_str()))
        .map(str::to_string);
    let reviewer = match w.reviewer {
        Some(r) => r.to_string(),
        None => {
            let default = previous_reviewer
                .or_else(|| std::env::var("USER").ok())
                .unwrap_or_default();
            let answer = p.ask(
                "who is reviewing (an e-mail address or another stable identity)",
                &default,
                |a| (!a.trim().is_empty()).then(|| a.trim().to_string()),
            );
            match answer {
                Some(r) => r,
                None => return Ok(m.digest),
            }
        }
    };
    let total = w.tools.len();
    let mut recorded = 0;
    for (i, name) in w.tools.iter().enumerate() {
        // Tool names come from the server: shown quoted, hidden characters visible.
        let shown = crate::snapshot::diff::display_name(name);
        let entry = m.server(w.server).map_err(|e| e.to_string())?.clone();
        let tools = manifest::tools(w.server, &entry).map_err(|ps| {
            ps.iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        })?;
        // The labeller reads a description with the catalogue's names: an order to call
        // another of its tools is a structural signal.
        let catalogue =
            crate::wire::injection::Context::new(tools.iter().map(|(n, _, _)| n.as_str()))
                .answering(name);
        let Some((_, _, tool)) = tools.into_iter().find(|(n, _, _)| n == name) else {
            continue;
        };
        p.say(&format!(
            "\n======== [{}/{total}] tool {} ========\n",
            i + 1,
            crate::snapshot::diff::display_name(name)
        ));
        if let Some(t) = w
            .triage
            .and_then(|t| t.tools.iter().find(|x| &x.name == name))
        {
            let one = Triage {
                server: Vec::new(),
                tools: vec![t.clone()],
            };
            let text = triage::render(w.server, &one);
            // The first line names the server; the rest is this tool's part.
            p.say("what changed:\n");
            for line in text.lines().skip(1) {
                p.say(&format!("{line}\n"));
            }
        }
        p.say(&crate::snapshot::reviewview::render_tool(&tool, None));
        // The labeller only points at passages to read twice; no label never means safe.
        for field in ["title", "description"] {
            let text = tool.get(field).and_then(Value::as_str).unwrap_or_default();
            let found = crate::wire::injection::findings_in(text, &catalogue);
            if !found.is_empty() {
                let list: Vec<String> = found
                    .iter()
                    .map(|f| {
                        let why = if f.signals.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", f.signals.join(" + "))
                        };
                        format!("{} \u{201c}{}\u{201d}{why}", f.label, f.evidence)
                    })
                    .collect();
                p.say(&format!(
                    "!! instruction-like text in the {field}: {}\n",
                    list.join(", ")
                ));
            }
        }
        let previous = w
            .previous
            .and_then(|e| manifest::review_of(e, name))
            .cloned();
        if previous.is_some() {
            p.say("(the defaults below are your previous review of this tool)\n");
        }
        let go = p.ask(
            &format!(
                "review {} now? y = yes, n = leave it unreviewed, q = stop",
                crate::snapshot::diff::display_name(name)
            ),
            "y",
            |a| match a {
                "y" | "yes" => Some(Some(true)),
                "n" | "no" | "s" | "skip" => Some(Some(false)),
                "q" | "quit" => Some(None),
                _ => None,
            },
        );
        match go {
            None | Some(None) => break,
            Some(Some(false)) => {
                p.say(&format!("left {shown} unreviewed: it is not served\n"));
                continue;
            }
            Some(Some(true)) => {}
        }
        let review = match ask_review(&mut p, name, &tool, previous.as_ref(), &reviewer) {
            Ok(Some(r)) => r,
            Ok(None) => {
                p.say(&format!("left {shown} unreviewed: it is not served\n"));
                continue;
            }
            Err(Stop::Quit) => break,
        };
        let at = format!(
            "/servers/{}/reviews/{}",
            manifest::escape_token(w.server),
            manifest::escape_token(name)
        );
        let problems = manifest::validate_review(&at, &tool, &review, &Acceptance::default());
        if !problems.is_empty() {
            let list: Vec<String> = problems.iter().map(|x| x.to_string()).collect();
            p.say(&format!(
                "the review of {shown} was not recorded:\n  {}\n",
                list.join("\n  ")
            ));
            continue;
        }
        let reviews = m.doc["servers"][w.server]
            .as_object_mut()
            .map(|e| e.entry("reviews").or_insert_with(|| json!({})))
            .and_then(Value::as_object_mut)
            .ok_or("the server entry's reviews are not an object")?;
        reviews.insert(name.clone(), review);
        m = Manifest::new(m.doc);
        manifest::write_atomic(w.file, &manifest::to_pretty(&m.doc))
            .map_err(|e| format!("cannot write {}: {e}", w.file.display()))?;
        recorded += 1;
        p.say(&format!(
            "recorded the review of {shown} (digest {})\n",
            m.digest
        ));
    }
    p.say(&format!(
        "{recorded} of {total} tool(s) reviewed; the snapshot's digest is {}\n",
        m.digest
    ));
    Ok(m.digest)
}

/// Asks every question about one tool; `Ok(None)` when the reviewer declines to record it.
fn ask_review<R: BufRead, W: Write>(
    p: &mut Prompt<'_, R, W>,
    name: &str,
    tool: &Value,
    previous: Option<&Value>,
    reviewer: &str,
) -> Result<Option<Value>, Stop> {
    let (class_default, why) = propose_class(name, tool, previous);
    p.say(&format!("operation class: {why}\n"));
    let class = p
        .ask(
            "  operation class (read, create, update, delete)",
            &class_default,
            |a| {
                SIDE_EFFECT_CLASSES
                    .iter()
                    .find(|c| **c == a || (a.len() == 1 && c.starts_with(a)))
                    .map(|c| c.to_string())
            },
        )
        .ok_or(Stop::Quit)?;
    let prev_assert = |k: &str| previous.and_then(|r| r.pointer(&format!("/assertions/{k}")));
    let bool_default = |k: &str, d: bool| -> String {
        prev_assert(k)
            .and_then(Value::as_bool)
            .unwrap_or(d)
            .to_string()
    };
    let boolean = |a: &str| match a {
        "y" | "yes" | "t" | "true" => Some(true),
        "n" | "no" | "f" | "false" => Some(false),
        _ => None,
    };
    let mut assertions = Map::new();
    p.say("assertions (the reviewer's word; see mcpguard-manifest(5)):\n");
    for (key, question, default) in [
        ("headless", "headless: the call needs no interface and no person at the time of the call (must be true)", true),
        ("independentCalls", "independentCalls: a call's meaning does not depend on earlier calls, a session or a handle (must be true)", true),
        ("modelBacked", "modelBacked: the tool itself runs a model", false),
    ] {
        let v = p
            .ask(&format!("  {question}"), &bool_default(key, default), boolean)
            .ok_or(Stop::Quit)?;
        assertions.insert(key.into(), json!(v));
    }
    let effects_default = match prev_assert("sideEffects").and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(","),
        None if class == "read" => String::new(),
        None => class.clone(),
    };
    let effects = p
        .ask(
            "  sideEffects: the side-effect classes, comma-separated, `none` for none",
            if effects_default.is_empty() {
                "none"
            } else {
                &effects_default
            },
            |a| {
                let list: Vec<Value> = if a == "none" || a == "-" {
                    Vec::new()
                } else {
                    a.split(',')
                        .map(str::trim)
                        .filter(|s| !s.is_empty())
                        .map(|s| json!(s))
                        .collect()
                };
                Some(Value::Array(list))
            },
        )
        .ok_or(Stop::Quit)?;
    assertions.insert("sideEffects".into(), effects);
    let concurrency_default = prev_assert("concurrency")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| if class == "read" { "safe" } else { "serialize" }.to_string());
    let concurrency = p
        .ask(
            "  concurrency: safe, or serialize when calls must not overlap",
            &concurrency_default,
            |a| match a {
                "safe" => Some("safe"),
                "serialize" | "ser" | "serial" => Some("serialize"),
                _ => None,
            },
        )
        .ok_or(Stop::Quit)?;
    assertions.insert("concurrency".into(), json!(concurrency));
    let v = p
        .ask(
            "  referenceBasedIO: inputs and outputs are JSON values or addressable references, not local handles (must be true)",
            &bool_default("referenceBasedIO", true),
            boolean,
        )
        .ok_or(Stop::Quit)?;
    assertions.insert("referenceBasedIO".into(), json!(v));

    let schema = tool.get("inputSchema").cloned().unwrap_or(Value::Null);
    let locations = manifest::argument_locations(&schema);
    let mut channels = Map::new();
    if !locations.is_empty() {
        p.say("input channels: what each argument is to the tool (data, instruction, authority: the model chooses on whose authority or on what target the tool acts)\n");
    }
    for pointer in locations {
        let (default, why) = propose_channel(&pointer, previous);
        let class = p
            .ask(
                &format!(
                    "  {} ({why})",
                    crate::snapshot::diff::reveal(&pointer, crate::wire::sanitize::Clean::LINE)
                ),
                default,
                |a| {
                    manifest::CHANNEL_CLASSES
                        .iter()
                        .find(|c| **c == a || (a.len() == 1 && c.starts_with(a)))
                        .map(|c| c.to_string())
                },
            )
            .ok_or(Stop::Quit)?;
        channels.insert(pointer, json!(class));
    }

    let mut review = Map::new();
    review.insert("reviewer".into(), json!(reviewer));
    review.insert(
        "reviewedAt".into(),
        json!(manifest::rfc3339(Timestamp::now())),
    );
    review.insert("sideEffect".into(), json!(class));
    review.insert("assertions".into(), Value::Object(assertions));
    review.insert("inputChannels".into(), Value::Object(channels));
    let review = Value::Object(review);
    p.say(&format!(
        "the review of {}: {}\n",
        crate::snapshot::diff::display_name(name),
        crate::snapshot::diff::visible_json(&review)
    ));
    let record = p
        .ask("  record it? y/n", "y", |a| match a {
            "y" | "yes" => Some(true),
            "n" | "no" => Some(false),
            _ => None,
        })
        .ok_or(Stop::Quit)?;
    Ok(record.then_some(review))
}

/// The proposed operation class and why: the previous review's, else the one the review template
/// proposes ([`super::template::propose_class`]); where the template proposes none (the name and
/// the server's claims conflict), the stricter class of the conflict, with the conflict said.
fn propose_class(name: &str, tool: &Value, previous: Option<&Value>) -> (String, String) {
    if let Some(c) = previous.and_then(manifest::reviewed_side_effect) {
        return (c.to_string(), "your previous review said so".into());
    }
    let p = super::template::propose_class(name, tool);
    let mut why = match p.class {
        Some(_) => format!("proposed {}", p.why),
        None => format!("nothing proposed ({}), {} offered", p.why, p.default),
    };
    if let Some(flag) = &p.flag {
        why.push_str(&format!("; !! {flag}"));
    }
    why.push_str("; you decide");
    (p.default.to_string(), why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::template::words;

    #[test]
    fn proposals() {
        let t = json!({"annotations": {"readOnlyHint": true}});
        assert_eq!(propose_class("get_file", &json!({}), None).0, "read");
        assert_eq!(propose_class("listNotes", &json!({}), None).0, "read");
        assert_eq!(
            propose_class(
                "get_file",
                &json!({"annotations": {"readOnlyHint": false}}),
                None
            )
            .0,
            "update"
        );
        assert_eq!(propose_class("delete_notes", &json!({}), None).0, "delete");
        assert_eq!(propose_class("echo", &t, None).0, "read");
        assert_eq!(propose_class("frobnicate", &json!({}), None).0, "update");
        // A write-named tool's readOnlyHint never makes the proposal a read.
        let (class, why) = propose_class("write_file", &t, None);
        assert_eq!(class, "update");
        assert!(why.contains("CONFLICT"), "{why}");
        let prev = json!({"sideEffect": "create", "inputChannels": {"/opts": "authority", "/path": "data"}});
        assert_eq!(
            propose_class("get_file", &json!({}), Some(&prev)).0,
            "create"
        );
        // The terminal review offers what the template proposes, for every mix of a name's verb
        // and the server's hints; where the template proposes nothing, the stricter class.
        let hints = [
            json!({}),
            json!({"annotations": {"readOnlyHint": true}}),
            json!({"annotations": {"readOnlyHint": false}}),
            json!({"annotations": {"destructiveHint": true}}),
            json!({"annotations": {"destructiveHint": false}}),
            json!({"annotations": {"readOnlyHint": true, "destructiveHint": true}}),
            json!({"annotations": {"readOnlyHint": false, "destructiveHint": true}}),
        ];
        for name in [
            "get_note",
            "add_note",
            "write_note",
            "delete_note",
            "frobnicate",
        ] {
            for tool in &hints {
                let template = super::super::template::propose_class(name, tool);
                let (class, why) = propose_class(name, tool, None);
                assert_eq!(class, template.default, "{name} {tool}: {why}");
                if let Some(c) = template.class {
                    assert_eq!(class, c, "{name} {tool}");
                } else {
                    assert!(why.contains("nothing proposed"), "{name} {tool}: {why}");
                }
            }
        }
        // The case the two used to disagree on: an update the server calls destructive.
        let destructive = json!({"annotations": {"readOnlyHint": false, "destructiveHint": true}});
        assert_eq!(propose_class("write_note", &destructive, None).0, "delete");
        assert_eq!(propose_channel("/filePath", None).0, "authority");
        assert_eq!(propose_channel("/recipient", None).0, "authority");
        assert_eq!(propose_channel("/body", None).0, "data");
        assert_eq!(propose_channel("/path", Some(&prev)).0, "data");
        assert_eq!(propose_channel("/opts/mode", Some(&prev)).0, "authority");
        assert_eq!(words("readTextFile"), ["read", "text", "file"]);
        assert_eq!(words("gen_0001"), ["gen", "0001"]);
    }

    /// Enter everywhere records the proposals; answers override them; q stops and keeps what
    /// was recorded.
    #[test]
    fn a_walk_over_typed_answers() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.json");
        let doc = json!({"profile": manifest::PROFILE, "protocolVersion": "2025-11-25",
            "capturedAt": "2026-11-01T00:00:00Z", "expiresAt": "2026-11-08T00:00:00Z",
            "servers": {"s": {"serverInfo": {"name": "x", "version": "1"}, "toolPages": [{"tools": [
                {"name": "get_note", "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}, "url": {"type": "string"}}}},
                {"name": "send_mail", "inputSchema": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}}}},
                {"name": "third", "inputSchema": {"type": "object"}}
            ]}], "reviews": {}}}});
        std::fs::write(&file, manifest::to_pretty(&doc)).unwrap();
        let tools = ["get_note".to_string(), "send_mail".into(), "third".into()];
        let w = Walk {
            file: &file,
            server: "s",
            tools: &tools,
            reviewer: Some("r@example.test"),
            previous: None,
            triage: None,
        };
        // get_note: all defaults (10 Enters: go, class, 3 booleans, effects, concurrency,
        // referenceBasedIO, 2 channels, record = 11). send_mail: class c, /body as instruction.
        // third: q.
        let answers = "\n\n\n\n\n\n\n\n\n\n\n\
                       y\nc\n\n\n\n\n\n\n\ni\n\n\
                       q\n";
        let mut out = Vec::new();
        let digest = walk_with(&w, &mut answers.as_bytes(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let m = manifest::load(&file).unwrap();
        assert_eq!(m.digest, digest);
        let reviews = &m.doc["servers"]["s"]["reviews"];
        assert_eq!(reviews["get_note"]["sideEffect"], "read", "{text}");
        assert_eq!(
            reviews["get_note"]["inputChannels"],
            json!({"/id": "data", "/url": "authority"})
        );
        assert_eq!(reviews["get_note"]["assertions"]["concurrency"], "safe");
        assert_eq!(reviews["send_mail"]["sideEffect"], "create");
        assert_eq!(
            reviews["send_mail"]["assertions"]["sideEffects"],
            json!(["create"])
        );
        assert_eq!(
            reviews["send_mail"]["assertions"]["concurrency"],
            "serialize"
        );
        assert_eq!(
            reviews["send_mail"]["inputChannels"],
            json!({"/to": "authority", "/body": "instruction"})
        );
        assert!(reviews.get("third").is_none());
        assert!(text.contains("2 of 3 tool(s) reviewed"), "{text}");
        assert!(
            text.contains("!! NOT REVIEWED"),
            "the reviewer's view is shown: {text}"
        );
    }
}
