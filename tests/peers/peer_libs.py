"""The Python client libraries of tests/peers/interop_py.py, each behind the
same small face: `open(target, answer)` (an async context manager; `answer` is
None for a client that declares no elicitation, else a function from the
question's message to {"action", "content"}) giving an object with `tools()`,
`call(name, args) -> (is_error, text)`, `read(uri)`, `prompt(name, args)` and
`version()` (the protocol version the library negotiated, where it tells).

Each library is used through its own public API, as its users do."""

from __future__ import annotations

import contextlib
import importlib
import json
from typing import Any


class Unsupported(Exception):
    """The library has no API for this at all."""


def text_of(content: Any) -> str:
    parts = []
    for c in content or []:
        t = getattr(c, "text", None)
        if t is None and isinstance(c, dict):
            t = c.get("text")
        parts.append(t if t is not None else json.dumps(c, default=str))
    return "\n".join(parts)


def stdio_params(command: list[str]):
    from mcp import StdioServerParameters

    return StdioServerParameters(command=command[0], args=command[1:])


def elicit_result(answer, params: Any):
    import mcp.types as types

    return types.ElicitResult(**answer(params.message))


class SessionClient:
    """PyPI `mcp` 1.x ClientSession (also the host of mcp-remote)."""

    def __init__(self, session, init) -> None:
        self.s = session
        self.init = init

    def version(self):
        return self.init.protocolVersion

    async def tools(self):
        return [t.name for t in (await self.s.list_tools()).tools]

    async def call(self, name, args):
        r = await self.s.call_tool(name, args)
        return bool(getattr(r, "isError", None) or getattr(r, "is_error", None)), text_of(r.content)

    async def read(self, uri):
        from pydantic import AnyUrl

        r = await self.s.read_resource(AnyUrl(uri))
        return "\n".join(getattr(c, "text", "") for c in r.contents)

    async def prompt(self, name, args):
        r = await self.s.get_prompt(name, args)
        return "\n".join(text_of([m.content]) for m in r.messages)


class Session:
    supports_elicitation = None  # decided from the installed ClientSession

    def __init__(self) -> None:
        import inspect

        from mcp import ClientSession

        params = inspect.signature(ClientSession.__init__).parameters
        Session.supports_elicitation = "elicitation_callback" in params

    @contextlib.asynccontextmanager
    async def open(self, target, answer):
        from mcp import ClientSession

        kwargs = {}
        if answer is not None:
            if not self.supports_elicitation:
                raise Unsupported("ClientSession has no elicitation_callback")

            async def on_elicit(context, params):
                return elicit_result(answer, params)

            kwargs["elicitation_callback"] = on_elicit
        async with contextlib.AsyncExitStack() as stack:
            if isinstance(target, str):
                from mcp.client import streamable_http as sh

                connect = getattr(sh, "streamable_http_client", None) or sh.streamablehttp_client
                streams = await stack.enter_async_context(connect(target))
            else:
                from mcp.client.stdio import stdio_client

                streams = await stack.enter_async_context(stdio_client(stdio_params(target)))
            s = await stack.enter_async_context(ClientSession(streams[0], streams[1], **kwargs))
            init = await s.initialize()
            yield SessionClient(s, init)


class Mcp2:
    """PyPI `mcp` 2.x `Client`, in its default version negotiation."""

    supports_elicitation = True

    @contextlib.asynccontextmanager
    async def open(self, target, answer):
        from mcp import Client

        kwargs: dict[str, Any] = {}
        if answer is not None:

            async def on_elicit(context, params):
                return elicit_result(answer, params)

            kwargs["elicitation_callback"] = on_elicit
        if isinstance(target, str):
            from mcp.client.streamable_http import streamable_http_client

            transport = streamable_http_client(target)
        else:
            from mcp.client.stdio import stdio_client

            transport = stdio_client(stdio_params(target))
        async with Client(transport, **kwargs) as c:
            yield Mcp2Client(c)


class Mcp2Client(SessionClient):
    def __init__(self, c) -> None:
        super().__init__(c, None)

    def version(self):
        for attr in ("protocol_version", "negotiated_version", "version"):
            v = getattr(self.s, attr, None)
            if isinstance(v, str):
                return v
        return None

    async def read(self, uri):
        r = await self.s.read_resource(uri)
        return "\n".join(getattr(c, "text", "") for c in r.contents)


class FastMcp:
    """`fastmcp.Client` (2.x and 4.x)."""

    supports_elicitation = True

    @contextlib.asynccontextmanager
    async def open(self, target, answer):
        import fastmcp

        kwargs: dict[str, Any] = {}
        if answer is not None:

            async def on_elicit(message, response_type, params, context):
                got = answer(message)
                return got["content"]

            kwargs["elicitation_handler"] = on_elicit
        if isinstance(target, str):
            transport = target
        else:
            from fastmcp.client.transports import StdioTransport

            transport = StdioTransport(command=target[0], args=target[1:])
        async with fastmcp.Client(transport, **kwargs) as c:
            yield FastMcpClient(c)


def fastmcp_version(c) -> str | None:
    """fastmcp 4: `protocol_version`; fastmcp 2: the InitializeResult's."""
    v = getattr(c, "protocol_version", None)
    if isinstance(v, str):
        return v
    return getattr(getattr(c, "initialize_result", None), "protocolVersion", None)


class FastMcpClient:
    def __init__(self, c) -> None:
        self.c = c

    def version(self):
        return fastmcp_version(self.c)

    async def tools(self):
        return [t.name for t in await self.c.list_tools()]

    async def call(self, name, args):
        r = await self.c.call_tool(name, args, raise_on_error=False)
        return bool(r.is_error), text_of(r.content)

    async def read(self, uri):
        return "\n".join(getattr(c, "text", "") for c in await self.c.read_resource(uri))

    async def prompt(self, name, args):
        r = await self.c.get_prompt(name, args)
        return "\n".join(text_of([m.content]) for m in r.messages)


LIBS = {"session": Session, "mcp2": Mcp2, "fastmcp": FastMcp}


def library(name: str):
    if name not in LIBS:
        module = importlib.import_module(f"peer_libs_{name}")
        return module.Library()
    return LIBS[name]()
