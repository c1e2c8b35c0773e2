//! The decision core of one proxied connection, free of IO.
//!
//! The IO driver (`proxy`) feeds it frames from the host and from the server and executes what
//! it returns: bytes for the host, bytes for the server, diagnostics for stderr. Keeping every
//! decision here, as plain functions of values, lets unit tests check whole conversations without
//! processes, and keeps the driver small enough to read in one sitting.
//!
//! Two independent id spaces exist: requests from the host to the server, and requests from the
//! server to the host (servers number their own requests 0, 1, 2…, colliding numerically with
//! host ids). Requests that mcpguard originates towards the server use string ids carrying a
//! per-process nonce, so they cannot collide with the host's; a host request that uses that
//! prefix is refused rather than risk confusing the two.

use bytes::Bytes;

use crate::frame::Frame;
use crate::message::{self, Id, IdMap, Invalid, InvalidReason, Kind, Message};

/// JSON-RPC error codes that mcpguard itself returns. They sit outside -32768..-32000, which
/// JSON-RPC and MCP reserve, as the MCP error-code policy asks of application codes.
pub mod codes {
    /// The server exited or closed its output before answering the request.
    pub const SERVER_GONE: i64 = -31001;
    /// The message was larger than the configured limit.
    pub const TOO_LARGE: i64 = -31002;
    /// The request id is already in use by another pending request, or uses mcpguard's prefix.
    pub const ID_CONFLICT: i64 = -31003;
    /// The server's response to this request could not be relayed (malformed or over-long).
    pub const BAD_UPSTREAM_RESPONSE: i64 = -31004;
}

/// Which MCP protocol era the connection is pinned to. The era changes the lifecycle (the legacy
/// era has `initialize`; the 2026-07-28 era is stateless) and is decided before any byte flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// Protocol revisions up to and including 2025-11-25.
    Legacy,
    /// Protocol revision 2026-07-28 and later (no `initialize`).
    Modern,
}

/// Severity of a diagnostic line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error,
    Warn,
    Info,
    Debug,
}

/// One thing the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// Write this message (without newline) to the host.
    Host(Bytes),
    /// Write this message (without newline) to the server.
    Server(Bytes),
    /// Print a diagnostic on stderr.
    Diag(Level, String),
}

/// Why mcpguard sent a request of its own; decides what happens with the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purpose {
    /// A liveness probe; the response is only logged.
    Ping,
}

#[derive(Debug)]
struct Pending {
    method: Box<str>,
}

/// Limits the core enforces.
#[derive(Debug, Clone)]
pub struct Config {
    pub max_message_bytes: usize,
    pub era: Era,
}

/// The state of one connection.
#[derive(Debug)]
pub struct Session {
    config: Config,
    /// Requests from the host that the server has not answered yet.
    host_requests: IdMap<Pending>,
    /// Requests from the server that the host has not answered yet.
    server_requests: IdMap<Pending>,
    /// Requests mcpguard sent to the server itself.
    own_requests: IdMap<Purpose>,
    own_prefix: String,
    next_own: u64,
}

impl Session {
    /// `nonce` makes mcpguard's own request ids unguessable by the host; any string works.
    pub fn new(config: Config, nonce: &str) -> Self {
        Session {
            config,
            host_requests: IdMap::default(),
            server_requests: IdMap::default(),
            own_requests: IdMap::default(),
            own_prefix: format!("mcpguard-{nonce}-"),
            next_own: 0,
        }
    }

    pub fn era(&self) -> Era {
        self.config.era
    }

    /// Number of host requests waiting for the server.
    pub fn pending_host_requests(&self) -> usize {
        self.host_requests.len()
    }

    /// A frame arrived from the host.
    pub fn from_host(&mut self, frame: Frame, out: &mut Vec<Out>) {
        let line = match frame {
            Frame::Line(line) => line,
            Frame::TooLong { len, head } => {
                let id = message::salvage_id(&String::from_utf8_lossy(&head));
                let msg = format!(
                    "refused a {len}-byte message from the host: the limit is {} bytes (raise it with --max-message-bytes)",
                    self.config.max_message_bytes
                );
                self.refuse_to_host(id.as_ref(), codes::TOO_LARGE, &msg, out);
                return;
            }
        };
        let msg = match message::parse(&line) {
            Ok(m) => m,
            Err(invalid) => {
                self.invalid_from_host(invalid, out);
                return;
            }
        };
        self.note_unknown_members("host", &msg, out);
        match msg.kind {
            Kind::Request => {
                let Some(id) = msg.id.clone() else { return };
                if matches!(&id, Id::Str(s) if s.starts_with(&self.own_prefix)) {
                    let m = format!("refused host request {id}: ids starting with {:?} are reserved by mcpguard", self.own_prefix);
                    self.refuse_to_host(Some(&id), codes::ID_CONFLICT, &m, out);
                    return;
                }
                if self.host_requests.contains_key(&id) {
                    let m = format!("refused host request {id}: another request with this id is still pending; ids must be unique");
                    self.refuse_to_host(Some(&id), codes::ID_CONFLICT, &m, out);
                    return;
                }
                let method = msg.method.as_deref().unwrap_or_default().into();
                self.host_requests.insert(id, Pending { method });
                out.push(Out::Server(line));
            }
            Kind::Notification => out.push(Out::Server(line)),
            Kind::Response | Kind::ErrorResponse => {
                let known = msg
                    .id
                    .as_ref()
                    .and_then(|id| self.server_requests.remove(id));
                match known {
                    Some(_) => out.push(Out::Server(line)),
                    None => out.push(Out::Diag(
                        Level::Warn,
                        format!(
                            "dropped a response from the host to request {} that the server never sent (or that was already answered)",
                            msg.id.map_or("null".to_string(), |id| id.to_string())
                        ),
                    )),
                }
            }
        }
    }

    /// A frame arrived from the server.
    pub fn from_server(&mut self, frame: Frame, out: &mut Vec<Out>) {
        let line = match frame {
            Frame::Line(line) => line,
            Frame::TooLong { len, head } => {
                let id = message::salvage_id(&String::from_utf8_lossy(&head));
                let msg = format!(
                    "dropped a {len}-byte message from the server: the limit is {} bytes (raise it with --max-message-bytes)",
                    self.config.max_message_bytes
                );
                self.upstream_failure(id, codes::TOO_LARGE, &msg, out);
                return;
            }
        };
        let msg = match message::parse(&line) {
            Ok(m) => m,
            Err(invalid) => {
                let text = format!("dropped a message from the server: {}", invalid.reason);
                self.upstream_failure(invalid.id, codes::BAD_UPSTREAM_RESPONSE, &text, out);
                return;
            }
        };
        self.note_unknown_members("server", &msg, out);
        match msg.kind {
            Kind::Request => {
                let Some(id) = msg.id.clone() else { return };
                if self.server_requests.contains_key(&id) {
                    let m = format!("refused server request {id}: another request with this id is still pending");
                    out.push(Out::Diag(Level::Warn, m.clone()));
                    out.push(Out::Server(Bytes::from(message::error_response(
                        Some(&id),
                        codes::ID_CONFLICT,
                        &format!("mcpguard: {m}"),
                        None,
                    ))));
                    return;
                }
                let method = msg.method.as_deref().unwrap_or_default().into();
                self.server_requests.insert(id, Pending { method });
                out.push(Out::Host(line));
            }
            Kind::Notification => out.push(Out::Host(line)),
            Kind::Response | Kind::ErrorResponse => {
                let Some(id) = msg.id.clone() else {
                    out.push(Out::Diag(
                        Level::Warn,
                        "dropped an error response from the server that names no request (id null)"
                            .into(),
                    ));
                    return;
                };
                if let Some(purpose) = self.own_requests.remove(&id) {
                    self.own_response(purpose, &msg, out);
                } else if self.host_requests.remove(&id).is_some() {
                    out.push(Out::Host(line));
                } else {
                    out.push(Out::Diag(
                        Level::Warn,
                        format!("dropped a response from the server to request {id}, which the host never sent (or which was already answered)"),
                    ));
                }
            }
        }
    }

    /// The server's output ended (it exited or closed stdout): every pending host request gets
    /// an error, so no host waits forever for an answer that cannot come.
    pub fn server_closed(&mut self, why: &str, out: &mut Vec<Out>) {
        let mut pending: Vec<(Id, Pending)> = self.host_requests.drain().collect();
        pending.sort_by_cached_key(|(id, _)| id.to_string());
        for (id, p) in pending {
            out.push(Out::Host(Bytes::from(message::error_response(
                Some(&id),
                codes::SERVER_GONE,
                &format!(
                    "mcpguard: the MCP server {why} before answering this {} request",
                    p.method
                ),
                None,
            ))));
        }
        self.own_requests.clear();
        self.server_requests.clear();
    }

    /// Sends a request of mcpguard's own to the server; its response is consumed, never
    /// forwarded to the host.
    pub fn request_to_server(
        &mut self,
        method: &str,
        params: Option<serde_json::Value>,
        purpose: Purpose,
        out: &mut Vec<Out>,
    ) -> Id {
        let id = Id::Str(format!("{}{}", self.own_prefix, self.next_own));
        self.next_own += 1;
        let mut req =
            serde_json::json!({"jsonrpc": "2.0", "id": id.to_json_value(), "method": method});
        if let Some(p) = params {
            req["params"] = p;
        }
        self.own_requests.insert(id.clone(), purpose);
        out.push(Out::Server(Bytes::from(
            serde_json::to_vec(&req).unwrap_or_default(),
        )));
        id
    }

    fn own_response(&mut self, purpose: Purpose, msg: &Message<'_>, out: &mut Vec<Out>) {
        match purpose {
            Purpose::Ping => {
                let outcome = if msg.kind == Kind::Response {
                    "answered"
                } else {
                    "failed"
                };
                out.push(Out::Diag(
                    Level::Debug,
                    format!("mcpguard's ping to the server {outcome}"),
                ));
            }
        }
    }

    fn invalid_from_host(&mut self, invalid: Invalid, out: &mut Vec<Out>) {
        let what = format!("refused a message from the host: {}", invalid.reason);
        match &invalid.reason {
            InvalidReason::Batch { ids } => {
                out.push(Out::Diag(Level::Warn, what.clone()));
                for id in ids {
                    out.push(Out::Host(Bytes::from(message::error_response(
                        Some(id),
                        message::INVALID_REQUEST,
                        &format!("mcpguard: {what}"),
                        None,
                    ))));
                }
            }
            reason => {
                let code = reason.code();
                self.refuse_to_host(invalid.id.as_ref(), code, &what, out);
            }
        }
    }

    /// Answers the host with an error when an id is known; always explains on stderr.
    fn refuse_to_host(&mut self, id: Option<&Id>, code: i64, what: &str, out: &mut Vec<Out>) {
        match id {
            Some(id) => {
                out.push(Out::Diag(Level::Warn, format!("{what} (request {id})")));
                out.push(Out::Host(Bytes::from(message::error_response(
                    Some(id),
                    code,
                    &format!("mcpguard: {what}"),
                    None,
                ))));
            }
            None => out.push(Out::Diag(
                Level::Warn,
                format!("{what}; no request id could be read, so no error response was sent"),
            )),
        }
    }

    /// A server message could not be relayed. If it was the answer to a pending host request,
    /// the host gets an error instead of waiting forever; a request from the server is refused.
    fn upstream_failure(&mut self, id: Option<Id>, code: i64, what: &str, out: &mut Vec<Out>) {
        out.push(Out::Diag(Level::Warn, what.to_string()));
        let Some(id) = id else { return };
        if let Some(p) = self.host_requests.remove(&id) {
            out.push(Out::Host(Bytes::from(message::error_response(
                Some(&id),
                code,
                &format!(
                    "mcpguard: the server's answer to this {} request could not be relayed: {what}",
                    p.method
                ),
                None,
            ))));
        } else if self.own_requests.remove(&id).is_some() {
            // mcpguard's own request failed; the gate treats that as a failed check.
        }
    }

    fn note_unknown_members(&self, from: &str, msg: &Message<'_>, out: &mut Vec<Out>) {
        if !msg.unknown_members.is_empty() {
            out.push(Out::Diag(
                Level::Debug,
                format!(
                    "relayed a message from the {from} with members JSON-RPC does not define: {}",
                    msg.unknown_members.join(", ")
                ),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session::new(
            Config {
                max_message_bytes: 1 << 20,
                era: Era::Legacy,
            },
            "n0nce",
        )
    }

    fn line(s: &str) -> Frame {
        Frame::Line(Bytes::copy_from_slice(s.as_bytes()))
    }

    /// Runs `steps` ('h' = from host, 's' = from server) and returns the non-diagnostic outputs
    /// as readable strings: `S:` for the server, `H:` for the host.
    fn conversation(s: &mut Session, steps: &[(char, &str)]) -> Vec<String> {
        let mut out = Vec::new();
        for (from, text) in steps {
            match from {
                'h' => s.from_host(line(text), &mut out),
                's' => s.from_server(line(text), &mut out),
                _ => unreachable!(),
            }
        }
        render(&out)
    }

    fn render(out: &[Out]) -> Vec<String> {
        out.iter()
            .filter_map(|o| match o {
                Out::Host(b) => Some(format!("H:{}", String::from_utf8_lossy(b))),
                Out::Server(b) => Some(format!("S:{}", String::from_utf8_lossy(b))),
                Out::Diag(..) => None,
            })
            .collect()
    }

    #[test]
    fn forwards_original_bytes_and_correlates_both_directions() {
        let mut s = session();
        let req = r#"{"id":0, "jsonrpc":"2.0","method":"tools/call","params":{"z":1,"a":12345678901234567890,"u":"\u00e9"},"x-extra":true}"#;
        let server_req = r#"{"jsonrpc":"2.0","id":0,"method":"roots/list"}"#;
        let host_resp = r#"{"jsonrpc":"2.0","id":0,"result":{"roots":[]}}"#;
        let server_resp = r#"{"jsonrpc":"2.0","id":0,"result":{}}"#;
        let got = conversation(
            &mut s,
            &[
                ('h', req),
                ('s', server_req),
                ('h', host_resp),
                ('s', server_resp),
            ],
        );
        assert_eq!(
            got,
            vec![
                format!("S:{req}"),
                format!("H:{server_req}"),
                format!("S:{host_resp}"),
                format!("H:{server_resp}")
            ]
        );
        assert_eq!(s.pending_host_requests(), 0);
    }

    #[test]
    fn unmatched_and_duplicate_ids_are_refused_with_a_verdict() {
        let mut s = session();
        let got = conversation(
            &mut s,
            &[
                ('s', r#"{"jsonrpc":"2.0","id":9,"result":{}}"#),
                ('h', r#"{"jsonrpc":"2.0","id":1,"method":"a"}"#),
                ('h', r#"{"jsonrpc":"2.0","id":1,"method":"b"}"#),
                (
                    'h',
                    r#"{"jsonrpc":"2.0","id":"mcpguard-n0nce-0","method":"c"}"#,
                ),
            ],
        );
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], r#"S:{"jsonrpc":"2.0","id":1,"method":"a"}"#);
        assert!(
            got[1].starts_with(r#"H:{"jsonrpc":"2.0","id":1,"error":{"code":-31003"#),
            "{}",
            got[1]
        );
        assert!(
            got[2].contains(r#""id":"mcpguard-n0nce-0""#) && got[2].contains("reserved"),
            "{}",
            got[2]
        );
    }

    #[test]
    fn bad_host_lines_get_errors_where_an_id_is_readable() {
        let mut s = session();
        let got = conversation(
            &mut s,
            &[
                ('h', "garbage"),
                ('h', r#"{"jsonrpc":"2.0","id":5,"method":"x","#),
                (
                    'h',
                    r#"[{"jsonrpc":"2.0","id":6,"method":"x"},{"jsonrpc":"2.0","id":7,"method":"y"}]"#,
                ),
                ('h', r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
            ],
        );
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(got[0].contains(r#""id":5"#) && got[0].contains("-32700"));
        assert!(got[1].contains(r#""id":6"#) && got[1].contains("-32600"));
        assert!(got[2].contains(r#""id":7"#));
    }

    #[test]
    fn over_long_host_message_is_answered_by_id() {
        let mut s = session();
        let mut out = Vec::new();
        s.from_host(
            Frame::TooLong {
                len: 99,
                head: Bytes::from_static(
                    br#"{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"#,
                ),
            },
            &mut out,
        );
        let got = render(&out);
        assert_eq!(got.len(), 1);
        assert!(
            got[0].contains(r#""id":"big""#)
                && got[0].contains("-31002")
                && got[0].contains("--max-message-bytes")
        );
    }

    #[test]
    fn own_requests_are_consumed_not_forwarded() {
        let mut s = session();
        let mut out = Vec::new();
        let id = s.request_to_server("ping", None, Purpose::Ping, &mut out);
        assert_eq!(
            render(&out),
            vec![format!(
                r#"S:{{"jsonrpc":"2.0","id":{},"method":"ping"}}"#,
                id.to_json()
            )]
        );
        let got = conversation(
            &mut s,
            &[(
                's',
                &format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, id.to_json()),
            )],
        );
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn server_exit_answers_every_pending_request() {
        let mut s = session();
        conversation(
            &mut s,
            &[
                ('h', r#"{"jsonrpc":"2.0","id":2,"method":"tools/call"}"#),
                ('h', r#"{"jsonrpc":"2.0","id":"b","method":"ping"}"#),
            ],
        );
        let mut out = Vec::new();
        s.server_closed("exited", &mut out);
        let got = render(&out);
        assert_eq!(got.len(), 2);
        assert!(got
            .iter()
            .any(|g| g.contains(r#""id":2"#) && g.contains("tools/call") && g.contains("-31001")));
        assert!(got.iter().any(|g| g.contains(r#""id":"b""#)));
    }

    #[test]
    fn malformed_server_answer_to_a_pending_request_fails_that_request() {
        let mut s = session();
        let got = conversation(
            &mut s,
            &[
                ('h', r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#),
                ('s', r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[}"#),
            ],
        );
        assert_eq!(got.len(), 2);
        assert!(
            got[1].contains(r#""id":3"#) && got[1].contains("-31004"),
            "{}",
            got[1]
        );
        assert_eq!(s.pending_host_requests(), 0);
    }
}
