//! Capturing a live server's catalogue: one connection, the negotiated protocol version, the
//! complete serverInfo, and every `tools/list` page kept whole.
//!
//! Drives a `process::client` conversation; it records what the server said and leaves reviewing,
//! pinning and writing the snapshot to its callers. It knows nothing of the command line.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::process::client::{Client, ClientError};
use crate::protocol::{methods, LEGACY_VERSIONS};

/// What one capture observed.
#[derive(Debug, Clone)]
pub struct Captured {
    pub protocol_version: String,
    /// `{serverInfo, toolPages, reviews: {}, instructions?, capabilities}`.
    pub entry: Value,
}

/// Limits of one capture.
#[derive(Debug, Clone)]
pub struct Limits {
    /// More pages than this is an error, never an endless walk.
    pub max_pages: usize,
    /// How often the whole list is walked again when the server announces a change during the
    /// walk, before giving up.
    pub max_relists: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pages: 1000,
            max_relists: 3,
        }
    }
}

/// Performs the legacy handshake with `protocol_version`, then walks `tools/list` to the end.
/// A modern `protocol_version` (2026-07-28) has no handshake: see [`capture_modern`].
pub fn capture(
    client: &mut Client,
    protocol_version: &str,
    limits: &Limits,
) -> Result<Captured, String> {
    if crate::protocol::is_modern(protocol_version) {
        return capture_modern(client, protocol_version, limits);
    }
    let init = client
        .request(
            methods::INITIALIZE,
            json!({
                "protocolVersion": protocol_version,
                // The gate passes the server no client capabilities by default (sampling,
                // elicitation and roots are blocked), so the capture asks with none too:
                // some servers list different tools for different client capabilities.
                "capabilities": {},
                "clientInfo": {"name": "mcpguard", "version": env!("CARGO_PKG_VERSION")}
            }),
        )
        .map_err(|e| e.to_string())?;
    let negotiated = init
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or("the initialize result has no protocolVersion")?
        .to_string();
    if !LEGACY_VERSIONS.contains(&negotiated.as_str()) {
        return Err(format!(
            "the server answered initialize with protocol version {negotiated:?}, which mcpguard cannot use (it speaks {})",
            LEGACY_VERSIONS.join(", ")
        ));
    }
    let server_info = init
        .get("serverInfo")
        .filter(|v| v.is_object())
        .cloned()
        .ok_or("the initialize result has no serverInfo object")?;
    client
        .notify(methods::INITIALIZED, None)
        .map_err(|e| e.to_string())?;
    // A round trip, so that tool registrations a server performs right after `initialized`
    // (server-everything does) have happened before the first page is requested.
    let _ = client.request(methods::PING, json!({}));

    let mut pages = Vec::new();
    for attempt in 0..=limits.max_relists {
        let seen_before = count_list_changed(client);
        pages = list_all(client, limits)?;
        if count_list_changed(client) == seen_before {
            break;
        }
        if attempt == limits.max_relists {
            return Err(format!(
                "the server kept announcing tool changes while being listed ({} walks); its catalogue is not stable enough to review",
                limits.max_relists + 1
            ));
        }
    }

    let mut entry = Map::new();
    entry.insert("serverInfo".into(), server_info);
    if let Some(instructions) = init.get("instructions") {
        entry.insert("instructions".into(), instructions.clone());
    }
    if let Some(caps) = init.get("capabilities") {
        entry.insert("capabilities".into(), caps.clone());
    }
    entry.insert("toolPages".into(), Value::Array(pages));
    entry.insert("reviews".into(), json!({}));
    Ok(Captured {
        protocol_version: negotiated,
        entry: Value::Object(entry),
    })
}

/// The modern capture: every request carries the envelope at `protocol_version`;
/// `server/discover` gives the supported versions, capabilities, instructions and (in its
/// `_meta`) the server's identity; then `tools/list` is walked to the end. The entry records the
/// discover result's versions and cache directives under `discover`, and the pages whole (with
/// their `ttlMs` and `cacheScope`, which are page fields and never part of a Tool).
pub fn capture_modern(
    client: &mut Client,
    protocol_version: &str,
    limits: &Limits,
) -> Result<Captured, String> {
    use crate::gate::modern;
    use crate::protocol::SERVER_INFO_META;
    client.envelope = Some(protocol_version.to_string());
    let discover = client
        .request(methods::SERVER_DISCOVER, json!({}))
        .map_err(|e| format!("{e} (a 2026-07-28 server must answer server/discover; capture a legacy server with --protocol-version 2025-11-25)"))?;
    let supported: Vec<Value> = discover
        .get("supportedVersions")
        .and_then(Value::as_array)
        .cloned()
        .ok_or("the server/discover result has no supportedVersions array")?;
    if !supported.iter().any(|v| v == protocol_version) {
        return Err(format!(
            "the server does not support protocol {protocol_version} (its server/discover lists {}); capture it with one of those",
            Value::Array(supported.clone())
        ));
    }
    let server_info = discover
        .pointer("/_meta")
        .and_then(|m| m.get(SERVER_INFO_META))
        .filter(|v| v.is_object())
        .cloned()
        .ok_or("the server/discover result names no server (no _meta[\"io.modelcontextprotocol/serverInfo\"] object); mcpguard cannot pin its identity")?;
    let pages = list_all(client, limits)?;
    // Every page must name the same server as discover did: a result's identity is part of
    // what is reviewed.
    for (n, page) in pages.iter().enumerate() {
        let live = page.pointer("/_meta").and_then(|m| m.get(SERVER_INFO_META));
        modern::check_server_info(live, &server_info)
            .map_err(|e| format!("tools/list page {}: {e}", n + 1))?;
    }
    let mut record = Map::new();
    record.insert("supportedVersions".into(), Value::Array(supported));
    record.extend(modern::cache_fields(&discover));
    let mut entry = Map::new();
    entry.insert("serverInfo".into(), server_info);
    if let Some(instructions) = discover.get("instructions") {
        entry.insert("instructions".into(), instructions.clone());
    }
    if let Some(caps) = discover.get("capabilities") {
        entry.insert("capabilities".into(), caps.clone());
    }
    entry.insert("discover".into(), Value::Object(record));
    entry.insert("toolPages".into(), Value::Array(pages));
    entry.insert("reviews".into(), json!({}));
    Ok(Captured {
        protocol_version: protocol_version.to_string(),
        entry: Value::Object(entry),
    })
}

fn count_list_changed(client: &Client) -> usize {
    client
        .notifications
        .iter()
        .filter(|m| *m == methods::TOOLS_LIST_CHANGED)
        .count()
}

/// Follows `nextCursor` until it is absent. A repeated cursor, too many pages, an error or a
/// malformed page ends the walk with an error; a tool name occurring twice is an error.
pub fn list_all(client: &mut Client, limits: &Limits) -> Result<Vec<Value>, String> {
    let mut pages = Vec::new();
    let mut cursors = HashSet::new();
    let mut names = HashSet::new();
    let mut cursor: Option<String> = None;
    loop {
        if pages.len() >= limits.max_pages {
            return Err(format!(
                "tools/list returned more than {} pages; refusing to walk further",
                limits.max_pages
            ));
        }
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = client
            .request(methods::TOOLS_LIST, params)
            .map_err(|e| match e {
                ClientError::Rpc { code, message, .. } if cursor.is_some() => format!(
                    "the server refused its own cursor on page {} (error {code}: {message})",
                    pages.len() + 1
                ),
                e => e.to_string(),
            })?;
        let n = pages.len();
        let tools = page
            .get("tools")
            .and_then(Value::as_array)
            .ok_or_else(|| format!("tools/list page {} has no \"tools\" array", n + 1))?;
        for (i, tool) in tools.iter().enumerate() {
            let name = tool
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("tool {i} on page {} has no string name", n + 1))?;
            if !names.insert(name.to_string()) {
                return Err(format!(
                    "the tool name {name:?} occurs twice in the catalogue (again on page {}); a reviewed name must occur exactly once",
                    n + 1
                ));
            }
        }
        cursor = match page.get("nextCursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => {
                if !cursors.insert(c.clone()) {
                    return Err(format!(
                        "tools/list page {} repeats the cursor {c:?}; the server's pagination loops",
                        n + 1
                    ));
                }
                Some(c.clone())
            }
            Some(other) => {
                return Err(format!(
                    "tools/list page {} has a nextCursor that is not a string: {other}",
                    n + 1
                ))
            }
        };
        pages.push(page);
        if cursor.is_none() {
            return Ok(pages);
        }
    }
}

/// Starts `command`, captures, and shuts the server down.
pub fn capture_command(
    command: &[std::ffi::OsString],
    protocol_version: &str,
    limits: &Limits,
    max_message_bytes: usize,
    timeout: Duration,
    sandbox: Option<&std::sync::Arc<crate::sandbox::Prepared>>,
) -> Result<Captured, String> {
    let mut client =
        Client::start(command, max_message_bytes, timeout, sandbox).map_err(|e| e.to_string())?;
    let result = capture(&mut client, protocol_version, limits);
    client.shutdown(Duration::from_secs(2));
    result
}
