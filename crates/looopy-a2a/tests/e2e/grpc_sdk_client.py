#!/usr/bin/env python3
"""Drives a Looopy server over gRPC with the official A2A Python SDK (`a2a-sdk[grpc]`).

Usage: grpc_sdk_client.py <base-url> <bearer-token> <other-principal's-token>

Reads the agent card over HTTP, picks its GRPC interface with the SDK's ClientFactory
(GrpcTransport over a grpc.aio channel) and, with the bearer token in the call metadata:
  1. sends a message (unary SendMessage) and streams one (SendStreamingMessage),
  2. gets and lists the task,
  3. cancels a slow turn while it streams,
  4. leaves a slow stream early and resumes it with SubscribeToTask,
  5. answers an input request with a follow-up message on the same task,
  6. provokes one error per mapped code (through the SDK's error mapping).
Prints one JSON object per line: {"step": ..., ...}; protobuf objects as ProtoJSON dicts.
Exits non-zero on any unexpected error. The Rust test `grpc_python_sdk` runs it.
"""

import asyncio
import json
import sys
import uuid

import grpc
import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.client import ClientCallContext
from a2a.client.transports.grpc import _map_grpc_error
from a2a.types import (
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    a2a_pb2_grpc,
)


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def as_dict(message):
    return MessageToDict(message)


def user_message(text=None, parts=None, **ids):
    parts = parts if parts is not None else [Part(text=text)]
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=parts, **ids)


def error_name(e):
    """The SDK's error type for a failed call (what its GrpcTransport raises)."""
    if isinstance(e, grpc.aio.AioRpcError):
        try:
            _map_grpc_error(e)
        except Exception as mapped:  # noqa: BLE001 - the type is what we report
            e = mapped
    code = None
    cause = e.__cause__ if isinstance(e.__cause__, grpc.aio.AioRpcError) else e
    if isinstance(cause, grpc.aio.AioRpcError):
        code = cause.code().name
    return {"error": type(e).__name__, "code": code}


async def expect_error(step, call):
    try:
        result = await call
        emit(step, unexpected=str(result)[:200])
    except Exception as e:  # noqa: BLE001
        emit(step, **error_name(e))


async def collect(stream, step, stop_after_artifact=False):
    items = []
    async for item in stream:
        emit(step, item=as_dict(item))
        items.append(item)
        if stop_after_artifact and item.HasField("artifact_update"):
            break
    return items


async def main(base_url, token, other_token):
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    async with httpx.AsyncClient(headers=headers, timeout=30.0) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
    grpc_urls = [i.url for i in card.supported_interfaces if i.protocol_binding == "GRPC"]
    emit("card", grpc=grpc_urls, bindings=[i.protocol_binding for i in card.supported_interfaces])

    channels = []

    def channel(url):
        # The card's url is a gRPC target (`host:port`): dialled as is.
        ch = grpc.aio.insecure_channel(url)
        channels.append(ch)
        return ch

    def client_for(streaming):
        config = ClientConfig(
            streaming=streaming,
            grpc_channel_factory=channel,
            supported_protocol_bindings=["GRPC"],
            use_client_preference=True,
        )
        return ClientFactory(config).create(card)

    ctx = ClientCallContext(service_parameters={"authorization": f"Bearer {token}"})
    other = ClientCallContext(service_parameters={"authorization": f"Bearer {other_token}"})
    unary = client_for(streaming=False)
    client = client_for(streaming=True)
    emit("transport", transport=type(client._transport).__name__)

    # 1. Unary send, then a streamed turn.
    items = await collect(unary.send_message(SendMessageRequest(message=user_message("hello grpc")), context=ctx), "send")
    stream = await collect(client.send_message(SendMessageRequest(message=user_message("hello stream")), context=ctx), "stream")
    task_id = stream[0].task.id

    # 2. Get (history limited) and list.
    task = await client.get_task(GetTaskRequest(id=task_id, history_length=1), context=ctx)
    emit("get", task=as_dict(task))
    listed = await client.list_tasks(ListTasksRequest(page_size=10), context=ctx)
    emit("list", response=as_dict(listed))

    # 3. Cancel a slow turn while it streams.
    canceled = False
    async for item in client.send_message(SendMessageRequest(message=user_message("slow story please")), context=ctx):
        emit("slow", item=as_dict(item))
        if item.HasField("artifact_update") and not canceled:
            canceled = True
            result = await client.cancel_task(CancelTaskRequest(id=item.artifact_update.task_id), context=ctx)
            emit("cancel", task=as_dict(result))

    # 4. Leave a slow stream after its first chunk, then resume it with SubscribeToTask.
    first = client.send_message(SendMessageRequest(message=user_message("slow again")), context=ctx)
    left = await collect(first, "left", stop_after_artifact=True)
    await first.aclose()
    resumed_id = left[0].task.id
    await collect(client.subscribe(SubscribeToTaskRequest(id=resumed_id), context=ctx), "resumed")

    # 5. A task that asks for input, answered by a follow-up message on the same task.
    asked = await collect(client.send_message(SendMessageRequest(message=user_message("ask me something")), context=ctx), "asked")
    asked_task = asked[0].task
    answer = user_message("Ada", task_id=asked_task.id, context_id=asked_task.context_id)
    await collect(client.send_message(SendMessageRequest(message=answer), context=ctx), "answered")

    # 6. One error per mapped code.
    await expect_error("not-found", client.get_task(GetTaskRequest(id="task-does-not-exist"), context=ctx))
    await expect_error("other-principal", client.get_task(GetTaskRequest(id=task_id), context=other))
    await expect_error("not-cancelable", client.cancel_task(CancelTaskRequest(id=task_id), context=ctx))

    async def drain(stream):
        async for _ in stream:
            pass

    await expect_error("subscribe-terminal", drain(client.subscribe(SubscribeToTaskRequest(id=task_id), context=ctx)))
    png = Part(raw=b"\x89PNG\r\n\x1a\n", media_type="image/png", filename="x.png")
    await expect_error(
        "content-type",
        drain(unary.send_message(SendMessageRequest(message=user_message(parts=[png])), context=ctx)),
    )
    await expect_error(
        "invalid-params",
        drain(unary.send_message(SendMessageRequest(message=user_message(parts=[])), context=ctx)),
    )
    no_auth = ClientCallContext(service_parameters={})
    await expect_error("unauthenticated", client.get_task(GetTaskRequest(id=task_id), context=no_auth))
    stub = a2a_pb2_grpc.A2AServiceStub(channel(grpc_urls[0]))
    auth = ("authorization", f"Bearer {token}")
    await expect_error(
        "version", stub.GetTask(GetTaskRequest(id=task_id), metadata=[auth, ("a2a-version", "0.3")])
    )
    await expect_error(
        "extended-card", stub.GetExtendedAgentCard(GetExtendedAgentCardRequest(), metadata=[auth])
    )
    configs = await stub.ListTaskPushNotificationConfigs(
        ListTaskPushNotificationConfigsRequest(task_id=task_id), metadata=[auth]
    )
    emit("push-list", response=as_dict(configs))

    for ch in channels:
        await ch.close()
    emit("done")


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit("usage: grpc_sdk_client.py <base-url> <token> <other-token>")
    asyncio.run(main(*sys.argv[1:4]))
