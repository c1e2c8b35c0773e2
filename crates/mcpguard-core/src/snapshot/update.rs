//! The update of a reviewed snapshot from a fresh capture of one of its servers: the new entry
//! keeps the review of every tool whose live object is RFC 8785-identical to the reviewed one,
//! byte for byte (the review object is copied, never rebuilt); a changed or new tool is
//! unreviewed; a removed tool and its review are gone. With the triage of what changed.
//!
//! An update that finds nothing changed can renew the snapshot instead ([`renew`]): the same
//! document with new `capturedAt` and `expiresAt`, every review carried as it is.
//!
//! Pure: documents in, a document out. Capturing is `process::capture`; writing the files, the
//! `.prev` copy and asking the reviewer are the command line's (`cli::update`).

use serde_json::{Map, Value};

use crate::snapshot::diff::json_eq;
use crate::snapshot::diff::triage::{self, Triage};
use crate::snapshot::manifest;

/// The outcome of an update.
#[derive(Debug, Clone)]
pub struct Updated {
    /// The new document; the old one unchanged when nothing changed.
    pub doc: Value,
    pub triage: Triage,
    /// The tools whose review was carried, in the old snapshot's review order.
    pub carried: Vec<String>,
    /// Whether anything changed (otherwise `doc` is the old document, digest and all).
    pub changed: bool,
}

/// Builds the updated document from `old` for server `key`, given the live capture's entry and
/// protocol version, and the instants the new snapshot records.
pub fn update(
    old: &Value,
    key: &str,
    live: Value,
    live_version: &str,
    captured_at: &str,
    expires_at: &str,
) -> Result<Updated, String> {
    let old_entry = old
        .get("servers")
        .and_then(|s| s.get(key))
        .ok_or_else(|| format!("the snapshot has no server {key:?}"))?;
    let old_tools = manifest::tools(key, old_entry).map_err(|ps| {
        ps.iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let live_tools = manifest::tools(key, &live).map_err(|ps| {
        ps.iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("; ")
    })?;
    let mut reviews = Map::new();
    let mut carried = Vec::new();
    if let Some(old_reviews) = old_entry.get("reviews").and_then(Value::as_object) {
        for (name, review) in old_reviews {
            let old_tool = old_tools.iter().find(|(n, _, _)| n == name);
            let live_tool = live_tools.iter().find(|(n, _, _)| n == name);
            if let (Some((_, _, a)), Some((_, _, b))) = (old_tool, live_tool) {
                if json_eq(a, b) {
                    reviews.insert(name.clone(), review.clone());
                    carried.push(name.clone());
                }
            }
        }
    }
    let old_version = old.get("protocolVersion").and_then(Value::as_str);
    let triage = triage::triage(key, old_entry, &live, old_version, Some(live_version));
    if triage.is_empty() {
        return Ok(Updated {
            doc: old.clone(),
            triage,
            carried,
            changed: false,
        });
    }
    let mut entry = live;
    if let Some(o) = entry.as_object_mut() {
        o.insert("reviews".into(), Value::Object(reviews));
    }
    let mut doc = old.clone();
    if let Some(o) = doc.as_object_mut() {
        o.insert("protocolVersion".into(), Value::from(live_version));
        o.insert("capturedAt".into(), Value::from(captured_at));
        o.insert("expiresAt".into(), Value::from(expires_at));
    }
    doc["servers"][key] = entry;
    Ok(Updated {
        doc,
        triage,
        carried,
        changed: true,
    })
}

/// The renewal of a snapshot whose live capture is identical to the reviewed one (the caller
/// checked that with [`update`]: nothing changed): the old document with new `capturedAt` and
/// `expiresAt`, nothing else touched, so every review is carried byte for byte. Refused for a
/// snapshot of several servers, because its one expiry covers servers that were not captured
/// again.
pub fn renew(old: &Value, captured_at: &str, expires_at: &str) -> Result<Value, String> {
    let servers = old
        .get("servers")
        .and_then(Value::as_object)
        .map_or(0, Map::len);
    if servers != 1 {
        return Err(format!(
            "the snapshot holds {servers} servers and its one expiry covers them all, but only one \
             was captured again; capture each server into its own snapshot \
             (`mcpguard capture --server KEY --out FILE`) to renew it on its own"
        ));
    }
    let mut doc = old.clone();
    if let Some(o) = doc.as_object_mut() {
        o.insert("capturedAt".into(), Value::from(captured_at));
        o.insert("expiresAt".into(), Value::from(expires_at));
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(tools: Value, reviews: Value) -> Value {
        json!({"profile": manifest::PROFILE, "protocolVersion": "2025-11-25",
               "capturedAt": "2026-11-01T00:00:00Z", "expiresAt": "2026-11-08T00:00:00Z",
               "servers": {"s": {"serverInfo": {"name": "x", "version": "1"},
                                 "toolPages": [{"tools": tools}], "reviews": reviews}}})
    }

    #[test]
    fn identical_tools_keep_their_reviews_and_changed_ones_lose_them() {
        let review = |who: &str| json!({"reviewer": who, "reviewedAt": "2026-11-01T01:00:00Z", "z": 1, "a": 2});
        let old = doc(
            json!([{"name": "a", "description": "A"}, {"name": "b", "description": "B"}, {"name": "c"}]),
            json!({"b": review("rb"), "a": review("ra"), "c": review("rc")}),
        );
        let live = json!({"serverInfo": {"name": "x", "version": "1"},
                          "toolPages": [{"tools": [{"description": "A", "name": "a"}, {"name": "b", "description": "B!"}, {"name": "d"}]}],
                          "reviews": {}});
        let u = update(
            &old,
            "s",
            live,
            "2025-11-25",
            "2026-11-02T00:00:00Z",
            "2026-11-09T00:00:00Z",
        )
        .unwrap();
        assert!(u.changed);
        assert_eq!(u.carried, ["a"]);
        let reviews = u.doc["servers"]["s"]["reviews"].as_object().unwrap();
        assert_eq!(reviews.len(), 1);
        // Byte for byte: the same members in the same order.
        assert_eq!(
            serde_json::to_string(&reviews["a"]).unwrap(),
            serde_json::to_string(&old["servers"]["s"]["reviews"]["a"]).unwrap()
        );
        assert_eq!(u.doc["capturedAt"], "2026-11-02T00:00:00Z");

        let same = old["servers"]["s"].clone();
        let u = update(
            &old,
            "s",
            same,
            "2025-11-25",
            "2026-11-02T00:00:00Z",
            "2026-11-09T00:00:00Z",
        )
        .unwrap();
        assert!(!u.changed);
        assert_eq!(u.doc, old);
    }

    #[test]
    fn renewal_changes_only_the_instants_and_needs_one_server() {
        let review = json!({"reviewer": "r", "reviewedAt": "2026-11-01T01:00:00Z"});
        let old = doc(json!([{"name": "a"}]), json!({"a": review}));
        let new = renew(&old, "2026-11-09T00:00:00Z", "2026-11-16T00:00:00Z").unwrap();
        assert_eq!(new["capturedAt"], "2026-11-09T00:00:00Z");
        assert_eq!(new["expiresAt"], "2026-11-16T00:00:00Z");
        let mut back = new.clone();
        back["capturedAt"] = old["capturedAt"].clone();
        back["expiresAt"] = old["expiresAt"].clone();
        assert_eq!(back, old, "nothing but the two instants changed");

        let mut two = old.clone();
        two["servers"]["t"] = old["servers"]["s"].clone();
        let e = renew(&two, "2026-11-09T00:00:00Z", "2026-11-16T00:00:00Z").unwrap_err();
        assert!(e.contains("2 servers"), "{e}");
    }
}
