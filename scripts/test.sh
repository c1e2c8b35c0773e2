#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs the pinned real MCP peers (Python SDK,
# TypeScript reference servers, Inspector CLI) into .peers/, builds the binary and the fixture
# server (an example), then runs every Rust test, including the interoperability tests that
# drive mcpguard with those peers. `--workspace`: the unit tests of every crate (crates/*) too.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-peers.sh
cargo build --locked --bins --examples
cargo test --locked --workspace
