//! Lossless relaying and bad input, with `cat` as the "server". A `ping` from the host (allowed
//! before the handshake) reaches `cat`, comes back as the server's own `ping` request (which the
//! gate passes to the host), and the host's answer travels back the same way as the server's
//! response: so the bytes the host receives prove what each direction did with them.

use serde_json::json;

use crate::support::{Peer, TIMEOUT};

fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[test]
fn relays_original_bytes_in_both_directions() {
    let mut p = Peer::guard(&["--", "cat"]);
    // Each ping comes back from `cat` as the server's ping request, byte for byte.
    let lines: &[&str] = &[
        r#"{"method":"ping","id":1,"jsonrpc":"2.0","params":{"z":1,"a":[3,2,1],"big":123456789012345678901234567890,"f":1.0e+2}}"#,
        r#"{ "jsonrpc" : "2.0" , "id" : "s-\u00e9" , "method" : "ping" , "extra" : { "nested" : [ ] } }"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"text":"h\u00e9llo \ud83d\ude00 \"quoted\" \\ \/","raw":"naïve 日本 😀"}}"#,
    ];
    for l in lines {
        p.send(l);
        assert_eq!(String::from_utf8(p.recv()).unwrap(), *l);
    }
    // The host answers the server's request 1; the answer reaches `cat`, comes back as the
    // server's response to the host's request 1, and is forwarded unchanged.
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"b":2,"a":1,"x":-0.0}}"#;
    p.send(answer);
    assert_eq!(String::from_utf8(p.recv()).unwrap(), answer);
    p.close_stdin();
    assert!(p.wait().success());
}

#[test]
fn crlf_is_accepted_and_each_message_ends_with_lf() {
    let mut p = Peer::guard(&["--", "cat"]);
    p.send_raw(
        "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n",
    );
    assert_eq!(p.recv(), br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert_eq!(p.recv(), br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#);
}

#[test]
fn bad_input_gets_a_verdict_and_the_stream_goes_on() {
    let mut p = Peer::guard(&["--", "cat"]);
    // (line, the error the host must get if an id is readable, what stderr must say)
    type Case = (Vec<u8>, Option<(serde_json::Value, i64)>, &'static str);
    let cases: Vec<Case> = vec![
        (b"this is not json".to_vec(), None, "not valid JSON"),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"a\",".to_vec(),
            Some((json!(10), -32700)),
            "not valid JSON",
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"\xff\xfe\"}".to_vec(),
            Some((json!(11), -32700)),
            "not valid UTF-8",
        ),
        (
            br#"[{"jsonrpc":"2.0","id":12,"method":"a"}]"#.to_vec(),
            Some((json!(12), -32600)),
            "batches",
        ),
        (
            br#"{"jsonrpc":"2.0","id":null,"method":"a"}"#.to_vec(),
            None,
            "id is null",
        ),
        (
            br#"{"jsonrpc":"2.0","id":13,"method":"a","method":"b"}"#.to_vec(),
            Some((json!(13), -32600)),
            "duplicate member",
        ),
        (
            br#"{"jsonrpc":"1.0","id":14,"method":"a"}"#.to_vec(),
            Some((json!(14), -32600)),
            "jsonrpc",
        ),
        (
            format!(
                r#"{{"jsonrpc":"2.0","id":15,"method":"a","params":{}{}}}"#,
                "[".repeat(200),
                "]".repeat(200)
            )
            .into_bytes(),
            Some((json!(15), -32600)),
            "nested",
        ),
        (
            br#""just a string""#.to_vec(),
            None,
            "must be a JSON object",
        ),
    ];
    for (i, (line, expect_error, stderr_has)) in cases.into_iter().enumerate() {
        p.send(&line);
        if let Some((id, code)) = expect_error {
            let v = p.recv_json();
            assert_eq!(v["id"], id, "case {i}: {v}");
            assert_eq!(v["error"]["code"], code, "case {i}: {v}");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("mcpguard: "),
                "case {i}: {v}"
            );
        }
        p.wait_stderr(stderr_has);
        // The stream is still alive: a good message passes right after the bad one.
        let probe = format!(r#"{{"jsonrpc":"2.0","id":"probe-{i}","method":"ping"}}"#);
        p.send(&probe);
        assert_eq!(String::from_utf8(p.recv()).unwrap(), probe, "case {i}");
    }
}

#[test]
fn over_long_line_is_refused_by_id_with_bounded_memory() {
    let mut p = Peer::guard(&["--max-message-bytes", "1048576", "--", "cat"]);
    // 100 MiB, written in pieces: mcpguard must discard it as it arrives.
    let head = br#"{"jsonrpc":"2.0","id":"huge","method":"tools/call","params":{"pad":""#;
    p.send_raw(head);
    let chunk = vec![b'a'; 1 << 20];
    for _ in 0..100 {
        p.send_raw(&chunk);
    }
    p.send("\"}}");
    let v = p.recv_json();
    assert_eq!(v["id"], "huge");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--max-message-bytes"),
        "{v}"
    );
    let hwm = vm_hwm_kib(p.pid());
    assert!(
        hwm < 64 * 1024,
        "peak RSS {hwm} KiB while discarding a 100 MiB line with a 1 MiB limit"
    );
    p.send(r#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#);
    assert_eq!(
        p.recv(),
        br#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#
    );
}

#[test]
fn relays_a_64_mib_message_with_bounded_memory() {
    let mut p = Peer::guard(&["--max-message-bytes", "80000000", "--", "cat"]);
    let size = 64 << 20;
    let mut msg = br#"{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":""#.to_vec();
    msg.resize(size - 3, b'x');
    msg.extend_from_slice(b"\"}}");
    let writer = {
        let mut stdin = p.take_stdin();
        let msg = msg.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            stdin.write_all(&msg).unwrap();
            stdin.write_all(b"\n").unwrap();
            stdin.flush().unwrap();
            stdin
        })
    };
    let got = p
        .recv_timeout(TIMEOUT * 3)
        .expect("the big message came back");
    // Keep stdin open: closing it would end mcpguard before its peak memory is read.
    let _stdin = writer.join().unwrap();
    assert_eq!(got.len(), msg.len());
    assert!(got == msg, "the 64 MiB message changed in transit");
    let hwm = vm_hwm_kib(p.pid());
    // Both directions hold the message once while it is relayed (cat echoes it back), plus the
    // decoder's growing buffer: a small multiple of the message, never a runaway.
    assert!(
        hwm < 6 * 64 * 1024,
        "peak RSS {hwm} KiB relaying a 64 MiB message"
    );
    eprintln!(
        "peak RSS relaying a 64 MiB message through cat and back: {} MiB",
        hwm / 1024
    );
}

#[test]
fn diagnostics_can_be_json_lines() {
    let mut p = Peer::guard(&[
        "--log-format",
        "json",
        "--",
        "sh",
        "-c",
        "echo 'hello \u{1b}[31mred' >&2; read line; exit 0",
    ]);
    p.wait_stderr("hello");
    p.send("not json");
    p.wait_stderr("not valid JSON");
    p.close_stdin();
    p.wait();
    let err = p.stderr();
    let lines: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["source"] == "server" && l["message"] == "hello red"),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["source"] == "mcpguard" && l["level"] == "warning"),
        "{err}"
    );
}

/// A host that pipelines thousands of requests: every one is answered exactly once, in order,
/// byte for byte. This is the path of the correlation table's ring (ascending integer ids), its
/// hash map (string ids, ids far ahead, negative ids behind the ring), the batched writes
/// (messages under and over the size that is copied into one buffer) and the 64 KiB server
/// queue, with a real proxy and a real server that answers each request as it reads it.
#[test]
fn a_pipelined_burst_is_answered_once_each_in_order() {
    let fixture = crate::support::fixture();
    let mut p = Peer::guard(&["--".as_ref(), fixture.as_os_str(), "--echo-bench".as_ref()]);
    let count = 30_000;
    let ids: Vec<String> = (0..count)
        .map(|i| match i % 97 {
            13 => format!("\"s-{i}\""),
            29 => (1_000_000_000 + i).to_string(),
            41 => format!("-{i}"),
            _ => i.to_string(),
        })
        .collect();
    let requests: Vec<u8> = ids
        .iter()
        .enumerate()
        .flat_map(|(i, id)| {
            // Every 500th request is larger than what is copied into the batch buffer.
            let pad = if i % 500 == 7 { "p".repeat(6000) } else { String::new() };
            format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\",\"params\":{{\"pad\":\"{pad}\"}}}}\n")
                .into_bytes()
        })
        .collect();
    let mut stdin = p.take_stdin();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        for chunk in requests.chunks(60_000) {
            stdin.write_all(chunk).expect("write");
        }
        stdin
    });
    for id in &ids {
        let want = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{}}}}");
        assert_eq!(String::from_utf8(p.recv()).unwrap(), want);
    }
    drop(writer.join().expect("writer"));
    assert!(
        p.recv_timeout(std::time::Duration::from_millis(300))
            .is_none(),
        "a response arrived twice"
    );
    let stderr = p.stderr();
    assert!(!stderr.contains("dropped"), "{stderr}");
}
