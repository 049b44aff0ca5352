#!/usr/bin/env python3
"""Push notifications with the official A2A Python SDK (`pip install a2a-sdk`).

Usage: push_sdk.py <base-url> <bearer-token>

Runs a webhook receiver (aiohttp-free: asyncio's own HTTP server) on 127.0.0.1, then with
the SDK's client over JSON-RPC v1.0:
  1. reads the card (capabilities.pushNotifications),
  2. sends a message whose ClientConfig.push_notification_config points at the receiver
     (with a token and Bearer credentials) and waits for the task's notifications,
  3. creates a second config on the task, gets it, lists both, deletes it, deletes it
     again (idempotent), and gets it again (TaskNotFoundError).
Prints one JSON object per line: {"step": ..., ...}. Exits non-zero on any unexpected
error. The Rust test `push_sdk` runs it and checks the output.
"""

import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    AuthenticationInfo,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskPushNotificationConfig,
)


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


async def start_receiver(received, terminal):
    async def handle(reader, writer):
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        payload = json.loads(body)
        received.append({
            "id": headers.get("x-a2a-notification-id"),
            "token": headers.get("x-a2a-notification-token"),
            "authorization": headers.get("authorization"),
            "contentType": headers.get("content-type"),
            "body": payload,
        })
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()
        state = payload.get("statusUpdate", {}).get("status", {}).get("state")
        if state == "TASK_STATE_COMPLETED":
            terminal.set()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/webhook"


async def main(base_url, token):
    received, terminal = [], asyncio.Event()
    receiver, hook_url = await start_receiver(received, terminal)
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    async with httpx.AsyncClient(headers=headers, timeout=30.0) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        emit("card", pushNotifications=card.capabilities.push_notifications)

        push = TaskPushNotificationConfig(
            url=hook_url,
            token="sdk-push-token",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="sdk-push-cred"),
        )
        config = ClientConfig(httpx_client=http, streaming=False, push_notification_config=push)
        client = ClientFactory(config).create(card)

        # 2. A message with a webhook: the notifications arrive at the receiver.
        message = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text="hello push")])
        task_id = None
        async for item in client.send_message(SendMessageRequest(message=message)):
            if item.HasField("task"):
                task_id = item.task.id
        emit("sent", taskId=task_id)
        await asyncio.wait_for(terminal.wait(), 30)
        emit("notifications", received=received)

        # 3. Create, get, list, delete another config.
        created = await client.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task_id, id="sdk-second", url=hook_url, token="second-token")
        )
        emit("created", config=MessageToDict(created))
        got = await client.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="sdk-second")
        )
        emit("got", config=MessageToDict(got))
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        emit("listed", response=MessageToDict(listed))
        for _ in range(2):
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="sdk-second")
            )
        emit("deleted")
        try:
            await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id="sdk-second")
            )
            emit("missing", error=None)
        except Exception as e:  # noqa: BLE001 - the type is what we report
            emit("missing", error=type(e).__name__)
        listed = await client.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        emit("listed-after", response=MessageToDict(listed))
    receiver.close()
    emit("done")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: push_sdk.py <base-url> <bearer-token>")
    asyncio.run(main(sys.argv[1], sys.argv[2]))
