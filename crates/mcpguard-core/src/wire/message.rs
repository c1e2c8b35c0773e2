//! A read-only, lossless view of one JSON-RPC line.
//!
//! The view borrows from the original bytes: `params`, `result` and `error` stay raw JSON text
//! (`Raw`), so classifying a message costs one validating scan and no tree building, and the
//! original bytes remain the thing that is forwarded. Members are parsed strictly: a repeated
//! top-level member name is an error, because two peers that resolve duplicates differently
//! would see two different messages.
//!
//! Two readers produce the view. `wire::envelope` is the fast path every line tries first: one
//! hand-written scan that only ever accepts, and declines whatever it cannot judge exactly. The
//! serde_json path below (`parse_with_serde`) is the reference: it judges every declined line,
//! so every refusal and its error text come from it, and the differential test
//! (`tests/integration/envelope.rs`) holds the fast path to it.
//!
//! Knows the JSON-RPC shapes and nothing of MCP methods' meaning, the gate, the snapshot or IO.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::envelope;

/// The JSON text of one value that an envelope reader has validated (as serde_json's
/// `RawValue` would be). Only this module makes one from a line, so holding a `Raw` is proof
/// that its text is valid JSON; `Raw::validate` makes one from other text.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Raw<'a>(&'a str);

impl<'a> Raw<'a> {
    /// The raw JSON text.
    pub fn get(&self) -> &'a str {
        self.0
    }

    /// Checks that `text` is one JSON value (surrounding whitespace allowed, as serde_json
    /// allows it) and wraps it; the error is serde_json's.
    pub fn validate(text: &'a str) -> Result<Raw<'a>, String> {
        serde_json::from_str::<&RawValue>(text)
            .map(|raw| Raw(raw.get()))
            .map_err(|e| e.to_string())
    }
}

impl fmt::Debug for Raw<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Raw({})", self.0)
    }
}

/// A JSON-RPC request id. MCP allows strings and integers, never null.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Id {
    Int(i64),
    Str(String),
}

/// Ids are hashed with a cheap multiply-rotate hash rather than SipHash: the correlation tables
/// sit on the message path, and hash flooding is not a concern because a peer can only fill the
/// table it is answered from (and is bounded by its own pending requests).
impl std::hash::Hash for Id {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Id::Int(n) => state.write_u64(*n as u64),
            Id::Str(s) => {
                state.write_u8(0xff);
                state.write(s.as_bytes());
            }
        }
    }
}

/// A fast, non-cryptographic hasher for [`Id`] keys (FxHash's multiply-rotate step).
#[derive(Default, Clone, Copy)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A map keyed by request id.
pub type IdMap<V> = std::collections::HashMap<Id, V, std::hash::BuildHasherDefault<IdHasher>>;

impl Id {
    /// The id as a JSON value.
    pub fn to_json_value(&self) -> serde_json::Value {
        match self {
            Id::Int(n) => serde_json::Value::from(*n),
            Id::Str(s) => serde_json::Value::String(s.clone()),
        }
    }

    /// The id as JSON text, for building responses.
    pub fn to_json(&self) -> String {
        match self {
            Id::Int(n) => n.to_string(),
            Id::Str(s) => serde_json::Value::String(s.clone()).to_string(),
        }
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

/// What kind of JSON-RPC message a line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
    Response,
    ErrorResponse,
}

/// The parsed envelope of one message. Everything below the top level is left as raw text.
#[derive(Debug)]
pub struct Message<'a> {
    pub kind: Kind,
    pub id: Option<Id>,
    pub method: Option<Cow<'a, str>>,
    pub params: Option<Raw<'a>>,
    pub result: Option<Raw<'a>>,
    pub error: Option<Raw<'a>>,
    /// Top-level member names JSON-RPC does not define, in order of appearance.
    pub unknown_members: Vec<String>,
}

/// Why a line is not an acceptable JSON-RPC message. `id` is set whenever an id could still be
/// read, so the sender can be answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub reason: InvalidReason,
    pub id: Option<Id>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvalidReason {
    /// The bytes are not UTF-8; `offset` is the first bad byte.
    NotUtf8 { offset: usize },
    /// Not JSON at all, or JSON with an error at some position.
    NotJson(String),
    /// A JSON array: batching was removed from MCP in 2025-06-18.
    Batch { ids: Vec<Id> },
    /// JSON but not an object.
    NotObject,
    /// Arrays and objects nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// Valid JSON that is not a valid JSON-RPC 2.0 message (missing `jsonrpc`, null id, ...).
    NotJsonRpc(String),
}

impl fmt::Display for InvalidReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidReason::NotUtf8 { offset } => {
                write!(f, "the line is not valid UTF-8 (first bad byte at offset {offset})")
            }
            InvalidReason::NotJson(e) => write!(f, "the line is not valid JSON ({e})"),
            InvalidReason::Batch { .. } => f.write_str(
                "JSON-RPC batches (arrays) are not part of MCP since 2025-06-18; send one message per line",
            ),
            InvalidReason::NotObject => f.write_str("a JSON-RPC message must be a JSON object"),
            InvalidReason::TooDeep => write!(
                f,
                "arrays and objects are nested more than {MAX_DEPTH} levels deep"
            ),
            InvalidReason::NotJsonRpc(e) => write!(f, "not a valid JSON-RPC 2.0 message: {e}"),
        }
    }
}

impl InvalidReason {
    /// The JSON-RPC error code this failure maps to.
    pub fn code(&self) -> i64 {
        match self {
            InvalidReason::NotUtf8 { .. } | InvalidReason::NotJson(_) => PARSE_ERROR,
            _ => INVALID_REQUEST,
        }
    }
}

/// Deepest nesting of arrays and objects accepted in a message: the strict parser's limit, so
/// every message that passes can also be parsed in full later.
pub const MAX_DEPTH: usize = crate::protocol::MAX_JSON_DEPTH;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
/// "Internal error": a request whose decision panicked in mcpguard (`process::proxy` answers it
/// and ends the session).
pub const INTERNAL_ERROR: i64 = -32603;

/// Parses the envelope of one line: the one-pass reader first, the serde_json path for every
/// line it declines (so for every refusal).
pub fn parse(line: &[u8]) -> Result<Message<'_>, Invalid> {
    if let Ok(text) = std::str::from_utf8(line) {
        if let Some(env) = envelope::read(text, MAX_DEPTH) {
            return RawEnvelope {
                jsonrpc: env.jsonrpc.map(Cow::Borrowed),
                id: env.id,
                method: env.method.map(Cow::Borrowed),
                params: env.params.map(Raw),
                result: env.result.map(Raw),
                error: env.error.map(Raw),
                // Almost every line has none; skip the iterator then.
                unknown: if env.unknown.is_empty() {
                    Vec::new()
                } else {
                    env.unknown.into_iter().map(str::to_string).collect()
                },
            }
            .into_message();
        }
    }
    parse_with_serde(line)
}

/// The reference envelope parse: serde_json's streaming deserializer over the top-level members
/// (`RawValue` for the values below them), with mcpguard's own checks around it (UTF-8 with the
/// offset of the first bad byte, the nesting bound, batches, duplicate top-level members). Every
/// line the fast reader declines is judged here, and the differential test uses it as the
/// oracle.
pub fn parse_with_serde(line: &[u8]) -> Result<Message<'_>, Invalid> {
    let text = match std::str::from_utf8(line) {
        Ok(t) => t,
        Err(e) => {
            // Try to still find the id so the sender learns which request failed.
            let lossy = String::from_utf8_lossy(line);
            return Err(Invalid {
                reason: InvalidReason::NotUtf8 {
                    offset: e.valid_up_to(),
                },
                id: salvage_id(&lossy),
            });
        }
    };
    if exceeds_depth(line, MAX_DEPTH) {
        return Err(Invalid {
            reason: InvalidReason::TooDeep,
            id: salvage_id_from_prefix(text),
        });
    }
    let first = text.trim_start().as_bytes().first().copied();
    if first == Some(b'[') {
        return Err(batch(text));
    }
    if first != Some(b'{') {
        return Err(match serde_json::from_str::<IgnoredAny>(text) {
            Ok(_) => Invalid {
                reason: InvalidReason::NotObject,
                id: None,
            },
            Err(e) => Invalid {
                reason: InvalidReason::NotJson(e.to_string()),
                id: None,
            },
        });
    }
    let raw: RawEnvelope<'_> = match serde_json::from_str(text) {
        Ok(r) => r,
        Err(e) => {
            let id = salvage_id(text);
            let reason = if e.is_data() {
                InvalidReason::NotJsonRpc(e.to_string())
            } else {
                InvalidReason::NotJson(e.to_string())
            };
            return Err(Invalid { reason, id });
        }
    };
    raw.into_message()
}

/// Whether arrays/objects nest deeper than `max`. One pass over the bytes, tracking strings so
/// that brackets inside them do not count. The envelope parser skips nested values without a
/// depth limit, so without this check a deeply nested message would reach the server, whose
/// parser may recurse until its stack overflows.
fn exceeds_depth(bytes: &[u8], max: usize) -> bool {
    // Fast path: a line with no more opening brackets than the limit cannot nest deeper, and
    // counting them is a vectorized search. Almost every message takes this path.
    if memchr::memchr2_iter(b'[', b'{', bytes)
        .take(max + 1)
        .count()
        <= max
    {
        return false;
    }
    // Exact pass: string contents are skipped with a vectorized search for the closing quote
    // or an escape, so long descriptions cost little; only structure is looked at byte by byte.
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i += 1;
                loop {
                    match memchr::memchr2(b'"', b'\\', &bytes[i.min(bytes.len())..]) {
                        // An unterminated string is for the JSON parser to reject.
                        None => return false,
                        Some(j) if bytes[i + j] == b'\\' => i += j + 2,
                        Some(j) => {
                            i += j + 1;
                            break;
                        }
                    }
                }
                continue;
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    false
}

fn batch(text: &str) -> Invalid {
    let ids = serde_json::from_str::<Vec<&RawValue>>(text)
        .map(|items| {
            items
                .iter()
                .filter_map(|item| salvage_id(item.get()))
                .collect()
        })
        .unwrap_or_default();
    Invalid {
        reason: InvalidReason::Batch { ids },
        id: None,
    }
}

/// Best effort: reads a valid top-level `id` from text that failed strict parsing (an over-long
/// prefix, a bad member elsewhere). Only used to address an error response.
pub fn salvage_id(text: &str) -> Option<Id> {
    // A lenient pass over complete JSON: accept duplicates and anything else, look at `id` only.
    if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(text) {
        return map.get("id").and_then(id_from_value);
    }
    salvage_id_from_prefix(text)
}

fn id_from_value(v: &serde_json::Value) -> Option<Id> {
    match v {
        serde_json::Value::String(s) => Some(Id::Str(s.clone())),
        serde_json::Value::Number(n) => n.as_i64().map(Id::Int),
        _ => None,
    }
}

/// Walks the top-level members of a possibly truncated object and returns `id` if it occurs
/// before the text runs out. Values are skipped with serde_json's own scanner, one member at a
/// time, so a truncated tail only loses the members it cuts.
fn salvage_id_from_prefix(text: &str) -> Option<Id> {
    let mut rest = text.trim_start().strip_prefix('{')?;
    loop {
        rest = rest.trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<String>();
        let key = stream.next()?.ok()?;
        rest = rest[stream.byte_offset()..]
            .trim_start()
            .strip_prefix(':')?;
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<&RawValue>();
        let value = values.next()?.ok()?;
        if key == "id" {
            return serde_json::from_str::<serde_json::Value>(value.get())
                .ok()
                .as_ref()
                .and_then(id_from_value);
        }
        rest = &rest[values.byte_offset()..];
    }
}

/// The top-level members as they appear, before validation of their combination.
struct RawEnvelope<'a> {
    jsonrpc: Option<Cow<'a, str>>,
    id: Option<&'a str>,
    method: Option<Cow<'a, str>>,
    params: Option<Raw<'a>>,
    result: Option<Raw<'a>>,
    error: Option<Raw<'a>>,
    unknown: Vec<String>,
}

impl<'a> RawEnvelope<'a> {
    fn into_message(self) -> Result<Message<'a>, Invalid> {
        let invalid = |msg: &str, id: Option<Id>| Invalid {
            reason: InvalidReason::NotJsonRpc(msg.to_string()),
            id,
        };
        let id = match (self.id, self.id.and_then(fast_id)) {
            (None, _) => None,
            (Some(_), Some(id)) => Some(id),
            (Some(raw), None) => match serde_json::from_str::<serde_json::Value>(raw) {
                Ok(serde_json::Value::Null) => {
                    return Err(invalid(
                        "the id is null; MCP ids are strings or integers",
                        None,
                    ))
                }
                Ok(v) => match id_from_value(&v) {
                    Some(id) => Some(id),
                    None => return Err(invalid("the id must be a string or an integer", None)),
                },
                Err(_) => return Err(invalid("the id is not valid JSON", None)),
            },
        };
        if self.jsonrpc.as_deref() != Some("2.0") {
            return Err(invalid("the \"jsonrpc\" member must be \"2.0\"", id));
        }
        let kind = match (&self.method, &self.result, &self.error, &id) {
            (Some(_), None, None, Some(_)) => Kind::Request,
            (Some(_), None, None, None) => Kind::Notification,
            (None, Some(_), None, Some(_)) => Kind::Response,
            (None, None, Some(_), _) => Kind::ErrorResponse,
            (None, Some(_), None, None) => {
                return Err(invalid("a response needs the id of its request", None))
            }
            (None, None, None, _) => {
                return Err(invalid(
                    "a message needs \"method\", \"result\" or \"error\"",
                    id,
                ))
            }
            _ => {
                return Err(invalid(
                    "a message cannot combine \"method\", \"result\" and \"error\"",
                    id,
                ))
            }
        };
        if kind != Kind::Request && kind != Kind::Notification && self.params.is_some() {
            return Err(invalid("a response cannot carry \"params\"", id));
        }
        Ok(Message {
            kind,
            id,
            method: self.method,
            params: self.params,
            result: self.result,
            error: self.error,
            unknown_members: self.unknown,
        })
    }
}

/// The common ids without building a `serde_json::Value`: a plain integer, or a string with no
/// escapes. The text is a validated `RawValue`, so a leading quote means a whole string; anything
/// else (escapes, fractions, exponents, out-of-range numbers, null) takes the general path.
fn fast_id(text: &str) -> Option<Id> {
    if let Some(inner) = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        return (!inner.contains('\\')).then(|| Id::Str(inner.to_string()));
    }
    // Up to 18 digits cannot overflow an i64, so they are summed here (the text is validated
    // JSON: no leading zeros, at most one leading minus); longer numbers take the general parse.
    let (negative, digits) = match text.as_bytes() {
        [b'-', rest @ ..] => (true, rest),
        all => (false, all),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits.len() > 18 {
        // It may not fit: the standard parse decides.
        return text.parse().ok().map(Id::Int);
    }
    let n = digits
        .iter()
        .fold(0i64, |n, d| n * 10 + i64::from(d - b'0'));
    // serde_json reads `-0` as a float, which is not an id: the general path says so.
    match (negative, n) {
        (true, 0) => None,
        (true, n) => Some(Id::Int(-n)),
        (false, n) => Some(Id::Int(n)),
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawEnvelope<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EnvelopeVisitor(std::marker::PhantomData))
    }
}

struct EnvelopeVisitor<'a>(std::marker::PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for EnvelopeVisitor<'a> {
    type Value = RawEnvelope<'a>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        let mut env = RawEnvelope {
            jsonrpc: None,
            id: None,
            method: None,
            params: None,
            result: None,
            error: None,
            unknown: Vec::new(),
        };
        fn raw(value: &RawValue) -> Raw<'_> {
            Raw(value.get())
        }
        fn set<T, E: de::Error>(slot: &mut Option<T>, v: T, name: &str) -> Result<(), E> {
            if slot.is_some() {
                return Err(E::custom(format_args!("duplicate member \"{name}\"")));
            }
            *slot = Some(v);
            Ok(())
        }
        while let Some(key) = map.next_key::<MaybeBorrowed<'a>>()? {
            match key.0.as_ref() {
                "jsonrpc" => set(
                    &mut env.jsonrpc,
                    map.next_value::<MaybeBorrowed>()?.0,
                    "jsonrpc",
                )?,
                "id" => set(&mut env.id, map.next_value::<&'a RawValue>()?.get(), "id")?,
                "method" => set(
                    &mut env.method,
                    map.next_value::<MaybeBorrowed>()?.0,
                    "method",
                )?,
                "params" => set(&mut env.params, raw(map.next_value()?), "params")?,
                "result" => set(&mut env.result, raw(map.next_value()?), "result")?,
                "error" => set(&mut env.error, raw(map.next_value()?), "error")?,
                other => {
                    if env.unknown.iter().any(|k| k == other) {
                        return Err(de::Error::custom(format_args!(
                            "duplicate member \"{other}\""
                        )));
                    }
                    env.unknown.push(other.to_string());
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(env)
    }
}

/// A string that borrows from the input when it has no escapes.
struct MaybeBorrowed<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for MaybeBorrowed<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = MaybeBorrowed<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(MaybeBorrowed(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(MaybeBorrowed(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V(std::marker::PhantomData))
    }
}

/// Builds a JSON-RPC error response line (without the newline).
pub fn error_response(
    id: Option<&Id>,
    code: i64,
    message: &str,
    data: Option<&serde_json::Value>,
) -> Vec<u8> {
    let mut error = serde_json::json!({ "code": code, "message": message });
    if let Some(d) = data {
        error["data"] = d.clone();
    }
    let id = id.map_or(serde_json::Value::Null, Id::to_json_value);
    serde_json::to_vec(&serde_json::json!({ "jsonrpc": "2.0", "id": id, "error": error }))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(line: &str) -> Result<(Kind, Option<Id>, Option<String>), InvalidReason> {
        parse(line.as_bytes())
            .map(|m| (m.kind, m.id, m.method.map(|m| m.into_owned())))
            .map_err(|e| e.reason)
    }

    #[test]
    fn classifies_messages() {
        let ok = |k, id: Option<Id>, m: Option<&str>| Ok((k, id, m.map(str::to_string)));
        let cases: Vec<(&str, Result<_, InvalidReason>)> = vec![
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
                ok(Kind::Request, Some(Id::Int(1)), Some("ping")),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"x","params":{}}"#,
                ok(Kind::Request, Some(Id::Str("a".into())), Some("x")),
            ),
            (
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
                ok(Kind::Notification, None, Some("notifications/initialized")),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
                ok(Kind::Response, Some(Id::Int(7)), None),
            ),
            (
                r#"{"jsonrpc":"2.0","id":7,"error":{"code":1,"message":"m"}}"#,
                ok(Kind::ErrorResponse, Some(Id::Int(7)), None),
            ),
            (
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"m"}}"#,
                Err(InvalidReason::NotJsonRpc(
                    "the id is null; MCP ids are strings or integers".into(),
                )),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"\u0061","method":"m\u0065"}"#,
                ok(Kind::Request, Some(Id::Str("a".into())), Some("me")),
            ),
        ];
        for (line, expected) in cases {
            assert_eq!(kind(line), expected, "{line}");
        }
    }

    #[test]
    fn rejects_bad_lines_and_keeps_the_id_where_it_can() {
        let cases: Vec<(&[u8], &str, Option<Id>)> = vec![
            (b"not json", "NotJson", None),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"x\",",
                "NotJson",
                Some(Id::Int(3)),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"\xff\"}",
                "NotUtf8",
                Some(Id::Int(4)),
            ),
            (
                b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}]",
                "Batch",
                None,
            ),
            (b"42", "NotObject", None),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"a\"}",
                "NotJsonRpc",
                None,
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"a\"}",
                "NotJsonRpc",
                None,
            ),
            (
                b"{\"id\":5,\"method\":\"a\"}",
                "NotJsonRpc",
                Some(Id::Int(5)),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"a\",\"method\":\"b\"}",
                "NotJsonRpc",
                Some(Id::Int(6)),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":6,\"x\":1,\"x\":2,\"method\":\"b\"}",
                "NotJsonRpc",
                Some(Id::Int(6)),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"a\",\"result\":{}}",
                "NotJsonRpc",
                Some(Id::Int(8)),
            ),
        ];
        for (line, want, want_id) in cases {
            let err = parse(line).expect_err(&String::from_utf8_lossy(line));
            let got = format!("{:?}", err.reason);
            assert!(
                got.starts_with(want),
                "{}: {got}",
                String::from_utf8_lossy(line)
            );
            assert_eq!(err.id, want_id, "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn batch_reports_member_ids() {
        let err = parse(
            br#"[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"n"},{"id":"z"}]"#,
        )
        .unwrap_err();
        assert_eq!(
            err.reason,
            InvalidReason::Batch {
                ids: vec![Id::Int(1), Id::Str("z".into())]
            }
        );
    }

    #[test]
    fn unknown_members_are_reported_not_dropped() {
        let m =
            parse(br#"{"jsonrpc":"2.0","id":1,"method":"a","extra":{"deep":[1]},"z":0}"#).unwrap();
        assert_eq!(
            m.unknown_members,
            vec!["extra".to_string(), "z".to_string()]
        );
    }

    #[test]
    fn salvages_id_from_a_truncated_prefix() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"x":"aaaa"#,
                Some(Id::Int(12)),
            ),
            (
                r#"{"method":"tools/call","id":"abc","params":{"#,
                Some(Id::Str("abc".into())),
            ),
            (r#"{"params":{"x":"aaaa"#, None),
            (r#"{"jsonrpc":"2.0","i"#, None),
        ];
        for (text, want) in cases {
            assert_eq!(salvage_id(text), want, "{text}");
        }
    }

    #[test]
    fn depth_is_counted_outside_strings_only() {
        let ok = format!(
            r#"{{"jsonrpc":"2.0","method":"n","params":{{"s":"{}","d":{}{}}}}}"#,
            "[{".repeat(500),
            "[".repeat(90),
            "]".repeat(90)
        );
        assert!(parse(ok.as_bytes()).is_ok());
        let esc = r#"{"jsonrpc":"2.0","method":"n","params":{"s":"\\"}}"#;
        assert!(parse(esc.as_bytes()).is_ok());
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"n","params":{}{}}}"#,
            "[".repeat(127),
            "]".repeat(127)
        );
        let err = parse(deep.as_bytes()).unwrap_err();
        assert_eq!(
            (err.reason, err.id),
            (InvalidReason::TooDeep, Some(Id::Int(1)))
        );
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"a","params":{}{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(parse(deep.as_bytes()).is_err());
    }

    #[test]
    fn the_fast_id_path_agrees_with_the_general_one() {
        for text in [
            "0",
            "-1",
            "42",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "1.0",
            "1e3",
            "\"a\"",
            "\"\"",
            "\"a\\\"b\"",
            "\"\\u0041\"",
            "null",
            "-0",
            "-00",
            "123456789012345678",
            "-123456789012345678",
            "1234567890123456789",
            "-1234567890123456789",
            "99999999999999999999",
        ] {
            let general = serde_json::from_str::<serde_json::Value>(text)
                .ok()
                .and_then(|v| id_from_value(&v));
            if let Some(fast) = fast_id(text) {
                assert_eq!(Some(fast), general, "{text}");
            }
            let line = format!("{{\"jsonrpc\":\"2.0\",\"id\":{text},\"method\":\"ping\"}}");
            assert_eq!(
                parse(line.as_bytes()).ok().and_then(|m| m.id),
                general,
                "{text}"
            );
        }
    }
}
