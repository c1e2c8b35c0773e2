#!/usr/bin/env bash
# Time from launch to the first `initialize` answer for package-runner servers: the runner as a
# host would start it without mcpguard (`npx -y PKG@V`, `uvx PKG==V`: a registry round trip on
# every start), against mcpguard running the pinned install of the same package under the
# default sandbox. Prints the median and the spread of N runs of each, and the ratio.
#
# Needs the npm registry and PyPI for the direct runs (and for the first capture); the pinned
# runs are offline. Usage: scripts/bench-launch.sh [RUNS]   (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
cargo build --release --locked --bins >&2
scripts/install-peers.sh >/dev/null 2>&1
M=$PWD/target/release/mcpguard
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export MCPGUARD_PACKAGE_DIR=$WORK/store
export PATH=$PWD/.peers/uv/bin:$PATH
export npm_config_update_notifier=false

NPX_PKG=@modelcontextprotocol/server-memory@2026.8.31
UVX_PKG=mcp-server-time==2026.10.19

capture() { # KEY, then the server command
    local key=$1
    shift
    "$M" capture --server "$key" --out "$WORK/$key.json" -- "$@" >"$WORK/$key.digest" 2>"$WORK/$key.log" ||
        { cat "$WORK/$key.log" >&2; exit 1; }
}
capture npx npx -y "$NPX_PKG"
capture uvx uvx "$UVX_PKG"

python3 - "$RUNS" "$M" "$WORK" "$NPX_PKG" "$UVX_PKG" <<'EOF'
import json, os, statistics, subprocess, sys, time
runs, m, work, npx_pkg, uvx_pkg = sys.argv[1:]
runs = int(runs)
init = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "bench-launch", "version": "0"}}}) + "\n"

def first_answer(cmd):
    start = time.monotonic()
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write(init.encode()); p.stdin.flush()
    line = p.stdout.readline()
    took = time.monotonic() - start
    p.stdin.close(); p.wait(timeout=30)
    if not line or "result" not in json.loads(line):
        sys.exit(f"no initialize answer from {cmd}")
    return took * 1000

def pinned(key, server):
    digest = open(f"{work}/{key}.digest").read().split()[-1]
    return [m, "--manifest", f"{work}/{key}.json", "--sha256", digest, "--server", key, "--", *server]

cases = [
    ("npx -y " + npx_pkg, ["npx", "-y", npx_pkg], pinned("npx", ["npx", "-y", npx_pkg])),
    ("uvx " + uvx_pkg, ["uvx", uvx_pkg], pinned("uvx", ["uvx", uvx_pkg])),
]
print(f"launch to first initialize answer, median of {runs} runs (min-max), ms")
print(f"{'server':52} {'direct runner':>22} {'mcpguard, pinned':>22} {'ratio':>7}")
for name, direct, guarded in cases:
    d = [first_answer(direct) for _ in range(runs)]
    g = [first_answer(guarded) for _ in range(runs)]
    fmt = lambda xs: f"{statistics.median(xs):.0f} ({min(xs):.0f}-{max(xs):.0f})"
    print(f"{name:52} {fmt(d):>22} {fmt(g):>22} {statistics.median(g)/statistics.median(d):>6.2f}x")
EOF
