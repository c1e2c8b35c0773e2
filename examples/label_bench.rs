//! The content checks of the proxy's result path, run directly over a corpus of
//! mcp-defense-bench 0.2.0 cases: how many ordinary results mcpguard would change, in seconds
//! instead of the half hour two process starts per case take through the bench's own harness.
//!
//!     cargo run --example label_bench -- DIR [DIR...]
//!
//! Each DIR is searched for the bench's case files (`*.json` with a `fixture`). For every
//! fixture that carries a tool result (`benign-tool-result`, `malicious-tool-result`,
//! `tool-call`), the result is built as the bench's fixture server sends it (its text blocks
//! only: that server drops `isError`), and checked as the proxy checks it, with the shipped
//! default policy (`Content::default()`): secret-shaped values redacted, instruction-like text
//! labelled with the call's context (the fixture's tool names, the tool that answered, the
//! call's argument values). A result either check would change is a false positive on the
//! benign corpus. Tool definitions (`*-tool-definition`, `definition-change`) are checked as the
//! proxy serves a reviewed tool (`Content::label_tool`: every description and title of the Tool
//! object, with the fixture's tool names and the tool itself as context): a labelled one is
//! served with a note, so on the benign corpus it is a false positive too. They are counted
//! apart from results. The arguments of every call (`tool-call`, `tool-call-sequence`) are
//! checked as the proxy checks them before dispatch: a value it refuses (a cloud metadata URL,
//! a secret-shaped value) or asks the person about whatever the tool's class (a credential
//! file, a download run as code: `Content::asked_argument`) counts as a changed call. A case's
//! `benignControl` is checked too (the dev corpus's matched controls).
//!
//! Prints one line per changed result or labelled description, then the totals. Reads the
//! corpus only; the held-out corpus is not vendored and must not be scored with this for
//! tuning.

use std::path::{Path, PathBuf};

use mcpguard::gate::content::{label_names, Content};
use mcpguard::wire::injection::Context;
use serde_json::{json, Value};

#[derive(Default)]
struct Totals {
    results: usize,
    changed: usize,
    descriptions: usize,
    labelled: usize,
    calls: usize,
    stopped: usize,
}

/// Checks one call's arguments as the proxy does before dispatch (see the module's comment).
fn check_call(content: &Content, id: &str, call: &Value, t: &mut Totals) {
    let tool = call["name"].as_str().unwrap_or_default();
    let arguments = &call["arguments"];
    t.calls += 1;
    if let Some(problem) = content.check_arguments(tool, arguments) {
        t.stopped += 1;
        println!("call refused: {id} (tool {tool:?}): {problem:?}");
    } else if let Some(asked) = content.asked_argument(arguments) {
        t.stopped += 1;
        println!(
            "call asked about: {id} (tool {tool:?}): argument {} ({}, {})",
            asked.pointer,
            asked.what,
            asked.kind.words().1
        );
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        eprintln!("label_bench: cannot read {}", dir.display());
        return;
    };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "json") {
            out.push(p);
        }
    }
}

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

fn check(content: &Content, id: &str, fx: &Value, t: &mut Totals) {
    let kind = fx["type"].as_str().unwrap_or_default();
    let name = |tool: &Value| tool["name"].as_str().unwrap_or_default().to_string();
    match kind {
        "benign-tool-result" | "malicious-tool-result" | "tool-call" => {
            if kind == "tool-call" {
                check_call(content, id, &fx["call"], t);
            }
            let tool = name(&fx["tool"]);
            let mut args = Vec::new();
            strings(&fx["call"]["arguments"], &mut args);
            let blocks: Vec<Value> = fx["result"]["content"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|b| json!({"type": "text", "text": b["text"].as_str().unwrap_or_default()}))
                        .collect()
                })
                .unwrap_or_else(|| vec![json!({"type": "text", "text": "ok"})]);
            let mut result = json!({ "content": blocks });
            let ctx = Context::new([tool.as_str()])
                .answering(&tool)
                .arguments(&args);
            let secrets = content.redact_result(&mut result);
            let labels = content.label_result_in(&mut result, &ctx);
            t.results += 1;
            if !secrets.is_empty() || !labels.is_empty() {
                t.changed += 1;
                let kinds: Vec<&str> = secrets.iter().map(|d| d.kind.as_str()).collect();
                println!(
                    "result changed: {id} ({kind}): labels {:?}, secrets {kinds:?}",
                    label_names(&labels)
                );
            }
        }
        "benign-tool-definition" | "malicious-tool-definition" | "definition-change" => {
            let tools: Vec<&Value> = if kind == "definition-change" {
                vec![&fx["before"], &fx["after"]]
            } else {
                vec![&fx["tool"]]
            };
            for tool in tools {
                let n = name(tool);
                let ctx = Context::new([n.as_str()]).answering(&n);
                t.descriptions += 1;
                if let Some(labelled) = content.label_tool(tool, &ctx) {
                    t.labelled += 1;
                    println!(
                        "description labelled: {id} ({kind}, tool {n:?}): {:?}",
                        label_names(&labelled.found)
                    );
                }
            }
        }
        "tool-call-sequence" => {
            for call in fx["calls"].as_array().into_iter().flatten() {
                check_call(content, id, call, t);
            }
        }
        _ => {}
    }
}

fn main() {
    let dirs: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if dirs.is_empty() {
        eprintln!("usage: label_bench DIR [DIR...] (directories of mcp-defense-bench case files)");
        std::process::exit(2);
    }
    let mut paths = Vec::new();
    for d in &dirs {
        files(d, &mut paths);
    }
    let content = Content::default();
    let (mut fixtures, mut controls) = (Totals::default(), Totals::default());
    for p in &paths {
        let Ok(case) = std::fs::read(p)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()))
        else {
            eprintln!("label_bench: {} is not a JSON case file", p.display());
            continue;
        };
        let id = case["id"].as_str().unwrap_or_default().to_string();
        if case.get("fixture").is_some() {
            check(&content, &id, &case["fixture"], &mut fixtures);
        }
        if case.get("benignControl").is_some() {
            check(
                &content,
                &format!("{id}#benignControl"),
                &case["benignControl"],
                &mut controls,
            );
        }
    }
    let rate = |k: usize, n: usize| {
        if n == 0 {
            0.0
        } else {
            100.0 * k as f64 / n as f64
        }
    };
    for (what, t) in [("fixtures", &fixtures), ("benign controls", &controls)] {
        if t.results + t.descriptions + t.calls == 0 {
            continue;
        }
        println!(
            "{what}: {} of {} results changed ({:.2} %); {} of {} descriptions labelled ({:.2} %); {} of {} calls refused or asked about ({:.2} %)",
            t.changed,
            t.results,
            rate(t.changed, t.results),
            t.labelled,
            t.descriptions,
            rate(t.labelled, t.descriptions),
            t.stopped,
            t.calls,
            rate(t.stopped, t.calls)
        );
    }
}
