"""Many idle 2025-era clients in one process (PyPI `mcp` 1.30.0 `ClientSession` over
Streamable HTTP), for redmark's test that idle clients cost no upstream session.

    .cache/venv-legacy/bin/python tests/peers/py_idle_2025.py URL N TOOL

Opens N sessions at once, each with its own HTTP client, and waits until every one
has initialized and its standalone GET stream (which the SDK opens by itself right
after `notifications/initialized`) answered 200. Then prints

    {"event": "ready", "sessions": N, "get_streams": N}

and waits, idle, for a line on stdin. On it every session calls TOOL (no arguments)
with its GET stream still open, and the driver prints

    {"event": "called", "ok": K, "errors": [...]}

then ends every session (DELETE) and exits. {"event": "fatal", "error": ...} and
exit status 1 if a session could not be opened.
"""

from __future__ import annotations

import asyncio
import json
import sys

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def emit(event: dict) -> None:
    print(json.dumps(event), flush=True)


async def one(url: str, tool: str, ready: asyncio.Queue, go: asyncio.Event, called: asyncio.Queue, done: asyncio.Event) -> None:
    get_open = asyncio.Event()

    async def on_response(response: httpx.Response) -> None:
        if response.request.method == "GET" and response.status_code == 200:
            get_open.set()

    http = httpx.AsyncClient(timeout=httpx.Timeout(60, read=600), event_hooks={"response": [on_response]})
    async with http:
        async with streamable_http_client(url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await asyncio.wait_for(get_open.wait(), 60)
                await ready.put(None)
                await go.wait()
                try:
                    result = await session.call_tool(tool, {})
                    error = f"tool error: {result.content}" if result.isError else None
                except Exception as e:  # noqa: BLE001 - reported, not raised
                    error = f"{type(e).__name__}: {e}"
                await called.put(error)
                # Every session stays connected until all have called.
                await done.wait()


async def gather_n(queue: asyncio.Queue, n: int, tasks: list[asyncio.Task]) -> list | str:
    """n items from `queue`, or why not (a task ended first, or two minutes passed)."""
    items: list = []
    while len(items) < n:
        getter = asyncio.create_task(queue.get())
        finished, _ = await asyncio.wait([getter, *tasks], timeout=120, return_when=asyncio.FIRST_COMPLETED)
        if getter in finished:
            items.append(getter.result())
            continue
        getter.cancel()
        failed = [t for t in tasks if t.done()]
        if failed:
            return repr(failed[0].exception())
        return f"only {len(items)} of {n} in time"
    return items


async def main() -> int:
    url, n, tool = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ready: asyncio.Queue = asyncio.Queue()
    called: asyncio.Queue = asyncio.Queue()
    go, done = asyncio.Event(), asyncio.Event()
    tasks = [asyncio.create_task(one(url, tool, ready, go, called, done)) for _ in range(n)]
    opened = await gather_n(ready, n, tasks)
    if isinstance(opened, str):
        emit({"event": "fatal", "error": opened})
        for t in tasks:
            t.cancel()
        return 1
    emit({"event": "ready", "sessions": n, "get_streams": len(opened)})
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    go.set()
    results = await gather_n(called, n, tasks)
    if isinstance(results, str):
        emit({"event": "fatal", "error": results})
        for t in tasks:
            t.cancel()
        return 1
    errors = [e for e in results if e is not None]
    emit({"event": "called", "ok": n - len(errors), "errors": errors[:5]})
    done.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
