//! Reading a policy file: TOML to the typed document, with every error located as
//! FILE:LINE:COLUMN, and the shipped default policy compiled into the binary.
//!
//! The only part of `policy` that reads a file (`load`).

use std::ops::Range;
use std::path::Path;

use super::*;

/// The shipped default policy, compiled into the binary so that running without `--policy`
/// behaves exactly like `--policy policies/default.toml`.
const BUILTIN_DEFAULT: &str = include_str!("../../../../policies/default.toml");

/// Why a policy could not be used. The `Display` form is what the user sees.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("{origin}: cannot read the policy: {source}")]
    Read {
        origin: String,
        #[source]
        source: std::io::Error,
    },
    /// The text is not valid TOML, or a key or value is not acceptable. Line and column are
    /// 1-based; the column counts characters, not bytes.
    #[error("{origin}:{line}:{column}: {message}")]
    Invalid {
        origin: String,
        line: usize,
        column: usize,
        message: String,
    },
    /// `MCPGUARD_SYSTEM_POLICY` names another floor while the managed one exists.
    #[error("refused MCPGUARD_SYSTEM_POLICY={named}: the managed policy floor {floor} exists, and no environment variable may replace it (a host configuration's `env` could set one to loosen the floor). Unset MCPGUARD_SYSTEM_POLICY; the administrator changes {floor}")]
    FloorReplaced { named: String, floor: String },
}

/// Reads and parses a policy file. Errors name the file as given.
pub fn load(path: &Path) -> Result<Policy, PolicyError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
        origin: origin.clone(),
        source,
    })?;
    parse(&text, &origin)
}

/// Parses a policy from text; `origin` names it in error messages (usually the file path).
pub fn parse(text: &str, origin: &str) -> Result<Policy, PolicyError> {
    let invalid = |span: Option<Range<usize>>, message: String| {
        let (line, column) = span.map_or((1, 1), |s| line_column(text, s.start));
        PolicyError::Invalid {
            origin: origin.to_string(),
            line,
            column,
            message,
        }
    };
    let policy: Policy =
        toml::from_str(text).map_err(|e| invalid(e.span(), reword(e.message())))?;
    if let Err(problem) = policy.validate() {
        // The document parsed above, so it parses again; the spanned tree only serves to point
        // at the offending key. Should it fail anyway, the message still goes out, at 1:1.
        let span = toml::de::DeTable::parse(text).ok().and_then(|doc| {
            problem
                .paths
                .iter()
                .find_map(|p| locate(doc.get_ref(), p, problem.item))
        });
        return Err(invalid(span, problem.message));
    }
    Ok(policy)
}

/// The shipped `policies/default.toml`, as used when no `--policy` is given.
pub fn builtin() -> Result<Policy, PolicyError> {
    parse(BUILTIN_DEFAULT, "builtin:policies/default.toml")
}

/// Turns a byte offset into a 1-based line and character column. Offsets past the end or inside
/// a character are clamped rather than trusted, because they come from another crate.
pub(super) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut line = 1;
    let mut column = 1;
    for (i, c) in text.char_indices() {
        if i >= offset {
            break;
        }
        if c == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    (line, column)
}

/// Rewrites serde's generic wording into the policy's: TOML has keys, not fields, and the list of
/// valid keys is the useful part of the message. Messages of any other shape pass unchanged.
fn reword(message: &str) -> String {
    let message = message.trim_end();
    if let Some(rest) = message.strip_prefix("unknown field ") {
        if let Some((key, expected)) = rest.split_once(", expected one of ") {
            return format!("unknown key {key}; the valid keys here are {expected}");
        }
        if let Some((key, expected)) = rest.split_once(", expected ") {
            // serde writes two candidates as "`a` or `b`" and one as "`a`".
            return match expected.split_once(" or ") {
                Some((a, b)) => format!("unknown key {key}; the valid keys here are {a}, {b}"),
                None => format!("unknown key {key}; the only valid key here is {expected}"),
            };
        }
        if let Some((key, _)) = rest.split_once(", there are no fields") {
            return format!("unknown key {key}; this table takes no keys");
        }
    }
    if let Some(rest) = message.strip_prefix("missing field ") {
        return format!("missing key {rest}");
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        return format!("unknown value {rest}");
    }
    // serde names Rust types where a policy author thinks in TOML types.
    if let Some((head, expected)) = message.rsplit_once(", expected ") {
        let plain = match expected {
            "u16" => Some("a port number from 0 to 65535"),
            "usize" | "u64" | "u32" => Some("a non-negative integer"),
            "a sequence" => Some("an array"),
            e if e.starts_with("struct ") => Some("a table"),
            e if e.starts_with("a map") => Some("a table"),
            _ => None,
        };
        if let Some(plain) = plain {
            return format!("{head}, expected {plain}");
        }
    }
    message.to_string()
}

/// Finds the span of the value at `path` (keys from the root), or of its element `item` when the
/// value is an array, for errors found after parsing.
fn locate(
    root: &toml::de::DeTable<'_>,
    path: &[&str],
    item: Option<usize>,
) -> Option<Range<usize>> {
    let (last, parents) = path.split_last()?;
    let mut table = root;
    for key in parents {
        table = table.get(*key)?.get_ref().as_table()?;
    }
    let value = table.get(*last)?;
    let element = item.and_then(|i| value.get_ref().as_array()?.get(i));
    Some(element.unwrap_or(value).span())
}

/// A validation failure: the message, and the keys it concerns in order of preference (the
/// first one present in the document is where the error points).
pub(super) struct Problem {
    paths: Vec<Vec<&'static str>>,
    /// The offending element when the value is an array.
    item: Option<usize>,
    message: String,
}

impl Problem {
    pub(super) fn at(path: &[&'static str], message: impl Into<String>) -> Self {
        Problem {
            paths: vec![path.to_vec()],
            item: None,
            message: message.into(),
        }
    }
    pub(super) fn at_item(path: &[&'static str], item: usize, message: impl Into<String>) -> Self {
        Problem {
            paths: vec![path.to_vec()],
            item: Some(item),
            message: message.into(),
        }
    }
    pub(super) fn at_any(paths: &[&[&'static str]], message: impl Into<String>) -> Self {
        Problem {
            paths: paths.iter().map(|p| p.to_vec()).collect(),
            item: None,
            message: message.into(),
        }
    }
}
