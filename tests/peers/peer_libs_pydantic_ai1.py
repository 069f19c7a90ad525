"""pydantic-ai 1.x `MCPServerStreamableHTTP` / `MCPServerStdio`
(tests/peers/peer_libs.py's face), driven through the server object's own
methods (`list_tools`, `direct_call_tool`, `read_resource`, `get_prompt`):
no agent, no LLM. Its `elicitation_callback` is the `mcp` ClientSession's."""

from __future__ import annotations

import contextlib

from peer_libs import elicit_result
from peer_libs_pydantic_ai import Client as ToolsetClient


class Library:
    supports_elicitation = True

    @contextlib.asynccontextmanager
    async def open(self, target, answer):
        from pydantic_ai.mcp import MCPServerStdio, MCPServerStreamableHTTP

        kwargs = {}
        if answer is not None:

            async def on_elicit(context, params):
                return elicit_result(answer, params)

            kwargs["elicitation_callback"] = on_elicit
        if isinstance(target, str):
            server = MCPServerStreamableHTTP(target, **kwargs)
        else:
            server = MCPServerStdio(target[0], args=target[1:], **kwargs)
        async with server:
            yield Client(server)


class Client(ToolsetClient):
    def version(self):
        return None
