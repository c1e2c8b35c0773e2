use std::sync::Arc;

use super::*;
use crate::gate::capabilities::Capabilities;
use crate::gate::session::Config;
use crate::gate::{pin, refusal};
use crate::snapshot::manifest::{Acceptance, Manifest};
use crate::wire::frame::Frame;

const V: &str = "2026-07-28";

fn info() -> Value {
    json!({"name": "fixture", "version": "1.0.0"})
}

fn echo() -> Value {
    json!({"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
           "outputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}})
}

fn ask() -> Value {
    json!({"name": "ask", "inputSchema": {"type": "object"}})
}

fn page(ttl: u64) -> Value {
    json!({"tools": [echo(), ask()], "ttlMs": ttl, "cacheScope": "private", "resultType": "complete",
           "_meta": {protocol::SERVER_INFO_META: info()}})
}

fn with_channels(review: &Value, channels: Value) -> Value {
    let mut r = review.clone();
    r["inputChannels"] = channels;
    r
}

fn pin() -> Arc<pin::Pin> {
    let review = json!({"reviewer": "r@example.test", "reviewedAt": "2026-11-01T00:00:00Z",
        "assertions": {"headless": true, "independentCalls": true, "modelBacked": false,
                       "sideEffects": [], "concurrency": "safe", "referenceBasedIO": true},
        "inputChannels": {}});
    let doc = json!({
        "profile": crate::snapshot::manifest::PROFILE, "protocolVersion": V,
        "capturedAt": "2026-11-01T00:00:00Z", "expiresAt": "2026-11-08T00:00:00Z",
        "servers": {"s": {
            "serverInfo": info(), "instructions": "Be nice.",
            "capabilities": {"tools": {"listChanged": true}, "prompts": {}},
            "discover": {"supportedVersions": [V], "ttlMs": 1000, "cacheScope": "private"},
            "toolPages": [page(1000)],
            "reviews": {"echo": with_channels(&review, json!({"/text": "data"})), "ask": review}
        }}
    });
    let now = "2026-11-02T00:00:00Z".parse().unwrap();
    Arc::new(pin::pin_from_manifest(Manifest::new(doc), "s", now, &Acceptance::default()).unwrap())
}

fn meta() -> Value {
    json!({protocol::PROTOCOL_VERSION_META: V, protocol::CLIENT_CAPABILITIES_META: {},
           protocol::CLIENT_INFO_META: {"name": "host", "version": "1"}})
}

struct T {
    s: Session,
    seen: super::super::Seen,
}

impl std::ops::Deref for T {
    type Target = super::super::Seen;
    fn deref(&self) -> &Self::Target {
        &self.seen
    }
}

impl std::ops::DerefMut for T {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.seen
    }
}

impl T {
    fn new(caps: Capabilities) -> T {
        // The tools of these tests are reads, so no call waits for a person's approval.
        Self::with_policy(
            caps,
            "[writes.tools.echo]\nside_effect = \"read\"\n[writes.tools.ask]\nside_effect = \"read\"\n",
        )
    }
    fn with_policy(caps: Capabilities, policy: &str) -> T {
        let policy = crate::policy::parse(policy, "test").unwrap();
        let config = Config {
            era: Era::Modern,
            capabilities: caps,
            policy: std::sync::Arc::new(policy),
            ..Config::new(Mode::Pinned(pin()))
        };
        T {
            s: Session::new(config, "n0nce"),
            seen: Default::default(),
        }
    }
    fn take(&mut self, out: Vec<Out>) {
        self.seen.take(out);
    }
    fn host_says(&mut self, v: Value) {
        let mut out = vec![];
        let line = Bytes::from(serde_json::to_vec(&v).unwrap());
        self.s.from_host(Frame::Line(line), &mut out);
        self.take(out);
    }
    fn server_says(&mut self, v: Value) {
        let mut out = vec![];
        let line = Bytes::from(serde_json::to_vec(&v).unwrap());
        self.s.from_server(Frame::Line(line), &mut out);
        self.take(out);
    }
    /// mcpguard's last own request of `method`.
    fn own(&self, method: &str) -> Value {
        self.server
            .iter()
            .rev()
            .find(|m| {
                m["method"] == method
                    && m["id"].as_str().is_some_and(|i| i.starts_with("mcpguard-"))
            })
            .cloned()
            .unwrap_or_else(|| panic!("no own {method}; diags: {:?}", self.diags))
    }
    fn answer_own(&mut self, method: &str, result: Value) {
        let id = self.own(method)["id"].clone();
        self.server_says(json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }
    fn request(&mut self, id: i64, method: &str, mut params: Value) {
        params["_meta"] = meta();
        self.host_says(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    }
    /// Lists the tools (which binds the review) and clears what was seen.
    fn bound(mut self) -> T {
        self.request(1, "tools/list", json!({}));
        self.answer_own("tools/list", page(5));
        assert!(self.s.bound, "{:?}", self.diags);
        self.host.clear();
        self.server.clear();
        self.server_raw.clear();
        self
    }
    /// Calls `tool`, lets mcpguard's re-list pass, and returns what the server got.
    fn call(&mut self, id: i64, tool: &str, extra: Value) -> Option<Value> {
        let mut params = json!({"name": tool, "arguments": {}});
        if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
            p.extend(e.clone());
        }
        self.request(id, "tools/call", params);
        if self.host.last().is_some_and(|h| h["id"] == id) {
            return None;
        }
        self.answer_own("tools/list", page(5));
        self.server
            .iter()
            .rev()
            .find(|m| m["id"] == id && m["method"] == "tools/call")
            .cloned()
    }
}

#[test]
fn every_request_carries_the_pinned_version_and_initialize_is_refused() {
    let mut t = T::new(Capabilities::default());
    t.host_says(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}));
    assert_eq!(t.host[0]["error"]["code"], -32022);
    assert_eq!(
        t.host[0]["error"]["data"],
        json!({"supported": [V], "requested": "2025-11-25"})
    );
    let m = t.host[0]["error"]["message"].as_str().unwrap();
    for part in [
        "asked for protocol 2025-11-25",
        "--protocol-version 2025-11-25",
    ] {
        assert!(m.contains(part), "both versions and the capture flag: {m}");
    }
    t.host_says(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}));
    assert_eq!(t.host[1]["error"]["code"], message::INVALID_PARAMS);
    let mut m = meta();
    m[protocol::PROTOCOL_VERSION_META] = json!("2027-01-01");
    t.host_says(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                       "params": {"name": "echo", "arguments": {}, "_meta": m}}));
    assert_eq!(t.host[2]["error"]["code"], -32022);
    assert_eq!(t.host[2]["error"]["data"]["requested"], "2027-01-01");
    assert!(
        t.server.is_empty(),
        "nothing reaches the server: {:?}",
        t.server
    );
}

#[test]
fn server_discover_is_answered_from_the_snapshot_after_the_live_one() {
    let mut t = T::new(Capabilities::default());
    t.request(1, "server/discover", json!({}));
    assert!(t.host.is_empty());
    // mcpguard's own requests carry the envelope, and it listens for list changes itself.
    let listen = t.own("subscriptions/listen");
    assert_eq!(
        listen["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    let discover = t.own("server/discover");
    assert_eq!(
        discover["params"]["_meta"][protocol::PROTOCOL_VERSION_META],
        V
    );
    t.answer_own(
        "server/discover",
        json!({"supportedVersions": [V], "capabilities": {"tools": {"listChanged": true}, "prompts": {}, "extra": {}},
               "instructions": "Be nice.", "ttlMs": 1, "cacheScope": "private", "resultType": "complete",
               "_meta": {protocol::SERVER_INFO_META: info()}}),
    );
    assert_eq!(
        t.host[0]["result"],
        json!({"supportedVersions": [V], "capabilities": {"tools": {"listChanged": true}},
               "instructions": "Be nice.", "ttlMs": 1000, "cacheScope": "private",
               "resultType": "complete", "_meta": {protocol::SERVER_INFO_META: info()}})
    );
    // The binding verification follows, as after a legacy handshake.
    t.answer_own("tools/list", page(1000));
    assert!(t.s.bound);
}

#[test]
fn a_live_discover_with_another_identity_fails_the_session() {
    let mut t = T::new(Capabilities::default());
    t.request(1, "server/discover", json!({}));
    t.answer_own(
        "server/discover",
        json!({"supportedVersions": [V], "capabilities": {},
               "_meta": {protocol::SERVER_INFO_META: {"name": "fixture", "version": "2.0.0"}}}),
    );
    assert_eq!(t.host[0]["error"]["code"], codes::VERIFICATION_FAILED);
    t.request(2, "tools/list", json!({}));
    assert_eq!(t.host[1]["error"]["code"], codes::PIN_MISMATCH);
}

#[test]
fn tools_list_carries_the_captured_cache_fields_and_calls_keep_their_bytes() {
    let mut t = T::new(Capabilities::default());
    t.request(1, "tools/list", json!({}));
    // The live page's cache fields differ from the captured ones: no drift.
    t.answer_own("tools/list", page(5));
    let r = &t.host[0]["result"];
    assert_eq!(r["tools"], json!([echo(), ask()]));
    assert_eq!(
        (r["ttlMs"].clone(), r["resultType"].clone()),
        (json!(1000), json!("complete"))
    );
    assert_eq!(r["_meta"][protocol::SERVER_INFO_META], info());
    let sent = t.call(2, "echo", json!({})).expect("forwarded");
    assert_eq!(sent["params"]["_meta"], meta());
    let raw = t.server_raw.last().unwrap().clone();
    assert!(
        raw.contains("\"io.modelcontextprotocol/clientInfo\""),
        "{raw}"
    );
    t.server_says(json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [], "structuredContent": {"text": "a"},
                         "resultType": "complete", "_meta": {protocol::SERVER_INFO_META: info()}}}));
    assert_eq!(
        t.host.last().unwrap()["result"]["structuredContent"]["text"],
        "a"
    );
}

#[test]
fn a_result_naming_another_server_is_withheld_and_ends_the_session() {
    let mut t = T::new(Capabilities::default()).bound();
    t.call(2, "echo", json!({})).expect("forwarded");
    t.server_says(json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [], "structuredContent": {"text": "a"},
                         "_meta": {protocol::SERVER_INFO_META: {"name": "evil", "version": "1.0.0"}}}}));
    let r = &t.host.last().unwrap()["result"];
    assert_eq!(r["isError"], true);
    assert_eq!(
        r["_meta"][crate::gate::refusal::REFUSAL_META]["outcomeKnown"],
        false
    );
    assert!(t.s.invalidated().is_some());
    t.request(3, "tools/list", json!({}));
    assert_eq!(t.host.last().unwrap()["error"]["code"], codes::PIN_MISMATCH);
}

fn input_required(method: &str) -> Value {
    json!({"resultType": "input_required", "requestState": "st-1",
           "inputRequests": {"k": {"method": method, "params": {}}}})
}

#[test]
fn input_requests_for_excluded_capabilities_never_reach_the_host() {
    for method in ["sampling/createMessage", "elicitation/create", "roots/list"] {
        let mut t = T::new(Capabilities::default()).bound();
        t.call(2, "ask", json!({})).expect("forwarded");
        t.server_says(json!({"jsonrpc": "2.0", "id": 2, "result": input_required(method)}));
        let r = &t.host.last().unwrap()["result"];
        assert_eq!(r["isError"], true, "{method}");
        assert_eq!(r["structuredContent"]["code"], code::CAPABILITY_DENIED);
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(method), "{text}");
        assert!(
            !t.host.iter().any(|h| h.to_string().contains("st-1")),
            "{method}"
        );
        assert_eq!(t.s.pending_host_requests(), 0);
    }
}

#[test]
fn allowed_input_requests_are_relayed_and_their_state_is_single_use() {
    let caps = Capabilities {
        elicitation: true,
        ..Capabilities::default()
    };
    let mut t = T::new(caps).bound();
    t.call(2, "ask", json!({})).expect("forwarded");
    t.server_says(
        json!({"jsonrpc": "2.0", "id": 2, "result": input_required("elicitation/create")}),
    );
    assert_eq!(
        t.host.last().unwrap()["result"],
        input_required("elicitation/create")
    );
    // A state the server never issued (or for another tool) is refused before dispatch.
    assert!(t
        .call(3, "ask", json!({"requestState": "forged"}))
        .is_none());
    assert_eq!(t.host.last().unwrap()["result"]["isError"], true);
    assert!(t.call(4, "echo", json!({"requestState": "st-1"})).is_none());
    // The real retry passes once, with its input responses.
    let retry = json!({"requestState": "st-1", "inputResponses": {"k": {"action": "accept", "content": {}}}});
    let sent = t.call(5, "ask", retry.clone()).expect("forwarded");
    assert_eq!(sent["params"]["inputResponses"], retry["inputResponses"]);
    assert!(t.call(6, "ask", retry).is_none(), "single use");
}

#[test]
fn list_changes_invalidate_on_any_stream_and_reach_the_host_only_on_its_own() {
    let mut t = T::new(Capabilities::default()).bound();
    t.request(
        7,
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
    );
    let listen = t.server.last().unwrap().clone();
    assert_eq!(
        listen["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    let ack = json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                     "params": {"notifications": {"toolsListChanged": true}, "_meta": {protocol::SUBSCRIPTION_ID_META: 7}}});
    t.server_says(ack.clone());
    assert_eq!(t.host.last().unwrap(), &ack);
    let own: Value = serde_json::from_str(t.s.modern.own_stream.as_deref().unwrap()).unwrap();
    t.call(2, "echo", json!({})).expect("forwarded");
    let before = t.host.len();
    t.server_says(
        json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                         "params": {"_meta": {protocol::SUBSCRIPTION_ID_META: own}}}),
    );
    assert_eq!(
        t.host.len(),
        before,
        "mcpguard's own stream stays with mcpguard"
    );
    assert!(t.s.invalidated().is_some());
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                         "params": {"_meta": {protocol::SUBSCRIPTION_ID_META: 7}}});
    t.server_says(changed.clone());
    assert_eq!(t.host.last().unwrap(), &changed);
    // The call in flight is indeterminate; a new one is refused.
    t.server_says(json!({"jsonrpc": "2.0", "id": 2, "result": {"structuredContent": {"text": "a"}, "content": []}}));
    let r = &t.host.last().unwrap()["result"];
    assert_eq!(
        r["_meta"][crate::gate::refusal::REFUSAL_META]["code"],
        code::UNKNOWN_DISPATCH_OUTCOME
    );
    assert!(t.call(3, "echo", json!({})).is_none());
    assert_eq!(
        t.host.last().unwrap()["result"]["_meta"][crate::gate::refusal::REFUSAL_META]["code"],
        code::REVIEW_INVALIDATED
    );
}

#[test]
fn the_server_sends_no_requests_in_the_modern_era() {
    let caps = Capabilities {
        sampling: true,
        ..Capabilities::default()
    };
    let mut t = T::new(caps).bound();
    t.server_says(
        json!({"jsonrpc": "2.0", "id": 0, "method": "sampling/createMessage", "params": {}}),
    );
    assert!(t.host.is_empty());
    assert_eq!(
        t.server.last().unwrap()["error"]["code"],
        message::INVALID_REQUEST
    );
}

/// `ask` is a write here (the policy classifies only `echo`).
fn writes_ask() -> T {
    T::with_policy(
        Capabilities::default(),
        "[writes.tools.echo]\nside_effect = \"read\"\n",
    )
    .bound()
}

fn call_ask(t: &mut T, id: i64, elicit: bool, arguments: Value, extra: Value) {
    let mut m = meta();
    if elicit {
        m[protocol::CLIENT_CAPABILITIES_META] = json!({"elicitation": {}});
    }
    let mut params = json!({"name": "ask", "arguments": arguments, "_meta": m});
    if let (Some(p), Some(e)) = (params.as_object_mut(), extra.as_object()) {
        p.extend(e.clone());
    }
    t.host_says(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
}

fn approve(state: &Value, approve: bool) -> Value {
    json!({"requestState": state, "inputResponses": {modern::APPROVAL_INPUT_KEY:
        {"action": "accept", "content": {"approve": approve}}}})
}

fn refusal(t: &T) -> Value {
    t.host.last().unwrap()["result"]["_meta"][refusal::REFUSAL_META]["code"].clone()
}

#[test]
fn a_modern_write_is_asked_through_input_required_and_its_approval_is_bound_and_single_use() {
    let mut t = writes_ask();
    call_ask(&mut t, 2, true, json!({"n": 1}), json!({}));
    let q = t.host.last().unwrap().clone();
    assert_eq!(q["id"], 2);
    assert_eq!(q["result"]["resultType"], "input_required", "{q}");
    let ask = &q["result"]["inputRequests"][modern::APPROVAL_INPUT_KEY];
    assert_eq!(ask["method"], "elicitation/create");
    assert!(ask["params"]["message"]
        .as_str()
        .unwrap()
        .contains("\"ask\""));
    let state = q["result"]["requestState"].clone();
    assert!(t.server.iter().all(|m| m["method"] != "tools/call"));

    // The retry with the approval goes on; the server never sees mcpguard's state.
    call_ask(&mut t, 3, true, json!({"n": 1}), approve(&state, true));
    t.answer_own("tools/list", page(5));
    let sent = t
        .server
        .iter()
        .find(|m| m["method"] == "tools/call")
        .expect("dispatched after the approval")
        .clone();
    assert!(sent["params"].get("requestState").is_none(), "{sent}");
    assert!(sent["params"].get("inputResponses").is_none(), "{sent}");

    // The same state again: used up.
    call_ask(&mut t, 4, true, json!({"n": 1}), approve(&state, true));
    assert_eq!(refusal(&t), "consent_required");

    // A fresh question, answered for other arguments: refused.
    call_ask(&mut t, 5, true, json!({"n": 1}), json!({}));
    let state = t.host.last().unwrap()["result"]["requestState"].clone();
    call_ask(&mut t, 6, true, json!({"n": 2}), approve(&state, true));
    assert_eq!(refusal(&t), "consent_required");

    // A forged state (the HMAC altered): refused.
    call_ask(&mut t, 7, true, json!({"n": 1}), json!({}));
    let mut forged = t.host.last().unwrap()["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let last = forged.pop().unwrap();
    forged.push(if last == '0' { '1' } else { '0' });
    call_ask(
        &mut t,
        8,
        true,
        json!({"n": 1}),
        approve(&json!(forged), true),
    );
    assert_eq!(refusal(&t), "consent_required");

    // Declined: refused.
    call_ask(&mut t, 9, true, json!({"n": 1}), json!({}));
    let state = t.host.last().unwrap()["result"]["requestState"].clone();
    call_ask(&mut t, 10, true, json!({"n": 1}), approve(&state, false));
    assert_eq!(refusal(&t), "consent_required");
    let dispatched = t
        .server
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .count();
    assert_eq!(dispatched, 1, "only the approved call reached the server");

    // A request whose client capabilities lack elicitation cannot be asked.
    call_ask(&mut t, 11, false, json!({"n": 1}), json!({}));
    assert_eq!(refusal(&t), "approval_required");
    assert_eq!(t.host.last().unwrap()["result"]["resultType"], "complete");
}

#[test]
fn the_input_required_question_can_be_read_in_three_lines() {
    let mut t = writes_ask();
    call_ask(
        &mut t,
        2,
        true,
        json!({"n": 1, "text": "b".repeat(300)}),
        json!({}),
    );
    let q = t.host.last().unwrap().clone();
    let message = q["result"]["inputRequests"][modern::APPROVAL_INPUT_KEY]["params"]["message"]
        .as_str()
        .unwrap()
        .to_string();
    let lines: Vec<&str> = message.lines().collect();
    assert!(lines[0].contains("\"ask\""), "{message}");
    assert!(
        lines[1].starts_with("Arguments: n=1, text=\"bbb") && lines[1].contains("(300 chars)"),
        "{message}"
    );
    assert!(
        lines[2].starts_with("Approve runs this one call once"),
        "{message}"
    );
    assert_eq!(lines[3], "");
}

#[test]
fn a_modern_client_without_elicitation_is_held_for_the_out_of_band_channels() {
    let mut t = writes_ask();
    t.s.config.out_of_band = vec![crate::policy::Channel::Terminal];
    t.s.config.instance = "9".into();
    call_ask(&mut t, 2, false, json!({"n": 1}), json!({}));
    assert!(t.host.iter().all(|m| m["id"] != 2), "held, not answered");
    assert_eq!(t.s.offers().len(), 1);
    let mut out = vec![];
    t.s.answer_offer(
        "9-1",
        true,
        crate::policy::Scope::Once,
        crate::policy::Channel::Terminal,
        &mut out,
    )
    .unwrap();
    t.take(out);
    t.answer_own("tools/list", page(5));
    assert!(t.server.iter().any(|m| m["method"] == "tools/call"));

    // A fast decline on the retry is the host's: the retry is held for the terminal.
    call_ask(&mut t, 3, true, json!({"n": 2}), json!({}));
    let state = t.host.last().unwrap()["result"]["requestState"].clone();
    let decline = json!({"requestState": state, "inputResponses": {modern::APPROVAL_INPUT_KEY: {"action": "decline"}}});
    call_ask(&mut t, 4, true, json!({"n": 2}), decline);
    assert!(t.host.iter().all(|m| m["id"] != 4), "held, not refused");
    let mut out = vec![];
    t.s.answer_offer(
        "9-2",
        false,
        crate::policy::Scope::Once,
        crate::policy::Channel::Terminal,
        &mut out,
    )
    .unwrap();
    t.take(out);
    assert_eq!(refusal(&t), "consent_required");
}
