#!/usr/bin/env bash
# Builds mcpguard, the fixture server and the benchmark in release mode, then prints the
# proxy figures side by side with their baselines. Pass --quick for a shorter run.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bins --examples
exec target/release/examples/bench "$@"
