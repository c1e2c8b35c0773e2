use std::sync::Arc;

use serde_json::json;

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::*;
use crate::snapshot::strict::{parse_strict, StrictError};

const DIGEST: &str = "5d41402abc4b2a76b9719d911017c592aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

fn scratch() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("creating a scratch directory");
    let path = dir.path().join("audit.jsonl");
    (dir, path)
}

fn open(path: &Path, payload: Payload) -> AuditLog {
    AuditLog::open(path, "fs", Some(DIGEST.to_owned()), payload)
        .unwrap_or_else(|err| panic!("opening {}: {err}", path.display()))
}

fn read_lines(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("reading the log");
    text.lines().map(str::to_owned).collect()
}

fn write_lines(path: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(path, text).expect("writing the log");
}

/// Writes `n` call records and returns their lines.
fn write_calls(path: &Path, n: usize) -> Vec<String> {
    let log = open(path, Payload::Digests);
    for i in 0..n {
        let args = json!({"path": format!("/tmp/{i}")});
        let event = Event::new(EventKind::CallAllowed)
            .tool("read_file")
            .arguments(&args)
            .duration(Duration::from_millis(u64::try_from(i).unwrap_or(0)));
        log.record(event).expect("recording");
    }
    read_lines(path)
}

fn record_of(line: &str) -> Map<String, Value> {
    match parse_strict(line.as_bytes()) {
        Ok(Value::Object(map)) => map,
        other => panic!("{line:?} is not a record: {other:?}"),
    }
}

/// Re-serializes a record after giving it a hash that matches its (changed) content, as a
/// forger who knows the format would.
fn forge(mut record: Map<String, Value>) -> String {
    record.shift_remove("hash");
    let hash = canonical_digest(&record);
    record.insert("hash".into(), Value::from(hash));
    to_line(record)
}

/// The record on `line` with `member` set to `value`.
fn set(line: &str, member: &str, value: Value) -> Map<String, Value> {
    put(record_of(line), member, value)
}

fn put(mut record: Map<String, Value>, member: &str, value: Value) -> Map<String, Value> {
    record.insert(member.into(), value);
    record
}

fn to_line(record: Map<String, Value>) -> String {
    serde_json::to_string(&Value::Object(record)).expect("serializing")
}

fn verify_err(path: &Path) -> (usize, Problem) {
    match verify(path) {
        Err(VerifyError::Invalid { line, problem, .. }) => (line, problem),
        other => panic!("expected a problem, got {other:?}"),
    }
}

#[test]
fn a_chain_of_records_verifies() {
    let (_dir, path) = scratch();
    let log = open(&path, Payload::Digests);
    let args = json!({"b": 1, "a": [true, null]});
    for kind in EventKind::ALL {
        let event = match kind {
            EventKind::ErrorTextRaw => Event::error_text_raw("ENOENT: /home/me/secret"),
            _ => Event::new(kind),
        };
        log.record(event.tool("write_file").arguments(&args))
            .expect("recording");
    }
    let report = verify(&path).expect("an untouched log verifies");
    assert_eq!(report.records, EventKind::ALL.len());
    assert_eq!(report.head, log.head().hash);
    assert_eq!(log.head().seq, 16);
    assert!(report.first_time.is_some() && report.last_time.is_some());

    let lines = read_lines(&path);
    let mut prev = GENESIS_PREV.to_owned();
    for (i, (line, kind)) in lines.iter().zip(EventKind::ALL).enumerate() {
        let record = record_of(line);
        assert_eq!(record["seq"], json!(i + 1));
        assert_eq!(record["event"], json!(kind.code()));
        assert_eq!(record["server"], json!("fs"));
        assert_eq!(record["snapshot"], json!(DIGEST));
        assert_eq!(record["outcome"], json!(kind.default_outcome()));
        assert_eq!(record["argsSha256"], json!(args_digest(&args)));
        assert_eq!(record["prev"], json!(prev));
        // RFC 3339, UTC, with microseconds: "2026-05-01T09:30:00.123456Z".
        let time = record["time"].as_str().expect("time is a string");
        assert_eq!(time.len(), 27, "{time}");
        assert!(time.ends_with('Z') && time.as_bytes()[19] == b'.', "{time}");
        prev = record["hash"].as_str().expect("hash").to_owned();
    }
}

#[test]
fn an_empty_log_verifies_with_the_genesis_head() {
    let (_dir, path) = scratch();
    drop(open(&path, Payload::Digests));
    let report = verify(&path).expect("an empty log verifies");
    assert_eq!(
        report,
        VerifyReport {
            records: 0,
            first_time: None,
            last_time: None,
            head: GENESIS_PREV.to_owned(),
        }
    );
}

/// A change made to the lines of a log.
type Tamper = fn(&mut Vec<String>);
/// Whether a reported problem is the expected one.
type Expect = fn(&Problem) -> bool;
/// A change made to the text of a log.
type Damage = fn(&str) -> String;

#[test]
fn tampering_is_found_at_the_right_line() {
    let edited: Expect = |p| matches!(p, Problem::Edited { .. });
    let cases: &[(&str, Tamper, usize, Expect)] = &[
        (
            "edit a field of a middle line",
            |l| l[2] = l[2].replace("\"allowed\"", "\"refused\""),
            3,
            edited,
        ),
        (
            "edit a number of a middle line",
            |l| l[2] = l[2].replace("\"durationMs\":2", "\"durationMs\":9"),
            3,
            edited,
        ),
        (
            "replace a middle line's hash",
            |l| l[2] = to_line(set(&l[2], "hash", json!(GENESIS_PREV))),
            3,
            edited,
        ),
        (
            "delete a middle line",
            |l| {
                l.remove(2);
            },
            3,
            |p| {
                *p == Problem::Removed {
                    expected: 3,
                    found: 4,
                }
            },
        ),
        (
            "delete two middle lines",
            |l| {
                l.drain(1..3);
            },
            2,
            |p| {
                *p == Problem::Removed {
                    expected: 2,
                    found: 4,
                }
            },
        ),
        (
            "delete the first line",
            |l| {
                l.remove(0);
            },
            1,
            |p| {
                *p == Problem::Removed {
                    expected: 1,
                    found: 2,
                }
            },
        ),
        (
            "swap two lines",
            |l| l.swap(2, 3),
            3,
            |p| {
                *p == Problem::OutOfOrder {
                    expected: 3,
                    found: 4,
                }
            },
        ),
        (
            "move a line to the end",
            |l| {
                let line = l.remove(1);
                l.push(line);
            },
            2,
            |p| {
                *p == Problem::OutOfOrder {
                    expected: 2,
                    found: 3,
                }
            },
        ),
        (
            "duplicate a line",
            |l| l.insert(3, l[2].clone()),
            4,
            |p| {
                *p == Problem::OutOfOrder {
                    expected: 4,
                    found: 3,
                }
            },
        ),
        (
            "insert a forged line with a self-consistent hash",
            |l| {
                let forged = forge(set(&l[1], "seq", json!(3)));
                l.insert(2, forged);
            },
            3,
            |p| matches!(p, Problem::ChainBroken { .. }),
        ),
        (
            "insert a forged line that links to the previous one",
            |l| {
                let prev = record_of(&l[1])["hash"].clone();
                let forged = forge(put(set(&l[1], "seq", json!(3)), "prev", prev));
                l.insert(2, forged);
            },
            4,
            |p| {
                *p == Problem::OutOfOrder {
                    expected: 4,
                    found: 3,
                }
            },
        ),
        (
            "replace a line with a forged one",
            |l| l[2] = forge(set(&l[2], "outcome", json!("refused"))),
            4,
            |p| matches!(p, Problem::ChainBroken { .. }),
        ),
        (
            "repeat a member name",
            |l| l[1] = l[1].replacen("{\"seq\":2,", "{\"seq\":2,\"seq\":2,", 1),
            2,
            |p| matches!(p, Problem::Malformed(StrictError::DuplicateKey { .. })),
        ),
        (
            "insert an empty line",
            |l| l.insert(4, String::new()),
            5,
            |p| matches!(p, Problem::Malformed(_)),
        ),
        (
            "insert a line that is not an object",
            |l| l.insert(0, "[]".into()),
            1,
            |p| matches!(p, Problem::NotARecord(_)),
        ),
    ];
    for (name, tamper, line, check) in cases {
        let (_dir, path) = scratch();
        let mut lines = write_calls(&path, 6);
        verify(&path).expect("the untouched log verifies");
        tamper(&mut lines);
        write_lines(&path, &lines);
        let (found_line, problem) = verify_err(&path);
        assert_eq!(found_line, *line, "{name}: {problem}");
        assert!(check(&problem), "{name}: unexpected problem: {problem:?}");
    }
}

#[test]
fn a_damaged_end_of_file_is_reported_as_truncated() {
    let cases: &[(&str, Damage)] = &[
        ("the last line cut in half", |t| {
            t[..t.len() - 40].to_owned()
        }),
        ("only the final newline missing", |t| {
            t[..t.len() - 1].to_owned()
        }),
    ];
    for (name, damage) in cases {
        let (_dir, path) = scratch();
        write_calls(&path, 4);
        let text = std::fs::read_to_string(&path).expect("reading");
        std::fs::write(&path, damage(&text)).expect("writing");
        assert_eq!(verify_err(&path), (4, Problem::Truncated), "{name}");
        // The writer refuses to continue such a chain.
        match AuditLog::open(&path, "fs", None, Payload::Digests) {
            Err(OpenError::Damaged { problem, .. }) => {
                assert_eq!(problem, Problem::Truncated, "{name}")
            }
            other => panic!("{name}: expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn removing_trailing_lines_shows_only_in_the_head() {
    // The documented limitation: the shorter file is a valid chain, and only a head hash kept
    // elsewhere shows that lines are missing.
    let (_dir, path) = scratch();
    let lines = write_calls(&path, 5);
    let full = verify(&path).expect("verifies");
    write_lines(&path, &lines[..3]);
    let cut = verify(&path).expect("a log without its last lines still verifies");
    assert_eq!(cut.records, 3);
    assert_ne!(cut.head, full.head);
    assert_eq!(cut.head, record_of(&lines[2])["hash"]);
}

#[test]
fn reopening_continues_the_chain() {
    let (_dir, path) = scratch();
    write_calls(&path, 3);
    let log = open(&path, Payload::Digests);
    assert_eq!(log.head().seq, 3);
    log.record(Event::new(EventKind::Start)).expect("recording");
    drop(log);
    let log = open(&path, Payload::Full);
    log.record(Event::new(EventKind::ChildExit).detail("status 0"))
        .expect("recording");
    let report = verify(&path).expect("a log appended across runs verifies");
    assert_eq!(report.records, 5);
    assert_eq!(report.head, log.head().hash);
    let seqs: Vec<Value> = read_lines(&path)
        .iter()
        .map(|line| record_of(line)["seq"].clone())
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5].map(Value::from));
}

#[test]
fn a_damaged_last_line_refuses_reopening() {
    let cases: &[(&str, Tamper, Expect)] = &[
        (
            "edited",
            |l| l[2] = l[2].replace("read_file", "write_file"),
            |p| matches!(p, Problem::Edited { .. }),
        ),
        (
            "garbage appended",
            |l| l.push("{\"seq\":".into()),
            |p| matches!(p, Problem::Malformed(_)),
        ),
        (
            "an empty line appended",
            |l| l.push(String::new()),
            |p| matches!(p, Problem::Malformed(_)),
        ),
        (
            "not a record",
            |l| l.push("{\"hello\":1}".into()),
            |p| matches!(p, Problem::NotARecord(_)),
        ),
    ];
    for (name, tamper, check) in cases {
        let (_dir, path) = scratch();
        let mut lines = write_calls(&path, 3);
        tamper(&mut lines);
        write_lines(&path, &lines);
        match AuditLog::open(&path, "fs", None, Payload::Digests) {
            Err(err @ OpenError::Damaged { .. }) => {
                let OpenError::Damaged { problem, .. } = &err else {
                    unreachable!()
                };
                assert!(check(problem), "{name}: {problem:?}");
                let message = err.to_string();
                assert!(message.contains("mcpguard audit verify"), "{message}");
            }
            other => panic!("{name}: expected a refusal, got {other:?}"),
        }
        // The file is left exactly as it was.
        assert_eq!(read_lines(&path), lines, "{name}");
    }
}

#[test]
fn a_writer_refuses_a_tail_damaged_or_cut_under_it() {
    let (_dir, path) = scratch();
    let log = open(&path, Payload::Digests);
    log.record(Event::new(EventKind::Start)).expect("recording");
    log.record(Event::new(EventKind::ListServed))
        .expect("recording");
    let mut file = OpenOptions::new()
        .append(true)
        .open(&path)
        .expect("opening");
    file.write_all(b"{\"oops\":true}\n").expect("writing");
    let err = log
        .record(Event::new(EventKind::CallAllowed))
        .expect_err("a damaged tail is refused");
    assert_eq!(err.kind(), io::ErrorKind::InvalidData);

    let lines = read_lines(&path);
    write_lines(&path, &lines[..1]);
    let err = log
        .record(Event::new(EventKind::CallAllowed))
        .expect_err("a cut log is refused");
    assert!(err.to_string().contains("shrank"), "{err}");
}

#[test]
fn args_digest_ignores_spelling() {
    let same: &[(&str, &str)] = &[
        (r#"{"a":1,"b":2}"#, r#"{"b":2,"a":1}"#),
        (
            r#"{"x":{"q":[1,{"z":0,"y":1}],"p":null}}"#,
            r#" { "x" : { "p" : null , "q" : [ 1 , { "y" : 1 , "z" : 0 } ] } } "#,
        ),
        (r#"{"n":1}"#, r#"{"n":1.0}"#),
        (r#"{"n":100}"#, r#"{"n":1e2}"#),
        (r#"{"s":"a"}"#, r#"{"s":"\u0061"}"#),
    ];
    for (a, b) in same {
        let a = parse_strict(a.as_bytes()).expect("parsing");
        let b = parse_strict(b.as_bytes()).expect("parsing");
        assert_eq!(args_digest(&a), args_digest(&b), "{a} vs {b}");
    }
    let different: &[(&str, &str)] = &[
        (r#"{"a":1}"#, r#"{"a":"1"}"#),
        (r#"{"a":[1,2]}"#, r#"{"a":[2,1]}"#),
        (r#"{"a":1}"#, r#"{"A":1}"#),
    ];
    for (a, b) in different {
        let a = parse_strict(a.as_bytes()).expect("parsing");
        let b = parse_strict(b.as_bytes()).expect("parsing");
        assert_ne!(args_digest(&a), args_digest(&b), "{a} vs {b}");
    }
    // Known answer: SHA-256 of the two bytes "{}".
    assert_eq!(
        args_digest(&json!({})),
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
}

#[test]
fn payload_values_are_written_only_in_full_mode() {
    let args = json!({"path": "/home/me/ARG-SECRET", "n": 12345});
    let result = json!({"content": [{"type": "text", "text": "RESULT-SECRET"}]});
    let cases: &[(Payload, bool)] = &[(Payload::Digests, false), (Payload::Full, true)];
    for &(payload, values) in cases {
        let (_dir, path) = scratch();
        let log = open(&path, payload);
        log.record(
            Event::new(EventKind::CallAllowed)
                .tool("read_file")
                .arguments(&args)
                .result(&result),
        )
        .expect("recording");
        let text = std::fs::read_to_string(&path).expect("reading");
        for secret in ["ARG-SECRET", "12345", "RESULT-SECRET"] {
            assert_eq!(text.contains(secret), values, "{payload:?}: {secret}");
        }
        let record = record_of(text.trim_end());
        assert_eq!(record["argsSha256"], json!(args_digest(&args)));
        assert_eq!(record.contains_key("arguments"), values);
        assert_eq!(record.get("result"), values.then_some(&result));
        verify(&path).expect("verifies");
    }
}

#[test]
fn raw_error_text_is_kept_in_its_own_event() {
    let (_dir, path) = scratch();
    let log = open(&path, Payload::Digests);
    let long = "é".repeat(MAX_ERROR_TEXT_BYTES);
    let texts = ["ENOENT: /home/me/secret.txt\nstack...", long.as_str()];
    for text in texts {
        log.record(Event::error_text_raw(text).tool("read_file"))
            .expect("recording");
    }
    let lines = read_lines(&path);
    let first = record_of(&lines[0]);
    assert_eq!(first["event"], json!("error_text_raw"));
    assert_eq!(first["errorText"], json!(texts[0]));
    assert_eq!(first["errorTextBytes"], json!(texts[0].len()));
    let second = record_of(&lines[1]);
    let kept = second["errorText"].as_str().expect("a string");
    assert!(kept.len() <= MAX_ERROR_TEXT_BYTES && long.starts_with(kept));
    assert_eq!(second["errorTextBytes"], json!(long.len()));
    verify(&path).expect("verifies");
}

#[test]
fn optional_members_are_written_as_documented() {
    let (_dir, path) = scratch();
    let log = AuditLog::open(&path, "srv", None, Payload::Digests).expect("opening");
    log.record(
        Event::new(EventKind::CallRefused)
            .tool("write_file")
            .code("write_not_confirmed")
            .outcome("refused_by_policy")
            .duration(Duration::from_micros(2_500))
            .detail("x".repeat(5000)),
    )
    .expect("recording");
    log.set_snapshot(Some(DIGEST.to_owned()));
    log.record(Event::new(EventKind::Start)).expect("recording");
    let lines = read_lines(&path);
    let record = record_of(&lines[0]);
    let keys: Vec<&str> = record.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "seq",
            "time",
            "event",
            "server",
            "snapshot",
            "tool",
            "outcome",
            "code",
            "durationMs",
            "detail",
            "prev",
            "hash"
        ]
    );
    assert_eq!(record["snapshot"], Value::Null);
    assert_eq!(record["code"], json!("write_not_confirmed"));
    assert_eq!(record["outcome"], json!("refused_by_policy"));
    assert_eq!(record["durationMs"], json!(2));
    let detail = record["detail"].as_str().expect("a string");
    assert!(detail.len() <= MAX_DETAIL_BYTES && detail.ends_with('…'));
    let keys: Vec<String> = record_of(&lines[1]).keys().cloned().collect();
    assert_eq!(
        keys,
        ["seq", "time", "event", "server", "snapshot", "outcome", "prev", "hash"]
    );
    assert_eq!(record_of(&lines[1])["snapshot"], json!(DIGEST));
}

#[test]
fn records_are_single_lines_of_valid_json() {
    let (_dir, path) = scratch();
    let log = open(&path, Payload::Full);
    let nasty = "line\nbreak\r\u{2028}\u{0}\u{1b}[31m\"quote\\";
    let args = json!({"text": nasty, "nested": {"a": [nasty]}});
    for kind in EventKind::ALL {
        log.record(
            Event::new(kind)
                .tool(nasty)
                .detail(nasty)
                .arguments(&args)
                .result(&args),
        )
        .expect("recording");
    }
    log.record(Event::error_text_raw(nasty)).expect("recording");
    let text = std::fs::read_to_string(&path).expect("reading");
    assert!(text.ends_with('\n'));
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines.len(), EventKind::ALL.len() + 2, "one line per record");
    for line in &lines[..lines.len() - 1] {
        let record = record_of(line);
        assert_eq!(
            record
                .get("tool")
                .map_or(nasty, |v| v.as_str().unwrap_or("")),
            nasty
        );
    }
    verify(&path).expect("verifies");
}

#[test]
fn a_record_is_in_the_file_when_record_returns() {
    let (_dir, path) = scratch();
    let log = open(&path, Payload::Digests);
    for n in 1..=3 {
        log.record(Event::new(EventKind::ListServed))
            .expect("recording");
        // Read through another descriptor while the log is still open: nothing is buffered.
        assert_eq!(read_lines(&path).len(), n);
    }
}

#[test]
fn two_threads_recording_500_records_each_make_one_chain() {
    let (_dir, path) = scratch();
    let log = Arc::new(open(&path, Payload::Digests));
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..500 {
                    let args = json!({"thread": t, "i": i});
                    log.record(Event::new(EventKind::CallAllowed).arguments(&args))
                        .expect("recording");
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a recording thread panicked");
    }
    let report = verify(&path).expect("concurrent records form one chain");
    assert_eq!(report.records, 1000);
    assert_eq!(report.head, log.head().hash);
}

#[test]
fn two_writers_on_one_file_make_one_chain() {
    // Two `AuditLog`s have two open file descriptions, as two processes would, so this
    // exercises the flock and the re-reading of the tail rather than the mutex.
    let (_dir, path) = scratch();
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|server| {
            let log = AuditLog::open(&path, server, None, Payload::Digests).expect("opening");
            std::thread::spawn(move || {
                for _ in 0..200 {
                    log.record(Event::new(EventKind::CallAllowed))
                        .expect("recording");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("a writer panicked");
    }
    assert_eq!(verify(&path).expect("one chain").records, 400);
}

#[test]
fn the_log_is_a_private_regular_file() {
    let (_dir, path) = scratch();
    drop(open(&path, Payload::Digests));
    let mode = std::fs::metadata(&path).expect("stat").mode() & 0o777;
    assert_eq!(mode & 0o077, 0, "mode {mode:o} lets others read the log");
    let err = AuditLog::open(Path::new("/dev/null"), "fs", None, Payload::Digests)
        .expect_err("a device is refused");
    assert!(matches!(err, OpenError::NotARegularFile { .. }), "{err}");
}

#[test]
fn missing_folders_of_the_log_are_created_private() {
    let (dir, _) = scratch();
    let state = dir.path().join("state");
    let path = state.join("mcpguard/audit.jsonl");
    drop(open(&path, Payload::Digests));
    assert!(path.is_file());
    for folder in [state.clone(), state.join("mcpguard")] {
        let mode = std::fs::metadata(&folder).expect("stat").mode() & 0o777;
        assert_eq!(mode, 0o700, "{} has mode {mode:o}", folder.display());
    }
    // A folder that cannot be made is refused with the folder's name and what to do.
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "").unwrap();
    let err = AuditLog::open(
        &blocker.join("sub/audit.jsonl"),
        "fs",
        None,
        Payload::Digests,
    )
    .expect_err("a file in the way");
    assert!(matches!(err, OpenError::Folder { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("a-file/sub") && text.contains("--audit-log"),
        "{text}"
    );
}

#[test]
fn event_codes_are_stable() {
    let codes: Vec<&str> = EventKind::ALL.iter().map(|kind| kind.code()).collect();
    assert_eq!(
        codes,
        [
            "start",
            "snapshot_verified",
            "handshake_pinned",
            "list_served",
            "call_allowed",
            "call_refused",
            "call_confirmed",
            "call_denied_by_user",
            "call_indeterminate",
            "review_invalidated",
            "capability_blocked",
            "sandbox_applied",
            "child_exit",
            "error_text_raw",
            "secret_detected",
            "result_labelled",
        ]
    );
    for kind in EventKind::ALL {
        assert_eq!(EventKind::from_code(kind.code()), Some(kind));
        assert_eq!(kind.to_string(), kind.code());
    }
    assert_eq!(EventKind::from_code("Start"), None);
}

#[test]
fn errors_name_the_file_and_the_line() {
    let (_dir, path) = scratch();
    let mut lines = write_calls(&path, 4);
    lines.remove(1);
    write_lines(&path, &lines);
    let message = verify(&path).expect_err("a removed line").to_string();
    assert_eq!(
        message,
        format!(
            "audit log {}, line 2: 1 record(s) were removed before this line: its seq is 3, \
             but 2 was expected and no later line has it",
            path.display()
        )
    );
    let missing = path.with_file_name("missing.jsonl");
    let message = verify(&missing).expect_err("no file").to_string();
    assert!(
        message.starts_with("cannot read the audit log"),
        "{message}"
    );
}
