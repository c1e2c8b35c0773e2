//! Reviews written by a test instead of a person: the scripted review of every tool of a real
//! server, and `mcpguard review --from` run on them, checked, and its digest returned.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Map, Value};

use super::{run_bounded, show};

/// Every tool of server `key` in the snapshot `doc`, reviewed as a script would: the tools named
/// in `reads` as reads and the rest as updates (the review's operation class, so that no policy
/// file is needed to call the reads without a confirmation), the assertions of a plain tool, and
/// every top-level argument a data channel.
pub fn scripted_reviews(doc: &Value, key: &str, reads: &[&str]) -> Value {
    let mut reviews = Map::new();
    for page in doc["servers"][key]["toolPages"].as_array().unwrap() {
        for tool in page["tools"].as_array().unwrap() {
            let name = tool["name"].as_str().unwrap();
            let channels: Map<String, Value> = tool["inputSchema"]["properties"]
                .as_object()
                .map(|p| p.keys().map(|k| (format!("/{k}"), json!("data"))).collect())
                .unwrap_or_default();
            let class = if reads.contains(&name) {
                "read"
            } else {
                "update"
            };
            reviews.insert(
                name.to_string(),
                json!({
                    "sideEffect": class,
                    "assertions": {"headless": true, "independentCalls": true,
                        "modelBacked": false, "sideEffects": [], "concurrency": "safe",
                        "referenceBasedIO": true},
                    "inputChannels": channels,
                }),
            );
        }
    }
    Value::Object(reviews)
}

/// Writes `reviews` (tool name -> review) to `from` and records them into server `key` of `snap`
/// with `mcpguard` (a command of the mcpguard binary, set up as the test runs it: user,
/// environment) as `review SNAP --server KEY [--reviewer REVIEWER] --from FROM`. Asserts that it
/// succeeded and returns the digest it printed.
pub fn record_reviews(
    mut mcpguard: Command,
    snap: &Path,
    key: &str,
    reviewer: Option<&str>,
    reviews: &Value,
    from: &Path,
) -> String {
    std::fs::write(from, serde_json::to_vec(reviews).unwrap()).unwrap();
    mcpguard.arg("review").arg(snap).args(["--server", key]);
    if let Some(r) = reviewer {
        mcpguard.args(["--reviewer", r]);
    }
    let out = run_bounded(mcpguard.arg("--from").arg(from));
    assert!(
        out.status.success(),
        "review {key} of {}: {}",
        snap.display(),
        show(&out)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}
