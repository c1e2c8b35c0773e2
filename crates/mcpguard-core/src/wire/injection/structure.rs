//! The structural signals of the labeller: what a phrase list cannot give.
//!
//! A phrase list loses to every rewording, so this part of the labeller looks at the shape of a
//! passage rather than its words, with what mcpguard knows about the call in [`Context`]:
//!
//! - **address** — text that speaks to the model or an agent: a vocative or a role label in any
//!   position (`SYSTEM: you …`, `Assistant, …`), a note addressed to it ("note for the AI"), a
//!   greeting ("dear agent"), a reader named as a model ("whoever reads this as a model");
//! - **directive** — an order in the imperative to act (send, post, export, forward, delete,
//!   run, execute, upload, …) or to call a tool: a tool of the reviewed catalogue other than the
//!   one that answered, or a tool-shaped name (`snake_case`, or `name(`) after a call verb;
//! - **destination** — where the order sends something: a URL, an e-mail address, a credentials
//!   path (`~/.ssh/id_rsa`, `.env`, `.aws/credentials`), the reader's own secrets ("your access
//!   token"), or the string values of the call's own arguments;
//! - **hidden** — content a person reading the page does not see: HTML hidden by style or
//!   attribute, HTML comments, `<script>` and JSON-LD blocks, Markdown comments, Unicode tag
//!   characters (decoded), and base64 payloads (decoded).
//!
//! Each signal alone is ordinary (a page has comments, a README says "run", a document names
//! its author's e-mail), so none of them labels by itself. They label together, inside one
//! passage ([`WINDOW`] bytes): address with a directive (`addressed-directive`); a directive to
//! call another tool of the catalogue, or to call a tool-shaped name with a destination, a
//! "please" or inside error text, or a sending verb with a credential (`tool-directive`);
//! hidden content that carries an address, a tool directive or a phrase of the list
//! (`hidden-directive`); an encoded payload that decodes to any of these (`encoded-directive`).
//!
//! Cost: [`may_have_signals`] is one pass of a set of expressions over the text for the anchor
//! literals ([`anchors`]; the same pass looks for the phrase table, see `injection::quick_pass`)
//! plus, for a catalogue, one over the tool names; only a text that holds an
//! anchor gets the analysis, which is linear too: one tokenizing pass, constant work per token,
//! then every hidden region and every decoded payload, each analysed once without further
//! decoding. There is no count or byte cap that decoys could fill to hide a later region or
//! payload: regions of one kind never overlap (each search goes on after the previous region)
//! and base64 runs never overlap, so all of them together are at most a few times the text.
//! Only a hidden element's closing tag is looked for within [`REGION_MAX`] bytes (an element
//! left open would otherwise send every later search to the end of the text).

use std::ops::Range;
use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

use super::Label;

/// How close (in bytes) two signals must be to count as one passage.
pub const WINDOW: usize = 200;
/// How far a hidden element's closing tag is looked for (the element is cut there when none
/// is found).
pub const REGION_MAX: usize = 16 * 1024;
/// The shortest run of base64 characters that is decoded.
pub const PAYLOAD_MIN: usize = 24;

/// What the labeller knows about the text besides the text: the reviewed catalogue's tool names,
/// the tool that answered, the string values of the call's arguments, and whether the text is
/// error text. `Context::default()` knows nothing (a description outside any catalogue).
///
/// The catalogue part is shared (`Arc`): a session builds it once and clones it per result for
/// the answering tool and the call's arguments.
#[derive(Debug, Default, Clone)]
pub struct Context {
    tools: std::sync::Arc<[String]>,
    matcher: Option<AhoCorasick>,
    answering: Option<String>,
    arguments: Vec<String>,
    error: bool,
}

impl Context {
    /// A context for the tools of one catalogue (names shorter than three characters are left
    /// out: they occur in ordinary words).
    pub fn new<S: AsRef<str>>(tools: impl IntoIterator<Item = S>) -> Context {
        let tools: std::sync::Arc<[String]> = tools
            .into_iter()
            .map(|s| s.as_ref().to_ascii_lowercase())
            .filter(|s| s.chars().count() >= 3)
            .collect();
        let matcher = (!tools.is_empty())
            .then(|| {
                AhoCorasickBuilder::new()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(tools.iter())
                    .ok()
            })
            .flatten();
        Context {
            tools,
            matcher,
            ..Context::default()
        }
    }

    /// The tool whose result, error or description the text is.
    pub fn answering(mut self, tool: &str) -> Context {
        self.answering = Some(tool.to_ascii_lowercase());
        self
    }

    /// The string values of the call's arguments (values shorter than eight characters are left
    /// out: they occur in ordinary text).
    pub fn arguments<S: AsRef<str>>(mut self, values: impl IntoIterator<Item = S>) -> Context {
        self.arguments = values
            .into_iter()
            .map(|s| s.as_ref().to_string())
            .filter(|s| s.chars().count() >= 8)
            .take(32)
            .collect();
        self
    }

    /// Whether the text is error text (an error result or a JSON-RPC error's message).
    pub fn error(mut self, error: bool) -> Context {
        self.error = error;
        self
    }
}

/// One structural finding: the label, where it is in the text, and the signals that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Structural {
    pub label: Label,
    pub at: Range<usize>,
    pub signals: Vec<&'static str>,
}

/// The anchor literals (ASCII, matched case-insensitively): a text that holds none of them, no
/// catalogue tool name, no Unicode tag character, no Greek or Cyrillic letter and no long base64
/// run has no structural finding. Exposed so a scanner that folds every literal of mcpguard into
/// one automaton can take them over; [`anchor_class`] says what each one stands for and
/// [`anchor_whole_word`] whether it counts only as a whole word.
pub fn anchors() -> &'static [&'static str] {
    static ALL: OnceLock<Vec<&'static str>> = OnceLock::new();
    ALL.get_or_init(|| anchor_table().iter().map(|(_, _, a)| *a).collect())
}

/// The class of the anchor at `index` of [`anchors`]: [`VERB`], [`ADDRESS`], [`TARGET`] or
/// [`HIDDEN`]. A text may have a finding only with a `HIDDEN` anchor, or a `VERB` anchor and an
/// `ADDRESS` or `TARGET` one.
pub fn anchor_class(index: usize) -> u8 {
    anchor_table().get(index).map_or(HIDDEN, |(c, _, _)| *c)
}

/// Whether the anchor at `index` of [`anchors`] counts only as a whole word: neither the byte
/// before it nor the byte after it is an ASCII letter, digit or `_`.
pub fn anchor_whole_word(index: usize) -> bool {
    anchor_table().get(index).is_some_and(|(_, w, _)| *w)
}

/// Every anchor with its class and whether it counts only as a whole word. The verbs and the
/// names of the model are the words themselves ([`SENDING`], [`ACTING`], [`NOUNS_STRONG`],
/// [`NOUNS_WEAK`]), whole words only: [`signals`] takes a verb or an address only from a token
/// equal to one of them, and a token is a whole run of letters, digits and `_` (a word inside
/// another one, "ai" in "details" or "run" in "runner", is never one). So the prefilter says
/// "maybe" for exactly the texts whose tokens can be verbs or addresses (more often, never less:
/// an apostrophe, a hyphen or a non-ASCII letter beside a word counts as a boundary here), and
/// ordinary prose no longer gets the full analysis for words that only contain an anchor.
fn anchor_table() -> &'static [(u8, bool, &'static str)] {
    static ALL: OnceLock<Vec<(u8, bool, &'static str)>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all: Vec<(u8, bool, &'static str)> = Vec::new();
        for w in SENDING.iter().chain(ACTING) {
            all.push((VERB, true, w));
        }
        for w in NOUNS_STRONG.iter().chain(NOUNS_WEAK) {
            all.push((ADDRESS, true, w));
        }
        for (class, list) in ANCHORS {
            all.extend(list.iter().map(|a| (*class, false, *a)));
        }
        all
    })
}

/// Anchor class: a directive verb.
pub const VERB: u8 = 1;
/// Anchor class: a name of the model or an agent.
pub const ADDRESS: u8 = 2;
/// Anchor class: something a directive aims at (a tool-shaped name, a destination, a secret).
pub const TARGET: u8 = 4;
/// Anchor class: markup that hides content.
pub const HIDDEN: u8 = 8;

/// The anchors matched anywhere, not only as whole words (the verbs and the names of the model
/// are added by [`anchor_table`]).
const ANCHORS: &[(u8, &[&str])] = &[
    (
        TARGET,
        &[
            "_",
            "(",
            "://",
            "@",
            "your",
            "please",
            ".ssh",
            "id_rsa",
            "id_ed25519",
            "id_ecdsa",
            ".aws",
            ".env",
            ".netrc",
            ".npmrc",
            ".pypirc",
            ".git-credentials",
            ".kube",
            ".docker",
            "/etc/shadow",
            ".gnupg",
            "credentials",
        ],
    ),
    (
        HIDDEN,
        &[
            "<!--",
            "<script",
            "display",
            "visibility",
            "hidden",
            "opacity",
            "font-size",
            "[//]:",
            "[comment]:",
        ],
    ),
];

/// The anchors of each class as one expression (without the case flag, which the caller's set
/// adds), in the order VERB, ADDRESS, TARGET, HIDDEN: the whole-word anchors between `\b`
/// assertions, which in ASCII mode mean what the whole-word test always meant (no ASCII
/// letter, digit or `_` on either side), the others anywhere. Built once.
pub(super) fn anchor_expressions() -> &'static [(u8, String)] {
    static ALL: OnceLock<Vec<(u8, String)>> = OnceLock::new();
    ALL.get_or_init(|| {
        [VERB, ADDRESS, TARGET, HIDDEN]
            .into_iter()
            .map(|class| {
                let of = |whole: bool| {
                    anchor_table()
                        .iter()
                        .filter(|(c, w, _)| *c == class && *w == whole)
                        .map(|(_, _, a)| regex::escape(a))
                        .collect::<Vec<_>>()
                };
                let mut alternatives = Vec::new();
                let words = of(true);
                if !words.is_empty() {
                    alternatives.push(format!(r"\b(?:{})\b", words.join("|")));
                }
                let anywhere = of(false);
                if !anywhere.is_empty() {
                    alternatives.push(format!("(?:{})", anywhere.join("|")));
                }
                (class, alternatives.join("|"))
            })
            .collect()
    })
}

/// A quick test: `false` only when [`structural`] finds nothing in `text` with `ctx`. One pass
/// of the anchors' expressions (see `injection::quick_pass`), one of the catalogue's names, and
/// the byte facts for tag characters, look-alike letters and base64 runs.
pub fn may_have_signals(text: &str, ctx: &Context) -> bool {
    let pass = super::quick_pass(text, &[]);
    may_have_signals_after(pass.classes, text, ctx, &mut None)
}

/// [`may_have_signals`] given the anchor classes the quick pass saw in `text` (`classes`), with
/// the byte facts kept in `facts` (taken from there when a caller has them, stored there when
/// this test needed them), so that the labeller's other quick tests reuse the same facts.
pub(super) fn may_have_signals_after(
    classes: u8,
    text: &str,
    ctx: &Context,
    facts: &mut Option<ByteFacts>,
) -> bool {
    if classes & HIDDEN != 0 || (classes & VERB != 0 && classes & (ADDRESS | TARGET) != 0) {
        return true;
    }
    if ctx.matcher.as_ref().is_some_and(|m| m.is_match(text)) {
        return true;
    }
    // Tag characters (U+E0000 block: F3 A0 in UTF-8) and look-alike letters hide words from the
    // literal scan; a base64 run hides everything.
    let f = *facts.get_or_insert_with(|| ByteFacts::of(text));
    f.tag_lead || f.payload_run || (f.non_ascii && has_look_alikes(text))
}

/// What a text's bytes tell the labeller's quick tests: whether it has a byte of a tag
/// character's lead (`0xF3`), a base64 run of at least [`PAYLOAD_MIN`] characters, a non-ASCII
/// byte, or a control character other than a line break or a tab.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ByteFacts {
    pub tag_lead: bool,
    pub payload_run: bool,
    pub non_ascii: bool,
    pub control: bool,
}

impl ByteFacts {
    /// Each fact is found by the cheapest search that answers it exactly, since these tests run
    /// over every result string: the standard library's ASCII test and memchr (both vectorized)
    /// for the high bytes, a branch-free pass over fixed-size blocks for the control bytes (which
    /// the compiler vectorizes), and a skipping search for the base64 run that looks at about one
    /// byte in [`PAYLOAD_MIN`] of ordinary text (see [`has_b64_run`]). One table-driven loop over
    /// every byte did the same at about a gigabyte a second.
    pub(super) fn of(text: &str) -> ByteFacts {
        let bytes = text.as_bytes();
        let non_ascii = !bytes.is_ascii();
        ByteFacts {
            tag_lead: non_ascii && memchr::memchr(0xF3, bytes).is_some(),
            payload_run: has_b64_run(bytes, PAYLOAD_MIN),
            non_ascii,
            control: has_control(bytes),
        }
    }
}

/// Whether `bytes` hold a control character other than a line break, a carriage return or a
/// tab (DEL included). Blocks of 64 bytes are folded without a branch, so the loop vectorizes;
/// the search stops at the first block that has one.
fn has_control(bytes: &[u8]) -> bool {
    fn control(b: u8) -> bool {
        (b < 0x20 && b != b'\n' && b != b'\t' && b != b'\r') | (b == 0x7f)
    }
    let mut blocks = bytes.chunks_exact(64);
    for block in &mut blocks {
        if block.iter().fold(false, |any, &b| any | control(b)) {
            return true;
        }
    }
    blocks.remainder().iter().any(|&b| control(b))
}

/// Whether `bytes` hold a run of at least `min` base64 characters ([`is_b64`]). A run of `min`
/// that starts at or after `i` must cover byte `i + min - 1`: when that byte is not base64, no
/// such run starts before it and the search moves `min` bytes on; when it is, the search looks
/// back from it for the last byte that is not, and either finds the run or moves just past that
/// byte. Each byte is looked at once at most (the bytes looked back over are base64, and a later
/// look back that reached them would have found a run), so the search is linear for any text
/// and skips most of ordinary text.
fn has_b64_run(bytes: &[u8], min: usize) -> bool {
    if min == 0 {
        return true;
    }
    let mut i = 0;
    while i + min <= bytes.len() {
        let last = i + min - 1;
        match (i..=last).rev().find(|&k| !is_b64(bytes[k])) {
            None => return true,
            Some(k) => i = k + 1,
        }
    }
    false
}

fn is_b64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_')
}

/// Every structural finding in `text`, in text order.
pub fn structural(text: &str, ctx: &Context) -> Vec<Structural> {
    if !may_have_signals(text, ctx) {
        return Vec::new();
    }
    structural_unfiltered(text, ctx)
}

/// [`structural`] without its prefilter, for a caller that ran [`may_have_signals`] itself
/// (and, in the tests, to hold the prefilter to what the analysis finds).
pub(super) fn structural_unfiltered(text: &str, ctx: &Context) -> Vec<Structural> {
    let mut out = Vec::new();
    analyse(text, ctx, 0, &mut out, true);
    out.sort_by_key(|s| (s.at.start, s.label));
    out.dedup_by(|a, b| a.label == b.label && a.at == b.at);
    out
}

/// The signals of one passage, found in one pass over its tokens.
#[derive(Default)]
struct Signals {
    address: Vec<Range<usize>>,
    /// Directive verbs in the imperative; `true` for a sending verb.
    verbs: Vec<(Range<usize>, bool)>,
    tools: Vec<ToolRef>,
    urls: Vec<Range<usize>>,
    /// Credential files.
    credentials: Vec<Range<usize>>,
    /// The reader's own secrets ("your access token").
    solicited: Vec<Range<usize>>,
    arguments: Vec<Range<usize>>,
}

/// A directive to call a tool: the verb and the name.
struct ToolRef {
    at: Range<usize>,
    /// A tool of the catalogue, not the one that answered.
    catalogue: bool,
    /// "please" shortly before the verb, and another server or service named after the tool.
    pleading: bool,
    /// The name is `snake_case` (not only a name followed by a parenthesis).
    shaped: bool,
    /// The name asks for more privilege than an ordinary call ("admin_shell", "run_as_root").
    privileged: bool,
    verb: &'static str,
}

/// What a weak phrase of the table needs besides itself to label (see
/// `injection::corroborated`): the signals of the text and its hidden regions, found once and
/// sorted, so each phrase costs a binary search and the few signals of its passage.
pub(super) struct Corroboration {
    address: Spans,
    tools: Spans,
    credentials: Spans,
    arguments: Spans,
    solicited: Spans,
    urls: Spans,
    sending: Spans,
    /// Per kind of hidden region (regions of one kind never overlap), by start.
    hidden: Vec<Vec<Range<usize>>>,
}

/// Ranges sorted by start, each cut to [`WINDOW`] bytes from its start (a long range counts from
/// where it begins), so the ranges that may be near a passage are found by a binary search.
pub(super) struct Spans(Vec<Range<usize>>);

impl Spans {
    pub(super) fn new<'a>(ranges: impl IntoIterator<Item = &'a Range<usize>>) -> Spans {
        let mut v: Vec<Range<usize>> = ranges
            .into_iter()
            .map(|r| r.start..r.end.min(r.start + WINDOW))
            .collect();
        v.sort_unstable_by_key(|r| r.start);
        Spans(v)
    }

    /// The ranges that may be within [`WINDOW`] bytes of `at`, in order of start.
    pub(super) fn around<'a>(
        &'a self,
        at: &'a Range<usize>,
    ) -> impl Iterator<Item = &'a Range<usize>> + 'a {
        let from = self.0.partition_point(|r| r.start + 2 * WINDOW < at.start);
        let last = at.end + WINDOW;
        self.0[from..]
            .iter()
            .take_while(move |r| r.start <= last)
            .filter(move |r| near(r, at))
    }

    fn any(&self, at: &Range<usize>) -> bool {
        self.around(at).next().is_some()
    }
}

impl Corroboration {
    pub(super) fn new(text: &str, ctx: &Context) -> Corroboration {
        let s = signals(text, ctx);
        let mut hidden: Vec<(&'static str, Vec<Range<usize>>)> = Vec::new();
        for (kind, r) in hidden_regions(text) {
            match hidden.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, list)) => list.push(r),
                None => hidden.push((kind, vec![r])),
            }
        }
        Corroboration {
            address: Spans::new(&s.address),
            // A name followed by a parenthesis is a method in documentation ("then call the
            // parse() method"); only a catalogue tool or a snake_case name counts here.
            tools: Spans::new(
                s.tools
                    .iter()
                    .filter(|t| t.catalogue || t.shaped)
                    .map(|t| &t.at),
            ),
            credentials: Spans::new(&s.credentials),
            arguments: Spans::new(&s.arguments),
            solicited: Spans::new(&s.solicited),
            urls: Spans::new(&s.urls),
            sending: Spans::new(s.verbs.iter().filter(|(_, send)| *send).map(|(v, _)| v)),
            hidden: hidden.into_iter().map(|(_, list)| list).collect(),
        }
    }

    /// The structural signal within the passage of `at`, if any: an address to the model, a
    /// call of a tool (of the catalogue, or a snake_case name), a credential file, the call's
    /// own argument values, the reader's secrets or a URL or e-mail address together with a
    /// sending verb, or hidden markup around it. Ordinary directives ("run", "call the method")
    /// do not count: documentation is full of them next to "you must".
    pub(super) fn near(&self, at: &Range<usize>) -> Option<&'static str> {
        let sending = self.sending.any(at);
        if self.address.any(at) {
            Some("address")
        } else if self.tools.any(at) {
            Some("tool-call")
        } else if self.credentials.any(at) {
            Some("credential")
        } else if self.arguments.any(at) {
            Some("call-arguments")
        } else if sending && self.solicited.any(at) {
            Some("solicited-secret")
        } else if sending && self.urls.any(at) {
            Some("destination")
        } else if self.hidden.iter().any(|list| {
            // The one region of this kind that may hold `at`: the last to start before it.
            let i = list.partition_point(|h| h.start <= at.start);
            i > 0 && list[i - 1].end >= at.end
        }) {
            Some("hidden")
        } else {
            None
        }
    }
}

/// Whether two ranges are in one passage: at most [`WINDOW`] bytes apart.
pub(super) fn near(a: &Range<usize>, b: &Range<usize>) -> bool {
    // Ranges that overlap are at distance 0.
    let gap = b
        .start
        .saturating_sub(a.end)
        .max(a.start.saturating_sub(b.end));
    gap <= WINDOW
}

fn span(a: &Range<usize>, b: &Range<usize>) -> Range<usize> {
    a.start.min(b.start)..a.end.max(b.end)
}

/// Finds the signals of `text` (at `base` in the outer text) and pushes what they combine to.
/// `outer` is whether hidden regions and payloads are looked into (once only: a region is not
/// searched for regions again, so the work stays linear).
fn analyse(text: &str, ctx: &Context, base: usize, out: &mut Vec<Structural>, outer: bool) {
    let s = signals(text, ctx);
    combine(text, &s, ctx, base, out, outer);
}

/// What the signals `s` of `text` combine to (see [`analyse`]).
fn combine(
    text: &str,
    s: &Signals,
    ctx: &Context,
    base: usize,
    out: &mut Vec<Structural>,
    outer: bool,
) {
    let shift = |r: &Range<usize>| r.start + base..r.end + base;
    let directives = s
        .verbs
        .iter()
        .map(|(r, _)| r)
        .chain(s.tools.iter().map(|t| &t.at));
    // Address with a directive.
    for a in &s.address {
        if let Some(d) = directives.clone().find(|d| near(a, d)) {
            out.push(Structural {
                label: Label::AddressedDirective,
                at: shift(&span(a, d)),
                signals: vec!["address", "directive"],
            });
            break;
        }
    }
    // Tool directives.
    for tool in &s.tools {
        let t = &tool.at;
        // A URL after a tool name is a destination only with a verb that sends ("call x(…) and
        // post it to https://…"): documentation names a tool and then shows example URLs.
        let sends = s
            .verbs
            .iter()
            .any(|(v, sending)| *sending && v.start >= t.start && near(t, v));
        let destination = s
            .urls
            .iter()
            .filter(|_| sends)
            .chain(&s.credentials)
            .chain(&s.solicited)
            .chain(&s.arguments)
            // Where the call's result goes comes after the call ("call x(…) and send it to …").
            .find(|d| d.start >= t.start && near(t, d));
        let (label, signals) = if tool.catalogue {
            (true, vec!["catalogue-tool", "directive"])
        } else if (ctx.error || error_shaped(text)) && tool.shaped && tool.privileged {
            (true, vec!["tool-call", "directive", "error-text"])
        } else if let Some(d) = destination {
            out.push(Structural {
                label: Label::ToolDirective,
                at: shift(&span(t, d)),
                signals: vec!["tool-call", "directive", "destination"],
            });
            continue;
        } else if tool.pleading {
            (true, vec!["tool-call", "directive", "please"])
        } else {
            (false, vec![])
        };
        if label {
            out.push(Structural {
                label: Label::ToolDirective,
                at: shift(t),
                signals,
            });
        }
    }
    // A sending verb with a credential, or with the call's own values and somewhere to send
    // them.
    for (v, sending) in &s.verbs {
        if !sending {
            continue;
        }
        let word = text[v.clone()].to_ascii_lowercase();
        let outbound = OUTBOUND.contains(&word.as_str());
        let url = s.urls.iter().find(|u| near(v, u));
        let credential = s
            .credentials
            .iter()
            .find(|c| near(v, c) && (outbound || url.is_some()));
        let solicited = s.solicited.iter().find(|c| near(v, c) && url.is_some());
        if let Some(c) = credential.or(solicited) {
            out.push(Structural {
                label: Label::ToolDirective,
                at: shift(&span(v, c)),
                signals: vec!["directive", "credential"],
            });
        } else if let (Some(a), Some(u)) = (
            s.arguments.iter().find(|a| near(v, a)),
            s.urls.iter().find(|u| near(v, u)),
        ) {
            out.push(Structural {
                label: Label::ToolDirective,
                at: shift(&span(&span(v, a), u)),
                signals: vec!["directive", "call-arguments", "destination"],
            });
        }
    }
    if !outer {
        return;
    }
    // Hidden regions: what is inside is analysed as its own passage.
    for (kind, region) in hidden_regions(text) {
        let inner = &text[region.clone()];
        let mut found = Vec::new();
        let inner_signals = signals(inner, ctx);
        combine(inner, &inner_signals, ctx, 0, &mut found, false);
        // Scripts and comments are full of ordinary verbs and links ("fetch(url)", "run the
        // build"), so inside them only an address, a tool call by name, a combination found
        // above or a phrase of the list counts.
        let suspicious = !found.is_empty()
            || !inner_signals.address.is_empty()
            || inner_signals
                .tools
                .iter()
                .any(|t| t.catalogue || matches!(t.verb, "call" | "invoke"))
            || !super::phrase_labels(inner).is_empty();
        if suspicious {
            out.push(Structural {
                label: Label::HiddenDirective,
                at: shift(&region),
                signals: vec![kind, "address-or-directive"],
            });
        }
    }
    // Unicode tag characters spell ASCII no one sees.
    let tags: String = text
        .chars()
        .filter_map(|c| match c as u32 {
            u @ 0xE0020..=0xE007E => char::from_u32(u - 0xE0000),
            _ => None,
        })
        .collect();
    if tags.len() >= 8 {
        let first = text
            .char_indices()
            .find(|(_, c)| (0xE0020..=0xE007E).contains(&(*c as u32)))
            .map_or(0, |(i, _)| i);
        let mut found = Vec::new();
        let inner = signals(&tags, ctx);
        combine(&tags, &inner, ctx, 0, &mut found, false);
        if !found.is_empty()
            || !inner.address.is_empty()
            || !inner.verbs.is_empty()
            || !super::phrase_labels(&tags).is_empty()
        {
            out.push(Structural {
                label: Label::HiddenDirective,
                at: first + base..first + base + 4,
                signals: vec!["tag-characters", "address-or-directive"],
            });
        }
    }
    // Base64 payloads that decode to instruction-like text.
    for (run, decoded) in payloads(text) {
        let mut found = Vec::new();
        analyse(&decoded, ctx, 0, &mut found, false);
        if !found.is_empty() || !super::phrase_labels(&decoded).is_empty() {
            out.push(Structural {
                label: Label::EncodedDirective,
                at: shift(&run),
                signals: vec!["base64", "instruction-like"],
            });
        }
    }
}

/// Whether `text` reads as error text although the server did not mark it so: it starts with
/// an error word ("ERROR: permission denied", "Traceback …", "403 Forbidden"). Many
/// servers (a FastMCP tool returning a string, a wrapper that drops `isError`) report a
/// failure in an ordinary result, and the model reads it the same; an error hint that sends it
/// to a privileged tool is the escalation shape either way.
fn error_shaped(text: &str) -> bool {
    const WORDS: &[&str] = &[
        "error",
        "err ",
        "err:",
        "fatal",
        "exception",
        "traceback",
        "failed",
        "failure",
        "permission denied",
        "access denied",
        "denied",
        "forbidden",
        "unauthorized",
        "not authorized",
    ];
    // "[ERROR]", "403 Forbidden", "** failed": what is not a letter before the word is skipped.
    let lead: String = text
        .trim_start_matches(|c: char| !c.is_ascii_alphabetic())
        .chars()
        .take(24)
        .collect::<String>()
        .to_ascii_lowercase();
    WORDS.iter().any(|w| lead.starts_with(w))
}

/// Nouns that name the model or an agent without doubt.
pub(super) const NOUNS_STRONG: &[&str] = &[
    "ai",
    "llm",
    "llms",
    "chatbot",
    "chatgpt",
    "gpt",
    "claude",
    "gemini",
    "copilot",
    "assistant",
    "assistants",
];
/// Nouns that name it only in an addressing position.
pub(super) const NOUNS_WEAK: &[&str] = &[
    "agent", "agents", "model", "models", "bot", "bots", "system",
];
/// Words that may stand between a sentence start and a vocative ("To the AI agent:").
const PRE_VOCATIVE: &[&str] = &[
    "ai",
    "the",
    "dear",
    "hey",
    "hi",
    "hello",
    "attention",
    "important",
    "ok",
    "okay",
    "language",
    "autonomous",
    "any",
    "all",
    "to",
    "for",
    "note",
];
/// Nouns a note addressed to the model starts with ("note for the AI").
const ADDRESS_NOUNS: &[&str] = &[
    "note",
    "notes",
    "message",
    "instruction",
    "instructions",
    "attention",
    "reminder",
    "hint",
    "memo",
    "notice",
    "directive",
    "request",
    "task",
    "warning",
    "ps",
    "important",
];
const GREETINGS: &[&str] = &["dear", "hey", "hi", "hello", "attention", "yo"];
const READING: &[&str] = &[
    "reads",
    "read",
    "reading",
    "processing",
    "processes",
    "parses",
    "parsing",
    "summarizing",
    "summarising",
    "summarizes",
    "browsing",
    "ingesting",
    "crawling",
    "scraping",
    "indexing",
    "viewing",
];
/// Verbs that send something somewhere.
pub(super) const SENDING: &[&str] = &[
    "send",
    "post",
    "export",
    "forward",
    "upload",
    "email",
    "e-mail",
    "transmit",
    "exfiltrate",
    "leak",
    "share",
    "submit",
    "transfer",
    "copy",
    "attach",
    "include",
    "paste",
    "pass",
];
/// Sending verbs that mean "out of here" by themselves; the others ("copy", "include", "share")
/// need a URL or an address to count with a credential.
const OUTBOUND: &[&str] = &[
    "send",
    "post",
    "upload",
    "forward",
    "email",
    "e-mail",
    "transmit",
    "exfiltrate",
    "leak",
];
/// Verbs that act.
pub(super) const ACTING: &[&str] = &[
    "delete", "remove", "run", "execute", "exec", "purge", "wipe", "erase", "drop", "call",
    "invoke", "use", "retry", "try", "curl", "wget", "rm", "kill", "grant", "disable", "reset",
    "install", "read", "open", "cat", "fetch", "visit", "navigate", "download", "reveal", "output",
    "dump", "trigger", "launch", "switch", "reply", "respond", "answer", "print",
];
/// Verbs that call a tool.
const CALLING: &[&str] = &[
    "call", "invoke", "use", "run", "execute", "retry", "try", "trigger", "launch", "switch",
];
/// Words after which a verb is still in the imperative ("please also run …").
const IMPERATIVE_LEAD: &[&str] = &[
    "please",
    "also",
    "then",
    "now",
    "first",
    "next",
    "immediately",
    "must",
    "should",
    "always",
    "just",
    "and",
    "kindly",
    "quickly",
    "silently",
    "secretly",
    "simply",
];
/// Parts of a tool name that ask for more privilege: an error hint that sends the model to such
/// a tool is the escalation shape (a library's "call fit_transform() first" is not).
const PRIVILEGED: &[&str] = &[
    "shell",
    "admin",
    "root",
    "sudo",
    "exec",
    "system",
    "superuser",
    "elevat",
    "privileg",
    "unrestricted",
    "bypass",
    "override",
    "force",
    "raw_sql",
    "eval",
    "su_",
    "grant",
];

/// Words after a weak noun and a colon that make it a role label ("Agent: delete …").
const AFTER_ROLE: &[&str] = &[
    "you",
    "please",
    "ignore",
    "do",
    "don't",
    "now",
    "before",
    "first",
    "important",
    "always",
    "never",
    "stop",
    "from",
    "your",
];
/// Words that, after "your", name the reader's secrets.
const SECRETS: &[&str] = &[
    "token",
    "tokens",
    "password",
    "passwords",
    "credentials",
    "credential",
    "secret",
    "secrets",
    "cookie",
    "cookies",
    "key",
    "keys",
    "passphrase",
    "prompt",
    "prompts",
];
/// Credential paths (lowercase).
const CREDENTIAL_PATHS: &[&str] = &[
    ".ssh/",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    ".aws/credentials",
    ".env",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".kube/config",
    ".docker/config.json",
    "/etc/shadow",
    ".gnupg",
    "credentials.json",
];

pub(super) struct Token<'a> {
    pub(super) word: std::borrow::Cow<'a, str>,
    pub(super) at: Range<usize>,
}

/// Tokens: runs of letters, digits, `_`, `-` inside a word and apostrophes, lowercased, with
/// look-alike letters folded to ASCII (see [`fold`]). A token spelt only in ASCII lowercase
/// letters, digits, `_`, `-` and `'` is its own word, so it borrows the text's bytes; only the
/// others (capitals, non-ASCII letters, typographic apostrophes) are copied and rewritten. An
/// allocation per token was the largest cost of the analysis.
pub(super) fn tokens(text: &str) -> Vec<Token<'_>> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut prev_word_char = false;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        let inner = c.is_alphanumeric() || c == '_' || c == '\'' || c == '\u{2019}';
        // A hyphen joins two letters ("e-mail"), nothing else.
        let hyphen = c == '-'
            && prev_word_char
            && text[i + 1..]
                .chars()
                .next()
                .is_some_and(char::is_alphanumeric);
        if inner || hyphen {
            if start.is_none() {
                start = Some(i);
            }
        } else if let Some(s) = start.take() {
            let raw = &text[s..i];
            // Quotation marks around a word are not part of it ("'Please" is "please").
            let lead = raw.len() - raw.trim_start_matches(['\'', '\u{2019}']).len();
            let trail = raw.len() - raw.trim_end_matches(['\'', '\u{2019}']).len();
            let plain = raw.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'\'')
            });
            let word: std::borrow::Cow<'_, str> = if plain {
                // Lowercasing and folding leave these bytes as they are, and the only
                // apostrophes are ASCII ones, so the word is the trimmed slice itself.
                raw.trim_matches('\'').into()
            } else {
                let mut word = String::with_capacity(raw.len());
                for c in raw.chars() {
                    for l in c.to_lowercase() {
                        word.push(fold(l));
                    }
                }
                word.replace('\u{2019}', "'")
                    .trim_matches('\'')
                    .to_string()
                    .into()
            };
            if !word.is_empty() {
                out.push(Token {
                    word,
                    at: s + lead..i - trail,
                });
            }
        }
        prev_word_char = inner;
    }
    out
}

/// What a word is in the labeller's vocabulary: a bit per list it is in ([`NOUNS_STRONG`],
/// [`NOUNS_WEAK`], [`SENDING`], [`ACTING`]), 0 for every other word. One hash lookup per token
/// (none for a token longer than every word of the lists) instead of comparing it with every
/// word of four lists.
fn vocabulary(word: &str) -> u8 {
    type Table = (WordMap<u8>, usize);
    static TABLE: OnceLock<Table> = OnceLock::new();
    let (table, longest) = TABLE.get_or_init(|| {
        let mut t = WordMap::default();
        for (bit, list) in [
            (NOUN_STRONG, NOUNS_STRONG),
            (NOUN_WEAK, NOUNS_WEAK),
            (VERB_SENDING, SENDING),
            (VERB_ACTING, ACTING),
        ] {
            for w in list {
                *t.entry(*w).or_insert(0) |= bit;
            }
        }
        let longest = t.keys().map(|w| w.len()).max().unwrap_or(0);
        (t, longest)
    });
    if word.len() > *longest {
        return 0;
    }
    table.get(word).copied().unwrap_or(0)
}

/// A map from the labeller's fixed words, looked up once per word of a text: FNV-1a hashes a
/// short word in a few nanoseconds, where the standard library's SipHash (whose defence against
/// chosen keys a table of constant words does not need) took a tenth of the analysis. A text
/// cannot slow the lookups by its choice of words: it only asks, and the table's own keys are
/// fixed.
pub(super) type WordMap<V> =
    std::collections::HashMap<&'static str, V, std::hash::BuildHasherDefault<Fnv>>;

/// The FNV-1a hash (64 bits) of [`WordMap`].
pub(super) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

const NOUN_STRONG: u8 = 1;
const NOUN_WEAK: u8 = 2;
const VERB_SENDING: u8 = 4;
const VERB_ACTING: u8 = 8;

/// The starts of each pattern's occurrences in `hay`, pattern by pattern, as
/// `str::match_indices` lists them (left to right, none overlapping an earlier one of the same
/// pattern), at most `limit` of each: one pass of `ac` (built with the standard match kind, so
/// that it reports overlapping matches) instead of one search per pattern. The overlapping
/// matches come in the order of their ends, which for the occurrences of one pattern (all of
/// one length) is the order of their starts.
pub(super) fn occurrences(ac: &AhoCorasick, hay: &str, limit: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); ac.patterns_len()];
    let mut ends = vec![0usize; ac.patterns_len()];
    for m in ac.find_overlapping_iter(hay) {
        let p = m.pattern().as_usize();
        if m.start() >= ends[p] && out[p].len() < limit {
            out[p].push(m.start());
            ends[p] = m.end();
        }
    }
    out
}

/// [`occurrences`] of `patterns` (an automaton built once per table and kept in `cell`), or, if
/// the automaton cannot be built, one `match_indices` search per pattern: the same answer.
pub(super) fn occurrences_of(
    cell: &'static OnceLock<Option<AhoCorasick>>,
    patterns: &[&str],
    hay: &str,
    limit: usize,
) -> Vec<Vec<usize>> {
    // A DFA without a prefilter walks every byte with one table lookup: the patterns' rarest
    // bytes (`/`, `.`, `:`) are common in code and markup, where the default automaton's
    // rare-byte prefilter stopped at most of them (a little slower on this repository's code).
    let built = cell.get_or_init(|| {
        AhoCorasickBuilder::new()
            .kind(Some(aho_corasick::AhoCorasickKind::DFA))
            .prefilter(false)
            .build(patterns)
            .ok()
    });
    match built {
        Some(ac) => occurrences(ac, hay, limit),
        None => patterns
            .iter()
            .map(|p| hay.match_indices(p).take(limit).map(|(at, _)| at).collect())
            .collect(),
    }
}

/// A look-alike letter (Cyrillic, Greek) as the ASCII letter it imitates; others unchanged.
/// Whether `text` holds a non-ASCII letter that the word scan reads as an ASCII one (lowercased,
/// then [`fold`]ed): the quick tests must send such a text to the full scan, since their ASCII
/// literals cannot see the word it spells. Derived from `fold` itself, so a letter added there
/// is never missed here.
pub(crate) fn has_look_alikes(text: &str) -> bool {
    !text.is_ascii()
        && text
            .chars()
            .any(|c| !c.is_ascii() && c.to_lowercase().any(|l| l.is_ascii() || fold(l).is_ascii()))
}

pub(super) fn fold(c: char) -> char {
    match c {
        'а' => 'a',
        'в' => 'b',
        'е' | 'ё' => 'e',
        'к' => 'k',
        'м' => 'm',
        'н' => 'h',
        'о' => 'o',
        'р' => 'p',
        'с' => 'c',
        'т' => 't',
        'у' => 'y',
        'х' => 'x',
        'і' => 'i',
        'ј' => 'j',
        'ѕ' => 's',
        'ԁ' => 'd',
        'ԛ' => 'q',
        'ԝ' => 'w',
        'ɡ' => 'g',
        'α' => 'a',
        'ε' => 'e',
        'ι' => 'i',
        'κ' => 'k',
        'ν' => 'v',
        'ο' => 'o',
        'ρ' => 'p',
        'τ' => 't',
        'υ' => 'u',
        'χ' => 'x',
        _ => c,
    }
}

/// Whether the token at `at` starts a clause: only spaces since the text's start, a line break,
/// or sentence punctuation.
fn clause_start(text: &str, at: usize) -> bool {
    for c in text[..at].chars().rev() {
        match c {
            ' ' | '\t' | '\u{a0}' => continue,
            '\n' | '\r' | '.' | '!' | '?' | ':' | ';' | ',' | '(' | '[' | '{' | '"' | '\''
            | '*' | '-' | '>' | '#' | '|' | '\u{2014}' | '\u{2013}' | '\u{201c}' => return true,
            _ => return false,
        }
    }
    true
}

/// The first character after `at`, spaces skipped.
fn next_char(text: &str, at: usize) -> Option<char> {
    text[at..].chars().find(|c| !matches!(c, ' ' | '\t'))
}

/// Whether `w` is spelt like a tool name: `snake_case` with at least one underscore.
fn tool_shaped(original: &str) -> bool {
    original.len() >= 4
        && original.contains('_')
        && original.starts_with(|c: char| c.is_ascii_lowercase())
        && original
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !original.ends_with('_')
}

fn signals(text: &str, ctx: &Context) -> Signals {
    let toks = tokens(text);
    let mut s = Signals::default();
    let w = |i: usize| toks.get(i).map_or("", |t| &*t.word);
    for (i, t) in toks.iter().enumerate() {
        let word = &*t.word;
        let kind = vocabulary(word);
        let strong =
            kind & NOUN_STRONG != 0 || (word == "model" && i > 0 && w(i - 1) == "language");
        if kind & (NOUN_STRONG | NOUN_WEAK) != 0 {
            // A role label or vocative: "SYSTEM: you …", "Assistant, …", "AI agent: …".
            let mut first = i;
            while first > 0 && i - first < 3 && PRE_VOCATIVE.contains(&w(first - 1)) {
                first -= 1;
            }
            let punct = next_char(text, t.at.end);
            if clause_start(text, toks[first].at.start) {
                let after = toks.get(i + 1).map_or("", |n| &*n.word);
                let role = match punct {
                    Some(':') => strong || AFTER_ROLE.contains(&after) || is_verb(after),
                    Some(',') | Some('!') => word != "system",
                    _ => false,
                };
                if role {
                    s.address.push(toks[first].at.start..t.at.end + 1);
                }
            }
            // A note for it: "note for the AI", "instructions to any agents".
            let mut j = i;
            if j > 0 && matches!(w(j - 1), "the" | "any" | "all" | "every" | "a" | "an") {
                j -= 1;
            }
            if j >= 2 && matches!(w(j - 1), "for" | "to") && ADDRESS_NOUNS.contains(&w(j - 2)) {
                s.address.push(toks[j - 2].at.start..t.at.end);
            }
            // A greeting: "dear agent", "hey assistant".
            if j >= 1 && GREETINGS.contains(&w(j - 1)) && word != "system" {
                s.address.push(toks[j - 1].at.start..t.at.end);
            }
            // The reader as a model: "whoever reads this as a model", "if you are an AI".
            if j >= 2 && matches!(w(j - 1), "a" | "an") && w(j - 2) == "as" {
                let from = (j - 2).saturating_sub(8);
                if (from..j - 2).any(|k| READING.contains(&w(k))) {
                    s.address.push(toks[from].at.start..t.at.end);
                }
            }
            if j >= 2
                && matches!(w(j - 1), "a" | "an")
                && w(j - 2) == "are"
                && w(j.saturating_sub(3)) == "you"
                && word != "system"
            {
                s.address.push(toks[j - 3].at.start..t.at.end);
            }
            // "any AI reading this", "agents processing this page".
            if word != "system"
                && READING.contains(&w(i + 1))
                && matches!(w(i + 2), "this" | "these" | "the")
            {
                s.address.push(t.at.start..toks[i + 2].at.end);
            }
        }
        // Directive verbs in the imperative.
        if kind & (VERB_SENDING | VERB_ACTING) != 0 {
            let lead = i > 0
                && (IMPERATIVE_LEAD.contains(&w(i - 1))
                    || (w(i - 1).ends_with("ly") && clause_start(text, toks[i - 1].at.start)));
            let imperative = clause_start(text, t.at.start) || lead;
            if imperative {
                s.verbs.push((t.at.clone(), SENDING.contains(&word)));
            }
            // A tool directive: a calling verb, then a tool within four tokens.
            if CALLING.contains(&word) && imperative {
                let pleading = (i.saturating_sub(3)..i).any(|k| w(k) == "please");
                // "… on the ops server": the order aims at another server or service.
                let elsewhere = |k: usize| {
                    (k + 1..(k + 7).min(toks.len())).any(|m| {
                        matches!(
                            w(m),
                            "server" | "servers" | "service" | "host" | "cluster" | "mcp"
                        )
                    })
                };
                for k in i + 1..(i + 5).min(toks.len()) {
                    let original = &text[toks[k].at.clone()];
                    let name = &*toks[k].word;
                    let catalogue = ctx.tools.iter().any(|n| n == name)
                        && ctx.answering.as_deref() != Some(name);
                    let paren = next_char(text, toks[k].at.end) == Some('(');
                    // "make_release.py" is a file, not a tool.
                    let file = text[toks[k].at.end..].starts_with('.')
                        && text[toks[k].at.end + 1..]
                            .chars()
                            .next()
                            .is_some_and(|c| c.is_ascii_alphanumeric());
                    let shaped = (tool_shaped(original) || paren)
                        && !file
                        && ctx.answering.as_deref() != Some(name);
                    if catalogue || shaped {
                        s.tools.push(ToolRef {
                            at: t.at.start..toks[k].at.end,
                            catalogue,
                            pleading: pleading && elsewhere(k),
                            shaped: tool_shaped(original),
                            privileged: PRIVILEGED.iter().any(|p| name.contains(p)),
                            verb: CALLING.iter().find(|v| **v == word).copied().unwrap_or(""),
                        });
                        break;
                    }
                }
            }
        }
        // A catalogue tool written as a call: "purge_mailbox()" or "purge_mailbox(x)".
        if ctx.tools.iter().any(|n| n == word)
            && ctx.answering.as_deref() != Some(word)
            && next_char(text, t.at.end) == Some('(')
        {
            s.tools.push(ToolRef {
                at: t.at.clone(),
                catalogue: true,
                pleading: false,
                shaped: true,
                privileged: false,
                verb: "",
            });
        }
        // The reader's own secrets: "your (current) (OAuth) access token".
        if word == "your" {
            if let Some(k) = (i + 1..(i + 5).min(toks.len())).find(|&k| SECRETS.contains(&w(k))) {
                s.solicited.push(t.at.start..toks[k].at.end);
            }
        }
    }
    // Destinations that are not words.
    let lower = text.to_ascii_lowercase();
    for scheme in ["http://", "https://", "ftp://", "file://"] {
        for (at, _) in lower.match_indices(scheme).take(64) {
            let end = lower[at..]
                .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | ')'))
                .map_or(lower.len(), |e| at + e);
            s.urls.push(at..end);
        }
    }
    for (at, _) in lower.match_indices('@').take(64) {
        let local = lower[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+'))
            .count();
        let domain = &lower[at + 1..];
        let dlen = domain
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
            .count();
        if local > 0 && domain[..dlen].contains('.') && !domain[..dlen].ends_with('.') {
            s.urls.push(at - local..at + 1 + dlen);
        }
    }
    s.credentials = credential_files(&lower)
        .into_iter()
        .map(|(at, _)| at)
        .collect();
    for value in &ctx.arguments {
        if let Some(at) = text.find(value.as_str()) {
            s.arguments.push(at..at + value.len());
        }
    }
    s
}

/// The user's credential files that `lower` (a text lowercased in ASCII) names, each with the
/// entry of [`CREDENTIAL_PATHS`] it matched, path by path in the table's order (at most 64 of
/// each): private SSH keys and the `.ssh` folder, cloud and tool credentials, `.env` files as a
/// file name. A public key, a host list or an example file is not one. What the analysis
/// counts as a credential destination, and what `arguments.confirm_credential_paths` asks the
/// person about.
pub(super) fn credential_files(lower: &str) -> Vec<(Range<usize>, &'static str)> {
    let mut out = Vec::new();
    static PATHS: OnceLock<Option<AhoCorasick>> = OnceLock::new();
    let found = occurrences_of(&PATHS, CREDENTIAL_PATHS, lower, 64);
    for (path, starts) in CREDENTIAL_PATHS.iter().zip(found) {
        for at in starts {
            let end = at + path.len();
            // A public key, a host list or an example is not a secret.
            let whole = lower[end..]
                .find(|c: char| c.is_whitespace() || matches!(c, '`' | '"' | '\'' | ')' | '<'))
                .map_or(&lower[end..], |e| &lower[end..end + e]);
            if whole.ends_with(".pub")
                || whole.contains("known_hosts")
                || whole.starts_with(".example")
                || whole.starts_with(".sample")
            {
                continue;
            }
            // ".env" only as a file name: not "environment", ".envrc" or "process.env".
            if *path == ".env"
                && (lower[end..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                    || lower[..at]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_'))
            {
                continue;
            }
            out.push((at..end, *path));
        }
    }
    out
}

fn is_verb(w: &str) -> bool {
    vocabulary(w) & (VERB_SENDING | VERB_ACTING) != 0
}

/// The regions of `text` a person reading the rendered page does not see, with their kind:
/// HTML comments, script blocks (JSON-LD included), elements hidden by style or attribute,
/// Markdown comments, in text order. Every one of them: the regions of one kind never overlap,
/// so together they are at most four times the text.
fn hidden_regions(text: &str) -> Vec<(&'static str, Range<usize>)> {
    let lower = text.to_ascii_lowercase();
    let mut out = Vec::new();
    // Never cut inside a character.
    let boundary = |end: usize| -> usize {
        (0..=end.min(text.len()))
            .rev()
            .find(|&e| text.is_char_boundary(e))
            .unwrap_or(0)
    };
    // HTML comments, one after the other (so the search is linear).
    let mut from = 0;
    while let Some(open) = lower[from..].find("<!--").map(|o| from + o + 4) {
        let close = lower[open..].find("-->").map(|c| open + c);
        out.push(("html-comment", open..close.unwrap_or(text.len())));
        from = close.map_or(lower.len(), |c| c + 3);
    }
    // Script blocks.
    let mut from = 0;
    while let Some(open) = lower[from..].find("<script").map(|o| from + o) {
        let body = lower[open..]
            .find('>')
            .map_or(lower.len(), |g| open + g + 1);
        let close = lower[body..].find("</script").map(|c| body + c);
        out.push(("script-block", body..close.unwrap_or(text.len())));
        from = close.unwrap_or(lower.len()).max(body);
    }
    // Elements hidden by style or attribute: from the end of the opening tag to the element's
    // closing tag (looked for within REGION_MAX bytes, the element cut there otherwise). The
    // next tag is looked for after the region, so hidden elements never overlap.
    let mut from = 0;
    while let Some(lt) = lower[from..].find('<').map(|o| from + o) {
        let Some(gt) = lower[lt..].find('>').map(|g| lt + g) else {
            break;
        };
        let tag = &lower[lt + 1..gt];
        from = gt + 1;
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        if name.is_empty() || tag.len() > 2048 {
            continue;
        }
        let squeezed: String = tag.chars().filter(|c| !c.is_whitespace()).collect();
        let hidden = squeezed.contains("display:none")
            || squeezed.contains("visibility:hidden")
            || squeezed.contains("font-size:0")
            || squeezed.contains("opacity:0;")
            || squeezed.contains("opacity:0\"")
            || squeezed.contains("opacity:0'")
            || squeezed.contains("aria-hidden=\"true\"")
            || squeezed.contains("aria-hidden='true'")
            || tag
                .split_whitespace()
                .skip(1)
                .any(|a| a == "hidden" || a.starts_with("hidden=") || a.starts_with("hidden/"));
        if !hidden {
            continue;
        }
        let window = boundary(gt + 1 + REGION_MAX);
        let end = lower[gt + 1..window]
            .find(&format!("</{name}"))
            .map_or(window, |c| gt + 1 + c);
        out.push(("hidden-element", gt + 1..end));
        from = end.max(gt + 1);
    }
    // Markdown comments: `[//]: # (…)` and `[comment]: <> (…)`, to the end of the line; a
    // marker inside the previous one's region is part of it.
    for marker in ["[//]:", "[comment]:"] {
        let mut past = 0;
        for (at, _) in lower.match_indices(marker) {
            if at < past {
                continue;
            }
            let start = at + marker.len();
            let end = lower[start..].find('\n').map_or(lower.len(), |e| start + e);
            out.push(("markdown-comment", start..end));
            past = end;
        }
    }
    out.sort_by_key(|(_, r)| r.start);
    out
}

/// The base64 runs of `text` (at least [`PAYLOAD_MIN`] characters) that decode to mostly
/// printable text, with the text: every one (the runs never overlap).
fn payloads(text: &str) -> Vec<(Range<usize>, String)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !is_b64(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_b64(bytes[i]) {
            i += 1;
        }
        let mut end = i;
        while end < bytes.len() && bytes[end] == b'=' && end - i < 2 {
            end += 1;
        }
        if i - start >= PAYLOAD_MIN {
            if let Some(decoded) = decode(&bytes[start..i]) {
                let printable = decoded
                    .iter()
                    .filter(|b| b.is_ascii_graphic() || matches!(b, b' ' | b'\n' | b'\t'))
                    .count();
                if printable * 10 >= decoded.len() * 9 {
                    if let Ok(s) = String::from_utf8(decoded) {
                        out.push((start..end, s));
                    }
                }
            }
        }
        i = end.max(i);
    }
    out
}

/// Decodes standard or URL-safe base64 without padding; `None` when it is not base64.
fn decode(run: &[u8]) -> Option<Vec<u8>> {
    let value = |b: u8| -> Option<u32> {
        Some(match b {
            b'A'..=b'Z' => (b - b'A') as u32,
            b'a'..=b'z' => (b - b'a' + 26) as u32,
            b'0'..=b'9' => (b - b'0' + 52) as u32,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        })
    };
    if run.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(run.len() * 3 / 4);
    for chunk in run.chunks(4) {
        let mut n = 0u32;
        for (k, &b) in chunk.iter().enumerate() {
            n |= value(b)? << (18 - 6 * k);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len() - 1]);
    }
    Some(out)
}
