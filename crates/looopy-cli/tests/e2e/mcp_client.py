"""An MCP client built with the official `mcp` package, for Looopy's MCP server tests.

It connects to Looopy, lists its tools, asks the built-in scripted model a sum (with a
progress callback), asks it to ask a question and answers that question in the same
context, and sends malformed arguments; then prints one JSON object with what it saw, for
the Rust test (`tests/mcp_python.rs`) to check.

Usage: mcp_client.py stdio LOOOPY [ARGS...]  -> starts `LOOOPY mcp ARGS` (env inherited)
       mcp_client.py http URL TOKEN          -> streamable HTTP with a bearer token
"""
import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def texts(result):
    return "".join(getattr(block, "text", "") for block in result.content)


def summary(result):
    return {
        "text": texts(result),
        "isError": bool(result.is_error),
        "structured": result.structured_content,
    }


async def exercise(read, write):
    async with ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        progress = []

        async def on_progress(value, total, message):
            progress.append({"progress": value, "total": total, "message": message})

        sum_result = await session.call_tool(
            "ask", {"message": "What is 6*7?"}, progress_callback=on_progress
        )
        asked = await session.call_tool("ask", {"message": "ask me something"})
        context = (asked.structured_content or {}).get("contextId")
        answered = await session.call_tool("ask", {"message": "Grace", "contextId": context})
        malformed = await session.call_tool("ask", {"context_id": "oops"})
        return {
            "server": init.server_info.name,
            "tools": [
                {"name": t.name, "inputSchema": t.input_schema, "outputSchema": t.output_schema}
                for t in listed.tools
            ],
            "sum": summary(sum_result),
            "progress": progress,
            "asked": summary(asked),
            "answered": summary(answered),
            "malformed": summary(malformed),
        }


async def main():
    mode = sys.argv[1]
    if mode == "stdio":
        # The whole environment (the SDK passes only a safe subset by default): the test
        # points LOOOPY_DB and HOME at its temp dir.
        params = StdioServerParameters(
            command=sys.argv[2], args=["mcp", *sys.argv[3:]], env=dict(os.environ)
        )
        # The server's own notes go to its stderr, which is ours.
        async with stdio_client(params) as (read, write):
            out = await exercise(read, write)
    elif mode == "http":
        url, token = sys.argv[2], sys.argv[3]
        client = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with client:
            async with streamable_http_client(url, http_client=client) as (read, write):
                out = await exercise(read, write)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
