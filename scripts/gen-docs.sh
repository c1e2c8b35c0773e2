#!/usr/bin/env bash
# Regenerates the man pages (man/*.1, man/*.5) and the shell completions (completions/) from the
# clap definitions in src/cli/flags.rs and from docs/policy.md and docs/manifest.md. Run it after
# changing a flag, a subcommand or those documents, and commit the result; the test suite fails
# while the committed files differ from what this writes.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo run --quiet --locked --example gen_docs -- .
