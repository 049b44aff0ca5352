#!/usr/bin/env python3
"""Drives a Looopy server with the official A2A Python SDK (`pip install a2a-sdk`).

Usage: a2a_sdk_client.py <base-url> [bearer-token]

Discovers the agent through its card, then with the SDK's own client:
  1. streams a turn (v1.0 JSON-RPC, the interface the card prefers),
  2. gets and lists the task,
  3. starts a slow turn and cancels it while it streams,
  4. streams a turn and gets a task through the SDK's v0.3 compatibility transport,
  5. asks for a task that does not exist.
Prints one JSON object per line: {"step": ..., ...}; protobuf objects as ProtoJSON
dicts. Exits non-zero on any unexpected error. The Rust test `a2a_python_sdk` runs it
and checks the output.
"""

import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
)


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def as_dict(message):
    return MessageToDict(message)


def user_message(text, **ids):
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)], **ids)


async def main(base_url, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    # A2A-Version as the SDK's ClientFactory sends it (the card is the v1.0 one either way).
    headers["A2A-Version"] = "1.0"
    async with httpx.AsyncClient(headers=headers, timeout=30.0) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        emit(
            "card",
            name=card.name,
            streaming=card.capabilities.streaming,
            interfaces=[
                {"url": i.url, "binding": i.protocol_binding, "version": i.protocol_version}
                for i in card.supported_interfaces
            ],
        )
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=True))
        client = factory.create(card)

        # 1. Stream a turn.
        task_id = None
        async for item in client.send_message(SendMessageRequest(message=user_message("hello sdk"))):
            emit("stream", item=as_dict(item))
            if item.HasField("task"):
                task_id = item.task.id

        # 2. Get and list it.
        task = await client.get_task(GetTaskRequest(id=task_id, history_length=10))
        emit("get", task=as_dict(task))
        listed = await client.list_tasks(ListTasksRequest(page_size=10))
        emit("list", response=as_dict(listed))

        # 3. Cancel a slow turn while it streams.
        canceled = False
        async for item in client.send_message(SendMessageRequest(message=user_message("slow story please"))):
            emit("slow", item=as_dict(item))
            if item.HasField("artifact_update") and not canceled:
                canceled = True
                result = await client.cancel_task(CancelTaskRequest(id=item.artifact_update.task_id))
                emit("cancel", task=as_dict(result))

        # 4. The v0.3 interface, through the SDK's compatibility transport.
        legacy_card = AgentCard()
        legacy_card.CopyFrom(card)
        legacy_interfaces = [i for i in card.supported_interfaces if i.protocol_version.startswith("0.3")]
        del legacy_card.supported_interfaces[:]
        legacy_card.supported_interfaces.extend(legacy_interfaces)
        legacy = factory.create(legacy_card)
        emit("v03-transport", transport=type(legacy._transport).__name__)
        legacy_task_id = None
        async for item in legacy.send_message(SendMessageRequest(message=user_message("hello legacy"))):
            emit("v03-stream", item=as_dict(item))
            if item.HasField("task"):
                legacy_task_id = item.task.id
        task = await legacy.get_task(GetTaskRequest(id=legacy_task_id))
        emit("v03-get", task=as_dict(task))

        # 5. A task that does not exist is the SDK's TaskNotFoundError.
        try:
            await client.get_task(GetTaskRequest(id="task-does-not-exist"))
            emit("missing", error=None)
        except Exception as e:  # noqa: BLE001 - the type is what we report
            emit("missing", error=type(e).__name__)

    emit("done")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: a2a_sdk_client.py <base-url> [bearer-token]")
    asyncio.run(main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None))
