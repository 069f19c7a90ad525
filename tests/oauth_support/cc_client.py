"""A 2026-07-28 client that authorizes itself the way the spec says (PyPI
`mcp` 2.3.0, ClientCredentialsOAuthProvider): its first request gets redmark's
401, it follows `WWW-Authenticate: resource_metadata` to the Protected
Resource Metadata, from there to the authorization server's metadata, asks
the token endpoint for a client-credentials token with the `resource`
parameter (RFC 8707), and retries with it.

    python cc_client.py URL ISSUER CLIENT_ID CLIENT_SECRET SCOPE TOOL

Prints one JSON line: {"ok": true, "result": {...}, "requests": [...]}, where
requests lists "METHOD URL -> STATUS" of every HTTP request the client made,
or {"ok": false, "error": "..."}.
"""

import asyncio
import json
import sys

from mcp import Client
from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


class Memory:
    def __init__(self):
        self.tokens = None
        self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


async def main(url, issuer, client_id, secret, scope, tool):
    requests = []

    async def record(response):
        requests.append(f"{response.request.method} {response.request.url} -> {response.status_code}")

    provider = ClientCredentialsOAuthProvider(
        server_url=url,
        storage=Memory(),
        client_id=client_id,
        client_secret=secret,
        scope=scope,
        issuer=issuer,
    )
    async with create_mcp_http_client(auth=provider) as http:
        http.event_hooks["response"].append(record)
        try:
            async with Client(streamable_http_client(url, http_client=http), mode="2026-07-28", cache=None) as client:
                result = await client.call_tool(tool, {})
                print(json.dumps({"ok": True, "result": result.model_dump(by_alias=True, exclude_none=True, mode="json"), "requests": requests}))
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            print(json.dumps({"ok": False, "error": repr(exc), "requests": requests}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
