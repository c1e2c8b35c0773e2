#!/usr/bin/env bash
# Install the pinned real MCP peers (clients and servers) that mcpguard's
# interoperability tests run against, into <repo>/.peers (git-ignored):
#
#   .peers/venv        Python venv: mcp==2.3.0, mcp-server-time, mcp-server-fetch
#   .peers/node        npm ci of scripts/peers-npm/{package.json,package-lock.json}:
#                      server-everything, server-filesystem, inspector
#   .peers/hosts       npm ci of scripts/peers-hosts/{package.json,package-lock.json}:
#                      the real hosts the host tests drive (Gemini CLI, Claude Code,
#                      Codex)
#   .peers/uv          a venv with uv==0.13.9, for the `uv run --directory` launch-shape test
#   .peers/runner-cache  npm and uv caches holding the packages the npx/uvx pinning tests pin
#   .peers/first-hour  a uv cache holding the published servers of the first-hour test
#                      (scripts/peers-first-hour/install.sh: sqlite, excel, pandoc, duckdb, fetch)
#   .peers/defense-bench  a venv with mcp-defense-bench[fastmcp]==0.2.0, the public benchmark
#                      of MCP defences that scripts/defense-bench.sh scores mcpguard on
#   .peers/python3.13  CPython 3.13.5 built from the source tarball Debian ships (fast-agent
#                      needs Python >= 3.12; the machine's is 3.11, and uv's managed Pythons
#                      come from GitHub, which the registries-only network does not reach)
#   .peers/fast-agent  a venv on it with fast-agent-mcp==0.10.48, every dependency pinned by
#                      scripts/peers-fast-agent/constraints.txt: the fourth real host
#   .peers/paths.json  absolute command lines for each peer (read by the tests)
#
# It also makes sure dbus-daemon (the desktop-channel tests) and tmux (the host tests that
# drive a host's terminal interface) are there, from Debian's packages.
#
# Idempotent: each part carries a stamp keyed on the content hash of this script
# (and of the npm manifest/lockfile), so a second run only checks the stamps and
# prints the paths. Use --force to reinstall everything.
#
# Environment: PYTHON (interpreter for the venv, default python3), NODE (default
# node), MCPGUARD_PEERS_DIR (install location, default <repo>/.peers).
set -euo pipefail

SCRIPT_PATH=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
SCRIPT_DIR=$(dirname "$SCRIPT_PATH")
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
PEERS=${MCPGUARD_PEERS_DIR:-$ROOT/.peers}
NPM_SRC=$SCRIPT_DIR/peers-npm
HOSTS_SRC=$SCRIPT_DIR/peers-hosts
VENV=$PEERS/venv
NODE_DIR=$PEERS/node
HOSTS_DIR=$PEERS/hosts
PATHS_JSON=$PEERS/paths.json

# Pinned versions.
MCP_VERSION=2.3.0
TIME_VERSION=2026.10.19
FETCH_VERSION=2026.10.24
INSPECTOR_VERSION=2.12.0
GEMINI_VERSION=0.61.0
CLAUDE_VERSION=2.1.332
CODEX_VERSION=0.171.0

FORCE=0
for arg in "$@"; do
    case "$arg" in
        --force) FORCE=1 ;;
        -h | --help)
            sed -n '2,30p' "$SCRIPT_PATH" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        *)
            echo "install-peers: unknown argument: $arg (try --help)" >&2
            exit 2
            ;;
    esac
done

die() {
    echo "install-peers: ERROR: $*" >&2
    exit 1
}
log() { echo "install-peers: $*" >&2; }

# Full transitive pin set for the venv (pip freeze of a clean install on
# Python 3.11, 2026-11-29). Applied as constraints so the top-level pins above
# stay the source of truth.
PY_CONSTRAINTS='
annotated-types==0.8.0
anyio==4.16.0
attrs==26.1.0
beautifulsoup4==4.15.0
certifi==2026.10.19.post1
cffi==2.1.1
charset-normalizer==3.5.3
click==8.5.1
cryptography==50.0.2
h11==0.16.0
html5lib==1.1
httpcore==1.0.9
httpcore2==2.16.2
httpx==0.28.1
httpx2==2.16.2
idna==3.20
jsonschema==4.26.0
jsonschema-specifications==2025.9.1
lxml==6.1.3
markdownify==1.2.3
mcp-types==2.3.0
opentelemetry-api==1.45.2
Protego==0.7.0
pycparser==3.12
pydantic==2.14.4
pydantic_core==2.50.5
PyJWT==2.15.1
python-multipart==0.0.34
readabilipy==0.3.0
referencing==0.37.0
regex==2026.11.19
requests==2.34.2
rpds-py==2026.9.1
six==1.17.0
socksio==1.0.0
soupsieve==4.1.3
sse-starlette==3.7.0
starlette==1.10.0
truststore==0.10.5
typing-inspection==0.4.5
typing_extensions==4.16.0
tzdata==2026.6
tzlocal==5.4.5
urllib3==2.8.0
uvicorn==0.54.0
webencodings==0.6.1
'

# Debian packages the tests of signed reviews and of the system-log audit sinks run:
# ssh-keygen (openssh-client) signs and verifies reviews the other way round from mcpguard, and
# rsyslogd (rsyslog) receives the syslog sink's records on a private socket the test starts.
# Installed only when missing, and only where apt-get exists and we are root; elsewhere the
# message says what to install.
DEBIAN_PACKAGES=()
command -v ssh-keygen >/dev/null 2>&1 || DEBIAN_PACKAGES+=(openssh-client)
[[ -x /usr/sbin/rsyslogd ]] || command -v rsyslogd >/dev/null 2>&1 || DEBIAN_PACKAGES+=(rsyslog)
# tmux plays the person at a host's full-screen terminal interface (tests/integration/support/tmux.rs).
command -v tmux >/dev/null 2>&1 || DEBIAN_PACKAGES+=(tmux)
# The sandbox preset test (tests/integration/escape.rs) runs the system's /usr/bin/python3.
[[ -x /usr/bin/python3 ]] || DEBIAN_PACKAGES+=(python3)
# The trusted approval path's real-components test (tests/integration/polkit.rs) runs polkitd
# (with pkttyagent and the setuid polkit-agent-helper-1) on a private system bus.
[[ -x /usr/lib/polkit-1/polkitd ]] && command -v pkttyagent >/dev/null 2>&1 || DEBIAN_PACKAGES+=(polkitd)
# What building CPython for fast-agent needs (see "CPython 3.13" below): a compiler, make, and
# the headers of the standard library's C modules that fast-agent and its dependencies import.
command -v cc >/dev/null 2>&1 || DEBIAN_PACKAGES+=(gcc)
command -v make >/dev/null 2>&1 || DEBIAN_PACKAGES+=(make)
command -v xz >/dev/null 2>&1 || DEBIAN_PACKAGES+=(xz-utils)
command -v curl >/dev/null 2>&1 || DEBIAN_PACKAGES+=(curl)
if command -v dpkg-query >/dev/null 2>&1; then
    for pkg in libssl-dev libffi-dev zlib1g-dev libsqlite3-dev libbz2-dev liblzma-dev libreadline-dev; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || DEBIAN_PACKAGES+=("$pkg")
    done
fi
if ((${#DEBIAN_PACKAGES[@]})); then
    if command -v apt-get >/dev/null 2>&1 && [[ $(id -u) == 0 ]]; then
        log "installing Debian packages: ${DEBIAN_PACKAGES[*]}"
        apt-get update -qq >&2 || die "apt-get update failed"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${DEBIAN_PACKAGES[@]}" >&2 || die "apt-get install ${DEBIAN_PACKAGES[*]} failed"
    else
        die "missing ${DEBIAN_PACKAGES[*]}: install them (Debian: apt-get install ${DEBIAN_PACKAGES[*]})"
    fi
fi

PYTHON=${PYTHON:-python3}
NODE=${NODE:-node}
command -v "$PYTHON" >/dev/null 2>&1 || die "'$PYTHON' not found (set PYTHON=/path/to/python3.10+)"
command -v "$NODE" >/dev/null 2>&1 || die "'$NODE' not found (Node.js 20 or newer is required)"
command -v npm >/dev/null 2>&1 || die "'npm' not found"
NODE_ABS=$(command -v "$NODE")
NODE_ABS=$(readlink -f "$NODE_ABS")
# The desktop-channel tests start a private session bus (tests/integration/desktop.rs): Debian's
# dbus package provides dbus-daemon.
if ! command -v dbus-daemon >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "'dbus-daemon' not found: install your distribution's dbus package"
    [[ $(id -u) -eq 0 ]] || die "'dbus-daemon' not found: run 'sudo apt-get install dbus' (or this script as root)"
    echo "install-peers: installing Debian's dbus package (dbus-daemon) for the desktop-channel tests"
    apt-get update -qq || die "apt-get update failed: the Debian package registry cannot be reached"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends dbus >/dev/null ||
        die "apt-get install dbus failed"
fi
[[ -f $NPM_SRC/package.json && -f $NPM_SRC/package-lock.json ]] ||
    die "missing $NPM_SRC/package.json or package-lock.json"
[[ -f $HOSTS_SRC/package.json && -f $HOSTS_SRC/package-lock.json ]] ||
    die "missing $HOSTS_SRC/package.json or package-lock.json"

hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }
PY_KEY=$(printf '%s\n%s\n' "$(hash_of "$SCRIPT_PATH")" "$("$PYTHON" -c 'import sys; print(sys.version)')" | sha256sum | cut -d' ' -f1)
NODE_KEY=$(printf '%s\n%s\n' "$(hash_of "$SCRIPT_PATH" "$NPM_SRC/package.json" "$NPM_SRC/package-lock.json")" \
    "$("$NODE_ABS" --version)" | sha256sum | cut -d' ' -f1)
HOSTS_KEY=$(printf '%s\n%s\n' "$(hash_of "$SCRIPT_PATH" "$HOSTS_SRC/package.json" "$HOSTS_SRC/package-lock.json")" \
    "$("$NODE_ABS" --version)" | sha256sum | cut -d' ' -f1)
PY_STAMP=$VENV/.mcpguard-peers-stamp
NODE_STAMP=$NODE_DIR/.mcpguard-peers-stamp
HOSTS_STAMP=$HOSTS_DIR/.mcpguard-peers-stamp

# Paths of every entry point (checked after install and on the fast path).
SE_JS=$NODE_DIR/node_modules/@modelcontextprotocol/server-everything/dist/index.js
FS_JS=$NODE_DIR/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js
INSPECTOR_JS=$NODE_DIR/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js
GEMINI_JS=$HOSTS_DIR/node_modules/@google/gemini-cli/bundle/gemini.js
# Claude Code's package puts a placeholder at bin/claude.exe that its postinstall replaces with
# the native binary of the platform package; with install scripts off, the platform package's
# binary is run directly (it needs no Node.js, and the wrapper package wants Node >= 22).
# npm installs only the platform package that matches this machine (and its libc), so the one
# present is the one to run.
find_claude() {
    local found
    found=$(ls -d "$HOSTS_DIR"/node_modules/@anthropic-ai/claude-code-*/claude 2>/dev/null | head -n1 || true)
    echo "${found:-$HOSTS_DIR/node_modules/@anthropic-ai/claude-code-PLATFORM/claude}"
}
CLAUDE_BIN=$(find_claude)
# Codex's launcher script finds the native binary in its platform package and needs no install
# script; it runs on Node 20.
CODEX_JS=$HOSTS_DIR/node_modules/@openai/codex/bin/codex.js
PY_BIN=$VENV/bin/python
TIME_BIN=$VENV/bin/mcp-server-time
FETCH_BIN=$VENV/bin/mcp-server-fetch

stamp_ok() { [[ $FORCE == 0 && -f $1 && "$(cat "$1")" == "$2" ]]; }

# npm_ci_into DIR SRC WHAT: a fresh `npm ci` of SRC's package.json and lockfile into DIR, with
# install scripts off and bounded retries; on failure DIR is removed and the script stops.
npm_ci_into() {
    rm -rf "$1"
    mkdir -p "$1"
    cp "$2/package.json" "$2/package-lock.json" "$1/"
    if ! (cd "$1" && npm ci --no-audit --no-fund --ignore-scripts \
        --fetch-retries=2 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=10000 \
        --fetch-timeout=60000 --loglevel=error >&2); then
        rm -rf "$1"
        die "npm ci could not install $3. Is the npm registry reachable from here?
  npm registry: $(npm config get registry 2>/dev/null || echo unknown)
  Re-run this script once the registry answers."
    fi
}

START=$(date +%s)
mkdir -p "$PEERS"
changed=0

# --- Python venv -------------------------------------------------------------
if stamp_ok "$PY_STAMP" "$PY_KEY" && [[ -x $PY_BIN && -x $TIME_BIN && -x $FETCH_BIN ]]; then
    log "python peers up to date ($VENV)"
else
    changed=1
    "$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' ||
        die "$PYTHON is $("$PYTHON" --version 2>&1); mcp $MCP_VERSION needs Python >= 3.10"
    log "creating venv $VENV with $("$PYTHON" --version 2>&1)"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
    constraints=$(mktemp)
    trap 'rm -f "$constraints"' EXIT
    printf '%s' "$PY_CONSTRAINTS" >"$constraints"
    log "pip install mcp==$MCP_VERSION mcp-server-time==$TIME_VERSION mcp-server-fetch==$FETCH_VERSION"
    if ! "$PY_BIN" -m pip install --disable-pip-version-check --no-input --quiet \
        --timeout 30 --retries 2 -c "$constraints" \
        "mcp==$MCP_VERSION" "mcp-server-time==$TIME_VERSION" "mcp-server-fetch==$FETCH_VERSION"; then
        rm -rf "$VENV"
        die "pip could not install the pinned Python peers. Is PyPI reachable from here?
  pip index: ${PIP_INDEX_URL:-$("$PYTHON" -m pip config get global.index-url 2>/dev/null || echo 'default (https://pypi.org/simple)')}
  Re-run this script once the registry answers."
    fi
    echo "$PY_KEY" >"$PY_STAMP"
fi

# --- uv (for the `uv run --directory` launch shape) ----------------------------
# A venv of its own, so that the tests' `uv` is exactly this pinned release and the python peers'
# venv stays what the interop tests expect.
UV_VERSION=0.13.9
UV_VENV=$PEERS/uv
UV_BIN=$UV_VENV/bin/uv
UV_STAMP=$UV_VENV/.mcpguard-peers-stamp
if stamp_ok "$UV_STAMP" "$PY_KEY" && [[ -x $UV_BIN ]]; then
    log "uv up to date ($UV_BIN)"
else
    changed=1
    log "pip install uv==$UV_VERSION into $UV_VENV"
    rm -rf "$UV_VENV"
    "$PYTHON" -m venv "$UV_VENV"
    "$UV_VENV/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
        --timeout 30 --retries 2 "uv==$UV_VERSION" ||
        die "pip could not install uv==$UV_VERSION. Is PyPI reachable from here?"
    echo "$PY_KEY" >"$UV_STAMP"
fi

# --- package-runner caches (for the npx/uvx pinning tests) -----------------------
# The tests capture `npx -y PKG@V` and `uvx PKG==V` with npm and uv told to work offline from
# these caches, so they prove that the pinned install runs without a registry and do not depend
# on one at test time. Filling them is the only step that needs the registries.
MEMORY_VERSION=2026.8.31
MEMORY_PREVIOUS=2026.7.4
THINKING_VERSION=2026.8.31
GIT_VERSION=2026.10.19
RUNNER_CACHE=$PEERS/runner-cache
RUNNER_STAMP=$RUNNER_CACHE/.mcpguard-peers-stamp
RUNNER_KEY="$PY_KEY memory=$MEMORY_VERSION,$MEMORY_PREVIOUS thinking=$THINKING_VERSION time=$TIME_VERSION git=$GIT_VERSION"
if stamp_ok "$RUNNER_STAMP" "$RUNNER_KEY"; then
    log "package-runner caches up to date ($RUNNER_CACHE)"
else
    log "filling the npm and uv caches in $RUNNER_CACHE"
    rm -rf "$RUNNER_CACHE"
    mkdir -p "$RUNNER_CACHE/warm-npm"
    (cd "$RUNNER_CACHE/warm-npm" && npm install --prefix . --cache "$RUNNER_CACHE/npm" \
        --no-audit --no-fund --ignore-scripts --loglevel=error \
        "@modelcontextprotocol/server-memory@$MEMORY_VERSION" \
        "@modelcontextprotocol/server-sequential-thinking@$THINKING_VERSION" >/dev/null &&
        npm install --prefix . --cache "$RUNNER_CACHE/npm" --no-audit --no-fund --ignore-scripts \
            --loglevel=error "@modelcontextprotocol/server-memory@$MEMORY_PREVIOUS" >/dev/null) ||
        die "npm could not fill the package-runner cache. Is the npm registry reachable from here?"
    "$UV_BIN" venv --quiet --cache-dir "$RUNNER_CACHE/uv" "$RUNNER_CACHE/warm-uv" &&
        "$UV_BIN" pip install --quiet --cache-dir "$RUNNER_CACHE/uv" \
            --python "$RUNNER_CACHE/warm-uv/bin/python" "mcp-server-time==$TIME_VERSION" \
            "mcp-server-git==$GIT_VERSION" ||
        die "uv could not fill the package-runner cache. Is PyPI reachable from here?"
    rm -rf "$RUNNER_CACHE/warm-npm" "$RUNNER_CACHE/warm-uv"
    echo "$RUNNER_KEY" >"$RUNNER_STAMP"
fi

# --- the first hour's published servers (tests/integration/first_hour.rs) ----------------
# uv's cache filled with the pinned PyPI servers a new user's configuration runs with `uvx`, and
# Debian's pandoc; its own script, stamp and folder (.peers/first-hour).
"$SCRIPT_DIR/peers-first-hour/install.sh" "$PEERS" "$UV_BIN" "$([[ $FORCE == 1 ]] && echo --force)" ||
    die "installing the first hour's servers failed (see above)"

# --- CPython 3.13 and fast-agent ----------------------------------------------
# fast-agent needs Python >= 3.12. The machine has 3.11 and Debian 12 ships no newer one; uv's
# managed Pythons download from GitHub, which is not one of the registries this project may
# reach. Debian's own archive is: it serves the upstream source tarball of its python3.13
# package (the `.orig.tar.xz` is python.org's release tarball, byte for byte), pinned here by its
# SHA-256. It is built without optimisation passes (a plain ./configure; about 3 minutes on 2
# cores) into a folder of its own, keyed on the tarball, so changes to this script do not build
# it again.
PY313_VERSION=3.13.5
PY313_SHA256=93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
PY313_URL=$DEBIAN_MIRROR/pool/main/p/python3.13/python3.13_$PY313_VERSION.orig.tar.xz
PY313_DIR=$PEERS/python3.13
PY313_BIN=$PY313_DIR/bin/python3.13
PY313_STAMP=$PY313_DIR/.mcpguard-peers-stamp
PY313_KEY="$PY313_VERSION $PY313_SHA256"
if stamp_ok "$PY313_STAMP" "$PY313_KEY" && [[ -x $PY313_BIN ]]; then
    log "CPython $PY313_VERSION up to date ($PY313_BIN)"
else
    changed=1
    log "building CPython $PY313_VERSION from $PY313_URL into $PY313_DIR"
    rm -rf "$PY313_DIR"
    py313_src=$(mktemp -d)
    curl -fsS --retry 2 --max-time 300 -o "$py313_src/python.tar.xz" "$PY313_URL" ||
        die "could not download $PY313_URL. Is Debian's archive reachable from here? (set DEBIAN_MIRROR to use another mirror)"
    echo "$PY313_SHA256  $py313_src/python.tar.xz" | sha256sum -c --quiet - ||
        die "$PY313_URL does not have the pinned SHA-256 $PY313_SHA256"
    tar -xJf "$py313_src/python.tar.xz" -C "$py313_src"
    if ! (cd "$py313_src/Python-$PY313_VERSION" &&
        ./configure --prefix="$PY313_DIR" --without-ensurepip --disable-test-modules >"$py313_src/build.log" 2>&1 &&
        make -j"$(nproc)" >>"$py313_src/build.log" 2>&1 &&
        make install >>"$py313_src/build.log" 2>&1); then
        tail -n 30 "$py313_src/build.log" >&2
        rm -rf "$PY313_DIR"
        die "building CPython $PY313_VERSION failed (the end of its log is above; the whole log is $py313_src/build.log)"
    fi
    "$PY313_BIN" -c 'import ssl, sqlite3, ctypes, lzma, bz2, zlib, readline' ||
        die "CPython $PY313_VERSION was built without a module fast-agent needs (install the -dev packages listed above)"
    rm -rf "$py313_src"
    echo "$PY313_KEY" >"$PY313_STAMP"
fi

FA_VERSION=0.10.48
FA_VENV=$PEERS/fast-agent
FA_BIN=$FA_VENV/bin/fast-agent
FA_STAMP=$FA_VENV/.mcpguard-peers-stamp
FA_CONSTRAINTS=$SCRIPT_DIR/peers-fast-agent/constraints.txt
FA_KEY=$(printf '%s\n%s\n' "$PY313_KEY" "$(hash_of "$FA_CONSTRAINTS")" | sha256sum | cut -d' ' -f1)
if stamp_ok "$FA_STAMP" "$FA_KEY" && [[ -x $FA_BIN ]]; then
    log "fast-agent up to date ($FA_BIN)"
else
    changed=1
    log "uv pip install fast-agent-mcp==$FA_VERSION into $FA_VENV"
    rm -rf "$FA_VENV"
    if ! "$UV_BIN" venv --quiet --python "$PY313_BIN" "$FA_VENV" ||
        ! "$UV_BIN" pip install --quiet --python "$FA_VENV/bin/python" -c "$FA_CONSTRAINTS" \
            "fast-agent-mcp==$FA_VERSION"; then
        rm -rf "$FA_VENV"
        die "uv could not install fast-agent-mcp==$FA_VERSION. Is PyPI reachable from here?"
    fi
    echo "$FA_KEY" >"$FA_STAMP"
fi

# --- mcp-defense-bench (scripts/defense-bench.sh) ----------------------------
# A venv of its own: the bench pulls fastmcp, whose dependencies must not move the interop
# tests' venv. Every package pinned (pip freeze of a clean install on Python 3.11, 2026-12-01).
DB_VERSION=0.2.0
DB_VENV=$PEERS/defense-bench
DB_BIN=$DB_VENV/bin/mcp-defense-bench
DB_STAMP=$DB_VENV/.mcpguard-peers-stamp
DB_CONSTRAINTS='
aiofile==3.12.3
annotated-types==0.8.0
anyio==4.16.0
attrs==26.1.0
Authlib==1.9.10
beartype==0.23.1
cachetools==8.0.2
caio==0.12.10
certifi==2026.10.19.post1
cffi==2.1.1
click==8.5.1
cryptography==50.0.2
cyclopts==5.5.2
dnspython==2.9.2
docstring_parser==0.18.0
email-validator==2.4.0
exceptiongroup==1.3.2
fastmcp==4.2.3
fastmcp-slim==4.2.3
griffelib==2.4.1
h11==0.16.0
httpcore2==2.16.2
httpx2==2.16.2
idna==3.20
joserfc==1.8.0
jsonref==1.1.0
jsonschema==4.26.0
jsonschema-path==0.5.0
jsonschema-specifications==2025.9.1
markdown-it-py==4.3.0
mcp==2.3.0
mcp-defense-bench==0.2.0
mcp-types==2.3.0
mdurl==0.1.2
openapi-pydantic==0.6.0
opentelemetry-api==1.45.2
packaging==26.4
pathable==0.6.0
platformdirs==4.14.9
py-key-value-aio==0.5.0
pycparser==3.12
pydantic==2.14.4
pydantic-settings==2.16.3
pydantic_core==2.50.5
Pygments==2.21.0
PyJWT==2.15.1
pyperclip==1.11.0
python-dotenv==1.2.4
python-multipart==0.0.34
PyYAML==6.0.4
referencing==0.37.0
rich==15.0.0
rich-rst==2.2.0
rpds-py==2026.9.1
sse-starlette==3.7.0
starlette==1.10.0
truststore==0.10.5
typing-inspection==0.4.5
typing_extensions==4.16.0
uncalled-for==0.6.2
uvicorn==0.54.0
watchfiles==1.3.0
websockets==17.4
'
if stamp_ok "$DB_STAMP" "$PY_KEY" && [[ -x $DB_BIN ]]; then
    log "mcp-defense-bench up to date ($DB_BIN)"
else
    changed=1
    log "pip install mcp-defense-bench[fastmcp]==$DB_VERSION into $DB_VENV"
    rm -rf "$DB_VENV"
    "$PYTHON" -m venv "$DB_VENV"
    db_constraints=$(mktemp)
    printf '%s' "$DB_CONSTRAINTS" >"$db_constraints"
    if ! "$DB_VENV/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
        --timeout 30 --retries 2 -c "$db_constraints" "mcp-defense-bench[fastmcp]==$DB_VERSION"; then
        rm -f "$db_constraints"
        rm -rf "$DB_VENV"
        die "pip could not install mcp-defense-bench[fastmcp]==$DB_VERSION. Is PyPI reachable from here?"
    fi
    rm -f "$db_constraints"
    echo "$PY_KEY" >"$DB_STAMP"
fi

# --- npm peers ---------------------------------------------------------------
if stamp_ok "$NODE_STAMP" "$NODE_KEY" && [[ -f $SE_JS && -f $FS_JS && -f $INSPECTOR_JS ]]; then
    log "node peers up to date ($NODE_DIR)"
else
    changed=1
    node_major=$("$NODE_ABS" -p 'process.versions.node.split(".")[0]')
    ((node_major >= 20)) || die "node $("$NODE_ABS" --version) is too old; Node.js 20 or newer is required"
    log "npm ci into $NODE_DIR (node $("$NODE_ABS" --version), npm $(npm --version))"
    # --ignore-scripts: the only install script in the tree is the inspector's
    # postinstall, a no-op when it is installed as a dependency. Engine warnings
    # (inspector 2.12.0 declares node >= 22.19) are expected: its CLI works on 20.
    npm_ci_into "$NODE_DIR" "$NPM_SRC" "the pinned npm peers"
    echo "$NODE_KEY" >"$NODE_STAMP"
fi

# --- npm hosts ---------------------------------------------------------------
if stamp_ok "$HOSTS_STAMP" "$HOSTS_KEY" && [[ -f $GEMINI_JS && -x $CLAUDE_BIN && -f $CODEX_JS ]]; then
    log "hosts up to date ($HOSTS_DIR)"
else
    changed=1
    log "npm ci into $HOSTS_DIR (Gemini CLI $GEMINI_VERSION, Claude Code $CLAUDE_VERSION, Codex $CODEX_VERSION)"
    # --ignore-scripts: Gemini CLI is one bundled script; its optional native modules (node-pty
    # for interactive shells, keytar for the keychain) are not needed by `gemini -p`. Claude
    # Code's postinstall only copies its platform package's binary over a placeholder, and that
    # binary is run from the platform package instead. Codex has no install script. npm ci still
    # installs the optional platform packages that match this machine.
    npm_ci_into "$HOSTS_DIR" "$HOSTS_SRC" "the pinned hosts"
    CLAUDE_BIN=$(find_claude)
    echo "$HOSTS_KEY" >"$HOSTS_STAMP"
fi

# --- paths.json --------------------------------------------------------------
for f in "$PY_BIN" "$TIME_BIN" "$FETCH_BIN" "$SE_JS" "$FS_JS" "$INSPECTOR_JS" "$GEMINI_JS" "$CLAUDE_BIN" "$CODEX_JS" "$FA_BIN"; do
    [[ -e $f ]] || die "expected file missing after install: $f (re-run with --force)"
done

if [[ $changed == 1 || ! -f $PATHS_JSON ]]; then
    "$PY_BIN" - "$PATHS_JSON" "$NODE_ABS" "$PY_BIN" "$SE_JS" "$FS_JS" "$TIME_BIN" "$FETCH_BIN" "$INSPECTOR_JS" "$GEMINI_JS" "$CLAUDE_BIN" "$CODEX_JS" "$FA_BIN" <<'EOF'
import json, os, sys
out, node, py, se, fs, tm, fetch, insp, gemini, claude, codex, fast_agent = sys.argv[1:]
paths = {
    "python": py,
    "node": node,
    "server_everything": [node, se, "stdio"],
    "server_filesystem": [node, fs],
    "server_time": [tm, "--local-timezone", "UTC"],
    "server_fetch": [fetch],
    "inspector": [node, insp, "--cli"],
    "gemini": [node, gemini],
    "claude": [claude],
    "codex": [node, codex],
    "fast_agent": [fast_agent],
}
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(paths, f, indent=2, sort_keys=True)
    f.write("\n")
os.replace(tmp, out)
EOF

    # --- verification: every entry must actually start and speak MCP --------
    log "verifying peers"
    got=$("$PY_BIN" -c 'import importlib.metadata as m; print(m.version("mcp"), m.version("mcp-server-time"), m.version("mcp-server-fetch"))')
    [[ $got == "$MCP_VERSION $TIME_VERSION $FETCH_VERSION" ]] || die "venv has unexpected versions: $got"
    got=$("$NODE_ABS" "$INSPECTOR_JS" --cli --version 2>/dev/null | tail -n1)
    [[ $got == "$INSPECTOR_VERSION" ]] || die "inspector --version printed '$got', expected $INSPECTOR_VERSION"
    # In an empty HOME, so that no settings of the person running this are read.
    got=$(HOME=$(mktemp -d) "$NODE_ABS" "$GEMINI_JS" --version 2>/dev/null | tail -n1)
    [[ $got == "$GEMINI_VERSION" ]] || die "gemini --version printed '$got', expected $GEMINI_VERSION"
    got=$(HOME=$(mktemp -d) "$CLAUDE_BIN" --version 2>/dev/null | tail -n1)
    [[ $got == "$CLAUDE_VERSION (Claude Code)" ]] || die "claude --version printed '$got', expected $CLAUDE_VERSION"
    got=$(HOME=$(mktemp -d) "$NODE_ABS" "$CODEX_JS" --version 2>/dev/null | tail -n1)
    [[ $got == "codex-cli $CODEX_VERSION" ]] || die "codex --version printed '$got', expected $CODEX_VERSION"
    got=$(HOME=$(mktemp -d) "$FA_BIN" --version 2>/dev/null | tail -n1)
    [[ $got == "fast-agent-mcp v$FA_VERSION" ]] || die "fast-agent --version printed '$got', expected v$FA_VERSION"
    if ! verify_out=$("$PY_BIN" - "$PATHS_JSON" <<'EOF' 2>&1
# Send `initialize` to each server entry and wait for its answer (10 s each).
import json, os, select, subprocess, sys, tempfile, time

paths = json.load(open(sys.argv[1]))
tmpdir = tempfile.mkdtemp(prefix="mcpguard-peers-verify-")
servers = {
    "server_everything": paths["server_everything"],
    "server_filesystem": paths["server_filesystem"] + [tmpdir],
    "server_time": paths["server_time"],
    "server_fetch": paths["server_fetch"],
}
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "install-peers", "version": "0"}}}
failed = False
for key, cmd in servers.items():
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    p.stdin.write((json.dumps(init) + "\n").encode())
    p.stdin.flush()
    deadline, buf, info = time.monotonic() + 10, b"", None
    while info is None and time.monotonic() < deadline:
        r, _, _ = select.select([p.stdout], [], [], 0.2)
        if not r:
            continue
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("id") == 1 and "result" in msg:
                info = msg["result"].get("serverInfo", {})
    p.kill()
    p.wait()
    if info is None:
        print(f"FAIL {key}: no initialize result within 10 s: {cmd}")
        failed = True
    else:
        print(f"ok   {key}: {info.get('name')} {info.get('version')}")
os.rmdir(tmpdir)
sys.exit(1 if failed else 0)
EOF
    ); then
        rm -f "$PATHS_JSON"
        echo "$verify_out" >&2
        die "peer verification failed (see above)"
    fi
    echo "$verify_out" | sed 's/^/install-peers: /' >&2
fi

END=$(date +%s)
echo "peers:      $PEERS  ($((END - START)) s)"
echo "paths.json: $PATHS_JSON"
echo "python:     $PY_BIN (mcp $MCP_VERSION)"
echo "time:       $TIME_BIN ($TIME_VERSION)"
echo "fetch:      $FETCH_BIN ($FETCH_VERSION)"
echo "everything: $SE_JS"
echo "filesystem: $FS_JS"
echo "inspector:  $INSPECTOR_JS ($INSPECTOR_VERSION)"
echo "gemini:     $GEMINI_JS ($GEMINI_VERSION)"
echo "claude:     $CLAUDE_BIN ($CLAUDE_VERSION)"
echo "codex:      $CODEX_JS ($CODEX_VERSION)"
echo "fast-agent: $FA_BIN ($FA_VERSION, on CPython $PY313_VERSION)"
