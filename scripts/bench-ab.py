#!/usr/bin/env python3
"""Pipelined throughput of several mcpguard binaries, interleaved in one loop.

On a shared machine the same binary's throughput moves by tens of percent from one minute to the
next, so comparing two builds from two runs of `scripts/bench.sh` says little. This runs 200,000
pipelined pings from a file through the fixture's echo mode directly, through the benchmark's
pipe relay, and through each binary given, round after round, and prints medians of the wall
time and of the CPU each path used (from wait4's rusage, which includes the fixture), with the
binary's own CPU estimated as its total less the direct run's.

Usage: scripts/bench-ab.py [--runs N] MCPGUARD [MCPGUARD ...]
Build first: cargo build --release --bins --examples
"""

import argparse
import os
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, "target", "release")
MESSAGES = 200_000


def run_once(cmd, requests):
    with open(requests, "rb") as stdin:
        start = time.perf_counter()
        child = subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        lines = 0
        while True:
            block = child.stdout.read(1 << 16)
            if not block:
                break
            lines += block.count(b"\n")
        _, _, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
    if lines != MESSAGES:
        raise SystemExit(f"{cmd[0]}: {lines} answers for {MESSAGES} requests")
    return wall * 1e3, (usage.ru_utime + usage.ru_stime) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()
    fixture = [os.path.join(RELEASE, "examples", "fixture_server"), "--echo-bench"]
    paths = {
        "direct": fixture,
        "pipe relay": [os.path.join(RELEASE, "examples", "bench"), "relay", "--"] + fixture,
    }
    for binary in args.binaries:
        paths[binary] = [binary, "--"] + fixture
    with tempfile.TemporaryDirectory() as tmp:
        requests = os.path.join(tmp, "requests.jsonl")
        with open(requests, "w") as out:
            for i in range(MESSAGES):
                out.write('{"jsonrpc":"2.0","id":%d,"method":"ping","params":{"name":"echo","arguments":{"text":"hello"}}}\n' % i)
        results = {name: ([], []) for name in paths}
        for _ in range(args.runs):
            for name, cmd in paths.items():
                wall, cpu = run_once(cmd, requests)
                results[name][0].append(wall)
                results[name][1].append(cpu)
    relay_wall = statistics.median(results["pipe relay"][0])
    direct_cpu = statistics.median(results["direct"][1])
    print(f"{MESSAGES} pipelined pings, {args.runs} interleaved rounds, medians")
    for name, (walls, cpus) in results.items():
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        own = cpu - direct_cpu
        print(
            f"{name}: wall {wall:.0f} ms, CPU {cpu:.0f} ms (own about {own:.0f} ms, "
            f"{own * 1e6 / MESSAGES:.0f} ns per pair), pipe relay wall / this {relay_wall / wall:.2f}x"
        )


if __name__ == "__main__":
    main()
