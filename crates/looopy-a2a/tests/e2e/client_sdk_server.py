"""A helloworld-style A2A agent built with the official Python SDK's server components
(a2a-sdk 1.x: DefaultRequestHandler, JSON-RPC and REST routes, agent card route), served by
uvicorn on a loopback port. The Looopy A2A client tests talk to it.

Usage: client_sdk_server.py [--mode normal|v03-only|reject-v1] [--token T]

Prints `listening on http://127.0.0.1:PORT` once it serves. What the agent does with a
message (its text):
  - "ask ..."     -> INPUT_REQUIRED with a question; the follow-up (same task) completes
                     with "Thanks, <answer>!"
  - "slow ..."    -> 200 chunks, 50 ms apart (time to cancel)
  - "direct ..."  -> one direct Message, no task
  - anything else -> "Hello, <text>!" streamed as an artifact in 3 chunks, then COMPLETED

Modes: `normal` declares JSON-RPC 1.0, HTTP+JSON 1.0, JSON-RPC 0.3 (the SDK's v0.3
compatibility) and, when `a2a-sdk[grpc]` is installed, gRPC 1.0 (a `host:port` target, as
the SDK writes it) in its card; `v03-only` declares only JSON-RPC 0.3; `reject-v1` declares
JSON-RPC 1.0 only but answers every v1.0 call with VersionNotSupportedError (-32009), as a
server that has not upgraded would, while still serving v0.3 on the same URL.
"""

import argparse
import asyncio
import json
import socket
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse

from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    create_agent_card_routes,
    create_jsonrpc_routes,
    create_rest_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Role,
    TaskState,
)

V1_METHODS = {
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
}


class HelloExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input().strip()
        if text.startswith("direct"):
            await event_queue.enqueue_event(
                new_text_message(f"Direct: {text}", role=Role.ROLE_AGENT)
            )
            return
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        # A follow-up to the question asked below.
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.start_work()
            await updater.add_artifact(
                [Part(text=f"Thanks, {text}!")], artifact_id="answer", name="answer",
                last_chunk=True,
            )
            await updater.complete()
            return
        await updater.start_work()
        if text.startswith("ask"):
            question = updater.new_agent_message([Part(text="What is your name?")])
            await updater.requires_input(question)
            return
        if text.startswith("slow"):
            for i in range(200):
                await updater.add_artifact(
                    [Part(text=f"chunk {i} ")], artifact_id="answer", name="answer",
                    append=i > 0,
                )
                await asyncio.sleep(0.05)
            await updater.complete()
            return
        chunks = ["Hello, ", text, "!"]
        for i, chunk in enumerate(chunks):
            await updater.add_artifact(
                [Part(text=chunk)], artifact_id="answer", name="answer",
                append=i > 0, last_chunk=i == len(chunks) - 1,
            )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            return
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.cancel()


class RejectV1:
    """ASGI middleware: v1.0 JSON-RPC calls get VersionNotSupportedError."""

    def __init__(self, app, rpc_path):
        self.app = app
        self.rpc_path = rpc_path

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] != self.rpc_path:
            return await self.app(scope, receive, send)
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            request = json.loads(body)
        except ValueError:
            request = {}
        if isinstance(request, dict) and request.get("method") in V1_METHODS:
            response = JSONResponse({
                "jsonrpc": "2.0",
                "id": request.get("id"),
                "error": {
                    "code": -32009,
                    "message": "Protocol version 1.0 is not supported; use 0.3",
                    "data": [{
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "VERSION_NOT_SUPPORTED",
                        "domain": "a2a-protocol.org",
                    }],
                },
            })
            return await response(scope, receive, send)
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)


class Bearer:
    """ASGI middleware: every route but the card needs `Authorization: Bearer <token>`."""

    def __init__(self, app, token):
        self.app = app
        self.token = token

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and not scope["path"].startswith("/.well-known/"):
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {self.token}":
                response = JSONResponse({"error": {"message": "missing or wrong token"}}, 401)
                return await response(scope, receive, send)
        return await self.app(scope, receive, send)


async def amain() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", default="normal", choices=["normal", "v03-only", "reject-v1"])
    parser.add_argument("--token")
    args = parser.parse_args()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    # Listening before the line is printed: connections queue until uvicorn accepts them.
    sock.listen(128)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    rpc_path, rest_path = "/rpc", "/rest"
    grpc_server = None
    if args.mode == "normal":
        try:
            import grpc
            from a2a.server.request_handlers import GrpcHandler
            from a2a.types import a2a_pb2_grpc

            grpc_server = grpc.aio.server()
            grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
        except ImportError:
            grpc_server = None

    interfaces = {
        "normal": [
            AgentInterface(url=base + rpc_path, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=base + rest_path, protocol_binding="HTTP+JSON", protocol_version="1.0"),
            AgentInterface(url=base + rpc_path, protocol_binding="JSONRPC", protocol_version="0.3"),
        ] + ([
            AgentInterface(url=f"127.0.0.1:{grpc_port}", protocol_binding="GRPC", protocol_version="1.0"),
        ] if grpc_server else []),
        "v03-only": [
            AgentInterface(url=base + rpc_path, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        "reject-v1": [
            AgentInterface(url=base + rpc_path, protocol_binding="JSONRPC", protocol_version="1.0"),
        ],
    }[args.mode]
    card = AgentCard(
        name="SDK Hello Agent",
        description="Says hello; asks a question when told to ask.",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="hello", name="Hello", description="Says hello", tags=["hello"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=HelloExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes = []
    routes += create_agent_card_routes(card)
    routes += create_jsonrpc_routes(handler, rpc_path, enable_v0_3_compat=True)
    routes += create_rest_routes(handler, path_prefix=rest_path)
    app = Starlette(routes=routes)
    if args.mode == "reject-v1":
        app = RejectV1(app, rpc_path)
    if args.token:
        app = Bearer(app, args.token)

    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)

    if grpc_server is not None:
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), grpc_server)
        await grpc_server.start()
    print(f"listening on {base}", flush=True)
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    try:
        asyncio.run(amain())
    except KeyboardInterrupt:
        sys.exit(0)
