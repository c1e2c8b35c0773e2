#!/usr/bin/env bash
# The guided example: builds mcpguard and runs `mcpguard demo`, which captures, reviews and guards
# the example server built into mcpguard, playing the host and the person, and shows every step
# and the traffic. It exits non-zero when any step does not behave as shown.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --locked --quiet --bins
exec target/debug/mcpguard demo
