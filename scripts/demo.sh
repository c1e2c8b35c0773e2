#!/usr/bin/env bash
# The guided example: builds mcpguard and the bundled fixture server, then captures, reviews and
# checks a snapshot of it and runs it behind mcpguard with a scripted client, showing the traffic.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --quiet --bins --examples
exec target/debug/examples/demo
