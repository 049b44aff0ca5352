"""The peer of benches/agui.rs: the same AG-UI turn served by pydantic-ai-slim's own AG-UI
adapter (`AGUIAdapter.dispatch_request`, Starlette + uvicorn), its model a local
`FunctionModel` streaming N one-character text deltas as fast as the loop takes them — the
turn Looopy's scripted model plays (`many_deltas`). No network beyond loopback.

    python agui_peer.py N    # prints `PORT <n>` once listening; ends when stdin closes
"""

import asyncio
import socket
import sys

import uvicorn
from pydantic_ai import Agent
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

DELTAS = int(sys.argv[1])


async def deltas(messages, info: AgentInfo):
    for _ in range(DELTAS):
        yield "x"


agent = Agent(FunctionModel(stream_function=deltas))


async def run(request: Request):
    return await AGUIAdapter.dispatch_request(request, agent=agent)


app = Starlette(routes=[Route("/agui", run, methods=["POST"])])


async def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    # The parent closes stdin (or dies): stop.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    server.should_exit = True
    await serving


asyncio.run(main())
