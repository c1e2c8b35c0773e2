//! What crosses the boundary inside the values: secret-shaped values in results, error text and
//! arguments (`[secrets]`), local rules for argument values (`[arguments]` rules, see
//! `gate::rules`), and instruction-like text in results (`[results]`, labelled by
//! `wire::injection`).
//!
//! [`Content`] is compiled once from the policy (patterns, resolved folders, the values of the
//! environment variables the policy names, read by the driver) and consulted by the session on
//! the parsed call or result. Pure: it finds, redacts and labels values in JSON; the session
//! decides what reaches whom, and every record it writes names pointers, kinds and digests,
//! never a value.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::gate::rules::{self, escape, Broken, PointerPattern, Rule};
use crate::policy::{Injection, PathContext, Policy, SecretInArguments, SecretInResults};
use crate::snapshot::canonical::sha256_hex;
use crate::wire::injection::{self, Label};
use crate::wire::secrets::{self, Detector};

/// One secret-shaped value found: where, what kind, and a short digest (never the value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detection {
    /// RFC 6901 pointer into the message part that was scanned (the arguments, or the result).
    pub pointer: String,
    pub kind: String,
    /// The first 16 hex digits of the SHA-256 of the value: the same value gives the same
    /// digest, so an auditor can tell one leak from several, without the value.
    pub digest: String,
}

impl Detection {
    /// `kind at pointer (sha256 digest…)`, for refusals and audit records.
    pub fn describe(&self) -> String {
        format!(
            "{} at {} (sha256 {}…)",
            self.kind,
            if self.pointer.is_empty() {
                "the top level"
            } else {
                &self.pointer
            },
            self.digest
        )
    }
}

/// Instruction-like text found in a result: where and which labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Labelled {
    pub pointer: String,
    pub labels: Vec<Label>,
}

/// The value checks one policy asks for, compiled.
#[derive(Debug)]
pub struct Content {
    pub secrets: Detector,
    pub secret_results: SecretInResults,
    pub secret_arguments: SecretInArguments,
    /// Per tool: pointers whose values may be secret-shaped.
    allow: BTreeMap<String, Vec<PointerPattern>>,
    /// Per tool: the argument rules.
    rules: BTreeMap<String, Vec<Rule>>,
    pub refuse_metadata_urls: bool,
    pub injection: Injection,
    /// The labels `[results]` acts on.
    labels: Vec<Label>,
}

impl Default for Content {
    /// What `Policy::default()` asks for, without environment literals and without rules.
    fn default() -> Self {
        Content::new(&Policy::default(), &PathContext::default(), |_| None)
            .map(|(c, _)| c)
            .unwrap_or_else(|_| Content {
                secrets: Detector::none(),
                secret_results: SecretInResults::Off,
                secret_arguments: SecretInArguments::Off,
                allow: BTreeMap::new(),
                rules: BTreeMap::new(),
                refuse_metadata_urls: true,
                injection: Injection::Off,
                labels: Vec::new(),
            })
    }
}

/// Why a call's arguments are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentProblem {
    /// Secret-shaped values (`secrets.arguments`).
    Secrets(Vec<Detection>),
    /// A value breaks a rule of `[arguments.tools.<tool>.rules."<rule>"]`.
    Rule {
        pointer: String,
        rule: String,
        broken: Broken,
    },
    /// A string names a URL to a cloud metadata address (`arguments.refuse_metadata_urls`).
    MetadataUrl { pointer: String, kind: &'static str },
}

impl Content {
    /// Compiles the policy's checks. `env` reads one environment variable (the driver passes
    /// the process environment; tests pass what they need); `ctx` resolves the rules' folders.
    /// Returns the checks and warnings for things the policy names that are not there.
    pub fn new(
        policy: &Policy,
        ctx: &PathContext,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<(Content, Vec<String>), String> {
        let s = &policy.secrets;
        let mut warnings = Vec::new();
        let mut literals = Vec::new();
        for name in &s.env {
            match env(name) {
                None => warnings.push(format!(
                    "secrets.env names {name}, which is not set in mcpguard's environment: its value is not looked for"
                )),
                Some(v) if v.chars().count() < secrets::MIN_LITERAL_LEN => warnings.push(format!(
                    "secrets.env names {name}, whose value is shorter than {} characters: it is not looked for, because so short a value occurs in ordinary text",
                    secrets::MIN_LITERAL_LEN
                )),
                Some(v) => literals.push((name.clone(), v)),
            }
        }
        let patterns: Vec<(String, String)> = s
            .patterns
            .iter()
            .map(|(n, p)| (n.clone(), p.clone()))
            .collect();
        let detector = Detector::new(s.builtin, &patterns, &literals)?;
        let mut allow = BTreeMap::new();
        for (tool, t) in &s.tools {
            let pointers = t
                .allow_arguments
                .iter()
                .map(|p| PointerPattern::parse(p))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("secrets.tools.{tool}.allow_arguments: {e}"))?;
            allow.insert(tool.clone(), pointers);
        }
        let mut compiled = BTreeMap::new();
        for (tool, t) in &policy.arguments.tools {
            let mut list = Vec::new();
            for (pointer, rule) in &t.rules {
                let folders = match &rule.paths {
                    Some(paths) => Some(
                        paths
                            .iter()
                            .map(|p| p.expand(ctx))
                            .collect::<Result<Vec<PathBuf>, String>>()
                            .map_err(|e| {
                                format!("arguments.tools.{tool}.rules.{pointer:?}.paths: {e}")
                            })?,
                    ),
                    None => None,
                };
                list.push(
                    Rule::new(pointer, rule, folders, ctx.cwd.clone())
                        .map_err(|e| format!("arguments.tools.{tool}.rules: {e}"))?,
                );
            }
            if !list.is_empty() {
                compiled.insert(tool.clone(), list);
            }
        }
        let labels = policy
            .results
            .labels
            .iter()
            .filter_map(|n| Label::from_name(n))
            .collect();
        Ok((
            Content {
                secrets: detector,
                secret_results: s.results,
                secret_arguments: s.arguments,
                allow,
                rules: compiled,
                refuse_metadata_urls: policy.arguments.refuse_metadata_urls,
                injection: policy.results.injection,
                labels,
            },
            warnings,
        ))
    }

    /// The first reason to refuse a call of `tool` with `arguments`: a rule, a metadata URL, a
    /// secret-shaped value. `None` when the call may go on.
    pub fn check_arguments(&self, tool: &str, arguments: &Value) -> Option<ArgumentProblem> {
        if let Some(list) = self.rules.get(tool) {
            for rule in list {
                for (pointer, value) in rule.pointer.select(arguments) {
                    if let Err(broken) = rule.check(value) {
                        return Some(ArgumentProblem::Rule {
                            pointer,
                            rule: rule.pointer.text.clone(),
                            broken,
                        });
                    }
                }
            }
        }
        let scan_secrets =
            self.secret_arguments == SecretInArguments::Refuse && !self.secrets.is_empty();
        if !self.refuse_metadata_urls && !scan_secrets {
            return None;
        }
        let allowed = self.allow.get(tool).map_or(&[][..], Vec::as_slice);
        let mut found = Vec::new();
        let mut metadata = None;
        walk_strings(arguments, &mut Vec::new(), &mut |segments, s| {
            if metadata.is_none() && self.refuse_metadata_urls {
                if let Some(kind) = rules::metadata_url_in(s) {
                    metadata = Some((pointer_of(segments), kind));
                }
            }
            if scan_secrets && !allowed.iter().any(|p| p.covers(segments)) {
                for hit in self.secrets.find(s) {
                    found.push(detection(segments, &hit.kind, &s[hit.range]));
                }
            }
        });
        if let Some((pointer, kind)) = metadata {
            return Some(ArgumentProblem::MetadataUrl { pointer, kind });
        }
        (!found.is_empty()).then_some(ArgumentProblem::Secrets(found))
    }

    /// Whether results need the secret scan at all, judged on the raw JSON text of the result.
    pub fn result_may_hold_secrets(&self, raw: &str) -> bool {
        self.secret_results != SecretInResults::Off && self.secrets.may_contain(raw)
    }

    /// Redacts every secret-shaped value in the text of a result (content blocks' `text`
    /// members, every string of `structuredContent`) in place; the detections, with pointers
    /// into the result.
    pub fn redact_result(&self, result: &mut Value) -> Vec<Detection> {
        let mut found = Vec::new();
        for_result_text(result, &mut |segments, s| {
            let (clean, hits) = self.secrets.redact(s)?;
            for hit in hits {
                found.push(detection(segments, &hit.kind, &s[hit.range]));
            }
            Some(clean)
        });
        found
    }

    /// Redacts `text` (error text, at `pointer`); `None` when it holds nothing.
    pub fn redact_text(&self, pointer: &str, text: &str) -> Option<(String, Vec<Detection>)> {
        if self.secret_results == SecretInResults::Off {
            return None;
        }
        let (clean, hits) = self.secrets.redact(text)?;
        let found = hits
            .iter()
            .map(|h| Detection {
                pointer: pointer.to_string(),
                kind: h.kind.clone(),
                digest: short_digest(&text[h.range.clone()]),
            })
            .collect();
        Some((clean, found))
    }

    /// Whether results are labelled or refused for instruction-like text.
    pub fn scans_injection(&self) -> bool {
        self.injection != Injection::Off && !self.labels.is_empty()
    }

    /// The labels the policy acts on in the text of a result, by pointer.
    pub fn label_result(&self, result: &mut Value) -> Vec<Labelled> {
        let mut found = Vec::new();
        for_result_text(result, &mut |segments, s| {
            self.label_into(&pointer_of(segments), s, &mut found);
            None
        });
        found
    }

    /// The labels the policy acts on in one text (error text at `pointer`).
    pub fn label_text(&self, pointer: &str, text: &str) -> Vec<Labelled> {
        let mut found = Vec::new();
        self.label_into(pointer, text, &mut found);
        found
    }

    fn label_into(&self, pointer: &str, text: &str, found: &mut Vec<Labelled>) {
        if !injection::may_have_findings_among(text, &self.labels) {
            return;
        }
        let labels: Vec<Label> = injection::labels(text)
            .into_iter()
            .filter(|l| self.labels.contains(l))
            .collect();
        if !labels.is_empty() {
            found.push(Labelled {
                pointer: pointer.to_string(),
                labels,
            });
        }
    }
}

impl Content {
    /// Redacts every secret-shaped string anywhere in `v` (a log notification's `data` may be
    /// any JSON), pointers starting at `base`; member names are not text. Nothing when
    /// `secrets.results = "off"`.
    pub fn redact_value(&self, base: &str, v: &mut Value) -> Vec<Detection> {
        let mut found = Vec::new();
        if self.secret_results == SecretInResults::Off {
            return found;
        }
        let mut at: Vec<String> = base.split('/').skip(1).map(str::to_string).collect();
        every_string(v, &mut at, &mut |segments, s| {
            let (clean, hits) = self.secrets.redact(s)?;
            for hit in hits {
                found.push(detection(segments, &hit.kind, &s[hit.range]));
            }
            Some(clean)
        });
        found
    }

    /// The labels the policy acts on in every string of `v`, pointers starting at `base`.
    pub fn label_value(&self, base: &str, v: &Value) -> Vec<Labelled> {
        let mut found = Vec::new();
        let mut at: Vec<String> = base.split('/').skip(1).map(str::to_string).collect();
        walk_strings(v, &mut at, &mut |segments, s| {
            self.label_into(&pointer_of(segments), s, &mut found);
        });
        found
    }
}

/// The labels of `found`, each once, in `Label` order.
pub fn label_names(found: &[Labelled]) -> Vec<&'static str> {
    let mut all: Vec<Label> = found.iter().flat_map(|f| f.labels.clone()).collect();
    all.sort();
    all.dedup();
    all.into_iter().map(Label::name).collect()
}

fn detection(segments: &[String], kind: &str, value: &str) -> Detection {
    Detection {
        pointer: pointer_of(segments),
        kind: kind.to_string(),
        digest: short_digest(value),
    }
}

fn short_digest(value: &str) -> String {
    sha256_hex(value.as_bytes())[..16].to_string()
}

fn pointer_of(segments: &[String]) -> String {
    segments.iter().map(|s| format!("/{}", escape(s))).collect()
}

/// Calls `f` with every string in `v` (member names excluded) and its pointer segments.
fn walk_strings(v: &Value, at: &mut Vec<String>, f: &mut impl FnMut(&[String], &str)) {
    match v {
        Value::String(s) => f(at, s),
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                at.push(i.to_string());
                walk_strings(child, at, f);
                at.pop();
            }
        }
        Value::Object(o) => {
            for (k, child) in o {
                at.push(k.clone());
                walk_strings(child, at, f);
                at.pop();
            }
        }
        _ => {}
    }
}

/// Calls `f` with every text of a result that reaches the model: the `text` members of content
/// blocks (and of embedded resources), and every string of `structuredContent`. Where `f`
/// returns a string, it replaces the text. Binary data (`data`, `blob`) and names are not text.
fn for_result_text(result: &mut Value, f: &mut impl FnMut(&[String], &str) -> Option<String>) {
    let mut at = Vec::new();
    if let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) {
        at.push("content".to_string());
        for (i, block) in content.iter_mut().enumerate() {
            at.push(i.to_string());
            text_members(block, &mut at, f);
            at.pop();
        }
        at.pop();
    }
    if let Some(sc) = result.get_mut("structuredContent") {
        at.push("structuredContent".to_string());
        every_string(sc, &mut at, f);
    }
}

fn text_members(
    v: &mut Value,
    at: &mut Vec<String>,
    f: &mut impl FnMut(&[String], &str) -> Option<String>,
) {
    let Some(o) = v.as_object_mut() else {
        return;
    };
    for (k, child) in o.iter_mut() {
        at.push(k.clone());
        match child {
            Value::String(s) if k == "text" => {
                if let Some(new) = f(at, s) {
                    *s = new;
                }
            }
            Value::Object(_) if k == "resource" => text_members(child, at, f),
            _ => {}
        }
        at.pop();
    }
}

fn every_string(
    v: &mut Value,
    at: &mut Vec<String>,
    f: &mut impl FnMut(&[String], &str) -> Option<String>,
) {
    match v {
        Value::String(s) => {
            if let Some(new) = f(at, s) {
                *s = new;
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter_mut().enumerate() {
                at.push(i.to_string());
                every_string(child, at, f);
                at.pop();
            }
        }
        Value::Object(o) => {
            for (k, child) in o.iter_mut() {
                at.push(k.clone());
                every_string(child, at, f);
                at.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
