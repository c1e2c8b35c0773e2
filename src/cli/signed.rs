//! Signed reviews on the command line: `review --sign KEY`, `review --signed-data` (the bytes to
//! sign with `ssh-keygen -Y sign` instead), `review --signature FILE` (attach a signature made
//! elsewhere), the allowed-signers file of the policy, the check that takes tools with an
//! unacceptable review out of a pin, and the signature lines of `show` and `check`.
//!
//! The format and the verdicts are `snapshot::signature`; this file only reads files and words
//! the outcome.

use std::path::Path;

use jiff::Timestamp;
use serde_json::{json, Value};

use crate::gate::pin::Pin;
use crate::policy::{PathContext, Policy};
use crate::snapshot::manifest::{self, Manifest};
use crate::snapshot::signature::{self, AllowedSigners, Verdict};

/// The subcommands' result, as `commands::CmdResult` (not imported: `commands` uses this file).
type CmdResult = Result<u8, String>;

/// Reads the policy's `review.allowed_signers`, if it names one. A file that cannot be read or
/// parsed is an error: a policy that asks for signed reviews never silently accepts unsigned ones.
pub fn allowed_signers(policy: &Policy) -> Result<Option<AllowedSigners>, String> {
    let Some(p) = &policy.review.allowed_signers else {
        return Ok(None);
    };
    let path = p
        .expand(&PathContext::from_process(None))
        .map_err(|e| format!("policy review.allowed_signers: {e}"))?;
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "policy review.allowed_signers: cannot read {}: {e}",
            path.display()
        )
    })?;
    let signers = AllowedSigners::parse(&text, &path.display().to_string())?;
    for (line, key_type) in &signers.unsupported {
        crate::process::diag::emit(
            crate::protocol::Level::Warn,
            &format!(
                "{}:{line}: a {key_type} key, which mcpguard cannot verify (Ed25519 only): reviews signed with it are not accepted",
                signers.origin
            ),
        );
    }
    Ok(Some(signers))
}

/// What a server entry's reviews are signed with besides the tool and the review: the
/// snapshot's protocol version and the entry itself (`signature::signed_data` keeps every member
/// but the catalogue and the reviews).
fn identity<'a>(m: &'a Manifest, entry: &'a Value) -> (&'a str, &'a Value) {
    (m.protocol_version().unwrap_or_default(), entry)
}

/// Takes every tool whose review `signers` does not accept out of the pin; returns why, per tool.
pub fn check_pin(pin: &mut Pin, signers: &AllowedSigners, now: Timestamp) -> Vec<String> {
    pin.refuse_reviews(|pin, t| {
        let data =
            signature::signed_data(&pin.protocol_version, &pin.signed_entry, &t.tool, &t.review);
        signature::check_signer(signers, &t.review, &data, now).map(|_| ())
    })
}

/// Signs each of `reviews` (tool name → review) in place with the key at `key_path`.
pub fn sign_reviews(
    m: &Manifest,
    server: &str,
    key_path: &Path,
    reviews: &mut [(String, Value)],
) -> Result<(), String> {
    let text = std::fs::read_to_string(key_path)
        .map_err(|e| format!("--sign: cannot read {}: {e}", key_path.display()))?;
    let key = signature::read_private_key(&text, &key_path.display().to_string())?;
    let entry = m.server(server).map_err(|p| p.to_string())?;
    let (version, info) = identity(m, entry);
    let tools = manifest::tools(server, entry).map_err(|ps| ps[0].to_string())?;
    for (name, review) in reviews.iter_mut() {
        let Some((_, _, tool)) = tools.iter().find(|(n, _, _)| n == name) else {
            return Err(format!(
                "tool {name:?} is not in the capture of server {server:?}"
            ));
        };
        let data = signature::signed_data(version, info, tool, review);
        let armored = signature::sign(&key, &data.data)?;
        if let Some(o) = review.as_object_mut() {
            o.insert(signature::MEMBER.into(), json!(armored));
        }
    }
    Ok(())
}

/// The existing review of `tool` and its signed bytes.
fn review_and_data(
    m: &Manifest,
    server: &str,
    tool: &str,
) -> Result<(Value, signature::SignedBytes), String> {
    let entry = m.server(server).map_err(|p| p.to_string())?;
    let (version, info) = identity(m, entry);
    let tools = manifest::tools(server, entry).map_err(|ps| ps[0].to_string())?;
    let Some((_, _, t)) = tools.iter().find(|(n, _, _)| n == tool) else {
        return Err(format!(
            "tool {tool:?} is not in the capture of server {server:?}"
        ));
    };
    let review = manifest::review_of(entry, tool).cloned().ok_or_else(|| {
        format!("tool {tool:?} has no review yet; record one with `mcpguard review` first")
    })?;
    let data = signature::signed_data(version, info, t, &review);
    Ok((review, data))
}

/// `mcpguard review FILE --server KEY --tool NAME --signed-data`: writes the bytes a signature
/// of that review covers to stdout, for `ssh-keygen -Y sign -n mcpguard-review`.
pub fn print_signed_data(file: &Path, server: &str, tool: &str) -> CmdResult {
    use std::io::Write;
    let m = manifest::load(file)?;
    let (_, data) = review_and_data(&m, server, tool)?;
    let mut out = std::io::stdout().lock();
    out.write_all(&data.data)
        .and_then(|_| out.flush())
        .map_err(|e| format!("cannot write standard output: {e}"))?;
    Ok(0)
}

/// `mcpguard review FILE --server KEY --tool NAME --signature SIG`: records a signature made
/// elsewhere in the existing review, after checking that it verifies over that review.
pub fn attach_signature(file: &Path, server: &str, tool: &str, sig: &Path) -> CmdResult {
    let mut m = manifest::load(file)?;
    let (mut review, data) = review_and_data(&m, server, tool)?;
    let armored = std::fs::read_to_string(sig)
        .map_err(|e| format!("--signature: cannot read {}: {e}", sig.display()))?;
    review[signature::MEMBER] = json!(armored.trim_end().to_string() + "\n");
    let fingerprint = match signature::verify(&review, &data) {
        Verdict::Valid { fingerprint } => fingerprint,
        Verdict::Invalid(why) => {
            return Err(format!(
                "{}: the signature was not recorded: {why} (it must be made over the output of `--signed-data` with namespace {})",
                sig.display(),
                signature::NAMESPACE
            ))
        }
        Verdict::Unsigned => return Err("no signature".into()),
    };
    m.doc["servers"][server]["reviews"][tool] = review;
    let m = Manifest::new(m.doc);
    manifest::write_atomic(file, &manifest::to_pretty(&m.doc))
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    eprintln!(
        "recorded the signature by {fingerprint} of the review of {tool:?} in {}; the snapshot's digest changed, pin the new one:",
        file.display()
    );
    println!("{}", m.digest);
    Ok(0)
}

/// One line per review: who signed it and whether it verifies (and, with an allowed-signers
/// file, whether that key may sign for the reviewer). `Err` lines are the unacceptable ones.
pub fn review_lines(
    m: &Manifest,
    signers: Option<&AllowedSigners>,
    now: Timestamp,
) -> Vec<Result<String, String>> {
    let mut out = Vec::new();
    let Ok(servers) = m.servers() else {
        return out;
    };
    for (key, entry) in servers {
        let (version, info) = identity(m, entry);
        let Ok(tools) = manifest::tools(key, entry) else {
            continue;
        };
        for (name, _, tool) in &tools {
            let Some(review) = manifest::review_of(entry, name) else {
                continue;
            };
            let reviewer = review
                .get("reviewer")
                .and_then(Value::as_str)
                .unwrap_or("?");
            let data = signature::signed_data(version, info, tool, review);
            let what = format!("server {key:?} tool {name:?} reviewed by {reviewer:?}");
            let line = match (signature::verify(review, &data), signers) {
                (_, Some(s)) => match signature::check_signer(s, review, &data, now) {
                    Ok(line) => {
                        let fp = match signature::verify(review, &data) {
                            Verdict::Valid { fingerprint } => fingerprint,
                            _ => String::new(),
                        };
                        Ok(format!(
                            "{what}: signed by {fp}, verifies; allowed by {}:{line}",
                            s.origin
                        ))
                    }
                    Err(why) => Err(format!("{what}: NOT ACCEPTED: {why}")),
                },
                (Verdict::Unsigned, None) => Ok(format!("{what}: not signed")),
                (Verdict::Valid { fingerprint }, None) => Ok(format!(
                    "{what}: signed by {fingerprint}, verifies (no review.allowed_signers: who may sign is not checked)"
                )),
                (Verdict::Invalid(why), None) => Err(format!("{what}: signature INVALID: {why}")),
            };
            out.push(line);
        }
    }
    out
}
