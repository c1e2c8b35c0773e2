//! Signed reviews: the bytes a reviewer signs, SSH signatures over them (the `ssh-keygen -Y sign`
//! format, namespace `mcpguard-review`), the allowed-signers file (git's
//! `gpg.ssh.allowedSignersFile` format) and the verdict on one review.
//!
//! The signed bytes (profile `mcpguard.review-signature.2`) are the RFC 8785 canonical form of
//! one object holding the snapshot's protocol version, the server entry with every member except
//! `toolPages` and `reviews` (the pinned identity, the package record that decides what runs, the
//! instructions, the capabilities, the 2026-07-28 discover record, and any member an entry gains
//! later), the reviewed Tool object and the review with every member except `signature` itself.
//! Signing the entry and the review generically, rather than a list of known fields, means a
//! member added later is covered without a change here; leaving out the other tools and their
//! reviews keeps one tool's signature independent of the others. The armored signature is stored
//! as the review's `signature` member, so the snapshot's digest covers it too.
//!
//! Profile 1 covered only the identity (`serverInfo`), the Tool and the review, so a committer
//! could swap the package for one presenting identical tools. A signature over profile-1 bytes
//! is refused with a message that says so and how to sign again, never accepted.
//!
//! Only Ed25519 keys sign and verify (the crate is built with that one algorithm to keep the
//! build small); a listed key of another type is reported as unsupported, never accepted.
//!
//! Pure: text and values in, verdicts out. Reading the key and the allowed-signers file is the
//! caller's job.

use jiff::Timestamp;
use serde_json::{json, Value};
use ssh_key::{HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};

use crate::snapshot::canonical;

/// The SSH signature namespace of reviews: a signature made for git commits or another purpose
/// never verifies as a review.
pub const NAMESPACE: &str = "mcpguard-review";

/// Names the layout of the signed object, so that a future layout cannot be confused with it.
pub const SIGNED_PROFILE: &str = "mcpguard.review-signature.2";

/// The earlier layout (identity, Tool and review only), recognised to refuse it clearly.
pub const OLD_PROFILE: &str = "mcpguard.review-signature.1";

/// The server entry's members a signature does not cover through the entry: the tools (each
/// signature covers its own Tool object) and the reviews (each covers its own review).
const UNSIGNED_ENTRY_MEMBERS: [&str; 2] = ["toolPages", "reviews"];

/// The review member that holds the armored signature.
pub const MEMBER: &str = "signature";

/// The part of a server entry a signature covers: every member but `toolPages` and `reviews`
/// (copied without them, so the catalogue is not copied).
pub fn signed_entry(entry: &Value) -> Value {
    match entry.as_object() {
        Some(o) => Value::Object(
            o.iter()
                .filter(|(k, _)| !UNSIGNED_ENTRY_MEMBERS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        None => Value::Null,
    }
}

/// The bytes a review's signature covers, and the bytes a profile-1 signature covered (kept only
/// to tell an old signature from a wrong one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedBytes {
    pub data: Vec<u8>,
    pub old: Vec<u8>,
}

/// The bytes a review's signature covers: the canonical form of the protocol version, the
/// server entry as [`signed_entry`] keeps it, the reviewed Tool and the review without its
/// `signature` member. `entry` may be the whole entry or already [`signed_entry`]'s part.
pub fn signed_data(
    protocol_version: &str,
    entry: &Value,
    tool: &Value,
    review: &Value,
) -> SignedBytes {
    let mut review = review.clone();
    if let Some(o) = review.as_object_mut() {
        o.remove(MEMBER);
    }
    let entry = signed_entry(entry);
    let old = canonical::canonical_bytes(&json!({
        "profile": OLD_PROFILE,
        "protocolVersion": protocol_version,
        "serverInfo": entry.get("serverInfo").unwrap_or(&Value::Null),
        "tool": tool,
        "review": review,
    }));
    let data = canonical::canonical_bytes(&json!({
        "profile": SIGNED_PROFILE,
        "protocolVersion": protocol_version,
        "entry": entry,
        "tool": tool,
        "review": review,
    }));
    SignedBytes { data, old }
}

/// Reads an OpenSSH private key for signing. A passphrase-protected key is refused with the way
/// to sign it with `ssh-keygen` instead (which also covers keys held by an agent or a token).
pub fn read_private_key(text: &str, origin: &str) -> Result<PrivateKey, String> {
    let key = PrivateKey::from_openssh(text).map_err(|e| {
        format!("{origin}: not an OpenSSH private key mcpguard can read ({e}); mcpguard signs with Ed25519 keys only (make one with `ssh-keygen -t ed25519`)")
    })?;
    if key.is_encrypted() {
        return Err(format!(
            "{origin}: the key is protected by a passphrase, which --sign does not read; sign with ssh-keygen instead: \
             `mcpguard review FILE --server KEY --tool NAME --signed-data > data`, \
             `ssh-keygen -Y sign -n {NAMESPACE} -f {origin} data`, then \
             `mcpguard review FILE --server KEY --tool NAME --signature data.sig`"
        ));
    }
    if key.algorithm() != ssh_key::Algorithm::Ed25519 {
        return Err(format!(
            "{origin}: a {} key; mcpguard signs and verifies reviews with Ed25519 keys only (make one with `ssh-keygen -t ed25519`)",
            key.algorithm()
        ));
    }
    Ok(key)
}

/// Signs `data` and returns the armored signature (`-----BEGIN SSH SIGNATURE-----` …).
pub fn sign(key: &PrivateKey, data: &[u8]) -> Result<String, String> {
    key.sign(NAMESPACE, HashAlg::Sha512, data)
        .and_then(|s| s.to_pem(LineEnding::LF))
        .map_err(|e| format!("signing failed: {e}"))
}

/// Parses an armored signature and checks that it is a review signature.
pub fn parse_signature(armored: &str) -> Result<SshSig, String> {
    let sig = SshSig::from_pem(armored.trim())
        .map_err(|e| format!("the signature is not an SSH signature ({e})"))?;
    if sig.namespace() != NAMESPACE {
        return Err(format!(
            "the signature is for namespace {:?}, not {NAMESPACE:?}",
            sig.namespace()
        ));
    }
    Ok(sig)
}

/// `SHA256:…` of a signature's key, as `ssh-keygen -l` prints it.
pub fn fingerprint(sig: &SshSig) -> String {
    PublicKey::from(sig.public_key().clone())
        .fingerprint(HashAlg::Sha256)
        .to_string()
}

/// One line of an allowed-signers file.
#[derive(Debug, Clone)]
pub struct Signer {
    /// The line's principal patterns (`*` and `?` wildcards, `!` negates).
    pub principals: Vec<String>,
    pub key: PublicKey,
    /// `namespaces="…"` patterns; empty means every namespace.
    pub namespaces: Vec<String>,
    pub valid_after: Option<Timestamp>,
    pub valid_before: Option<Timestamp>,
    /// 1-based line number in the file.
    pub line: usize,
}

/// A parsed allowed-signers file (`ssh-keygen(1)`, ALLOWED SIGNERS).
#[derive(Debug, Clone)]
pub struct AllowedSigners {
    pub origin: String,
    pub signers: Vec<Signer>,
    /// Lines whose key type mcpguard cannot verify (line number, key type): they admit nothing.
    pub unsupported: Vec<(usize, String)>,
}

impl AllowedSigners {
    /// Parses the file's text; `origin` names it in messages. An error names FILE:LINE. A line
    /// mcpguard cannot honour (a `cert-authority` line, an unknown option) is an error rather
    /// than skipped, so that the file never means less than its author wrote.
    pub fn parse(text: &str, origin: &str) -> Result<Self, String> {
        let mut signers = Vec::new();
        let mut unsupported = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |why: String| format!("{origin}:{}: {why}", i + 1);
            let (principals, rest) = split_field(line);
            let principals: Vec<String> = principals
                .split(',')
                .filter(|p| !p.is_empty())
                .map(|p| unquote(p).to_string())
                .collect();
            if principals.is_empty() {
                return Err(at("no principals before the key".into()));
            }
            let mut rest = rest.trim_start();
            let mut namespaces = Vec::new();
            let (mut valid_after, mut valid_before) = (None, None);
            // Options precede the key type; a key type never contains '=' and is one of the
            // known algorithm names, which is how ssh-keygen tells them apart too.
            if !looks_like_key_type(first_word(rest)) {
                let (options, after) = split_field(rest);
                for opt in split_options(options) {
                    let (name, value) = opt.split_once('=').unwrap_or((opt, ""));
                    let value = unquote(value);
                    match name.to_ascii_lowercase().as_str() {
                        "namespaces" => namespaces = value.split(',').map(str::to_string).collect(),
                        "valid-after" => valid_after = Some(ssh_time(value).map_err(at)?),
                        "valid-before" => valid_before = Some(ssh_time(value).map_err(at)?),
                        "cert-authority" => return Err(at("a cert-authority line: mcpguard verifies plain keys, not certificates; list each reviewer's key instead".into())),
                        other => return Err(at(format!("unknown option {other:?} (known: namespaces, valid-after, valid-before)"))),
                    }
                }
                rest = after.trim_start();
            }
            // A key of a type mcpguard cannot verify can never admit a review, so the line is
            // set aside (and reported) rather than making the whole file unusable.
            let key_type = first_word(rest);
            if key_type != "ssh-ed25519" {
                unsupported.push((i + 1, key_type.to_string()));
                continue;
            }
            let key =
                PublicKey::from_openssh(rest).map_err(|e| at(format!("not a public key ({e})")))?;
            signers.push(Signer {
                principals,
                key,
                namespaces,
                valid_after,
                valid_before,
                line: i + 1,
            });
        }
        Ok(AllowedSigners {
            origin: origin.to_string(),
            signers,
            unsupported,
        })
    }
}

fn first_word(s: &str) -> &str {
    s.split_whitespace().next().unwrap_or("")
}

fn looks_like_key_type(word: &str) -> bool {
    word.starts_with("ssh-")
        || word.starts_with("ecdsa-")
        || word.starts_with("sk-")
        || word.starts_with("rsa-")
}

/// Splits off the first whitespace-separated field, where double quotes protect whitespace.
fn split_field(s: &str) -> (&str, &str) {
    let mut quoted = false;
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => return (&s[..i], &s[i..]),
            _ => {}
        }
    }
    (s, "")
}

/// Splits `a,b="x,y",c` at the commas outside quotes.
fn split_options(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut quoted, mut start) = (false, 0);
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().filter(|o| !o.is_empty()).collect()
}

fn unquote(s: &str) -> &str {
    s.strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s)
}

/// `YYYYMMDD[HHMM[SS]]`, with an optional trailing `Z` for UTC. ssh-keygen reads a time without
/// `Z` as local time; mcpguard reads every time as UTC so that a review verifies the same on
/// every machine of a team, and says so in docs/policy.md.
fn ssh_time(text: &str) -> Result<Timestamp, String> {
    let digits = text.strip_suffix(['Z', 'z']).unwrap_or(text);
    let bad = || format!("{text:?} is not a time of the form YYYYMMDD[HHMM[SS]][Z]");
    if !digits.bytes().all(|b| b.is_ascii_digit()) || ![8, 12, 14].contains(&digits.len()) {
        return Err(bad());
    }
    let part = |r: std::ops::Range<usize>| digits.get(r).unwrap_or("00");
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        part(0..4),
        part(4..6),
        part(6..8),
        part(8..10),
        part(10..12),
        part(12..14)
    );
    iso.parse().map_err(|_| bad())
}

/// OpenSSH's pattern matching: `*` any run, `?` one character.
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// A comma list of patterns as OpenSSH reads it: a negated match anywhere refuses, otherwise one
/// positive match accepts.
fn matches_list(patterns: &[String], text: &str) -> bool {
    let mut positive = false;
    for p in patterns {
        match p.strip_prefix('!') {
            Some(neg) if glob(neg, text) => return false,
            Some(_) => {}
            None => positive |= glob(p, text),
        }
    }
    positive
}

/// What a review's signature says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No `signature` member.
    Unsigned,
    /// The member is not a review signature, or does not verify over these bytes.
    Invalid(String),
    /// The signature verifies over this tool, identity and review (its key is named); whether
    /// the key may sign for the reviewer is a separate question, answered by [`check_signer`].
    Valid { fingerprint: String },
}

/// Checks a review's signature against the bytes it must cover, without asking who may sign.
pub fn verify(review: &Value, bytes: &SignedBytes) -> Verdict {
    let Some(member) = review.get(MEMBER) else {
        return Verdict::Unsigned;
    };
    let Some(armored) = member.as_str() else {
        return Verdict::Invalid(format!("the review's {MEMBER:?} member is not a string"));
    };
    let sig = match parse_signature(armored) {
        Ok(s) => s,
        Err(e) => return Verdict::Invalid(e),
    };
    let fingerprint = fingerprint(&sig);
    let key = PublicKey::from(sig.public_key().clone());
    if key.algorithm() != ssh_key::Algorithm::Ed25519 {
        return Verdict::Invalid(format!(
            "signed with a {} key ({fingerprint}); mcpguard verifies Ed25519 signatures only",
            key.algorithm()
        ));
    }
    match key.verify(NAMESPACE, &bytes.data, &sig) {
        Ok(()) => Verdict::Valid { fingerprint },
        Err(_) if key.verify(NAMESPACE, &bytes.old, &sig).is_ok() => Verdict::Invalid(format!(
            "the signature by {fingerprint} was made in the old format {OLD_PROFILE}, which covers the tool, the identity and the review but not the server entry's package record, instructions or capabilities, so it is not accepted; check the entry (`mcpguard show`) and sign the review again (`mcpguard review … --sign KEY`, or `--signed-data` and `--signature`)"
        )),
        Err(_) => Verdict::Invalid(format!(
            "the signature by {fingerprint} does not verify over this tool, server entry and review: the Tool object, the server entry (identity, package record, instructions, capabilities, protocol version) or the review changed after it was signed; review the tool again (`mcpguard show`) and sign the new review"
        )),
    }
}

/// Whether the review is acceptable under an allowed-signers file at `now`: signed, verifying,
/// and by a key listed for the reviewer it names. `Ok` carries the file's line that admitted it;
/// `Err` is the reason, naming the reviewer, for the refusal.
pub fn check_signer(
    signers: &AllowedSigners,
    review: &Value,
    data: &SignedBytes,
    now: Timestamp,
) -> Result<usize, String> {
    let reviewer = review
        .get("reviewer")
        .and_then(Value::as_str)
        .unwrap_or("(no reviewer)");
    let origin = &signers.origin;
    let fingerprint = match verify(review, data) {
        Verdict::Unsigned => {
            return Err(format!(
                "the review by {reviewer:?} is not signed, and review.allowed_signers ({origin}) accepts signed reviews only; sign it with `mcpguard review … --sign KEY`"
            ))
        }
        Verdict::Invalid(why) => return Err(format!("the review by {reviewer:?}: {why}")),
        Verdict::Valid { fingerprint } => fingerprint,
    };
    let Some(sig) = review
        .get(MEMBER)
        .and_then(Value::as_str)
        .and_then(|a| parse_signature(a).ok())
    else {
        return Err(format!("the review by {reviewer:?}: unreadable signature"));
    };
    let lines: Vec<&Signer> = signers
        .signers
        .iter()
        .filter(|s| s.key.key_data() == sig.public_key())
        .collect();
    if lines.is_empty() {
        return Err(format!(
            "the review by {reviewer:?} is signed by {fingerprint}, a key that {origin} does not list; add it to the allowed signers if this reviewer is trusted"
        ));
    }
    let mut why = Vec::new();
    for s in &lines {
        if !matches_list(&s.principals, reviewer) {
            why.push(format!(
                "{origin}:{} lists this key for {}, not for the reviewer named, {reviewer:?}",
                s.line,
                s.principals.join(",")
            ));
        } else if !s.namespaces.is_empty() && !matches_list(&s.namespaces, NAMESPACE) {
            why.push(format!(
                "{origin}:{} does not allow this key the namespace {NAMESPACE:?}",
                s.line
            ));
        } else if s.valid_after.is_some_and(|t| now < t) {
            why.push(format!(
                "{origin}:{} makes this key valid only after {}",
                s.line,
                s.valid_after.unwrap_or_default()
            ));
        } else if s.valid_before.is_some_and(|t| now >= t) {
            why.push(format!(
                "{origin}:{} made this key valid only before {}",
                s.line,
                s.valid_before.unwrap_or_default()
            ));
        } else {
            return Ok(s.line);
        }
    }
    Err(format!(
        "the review by {reviewer:?} is signed by {fingerprint}, but {}",
        why.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_follow_openssh() {
        let list = |s: &str| s.split(',').map(str::to_string).collect::<Vec<_>>();
        assert!(matches_list(
            &list("alice@example.test"),
            "alice@example.test"
        ));
        assert!(matches_list(&list("*@example.test"), "bob@example.test"));
        assert!(!matches_list(
            &list("*@example.test"),
            "bob@example.test.evil"
        ));
        assert!(!matches_list(
            &list("*@example.test,!bob@*"),
            "bob@example.test"
        ));
        assert!(matches_list(&list("a?c"), "abc"));
        assert!(!matches_list(&list("a?c"), "ac"));
        assert!(
            !matches_list(&list("!x"), "y"),
            "a negation alone admits nobody"
        );
    }

    #[test]
    fn times_are_utc_and_strict() {
        assert_eq!(
            ssh_time("20261201").unwrap().to_string(),
            "2026-12-01T00:00:00Z"
        );
        assert_eq!(
            ssh_time("202612011530Z").unwrap().to_string(),
            "2026-12-01T15:30:00Z"
        );
        assert!(ssh_time("2026-12-01").is_err());
        assert!(ssh_time("20261301").is_err());
    }

    #[test]
    fn the_signed_bytes_leave_out_only_the_signature() {
        let tool = json!({"name": "t", "inputSchema": {"type": "object"}});
        let info = json!({"serverInfo": {"name": "s", "version": "1"}});
        let r = json!({"reviewer": "a", "operation": "read"});
        let mut signed = r.clone();
        signed[MEMBER] = json!("x");
        let a = signed_data("2025-11-25", &info, &tool, &r);
        assert_eq!(a, signed_data("2025-11-25", &info, &tool, &signed));
        let mut other = r.clone();
        other["operation"] = json!("write");
        assert_ne!(
            a,
            signed_data("2025-11-25", &info, &tool, &other),
            "a new review member is covered"
        );
        assert_ne!(a, signed_data("2025-06-18", &info, &tool, &r));
        // The entry is covered, but for the catalogue and the reviews.
        let mut entry = info.clone();
        entry["package"] = json!({"runner": "npx", "name": "p", "version": "1.0.0"});
        let with_package = signed_data("2025-11-25", &entry, &tool, &r);
        assert_ne!(a.data, with_package.data, "the package record is covered");
        assert_eq!(a.old, with_package.old, "the old layout did not cover it");
        entry["package"]["version"] = json!("1.0.1");
        assert_ne!(with_package, signed_data("2025-11-25", &entry, &tool, &r));
        for member in ["instructions", "capabilities", "anything"] {
            let mut e = info.clone();
            e[member] = json!("x");
            assert_ne!(a, signed_data("2025-11-25", &e, &tool, &r), "{member}");
        }
        let mut e = info.clone();
        e["toolPages"] = json!([{"tools": [tool.clone()]}]);
        e["reviews"] = json!({"t": r.clone()});
        assert_eq!(a, signed_data("2025-11-25", &e, &tool, &r));
    }

    #[test]
    fn a_signature_over_the_old_layout_is_refused_with_what_to_do() {
        let k = key(1);
        let tool = json!({"name": "t", "inputSchema": {"type": "object"}});
        let entry = json!({"serverInfo": {"name": "s", "version": "1"}, "package": {"name": "p"}});
        let mut r = json!({"reviewer": "a"});
        let bytes = signed_data("2025-11-25", &entry, &tool, &r);
        r[MEMBER] = json!(sign(&k, &bytes.old).unwrap());
        let Verdict::Invalid(why) = verify(&r, &bytes) else {
            panic!("an old signature must not verify")
        };
        assert!(
            why.contains(OLD_PROFILE) && why.contains("sign the review again"),
            "{why}"
        );
        r[MEMBER] = json!(sign(&k, &bytes.data).unwrap());
        assert!(matches!(verify(&r, &bytes), Verdict::Valid { .. }));
    }

    #[test]
    fn allowed_signers_lines() {
        let key =
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGj9U8qW2cPgTVvDhGOw9Ddid4ceL9a7aZnhnwQAcIxs";
        let text = format!(
            "# team\nalice@example.test {key} alice\n\n\"*@ops.test\",bob@example.test namespaces=\"mcpguard-review,git\",valid-after=\"20260101\" {key}\n"
        );
        let s = AllowedSigners::parse(&text, "signers").unwrap();
        assert_eq!(s.signers.len(), 2);
        assert_eq!(s.signers[1].principals, ["*@ops.test", "bob@example.test"]);
        assert_eq!(s.signers[1].namespaces, ["mcpguard-review", "git"]);
        assert_eq!(s.signers[1].line, 4);
        let e = AllowedSigners::parse(&format!("a cert-authority {key}\n"), "f").unwrap_err();
        assert!(e.starts_with("f:1: a cert-authority line"), "{e}");
        let e = AllowedSigners::parse(&format!("a no-touch-required {key}\n"), "f").unwrap_err();
        assert!(
            e.contains("f:1: unknown option \"no-touch-required\""),
            "{e}"
        );
        let e = AllowedSigners::parse("a ssh-ed25519 AAAA\n", "f").unwrap_err();
        assert!(e.starts_with("f:1: not a public key"), "{e}");
        let s = AllowedSigners::parse("a ssh-rsa AAAA\n", "f").unwrap();
        assert!(s.signers.is_empty());
        assert_eq!(s.unsupported, [(1, "ssh-rsa".to_string())]);
    }

    fn key(seed: u8) -> PrivateKey {
        let pair = ssh_key::private::Ed25519Keypair::from_seed(&[seed; 32]);
        PrivateKey::from(pair)
    }

    fn line(principals: &str, k: &PrivateKey) -> String {
        format!("{principals} {}\n", k.public_key().to_openssh().unwrap())
    }

    #[test]
    fn verdicts_of_check_signer() {
        let now: Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        let (alice, mallory) = (key(1), key(2));
        let signers =
            AllowedSigners::parse(&line("alice@example.test", &alice), "signers").unwrap();
        let tool = json!({"name": "t", "inputSchema": {"type": "object"}});
        let info = json!({"serverInfo": {"name": "s", "version": "1"}});
        let signed = |k: &PrivateKey, reviewer: &str| {
            let mut r = json!({"reviewer": reviewer, "reviewedAt": "2026-11-30T00:00:00Z"});
            let data = signed_data("2025-11-25", &info, &tool, &r);
            r[MEMBER] = json!(sign(k, &data.data).unwrap());
            r
        };
        let check = |r: &Value, tool: &Value| {
            check_signer(&signers, r, &signed_data("2025-11-25", &info, tool, r), now)
        };
        assert_eq!(check(&signed(&alice, "alice@example.test"), &tool), Ok(1));
        let unsigned = json!({"reviewer": "alice@example.test"});
        let e = check(&unsigned, &tool).unwrap_err();
        assert!(e.contains("\"alice@example.test\" is not signed"), "{e}");
        let e = check(&signed(&mallory, "alice@example.test"), &tool).unwrap_err();
        assert!(e.contains("a key that signers does not list"), "{e}");
        let e = check(&signed(&alice, "bob@example.test"), &tool).unwrap_err();
        assert!(
            e.contains("signers:1 lists this key for alice@example.test, not for the reviewer named, \"bob@example.test\""),
            "{e}"
        );
        let changed = json!({"name": "t", "inputSchema": {"type": "object"}, "description": "new"});
        let e = check(&signed(&alice, "alice@example.test"), &changed).unwrap_err();
        assert!(e.contains("does not verify over this tool"), "{e}");
        let mut edited = signed(&alice, "alice@example.test");
        edited["reviewedAt"] = json!("2026-11-29T00:00:00Z");
        assert!(check(&edited, &tool)
            .unwrap_err()
            .contains("does not verify"));
        let expired = AllowedSigners::parse(
            &line("alice@example.test valid-before=\"20261101\"", &alice),
            "signers",
        )
        .unwrap();
        let r = signed(&alice, "alice@example.test");
        let e = check_signer(
            &expired,
            &r,
            &signed_data("2025-11-25", &info, &tool, &r),
            now,
        )
        .unwrap_err();
        assert!(e.contains("valid only before 2026-11-01T00:00:00Z"), "{e}");
    }
}
