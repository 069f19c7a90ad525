"""One Python MCP client library through the cells of the client matrix
(tests/interop_clients.rs), used as its own users use it and without any LLM.

    python interop_py.py LIB MODE TARGET [MODE TARGET]...

LIB     session (PyPI `mcp` 1.x `ClientSession`), mcp2 (PyPI `mcp` 2.x `Client`),
        fastmcp (`fastmcp.Client`, 2.x or 4.x), pydantic_ai (2.x `MCPToolset`),
        pydantic_ai1 (1.x `MCPServerStreamableHTTP` / `MCPServerStdio`),
        openai_agents (`MCPServerStreamableHttp` / `MCPServerStdio`),
        langchain (`langchain_mcp_adapters` sessions and loaders)
MODE    control (straight at the server: no policy, so an answer is never re-asked)
        or redmark (through the gateway, whose policy re-asks a `name` that is not
        capitalised, once: max_reasks = 1)
TARGET  an http(s) URL, or a JSON list: the stdio command of the server
(several runs in one process, one after the other: one import of the library)

The server is tests/fixtures/interop_clients_server.py. Prints one JSON line per
cell, {"mode", "cell", "status": "pass" | "fail" | "unsupported", "detail"}, the
first {"cell": "negotiated", "version", "elicitation"}, the last `after` (five
plain calls after the early endings).
Always exits 0 once it ran: a broken cell is a line, not an exit code.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

sys.dont_write_bytecode = True  # no __pycache__ of peer_libs in the source tree
import peer_libs  # noqa: E402

CELL_TIMEOUT = 40


MODE = {"mode": "control"}


def emit(cell: str, status: str, **fields: Any) -> None:
    line = {"mode": MODE["mode"], "cell": cell, "status": status, **fields}
    sys.stdout.write(json.dumps(line, default=str) + "\n")
    sys.stdout.flush()


class Answers:
    """What the elicitation handler answers (a queue of names; then the last one
    again) and every message it was shown."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.seen: list[str] = []

    def next(self, message: str) -> dict[str, Any]:
        self.seen.append(message)
        name = self.names.pop(0) if len(self.names) > 1 else self.names[0]
        return {"action": "accept", "content": {"name": name}}


def error_text(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(error_text(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


async def cell(name: str, run) -> None:
    try:
        status, detail = await asyncio.wait_for(run(), CELL_TIMEOUT)
    except peer_libs.Unsupported as exc:
        status, detail = "unsupported", str(exc)
    except BaseException as exc:  # the cell failed; the next still runs
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        status, detail = "fail", error_text(exc)
    emit(name, status, detail=detail)


async def call_outcome(client, tool: str, args: dict[str, Any]) -> tuple[bool, str]:
    """(is_error, text) of a call, an exception raised for it counting as an error."""
    try:
        return await client.call(tool, args)
    except peer_libs.Unsupported:
        raise
    except Exception as exc:
        return True, error_text(exc)


async def main_cells(lib, mode: str, target: Any) -> None:
    answers = Answers()
    asks = lib.supports_elicitation
    async with lib.open(target, answers.next if asks else None) as client:
        emit("negotiated", "pass", version=client.version(), elicitation=asks)

        async def listed():
            names = await client.tools()
            ok = {"echo", "fail", "ask"} <= set(names)
            return ("pass" if ok else "fail"), sorted(names)

        async def called():
            is_error, text = await client.call("echo", {"text": "hi"})
            return ("pass" if not is_error and "echo: hi" in text else "fail"), text

        async def tool_error():
            is_error, text = await call_outcome(client, "fail", {"text": "x"})
            return ("pass" if is_error and "failed on purpose" in text else "fail"), text

        async def resource():
            text = await client.read("note://hello")
            return ("pass" if "hello from the fixture" in text else "fail"), text

        async def prompt():
            text = await client.prompt("greet", {"name": "Ada"})
            return ("pass" if "Hello, Ada!" in text else "fail"), text

        async def reask():
            if not asks:
                raise peer_libs.Unsupported("no elicitation handler API")
            answers.names, answers.seen = ["ada", "Ada"], []
            is_error, text = await call_outcome(client, "ask", {"tag": "reask"})
            if mode == "control":  # no policy: the first answer is taken
                ok = not is_error and '"ada"' in text and len(answers.seen) == 1
            else:
                ok = (
                    not is_error
                    and '"Ada"' in text
                    and len(answers.seen) == 2
                    and answers.seen[1] != answers.seen[0]
                )
            return ("pass" if ok else "fail"), {"result": text, "asked": answers.seen}

        async def run_out():
            if not asks:
                raise peer_libs.Unsupported("no elicitation handler API")
            if mode == "control":
                raise peer_libs.Unsupported("no policy without redmark")
            answers.names, answers.seen = ["ada"], []
            is_error, text = await call_outcome(client, "ask", {"tag": "run-out"})
            ok = is_error and len(answers.seen) == 2 and '"tag"' not in text
            return ("pass" if ok else "fail"), {"result": text, "asked": answers.seen}

        for name, run in [
            ("list", listed),
            ("call", called),
            ("tool_error", tool_error),
            ("resource", resource),
            ("prompt", prompt),
            ("reask", reask),
            ("run_out", run_out),
        ]:
            await cell(name, run)

        async def no_elicitation():
            async with lib.open(target, None) as bare:
                is_error, text = await call_outcome(bare, "ask", {"tag": "bare"})
                return ("pass" if is_error else "fail"), {"result": text, "version": bare.version()}

        async def after():
            # Plain calls after the early endings above (red marks run out, no capability).
            texts = []
            for i in range(5):
                is_error, text = await call_outcome(client, "echo", {"text": f"after {i}"})
                texts.append(text)
            ok = all(t == f"echo: after {i}" for i, t in enumerate(texts))
            return ("pass" if ok else "fail"), texts

        await cell("no_elicitation", no_elicitation)
        await cell("after", after)


def main(argv: list[str]) -> int:
    runs = list(zip(argv[2::2], argv[3::2]))
    if len(argv) < 4 or len(argv) % 2 or any(m not in ("control", "redmark") for m, _ in runs):
        sys.stderr.write("usage: interop_py.py LIB (control|redmark URL|COMMAND_JSON)...\n")
        return 2
    lib = peer_libs.library(argv[1])
    for mode, arg in runs:
        MODE["mode"] = mode
        target = arg if arg.startswith("http") else json.loads(arg)
        try:
            asyncio.run(main_cells(lib, mode, target))
        except BaseException as exc:
            if isinstance(exc, KeyboardInterrupt):
                raise
            emit("connect", "fail", detail=error_text(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
