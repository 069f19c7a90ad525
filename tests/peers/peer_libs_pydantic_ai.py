"""pydantic-ai 2.x `MCPToolset` (tests/peers/peer_libs.py's face), driven
through the toolset's own methods (`list_tools`, `direct_call_tool`,
`read_resource`, `get_prompt`): no agent, no LLM."""

from __future__ import annotations

import contextlib
import json

from peer_libs import fastmcp_version, text_of


class Library:
    supports_elicitation = True

    @contextlib.asynccontextmanager
    async def open(self, target, answer):
        from pydantic_ai.mcp import MCPToolset, StdioTransport

        kwargs = {}
        if answer is not None:

            async def on_elicit(message, response_type, params, context):
                return answer(message)["content"]

            kwargs["elicitation_handler"] = on_elicit
        if isinstance(target, str):
            toolset = MCPToolset(target, tool_error_behavior="error", **kwargs)
        else:
            toolset = MCPToolset(StdioTransport(command=target[0], args=target[1:]), tool_error_behavior="error", **kwargs)
        async with toolset:
            yield Client(toolset)


class Client:
    def __init__(self, toolset) -> None:
        self.t = toolset

    def version(self):
        return fastmcp_version(getattr(self.t, "client", None))

    async def tools(self):
        return [t.name for t in await self.t.list_tools()]

    async def call(self, name, args):
        r = await self.t.direct_call_tool(name, args)
        return False, r if isinstance(r, str) else json.dumps(r, default=str)

    async def read(self, uri):
        r = await self.t.read_resource(uri)
        return r if isinstance(r, str) else json.dumps(r, default=str)

    async def prompt(self, name, args):
        r = await self.t.get_prompt(name, args)
        return "\n".join(text_of([m.content]) for m in r.messages)
