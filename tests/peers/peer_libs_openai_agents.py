"""openai-agents `MCPServerStreamableHttp` / `MCPServerStdio`
(tests/peers/peer_libs.py's face), driven through the server object's own
methods: no agent, no LLM. It has no elicitation handler API."""

from __future__ import annotations

import contextlib

from peer_libs import SessionClient, Unsupported


class Library:
    supports_elicitation = False

    @contextlib.asynccontextmanager
    async def open(self, target, answer):
        from agents.mcp import MCPServerStdio, MCPServerStreamableHttp

        if answer is not None:
            raise Unsupported("no elicitation handler API")
        if isinstance(target, str):
            server = MCPServerStreamableHttp(params={"url": target})
        else:
            server = MCPServerStdio(params={"command": target[0], "args": target[1:]})
        async with server:
            yield Client(server)


class Client(SessionClient):
    def __init__(self, server) -> None:
        super().__init__(server, None)

    def version(self):
        session = getattr(self.s, "session", None)
        for attr in ("protocol_version", "negotiated_version"):
            v = getattr(session, attr, None)
            if isinstance(v, str):
                return v
        return None

    async def tools(self):
        return [t.name for t in await self.s.list_tools()]

    async def read(self, uri):
        r = await self.s.read_resource(uri)
        return "\n".join(getattr(c, "text", "") for c in r.contents)
