#!/usr/bin/env python3
"""Drives Looopy's HTTP+JSON (REST) binding with the official A2A Python SDK's REST
transport (`pip install a2a-sdk`).

Usage: rest_sdk_client.py <base-url> [bearer-token]

Discovers the agent through its card, creates clients that only speak HTTP+JSON, then:
  1. streams a turn (task, working, answer chunks, completed),
  2. sends a blocking message,
  3. gets a task (with historyLength) and lists tasks (page size, context and state filters),
  4. cancels a slow turn while it streams,
  5. leaves a slow stream after a few items and resumes it with subscribe,
  6. provokes one error per error code: unknown task, cancel of a completed task,
     subscribe to a completed task, an unsupported content type, invalid params.
Prints one JSON object per line: {"step": ..., ...}; protobuf objects as ProtoJSON dicts.
Exits non-zero on any unexpected error. The Rust test `rest_python_sdk` runs it and checks
the output.
"""

import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.constants import TransportProtocol


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def as_dict(message):
    return MessageToDict(message)


def user_message(text, **fields):
    parts = fields.pop("parts", None) or [Part(text=text)]
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=parts, **fields)


async def expect_error(step, call):
    """Runs `call`; reports the SDK error type (or that there was none)."""
    try:
        result = await call()
        emit(step, error=None, result=str(result)[:200])
    except Exception as e:  # noqa: BLE001 - the type is what we report
        emit(step, error=type(e).__name__, message=str(e)[:300])


async def collect(stream):
    return [item async for item in stream]


async def main(base_url, token):
    # The version header the SDK's ClientFactory sets on its clients, here from the first
    # request on, so the card fetched is the v1.0 one.
    headers = {"A2A-Version": "1.0"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx.AsyncClient(headers=headers, timeout=30.0) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        emit(
            "card",
            interfaces=[
                {"url": i.url, "binding": i.protocol_binding, "version": i.protocol_version}
                for i in card.supported_interfaces
            ],
        )
        rest_only = [TransportProtocol.HTTP_JSON]
        streaming = ClientFactory(
            ClientConfig(httpx_client=http, streaming=True, supported_protocol_bindings=rest_only)
        ).create(card)
        blocking = ClientFactory(
            ClientConfig(httpx_client=http, streaming=False, supported_protocol_bindings=rest_only)
        ).create(card)
        emit("transport", name=type(streaming._transport).__name__, url=streaming._transport.url)

        # 1. Stream a turn.
        task_id = context_id = None
        async for item in streaming.send_message(SendMessageRequest(message=user_message("hello rest"))):
            emit("stream", item=as_dict(item))
            if item.HasField("task"):
                task_id, context_id = item.task.id, item.task.context_id

        # 2. A blocking send answers with the finished task.
        items = await collect(blocking.send_message(SendMessageRequest(message=user_message("hello blocking"))))
        emit("send", items=[as_dict(i) for i in items])

        # 3. Get and list.
        task = await streaming.get_task(GetTaskRequest(id=task_id, history_length=1))
        emit("get", task=as_dict(task))
        listed = await streaming.list_tasks(ListTasksRequest(page_size=1))
        emit("list-page", response=as_dict(listed))
        if listed.next_page_token:
            second = await streaming.list_tasks(ListTasksRequest(page_size=1, page_token=listed.next_page_token))
            emit("list-next", response=as_dict(second))
        in_context = await streaming.list_tasks(ListTasksRequest(context_id=context_id, include_artifacts=True))
        emit("list-context", response=as_dict(in_context))
        completed = await streaming.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_COMPLETED))
        emit("list-completed", response=as_dict(completed))
        working = await streaming.list_tasks(ListTasksRequest(status=TaskState.TASK_STATE_WORKING))
        emit("list-working", response=as_dict(working))

        # 4. Cancel a slow turn while it streams.
        canceled = False
        async for item in streaming.send_message(SendMessageRequest(message=user_message("slow story please"))):
            emit("slow", item=as_dict(item))
            if item.HasField("artifact_update") and not canceled:
                canceled = True
                result = await streaming.cancel_task(CancelTaskRequest(id=item.artifact_update.task_id))
                emit("cancel", task=as_dict(result))

        # 5. Leave a slow stream after three answer chunks, then resume it with subscribe.
        resume_id = None
        chunks = 0
        stream = streaming.send_message(SendMessageRequest(message=user_message("slow again")))
        async for item in stream:
            emit("left", item=as_dict(item))
            if item.HasField("task"):
                resume_id = item.task.id
            if item.HasField("artifact_update"):
                chunks += 1
                if chunks == 3:
                    break
        await stream.aclose()
        async for item in streaming.subscribe(SubscribeToTaskRequest(id=resume_id)):
            emit("resumed", item=as_dict(item))

        # 6. One error per error code.
        await expect_error("err-not-found", lambda: streaming.get_task(GetTaskRequest(id="task-does-not-exist")))
        await expect_error("err-not-cancelable", lambda: streaming.cancel_task(CancelTaskRequest(id=task_id)))
        await expect_error(
            "err-subscribe-terminal",
            lambda: collect(streaming.subscribe(SubscribeToTaskRequest(id=task_id))),
        )
        picture = Part(url="https://example.com/cat.png", media_type="image/png", filename="cat.png")
        await expect_error(
            "err-content-type",
            lambda: collect(
                blocking.send_message(
                    SendMessageRequest(message=user_message("look", parts=[Part(text="look"), picture]))
                )
            ),
        )
        no_parts = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER)
        await expect_error(
            "err-invalid-params",
            lambda: collect(blocking.send_message(SendMessageRequest(message=no_parts))),
        )
        await expect_error(
            "err-invalid-params-stream",
            lambda: collect(streaming.send_message(SendMessageRequest(message=no_parts))),
        )
        await expect_error(
            "err-list-page-size",
            lambda: streaming.list_tasks(ListTasksRequest(page_size=1000)),
        )

    emit("done")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: rest_sdk_client.py <base-url> [bearer-token]")
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
