//! The proxy benchmark: latency and throughput of small JSON-RPC messages through
//! (a) a direct connection to a fast echo server, (b) a minimal pipe relay and (c) mcpguard,
//! measured side by side in one run, plus peak memory relaying 64 MiB messages; then a gated
//! `tools/call` against a 1,016-tool catalogue, the cost of hashing that catalogue, and the
//! start-up time to the first answered `initialize`, each beside its baseline in the same run.
//! BENCHMARKS.md records the figures.
//!
//! Run it with `scripts/bench.sh` (which builds in release mode first). This is a benchmark,
//! not a test: it prints figures and ratios and never fails on a number.
//!
//! `bench relay -- CMD...` is the baseline relay itself: two threads copying bytes, the least a
//! stdio proxy can do.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|a| a == "relay") {
        let cmd: Vec<OsString> = args.into_iter().skip(2).collect();
        relay(&cmd);
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let only_gate = args.iter().any(|a| a == "--gate-only");
    if args.iter().any(|a| a == "--core-only") {
        core_cost(if quick { 20_000 } else { 200_000 });
        return;
    }
    if args.iter().any(|a| a == "--content-only") {
        content_cost(if quick { 200 } else { 2_000 });
        return;
    }
    if args.iter().any(|a| a == "--scanner-only") {
        scanner_cost(quick);
        let dir = exe_dir();
        let me = std::env::current_exe().expect("current exe");
        result_figures(
            &me,
            &dir.join("../mcpguard"),
            &dir.join("fixture_server"),
            quick,
        );
        return;
    }
    let dir = exe_dir();
    let mcpguard = dir.join("../mcpguard");
    let fixture = dir.join("fixture_server");
    let me = std::env::current_exe().expect("current exe");
    for p in [&mcpguard, &fixture] {
        assert!(
            p.exists(),
            "{} is missing: run scripts/bench.sh",
            p.display()
        );
    }
    let echo = vec![fixture.clone().into_os_string(), "--echo-bench".into()];
    let configs: Vec<(&str, Vec<OsString>)> = vec![
        ("direct", echo.clone()),
        (
            "pipe relay",
            [
                vec![me.clone().into_os_string(), "relay".into(), "--".into()],
                echo.clone(),
            ]
            .concat(),
        ),
        (
            "mcpguard",
            [
                vec![mcpguard.clone().into_os_string(), "--".into()],
                echo.clone(),
            ]
            .concat(),
        ),
    ];
    let (round_trips, pipelined) = if quick {
        (2_000, 20_000)
    } else {
        (20_000, 200_000)
    };
    if !only_gate {
        proxy_figures(&configs, &me, &mcpguard, round_trips, pipelined, quick);
    }
    gate_figures(&mcpguard, &fixture, if quick { 300 } else { 2_000 });
}

fn proxy_figures(
    configs: &[(&str, Vec<OsString>)],
    me: &Path,
    mcpguard: &Path,
    round_trips: usize,
    pipelined: usize,
    quick: bool,
) {
    println!(
        "mcpguard proxy benchmark ({} round trips, {} pipelined messages)",
        round_trips, pipelined
    );
    println!("machine: {} cores, {}", cores(), cpu_model());
    println!();
    println!(
        "{:<12} {:>10} {:>10} {:>14} {:>10} {:>12}",
        "path", "p50 µs", "p99 µs", "msgs/s", "idle MiB", "pipelined MiB"
    );
    let mut results = Vec::new();
    for (name, cmd) in configs.iter() {
        let lat = latency(cmd, round_trips);
        let (tput, hwm) = throughput(cmd, pipelined);
        let idle = idle_rss(cmd);
        println!(
            "{:<12} {:>10.1} {:>10.1} {:>14.0} {:>10} {:>12}",
            name,
            lat.0,
            lat.1,
            tput,
            idle >> 10,
            hwm >> 10
        );
        results.push((name.to_string(), lat, tput));
    }
    let relay = &results[1];
    let guard = &results[2];
    println!();
    println!(
        "mcpguard / pipe relay: p50 latency {:.2}x, p99 latency {:.2}x, throughput {:.2}x (targets: latency <= 1.1x, throughput >= 0.8x)",
        guard.1 .0 / relay.1 .0,
        guard.1 .1 / relay.1 .1,
        guard.2 / relay.2
    );
    println!(
        "pipe relay / direct: p50 latency {:.2}x; mcpguard / direct: p50 latency {:.2}x",
        relay.1 .0 / results[0].1 .0,
        guard.1 .0 / results[0].1 .0
    );
    core_cost(pipelined);
    content_cost(if quick { 200 } else { 2_000 });
    scanner_cost(quick);
    result_figures(me, mcpguard, &exe_dir().join("fixture_server"), quick);

    println!();
    let big = if quick { 16 << 20 } else { 64 << 20 };
    for (name, cmd) in [
        (
            "pipe relay",
            vec![
                me.as_os_str().to_owned(),
                "relay".into(),
                "--".into(),
                "cat".into(),
            ],
        ),
        (
            "mcpguard",
            vec![
                mcpguard.as_os_str().to_owned(),
                "--max-message-bytes".into(),
                "100000000".into(),
                "--".into(),
                "cat".into(),
            ],
        ),
    ] {
        let (elapsed, hwm) = big_messages(&cmd, big, 3);
        println!(
            "{name}: 3 x {} MiB messages echoed through `cat`: {:.0} ms, peak RSS {} MiB",
            big >> 20,
            elapsed.as_secs_f64() * 1e3,
            hwm >> 10
        );
    }
}

/// Where the pipelined throughput goes: the core's own work per request/response pair, in
/// process (no pipes, no threads), split into the two envelope parses and the rest (id
/// correlation, verdicts). The relay does none of this; it only moves bytes.
fn core_cost(n: usize) {
    use mcpguard::gate::session::{Config, Mode, Session};
    use mcpguard::wire::frame::Frame;
    let requests: Vec<bytes::Bytes> = (0..n)
        .map(|i| {
            let mut r = request(i);
            r.pop();
            bytes::Bytes::from(r)
        })
        .collect();
    let responses: Vec<bytes::Bytes> = (0..n)
        .map(|i| {
            bytes::Bytes::from(format!(
                "{{\"jsonrpc\":\"2.0\",\"id\":{i},\"result\":{{}}}}"
            ))
        })
        .collect();
    let start = Instant::now();
    for (q, r) in requests.iter().zip(&responses) {
        std::hint::black_box(mcpguard::wire::message::parse(q).is_ok());
        std::hint::black_box(mcpguard::wire::message::parse(r).is_ok());
    }
    let parse = start.elapsed().as_nanos() as f64 / n as f64;
    // The reference path the one-pass reader replaced, on the same lines, for comparison.
    let start = Instant::now();
    for (q, r) in requests.iter().zip(&responses) {
        std::hint::black_box(mcpguard::wire::message::parse_with_serde(q).is_ok());
        std::hint::black_box(mcpguard::wire::message::parse_with_serde(r).is_ok());
    }
    let serde_parse = start.elapsed().as_nanos() as f64 / n as f64;
    // The same with the lines hot in the cache, as they are in the proxy (which parses a line
    // just after reading it): the first 1,000 pairs, parsed over and over. Streaming through all
    // the pairs above measures memory as much as parsing.
    let hot = |f: fn(&[u8]) -> bool| {
        let start = Instant::now();
        for _ in 0..n / 1000 {
            for (q, r) in requests.iter().zip(&responses).take(1000) {
                std::hint::black_box(f(q));
                std::hint::black_box(f(r));
            }
        }
        start.elapsed().as_nanos() as f64 / (n / 1000 * 1000) as f64
    };
    let hot_fast = hot(|l| mcpguard::wire::message::parse(l).is_ok());
    let hot_serde = hot(|l| mcpguard::wire::message::parse_with_serde(l).is_ok());
    let mut session = Session::new(Config::new(Mode::NoManifest), "bench");
    let mut out = Vec::new();
    let start = Instant::now();
    for (q, r) in requests.iter().zip(&responses) {
        session.from_host(Frame::Line(q.clone()), &mut out);
        session.from_server(Frame::Line(r.clone()), &mut out);
        out.clear();
    }
    let core = start.elapsed().as_nanos() as f64 / n as f64;
    println!(
        "core's own work per request/response pair, in process: {core:.0} ns, of which parsing the two envelopes {parse:.0} ns (the serde_json path: {serde_parse:.0} ns)"
    );
    println!(
        "parsing the two envelopes with the lines in cache: one-pass reader {hot_fast:.0} ns, serde_json path {hot_serde:.0} ns"
    );
}

/// The value checks on a result (issue 16), in process: for ordinary text of a few sizes, the
/// strict parse every result already gets, the secret detector's quick test of the raw JSON, and
/// the injection labeller over every text (its quick test, and the full labeller where that
/// matches); then the cost of a result that does hold a key (redacted and serialized again).
fn content_cost(n: usize) {
    use mcpguard::gate::content::Content;
    let content = Content::default();
    // Ordinary text without and with a link: "://" is one of the secret shapes' anchors (a
    // password in a connection string), so text with links takes the full secret scan.
    let plain = "The build finished in 41.2 seconds on runner 7; 1,204 tests passed and 3 were skipped. \
                 The release notes list the changes to the parser, the new flag --max-depth and two fixed crashes.\n";
    let linked = "The build finished in 41.2 seconds on runner 7; 1,204 tests passed and 3 were skipped. \
                  See the log at https://ci.example.com/runs/88231 for details, and the notes for the new flag.\n";
    for (what, prose) in [("plain", plain), ("with links", linked)] {
        for kib in [1usize, 64, 1024] {
            let mut text = String::new();
            while text.len() < kib << 10 {
                text.push_str(prose);
            }
            let raw = serde_json::to_string(&serde_json::json!({
                "content": [{"type": "text", "text": text}],
                "structuredContent": {"text": text},
            }))
            .expect("json");
            let iters = (n / kib).max(3);
            let start = Instant::now();
            for _ in 0..iters {
                std::hint::black_box(mcpguard::snapshot::strict::parse_strict_str(&raw).is_ok());
            }
            let parse = start.elapsed().as_secs_f64() * 1e6 / iters as f64;
            let mut value: serde_json::Value = serde_json::from_str(&raw).expect("json");
            let start = Instant::now();
            let mut full = false;
            for _ in 0..iters {
                // What the session does: the quick test, then the full scan only when it may hold one.
                if content.result_may_hold_secrets(std::hint::black_box(&raw)) {
                    full = true;
                    assert!(content.redact_result(&mut value).is_empty());
                }
            }
            let secrets = start.elapsed().as_secs_f64() * 1e6 / iters as f64;
            let start = Instant::now();
            for _ in 0..iters {
                assert!(content
                    .label_result(std::hint::black_box(&mut value))
                    .is_empty());
            }
            let label = start.elapsed().as_secs_f64() * 1e6 / iters as f64;
            println!(
                "result value checks, in process, {kib} KiB of ordinary text {what} (twice: content and structuredContent): strict parse (every result, before this work) {parse:.1} µs; secrets {secrets:.1} µs ({}); injection labels {label:.1} µs",
                if full { "quick test, then the full scan" } else { "quick test only" }
            );
        }
    }
    let raw = r#"{"content":[{"type":"text","text":"aws_access_key_id = AKIAIOSFODNN7EXAMPLE"}]}"#;
    let start = Instant::now();
    for _ in 0..n {
        let mut v: serde_json::Value = serde_json::from_str(raw).expect("json");
        assert!(content.result_may_hold_secrets(raw));
        assert_eq!(content.redact_result(&mut v).len(), 1);
        std::hint::black_box(serde_json::to_vec(&v).expect("json"));
    }
    println!(
        "result value checks, in process, a small result holding an AWS key: quick test + redaction + serializing it again {:.1} µs",
        start.elapsed().as_secs_f64() * 1e6 / n as f64
    );
}

/// Per-call latency of a gated `tools/call` against a 1,000-tool catalogue, beside a direct
/// call, a relay-only call (mcpguard without a snapshot) and a direct `tools/list` round trip:
/// the seed's extra live re-list is the floor; what is above it is mcpguard's own cost.
fn gate_figures(mcpguard: &Path, fixture: &Path, n: usize) {
    let dir = std::env::temp_dir().join(format!("mcpguard-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let snap = dir.join("bench.snapshot.json");
    let fixture_cmd = |extra: &[&str]| -> Vec<OsString> {
        let mut v = vec![
            fixture.as_os_str().to_owned(),
            "--tools".into(),
            "1000".into(),
        ];
        v.extend(extra.iter().map(OsString::from));
        v
    };
    let status = Command::new(mcpguard)
        .args(["capture", "--server", "bench", "--out"])
        .arg(&snap)
        .arg("--")
        .args(fixture_cmd(&[]))
        .stderr(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("capture");
    assert!(status.success(), "capture failed");
    let out = Command::new(mcpguard)
        .arg("review")
        .arg(&snap)
        .args([
            "--server",
            "bench",
            "--tool",
            "echo",
            "--reviewer",
            "bench@example.test",
        ])
        .args([
            "--assert",
            "headless=true",
            "--assert",
            "independentCalls=true",
            "--assert",
            "modelBacked=false",
        ])
        .args([
            "--assert",
            "sideEffects=",
            "--assert",
            "concurrency=safe",
            "--assert",
            "referenceBasedIO=true",
            "--channel",
            "/text=data",
        ])
        .stderr(Stdio::null())
        .output()
        .expect("review");
    let digest = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // The called tool is a read, so that no call waits for (or is refused without) a person's
    // approval: the figure is the gate's cost, not the confirmation's.
    let policy = dir.join("bench-policy.toml");
    std::fs::write(&policy, "[writes.tools.echo]\nside_effect = \"read\"\n").expect("policy");
    let policy_s = policy.display().to_string();

    let guard = |extra: &[&str]| -> Vec<OsString> {
        let mut v = vec![mcpguard.as_os_str().to_owned()];
        v.extend(["--policy".into(), OsString::from(&policy_s)]);
        v.extend(extra.iter().map(OsString::from));
        v.push("--".into());
        v.extend(fixture_cmd(&[]));
        v
    };
    let snap_s = snap.display().to_string();
    let paths: Vec<(&str, Vec<OsString>)> = vec![
        ("direct", fixture_cmd(&[])),
        ("relay-only", guard(&["--allow-unpinned"])),
        (
            "gated",
            guard(&[
                "--manifest",
                &snap_s,
                "--sha256",
                &digest,
                "--server",
                "bench",
            ]),
        ),
    ];
    println!();
    println!("gated tools/call, catalogue of 1,016 tools ({n} calls each)");
    println!("{:<22} {:>10} {:>10}", "path", "p50 µs", "p99 µs");
    let call = r#"{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}"#;
    let list = r#"{"jsonrpc":"2.0","id":ID,"method":"tools/list"}"#;
    let mut figures = Vec::new();
    for (name, cmd) in &paths {
        let f = session_latency(cmd, call, n);
        println!(
            "{:<22} {:>10.1} {:>10.1}",
            format!("tools/call {name}"),
            f.0,
            f.1
        );
        figures.push(f);
    }
    let list_direct = session_latency(&paths[0].1, list, n);
    println!(
        "{:<22} {:>10.1} {:>10.1}",
        "tools/list direct", list_direct.0, list_direct.1
    );
    let floor = figures[1].0 + list_direct.0;
    println!(
        "gated / (relay-only call + direct tools/list): p50 {:.2}x (target <= 1.05x); gated / direct call: p50 {:.1}x",
        figures[2].0 / floor,
        figures[2].0 / figures[0].0
    );
    own_work(&snap, n);
    catalogue_hashing(&snap, n);
    let (small, small_digest) = snapshot_load(&snap, &digest, n);
    let small_s = small.display().to_string();
    let mut paths = paths;
    paths.push((
        "gated, 20 tools",
        guard(&[
            "--manifest",
            &small_s,
            "--sha256",
            &small_digest,
            "--server",
            "bench",
        ]),
    ));
    let starts = (n / 10).clamp(20, 100);
    let gated = startup(&paths, starts);
    let hashing = cold_hashing(mcpguard, &snap, starts);
    println!(
        "start-up p50 with the 1,016-tool snapshot / its hashing in a fresh process: {:.2}x (target <= 1.5x)",
        gated / hashing
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Pinning a whole snapshot (what mcpguard does before it starts the server, and what `hash`,
/// `capture` and `review` do): strict parse, RFC 8785 canonical form and SHA-256, beside the
/// baseline of a plain `serde_json` parse of the same bytes.
fn catalogue_hashing(snap: &Path, n: usize) {
    use mcpguard::snapshot::manifest;
    let bytes = std::fs::read(snap).expect("snapshot");
    let runs = (n / 10).max(20);
    let time = |f: &dyn Fn()| {
        let mut samples: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect();
        samples.sort_by(|a, b| a.total_cmp(b));
        samples[samples.len() / 2]
    };
    let plain = time(&|| {
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        std::hint::black_box(v);
    });
    let pinned = time(&|| {
        let m = manifest::from_bytes(&bytes).expect("snapshot");
        std::hint::black_box(m.digest);
    });
    let mib = bytes.len() as f64 / f64::from(1u32 << 20);
    println!(
        "catalogue hashing, {} KiB snapshot of 1,016 tools: strict parse + RFC 8785 + SHA-256 {:.2} ms ({:.0} MiB/s); plain serde_json parse {:.2} ms ({:.0} MiB/s); ratio {:.2}x",
        bytes.len() >> 10,
        pinned * 1e3,
        mib / pinned,
        plain * 1e3,
        mib / plain,
        pinned / plain
    );
}

/// The hashing a start pays, measured as a start pays it: in a fresh process (cold heap and
/// caches), `mcpguard hash FILE` less `mcpguard --version`, medians of `runs` each. The
/// in-process figure above is warm (its median run reuses memory the earlier runs freed).
fn cold_hashing(mcpguard: &Path, snap: &Path, runs: usize) -> f64 {
    let median = |args: &[&std::ffi::OsStr]| {
        let mut samples: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                let status = Command::new(mcpguard)
                    .args(args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status()
                    .expect("mcpguard");
                assert!(status.success(), "mcpguard {args:?} failed");
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        samples.sort_by(|a, b| a.total_cmp(b));
        samples[samples.len() / 2]
    };
    let version = median(&["--version".as_ref()]);
    let hash = median(&["hash".as_ref(), snap.as_os_str()]);
    println!(
        "hashing the 1,016-tool snapshot in a fresh process: `mcpguard hash` {hash:.2} ms less `mcpguard --version` {version:.2} ms = {:.2} ms",
        hash - version
    );
    hash - version
}

/// Start-up: from spawning the command to the answer of the first `initialize`, which through
/// mcpguard includes loading and verifying the snapshot, spawning the server and forwarding the
/// request. Hosts kill servers that start slowly, so this is measured against the server alone.
/// Returns the gated start's p50 with the 1,016-tool snapshot, in ms.
fn startup(paths: &[(&str, Vec<OsString>)], runs: usize) -> f64 {
    let init = b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}\n";
    println!();
    println!("start-up to the first initialize answered ({runs} starts each)");
    println!("{:<22} {:>10} {:>10}", "path", "p50 ms", "p90 ms");
    let mut p50s = Vec::new();
    for (name, cmd) in paths {
        let mut samples: Vec<f64> = (0..runs + 3)
            .map(|_| {
                let start = Instant::now();
                let mut child = spawn_with(cmd, Stdio::null());
                let mut stdin = child.stdin.take().expect("stdin");
                stdin.write_all(init).expect("write");
                let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
                let mut line = Vec::new();
                stdout.read_until(b'\n', &mut line).expect("read");
                assert!(
                    line.starts_with(b"{") && line.windows(8).any(|w| w == b"\"result\""),
                    "{name}: no initialize result: {}",
                    String::from_utf8_lossy(&line)
                );
                let elapsed = start.elapsed();
                drop(stdin);
                let _ = child.wait();
                elapsed.as_secs_f64() * 1e3
            })
            .skip(3)
            .collect();
        samples.sort_by(|a, b| a.total_cmp(b));
        let (p50, p90) = (samples[samples.len() / 2], samples[samples.len() * 9 / 10]);
        println!(
            "{:<22} {:>10.2} {:>10.2}",
            format!("start {name}"),
            p50,
            p90
        );
        p50s.push(p50);
    }
    println!(
        "start-up p50: relay-only / direct {:.2}x, gated (snapshot verified) / direct {:.2}x",
        p50s[1] / p50s[0],
        p50s[2] / p50s[0]
    );
    println!(
        "start-up p50 beyond relay-only: 1,016-tool snapshot +{:.2} ms, 20-tool snapshot +{:.2} ms (target: within 1 ms)",
        p50s[2] - p50s[1],
        p50s[3] - p50s[1]
    );
    p50s[2]
}

/// mcpguard's own work per gated call, measured in process: parsing the live page strictly,
/// canonicalizing and hashing every Tool, comparing the selected one, validating the arguments.
fn own_work(snap: &Path, n: usize) {
    use mcpguard::gate::{catalogue, schema};
    use mcpguard::snapshot::{canonical, manifest, strict};
    let m = manifest::load(snap).expect("snapshot");
    let entry = m.server("bench").expect("server");
    let page_bytes = serde_json::to_vec(&entry["toolPages"][0]).expect("page");
    // The live page arrives as the result of a JSON-RPC response; reading it is the envelope
    // parse (which validates the whole line) plus the page reader.
    let mut response = br#"{"jsonrpc":"2.0","id":"mcpguard-bench-1","result":"#.to_vec();
    response.extend_from_slice(&page_bytes);
    response.push(b'}');
    let tool = manifest::tools("bench", entry)
        .expect("tools")
        .into_iter()
        .find(|(n, _, _)| n == "echo")
        .expect("echo")
        .2;
    // The first schema compiled in a process also builds the validator's own registry of
    // drafts and meta-schemas; a start pays that once, a warm median never shows it.
    let t = Instant::now();
    let compiled = schema::compile(&tool["inputSchema"]).expect("schema");
    let first = t.elapsed();
    let t = Instant::now();
    std::hint::black_box(schema::compile(&tool["inputSchema"]).expect("schema"));
    let second = t.elapsed();
    println!(
        "compiling a tool's input schema: the first in this process {:.0} µs, the next {:.0} µs",
        first.as_secs_f64() * 1e6,
        second.as_secs_f64() * 1e6
    );
    let args = serde_json::json!({"text": "hello"});
    let reviewed = canonical::canonical_bytes(&tool);
    let (mut t_parse, mut t_canon, mut t_check) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for _ in 0..n {
        let t0 = Instant::now();
        let msg = mcpguard::wire::message::parse(&response).expect("response");
        let page = catalogue::parse_page(msg.result.expect("result")).expect("page");
        let t1 = Instant::now();
        let live = catalogue::LiveCatalogue::from_pages(vec![page]).expect("catalogue");
        let t2 = Instant::now();
        let echo = strict::parse_strict_str(&live.tools["echo"]).expect("echo");
        assert_eq!(canonical::canonical_bytes(&echo), reviewed);
        compiled.validate(&args).expect("valid");
        let t3 = Instant::now();
        t_parse += t1 - t0;
        t_canon += t2 - t1;
        t_check += t3 - t2;
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6 / n as f64;
    println!(
        "mcpguard's own work per gated call, {} KiB live page of 1,016 tools: read the page (envelope parse + page reader) {:.0} µs, index the names {:.0} µs, parse + canonicalize + compare the called tool and validate its arguments {:.1} µs",
        page_bytes.len() >> 10,
        us(t_parse),
        us(t_canon),
        us(t_check)
    );
    // The envelope parse of the page alone, by the one-pass reader and by the serde_json path.
    let runs = (n / 4).max(50);
    let time = |f: &dyn Fn(&[u8]) -> bool| {
        let t = Instant::now();
        for _ in 0..runs {
            assert!(std::hint::black_box(f(&response)));
        }
        t.elapsed().as_secs_f64() * 1e6 / runs as f64
    };
    let fast = time(&|r| mcpguard::wire::message::parse(r).is_ok());
    let serde = time(&|r| mcpguard::wire::message::parse_with_serde(r).is_ok());
    println!(
        "envelope parse of the {} KiB page response: one-pass reader {fast:.0} µs, serde_json path {serde:.0} µs",
        response.len() >> 10
    );
}

/// Start-up's snapshot work in process: `load_pin` (read, strict parse, canonical form and
/// digest, validation, the pin built, schemas compiled) beside the hashing alone, for the
/// 1,016-tool snapshot and for a typical 20-tool one (the first 20 tools, every one reviewed).
fn snapshot_load(snap: &Path, digest: &str, n: usize) -> (PathBuf, String) {
    use mcpguard::gate::pin;
    use mcpguard::snapshot::manifest::{self, Acceptance};
    let runs = (n / 10).max(20);
    let median = |f: &dyn Fn()| {
        let mut samples: Vec<f64> = (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect();
        samples.sort_by(|a, b| a.total_cmp(b));
        samples[samples.len() / 2]
    };
    let now = jiff::Timestamp::now();
    let acceptance = Acceptance::default();
    let bytes = std::fs::read(snap).expect("snapshot");
    let hash = median(&|| {
        std::hint::black_box(manifest::from_bytes(&bytes).expect("snapshot").digest);
    });
    let load = median(&|| {
        std::hint::black_box(pin::load_pin(snap, digest, "bench", now, &acceptance).expect("pin"));
    });
    println!(
        "snapshot load in process, 1,016 tools: load_pin {load:.2} ms, of which hashing alone {hash:.2} ms ({:.2}x the hashing)",
        load / hash
    );
    // A typical server: 20 tools, all reviewed with the review the bench gave `echo`.
    let m = manifest::from_bytes(&bytes).expect("snapshot");
    let mut doc = m.doc.clone();
    let entry = &mut doc["servers"]["bench"];
    let review = entry["reviews"]["echo"].clone();
    let tools: Vec<serde_json::Value> = entry["toolPages"][0]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .take(20)
        .cloned()
        .collect();
    let mut reviews = serde_json::Map::new();
    for t in &tools {
        // Every argument needs its input channel; they are all data here.
        let mut review = review.clone();
        let channels: serde_json::Map<String, serde_json::Value> = t["inputSchema"]["properties"]
            .as_object()
            .map(|props| {
                props
                    .keys()
                    .map(|k| (format!("/{k}"), serde_json::json!("data")))
                    .collect()
            })
            .unwrap_or_default();
        review["inputChannels"] = serde_json::Value::Object(channels);
        reviews.insert(t["name"].as_str().expect("name").to_string(), review);
    }
    entry["toolPages"] = serde_json::json!([{"tools": tools}]);
    entry["reviews"] = serde_json::Value::Object(reviews);
    let small_bytes = serde_json::to_vec_pretty(&doc).expect("small snapshot");
    let small_path = snap.with_file_name("small.snapshot.json");
    std::fs::write(&small_path, &small_bytes).expect("write small snapshot");
    let small_digest = manifest::from_bytes(&small_bytes).expect("small").digest;
    let small_hash = median(&|| {
        std::hint::black_box(manifest::from_bytes(&small_bytes).expect("small").digest);
    });
    let small_load = median(&|| {
        std::hint::black_box(
            pin::load_pin(&small_path, &small_digest, "bench", now, &acceptance).expect("pin"),
        );
    });
    println!(
        "snapshot load in process, 20 tools all reviewed ({} KiB): load_pin {small_load:.3} ms, of which hashing alone {small_hash:.3} ms",
        small_bytes.len() >> 10
    );
    (small_path, small_digest)
}

fn session_latency(cmd: &[OsString], template: &str, n: usize) -> (f64, f64) {
    let mut child = spawn_with(cmd, Stdio::null());
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = Vec::new();
    let mut roundtrip =
        |stdin: &mut std::process::ChildStdin, msg: String, id: usize| -> Duration {
            let start = Instant::now();
            stdin
                .write_all(msg.as_bytes())
                .and_then(|_| stdin.write_all(b"\n"))
                .and_then(|_| stdin.flush())
                .expect("write");
            let want = format!("\"id\":{id},");
            loop {
                line.clear();
                stdout.read_until(b'\n', &mut line).expect("read");
                assert!(!line.is_empty(), "the server closed");
                let text = String::from_utf8_lossy(&line);
                if text.contains(&want) {
                    // A refusal is fast and would make the figure meaningless: every measured
                    // answer must be a success.
                    assert!(
                        !text.contains("\"error\"") && !text.contains("\"isError\":true"),
                        "the benchmark's request was refused: {text}"
                    );
                    return start.elapsed();
                }
            }
        };
    roundtrip(&mut stdin, r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#.to_string(), 0);
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .expect("write");
    let warm = (n / 10).max(20);
    let mut samples = Vec::with_capacity(n);
    for i in 1..=(warm + n) {
        let d = roundtrip(&mut stdin, template.replace("ID", &i.to_string()), i);
        if i > warm {
            samples.push(d.as_secs_f64() * 1e6);
        }
    }
    drop(stdin);
    let _ = child.wait();
    samples.sort_by(|a, b| a.total_cmp(b));
    (
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
    )
}

fn exe_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .expect("exe dir")
}

fn cores() -> usize {
    thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn spawn(cmd: &[OsString]) -> Child {
    spawn_with(cmd, Stdio::inherit())
}

/// Starts `cmd` with piped stdin and stdout and the given stderr.
fn spawn_with(cmd: &[OsString], stderr: Stdio) -> Child {
    Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn")
}

/// A small request that every path forwards as it is: `ping` passes mcpguard's gate at any time
/// (no handshake needed), so this measures the relay itself, not a refusal. The params give it
/// the size of a typical small tools/call.
fn request(id: usize) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"hello\"}}}}}}\n").into_bytes()
}

/// One request at a time; returns (p50, p99) in microseconds.
fn latency(cmd: &[OsString], n: usize) -> (f64, f64) {
    let mut child = spawn(cmd);
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut samples = Vec::with_capacity(n);
    let mut line = Vec::new();
    // Warm up the page cache, allocator and scheduler before measuring.
    for i in 0..(n / 10).max(100) + n {
        let req = request(i);
        let start = Instant::now();
        stdin.write_all(&req).expect("write");
        stdin.flush().expect("flush");
        line.clear();
        stdout.read_until(b'\n', &mut line).expect("read");
        if i >= (n / 10).max(100) {
            samples.push(start.elapsed().as_secs_f64() * 1e6);
        }
    }
    drop(stdin);
    let _ = child.wait();
    samples.sort_by(|a, b| a.total_cmp(b));
    (
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
    )
}

/// The resident memory of the first process of `cmd` (the relaying process; for the direct
/// path, the server) when it has started and nothing has been sent yet, in KiB.
fn idle_rss(cmd: &[OsString]) -> u64 {
    let mut child = spawn(cmd);
    thread::sleep(Duration::from_millis(200));
    let rss = status_kib(child.id(), "VmRSS:");
    drop(child.stdin.take());
    let _ = child.wait();
    rss
}

/// A `/proc/PID/status` figure in KiB (`VmRSS:`, `VmHWM:`), 0 when it cannot be read.
fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// `n` requests written by one thread while another reads the responses; messages per second
/// and the relaying process's peak RSS in KiB.
fn throughput(cmd: &[OsString], n: usize) -> (f64, u64) {
    let mut child = spawn(cmd);
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let start = Instant::now();
    let writer = thread::spawn(move || {
        let mut buf = Vec::with_capacity(1 << 16);
        for i in 0..n {
            buf.extend_from_slice(&request(i));
            if buf.len() > 60_000 {
                stdin.write_all(&buf).expect("write");
                buf.clear();
            }
        }
        stdin.write_all(&buf).expect("write");
        stdin
    });
    let mut reader = BufReader::with_capacity(1 << 16, stdout);
    let mut line = Vec::new();
    for _ in 0..n {
        line.clear();
        reader.read_until(b'\n', &mut line).expect("read");
        assert!(!line.is_empty(), "the server stopped answering");
    }
    let elapsed = start.elapsed();
    let hwm = status_kib(child.id(), "VmHWM:");
    drop(writer.join());
    let _ = child.wait();
    (n as f64 / elapsed.as_secs_f64(), hwm)
}

/// Sends `count` messages of `size` bytes through the path with `cat` as the server; returns the
/// time taken and the peak RSS of the relaying process in KiB.
fn big_messages(cmd: &[OsString], size: usize, count: usize) -> (Duration, u64) {
    let mut child = spawn(cmd);
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    // Pings with distinct ids: `cat` echoes each back as the server's own ping request, which
    // mcpguard passes to the host, so every byte crosses both directions.
    let messages: Vec<Vec<u8>> = (0..count)
        .map(|i| {
            let mut msg =
                format!(r#"{{"jsonrpc":"2.0","id":"big-{i}","method":"ping","params":{{"pad":""#)
                    .into_bytes();
            msg.resize(size - 3, b'x');
            msg.extend_from_slice(b"\"}}\n");
            msg
        })
        .collect();
    let start = Instant::now();
    let writer = thread::spawn(move || {
        for msg in &messages {
            stdin.write_all(msg).expect("write");
        }
        stdin
    });
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    while total < count * (size + 1) {
        let n = stdout.read(&mut buf).expect("read");
        assert!(n > 0, "the relay closed early");
        total += n;
    }
    let elapsed = start.elapsed();
    let hwm = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0);
    drop(writer.join());
    let _ = child.wait();
    (elapsed, hwm)
}

/// The baseline: copy stdin to the child and the child's stdout to stdout, nothing else.
fn relay(cmd: &[OsString]) {
    let mut child = spawn(cmd);
    let mut to_child = child.stdin.take().expect("stdin");
    let mut from_child = child.stdout.take().expect("stdout");
    let up = thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to_child.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
    });
    let mut stdout = std::io::stdout().lock();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match from_child.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if stdout
                    .write_all(&buf[..n])
                    .and_then(|_| stdout.flush())
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    let _ = up.join();
    let _ = child.wait();
}

/// Deterministic pseudo-random numbers (xorshift64*), so every corpus is the same in every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }
}

/// `unit` repeated (with a counter, so repeats are not identical) to at least `size` bytes.
fn repeat_to(size: usize, mut unit: impl FnMut(usize) -> String) -> String {
    let mut out = String::with_capacity(size + 4096);
    let mut i = 0;
    while out.len() < size {
        out.push_str(&unit(i));
        i += 1;
    }
    out
}

/// The corpora of the content checks' benchmark (issue 34): realistic texts a tool returns, and
/// hostile ones built to make a scanner slow (near-misses of every shape, many candidates).
fn scanner_corpora(size: usize) -> Vec<(&'static str, bool, String)> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let source = concat!(
        include_str!("../crates/mcpguard-core/src/wire/envelope.rs"),
        include_str!("../crates/mcpguard-core/src/gate/session/results.rs"),
        include_str!("../crates/mcpguard-core/src/gate/content.rs"),
    );
    let code = repeat_to(size, |_| source.to_string());
    let words = [
        "the",
        "build",
        "parser",
        "release",
        "token",
        "secret",
        "basic",
        "a",
        "of",
        "and",
        "configuration",
        "server",
        "request",
        "bearer",
        "risk-free",
        "task-list",
        "shelf_life",
    ];
    let html = repeat_to(size, |i| {
        format!(
            "<div class=\"card\" id=\"item-{i}\"><h2><a href=\"https://example.com/docs/{i}?ref=nav\">{} {}</a></h2>\
             <p>{} {} {} <code>--max-depth</code> {} <img src=\"/static/img/{i}.png\" alt=\"\"></p>\
             <script src=\"https://cdn.example.net/lib-{i}.js\" integrity=\"sha384-{}\"></script></div>\n",
            rng.pick(&words), rng.pick(&words), rng.pick(&words), rng.pick(&words), rng.pick(&words),
            rng.pick(&words), rng.next()
        )
    });
    let json = repeat_to(size, |i| {
        format!(
            "{{\"id\":{i},\"name\":\"{} {}\",\"email\":\"user{i}@example.org\",\"url\":\"https://api.example.com/v1/items/{i}\",\
             \"created\":\"2026-12-03T17:{:02}:00Z\",\"tags\":[\"{}\",\"{}\"],\"score\":{}.{}}},\n",
            rng.pick(&words), rng.pick(&words), i % 60, rng.pick(&words), rng.pick(&words),
            rng.next() % 100, rng.next() % 1000
        )
    });
    let prose = repeat_to(size, |_| {
        let n = 8 + (rng.next() % 12) as usize;
        let mut sentence: Vec<&str> = (0..n).map(|_| rng.pick(&words)).collect();
        sentence.push("finished.\n");
        sentence.join(" ")
    });
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let base64 = repeat_to(size, |_| {
        let mut line: String = (0..76)
            .map(|_| B64[(rng.next() % 64) as usize] as char)
            .collect();
        line.push('\n');
        line
    });
    let near = repeat_to(size, |i| {
        format!(
            "AKIA{:015} ghp_{:035} -----BEGIN RSA PRIVATE KEY---- eyJhbGciOiJIUzI1.eyJzdWIi Bearer abc \
             Basic dXNlcg sk-ant-api0 xoxb-12345- glpat-short aws_secret_access_key=\"{:039}\" \
             postgres://user:pass host https://hooks.slack.com/services/T0 AIza{:034}! npm_{:035}\n",
            i, i, i, i, i
        )
    });
    let anchors = repeat_to(size, |_| {
        "://sk-eyJhf_npm_Basic earer ecret AKIA".to_string()
    });
    let colons = repeat_to(size, |_| "a://".to_string());
    // Private-key headers without END lines: each header's whole-pattern search scanned to the
    // end of the text for an END line (quadratic) before the shape ran as its parts.
    let headers = repeat_to(size, |_| "-----BEGIN PRIVATE KEY-----\nMIIB\n".to_string());
    vec![
        ("source code", true, code),
        ("HTML page", true, html),
        ("JSON records", true, json),
        ("prose", true, prose),
        ("base64 blobs", true, base64),
        ("near-misses of every shape", false, near),
        ("candidate anchors back to back", false, anchors),
        ("one anchor over and over (a://)", false, colons),
        ("private-key headers, no END line", false, headers),
    ]
}

/// The secret scanner's throughput (MB/s) over each corpus, and the whole in-process result
/// check (parse excluded: the quick test of the raw JSON, redaction, labels) with the default
/// policy, each over one string of 1 MiB; then a deeply nested result.
fn scanner_cost(quick: bool) {
    use mcpguard::gate::content::Content;
    let size = 1 << 20;
    let rounds = if quick { 3 } else { 15 };
    let content = Content::default();
    let detector = &content.secrets;
    println!();
    println!("content checks (issue 34), in process, 1 MiB per corpus, default policy, best of {rounds}:");
    println!(
        "{:<36} {:>16} {:>22}",
        "corpus", "secrets MB/s", "result checks MB/s"
    );
    for (what, realistic, text) in scanner_corpora(size) {
        let mb = text.len() as f64 / 1e6;
        let mut best_find = f64::MAX;
        let mut best_all = f64::MAX;
        let raw = serde_json::to_string(&serde_json::json!({
            "content": [{"type": "text", "text": text}],
        }))
        .expect("json");
        let value: serde_json::Value = serde_json::from_str(&raw).expect("json");
        for _ in 0..rounds {
            let start = Instant::now();
            std::hint::black_box(detector.find(std::hint::black_box(&text)));
            best_find = best_find.min(start.elapsed().as_secs_f64());
            let mut v = value.clone();
            let start = Instant::now();
            if content.result_may_hold_secrets(&raw) {
                std::hint::black_box(content.redact_result(&mut v));
            }
            std::hint::black_box(content.label_result(&mut v));
            best_all = best_all.min(start.elapsed().as_secs_f64());
        }
        println!(
            "{:<36} {:>16.0} {:>22.0}{}",
            what,
            mb / best_find,
            mb / best_all,
            if realistic { "" } else { "  (adversarial)" }
        );
    }
    // Deep JSON: 100 levels of objects, each with a few strings (serde_json's own limit is 128).
    let mut deep = serde_json::json!({"leaf": "the end of the road https://example.com/x"});
    for i in 0..100 {
        deep = serde_json::json!({
            format!("level{i}"): deep,
            "note": "sk-basic eyJ token://x risk-free",
            "list": ["a", "bb", "Bearer short", i],
        });
    }
    let raw = serde_json::to_string(&deep).expect("json");
    let mut best = f64::MAX;
    for _ in 0..rounds * 20 {
        let mut v = deep.clone();
        let start = Instant::now();
        if content.result_may_hold_secrets(&raw) {
            std::hint::black_box(content.redact_result(&mut v));
        }
        std::hint::black_box(content.label_result(&mut v));
        best = best.min(start.elapsed().as_secs_f64());
    }
    println!(
        "{:<36} {:>16} {:>22.0}  (adversarial; {} bytes, {:.1} µs)",
        "deep JSON, 100 levels",
        "-",
        raw.len() as f64 / 1e6 / best,
        raw.len(),
        best * 1e6
    );
}

/// A tools/call of the benchmark: the fixture's echo mode answers it with `bytes` of prose.
fn call_request(id: usize, bytes: usize) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"bytes\":{bytes},\"note\":\"hello from the benchmark\"}}}}}}\n").into_bytes()
}

/// Starts `cmd` (a path to the fixture's echo mode) and completes the MCP handshake.
fn start_session(
    cmd: &[OsString],
) -> (
    Child,
    std::process::ChildStdin,
    BufReader<std::process::ChildStdout>,
) {
    let mut child = spawn_with(cmd, Stdio::null());
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::with_capacity(1 << 16, child.stdout.take().expect("stdout"));
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}\n")
        .expect("write");
    let mut line = Vec::new();
    stdout.read_until(b'\n', &mut line).expect("read");
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .expect("write");
    (child, stdin, stdout)
}

/// The added latency of a result with the content checks (issue 34): tools/call answered with 1
/// KiB, 64 KiB and 1 MiB of prose through the pipe relay, mcpguard with the default policy and
/// mcpguard with the content checks off, the three sessions open at once and the calls
/// interleaved (a shared machine moves by tens of percent from minute to minute); then
/// pipelined 1 KiB calls, the three paths in interleaved rounds.
fn result_figures(me: &Path, mcpguard: &Path, fixture: &Path, quick: bool) {
    let dir = std::env::temp_dir().join(format!("mcpguard-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let off = dir.join("off.toml");
    // Calls of an unreviewed tool need a person's approval by default; the benchmark has none
    // to give, so both policies forward them (the content checks do not depend on it).
    let on = dir.join("on.toml");
    std::fs::write(&on, "[confirmation]\nmode = \"allow\"\n").expect("policy");
    std::fs::write(
        &off,
        "[confirmation]\nmode = \"allow\"\n\n[secrets]\nresults = \"off\"\narguments = \"off\"\n\n[results]\ninjection = \"off\"\n",
    )
    .expect("policy");
    let echo: Vec<OsString> = vec![fixture.into(), "--echo-bench".into()];
    let paths: Vec<(&str, Vec<OsString>)> = vec![
        (
            "pipe relay",
            [vec![me.into(), "relay".into(), "--".into()], echo.clone()].concat(),
        ),
        (
            "checks off",
            [
                vec![
                    mcpguard.into(),
                    "--allow-unpinned".into(),
                    "--policy".into(),
                    off.clone().into(),
                    "--".into(),
                ],
                echo.clone(),
            ]
            .concat(),
        ),
        (
            "default",
            [
                vec![
                    mcpguard.into(),
                    "--allow-unpinned".into(),
                    "--policy".into(),
                    on.clone().into(),
                    "--".into(),
                ],
                echo.clone(),
            ]
            .concat(),
        ),
    ];
    println!();
    println!("tools/call results through the binary (issue 34), p50 µs, the three paths interleaved call by call:");
    println!(
        "{:<10} {:>12} {:>12} {:>12} {:>14} {:>14}",
        "result", "pipe relay", "checks off", "default", "default - off", "off - relay"
    );
    for (bytes, n) in [(1usize << 10, 4000usize), (64 << 10, 600), (1 << 20, 60)] {
        let n = if quick { n / 5 } else { n };
        let mut sessions: Vec<_> = paths.iter().map(|(_, cmd)| start_session(cmd)).collect();
        let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(n); sessions.len()];
        let mut line = Vec::with_capacity(bytes + 256);
        for i in 0..n + n / 10 {
            for (k, (_, stdin, stdout)) in sessions.iter_mut().enumerate() {
                let req = call_request(i + 1, bytes);
                let start = Instant::now();
                stdin.write_all(&req).expect("write");
                line.clear();
                stdout.read_until(b'\n', &mut line).expect("read");
                if i >= n / 10 {
                    samples[k].push(start.elapsed().as_secs_f64() * 1e6);
                }
                assert!(
                    line.len() > bytes,
                    "{}: short answer {:?}",
                    paths[k].0,
                    String::from_utf8_lossy(&line[..line.len().min(300)])
                );
            }
        }
        for (mut child, stdin, _) in sessions {
            drop(stdin);
            let _ = child.wait();
        }
        let p50: Vec<f64> = samples
            .iter_mut()
            .map(|s| {
                s.sort_by(|a, b| a.total_cmp(b));
                s[s.len() / 2]
            })
            .collect();
        println!(
            "{:<10} {:>12.1} {:>12.1} {:>12.1} {:>+14.1} {:>+14.1}",
            format!("{} KiB", bytes >> 10),
            p50[0],
            p50[1],
            p50[2],
            p50[2] - p50[1],
            p50[1] - p50[0]
        );
    }
    let total = if quick { 20_000 } else { 100_000 };
    let rounds = if quick { 3 } else { 5 };
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    for _ in 0..rounds {
        for (k, (what, cmd)) in paths.iter().enumerate() {
            let (rate, errors) = windowed_calls(cmd, total, IN_FLIGHT);
            // A refusal is answered faster than a call: a path that refused any call is not
            // measuring the call path at all, so the figure would flatter it.
            assert_eq!(
                errors, 0,
                "{what}: {errors} of {total} pipelined calls were refused"
            );
            rates[k].push(rate);
        }
    }
    let median: Vec<f64> = rates
        .iter_mut()
        .map(|r| {
            r.sort_by(|a, b| a.total_cmp(b));
            r[r.len() / 2]
        })
        .collect();
    println!(
        "pipelined 1 KiB tools/call results, {total} calls, {IN_FLIGHT} in flight, median of {rounds} interleaved rounds: pipe relay {:.0}/s, checks off {:.0}/s, default {:.0}/s; default / pipe relay {:.2}x (target >= 0.8x), off / pipe relay {:.2}x",
        median[0], median[1], median[2], median[2] / median[0], median[1] / median[0]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// How many calls the pipelined benchmark keeps in flight: a host with many calls out at once,
/// under mcpguard's default `limits.max_calls_in_flight` (64), which refuses calls past it.
const IN_FLIGHT: usize = 32;

/// Sends `total` 1 KiB tools/call requests through `cmd` with at most `window` unanswered at any
/// time (each write carries as many requests as the window has room for), and reads every
/// answer. Returns the answers per second and how many answers were errors (a refused call).
fn windowed_calls(cmd: &[OsString], total: usize, window: usize) -> (f64, usize) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let (mut child, mut stdin, mut stdout) = start_session(cmd);
    let answered = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let writer = {
        let answered = Arc::clone(&answered);
        thread::spawn(move || {
            let mut sent = 0;
            let mut buf = Vec::with_capacity(window * 200);
            while sent < total {
                let room = (answered.load(Ordering::Acquire) + window).saturating_sub(sent);
                if room == 0 {
                    thread::park_timeout(Duration::from_millis(1));
                    continue;
                }
                buf.clear();
                for i in sent..(sent + room).min(total) {
                    buf.extend_from_slice(&call_request(i + 1, 1024));
                }
                sent = (sent + room).min(total);
                stdin.write_all(&buf).expect("write");
            }
            stdin
        })
    };
    let mut line = Vec::new();
    let mut errors = 0;
    for _ in 0..total {
        line.clear();
        stdout.read_until(b'\n', &mut line).expect("read");
        assert!(!line.is_empty(), "the server stopped answering");
        if is_error_answer(&line) {
            errors += 1;
        }
        answered.fetch_add(1, Ordering::Release);
        writer.thread().unpark();
    }
    let rate = total as f64 / start.elapsed().as_secs_f64();
    drop(writer.join());
    let _ = child.wait();
    (rate, errors)
}

/// Whether an answer is an error: a JSON-RPC error or a tool error result.
fn is_error_answer(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"\"error\":").is_some()
        || memchr::memmem::find(line, b"\"isError\":true").is_some()
}
