#!/usr/bin/env bash
# Scores mcpguard on the public benchmark of MCP defences, mcp-defense-bench 0.2.0 (PyPI), through
# the benchmark's own stdio-proxy harness: for every case it starts the bench's fixture server once
# directly and once through mcpguard (captured, every tool reviewed and classified as a read, the
# shipped default policy otherwise; see scripts/defense-bench/mcpguard_adapter.py) and compares
# the two runs. Prints the result per attack vector and the false-positive rate on the benign
# corpus. Runs offline: the corpora are vendored in the package.
#
#   scripts/defense-bench.sh            dev + benign corpora, the shipped defaults ("after")
#   scripts/defense-bench.sh before     the same with issue 16's checks turned off (the gate as
#                                       it was before: no closed arguments, secrets, argument
#                                       rules or result labels)
#   scripts/defense-bench.sh after dev  one profile, one corpus (dev or benign)
#   scripts/defense-bench.sh labels     the proxy's result checks run directly over the dev and
#                                       benign corpora (examples/label_bench.rs): seconds, not
#                                       the half hour the benign corpus takes through the proxy
#
# Needs .peers/defense-bench (scripts/install-peers.sh installs it). Results are written to
# target/defense-bench/<profile>/. MCPGUARD_BIN=path/to/mcpguard scores that binary instead of
# building a release one (a debug build scores the same; it is only slower).
#
# The bench's fixture server drops a result's `isError` (its FixtureTool returns the content
# only), so an error case reaches mcpguard as an ordinary result: the labeller reads error text
# by its shape too (`structure::error_shaped`), which is what counts false-error-escalation.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PEERS=${MCPGUARD_PEERS_DIR:-$ROOT/.peers}
BENCH=$PEERS/defense-bench/bin/mcp-defense-bench
PROFILE=${1:-after}
CORPORA=${2:-dev benign}
case "$PROFILE" in after | before | labels) ;; *) echo "defense-bench: profile is 'after', 'before' or 'labels', not '$PROFILE'" >&2; exit 2 ;; esac
[[ -x $BENCH ]] || "$ROOT/scripts/install-peers.sh"
if [[ $PROFILE == labels ]]; then
    CASES=$("$PEERS/defense-bench/bin/python" -c 'import mcp_defense_bench, pathlib; print(pathlib.Path(mcp_defense_bench.__file__).parent / "_bench")')
    cargo build --quiet --locked --example label_bench --manifest-path "$ROOT/Cargo.toml"
    for corpus in testcases testcases-benign; do
        echo "defense-bench: the proxy's result checks over $corpus" >&2
        "$ROOT/target/debug/examples/label_bench" "$CASES/$corpus"
    done
    exit 0
fi
if [[ -n ${MCPGUARD_BIN:-} ]]; then
    MCPGUARD=$(realpath "$MCPGUARD_BIN")
else
    cargo build --quiet --locked --release --bins --manifest-path "$ROOT/Cargo.toml"
    MCPGUARD=$ROOT/target/release/mcpguard
fi
OUT=$ROOT/target/defense-bench/$PROFILE
mkdir -p "$OUT"
export MCPGUARD MCPGUARD_BENCH_PROFILE=$PROFILE
export PYTHONPATH=$ROOT/scripts/defense-bench${PYTHONPATH:+:$PYTHONPATH}
for corpus in $CORPORA; do
    echo "defense-bench: scoring mcpguard-$PROFILE on the $corpus corpus (two process starts per case; minutes)" >&2
    "$BENCH" run mcpguard_adapter:ADAPTER --corpus "$corpus" --out-dir "$OUT" -q
done
"$PEERS/defense-bench/bin/python" - "$OUT" "mcpguard-$PROFILE" <<'PY'
import json, sys
from pathlib import Path
out, tool = Path(sys.argv[1]), sys.argv[2]
dev = out / f"{tool}.json"
if dev.is_file():
    d = json.loads(dev.read_text())
    s = d["summary"]
    print(f"dev corpus: {s['overall']}; vectors enforce {s['covered']['enforce']}, detect {s['covered']['detect']}, "
          f"none {s['covered']['none']}, not drivable by the stdio harness {s['covered']['unknown']}; "
          f"false positives on the benign controls {s['falsePositives']} of {s['casesRun']} cases")
    print(f"{'vector':40} {'level':8} {'coverage':>8} {'fixtures':>8}")
    for vid, c in sorted(d["coverage"].items()):
        if not c["verified"]:
            continue
        print(f"{vid:40} {c['level']:8} {c['robustCoverage']:>8} {c['fixtures']:>8}")
benign = out / "benign" / f"{tool}.json"
if benign.is_file():
    b = json.loads(benign.read_text())["summary"]
    print(f"benign corpus: {b['falsePositives']} false positives of {b['items']} cases, rate {b['fpRate']:.2%} "
          f"(95% CI {b['fpRate95ci']['lo']:.2%}-{b['fpRate95ci']['hi']:.2%})")
    for kind, k in sorted(b["byKind"].items()):
        if k["fp"]:
            print(f"  {kind}: {k['fp']} of {k['n']}")
PY
