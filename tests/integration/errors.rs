//! Every refusal code mcpguard documents is triggered through the real binary: the table of
//! `docs/errors.md` names, for each code, the test that triggers it, and
//! `every_code_has_a_row_and_a_test_that_triggers_it` fails when a code the source defines has no
//! row, a row names a test that does not exist, or that test never mentions the code. The tests
//! below trigger the codes no other module's test does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::gate::{guarded_with, reviewed_snapshot};
use crate::support::{fixture, reads_policy_with, Peer};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The refusal contract of a tool error result.
fn contract(v: &Value) -> &Value {
    &v["result"]["_meta"]["dev.mcpguard/refusal"]
}

/// mcpguard over the fixture (run with `fixture_args`) under the reads policy plus `extra`.
fn start(dir: &Path, extra: &str, fixture_args: &[&str]) -> Peer {
    let (snap, digest) = reviewed_snapshot(dir, &[]);
    let policy = dir.join("policy.toml");
    std::fs::write(&policy, reads_policy_with(extra)).unwrap();
    let opts = ["--policy".to_string(), policy.display().to_string()];
    let args: Vec<String> = fixture_args.iter().map(|a| a.to_string()).collect();
    let mut p = guarded_with(&snap, &digest, &opts, &args);
    p.initialize();
    p
}

#[test]
fn without_a_snapshot_a_call_is_not_pinned_and_an_oversized_request_is_refused() {
    let fixture = fixture().display().to_string();
    let mut p = Peer::guard(&["--max-message-bytes", "4096", "--", fixture.as_str()]);
    p.initialize();
    let r = p.request(
        1,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(contract(&r)["code"], "not_pinned", "{r}");
    // -31002: the host's message exceeds --max-message-bytes.
    let pad = "x".repeat(8000);
    p.send(format!(
        r#"{{"jsonrpc":"2.0","id":"big","method":"ping","params":{{"pad":"{pad}"}}}}"#
    ));
    let (r, _) = p.recv_response(&json!("big"));
    assert_eq!(r["error"]["code"], -31002, "{r}");
    p.close_stdin();
    p.wait();
}

#[test]
fn a_reused_id_and_a_call_over_the_in_flight_limit_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = start(dir.path(), "[limits]\nmax_calls_in_flight = 1\n", &[]);
    p.send_json(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"ms": 3000}}}));
    // Wait until the slow call is in flight (dispatched after the live verification).
    std::thread::sleep(Duration::from_millis(500));
    // -31003: the id of a pending request again.
    let r = p.request(7, "ping", json!({}));
    assert_eq!(r["error"]["code"], -31003, "{r}");
    // too_many_calls: a second call while the limit is taken.
    let r = p.request(
        8,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(contract(&r)["code"], "too_many_calls", "{r}");
    assert_eq!(contract(&r)["retryable"], true, "{r}");
    let (r, _) = p.recv_response(&json!(7));
    assert_eq!(r["result"]["content"][0]["text"], "done", "{r}");
    p.close_stdin();
    p.wait();
}

#[test]
fn an_error_text_withheld_by_policy_is_an_upstream_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = start(dir.path(), "[errors]\ntext = \"redacted\"\n", &[]);
    let r = p.request(1, "tools/call", json!({"name": "fail", "arguments": {}}));
    assert_eq!(contract(&r)["code"], "upstream_error", "{r}");
    assert!(
        contract(&r)["message"]
            .as_str()
            .unwrap()
            .contains("errors.text"),
        "{r}"
    );
    p.close_stdin();
    p.wait();
}

#[test]
fn a_live_catalogue_that_cannot_be_walked_fails_verification() {
    let dir = tempfile::tempdir().unwrap();
    // Page 2 of the live catalogue is not a tools/list result.
    let mut p = start(dir.path(), "", &["--garbage-page"]);
    let r = p.request(1, "tools/list", json!({}));
    assert_eq!(r["error"]["code"], -31007, "{r}");
    let r = p.request(
        2,
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    assert_eq!(contract(&r)["code"], "verification_failed", "{r}");
    p.close_stdin();
    p.wait();
}

/// The `const NAME: TYPE = VALUE;` items of the module `module` (a `pub mod NAME {` block) of
/// the source file `file`, or of the whole file when `module` is empty: (NAME, VALUE).
fn constants(file: &str, module: &str, ty: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join(file)).unwrap();
    let body = if module.is_empty() {
        text.as_str()
    } else {
        let start = text
            .find(&format!("pub mod {module} {{"))
            .unwrap_or_else(|| panic!("{file} has no module {module}"));
        let rest = &text[start..];
        &rest[..rest.find("\n}").unwrap()]
    };
    body.lines()
        .filter_map(|l| l.trim().strip_prefix("pub const "))
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let (t, value) = rest.split_once('=')?;
            (t.trim() == ty).then(|| {
                (
                    name.trim().to_string(),
                    value
                        .trim()
                        .trim_end_matches(';')
                        .trim_matches('"')
                        .to_string(),
                )
            })
        })
        .collect()
}

/// The rows of the one table of `docs/errors.md` whose header is `| code | name | … | test |`:
/// code → (name, the test's `module::function`).
fn table() -> BTreeMap<String, (String, String)> {
    let text = std::fs::read_to_string(root().join("docs/errors.md")).unwrap();
    let mut rows = BTreeMap::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("| code | name |") {
            assert!(
                !inside && rows.is_empty(),
                "docs/errors.md has more than one code table"
            );
            inside = true;
            continue;
        }
        if inside {
            if !line.starts_with('|') {
                inside = false;
                continue;
            }
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if cells[1].starts_with("---") {
                continue;
            }
            let code = cells[1].trim_matches('`').replace('−', "-");
            let name = cells[2].trim_matches('`').to_string();
            let test = cells[cells.len() - 2].trim_matches('`').to_string();
            let again = rows.insert(code.clone(), (name, test));
            assert!(again.is_none(), "docs/errors.md lists {code} twice");
        }
    }
    assert!(
        !rows.is_empty(),
        "docs/errors.md has no `| code | name | … | test |` table"
    );
    rows
}

/// The body of the test function `module::function` in `tests/integration/`, if it exists and
/// is a test.
fn test_body(path: &str) -> Option<String> {
    let (module, function) = path.split_once("::")?;
    let text =
        std::fs::read_to_string(root().join(format!("tests/integration/{module}.rs"))).ok()?;
    let at = text.find(&format!("#[test]\nfn {function}("))?;
    let rest = &text[at..];
    let end = rest[1..].find("\n#[test]").map_or(rest.len(), |e| e + 1);
    Some(rest[..end].to_string())
}

#[test]
fn every_code_has_a_row_and_a_test_that_triggers_it() {
    let rows = table();
    // Every code the source defines: mcpguard's JSON-RPC codes, the refusal contract's codes,
    // the standard JSON-RPC codes it answers with, and the 2026-07-28 version error.
    let mut defined: Vec<(String, String)> = Vec::new();
    defined.extend(constants(
        "crates/mcpguard-core/src/protocol/mod.rs",
        "codes",
        "i64",
    ));
    defined.extend(
        constants("crates/mcpguard-core/src/protocol/mod.rs", "", "i64")
            .into_iter()
            .filter(|(n, _)| n == "UNSUPPORTED_PROTOCOL_VERSION"),
    );
    defined.extend(constants(
        "crates/mcpguard-core/src/wire/message.rs",
        "",
        "i64",
    ));
    defined.extend(constants(
        "crates/mcpguard-core/src/gate/refusal.rs",
        "code",
        "&str",
    ));
    assert!(
        defined.len() >= 25,
        "the constants were not found: {defined:?}"
    );
    let mut problems = Vec::new();
    for (name, code) in &defined {
        match rows.get(code) {
            None => problems.push(format!("{code} ({name}) has no row in docs/errors.md")),
            Some((row_name, _)) if row_name != name => problems.push(format!(
                "{code}: docs/errors.md names it {row_name}, the source {name}"
            )),
            Some(_) => {}
        }
    }
    for (code, (name, test)) in &rows {
        match test_body(test) {
            None => problems.push(format!(
                "{code} ({name}): the test {test} named in docs/errors.md does not exist in tests/integration"
            )),
            // The test must check the code itself, not only reach the situation.
            Some(body) if !body.contains(code.as_str()) => problems.push(format!(
                "{code} ({name}): the test {test} never mentions {code}"
            )),
            Some(_) => {}
        }
        if !defined.iter().any(|(_, c)| c == code) {
            problems.push(format!(
                "{code} ({name}) is in docs/errors.md but defined nowhere in the source"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
