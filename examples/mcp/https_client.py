"""Call the handoff bridge over HTTPS signed by a private CA, with the MCP
Python SDK (the `mcp` package): it trusts only the CA in HANDOFF_CA_FILE
and authenticates with the ServiceAccount token in HANDOFF_TOKEN.

    HANDOFF_TOKEN="$(cat /var/run/secrets/handoff/token)" \
    HANDOFF_CA_FILE=/var/run/handoff-ca/ca.crt \
    python https_client.py https://handoff-bridge.handoff-system.svc:8080/mcp

Prints the names of the tools this identity sees, as JSON.
"""

import asyncio
import json
import os
import ssl
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url):
    trust = ssl.create_default_context(cafile=os.environ["HANDOFF_CA_FILE"])
    headers = {"Authorization": f"Bearer {os.environ['HANDOFF_TOKEN']}"}
    async with httpx2.AsyncClient(headers=headers, verify=trust, timeout=30) as http:
        async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
            listed = await client.list_tools()
    print(json.dumps([tool.name for tool in listed.tools]))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
