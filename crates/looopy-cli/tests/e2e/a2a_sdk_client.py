#!/usr/bin/env python3
"""One streamed turn through the official A2A Python SDK 1.x client (`a2a-sdk>=1.3`), as a
new user writes it, against a real `looopy serve`.

Usage: a2a_sdk_client.py <base-url> <binding>     binding: JSONRPC, HTTP+JSON or GRPC

  card      A2ACardResolver's card (its default fetch: no A2A-Version header): the
            bindings and urls it lists
  client    create_client(base_url) restricted to <binding>, with the channel factory the
            SDK documents for gRPC, grpc.aio.insecure_channel(url) — the card's url dialled
            as is: the transport class and the interface it chose
  item      each StreamResponse of "What is 6*7?" streamed to completion (ProtoJSON)
  done      the final state and the answer's text

Prints one JSON object per line: {"step": ..., ...}. Exits non-zero on any error. The Rust
test `looopy-cli/tests/a2a_sdk_clients.rs` runs it.
"""

import asyncio
import json
import sys
import uuid

import grpc
import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


async def main(base_url, binding):
    async with httpx.AsyncClient(timeout=30.0) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        emit(
            "card",
            interfaces=[
                {"url": i.url, "binding": i.protocol_binding, "version": i.protocol_version}
                for i in card.supported_interfaces
            ],
        )
        config = ClientConfig(
            streaming=True,
            httpx_client=http,
            grpc_channel_factory=grpc.aio.insecure_channel,
            supported_protocol_bindings=[binding],
        )
        client = await create_client(base_url, client_config=config)
        emit("client", transport=type(client._transport).__name__)

        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text="What is 6*7?")],
        )
        state, text = None, ""
        async for item in client.send_message(SendMessageRequest(message=message)):
            emit("item", item=MessageToDict(item))
            if item.HasField("task"):
                state = item.task.status.state
            elif item.HasField("status_update"):
                state = item.status_update.status.state
            elif item.HasField("artifact_update"):
                text += "".join(p.text for p in item.artifact_update.artifact.parts)
        await client.close()
    emit("done", state=TaskState.Name(state) if state is not None else None, text=text)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/"), sys.argv[2]))
