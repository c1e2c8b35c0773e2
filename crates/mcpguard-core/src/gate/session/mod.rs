//! The decision core of one proxied connection, free of IO.
//!
//! The IO driver (`proxy`) feeds it frames from the host and from the server and executes what
//! it returns: bytes for the host, bytes for the server, diagnostics for stderr. Keeping every
//! decision here, as plain functions of values, lets unit tests check whole conversations without
//! processes, and keeps the driver small enough to read in one sitting.
//!
//! Two independent id spaces exist: requests from the host to the server, and requests from the
//! server to the host (servers number their own requests 0, 1, 2…, colliding numerically with
//! host ids). mcpguard's own requests have two spaces more, one per direction, each with a prefix
//! of its own: towards the server (re-list walks, probes) `mcpguard-<nonce>-<n>`, towards the
//! host (confirmation questions) `mcpguard-<h>-<n>`, where `<h>` is derived from the per-process
//! secret key and never appears on the server's side. A server that reads the ids of the walks
//! therefore learns nothing about the ids of the questions, and a server request whose id is the
//! id of one of mcpguard's open questions (or carries their prefix) is refused, never relayed: the
//! host would otherwise hold two requests with one id, and the person's answer to the server's
//! question could be taken for an approval. A host request that uses either prefix is refused
//! rather than risk confusing the spaces.
//!
//! The gate (legacy era, protocol ≤ 2025-11-25): the handshake is ordered and pinned, `tools/list`
//! is answered by mcpguard from the reviewed snapshot after a live re-verification, every
//! `tools/call` is checked (reviewed name, valid arguments, a *fresh* live re-list whose object
//! for the tool equals the reviewed one) before its original bytes are forwarded, results are
//! checked against the reviewed output schema and error text is sanitized, and a
//! `list_changed` after binding invalidates the review for the rest of the process.
//!
//! It must not know threads, pipes, clocks (time comes in through `tick`), processes, the sandbox
//! or the command line: every effect is an `Out` the driver (`process::proxy`) executes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::audit::event::EventKind;
use crate::gate::capabilities::Capabilities;
use crate::gate::catalogue::{self, LiveCatalogue};
use crate::gate::pin::Pin;
use crate::gate::refusal::{self, code, Category, Refusal};
use crate::policy::{Classification, Decision, Policy, Reviewed};
use crate::protocol::{codes, methods, Era, Level};
use crate::snapshot::strict;
use crate::wire::frame::Frame;
use crate::wire::id_table::IdTable;
use crate::wire::message::{self, Id, IdMap, Invalid, InvalidReason, Kind, Message};

// The parts of the state machine, one concern each; every part adds methods to `Session`.
mod calls;
mod confirm;
mod handshake;
// The 2026-07-28 era's part of the state machine; called from the hooks marked "modern era".
mod modern_era;
mod relay;
mod results;
mod shutdown;
mod standing;
mod walks;

use calls::{cancel_notification, minimal_call};
pub use confirm::HUMAN_MIN_ANSWER_MS;
use confirm::{approval_params, host_answer, operation_policy, HostAnswer};
use modern_era::Mrtr;
pub use relay::Parsed;
use relay::{object_params, refuse_to_host, respond};
use results::sanitized_error;

/// One thing the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Out {
    /// Write this message (without newline) to the host.
    Host(Bytes),
    /// Write this message (without newline) to the server.
    Server(Bytes),
    /// Print a diagnostic on stderr.
    Diag(Level, String),
    /// Record a decision in the audit log (only produced when `Config::audit` is set).
    Audit(Box<AuditNote>),
    /// A tool call ended with an error result: its text (already sanitized, never logged as it
    /// is), so that the driver, which knows the server's confinement, can say whether it looks
    /// like something the sandbox denied. Produces no output by itself.
    ToolError { tool: String, text: String },
}

/// One decision for the audit log, as plain data; the driver turns it into a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditNote {
    pub kind: EventKind,
    pub tool: Option<String>,
    /// The call's arguments; the log writes only their digest unless its payload mode is full.
    pub arguments: Option<Value>,
    pub outcome: Option<&'static str>,
    pub code: Option<&'static str>,
    pub detail: Option<String>,
}

impl AuditNote {
    pub fn new(kind: EventKind) -> Self {
        AuditNote {
            kind,
            tool: None,
            arguments: None,
            outcome: None,
            code: None,
            detail: None,
        }
    }
}

/// Why mcpguard sent a request of its own; decides what happens with the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purpose {
    /// A liveness probe; the response is only logged.
    Ping,
    /// One page of a live `tools/list` walk.
    ListPage { generation: u64 },
    /// The live `server/discover` checked before a host's is answered (modern era).
    Discover,
    /// mcpguard's own `subscriptions/listen` stream (modern era).
    Listen,
}

/// What the gate enforces.
#[derive(Debug, Clone)]
pub enum Mode {
    /// A reviewed snapshot is pinned: only its reviewed tools pass.
    Pinned(Arc<Pin>),
    /// No snapshot, by explicit choice (`--allow-unpinned`): tools are relayed unpinned; the
    /// handshake order, capability blocking and error hygiene still apply.
    Unpinned,
    /// No snapshot: no tools are served.
    NoManifest,
}

/// Limits and policy the core enforces.
#[derive(Debug, Clone)]
pub struct Config {
    pub max_message_bytes: usize,
    pub era: Era,
    pub mode: Mode,
    pub capabilities: Capabilities,
    /// Most `tools/list` pages followed in one live walk.
    pub max_pages: usize,
    /// Produce `Out::Audit` notes for the audit log.
    pub audit: bool,
    /// Most `tools/call` requests held or in flight at once; more are refused.
    pub max_calls_in_flight: usize,
    /// How long a dispatched call may run before its outcome is declared unknown (0 = never).
    pub call_timeout_ms: u64,
    /// Server error text is replaced by a fixed message (the raw text goes to the audit log).
    pub redact_errors: bool,
    /// For tools with an outputSchema, the host receives only the validated
    /// `structuredContent` and its canonical JSON as the one text block.
    pub structured_only: bool,
    /// The local policy: write classification and confirmation (the other policy values the
    /// core needs are the fields above, resolved by the driver).
    pub policy: Arc<Policy>,
    /// `--dry-run`: calls are checked, classified and confirmed, then answered with what would
    /// have been sent instead of being dispatched (SPEC §3.11).
    pub dry_run: bool,
    /// The value checks of the policy, compiled: secrets in results and arguments, argument
    /// rules, result labels (`gate::content`).
    pub content: Arc<crate::gate::content::Content>,
    /// The key of the HMAC on mcpguard's own `requestState` (2026-07-28 confirmations). The
    /// proxy draws it from the kernel's random source; `Config::new` leaves it zero for tests.
    pub secret: [u8; 32],
    /// The out-of-band confirmation channels the driver runs in this process (`terminal`: the
    /// approval socket listens; `desktop`: a notification service is on the session bus). Empty
    /// in tests and when none could start.
    pub out_of_band: Vec<crate::policy::Channel>,
    /// The prefix of this process's out-of-band approval ids (the driver uses its pid), so the
    /// ids of several mcpguard processes differ.
    pub instance: String,
}

impl Config {
    /// A configuration for tests and simple uses: the given mode, defaults elsewhere.
    pub fn new(mode: Mode) -> Self {
        Config::with_content(mode, Arc::new(crate::gate::content::Content::default()))
    }

    /// As [`Config::new`], with content checks built already. The proxy passes the ones it
    /// built from the policy: building the defaults too would compile every secret detector a
    /// second time, about 0.9 ms of each start on the benchmark machine, only to drop them.
    pub fn with_content(mode: Mode, content: Arc<crate::gate::content::Content>) -> Self {
        Config {
            max_message_bytes: 16 << 20,
            era: Era::Legacy,
            mode,
            capabilities: Capabilities::default(),
            max_pages: 1000,
            audit: false,
            max_calls_in_flight: 64,
            call_timeout_ms: 0,
            redact_errors: false,
            structured_only: false,
            policy: Arc::new(Policy::default()),
            dry_run: false,
            content,
            secret: [0; 32],
            out_of_band: Vec::new(),
            instance: "0".to_string(),
        }
    }
}

#[derive(Debug)]
enum PendingKind {
    Plain,
    Initialize,
    /// A dispatched `tools/call`. Boxed so that an entry of the correlation table stays one
    /// cache line: a pipelining host keeps thousands of plain requests in flight, and the table
    /// is written by one reader thread and read by the other.
    Call(Box<Dispatched>),
}

// One correlation entry (the key and the value) fits a cache line; see `PendingKind::Call`.
const _: () = assert!(std::mem::size_of::<(Id, Pending)>() <= 64);

/// What is kept of a dispatched `tools/call` until its answer.
#[derive(Debug)]
struct Dispatched {
    tool: String,
    /// The string values of the call's arguments, for the labeller's context (a result that
    /// asks to send them somewhere); empty when results are not labelled.
    arguments: Vec<String>,
    progress: Option<String>,
    /// The session clock (`tick`) when it was forwarded.
    dispatched_ms: u64,
    /// The review was invalidated while the call ran.
    indeterminate: bool,
}

#[derive(Debug)]
struct Pending {
    /// The request's method, for messages about it; the common ones without an allocation.
    method: std::borrow::Cow<'static, str>,
    kind: PendingKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    AwaitInitialize,
    Initializing,
    AwaitInitialized,
    Ready,
    Failed(String),
}

/// A live `tools/list` walk in progress.
#[derive(Debug)]
struct Walk {
    generation: u64,
    /// The session clock when the walk began (restarts keep it); a walk gets
    /// [`Session::walk_bound_ms`] to complete, restarts included.
    started_ms: u64,
    pages: Vec<catalogue::LivePage>,
    cursors: HashSet<String>,
    /// A `list_changed` arrived during a walk before binding: walk again once it ends.
    restart: bool,
    restarts: usize,
}

/// A host request waiting for a walk that started after it arrived.
#[derive(Debug)]
struct Held {
    id: Id,
    needs: u64,
    what: HeldWhat,
}

#[derive(Debug)]
enum HeldWhat {
    List,
    Call(Call),
}

/// A `tools/call` from the host that passed the static checks and waits to be dispatched.
#[derive(Debug)]
struct Call {
    id: Id,
    tool: String,
    /// The request as it will reach the server (see `minimal_call`).
    line: Bytes,
    progress: Option<String>,
    approval: Approval,
    /// The review maps an argument to the `authority` channel: no standing approval covers it.
    authority: bool,
    /// An argument names one of the user's credential files or downloads code and runs it
    /// (`gate::content::Asked`): no standing approval covers it either, since the person is
    /// asked about this argument, not about the tool.
    asked: Option<crate::gate::content::Asked>,
}

/// How a call came to be allowed, for the audit log and the dry-run summary.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Approval {
    /// The policy does not ask for confirmation (a read, or a write marked not-required).
    NotNeeded,
    /// Confirmation was due but the policy forwards without asking (`confirmation.mode = "allow"`).
    Unconfirmed,
    /// A person approved this call; the string is the approval's binding digest.
    Confirmed(String),
}

/// A write waiting for the person's answer to mcpguard's own `elicitation/create`.
#[derive(Debug)]
struct Confirming {
    call: Call,
    /// SHA-256 of the canonical {snapshot digest, tool, arguments}: what the approval is for.
    binding: String,
    arguments: Value,
    asked_ms: u64,
    /// mcpguard's elicitation for it is with the host, which is told when it is withdrawn.
    host_asked: bool,
    /// The id the out-of-band channels show it under, once offered there.
    offered: Option<String>,
    /// What the person reads.
    question: confirm::Question,
    /// Why the host's answer did not count (it answered without asking, or erred), for the
    /// refusal if no other channel answers either.
    host_note: Option<String>,
    /// What the person's approval covers (one call, or a standing approval they chose).
    scope: crate::policy::Scope,
    /// The session clock of the last `notifications/progress` sent for it (see
    /// `confirm::PROGRESS_EVERY_MS`).
    progress_ms: u64,
}

/// The state of one connection.
#[derive(Debug)]
pub struct Session {
    config: Config,
    /// The labeller's context for this session's catalogue (the reviewed tool names, with their
    /// automaton), built once: each result clones it (shared) and adds its tool and arguments.
    catalogue: crate::wire::injection::Context,
    /// The reviewed tools whose descriptive text carries labels, by name, in the form the host
    /// is served them (`Content::label_tool`): made once here, so that answering `tools/list`
    /// costs what it did, and empty when the policy does not label or no description carries a
    /// label, so that every other tool is served as it was reviewed.
    labelled_tools: HashMap<String, crate::gate::content::LabelledTool>,
    /// Requests from the host that the server has not answered yet. The one table on the path
    /// of every pipelined request, so it keeps ascending ids in order (`wire::id_table`).
    host_requests: IdTable<Pending>,
    /// Requests from the server that the host has not answered yet.
    server_requests: IdMap<Pending>,
    /// Requests mcpguard sent to the server itself.
    own_requests: IdMap<Purpose>,
    own_prefix: String,
    next_own: u64,
    /// The prefix of mcpguard's own requests to the host (its questions), derived from the
    /// secret key so that the server, which sees `own_prefix`, cannot predict it.
    host_prefix: String,
    next_host: u64,
    /// How many confirmations were offered to the out-of-band channels (their ids' numbers).
    next_offer: u64,
    phase: Phase,
    /// The review bound at the first successful live verification after the handshake.
    bound: bool,
    /// Why the review no longer holds, once it does not.
    invalidated: Option<String>,
    live: Option<LiveCatalogue>,
    walk: Option<Walk>,
    walk_again: bool,
    last_generation: u64,
    held: Vec<Held>,
    /// Tools with `concurrency: serialize` that have a call in flight, and calls waiting.
    serial_busy: HashSet<String>,
    serial_queue: Vec<Call>,
    /// Standing approvals the person gave (identical calls for a while, a tool for the session).
    standing: Vec<standing::Standing>,
    /// Writes waiting for the person's answer, by the id of mcpguard's elicitation request.
    confirming: IdMap<Confirming>,
    /// The host advertised form-mode elicitation, so mcpguard can ask the person.
    host_can_elicit: bool,
    /// The version the host is answered in when it differs from the pinned one (legacy era).
    host_version: Option<String>,
    /// Progress tokens of dispatched calls (canonical JSON), so unsolicited progress is dropped.
    progress_tokens: HashSet<String>,
    /// Calls given up on after the per-call timeout; their late answers are dropped.
    abandoned: HashSet<Id>,
    /// Server log messages dropped because the policy turns logging off; only the first is
    /// audited, so a flooding server cannot fill the audit log.
    logs_dropped: u64,
    /// Milliseconds since the start, as last told by the driver (`tick`).
    clock_ms: u64,
    /// State of the 2026-07-28 era (unused in the legacy era).
    modern: modern_era::ModernState,
}

impl Session {
    /// `nonce` makes mcpguard's own request ids unguessable by the host; any string works.
    pub fn new(config: Config, nonce: &str) -> Self {
        // The modern era has no handshake: the session is ready from the start.
        let phase = match config.era {
            Era::Legacy => Phase::AwaitInitialize,
            Era::Modern => Phase::Ready,
        };
        let host_prefix = format!("mcpguard-{}-", host_nonce(&config.secret, nonce));
        let catalogue = match &config.mode {
            Mode::Pinned(pin) if config.content.scans_injection() => {
                crate::wire::injection::Context::new(pin.tools.iter().map(|t| t.name.as_str()))
            }
            _ => crate::wire::injection::Context::default(),
        };
        let labelled_tools = match &config.mode {
            Mode::Pinned(pin) if config.content.scans_injection() => pin
                .tools
                .iter()
                .filter_map(|t| {
                    let ctx = catalogue.clone().answering(&t.name);
                    let labelled = config.content.label_tool(&t.tool, &ctx)?;
                    Some((t.name.clone(), labelled))
                })
                .collect(),
            _ => HashMap::new(),
        };
        Session {
            config,
            catalogue,
            labelled_tools,
            host_requests: IdTable::default(),
            server_requests: IdMap::default(),
            own_requests: IdMap::default(),
            own_prefix: format!("mcpguard-{nonce}-"),
            next_own: 0,
            host_prefix,
            next_host: 0,
            next_offer: 0,
            // The modern era has no handshake: the session is ready from the start.
            phase,
            bound: false,
            invalidated: None,
            live: None,
            walk: None,
            walk_again: false,
            last_generation: 0,
            held: Vec::new(),
            serial_busy: HashSet::new(),
            serial_queue: Vec::new(),
            confirming: IdMap::default(),
            standing: Vec::new(),
            host_can_elicit: false,
            host_version: None,
            progress_tokens: HashSet::new(),
            abandoned: HashSet::new(),
            logs_dropped: 0,
            clock_ms: 0,
            modern: modern_era::ModernState::default(),
        }
    }

    pub fn era(&self) -> Era {
        self.config.era
    }

    /// Number of host requests waiting for the server.
    pub fn pending_host_requests(&self) -> usize {
        self.host_requests.len()
    }

    /// Advances the session clock without running expiry (the driver calls it before deciding
    /// frames, so the time between a question and its answer is measured, not rounded to the
    /// tick). The clock never goes back.
    pub fn set_clock(&mut self, now_ms: u64) {
        self.clock_ms = self.clock_ms.max(now_ms);
    }

    /// Whether the review was invalidated (for tests and diagnostics).
    pub fn invalidated(&self) -> Option<&str> {
        self.invalidated.as_deref()
    }
}

/// The per-process part of the ids of mcpguard's questions to the host: 64 bits of SHA-256 over
/// the secret key and the walk nonce, so it is as unpredictable as the key (drawn from the
/// kernel's random source by the proxy) and differs from the nonce the server sees.
fn host_nonce(secret: &[u8; 32], nonce: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"mcpguard host request ids\0");
    h.update(secret);
    h.update(nonce.as_bytes());
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What a test conversation saw the core send, by destination (shared by the unit tests of
/// both eras).
#[cfg(test)]
#[derive(Default)]
struct Seen {
    host: Vec<Value>,
    server: Vec<Value>,
    server_raw: Vec<String>,
    diags: Vec<String>,
    audits: Vec<AuditNote>,
}

#[cfg(test)]
impl Seen {
    fn take(&mut self, out: Vec<Out>) {
        for o in out {
            match o {
                Out::Host(b) => self.host.push(serde_json::from_slice(&b).unwrap()),
                Out::Server(b) => {
                    self.server_raw.push(String::from_utf8(b.to_vec()).unwrap());
                    self.server.push(serde_json::from_slice(&b).unwrap());
                }
                Out::Diag(_, d) => self.diags.push(d),
                Out::Audit(n) => self.audits.push(*n),
                // Only the driver explains tool errors; the decision tests have nothing to see.
                Out::ToolError { .. } => {}
            }
        }
    }
}

#[cfg(test)]
mod tests;
