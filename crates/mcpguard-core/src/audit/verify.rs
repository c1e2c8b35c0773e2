//! Reading a chain: one record checked on its own (strict JSON, members, hash), the head of a
//! file, and [`verify`] of a whole file with the first break and its line number.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde_json::{Map, Value};

use crate::snapshot::canonical::digest;
use crate::snapshot::strict::{parse_strict, StrictError};

use super::*;

/// The end of a chain: the last record's `seq` and `hash` (seq 0 and [`GENESIS_PREV`] for an
/// empty file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainHead {
    pub seq: u64,
    pub hash: String,
}

impl ChainHead {
    pub(super) fn genesis() -> Self {
        ChainHead {
            seq: 0,
            hash: GENESIS_PREV.to_owned(),
        }
    }
}

/// What is wrong with one line of an audit log.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The file does not end with a newline: it was cut short or the last write was interrupted.
    #[error(
        "the line is incomplete (the file does not end with a newline): the log was truncated or \
         its last write was interrupted"
    )]
    Truncated,

    /// The line is longer than [`MAX_RECORD_BYTES`].
    #[error("the line is longer than {MAX_RECORD_BYTES} bytes, so it is not an audit record")]
    TooLong,

    /// The line is not one strict JSON document (duplicate member names are refused too, because
    /// two readers could disagree about which value counts).
    #[error("the line is not valid JSON: {0}")]
    Malformed(StrictError),

    /// The line is JSON but lacks a member of a record or has one of the wrong type.
    #[error("the line is not an audit record: {0}")]
    NotARecord(String),

    /// The stored `hash` is not the hash of the line's content: the line was changed after it was
    /// written.
    #[error(
        "the line was edited: its content hashes to {computed}, but its \"hash\" member says \
         {stored}"
    )]
    Edited { stored: String, computed: String },

    /// `seq` jumped forward and the skipped records appear nowhere later in the file.
    #[error(
        "{count} record(s) were removed before this line: its seq is {found}, but {expected} was \
         expected and no later line has it",
        count = found.saturating_sub(*expected)
    )]
    Removed { expected: u64, found: u64 },

    /// `seq` is not the next number, and the expected record is elsewhere (or this one repeats an
    /// earlier number): lines were moved, copied or inserted.
    #[error(
        "the lines are out of order: this line's seq is {found}, but {expected} was expected (a \
         line was moved, or copied or inserted here)"
    )]
    OutOfOrder { expected: u64, found: u64 },

    /// `seq` is right but `prev` is not the previous record's hash: the line was not written after
    /// the one before it (it was inserted, or the line before it was replaced).
    #[error(
        "the chain is broken: \"prev\" is {found}, but the previous record's hash is {expected} \
         (this line was forged and inserted, or the line before it was replaced)"
    )]
    ChainBroken { expected: String, found: String },
}

/// Why [`verify`] could not confirm a log.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("cannot read the audit log {}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },

    /// The first problem found; `line` counts from 1.
    #[error("audit log {}, line {line}: {problem}", path.display())]
    Invalid {
        path: PathBuf,
        line: usize,
        problem: Problem,
    },
}

/// What [`verify`] found in a log whose chain is intact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The number of records.
    pub records: usize,
    /// The `time` of the first record, if there is one.
    pub first_time: Option<Timestamp>,
    /// The `time` of the last record, if there is one.
    pub last_time: Option<Timestamp>,
    /// The last record's `hash` ([`GENESIS_PREV`] for an empty log). Compare it with a copy kept
    /// elsewhere to detect removed trailing lines, which the file alone cannot show.
    pub head: String,
}

/// The members of a record that the chain checks use.
pub(super) struct Checked {
    pub(super) seq: u64,
    pub(super) time: Timestamp,
    pub(super) prev: String,
    pub(super) hash: String,
}

/// Checks one line on its own: strict JSON, the members of a record, and the hash. The hash is
/// compared before the other members are examined, so that any change to a written line is
/// reported as an edit rather than as whatever the change happened to break.
pub(super) fn check_record(line: &[u8]) -> Result<Checked, Problem> {
    let value = parse_strict(line).map_err(Problem::Malformed)?;
    let Value::Object(mut record) = value else {
        return Err(Problem::NotARecord("the line is not a JSON object".into()));
    };
    let hash = match record.shift_remove("hash") {
        Some(Value::String(hash)) if is_hex_digest(&hash) => hash,
        _ => return Err(not_a_record("hash", "a SHA-256 in lowercase hex")),
    };
    let computed = canonical_digest(&record);
    if computed != hash {
        return Err(Problem::Edited {
            stored: hash,
            computed,
        });
    }
    let seq = record
        .get("seq")
        .and_then(Value::as_u64)
        .ok_or_else(|| not_a_record("seq", "a non-negative integer"))?;
    let time = record
        .get("time")
        .and_then(Value::as_str)
        .and_then(|text| text.parse::<Timestamp>().ok())
        .ok_or_else(|| not_a_record("time", "an RFC 3339 instant"))?;
    if !record.get("event").is_some_and(Value::is_string) {
        return Err(not_a_record("event", "a string"));
    }
    let prev = match record.get("prev") {
        Some(Value::String(prev)) if is_hex_digest(prev) => prev.clone(),
        _ => return Err(not_a_record("prev", "a SHA-256 in lowercase hex")),
    };
    Ok(Checked {
        seq,
        time,
        prev,
        hash,
    })
}

/// The record hash: SHA-256 over the canonical JSON of the record's members other than `hash`.
pub(super) fn canonical_digest(record: &Map<String, Value>) -> String {
    // Canonical bytes need a `Value`; the clone is only made while verifying, not while writing.
    digest(&Value::Object(record.clone()))
}

fn not_a_record(member: &str, what: &str) -> Problem {
    Problem::NotARecord(format!("\"{member}\" is missing or is not {what}"))
}

fn is_hex_digest(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// How reading one line ended.
enum LineRead {
    Eof,
    /// A line ending in `\n` (removed from the buffer).
    Complete,
    /// The file ended inside a line.
    Unterminated,
    TooLong,
}

fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<LineRead> {
    buf.clear();
    let limit = MAX_RECORD_BYTES as u64 + 1;
    let n = reader.by_ref().take(limit).read_until(b'\n', buf)?;
    Ok(if n == 0 {
        LineRead::Eof
    } else if buf.last() == Some(&b'\n') {
        buf.pop();
        LineRead::Complete
    } else if n as u64 >= limit {
        LineRead::TooLong
    } else {
        LineRead::Unterminated
    })
}

/// Verifies a whole audit log: every line strict JSON and an intact record, `seq` counting up from
/// 1 by exactly 1, and every `prev` equal to the previous record's `hash` ([`GENESIS_PREV`] for
/// the first). Returns the first problem with its line number.
///
/// Limitation: removing the last N lines leaves a valid, shorter chain, and so does rewriting the
/// file with recomputed hashes; neither can be detected from the file alone. Compare
/// [`VerifyReport::head`] with a head hash recorded elsewhere (mcpguard prints its head on stderr
/// at exit) to detect them.
///
/// The file is read as a stream, so its size does not matter. A log that is being written while
/// it is verified may show its newest line as incomplete.
pub fn verify(path: &Path) -> Result<VerifyReport, VerifyError> {
    let io_err = |source| VerifyError::Io {
        path: path.to_owned(),
        source,
    };
    let invalid = |line, problem| VerifyError::Invalid {
        path: path.to_owned(),
        line,
        problem,
    };
    let mut reader = BufReader::new(File::open(path).map_err(io_err)?);
    let mut head = ChainHead::genesis();
    let mut report = VerifyReport {
        records: 0,
        first_time: None,
        last_time: None,
        head: head.hash.clone(),
    };
    let mut buf = Vec::new();
    let mut line_no = 0_usize;
    loop {
        let read = read_line(&mut reader, &mut buf).map_err(io_err)?;
        line_no += 1;
        match read {
            LineRead::Eof => break,
            LineRead::Complete => {}
            LineRead::Unterminated => return Err(invalid(line_no, Problem::Truncated)),
            LineRead::TooLong => return Err(invalid(line_no, Problem::TooLong)),
        }
        let record = check_record(&buf).map_err(|problem| invalid(line_no, problem))?;
        let Some(expected) = head.seq.checked_add(1) else {
            let problem =
                Problem::NotARecord("the seq before this line is the largest possible".into());
            return Err(invalid(line_no, problem));
        };
        if record.seq != expected {
            let found = record.seq;
            let problem = if found > expected
                && !seq_appears(&mut reader, expected, found).map_err(io_err)?
            {
                Problem::Removed { expected, found }
            } else {
                Problem::OutOfOrder { expected, found }
            };
            return Err(invalid(line_no, problem));
        }
        if record.prev != head.hash {
            let problem = Problem::ChainBroken {
                expected: head.hash,
                found: record.prev,
            };
            return Err(invalid(line_no, problem));
        }
        report.records += 1;
        report.first_time.get_or_insert(record.time);
        report.last_time = Some(record.time);
        head = ChainHead {
            seq: record.seq,
            hash: record.hash,
        };
    }
    report.head = head.hash;
    Ok(report)
}

/// Tells whether any remaining line holds a `seq` in `from..to`, which distinguishes records that
/// were moved further down from records that were removed. Lines are looked at on their own here;
/// damaged ones are skipped because the first problem has already been found.
fn seq_appears(reader: &mut impl BufRead, from: u64, to: u64) -> io::Result<bool> {
    let mut buf = Vec::new();
    loop {
        match read_line(reader, &mut buf)? {
            LineRead::Eof | LineRead::TooLong => return Ok(false),
            LineRead::Complete | LineRead::Unterminated => {}
        }
        let seq = parse_strict(&buf)
            .ok()
            .and_then(|value| value.get("seq").and_then(Value::as_u64));
        if seq.is_some_and(|seq| (from..to).contains(&seq)) {
            return Ok(true);
        }
    }
}
