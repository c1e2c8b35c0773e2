#!/usr/bin/env python3
"""Drive an MCP server with the real Python SDK client (mcp 2.3.0) and print a JSON transcript.

Usage:
    python client.py [--mode legacy|auto|modern] [--call TOOL [--args JSON]]...
                     [--elicit accept|decline|cancel|none|hang] [--list-only]
                     [--timeout SECONDS] [...] -- <server command...>

The server command may itself be `mcpguard -- <real server...>`: everything after the
first `--` is the command line, unchanged. The transcript is one JSON document on
stdout (sorted keys) so that two runs, e.g. direct and through mcpguard, can be
compared with a plain diff once the caller has masked volatile values (timestamps
in time-tool results and the like). Run with the interpreter of the venv made by
scripts/install-peers.sh (`.peers/venv/bin/python`).

Transcript keys:
    mode                 --mode as given
    protocol_version     negotiated version (SDK view)
    server_info          serverInfo (SDK view; null when a 2026-era server does not say)
    server_capabilities  capabilities (SDK view)
    instructions         instructions (SDK view)
    handshake            wire results/errors of initialize and server/discover, in order
    tools                every tool of every tools/list page, exactly as on the wire
    tool_names           names the SDK kept (2026-07-28 clients drop tools with bad x-mcp-header)
    tools_pages          number of tools/list pages fetched
    calls                [{name, arguments, result, wire_error?, error?, rounds, progress?}]:
                         result = the last tools/call result exactly as on the wire (null on a
                         JSON-RPC error, then in wire_error); error = what the SDK raised
                         (JSON-RPC error, output-schema or result validation); rounds = how
                         many tools/call responses the call took (>1 with input_required)
    notifications        [{method, params?}] server notifications in receive order; params
                         only for list_changed, progress and logging messages
    server_requests      [{method, params, response | error}] server-to-client requests
                         seen on the wire (legacy era) and what this client answered
    callbacks            [{kind, params, answer}] sampling/elicitation/roots callbacks run
                         (both eras; 2026-07-28 input requests arrive inside results)
    stream_errors        lines the SDK could not parse as JSON-RPC
    errors               [{stage, type, message, code?, data?}] exceptions, by stage
    timed_out            true when --timeout expired
    ok                   no errors and no timeout
    wire                 (only with --wire) every message in both directions
Exit status: 0 when the transcript was printed (look at "ok" for the outcome), 2 on a
usage error, 3 when the watchdog (--timeout + 15 s) had to force the exit after printing,
1 when the mcp SDK cannot be imported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import warnings
from collections.abc import Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

try:
    import anyio
    import mcp_types as types
    from mcp import Client, StdioServerParameters, stdio_client
    from mcp.shared.exceptions import MCPError
    from mcp_types.jsonrpc import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse
    from mcp_types.version import LATEST_MODERN_VERSION
except ImportError as _exc:  # pragma: no cover - environment problem, not a test result
    sys.exit(
        f"client.py: cannot import the mcp SDK ({_exc}); run it with .peers/venv/bin/python "
        "after scripts/install-peers.sh"
    )

MODERN_VERSION = LATEST_MODERN_VERSION  # "2026-07-28" in mcp 2.3.0
PAGE_CAP = 100
PARAMS_FOR = ("list_changed", "notifications/progress", "notifications/message")

warnings.simplefilter("ignore")  # MCPDeprecationWarning for the legacy-only helpers used here


def dump(obj: Any) -> Any:
    """Wire-style plain JSON for an SDK model (or pass plain data through)."""
    if hasattr(obj, "model_dump"):
        return obj.model_dump(by_alias=True, mode="json", exclude_none=True)
    return obj


def error_entry(stage: str, exc: BaseException) -> list[dict[str, Any]]:
    """Flatten an exception (groups included) into transcript error entries."""
    out: list[dict[str, Any]] = []
    for leaf in _leaves(exc):
        entry: dict[str, Any] = {"stage": stage, "type": type(leaf).__name__, "message": str(leaf)}
        if isinstance(leaf, MCPError):
            entry["code"] = leaf.code
            entry["message"] = leaf.message
            if leaf.data is not None:
                entry["data"] = leaf.data
        out.append(entry)
    return out


def _leaves(exc: BaseException) -> Iterable[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            yield from _leaves(sub)
    else:
        yield exc


class Recorder:
    """Collects the transcript; fed by the wire tap, the callbacks and the driver."""

    def __init__(self, mode: str, wire: bool) -> None:
        self.t: dict[str, Any] = {
            "mode": mode,
            "protocol_version": None,
            "server_info": None,
            "server_capabilities": None,
            "instructions": None,
            "handshake": [],
            "tools": [],
            "tool_names": [],
            "tools_pages": 0,
            "calls": [],
            "notifications": [],
            "server_requests": [],
            "callbacks": [],
            "stream_errors": [],
            "errors": [],
            "timed_out": False,
        }
        if wire:
            self.t["wire"] = []
        self.stage = "start"
        self.current_call: dict[str, Any] | None = None
        self._out_requests: dict[Any, str] = {}  # our request id -> method
        self._in_requests: dict[Any, int] = {}  # server request id -> index in server_requests
        self._printed = threading.Lock()
        self._done = False

    # -- wire tap ---------------------------------------------------------------
    def outbound(self, item: Any) -> None:
        msg = getattr(item, "message", item)
        if "wire" in self.t:
            self.t["wire"].append({"dir": "out", "message": _msg_dict(msg)})
        if isinstance(msg, JSONRPCRequest):
            self._out_requests[msg.id] = msg.method
        elif isinstance(msg, (JSONRPCResponse, JSONRPCError)):
            idx = self._in_requests.pop(msg.id, None)
            if idx is not None:
                entry = self.t["server_requests"][idx]
                if isinstance(msg, JSONRPCResponse):
                    entry["response"] = msg.result
                else:
                    entry["error"] = dump(msg.error)

    def inbound(self, item: Any) -> None:
        if isinstance(item, Exception):
            self.t["stream_errors"].append({"type": type(item).__name__, "message": str(item)})
            return
        msg = getattr(item, "message", item)
        if "wire" in self.t:
            self.t["wire"].append({"dir": "in", "message": _msg_dict(msg)})
        if isinstance(msg, JSONRPCNotification):
            entry: dict[str, Any] = {"method": msg.method}
            if msg.params is not None and any(key in msg.method for key in PARAMS_FOR):
                entry["params"] = msg.params
            self.t["notifications"].append(entry)
        elif isinstance(msg, JSONRPCRequest):
            self._in_requests[msg.id] = len(self.t["server_requests"])
            self.t["server_requests"].append({"method": msg.method, "params": msg.params})
        elif isinstance(msg, (JSONRPCResponse, JSONRPCError)):
            method = self._out_requests.pop(msg.id, None)
            if isinstance(msg, JSONRPCResponse):
                outcome: dict[str, Any] = {"result": msg.result}
            else:
                outcome = {"error": dump(msg.error)}
            if method in ("initialize", "server/discover"):
                self.t["handshake"].append({"method": method, **outcome})
            elif method == "tools/list" and "result" in outcome:
                self.t["tools_pages"] += 1
                tools = outcome["result"].get("tools")
                if isinstance(tools, list):
                    self.t["tools"].extend(tools)
            elif method == "tools/call" and self.current_call is not None:
                self.current_call["rounds"] += 1
                if "result" in outcome:
                    self.current_call["result"] = outcome["result"]
                else:
                    self.current_call["result"] = None
                    self.current_call["wire_error"] = outcome["error"]

    # -- output -----------------------------------------------------------------
    def emit(self, pretty: bool) -> None:
        """Print the transcript once (the watchdog and the normal path may race)."""
        with self._printed:
            if self._done:
                return
            self._done = True
            self.t["ok"] = not self.t["errors"] and not self.t["timed_out"]
            text = json.dumps(self.t, sort_keys=True, indent=2 if pretty else None, default=str)
            sys.stdout.write(text + "\n")
            sys.stdout.flush()


def _msg_dict(msg: Any) -> Any:
    return msg.model_dump(by_alias=True, mode="json", exclude_unset=True) if hasattr(msg, "model_dump") else msg


class TapRead:
    """Read-stream proxy that shows every inbound item to the recorder."""

    def __init__(self, inner: Any, rec: Recorder) -> None:
        self._inner, self._rec = inner, rec

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        item = await self._inner.receive()
        self._rec.inbound(item)
        return item

    def __aiter__(self) -> TapRead:
        return self

    async def __anext__(self) -> Any:
        item = await self._inner.__anext__()
        self._rec.inbound(item)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> TapRead:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class TapWrite:
    """Write-stream proxy that shows every outbound item to the recorder."""

    def __init__(self, inner: Any, rec: Recorder) -> None:
        self._inner, self._rec = inner, rec

    async def send(self, item: Any) -> None:
        self._rec.outbound(item)
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> TapWrite:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


@asynccontextmanager
async def tapped_stdio(params: StdioServerParameters, errlog: Any, rec: Recorder):
    async with stdio_client(params, errlog=errlog) as (read, write):
        yield TapRead(read, rec), TapWrite(write, rec)


# -- callbacks --------------------------------------------------------------------
def fill_form(schema: dict[str, Any]) -> dict[str, Any]:
    """Accept-content for a form: every boolean true, defaults where given, else a plausible value."""
    props = schema.get("properties") or {}
    if not props:
        return {"approve": True}
    content: dict[str, Any] = {}
    for name, prop in props.items():
        if not isinstance(prop, dict):
            continue
        kind = prop.get("type")
        if kind == "boolean":
            content[name] = True
        elif "default" in prop:
            content[name] = prop["default"]
        elif prop.get("enum"):
            content[name] = prop["enum"][0]
        elif prop.get("oneOf") or prop.get("anyOf"):
            first = (prop.get("oneOf") or prop.get("anyOf"))[0]
            content[name] = first.get("const") if isinstance(first, dict) else first
        elif kind == "array":
            items = prop.get("items") or {}
            choices = items.get("enum") or [c.get("const") for c in (items.get("anyOf") or items.get("oneOf") or [])]
            content[name] = choices[:1] if choices else []
        elif kind == "integer":
            content[name] = int(prop.get("minimum", 1))
        elif kind == "number":
            content[name] = prop.get("minimum", 1)
        elif kind == "string":
            content[name] = {
                "email": "test@example.com",
                "uri": "https://example.com/",
                "date": "2000-01-01",
                "date-time": "2000-01-01T00:00:00Z",
            }.get(prop.get("format"), "test")
    return content


def make_callbacks(args: argparse.Namespace, rec: Recorder) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}

    if args.elicit != "none":

        async def elicitation(ctx: Any, params: Any) -> Any:
            p = dump(params)
            entry: dict[str, Any] = {"kind": "elicitation", "params": p, "answer": None}
            rec.t["callbacks"].append(entry)
            if args.elicit == "hang":
                await anyio.sleep_forever()
            if args.elicit in ("decline", "cancel"):
                result = types.ElicitResult(action=args.elicit)
            elif p.get("mode") == "url":
                result = types.ElicitResult(action="accept")
            else:
                result = types.ElicitResult(action="accept", content=fill_form(p.get("requestedSchema") or {}))
            entry["answer"] = dump(result)
            return result

        kwargs["elicitation_callback"] = elicitation

    if args.sampling_reply is not None:

        async def sampling(ctx: Any, params: Any) -> Any:
            result = types.CreateMessageResult(
                role="assistant",
                content=types.TextContent(type="text", text=args.sampling_reply),
                model="mcpguard-peer-client",
                stop_reason="endTurn",
            )
            rec.t["callbacks"].append({"kind": "sampling", "params": dump(params), "answer": dump(result)})
            return result

        kwargs["sampling_callback"] = sampling

    if args.root:
        roots = [types.Root(uri=Path(r).resolve().as_uri(), name=Path(r).name or "/") for r in args.root]

        async def list_roots(ctx: Any) -> Any:
            result = types.ListRootsResult(roots=roots)
            rec.t["callbacks"].append({"kind": "roots", "params": None, "answer": dump(result)})
            return result

        kwargs["list_roots_callback"] = list_roots

    return kwargs


# -- driver -----------------------------------------------------------------------
async def drive(args: argparse.Namespace, command: list[str], rec: Recorder) -> None:
    t = rec.t
    env = dict(kv.split("=", 1) for kv in args.env)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env or None, cwd=args.cwd)
    errlog = open(args.server_stderr, "a") if args.server_stderr else sys.stderr  # noqa: SIM115
    mode = MODERN_VERSION if args.mode == "modern" else args.mode
    client = Client(
        tapped_stdio(params, errlog, rec),
        mode=mode,
        cache=None,  # every list goes to the wire
        log_level=args.log_level if args.mode != "legacy" else None,
        **make_callbacks(args, rec),
    )

    rec.stage = "connect"
    async with client:
        session = client.session
        if args.mode == "modern" and not args.no_discover:
            # A version pin adopts a synthesized DiscoverResult (no capabilities, no
            # serverInfo); ask the server for the real one so the transcript has it.
            rec.stage = "discover"
            try:
                raw = await session.send_discover(MODERN_VERSION)
                session.adopt(types.DiscoverResult.model_validate(raw))
            except Exception as exc:  # noqa: BLE001 - recorded, the run goes on
                t["errors"].extend(error_entry("discover", exc))

        t["protocol_version"] = client.protocol_version
        t["server_info"] = dump(client.server_info)
        t["server_capabilities"] = dump(client.server_capabilities)
        t["instructions"] = client.instructions

        if args.log_level and client.protocol_version != MODERN_VERSION:
            rec.stage = "logging/setLevel"
            try:
                await client.set_logging_level(args.log_level)
            except Exception as exc:  # noqa: BLE001
                t["errors"].extend(error_entry("logging/setLevel", exc))

        rec.stage = "tools/list"
        try:
            cursor: str | None = None
            for _ in range(PAGE_CAP):
                page = await client.list_tools(cursor=cursor)
                t["tool_names"].extend(tool.name for tool in page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            else:
                t["errors"].append(
                    {"stage": "tools/list", "type": "PageCap", "message": f"more than {PAGE_CAP} pages"}
                )
        except Exception as exc:  # noqa: BLE001
            t["errors"].extend(error_entry("tools/list", exc))

        for name, arguments in [] if args.list_only else args.calls:
            rec.stage = f"tools/call {name}"
            call: dict[str, Any] = {"name": name, "arguments": arguments, "result": None, "rounds": 0}
            t["calls"].append(call)
            rec.current_call = call
            progress_cb = None
            if args.progress:
                call["progress"] = []

                async def progress_cb(progress: float, total: float | None, message: str | None, c=call) -> None:
                    c["progress"].append({"progress": progress, "total": total, "message": message})

            try:
                await client.call_tool(name, arguments, progress_callback=progress_cb)
            except Exception as exc:  # noqa: BLE001
                errs = error_entry(f"tools/call {name}", exc)
                call["error"] = {k: v for k, v in errs[0].items() if k != "stage"}
                t["errors"].extend(errs)
            finally:
                rec.current_call = None

        rec.stage = "settle"
        await anyio.sleep(args.settle)
        rec.stage = "shutdown"


async def main_async(args: argparse.Namespace, command: list[str], rec: Recorder) -> None:
    with anyio.move_on_after(args.timeout) as scope:
        try:
            await drive(args, command, rec)
        except Exception as exc:  # noqa: BLE001 - every failure ends up in the transcript
            rec.t["errors"].extend(error_entry(rec.stage, exc))
    if scope.cancelled_caught:
        rec.t["timed_out"] = True
        rec.t["errors"].append(
            {"stage": rec.stage, "type": "Timeout", "message": f"run exceeded --timeout {args.timeout} s"}
        )


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        own, command = argv, []
    else:
        cut = argv.index("--")
        own, command = argv[:cut], argv[cut + 1 :]

    parser = argparse.ArgumentParser(
        prog="client.py",
        description="Run the mcp 2.3.0 Python client against a stdio MCP server and print a JSON transcript.",
        usage="%(prog)s [options] -- <server command...>",
        allow_abbrev=False,
    )
    parser.add_argument("--mode", choices=("legacy", "auto", "modern"), default="auto",
                        help="legacy: initialize handshake; auto: probe server/discover, fall back to "
                        "initialize (SDK default); modern: pin 2026-07-28 without initialize (default auto)")
    parser.add_argument("--call", metavar="TOOL", action="append", default=[],
                        help="call TOOL after listing tools (repeatable, in order)")
    parser.add_argument("--args", metavar="JSON", action="append", default=[],
                        help="JSON object of arguments for the preceding --call")
    parser.add_argument("--elicit", choices=("accept", "decline", "cancel", "none", "hang"), default="none",
                        help="advertise elicitation and answer this way; none (default) does not advertise it")
    parser.add_argument("--sampling-reply", metavar="TEXT",
                        help="advertise sampling and answer every request with this text")
    parser.add_argument("--root", metavar="DIR", action="append", default=[],
                        help="advertise roots and answer roots/list with these directories (repeatable)")
    parser.add_argument("--list-only", action="store_true", help="list tools only; ignore --call")
    parser.add_argument("--progress", action="store_true",
                        help="send a progressToken with each call and record the progress callbacks")
    parser.add_argument("--log-level", choices=("debug", "info", "notice", "warning", "error", "critical",
                                                "alert", "emergency"),
                        help="opt in to server log messages (logging/setLevel, or the 2026 _meta opt-in)")
    parser.add_argument("--no-discover", action="store_true",
                        help="with --mode modern: skip the server/discover request made after connecting")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="bound on the whole run, in seconds (default 30)")
    parser.add_argument("--settle", type=float, default=0.5,
                        help="seconds to wait after the last call for trailing notifications (default 0.5)")
    parser.add_argument("--env", metavar="KEY=VALUE", action="append", default=[],
                        help="extra environment for the server (the SDK passes only HOME LOGNAME PATH SHELL "
                        "TERM USER otherwise)")
    parser.add_argument("--cwd", help="working directory for the server")
    parser.add_argument("--server-stderr", metavar="FILE", help="append the server's stderr to FILE")
    parser.add_argument("--wire", action="store_true", help="include every JSON-RPC message in the transcript")
    parser.add_argument("--pretty", action="store_true", help="indent the JSON output")
    args = parser.parse_args(own)

    if not command:
        parser.error("missing server command after --")
    if len(args.args) > len(args.call):
        parser.error("--args without a preceding --call")
    # Pair each --args with the --call before it (argparse loses the interleaving).
    calls: list[tuple[str, dict[str, Any] | None]] = [(name, None) for name in args.call]
    call_idx = -1
    args_iter = iter(args.args)
    for token in own:
        if token == "--call" or token.startswith("--call="):
            call_idx += 1
        elif token == "--args" or token.startswith("--args="):
            if call_idx < 0:
                parser.error("--args without a preceding --call")
            if calls[call_idx][1] is not None:
                parser.error(f"two --args for --call {calls[call_idx][0]}")
            raw = next(args_iter)
            try:
                value = json.loads(raw)
            except ValueError as exc:
                parser.error(f"--args is not JSON: {exc}")
            if not isinstance(value, dict):
                parser.error("--args must be a JSON object")
            calls[call_idx] = (calls[call_idx][0], value)
    args.calls = calls
    for kv in args.env:
        if "=" not in kv:
            parser.error(f"--env needs KEY=VALUE, got {kv!r}")
    return args, command


def main(argv: list[str]) -> int:
    args, command = parse_args(argv)
    rec = Recorder(args.mode, args.wire)

    # Last resort: shutdown of the server process is bounded by the SDK (~6.5 s), but
    # if anything still hangs, print what we have and leave.
    def watchdog() -> None:
        rec.t["timed_out"] = True
        rec.t["errors"].append({"stage": rec.stage, "type": "Watchdog", "message": "client did not shut down"})
        rec.emit(args.pretty)
        os._exit(3)

    timer = threading.Timer(args.timeout + 15.0, watchdog)
    timer.daemon = True
    timer.start()
    try:
        anyio.run(main_async, args, command, rec)
    except BaseException as exc:  # noqa: BLE001 - KeyboardInterrupt included: still print
        rec.t["errors"].extend(error_entry(rec.stage, exc))
    timer.cancel()
    rec.emit(args.pretty)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
