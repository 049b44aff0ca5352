#!/usr/bin/env python3
"""A2A conformance checks with the official Python SDK (`pip install a2a-sdk`).

Usage: conformance_sdk.py <base-url> <bearer-token>

  card-v1      the card fetched with `A2A-Version: 1.0`, parsed strictly (ProtoJSON,
               unknown fields are errors) into the SDK's v1.0 AgentCard
  card-plain   the card fetched without the header (the TCK, A2ACardResolver), parsed
               strictly like card-v1
  card-v03     the card at the legacy /.well-known/agent.json without the header (what a
               v0.3 client is pointed at), validated with the SDK's v0.3 pydantic
               AgentCard, and read by the v1.0 resolver
  factory      ClientFactory.create_from_url: the card it resolves (it sends A2A-Version)
  v1-*, v03-*  over v1.0 and the SDK's v0.3 transport: a task paused for input, subscribed
               to while paused, answered by a follow-up message with its own messageId;
               the subscriber's states and text, then the task's history

Prints one JSON object per line: {"step": ..., ...}. Exits non-zero on any unexpected
error. The Rust test `conformance_python_sdk` (tests/conformance_card.rs) runs it.
"""

import asyncio
import json
import sys

import httpx
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import types as types_v03
from a2a.types import (
    AgentCard,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SubscribeToTaskRequest,
    GetTaskRequest,
)

CARD = "/.well-known/agent-card.json"
LEGACY_CARD = "/.well-known/agent.json"


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def interfaces(card):
    return [
        {"url": i.url, "binding": i.protocol_binding, "version": i.protocol_version}
        for i in card.supported_interfaces
    ]


def state_name(value):
    from a2a.types import TaskState

    return TaskState.Name(value)


async def pause_subscribe_answer(client, prefix):
    """A paused task, a subscriber, the answer; returns when the subscriber's stream ends."""
    question = Message(
        message_id=f"{prefix}-question", role=Role.ROLE_USER, parts=[Part(text="ask me something")]
    )
    task_id = context_id = None
    async for item in client.send_message(SendMessageRequest(message=question)):
        if item.HasField("task"):
            task_id, context_id = item.task.id, item.task.context_id
    assert task_id, "the stream started no task"

    states, text = [], []
    first = asyncio.Event()

    async def subscriber():
        async for item in client.subscribe(SubscribeToTaskRequest(id=task_id)):
            if item.HasField("task"):
                states.append(state_name(item.task.status.state))
            elif item.HasField("status_update"):
                states.append(state_name(item.status_update.status.state))
            elif item.HasField("artifact_update"):
                text.extend(p.text for p in item.artifact_update.artifact.parts)
            first.set()

    watching = asyncio.create_task(subscriber())
    await asyncio.wait_for(first.wait(), 30)
    answer = Message(
        message_id=f"{prefix}-answer",
        task_id=task_id,
        context_id=context_id,
        role=Role.ROLE_USER,
        parts=[Part(text="Ada")],
    )
    async for _ in client.send_message(SendMessageRequest(message=answer)):
        pass
    await asyncio.wait_for(watching, 30)
    emit(f"{prefix}-subscribe", states=states, text="".join(text))

    task = await client.get_task(GetTaskRequest(id=task_id))
    emit(
        f"{prefix}-history",
        messages=[
            {
                "messageId": m.message_id,
                "role": Role.Name(m.role),
                "text": "".join(p.text for p in m.parts),
            }
            for m in task.history
        ],
    )


async def main(base_url, token):
    auth = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(headers=auth, timeout=30.0) as http:
        # The v1.0 card, strictly: no field the v1.0 AgentCard does not have.
        r = await http.get(base_url + CARD, headers={"A2A-Version": "1.0"})
        r.raise_for_status()
        card = ParseDict(r.json(), AgentCard())  # ignore_unknown_fields=False
        emit(
            "card-v1",
            strict=True,
            interfaces=interfaces(card),
            bearer=card.security_schemes["bearer"].http_auth_security_scheme.scheme,
        )

        # No A2A-Version header (the TCK, A2ACardResolver): the same strict v1.0 card.
        r = await http.get(base_url + CARD)
        r.raise_for_status()
        plain = ParseDict(r.json(), AgentCard())
        emit("card-plain", strict=True, interfaces=interfaces(plain))

        # What a v0.3 client fetches at the legacy path: no A2A-Version header.
        r = await http.get(base_url + LEGACY_CARD)
        r.raise_for_status()
        old = types_v03.AgentCard.model_validate(r.json())
        resolved = parse_agent_card(r.json())
        emit("card-v03", valid=True, url=old.url, resolved=interfaces(resolved))

    # The SDK's factory sets A2A-Version on the client it fetches the card with.
    async with httpx.AsyncClient(headers=auth, timeout=30.0) as http:
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=True))
        client = await factory.create_from_url(base_url)
        emit("factory", interfaces=interfaces(client._card))
        await pause_subscribe_answer(client, "v1")

        # The SDK's v0.3 transport (JSON-RPC, A2A-Version: 0.3).
        legacy_card = AgentCard()
        legacy_card.CopyFrom(client._card)
        keep = [i for i in legacy_card.supported_interfaces if i.protocol_version.startswith("0.3")]
        del legacy_card.supported_interfaces[:]
        legacy_card.supported_interfaces.extend(keep)
        legacy = factory.create(legacy_card)
        emit("v03-transport", transport=type(legacy._transport).__name__)
        await pause_subscribe_answer(legacy, "v03")

    emit("done")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: conformance_sdk.py <base-url> <bearer-token>")
    asyncio.run(main(sys.argv[1].rstrip("/"), sys.argv[2]))
