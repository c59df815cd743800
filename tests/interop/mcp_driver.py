"""Drive `handoff mcp` with the real MCP Python SDK (the `mcp` package).

Usage:
    mcp_driver.py stdio COMMAND [ARG...]       < plan.json
    mcp_driver.py http URL [TOKEN] [PROFILE]   < plan.json

The plan is a JSON list of steps, run in order in one session:
    {"op": "list_tools"}
    {"op": "call", "tool": NAME, "args": {...}}
    {"op": "concurrent", "tool": NAME, "args_list": [{...}, ...]}   (all at once)
    {"op": "raw_post", "body": "...", "headers": {...}?}   (HTTP only: a raw POST to the endpoint)
Prints one JSON list with a result per step:
    {"tools": [...], "annotations": {...}}
    {"is_error": bool, "text": "...", "structured": {...} | null}
    {"exception": "..."}   (a protocol-level error raised by the SDK)
    {"results": [...]}     (concurrent: one call result each)
    {"status": N, "body": "..."}   (raw_post)
The Rust integration tests assert on this output.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


async def call(client, tool, args):
    try:
        result = await client.call_tool(tool, args)
    except Exception as exc:  # the SDK raises protocol errors as exceptions
        return {"exception": f"{type(exc).__name__}: {exc}"}
    text = "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
    return {"is_error": bool(result.is_error), "text": text, "structured": result.structured_content}


async def run_steps(client, plan, http=None, url=None):
    results = []
    for step in plan:
        try:
            if step["op"] == "list_tools":
                listed = await client.list_tools()
                results.append({
                    "tools": [t.name for t in listed.tools],
                    "annotations": {
                        t.name: (t.annotations.model_dump(exclude_none=True) if t.annotations else {})
                        for t in listed.tools
                    },
                    "output_schemas": {t.name: t.output_schema is not None for t in listed.tools},
                })
            elif step["op"] == "call":
                results.append(await call(client, step["tool"], step.get("args", {})))
            elif step["op"] == "concurrent":
                calls = [call(client, step["tool"], args) for args in step["args_list"]]
                results.append({"results": list(await asyncio.gather(*calls))})
            elif step["op"] == "raw_post":
                headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
                headers.update(step.get("headers", {}))
                response = await http.post(url, content=step["body"], headers=headers)
                results.append({"status": response.status_code, "body": response.text})
            else:
                results.append({"exception": f"unknown op {step['op']}"})
        except Exception as exc:  # the SDK raises protocol errors as exceptions
            results.append({"exception": f"{type(exc).__name__}: {exc}"})
    return results


async def main():
    mode = sys.argv[1]
    plan = json.load(sys.stdin)
    if mode == "stdio":
        server = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:], env=dict(os.environ))
        async with Client(server, mode="legacy") as client:
            results = await run_steps(client, plan)
    else:
        url = sys.argv[2]
        headers = {}
        if len(sys.argv) > 3 and sys.argv[3]:
            headers["Authorization"] = f"Bearer {sys.argv[3]}"
        if len(sys.argv) > 4 and sys.argv[4]:
            headers["X-Handoff-Profile"] = sys.argv[4]
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            if all(step["op"] == "raw_post" for step in plan):
                # No MCP session: raw requests test what happens before one (401, bad frames).
                results = await run_steps(None, plan, http, url)
            else:
                async with Client(streamable_http_client(url, http_client=http), cache=None) as client:
                    results = await run_steps(client, plan, http, url)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
