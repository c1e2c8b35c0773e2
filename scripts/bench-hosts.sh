#!/usr/bin/env bash
# Start-up of the real hosts with a guarded server: the time from the host's launch until its
# first model request that offers the server's `echo` tool (the host has started the server,
# initialized it and listed its tools by then), with the fixture server configured directly and
# through mcpguard (default sandbox, a reviewed snapshot captured at the default protocol
# version). Each host runs headless (`gemini -p`, `claude -p`, `codex exec`) against a stand-in
# of its model API on 127.0.0.1 that answers at once with text, as in tests/integration/hosts.rs.
# fast-agent runs `go -m` with its `passthrough` model, which makes no model request: for it the
# figure is the whole run, from launch through one call of `echo` to its exit.
# Prints the median and the spread of N runs of each, and the difference. Through mcpguard the
# host sees only the reviewed tool (`echo`), directly all sixteen of the fixture's tools.
#
# Offline once the hosts are installed (scripts/install-peers.sh, which this runs).
# Usage: scripts/bench-hosts.sh [RUNS] [HOST...]   (default 5 runs of gemini claude codex fast-agent)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
shift || true
HOSTS=${*:-gemini claude codex fast-agent}
cargo build --release --locked --bins --examples >&2
scripts/install-peers.sh >/dev/null 2>&1
M=$PWD/target/release/mcpguard
FIXTURE=$PWD/target/release/examples/fixture_server
# Not under /tmp: Codex refuses to set up its helper binaries in a CODEX_HOME below a temporary
# directory and says so on every start.
WORK=$(mktemp -d -p "${XDG_CACHE_HOME:-$HOME/.cache}" mcpguard-bench-hosts.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

"$M" capture --server fixture --out "$WORK/fixture.json" -- "$FIXTURE" >/dev/null 2>"$WORK/capture.log" ||
    { cat "$WORK/capture.log" >&2; exit 1; }
# A read the policy lets through without asking (its review records the class, `sideEffect`),
# reviewed like the host tests review it.
cat >"$WORK/reviews.json" <<'EOF'
{"echo": {"reviewer": "bench@example.test", "sideEffect": "read", "inputChannels": {"/text": "data"},
          "assertions": {"headless": true, "independentCalls": true, "modelBacked": false,
                         "sideEffects": [], "concurrency": "safe", "referenceBasedIO": true}}}
EOF
DIGEST=$("$M" review "$WORK/fixture.json" --server fixture --from "$WORK/reviews.json" 2>/dev/null)

python3 - "$RUNS" "$M" "$FIXTURE" "$WORK" "$DIGEST" "$PWD/.peers/paths.json" "$HOSTS" <<'EOF'
import http.server, json, os, shutil, statistics, subprocess, sys, threading, time

runs, m, fixture, work, digest, paths, hosts = sys.argv[1:]
runs = int(runs)
peers = json.load(open(paths))
direct = [fixture]
guarded = [m, "--manifest", f"{work}/fixture.json", "--sha256", digest, "--server", "fixture", "--", fixture]

# The arrival time of the first model request that offers the echo tool, per run: Claude Code
# names it `mcp__fixture__echo` in its list of deferred tools, Gemini CLI and Codex send its
# description.
seen = {}
MARKERS = (b"mcp__fixture__echo", b"Echo the text back.")

def sse(events):
    return "".join(f"event: {e.get('type', 'message')}\ndata: {json.dumps(e)}\n\n" for e in events)

class StandIn(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if "t" not in seen and any(mark in body for mark in MARKERS):
            seen["t"] = time.monotonic()
        path = self.path
        if ":generateContent" in path or ":streamGenerateContent" in path:
            part = {"text": json.dumps({"complexity_reasoning": "x", "complexity_score": 10,
                                        "reasoning": "x", "next_speaker": "user"})}
            if "stream" in path:
                part = {"text": "done"}
            answer = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                      "finishReason": "STOP", "index": 0}],
                      "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}}
            kind, text = ("text/event-stream", f"data: {json.dumps(answer)}\r\n\r\n") if "stream" in path \
                else ("application/json", json.dumps(answer))
        elif path.startswith("/v1/messages"):
            message = {"id": "m", "type": "message", "role": "assistant", "model": "x", "content": [],
                       "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
            kind, text = "text/event-stream", sse([
                {"type": "message_start", "message": message},
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "done"}},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                 "usage": {"output_tokens": 1}},
                {"type": "message_stop"}])
        elif path.endswith("/responses"):
            item = {"type": "message", "role": "assistant", "id": "m",
                    "content": [{"type": "output_text", "text": "done", "annotations": []}]}
            kind, text = "text/event-stream", sse([
                {"type": "response.created", "response": {"id": "r"}},
                {"type": "response.output_item.done", "output_index": 0, "item": item},
                {"type": "response.completed", "response": {"id": "r", "usage": {
                    "input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}}])
        else:
            self.send_response(404); self.send_header("content-length", "0"); self.end_headers()
            return
        data = text.encode()
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass

server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
threading.Thread(target=server.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{server.server_port}"

def toml_str(s):
    return json.dumps(s)

def run(host, argv):
    home = f"{work}/home-{host}"
    shutil.rmtree(home, ignore_errors=True)
    os.makedirs(home)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ANTHROPIC_", "OPENAI_", "GEMINI_", "GOOGLE_", "CLAUDE_", "CODEX_", "MCPGUARD_", "XDG_"))}
    env["HOME"] = home
    cmd, extra = {"command": argv[0], "args": argv[1:]}, []
    if host == "gemini":
        os.makedirs(f"{home}/.gemini")
        json.dump({"mcpServers": {"fixture": {**cmd, "trust": True}},
                   "security": {"auth": {"selectedType": "gemini-api-key"}},
                   "privacy": {"usageStatisticsEnabled": False}}, open(f"{home}/.gemini/settings.json", "w"))
        env.update(GOOGLE_GEMINI_BASE_URL=url, GEMINI_API_KEY="stand-in", GEMINI_CLI_TRUST_WORKSPACE="true")
        host_cmd = peers["gemini"] + ["-p", "Say done."]
    elif host == "claude":
        json.dump({"mcpServers": {"fixture": {"type": "stdio", **cmd}}}, open(f"{home}/.claude.json", "w"))
        env.update(ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="stand-in", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
        host_cmd = peers["claude"] + ["-p", "Say done."]
    elif host == "fast-agent":
        with open(f"{home}/fastagent.config.yaml", "w") as f:
            json.dump({"default_model": "passthrough", "mcp": {"servers": {"fixture": cmd}}}, f)
        call = "***CALL_TOOL fixture__echo " + json.dumps({"text": "done"})
        host_cmd = peers["fast_agent"] + ["go", "--model", "passthrough", "--servers", "fixture", "-m", call]
    else:
        os.makedirs(f"{home}/.codex")
        with open(f"{home}/.codex/config.toml", "w") as f:
            f.write(f'model = "stand-in"\nmodel_provider = "stand-in"\ncheck_for_update_on_startup = false\n'
                    f'[model_providers.stand-in]\nname = "stand-in"\nbase_url = {toml_str(url + "/v1")}\n'
                    f'wire_api = "responses"\nenv_key = "MCPGUARD_STAND_IN_KEY"\n'
                    f'[mcp_servers.fixture]\ncommand = {toml_str(argv[0])}\n'
                    f'args = [{", ".join(toml_str(a) for a in argv[1:])}]\n')
        env.update(CODEX_HOME=f"{home}/.codex", MCPGUARD_STAND_IN_KEY="stand-in")
        host_cmd = peers["codex"] + ["exec", "--skip-git-repo-check", "Say done."]
    seen.clear()
    start = time.monotonic()
    p = subprocess.run(host_cmd, cwd=home, env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    end = time.monotonic()
    if host == "fast-agent" and p.returncode == 0 and b'{"text":"done"}' in p.stdout:
        seen["t"] = end
    if p.returncode != 0 or "t" not in seen:
        sys.exit(f"{host}: no model request offered the echo tool (exit {p.returncode}):\n"
                 f"{p.stdout.decode(errors='replace')[-2000:]}\n{p.stderr.decode(errors='replace')[-2000:]}")
    return (seen["t"] - start) * 1000, (end - start) * 1000

def fmt(xs):
    return f"{statistics.median(xs):7.0f} ({min(xs):.0f}-{max(xs):.0f})"

print(f"host launch to its first model request offering the server's tools, median of {runs} runs (min-max), ms")
print(f"{'host':<10} {'direct':>22} {'through mcpguard':>22} {'difference':>11}   whole run direct / guarded")
for host in hosts.split():
    run(host, direct)  # one warm-up run each, so that the disk cache is not measured
    # Alternated, so that a change in the machine's load during the runs falls on both sides.
    d, g = [], []
    for _ in range(runs):
        d.append(run(host, direct))
        g.append(run(host, guarded))
    dt, gt = [x[0] for x in d], [x[0] for x in g]
    print(f"{host:<10} {fmt(dt):>22} {fmt(gt):>22} {statistics.median(gt) - statistics.median(dt):+9.0f} ms"
          f"   {statistics.median([x[1] for x in d]):.0f} / {statistics.median([x[1] for x in g]):.0f}")
EOF
