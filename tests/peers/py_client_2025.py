"""Scripted 2025-era MCP client driver (PyPI `mcp` 1.30.0 `ClientSession`) for redmark's tests.

Run with the legacy venv made by scripts/setup-test-deps.sh:

    .cache/venv-legacy/bin/python tests/peers/py_client_2025.py URL SCRIPT_JSON

It opens a Streamable HTTP session (`initialize`, `Mcp-Session-Id`), runs the steps, and
ends the session with DELETE. SCRIPT_JSON is JSON text, `@path`, or `-` for stdin:

    {
      "steps": [ STEP, ... ],
      "elicitation": [ ANSWER, ... ],   # optional: present (even []) declares elicitation
      "headers": {...},                 # optional, sent on every HTTP request
      "protocol_version": "2025-06-18"  # optional: the version `initialize` asks for
    }

STEP: {"op": "list_tools"} | {"op": "call_tool", "name": ..., "arguments": {...}}
      | {"op": "ping"} | {"op": "set_level", "level": "debug"} | {"op": "list_prompts"}
      | {"op": "get_prompt", "name": ..., "arguments": {...}} | {"op": "list_resources"}
      | {"op": "read_resource", "uri": ...} | {"op": "sleep", "seconds": 0.5}
ANSWER: {"action": "accept", "content": {...}} | {"action": "decline"} | {"action": "cancel"}
      | {"error": {"code": ..., "message": ...}}; answered in order, "cancel" once used up.

Output, one JSON line per event: {"event": "initialized", "result": {...}, "session": "..."},
{"step": i, "op": ..., "ok": true|false, "result"|"error": ...},
{"event": "elicitation", "message": ..., "params": {...}, "answer": {...}},
{"event": "fatal", "error": {...}}.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from typing import Any

import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError


def emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def dump(model: Any) -> Any:
    if hasattr(model, "model_dump"):
        return model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return model


def error_of(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, McpError):
        e = exc.error
        err: dict[str, Any] = {"code": e.code, "message": e.message}
        if e.data is not None:
            err["data"] = e.data
        return err
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return error_of(exc.exceptions[0])
    return {"code": None, "message": str(exc), "type": type(exc).__name__}


def elicitation_callback(queue: list[dict[str, Any]]):
    answers = list(queue)

    async def on_elicit(context: Any, params: Any) -> types.ElicitResult | types.ErrorData:
        p = dump(params)
        answer = answers.pop(0) if answers else {"action": "cancel"}
        emit({"event": "elicitation", "message": p.get("message"), "requestedSchema": p.get("requestedSchema"),
              "mode": p.get("mode"), "params": p, "answer": answer})
        if "error" in answer:
            e = answer["error"]
            return types.ErrorData(code=e.get("code", -32603), message=e.get("message", ""))
        return types.ElicitResult(action=answer["action"], content=answer.get("content"))

    return on_elicit


async def run_step(s: ClientSession, step: dict[str, Any]) -> Any:
    op = step["op"]
    if op == "list_tools":
        return await s.list_tools()
    if op == "call_tool":
        return await s.call_tool(step["name"], step.get("arguments"))
    if op == "ping":
        return await s.send_ping()
    if op == "set_level":
        return await s.set_logging_level(step["level"])
    if op == "list_prompts":
        return await s.list_prompts()
    if op == "get_prompt":
        return await s.get_prompt(step["name"], step.get("arguments"))
    if op == "list_resources":
        return await s.list_resources()
    if op == "read_resource":
        return await s.read_resource(step["uri"])
    if op == "sleep":
        await asyncio.sleep(float(step.get("seconds", 0)))
        return {}
    raise ValueError(f"unknown op {op!r}")


async def run(url: str, script: dict[str, Any]) -> None:
    kwargs: dict[str, Any] = {"read_timeout_seconds": timedelta(seconds=float(script.get("timeout", 30)))}
    if "elicitation" in script:
        kwargs["elicitation_callback"] = elicitation_callback(script["elicitation"] or [])
    if "protocol_version" in script:
        types.LATEST_PROTOCOL_VERSION = script["protocol_version"]  # what `initialize` asks for
    try:
        async with streamablehttp_client(url, headers=script.get("headers") or None) as (r, w, session_id):
            async with ClientSession(r, w, **kwargs) as s:
                init = await s.initialize()
                emit({"event": "initialized", "result": dump(init), "session": session_id()})
                for i, step in enumerate(script["steps"]):
                    line: dict[str, Any] = {"step": i, "op": step["op"]}
                    try:
                        result = await run_step(s, step)
                    except Exception as exc:
                        emit({**line, "ok": False, "error": error_of(exc)})
                    else:
                        emit({**line, "ok": True, "result": dump(result)})
    except Exception as exc:
        emit({"event": "fatal", "error": error_of(exc)})


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        sys.stderr.write("usage: py_client_2025.py URL SCRIPT_JSON|@file|-\n")
        return 2
    arg = argv[2]
    text = sys.stdin.read() if arg == "-" else open(arg[1:], encoding="utf-8").read() if arg.startswith("@") else arg
    asyncio.run(run(argv[1], json.loads(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
