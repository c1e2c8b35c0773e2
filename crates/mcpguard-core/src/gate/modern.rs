//! The 2026-07-28 ("modern", stateless) era as pure functions of values.
//!
//! The modern revision has no `initialize`. Every request carries the protocol version and the
//! client's capabilities in `params._meta`, every result may name the server in its own
//! `_meta`, `server/discover` replaces the handshake, list changes arrive on
//! `subscriptions/listen` streams, and server→client requests come back inside results as
//! `input_required` (multi round-trip requests, MRTR). This module decides what each of those
//! means for the gate; the conversation state that applies the decisions lives in `session`.
//! Nothing here performs IO.
//!
//! It must not know the session's state, processes, the sandbox or the command line.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use crate::gate::capabilities::Capabilities;
use crate::protocol::{
    methods, CLIENT_CAPABILITIES_META, CLIENT_INFO_META, PROTOCOL_VERSION_META, SERVER_INFO_META,
    SUBSCRIPTION_ID_META, UNSUPPORTED_PROTOCOL_VERSION,
};
use crate::wire::message::{self, Id};

/// What a modern snapshot pins beyond the legacy pin: the discover answer's parts and the cache
/// directives of the list, all exactly as captured.
#[derive(Debug, Clone, PartialEq)]
pub struct ModernPin {
    /// `supportedVersions` of the captured `server/discover` result.
    pub supported_versions: Vec<String>,
    /// The captured server capabilities.
    pub capabilities: Value,
    /// `ttlMs` and `cacheScope` of the captured discover result.
    pub discover_cache: Map<String, Value>,
    /// `ttlMs` and `cacheScope` of the first captured `tools/list` page. They describe the page,
    /// not any Tool, so they never take part in the Tool comparison.
    pub list_cache: Map<String, Value>,
}

/// The cache directives of a result (`ttlMs`, `cacheScope`), where present.
pub fn cache_fields(result: &Value) -> Map<String, Value> {
    let mut m = Map::new();
    for key in ["ttlMs", "cacheScope"] {
        if let Some(v) = result.get(key) {
            m.insert(key.to_string(), v.clone());
        }
    }
    m
}

/// Removes the cache directives from a server entry's discover record and tool pages.
pub fn strip_cache_fields(entry: &mut Value) {
    let pages = entry
        .get_mut("toolPages")
        .and_then(Value::as_array_mut)
        .map(|p| p.iter_mut().collect::<Vec<_>>())
        .unwrap_or_default();
    for result in pages {
        if let Some(o) = result.as_object_mut() {
            o.remove("ttlMs");
            o.remove("cacheScope");
        }
    }
    if let Some(o) = entry.get_mut("discover").and_then(Value::as_object_mut) {
        o.remove("ttlMs");
        o.remove("cacheScope");
    }
}

impl ModernPin {
    /// Reads the modern additions of a snapshot's server entry (written by a modern capture).
    pub fn from_entry(entry: &Value) -> Result<ModernPin, String> {
        let discover = entry
            .get("discover")
            .filter(|d| d.is_object())
            .ok_or("the snapshot pins protocol 2026-07-28 but its server entry has no \"discover\" object (capture it again with this mcpguard)")?;
        let supported_versions = discover
            .get("supportedVersions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .ok_or("the snapshot's discover record has no supportedVersions array")?;
        let first_page = entry
            .pointer("/toolPages/0")
            .cloned()
            .unwrap_or(Value::Null);
        Ok(ModernPin {
            supported_versions,
            capabilities: entry.get("capabilities").cloned().unwrap_or(json!({})),
            discover_cache: cache_fields(discover),
            list_cache: cache_fields(&first_page),
        })
    }
}

/// Why a host request's envelope is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvelopeError {
    /// The envelope is missing or malformed (-32602, as the spec's servers answer).
    Malformed(String),
    /// The request asks for another protocol version than the pinned one (-32022).
    Version { requested: String },
}

/// Checks that a host request carries the modern envelope at the pinned version. The envelope
/// is what a modern server decides everything by, so a request without it never passes.
pub fn check_envelope(params: Option<&Value>, pinned: &str) -> Result<(), EnvelopeError> {
    let meta = params
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object)
        .ok_or_else(|| EnvelopeError::Malformed(format!(
            "params._meta must be an object carrying {PROTOCOL_VERSION_META:?} and {CLIENT_CAPABILITIES_META:?}"
        )))?;
    let requested = match meta.get(PROTOCOL_VERSION_META) {
        Some(Value::String(v)) => v,
        Some(_) => {
            return Err(EnvelopeError::Malformed(format!(
                "params._meta[{PROTOCOL_VERSION_META:?}] must be a string"
            )))
        }
        None => {
            return Err(EnvelopeError::Malformed(format!(
                "params._meta is missing {PROTOCOL_VERSION_META:?}"
            )))
        }
    };
    if requested != pinned {
        return Err(EnvelopeError::Version {
            requested: requested.clone(),
        });
    }
    if !meta
        .get(CLIENT_CAPABILITIES_META)
        .is_some_and(Value::is_object)
    {
        return Err(EnvelopeError::Malformed(format!(
            "params._meta[{CLIENT_CAPABILITIES_META:?}] must be an object"
        )));
    }
    Ok(())
}

/// The `-32022` error naming the one version this gate serves.
pub fn unsupported_version(id: Option<&Id>, requested: &str, pinned: &str, why: &str) -> Bytes {
    let data = json!({"supported": [pinned], "requested": requested});
    Bytes::from(message::error_response(
        id,
        UNSUPPORTED_PROTOCOL_VERSION,
        &format!("mcpguard: {why}"),
        Some(&data),
    ))
}

/// Adds the modern envelope to the params of a request mcpguard sends itself. mcpguard asks
/// with no client capabilities: it never answers input requests on its own behalf.
pub fn stamp(params: Option<Value>, version: &str) -> Value {
    let mut p = match params {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let mut meta = match p.remove("_meta") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    meta.insert(PROTOCOL_VERSION_META.into(), json!(version));
    meta.insert(CLIENT_CAPABILITIES_META.into(), json!({}));
    meta.insert(
        CLIENT_INFO_META.into(),
        json!({"name": "mcpguard", "version": env!("CARGO_PKG_VERSION")}),
    );
    p.insert("_meta".into(), Value::Object(meta));
    Value::Object(p)
}

/// The parts of a result the modern gate looks at, read without building a tree of the rest.
#[derive(Debug, Default)]
pub struct ResultHead {
    pub server_info: Option<Value>,
    pub subscription_id: Option<Value>,
    pub result_type: Option<String>,
}

/// Reads `_meta` (serverInfo, subscriptionId) and `resultType` of a result or of notification
/// params. A result that is not an object has none of them.
pub fn head(raw: &str) -> ResultHead {
    #[derive(Deserialize)]
    struct Head<'a> {
        #[serde(rename = "_meta", borrow, default)]
        meta: Option<&'a RawValue>,
        #[serde(rename = "resultType", default)]
        result_type: Option<String>,
    }
    let Ok(h) = serde_json::from_str::<Head<'_>>(raw) else {
        return ResultHead::default();
    };
    let meta: Option<Map<String, Value>> = h.meta.and_then(|m| serde_json::from_str(m.get()).ok());
    ResultHead {
        server_info: meta.as_ref().and_then(|m| m.get(SERVER_INFO_META).cloned()),
        subscription_id: meta.and_then(|m| m.get(SUBSCRIPTION_ID_META).cloned()),
        result_type: h.result_type,
    }
}

/// Compares a result's self-reported serverInfo with the pinned one. Absent is accepted (the
/// spec says SHOULD); present and different is a changed server identity.
pub fn check_server_info(live: Option<&Value>, pinned: &Value) -> Result<(), String> {
    let Some(live) = live else { return Ok(()) };
    if crate::snapshot::canonical::canonical_eq(live, pinned) {
        return Ok(());
    }
    let changes = crate::snapshot::diff::diff_documents(
        &json!({"serverInfo": pinned}),
        &json!({"serverInfo": live}),
    );
    let pointers: Vec<String> = changes.iter().map(|c| c.pointer.clone()).collect();
    Err(format!(
        "the server's identity in a result's _meta differs from the pinned serverInfo at {}",
        pointers.join(", ")
    ))
}

/// Checks a live `server/discover` result against the pin: the pinned version must still be
/// supported and the self-reported identity must not have changed.
pub fn check_discover(
    live: &Value,
    pinned_version: &str,
    server_info: &Value,
) -> Result<(), String> {
    let supported: Vec<&str> = live
        .get("supportedVersions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .ok_or("the live server/discover result has no supportedVersions array")?;
    if !supported.contains(&pinned_version) {
        return Err(format!(
            "the live server no longer supports the pinned protocol {pinned_version} (it supports {})",
            supported.join(", ")
        ));
    }
    check_server_info(
        live.pointer("/_meta").and_then(|m| m.get(SERVER_INFO_META)),
        server_info,
    )
}

/// mcpguard's answer to `server/discover`, built from the snapshot: only the pinned version,
/// the captured capabilities less the blocked ones, the reviewed instructions when the live ones
/// equal them, the pinned identity and the captured cache directives.
pub fn discover_answer(
    pinned_version: &str,
    server_info: &Value,
    modern: &ModernPin,
    instructions: Option<&Value>,
    caps: &Capabilities,
) -> (Value, Vec<String>) {
    let mut capabilities = modern.capabilities.clone();
    let removed = capabilities
        .as_object_mut()
        .map(|c| caps.filter_server(c))
        .unwrap_or_default();
    let mut r = Map::new();
    r.insert("supportedVersions".into(), json!([pinned_version]));
    r.insert("capabilities".into(), capabilities);
    if let Some(i) = instructions {
        r.insert("instructions".into(), i.clone());
    }
    r.extend(cache_or_default(&modern.discover_cache));
    r.insert("resultType".into(), json!("complete"));
    r.insert("_meta".into(), json!({SERVER_INFO_META: server_info}));
    (Value::Object(r), removed)
}

/// The cache directives to send, defaulting to "immediately stale, private" (the spec's required
/// fields) when the capture had none.
fn cache_or_default(cache: &Map<String, Value>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(
        "ttlMs".into(),
        cache.get("ttlMs").cloned().unwrap_or(json!(0)),
    );
    m.insert(
        "cacheScope".into(),
        cache.get("cacheScope").cloned().unwrap_or(json!("private")),
    );
    m
}

/// Completes a `tools/list` answer for a modern host: the cache directives as captured, the
/// result type and the pinned identity.
pub fn decorate_list(result: &mut Value, server_info: &Value, modern: &ModernPin) {
    if let Some(r) = result.as_object_mut() {
        r.extend(cache_or_default(&modern.list_cache));
        r.insert("resultType".into(), json!("complete"));
        r.insert("_meta".into(), json!({SERVER_INFO_META: server_info}));
    }
}

/// Completes a `tools/call` result that mcpguard makes itself (a refusal, a dry run) for a
/// modern host: SDKs of this era require `resultType`, and every result names the server. Keys
/// already in `_meta` (the refusal contract) are kept.
pub fn decorate_result(result: &mut Value, server_info: &Value) {
    if let Some(r) = result.as_object_mut() {
        r.insert("resultType".into(), json!("complete"));
        let meta = r.entry("_meta").or_insert_with(|| json!({}));
        if let Some(m) = meta.as_object_mut() {
            m.insert(SERVER_INFO_META.into(), server_info.clone());
        }
    }
}

/// The `requestState` prefix of mcpguard's own confirmation questions (never a server's).
pub const APPROVAL_STATE_PREFIX: &str = "mcpguard.approval.v1.";

/// The `inputRequests` key of mcpguard's own confirmation question.
pub const APPROVAL_INPUT_KEY: &str = "dev.mcpguard/approval";

/// HMAC-SHA256 (RFC 2104) with a key of at most one block, which is all mcpguard needs.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

/// The `requestState` of mcpguard's `n`-th confirmation question about the call whose approval
/// binding is `binding`: the number and an HMAC over both, so that a state cannot be forged or
/// moved to another call (other arguments give another binding).
pub fn approval_token(key: &[u8; 32], n: u64, binding: &str) -> String {
    let mac = hmac_sha256(key, format!("{n}:{binding}").as_bytes());
    let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
    format!("{APPROVAL_STATE_PREFIX}{n}.{hex}")
}

/// The question number of an approval state, if it has the shape of one.
pub fn approval_number(state: &str) -> Option<u64> {
    let rest = state.strip_prefix(APPROVAL_STATE_PREFIX)?;
    let (n, mac) = rest.split_once('.')?;
    (mac.len() == 64).then_some(())?;
    n.parse().ok()
}

/// What the gate does with an `input_required` result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputRequired {
    /// The result is complete (or says nothing): the usual checks apply.
    No,
    /// Every input request asks for a capability the policy passes: relay it; the retry will
    /// carry this `requestState` (if any).
    Allowed { request_state: Option<String> },
    /// At least one input request asks for a blocked capability (or is not understood): the
    /// host never sees it.
    Blocked { why: String },
}

/// Longest `requestState` relayed. The state is opaque server data that travels through the
/// host and comes back; a bound keeps a hostile server from using it as a bulk channel.
pub const MAX_REQUEST_STATE: usize = 64 << 10;

/// Classifies a result for MRTR. `inputRequests` values are request objects
/// `{method, params}`; each method is passed only when its capability is allowed.
pub fn classify_input_required(result: &Value, caps: &Capabilities) -> InputRequired {
    if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
        return InputRequired::No;
    }
    let mut blocked = Vec::new();
    match result.get("inputRequests") {
        None | Some(Value::Null) => {}
        Some(Value::Object(reqs)) => {
            for (key, req) in reqs {
                let method = req.get("method").and_then(Value::as_str).unwrap_or("?");
                let allowed = match method {
                    methods::SAMPLING_CREATE_MESSAGE => caps.sampling,
                    methods::ELICITATION_CREATE => caps.elicitation,
                    methods::ROOTS_LIST => caps.roots,
                    _ => false,
                };
                if !allowed {
                    blocked.push(format!("{method} (input request {key:?})"));
                }
            }
        }
        Some(_) => {
            return InputRequired::Blocked {
                why: "its inputRequests is not an object".into(),
            }
        }
    }
    if !blocked.is_empty() {
        return InputRequired::Blocked {
            why: format!(
                "the server asked the host for {}, which the policy excludes (sampling, elicitation and roots never reach the host unless the policy allows them)",
                blocked.join(", ")
            ),
        };
    }
    match result.get("requestState") {
        None | Some(Value::Null) => InputRequired::Allowed {
            request_state: None,
        },
        Some(Value::String(s)) if s.len() <= MAX_REQUEST_STATE => InputRequired::Allowed {
            request_state: Some(s.clone()),
        },
        Some(Value::String(s)) => InputRequired::Blocked {
            why: format!(
                "its requestState is {} bytes; mcpguard relays at most {MAX_REQUEST_STATE}",
                s.len()
            ),
        },
        Some(_) => InputRequired::Blocked {
            why: "its requestState is not a string".into(),
        },
    }
}

/// The `_meta` keys of a modern `tools/call` that reach the server: the envelope (the server
/// needs it to serve the request at all) and the progress token. Everything else the host put
/// there (trace context, client state) stays behind: the server is not a peer.
const PASSED_META: [&str; 4] = [
    "progressToken",
    PROTOCOL_VERSION_META,
    CLIENT_CAPABILITIES_META,
    CLIENT_INFO_META,
];

/// The `params` members of a modern `tools/call` that reach the server: the retry members of
/// MRTR (`inputResponses`, `requestState`) besides the name, the arguments and `_meta`.
const PASSED_PARAMS: [&str; 5] = [
    "name",
    "arguments",
    "_meta",
    "inputResponses",
    "requestState",
];

/// Rebuilds a modern `tools/call` with only what the server may get; the original bytes are
/// kept when they carry nothing else and the client capabilities need no filtering.
pub fn forwardable_call(
    params: &Map<String, Value>,
    line: Bytes,
    caps: &Capabilities,
    pass_meta: &[String],
) -> Bytes {
    let meta = params.get("_meta").and_then(Value::as_object);
    let passes = |k: &str| PASSED_META.contains(&k) || pass_meta.iter().any(|p| p == k);
    let mut client_caps = meta
        .and_then(|m| m.get(CLIENT_CAPABILITIES_META))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let caps_changed = !caps.filter_client(&mut client_caps).is_empty();
    let meta_ok = meta.is_none_or(|m| m.keys().all(|k| passes(k)));
    let keys_ok = params.keys().all(|k| PASSED_PARAMS.contains(&k.as_str()));
    if meta_ok && keys_ok && !caps_changed {
        return line;
    }
    let Ok(msg) = message::parse(&line) else {
        return line;
    };
    let mut p = Map::new();
    for key in PASSED_PARAMS {
        if key == "_meta" {
            continue;
        }
        if let Some(v) = params.get(key) {
            p.insert(key.into(), v.clone());
        }
    }
    let mut m = Map::new();
    for (key, v) in meta.into_iter().flatten() {
        if passes(key) {
            m.insert(key.clone(), v.clone());
        }
    }
    if meta.is_some_and(|m| m.contains_key(CLIENT_CAPABILITIES_META)) {
        m.insert(CLIENT_CAPABILITIES_META.into(), Value::Object(client_caps));
    }
    p.insert("_meta".into(), Value::Object(m));
    let id = msg.id.map_or(Value::Null, |id| id.to_json_value());
    Bytes::from(
        serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": methods::TOOLS_CALL, "params": p}),
        )
        .unwrap_or_default(),
    )
}

/// The notification types of a `subscriptions/listen` filter that the policy passes: tool list
/// changes always (the gate invalidates on them anyway); prompt and resource ones only with
/// those surfaces. Returns the filter to forward and the names that were removed.
pub fn filter_listen(
    filter: &Map<String, Value>,
    caps: &Capabilities,
) -> (Map<String, Value>, Vec<String>) {
    let mut kept = Map::new();
    let mut removed = Vec::new();
    for (k, v) in filter {
        let allowed = match k.as_str() {
            "toolsListChanged" => true,
            "promptsListChanged" => caps.prompts,
            "resourcesListChanged" | "resourceSubscriptions" => caps.resources,
            _ => false,
        };
        if allowed {
            kept.insert(k.clone(), v.clone());
        } else {
            removed.push(k.clone());
        }
    }
    (kept, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(version: &str) -> Value {
        json!({"_meta": {PROTOCOL_VERSION_META: version, CLIENT_CAPABILITIES_META: {}}})
    }

    #[test]
    fn the_envelope_must_name_the_pinned_version_and_carry_capabilities() {
        let v = "2026-07-28";
        assert_eq!(check_envelope(Some(&envelope(v)), v), Ok(()));
        assert_eq!(
            check_envelope(Some(&envelope("2025-11-25")), v),
            Err(EnvelopeError::Version {
                requested: "2025-11-25".into()
            })
        );
        for bad in [
            json!({}),
            json!({"_meta": {PROTOCOL_VERSION_META: v}}),
            json!({"_meta": {PROTOCOL_VERSION_META: 7, CLIENT_CAPABILITIES_META: {}}}),
            json!({"_meta": {PROTOCOL_VERSION_META: v, CLIENT_CAPABILITIES_META: []}}),
        ] {
            assert!(
                matches!(
                    check_envelope(Some(&bad), v),
                    Err(EnvelopeError::Malformed(_))
                ),
                "{bad}"
            );
        }
        assert!(check_envelope(None, v).is_err());
    }

    #[test]
    fn unsupported_version_names_the_pinned_one() {
        let b = unsupported_version(Some(&Id::Int(3)), "2030-01-01", "2026-07-28", "no");
        let v: Value = serde_json::from_slice(&b).unwrap();
        assert_eq!(v["error"]["code"], -32022);
        assert_eq!(
            v["error"]["data"],
            json!({"supported": ["2026-07-28"], "requested": "2030-01-01"})
        );
    }

    #[test]
    fn own_requests_carry_the_envelope() {
        let p = stamp(Some(json!({"cursor": "c"})), "2026-07-28");
        assert_eq!(p["cursor"], "c");
        assert_eq!(p["_meta"][PROTOCOL_VERSION_META], "2026-07-28");
        assert_eq!(p["_meta"][CLIENT_CAPABILITIES_META], json!({}));
        assert!(check_envelope(Some(&stamp(None, "2026-07-28")), "2026-07-28").is_ok());
    }

    #[test]
    fn server_info_in_results_is_compared_when_present() {
        let pinned = json!({"name": "s", "version": "1"});
        let h = head(
            r#"{"_meta":{"io.modelcontextprotocol/serverInfo":{"version":"1","name":"s"}},"resultType":"complete"}"#,
        );
        assert_eq!(h.result_type.as_deref(), Some("complete"));
        assert!(check_server_info(h.server_info.as_ref(), &pinned).is_ok());
        assert!(check_server_info(None, &pinned).is_ok());
        let err =
            check_server_info(Some(&json!({"name": "s", "version": "2"})), &pinned).unwrap_err();
        assert!(err.contains("/serverInfo/version"), "{err}");
        // Not an object, or no _meta: nothing to compare.
        assert!(head("[1,2]").server_info.is_none());
        assert!(head(r#"{"content":[]}"#).server_info.is_none());
    }

    #[test]
    fn a_live_discover_must_support_the_pinned_version_and_keep_the_identity() {
        let info = json!({"name": "s", "version": "1"});
        let live = json!({"supportedVersions": ["2026-07-28"], "capabilities": {},
                          "_meta": {SERVER_INFO_META: info}});
        assert!(check_discover(&live, "2026-07-28", &info).is_ok());
        assert!(check_discover(
            &json!({"supportedVersions": ["2027-01-01"]}),
            "2026-07-28",
            &info
        )
        .unwrap_err()
        .contains("no longer supports"));
        assert!(check_discover(&json!({}), "2026-07-28", &info).is_err());
        let other = json!({"supportedVersions": ["2026-07-28"], "_meta": {SERVER_INFO_META: {"name": "x", "version": "1"}}});
        assert!(check_discover(&other, "2026-07-28", &info).is_err());
    }

    fn modern_pin() -> ModernPin {
        ModernPin::from_entry(&json!({
            "capabilities": {"tools": {"listChanged": true}, "prompts": {}},
            "discover": {"supportedVersions": ["2026-07-28"], "ttlMs": 5, "cacheScope": "public"},
            "toolPages": [{"tools": [], "ttlMs": 7, "cacheScope": "private", "resultType": "complete"}]
        }))
        .unwrap()
    }

    #[test]
    fn discover_and_list_answers_come_from_the_snapshot() {
        let info = json!({"name": "s", "version": "1"});
        let m = modern_pin();
        assert_eq!(
            m.list_cache,
            json!({"ttlMs": 7, "cacheScope": "private"})
                .as_object()
                .unwrap()
                .clone()
        );
        let (d, removed) = discover_answer(
            "2026-07-28",
            &info,
            &m,
            Some(&json!("Hi")),
            &Capabilities::default(),
        );
        assert_eq!(removed, vec!["prompts".to_string()]);
        assert_eq!(
            d,
            json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": true}},
                   "instructions": "Hi", "ttlMs": 5, "cacheScope": "public", "resultType": "complete",
                   "_meta": {SERVER_INFO_META: info}})
        );
        let mut list = json!({"tools": []});
        decorate_list(&mut list, &info, &m);
        assert_eq!(list["ttlMs"], 7);
        assert_eq!(list["resultType"], "complete");
        assert!(ModernPin::from_entry(&json!({"toolPages": []})).is_err());
    }

    #[test]
    fn cache_fields_are_stripped_for_comparison_only_where_they_live() {
        let mut entry = json!({"discover": {"supportedVersions": ["v"], "ttlMs": 1, "cacheScope": "private"},
                               "toolPages": [{"tools": [{"name": "t", "ttlMs": 3}], "ttlMs": 2, "cacheScope": "public"}]});
        strip_cache_fields(&mut entry);
        assert_eq!(
            entry,
            json!({"discover": {"supportedVersions": ["v"]}, "toolPages": [{"tools": [{"name": "t", "ttlMs": 3}]}]})
        );
    }

    #[test]
    fn input_requests_for_blocked_capabilities_are_blocked() {
        let none = Capabilities::default();
        let all = Capabilities {
            sampling: true,
            elicitation: true,
            roots: true,
            ..Capabilities::default()
        };
        assert_eq!(
            classify_input_required(&json!({"content": []}), &none),
            InputRequired::No
        );
        assert_eq!(
            classify_input_required(&json!({"resultType": "complete"}), &none),
            InputRequired::No
        );
        for method in [
            "sampling/createMessage",
            "elicitation/create",
            "roots/list",
            "tasks/get",
        ] {
            let r = json!({"resultType": "input_required", "requestState": "s",
                           "inputRequests": {"k": {"method": method, "params": {}}}});
            match classify_input_required(&r, &none) {
                InputRequired::Blocked { why } => assert!(why.contains(method), "{why}"),
                other => panic!("{method}: {other:?}"),
            }
            let expected = method != "tasks/get";
            assert_eq!(
                matches!(
                    classify_input_required(&r, &all),
                    InputRequired::Allowed { .. }
                ),
                expected,
                "{method}"
            );
        }
        assert_eq!(
            classify_input_required(
                &json!({"resultType": "input_required", "requestState": "s"}),
                &none
            ),
            InputRequired::Allowed {
                request_state: Some("s".into())
            }
        );
        let huge = "x".repeat(MAX_REQUEST_STATE + 1);
        assert!(matches!(
            classify_input_required(
                &json!({"resultType": "input_required", "requestState": huge}),
                &none
            ),
            InputRequired::Blocked { .. }
        ));
        assert!(matches!(
            classify_input_required(
                &json!({"resultType": "input_required", "inputRequests": []}),
                &none
            ),
            InputRequired::Blocked { .. }
        ));
    }

    #[test]
    fn forwarded_calls_keep_the_envelope_and_drop_the_rest() {
        let caps = Capabilities::default();
        let plain = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "t", "arguments": {}, "requestState": "s", "inputResponses": {},
            "_meta": {PROTOCOL_VERSION_META: "2026-07-28", CLIENT_CAPABILITIES_META: {}, CLIENT_INFO_META: {"name": "c", "version": "1"}}}});
        let line = Bytes::from(serde_json::to_vec(&plain).unwrap());
        let params = plain["params"].as_object().unwrap();
        assert_eq!(forwardable_call(params, line.clone(), &caps, &[]), line);

        let mut extra = plain.clone();
        extra["params"]["_meta"]["traceparent"] = json!("00-abc");
        extra["params"]["_meta"][CLIENT_CAPABILITIES_META] =
            json!({"sampling": {}, "elicitation": {}});
        extra["params"]["task"] = json!({});
        let line = Bytes::from(serde_json::to_vec(&extra).unwrap());
        let out: Value = serde_json::from_slice(&forwardable_call(
            extra["params"].as_object().unwrap(),
            line,
            &caps,
            &[],
        ))
        .unwrap();
        assert_eq!(out["id"], 1);
        assert_eq!(out["params"]["requestState"], "s");
        assert!(out["params"].get("task").is_none());
        assert!(out["params"]["_meta"].get("traceparent").is_none());
        assert_eq!(out["params"]["_meta"][CLIENT_CAPABILITIES_META], json!({}));
        assert_eq!(out["params"]["_meta"][PROTOCOL_VERSION_META], "2026-07-28");
    }

    #[test]
    fn listen_filters_keep_tool_changes_only_by_default() {
        let f = json!({"toolsListChanged": true, "promptsListChanged": true, "resourceSubscriptions": ["file:///x"]});
        let (kept, removed) = filter_listen(f.as_object().unwrap(), &Capabilities::default());
        assert_eq!(Value::Object(kept), json!({"toolsListChanged": true}));
        assert_eq!(removed, vec!["promptsListChanged", "resourceSubscriptions"]);
    }

    #[test]
    fn hmac_matches_rfc_4231_and_tokens_bind_their_call() {
        // RFC 4231, test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let key = [7u8; 32];
        let t = approval_token(&key, 3, "abc");
        assert_eq!(approval_number(&t), Some(3));
        assert_ne!(
            t,
            approval_token(&key, 3, "abd"),
            "another call, another state"
        );
        assert_ne!(
            t,
            approval_token(&[8u8; 32], 3, "abc"),
            "another key, another state"
        );
        assert_eq!(approval_number("mcpguard.approval.v1.3.short"), None);
        assert_eq!(approval_number("server-state"), None);
    }
}
