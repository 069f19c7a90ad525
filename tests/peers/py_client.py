"""Scripted MCP client driver (PyPI `mcp` 2.3.0) for redmark's integration tests.

Run with the client venv made by scripts/setup-test-deps.sh:

    .cache/venv-client/bin/python tests/peers/py_client.py URL SCRIPT_JSON

SCRIPT_JSON is JSON text, `@path` to read it from a file, or `-` for stdin. It is either
a list of steps, or an object:

    {
      "steps": [ STEP, ... ],                      # required
      "elicitation": [ ANSWER, ... ],              # optional; see below
      "headers": {"Authorization": "Bearer ..."},  # optional; sent on every HTTP request
      "mode": "2026-07-28",                        # optional Client(mode=): "2026-07-28" (default), "auto", "legacy"
      "timeout": 30,                               # optional per-request read timeout, seconds
      "cache": false,                              # optional; true keeps the SDK's response cache
      "client_info": {"name": "...", "version": "..."}  # optional
    }

STEP is one of
    {"op": "list_tools"}                 {"op": "call_tool", "name": "echo", "arguments": {...}}
    {"op": "discover"}                   {"op": "list_prompts"}     {"op": "list_resources"}
    {"op": "read_resource", "uri": ...}  {"op": "get_prompt", "name": ..., "arguments": {...}}
    {"op": "sleep", "seconds": 0.5}
Any step may carry "meta": {...} (sent as params._meta, where the op supports it) and
"id": anything (echoed back on its output line).

ANSWER is {"action": "accept", "content": {...}} | {"action": "decline"} | {"action": "cancel"}
| {"error": {"code": -32600, "message": "..."}}; the elicitation callback answers requests in
order. If the "elicitation" key is absent the client registers no callback and so declares NO
elicitation capability; present (even as []) it declares {"form": {}, "url": {}}. A request that
arrives after the queue is used up is answered "cancel" (its output line says "exhausted": true).

Output: one JSON line per event on stdout, in the order they happen:
    {"step": i, "op": ..., "ok": true,  "result": {...}}            # model_dump(by_alias, exclude_none)
    {"step": i, "op": ..., "ok": false, "error": {"code": .., "message": .., "data": ..}}
    {"event": "elicitation", "message": .., "requestedSchema": .., "mode": .., "params": {...}, "answer": {...}}
    {"event": "fatal", "error": {...}}                              # the connection itself broke
Errors that are not JSON-RPC errors (validation of a bad result, transport failures) have
"code": null and a "type" naming the exception class.

Exit status: 0 whenever the script ran (step errors and a broken connection are reported as
lines, not exit codes); 2 for bad arguments or an unparseable script.

SDK behaviours worth knowing when asserting on what a server sees:
  * mode "2026-07-28" adopts the version without any handshake or server/discover probe;
    every request carries MCP-Protocol-Version, Mcp-Method (and Mcp-Name for tools/call,
    prompts/get, resources/read) headers and params._meta with the protocol version,
    clientInfo and clientCapabilities.
  * call_tool on a tool this client has not listed yet is followed by a tools/list (the SDK
    fetches output schemas to validate structured content).
  * An InputRequiredResult from tools/call is driven automatically: each embedded
    elicitation goes through the callback and the call is retried with inputResponses.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import mcp.types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def dump(model: Any) -> Any:
    if hasattr(model, "model_dump"):
        return model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return model


def error_of(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, MCPError):
        err: dict[str, Any] = {"code": exc.code, "message": exc.message}
        if exc.data is not None:
            err["data"] = exc.data
        return err
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return error_of(exc.exceptions[0])
    return {"code": None, "message": str(exc), "type": type(exc).__name__}


OPS = {"list_tools", "call_tool", "discover", "list_prompts", "list_resources", "read_resource", "get_prompt", "sleep"}


def load_script(arg: str) -> dict[str, Any]:
    if arg == "-":
        text = sys.stdin.read()
    elif arg.startswith("@"):
        with open(arg[1:], encoding="utf-8") as f:
            text = f.read()
    else:
        text = arg
    script = json.loads(text)
    if isinstance(script, list):
        script = {"steps": script}
    if not isinstance(script, dict) or not isinstance(script.get("steps"), list):
        raise ValueError("script must be a list of steps or an object with a 'steps' list")
    for step in script["steps"]:
        if not isinstance(step, dict) or step.get("op") not in OPS:
            raise ValueError(f"bad step {step!r}: op must be one of {sorted(OPS)}")
    return script


def make_elicitation_callback(queue: list[dict[str, Any]]):
    answers = list(queue)

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult | types.ErrorData:
        p = dump(params)
        exhausted = not answers
        answer = answers.pop(0) if answers else {"action": "cancel"}
        line: dict[str, Any] = {
            "event": "elicitation",
            "message": p.get("message"),
            "requestedSchema": p.get("requestedSchema"),
            "mode": p.get("mode"),
            "params": p,
            "answer": answer,
        }
        if exhausted:
            line["exhausted"] = True
        emit(line)
        if "error" in answer:
            e = answer["error"]
            return types.ErrorData(code=e.get("code", -32603), message=e.get("message", ""), data=e.get("data"))
        return types.ElicitResult(action=answer["action"], content=answer.get("content"))

    return on_elicit


async def run_step(client: Client, step: dict[str, Any]) -> Any:
    op = step.get("op")
    meta = step.get("meta")
    if op == "list_tools":
        return await client.list_tools(cursor=step.get("cursor"), meta=meta)
    if op == "call_tool":
        return await client.call_tool(step["name"], step.get("arguments"), meta=meta)
    if op == "discover":
        return await client.session.discover()
    if op == "list_prompts":
        return await client.list_prompts(cursor=step.get("cursor"), meta=meta)
    if op == "list_resources":
        return await client.list_resources(cursor=step.get("cursor"), meta=meta)
    if op == "read_resource":
        return await client.read_resource(step["uri"], meta=meta)
    if op == "get_prompt":
        return await client.get_prompt(step["name"], step.get("arguments"), meta=meta)
    if op == "sleep":
        await asyncio.sleep(float(step.get("seconds", 0)))
        return {}
    raise AssertionError(f"unknown op {op!r}")  # load_script rejects these up front


async def run(url: str, script: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"mode": script.get("mode", "2026-07-28")}
    if "elicitation" in script:
        kwargs["elicitation_callback"] = make_elicitation_callback(script["elicitation"] or [])
    if script.get("timeout") is not None:
        kwargs["read_timeout_seconds"] = float(script["timeout"])
    if not script.get("cache", False):
        kwargs["cache"] = None  # every step reaches the server
    info = script.get("client_info") or {"name": "redmark-py-client", "version": "0"}
    kwargs["client_info"] = types.Implementation(**info)

    async with create_mcp_http_client(headers=script.get("headers") or None) as http:
        transport = streamable_http_client(url, http_client=http)
        try:
            async with Client(transport, **kwargs) as client:
                for i, step in enumerate(script["steps"]):
                    line: dict[str, Any] = {"step": i, "op": step.get("op")}
                    if "id" in step:
                        line["id"] = step["id"]
                    try:
                        result = await run_step(client, step)
                    except Exception as exc:  # reported, not fatal: the next step still runs
                        emit({**line, "ok": False, "error": error_of(exc)})
                    else:
                        emit({**line, "ok": True, "result": dump(result)})
        except Exception as exc:  # the connection broke (ExceptionGroup from the transport's task group)
            emit({"event": "fatal", "error": error_of(exc)})


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: py_client.py URL SCRIPT_JSON|@file|-\n")
        return 2
    try:
        script = load_script(argv[2])
    except (ValueError, OSError) as exc:
        sys.stderr.write(f"py_client.py: bad script: {exc}\n")
        return 2
    asyncio.run(run(argv[1], script))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
