#!/usr/bin/env python3
"""Builds tests/data/injection/controls-real.json: ordinary text from real files as label controls.

The hand-written controls (controls.json) are short; these are what a filesystem or fetch server
returns from files already on a developer's machine: npm package READMEs and docs, HTML pages,
JavaScript and Python sources, package.json records, directory listings and error texts. They
come from the peers that scripts/install-peers.sh installs (.peers/), chosen by sorted path and
taken whole up to CHUNK bytes, from the first paragraph that holds a word phrase lists trip on
("must", "ignore", "system", "instruction", ...) when there is one, so the hard passages are in.
The choice never looks at what mcpguard labels. Re-run only to refresh the corpus:

    scripts/label-controls.py > tests/data/injection/controls-real.json
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = Path(os.environ.get("MCPGUARD_PEERS_DIR", ROOT / ".peers")).resolve()
CHUNK = 2000
HARD = re.compile(r"\b(must|ignore|system|instruction|disregard|secret|silently|always|never|prompt|agent|assistant|send|token)\b", re.I)
FS_TOOLS = ["read_file", "read_text_file", "write_file", "edit_file", "list_directory", "search_files", "move_file", "get_file_info"]
FETCH_TOOLS = ["fetch"]


def files(pattern: re.Pattern, under: list[str], limit: int, stride: int = 1) -> list[Path]:
    found = []
    for base in under:
        for dirpath, dirs, names in os.walk(PEERS / base, followlinks=True):
            dirs[:] = sorted(d for d in dirs if d not in ("runner-cache", "__pycache__", "test", "tests"))
            for n in sorted(names):
                if pattern.search(n):
                    found.append(Path(dirpath) / n)
    seen, out = set(), []
    for p in sorted(found)[::stride]:
        key = p.name.lower(), p.stat().st_size
        if key in seen or p.stat().st_size < 400:
            continue
        seen.add(key)
        out.append(p)
        if len(out) == limit:
            break
    return out


def chunk(text: str) -> str:
    m = HARD.search(text)
    start = 0
    if m:
        start = max(text.rfind("\n\n", 0, m.start()), 0)
    piece = text[start : start + CHUNK]
    # End on a line break, as a paged read would.
    cut = piece.rfind("\n")
    return piece[:cut] if cut > CHUNK // 2 else piece


def read(p: Path) -> str:
    return p.read_text(encoding="utf-8", errors="replace")


def main() -> None:
    cases = []

    def add(kind: str, text: str, src: str, tools: list[str], answering: str, error: bool = False) -> None:
        text = text.strip()
        if len(text) < 80:
            return
        case = {"kind": kind, "src": src, "text": text, "tools": tools, "answering": answering}
        if error:
            case["error"] = True
        cases.append(case)

    rel = lambda p: str(p.relative_to(PEERS)) if p.is_relative_to(PEERS) else str(p)
    for p in files(re.compile(r"^readme(\.md|\.markdown)?$", re.I), ["node/node_modules", "hosts/node_modules", "first-hour"], 150, 2):
        add("readme", chunk(read(p)), rel(p), FS_TOOLS, "read_text_file")
    for p in files(re.compile(r"\.(md|rst)$"), ["venv/lib", "defense-bench/lib", "fast-agent/lib"], 50, 3):
        if "readme" not in p.name.lower():
            add("docs", chunk(read(p)), rel(p), FS_TOOLS, "read_text_file")
    for p in files(re.compile(r"\.html?$"), ["node/node_modules", "first-hour", "venv/lib"], 20):
        add("html", chunk(read(p)), rel(p), FETCH_TOOLS, "fetch")
    for p in files(re.compile(r"\.(js|mjs|ts)$"), ["node/node_modules"], 40, 97):
        add("code", chunk(read(p)), rel(p), FS_TOOLS, "read_text_file")
    for p in files(re.compile(r"\.py$"), ["venv/lib"], 40, 53):
        add("code", chunk(read(p)), rel(p), FS_TOOLS, "read_text_file")
    for p in files(re.compile(r"^package\.json$"), ["node/node_modules"], 25, 11):
        add("json", chunk(read(p)), rel(p), FS_TOOLS, "read_text_file")
    for d in ["node/node_modules/@modelcontextprotocol", "venv/bin", "node/node_modules/zod", "defense-bench/lib/python3.11/site-packages/mcp_defense_bench", "hosts/node_modules/@google"]:
        out = subprocess.run(["ls", "-la", "--time-style=long-iso", str(PEERS / d)], capture_output=True, text=True).stdout
        add("listing", chunk(out.replace(str(PEERS), "~/project")), "ls -la " + d, FS_TOOLS, "list_directory")
    errors = [
        ["ls", "/nonexistent/dir"],
        [sys.executable, "-c", "import json; json.loads('{bad')"],
        [sys.executable, "-c", "open('/etc/shadow-does-not-exist')"],
        [sys.executable, "-c", "import subprocess; subprocess.run(['false'], check=True)"],
        [sys.executable, "-c", "d={}; d['token']"],
        ["node", "-e", "JSON.parse('{bad')"],
        ["node", "-e", "require('does-not-exist')"],
        ["node", "-e", "null.f()"],
        ["git", "-C", "/nonexistent", "status"],
        ["cat", "/root/.ssh-none/config"],
    ]
    for cmd in errors:
        r = subprocess.run(cmd, capture_output=True, text=True)
        add("error", (r.stderr or r.stdout)[-CHUNK:], " ".join(cmd[:2]), FS_TOOLS, "read_text_file", True)
    json.dump(cases, sys.stdout, indent=1, ensure_ascii=False)
    print()
    print(f"{len(cases)} controls", file=sys.stderr)


if __name__ == "__main__":
    main()
