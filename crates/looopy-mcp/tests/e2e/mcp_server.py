"""An MCP server built with the official `mcp` package (MCPServer), for Looopy's MCP tests.

Tools: echo, progress (reports progress), slow (waits; writes $MCP_CANCEL_MARKER when the
client cancels it), fail (an error result), big (a large text), image (a PNG), crash (the
process exits, as a crashing server would), grow / shrink (add or remove a tool and send
notifications/tools/list_changed before answering), grow_later (the same, after the call
has answered: a change no call is waiting for), clear (removes every tool, itself too).

Usage: mcp_server.py            -> stdio
       mcp_server.py --http PORT -> streamable HTTP on 127.0.0.1:PORT/mcp
"""
import asyncio
import base64
import os
import sys

from mcp.server.mcpserver import Context, Image, MCPServer

server = MCPServer("looopy-test-server")

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


@server.tool()
def echo(text: str) -> str:
    """Returns the text it is given."""
    return f"echo: {text}"


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Counts to `steps`, reporting progress at every step."""
    for i in range(1, steps + 1):
        await asyncio.sleep(0.05)
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return f"counted to {steps}"


@server.tool()
async def slow(seconds: float) -> str:
    """Waits `seconds`."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        marker = os.environ.get("MCP_CANCEL_MARKER")
        if marker:
            with open(marker, "w") as f:
                f.write("cancelled")
        raise
    return "waited"


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("the tool failed on purpose")


@server.tool()
def big(kib: int) -> str:
    """Returns `kib` KiB of text."""
    return "x" * (kib * 1024)


@server.tool()
def image() -> Image:
    """Returns a tiny PNG."""
    return Image(data=PNG, format="png")


def _added(name: str):
    def added() -> str:
        return f"{name} is here"

    return added


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool called `name` and tells the client its tools changed."""
    server.add_tool(_added(name), name=name, description=f"A tool added at run time ({name}).")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
async def shrink(name: str, ctx: Context) -> str:
    """Removes the tool called `name` and tells the client its tools changed."""
    server.remove_tool(name)
    await ctx.session.send_tool_list_changed()
    return f"removed {name}"


_later = set()


@server.tool()
async def grow_later(name: str, seconds: float, ctx: Context) -> str:
    """Adds a tool called `name` `seconds` after answering, then tells the client."""
    session = ctx.session

    async def later():
        await asyncio.sleep(seconds)
        server.add_tool(_added(name), name=name, description=f"A tool added later ({name}).")
        await session.send_tool_list_changed()

    task = asyncio.get_running_loop().create_task(later())
    _later.add(task)
    task.add_done_callback(_later.discard)
    return f"adding {name} in {seconds} s"


@server.tool()
async def clear(ctx: Context) -> str:
    """Removes every tool, this one too."""
    for tool in await server.list_tools():
        server.remove_tool(tool.name)
    await ctx.session.send_tool_list_changed()
    return "cleared"


@server.tool()
def crash() -> str:
    """Exits the server process at once."""
    os._exit(3)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
