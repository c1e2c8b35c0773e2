#!/usr/bin/env bash
# The published servers of the first-hour test (tests/integration/first_hour.rs, issue 33), as a
# new user's host configuration runs them: `uvx NAME ...` from PyPI. uv's cache is filled here,
# once, from the registry, so that the test runs `uvx` (and mcpguard's capture runs `uv pip
# install`) offline from it:
#
#   .peers/first-hour/uv-cache   uv's cache holding every pinned server and its dependencies
#   pandoc                       Debian's package: mcp-pandoc converts with the pandoc binary
#
# Called by scripts/install-peers.sh with the path of .peers and of the pinned uv; it can be run
# on its own the same way. Idempotent: a stamp keyed on this script's content skips the work when
# nothing changed. Every server is installed into a venv of its own, as `uvx` resolves each alone,
# so that each one's resolution is in the cache.
set -euo pipefail

PEERS=${1:?usage: install.sh PEERS_DIR UV_BIN [--force]}
UV_BIN=${2:?usage: install.sh PEERS_DIR UV_BIN [--force]}
FORCE=${3:-}
SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
log() { echo "install-peers (first hour): $*" >&2; }
die() {
    echo "install-peers (first hour): ERROR: $*" >&2
    exit 1
}

# The servers, pinned, each as `uvx` names it in a README. mcp-server-sqlite (last released
# 2025-04) declares `mcp>=1.0.0` but fails on mcp 2 (`Server` has no `list_resources`), so it runs
# as `uvx --with mcp==1.30.0 mcp-server-sqlite`: one line of the array is one venv.
SERVERS=(
    "mcp-server-sqlite==2025.4.25 mcp==1.30.0"
    excel-mcp-server==2.2.2
    mcp-pandoc==0.11.1
    mcp-server-motherduck==1.1.0
    mcp-server-fetch==2026.10.24
)

if ! command -v pandoc >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
        log "installing Debian's pandoc (mcp-pandoc runs it)"
        apt-get update -qq >&2 || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pandoc >&2 ||
            die "apt-get install pandoc failed"
    else
        die "pandoc is missing: install it (Debian: apt-get install pandoc)"
    fi
fi

DIR=$PEERS/first-hour
CACHE=$DIR/uv-cache
STAMP=$DIR/.mcpguard-peers-stamp
KEY=$(cat "$SELF" | sha256sum | cut -d' ' -f1)
if [[ $FORCE != --force && -f $STAMP && "$(cat "$STAMP")" == "$KEY" && -d $CACHE ]]; then
    log "up to date ($CACHE)"
    exit 0
fi
log "filling uv's cache $CACHE with ${SERVERS[*]}"
rm -rf "$DIR"
mkdir -p "$DIR"
for spec in "${SERVERS[@]}"; do
    warm=$DIR/warm
    rm -rf "$warm"
    "$UV_BIN" venv --quiet --cache-dir "$CACHE" "$warm" &&
        # shellcheck disable=SC2086 # a line may name two packages
        "$UV_BIN" pip install --quiet --cache-dir "$CACHE" --python "$warm/bin/python" $spec ||
        die "uv could not install $spec. Is PyPI reachable from here?"
done
rm -rf "$DIR/warm"
echo "$KEY" >"$STAMP"
log "done ($CACHE)"
