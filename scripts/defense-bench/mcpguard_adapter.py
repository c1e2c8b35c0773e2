"""mcpguard as a stdio proxy for mcp-defense-bench 0.2.0 (its StdioProxyAdapter).

For every input the harness starts its fixture server once directly and once through the
command this module builds. That command is what a careful user would run: the server captured
with `mcpguard capture`, every tool reviewed (`mcpguard review --from`, with the assertions the
integration tests use), every tool classified as a read (so no call waits for a person the
harness cannot play), then `mcpguard --manifest ... --sha256 ... -- <server>` under mcpguard's
default sandbox with the run's folder writable. Nothing of mcpguard is imported: the bench sees
what an MCP client sees.

Environment: MCPGUARD (the binary, required), MCPGUARD_BENCH_PROFILE = "after" (the shipped
defaults, default) or "before" (closed arguments, secrets, argument rules and result labels
turned off: the gate as it was before issue 16).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from mcp_defense_bench.adapters.stdio import StdioProxyAdapter

MCPGUARD = os.environ.get("MCPGUARD", "mcpguard")
PROFILE = os.environ.get("MCPGUARD_BENCH_PROFILE", "after")

BEFORE = """
[arguments]
closed = false
refuse_metadata_urls = false
[secrets]
results = "off"
arguments = "off"
[results]
injection = "off"
"""

ASSERTIONS = {
    "headless": True,
    "independentCalls": True,
    "modelBacked": False,
    "sideEffects": [],
    "concurrency": "safe",
    "referenceBasedIO": True,
}


def _run(cmd: list[str], work: Path) -> str:
    out = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:2])} failed: {out.stderr.strip()[-800:]}")
    return out.stdout


def wrap(server: list[str], work: Path) -> tuple[list[str], dict[str, str]]:
    snap = work / "snapshot.json"
    grant = ["--sandbox-write", str(work)]
    _run([MCPGUARD, "capture", "--server", "bench", "--out", str(snap), *grant, "--", *server], work)
    doc = json.loads(snap.read_text(encoding="utf-8"))
    tools = [t for page in doc["servers"]["bench"]["toolPages"] for t in page.get("tools", [])]
    names = [t["name"] for t in tools]
    # Every argument is data: the bench's reviewer knows nothing more about them.
    reviews = {
        t["name"]: {
            "assertions": ASSERTIONS,
            "inputChannels": {"/" + p.replace("~", "~0").replace("/", "~1"): "data" for p in (t.get("inputSchema") or {}).get("properties") or {}},
        }
        for t in tools
    }
    (work / "reviews.json").write_text(json.dumps(reviews), encoding="utf-8")
    digest = _run(
        [MCPGUARD, "review", str(snap), "--server", "bench", "--reviewer", "bench@example.test", "--from", str(work / "reviews.json")],
        work,
    ).strip()
    policy = "".join(f'[writes.tools.{json.dumps(n)}]\nside_effect = "read"\n' for n in names)
    if PROFILE == "before":
        policy += BEFORE
    (work / "policy.toml").write_text(policy, encoding="utf-8")
    cmd = [
        MCPGUARD,
        "--manifest", str(snap), "--sha256", digest, "--server", "bench",
        "--policy", str(work / "policy.toml"), *grant, "--", *server,
    ]
    return cmd, {}


ADAPTER = StdioProxyAdapter(
    f"mcpguard-{PROFILE}",
    wrap,
    # Labels and redactions rewrite the result (scored as enforcement); this pattern only
    # catches warnings of a run that changed nothing.
    warn_pattern=r"mcpguard: warning: call \S+ of .*(instruction-like|secret-shaped)",
    tool_class="runtime-proxy",
    timeout=90.0,
)
