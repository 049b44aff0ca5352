#!/usr/bin/env python3
"""Artifacts through the official A2A Python SDK (`pip install a2a-sdk`).

Usage: a2a_sdk_artifacts.py <base-url> <bearer-token>

For the v1.0 JSON-RPC interface and then the v0.3 one (the SDK's compatibility
transport), with the SDK's own client:
  1. streams a turn whose tool writes a large binary file (many 64 KiB chunks), small
     text and binary files, a data record and a dataset, and reassembles every artifact
     from the artifact-update events, honouring `append` and `lastChunk`;
  2. gets the task and reads each artifact in `Task.artifacts`: inline parts as they are,
     `url` parts downloaded with httpx and the bearer token.
Prints one JSON object per line: {"step": ..., ...}, with each artifact summarised
(length and sha256 of file bytes, data of data parts, the chunk flags seen). Exits
non-zero on any unexpected error or broken chunk rule. The Rust test
`the_official_python_client_reassembles_streamed_artifacts` runs it and compares the
bytes with what the tool wrote.
"""

import asyncio
import hashlib
import json
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import AgentCard, GetTaskRequest, Message, Part, Role, SendMessageRequest, TaskState


def emit(step, **fields):
    print(json.dumps({"step": step, **fields}), flush=True)


def plain(value):
    """A protobuf Struct's value with whole numbers as ints (Struct keeps only doubles)."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def user_message(text):
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])


class Assembly:
    """One artifact put together from its updates, checking the chunk rules."""

    def __init__(self, artifact_id):
        self.id = artifact_id
        self.name = None
        self.media_type = None
        self.filename = None
        self.content = bytearray()
        self.data = []
        self.updates = 0
        self.last_chunks = 0
        self.metadata = {}
        self.kinds = set()

    def add(self, update):
        artifact = update.artifact
        if self.updates == 0 and update.append:
            raise AssertionError(f"{self.id}: the first chunk claims append")
        if self.last_chunks:
            raise AssertionError(f"{self.id}: a chunk after lastChunk")
        if not update.append:
            # A chunk that does not append starts the artifact (again).
            self.content = bytearray()
            self.data = []
            self.name = artifact.name or None
        self.updates += 1
        if update.last_chunk:
            self.last_chunks += 1
        if artifact.HasField("metadata"):
            self.metadata.update(plain(MessageToDict(artifact.metadata)))
        for part in artifact.parts:
            self.add_part(part)

    def add_part(self, part):
        kind = part.WhichOneof("content")
        self.kinds.add(kind)
        if part.media_type and self.media_type is None:
            self.media_type = part.media_type
        if part.filename and self.filename is None:
            self.filename = part.filename
        if kind == "raw":
            self.content += part.raw
        elif kind == "text":
            self.content += part.text.encode("utf-8")
        elif kind == "data":
            self.data.append(plain(MessageToDict(part.data)))
        else:
            raise AssertionError(f"{self.id}: unexpected {kind} part in a stream")

    def summary(self):
        return {
            "id": self.id,
            "name": self.name,
            "mediaType": self.media_type,
            "filename": self.filename,
            "updates": self.updates,
            "lastChunks": self.last_chunks,
            "kinds": sorted(self.kinds),
            "length": len(self.content),
            "sha256": hashlib.sha256(self.content).hexdigest(),
            "text": self.content.decode("utf-8", "replace") if len(self.content) < 1000 else None,
            "data": self.data,
            "metadata": self.metadata,
        }


async def read_artifact(http, artifact):
    """One artifact of a Task: its part read inline, or downloaded from its url."""
    summary = {"id": artifact.artifact_id, "name": artifact.name, "parts": []}
    if artifact.HasField("metadata"):
        summary["metadata"] = plain(MessageToDict(artifact.metadata))
    for part in artifact.parts:
        kind = part.WhichOneof("content")
        entry = {"kind": kind, "mediaType": part.media_type, "filename": part.filename}
        content = None
        if kind == "raw":
            content = part.raw
        elif kind == "text":
            content = part.text.encode("utf-8")
        elif kind == "url":
            entry["url"] = part.url
            response = await http.get(part.url)
            entry["status"] = response.status_code
            entry["contentType"] = response.headers.get("content-type")
            content = response.content
        elif kind == "data":
            entry["data"] = plain(MessageToDict(part.data))
        if content is not None:
            entry["length"] = len(content)
            entry["sha256"] = hashlib.sha256(content).hexdigest()
        summary["parts"].append(entry)
    return summary


async def run(client, http, version):
    assemblies = {}
    order = []
    task_id = None
    states = []
    async for item in client.send_message(SendMessageRequest(message=user_message("all files please"))):
        if item.HasField("task"):
            task_id = item.task.id
        elif item.HasField("status_update"):
            states.append(item.status_update.status.state)
            # Every artifact that started is closed before the task's final state.
            if item.status_update.status.state == TaskState.TASK_STATE_COMPLETED:
                open_ones = [a.id for a in assemblies.values() if a.last_chunks != 1]
                if open_ones:
                    raise AssertionError(f"still open at completion: {open_ones}")
        elif item.HasField("artifact_update"):
            update = item.artifact_update
            artifact_id = update.artifact.artifact_id
            if artifact_id not in assemblies:
                assemblies[artifact_id] = Assembly(artifact_id)
                order.append(artifact_id)
            assemblies[artifact_id].add(update)
    emit(
        "stream",
        version=version,
        taskId=task_id,
        states=states,
        artifacts=[assemblies[i].summary() for i in order],
    )
    task = await client.get_task(GetTaskRequest(id=task_id))
    emit(
        "get",
        version=version,
        state=task.status.state,
        artifacts=[await read_artifact(http, a) for a in task.artifacts],
    )


async def main(base_url, token):
    # A2A-Version as the SDK's ClientFactory sends it (the card is the v1.0 one either way).
    headers = {"Authorization": f"Bearer {token}", "A2A-Version": "1.0"}
    async with httpx.AsyncClient(headers=headers, timeout=60.0) as http:
        card = await A2ACardResolver(http, base_url).get_agent_card()
        factory = ClientFactory(ClientConfig(httpx_client=http, streaming=True))
        await run(factory.create(card), http, "1.0")

        legacy_card = AgentCard()
        legacy_card.CopyFrom(card)
        legacy = [i for i in card.supported_interfaces if i.protocol_version.startswith("0.3")]
        del legacy_card.supported_interfaces[:]
        legacy_card.supported_interfaces.extend(legacy)
        client = factory.create(legacy_card)
        emit("v03-transport", transport=type(client._transport).__name__)
        await run(client, http, "0.3")
    emit("done")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: a2a_sdk_artifacts.py <base-url> <bearer-token>")
    asyncio.run(main(sys.argv[1], sys.argv[2]))
