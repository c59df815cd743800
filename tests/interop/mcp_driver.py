"""Drive `handoff mcp` with the real MCP Python SDK (the `mcp` package).

Usage:
    mcp_driver.py stdio COMMAND [ARG...]       < plan.json
    mcp_driver.py http URL [TOKEN] [PROFILE]   < plan.json

The plan is a JSON list of steps, run in order in one session:
    {"op": "list_tools"}
    {"op": "call", "tool": NAME, "args": {...}}
    {"op": "concurrent", "tool": NAME, "args_list": [{...}, ...]}   (all at once)
    {"op": "raw_post", "body": "...", "headers": {...}?}   (HTTP only: a raw POST to the endpoint)
    {"op": "load", "agents": N, "calls": M, "project": P}   (N concurrent agents × M mixed calls)
    {"op": "capabilities"}                          (what the server advertised)
    {"op": "list_resources"}
    {"op": "list_resource_templates"}
    {"op": "read_resource", "uri": URI}
    {"op": "list_prompts"}
    {"op": "get_prompt", "name": NAME, "args": {...}}
Prints one JSON list with a result per step:
    {"tools": [...], "annotations": {...}}
    {"is_error": bool, "text": "...", "structured": {...} | null}
    {"exception": "..."}   (a protocol-level error raised by the SDK)
    {"results": [...]}     (concurrent: one call result each)
    {"status": N, "body": "..."}   (raw_post)
    {"capabilities": {...}}        (capabilities: the advertised ones, by name)
    {"resources": [...]}           (list_resources: uris)
    {"templates": [{"uri_template", "name", "mime_type"}]}
    {"contents": [{"uri", "mime_type", "text"}]}   (read_resource)
    {"prompts": [{"name", "arguments": [{"name", "required"}]}]}
    {"messages": [{"role", "text"}]}   (get_prompt)
    {"error": {"code": N, "message": "..."}}   (resources/prompts: the MCP error)
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


def mcp_error(exc):
    """An MCP error as {"error": {code, message}}; anything else as an exception."""
    error = getattr(exc, "error", None)
    if error is None:
        return {"exception": f"{type(exc).__name__}: {exc}"}
    return {"error": {"code": error.code, "message": error.message}}


async def resources_and_prompts(client, step):
    """The steps on resources and prompts; None for any other op."""
    op = step["op"]
    try:
        if op == "capabilities":
            caps = client.server_capabilities.model_dump(exclude_none=True)
            return {"capabilities": caps}
        if op == "list_resources":
            listed = await client.list_resources()
            return {"resources": [str(r.uri) for r in listed.resources]}
        if op == "list_resource_templates":
            listed = await client.list_resource_templates()
            return {"templates": [
                {"uri_template": t.uri_template, "name": t.name, "mime_type": t.mime_type}
                for t in listed.resource_templates
            ]}
        if op == "read_resource":
            read = await client.read_resource(step["uri"])
            return {"contents": [
                {"uri": str(c.uri), "mime_type": c.mime_type, "text": getattr(c, "text", None)}
                for c in read.contents
            ]}
        if op == "list_prompts":
            listed = await client.list_prompts()
            return {"prompts": [
                {"name": p.name,
                 "arguments": [{"name": a.name, "required": a.required} for a in (p.arguments or [])]}
                for p in listed.prompts
            ]}
        if op == "get_prompt":
            got = await client.get_prompt(step["name"], step.get("args", {}))
            return {"messages": [
                {"role": m.role, "text": getattr(m.content, "text", None)} for m in got.messages
            ]}
    except Exception as exc:  # the SDK raises protocol errors as exceptions
        return mcp_error(exc)
    return None


async def load(client, agents, calls, project):
    """N agents, each M calls mixing write/get/list on keys of its own; returns
    the unexpected errors and the last acknowledged body of every key."""
    errors = []
    acknowledged = {}

    async def agent(i):
        for j in range(calls):
            key = f"load-{i}-{j % 7}"
            kind = j % 4
            if kind in (0, 1):
                body = f"agent {i} call {j}"
                r = await call(client, "write_handoff", {"handoff_key": key, "project": project, "body": body})
                if r.get("is_error") or "exception" in r:
                    errors.append(r)
                else:
                    acknowledged[key] = body
            elif kind == 2:
                r = await call(client, "get_handoff", {"handoff_key": key})
                if r.get("is_error") or "exception" in r:
                    errors.append(r)
            else:
                r = await call(client, "list_handoffs", {"project": project, "limit": 20})
                if r.get("is_error") or "exception" in r:
                    errors.append(r)

    await asyncio.gather(*(agent(i) for i in range(agents)))
    return {"errors": errors[:20], "error_count": len(errors), "acknowledged": acknowledged}


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
            elif step["op"] == "load":
                results.append(await load(client, step["agents"], step["calls"], step["project"]))
            elif step["op"] == "raw_post":
                headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
                headers.update(step.get("headers", {}))
                response = await http.post(url, content=step["body"], headers=headers)
                results.append({"status": response.status_code, "body": response.text})
            else:
                answered = await resources_and_prompts(client, step)
                if answered is None:
                    answered = {"exception": f"unknown op {step['op']}"}
                results.append(answered)
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
