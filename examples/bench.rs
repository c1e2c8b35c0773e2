//! The proxy benchmark: latency and throughput of small JSON-RPC messages through
//! (a) a direct connection to a fast echo server, (b) a minimal pipe relay and (c) mcpguard,
//! measured side by side in one run, plus peak memory relaying 64 MiB messages.
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

    println!(
        "mcpguard proxy benchmark ({} round trips, {} pipelined messages)",
        round_trips, pipelined
    );
    println!("machine: {} cores, {}", cores(), cpu_model());
    println!();
    println!(
        "{:<12} {:>10} {:>10} {:>14}",
        "path", "p50 µs", "p99 µs", "msgs/s"
    );
    let mut results = Vec::new();
    for (name, cmd) in &configs {
        let lat = latency(cmd, round_trips);
        let tput = throughput(cmd, pipelined);
        println!(
            "{:<12} {:>10.1} {:>10.1} {:>14.0}",
            name, lat.0, lat.1, tput
        );
        results.push((name.to_string(), lat, tput));
    }
    let relay = &results[1];
    let guard = &results[2];
    println!();
    println!(
        "mcpguard / pipe relay: p50 latency {:.2}x, p99 latency {:.2}x, throughput {:.2}x (target: latency <= 1.3x, throughput >= 1/1.3)",
        guard.1 .0 / relay.1 .0,
        guard.1 .1 / relay.1 .1,
        guard.2 / relay.2
    );
    println!(
        "pipe relay / direct: p50 latency {:.2}x; mcpguard / direct: p50 latency {:.2}x",
        relay.1 .0 / results[0].1 .0,
        guard.1 .0 / results[0].1 .0
    );

    println!();
    let big = if quick { 16 << 20 } else { 64 << 20 };
    for (name, cmd) in [
        (
            "pipe relay",
            vec![
                me.clone().into_os_string(),
                "relay".into(),
                "--".into(),
                "cat".into(),
            ],
        ),
        (
            "mcpguard",
            vec![
                mcpguard.clone().into_os_string(),
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
    Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn")
}

fn request(id: usize) -> Vec<u8> {
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"hello\"}}}}}}\n").into_bytes()
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

/// `n` requests written by one thread while another reads the responses; messages per second.
fn throughput(cmd: &[OsString], n: usize) -> f64 {
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
    drop(writer.join());
    let _ = child.wait();
    n as f64 / elapsed.as_secs_f64()
}

/// Sends `count` messages of `size` bytes through the path with `cat` as the server; returns the
/// time taken and the peak RSS of the relaying process in KiB.
fn big_messages(cmd: &[OsString], size: usize, count: usize) -> (Duration, u64) {
    let mut child = spawn(cmd);
    let pid = child.id();
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut msg = br#"{"jsonrpc":"2.0","method":"notifications/big","params":{"pad":""#.to_vec();
    msg.resize(size - 3, b'x');
    msg.extend_from_slice(b"\"}}\n");
    let start = Instant::now();
    let writer = thread::spawn(move || {
        for _ in 0..count {
            stdin.write_all(&msg).expect("write");
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
