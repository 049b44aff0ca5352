#!/usr/bin/env python3
"""One streamed turn through the official A2A Python SDK 0.3.x client (`a2a-sdk==0.3.*`,
pydantic types, JSON-RPC, no A2A-Version header), against a real `looopy serve`.

Usage: a2a_sdk03_client.py <base-url>

  default-card  what the 0.3.x resolver makes of /.well-known/agent-card.json (the v1.0
                card there has no v0.3 `url`): parsed or the error's type
  card          ClientFactory.connect(base_url, relative_card_path=/.well-known/agent.json):
                the v0.3 card's url, transport and protocol version
  event         each event of "What is 6*7?" streamed to completion
  done          the final state and the answer's text

Prints one JSON object per line: {"step": ..., ...}. Exits non-zero on any error. Runs in
the 0.3.x virtual environment .ci/run makes (target/a2a-sdk-0.3); the Rust test
`looopy-cli/tests/a2a_sdk_clients.rs` runs it.
"""

import asyncio
import json
import sys
import uuid

import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, TextPart, TransportProtocol

LEGACY_CARD = "/.well-known/agent.json"


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


async def main(base_url):
    async with httpx.AsyncClient(timeout=30.0) as http:
        try:
            card = await A2ACardResolver(http, base_url).get_agent_card()
            emit("default-card", parsed=True, url=card.url)
        except Exception as e:  # noqa: BLE001 - the type is what we report
            emit("default-card", parsed=False, error=type(e).__name__)

        config = ClientConfig(
            streaming=True,
            httpx_client=http,
            supported_transports=[TransportProtocol.jsonrpc],
        )
        client = await ClientFactory.connect(
            base_url, client_config=config, relative_card_path=LEGACY_CARD
        )
        card = await client.get_card()
        emit(
            "card",
            url=card.url,
            transport=card.preferred_transport,
            version=card.protocol_version,
        )
        message = Message(
            message_id=str(uuid.uuid4()),
            role=Role.user,
            parts=[Part(root=TextPart(text="What is 6*7?"))],
        )
        state, text = None, ""
        async for event in client.send_message(message):
            if isinstance(event, Message):
                emit("event", kind="message")
                continue
            task, update = event
            state = task.status.state.value
            kind = type(update).__name__ if update is not None else "Task"
            emit("event", kind=kind, state=state)
            if update is not None and hasattr(update, "artifact"):
                text += "".join(
                    p.root.text for p in update.artifact.parts if isinstance(p.root, TextPart)
                )
        await client.close()
    emit("done", state=state, text=text)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/")))
