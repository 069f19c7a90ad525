"""langchain-mcp-adapters `MultiServerMCPClient` (tests/peers/peer_libs.py's
face): tools, resources and prompts through its loaders, the tools invoked
as LangChain tools (`ainvoke`), questions answered by `Callbacks(on_elicitation=...)`;
no agent, no LLM."""

from __future__ import annotations

import contextlib
import json

import mcp.types as types


class Library:
    supports_elicitation = True

    @contextlib.asynccontextmanager
    async def open(self, target, answer):
        from langchain_mcp_adapters.callbacks import Callbacks
        from langchain_mcp_adapters.client import MultiServerMCPClient

        if isinstance(target, str):
            conn = {"transport": "streamable_http", "url": target}
        else:
            conn = {"transport": "stdio", "command": target[0], "args": target[1:]}
        callbacks = None
        if answer is not None:

            async def on_elicitation(mcp_context, params, context):
                return types.ElicitResult(**answer(params.message))

            callbacks = Callbacks(on_elicitation=on_elicitation)
        client = MultiServerMCPClient({"fixture": conn}, callbacks=callbacks)
        async with client.session("fixture") as session:
            yield Client(session)


def stringify(value) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return "\n".join(stringify(v) for v in value)
    if isinstance(value, dict) and "text" in value:
        return value["text"]
    return getattr(value, "text", None) or getattr(value, "content", None) or json.dumps(value, default=str)


class Client:
    def __init__(self, session) -> None:
        self.s = session
        self._tools = None

    def version(self):
        return None

    async def loaded(self):
        from langchain_mcp_adapters.tools import load_mcp_tools

        if self._tools is None:
            self._tools = {t.name: t for t in await load_mcp_tools(self.s)}
        return self._tools

    async def tools(self):
        return list(await self.loaded())

    async def call(self, name, args):
        tool = (await self.loaded())[name]
        # Invoked with a tool call, as an agent does: a ToolMessage with a status.
        msg = await tool.ainvoke({"type": "tool_call", "name": name, "args": args, "id": "call-1"})
        return msg.status == "error", stringify(msg.content)

    async def read(self, uri):
        from langchain_mcp_adapters.resources import load_mcp_resources

        blobs = await load_mcp_resources(self.s, uris=[uri])
        return "\n".join(b.as_string() for b in blobs)

    async def prompt(self, name, args):
        from langchain_mcp_adapters.prompts import load_mcp_prompt

        return "\n".join(stringify(m.content) for m in await load_mcp_prompt(self.s, name, arguments=args))
