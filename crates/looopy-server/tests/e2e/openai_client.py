"""The official `openai` Python SDK (3.x) against a Looopy server: one scenario per run.

Usage: openai_client.py BASE_URL SCENARIO [ARGS...]; prints what it saw as JSON.

The SDK builds its objects without validating them, so every object and stream event is
validated here against the SDK's own pydantic types (required fields, literals), and a
failure is reported under "invalid".
"""

import json
import sys

import openai
from openai import OpenAI
from openai.types import Model
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter, ValidationError

EVENT = TypeAdapter(ResponseStreamEvent)
invalid = []


def check(adapter, obj, what):
    """Validates the SDK object's wire form (only the fields the server sent)."""
    raw = obj.to_dict() if hasattr(obj, "to_dict") else obj
    try:
        if isinstance(adapter, TypeAdapter):
            adapter.validate_python(raw)
        else:
            adapter.model_validate(raw)
    except ValidationError as error:
        invalid.append({"what": what, "error": str(error), "raw": raw})
    return raw


def events(stream, limit=None):
    out = []
    for event in stream:
        out.append(check(EVENT, event, f"event {getattr(event, 'type', '?')}"))
        if limit is not None and len(out) >= limit:
            break
    return out


def reasoning_items(response):
    return [item for item in response["output"] if item["type"] == "reasoning"]


def main():
    base, scenario, *args = sys.argv[1:]
    client = OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=30)
    seen = {}
    if scenario == "stream":
        got = events(client.responses.create(model="looopy", input="What is 6*7?", stream=True))
        seen["types"] = [e["type"] for e in got]
        seen["numbers"] = [e["sequence_number"] for e in got]
        final = Response.model_validate(got[-1]["response"])
        seen["output_text"] = final.output_text
        seen["reasoning"] = reasoning_items(got[-1]["response"])
        seen["status"] = final.status
    elif scenario == "conversation":
        first = client.responses.create(model="looopy", input="What is 6*7?")
        check(Response, first, "response")
        seen["first"] = {"status": first.status, "text": first.output_text}
        asked = client.responses.create(
            model="looopy", input="ask me something", previous_response_id=first.id
        )
        check(Response, asked, "response")
        seen["asked"] = {"status": asked.status, "text": asked.output_text,
                         "previous": asked.previous_response_id, "first": first.id}
        answered = client.responses.create(
            model="looopy", input="Ada", previous_response_id=asked.id
        )
        check(Response, answered, "response")
        seen["answered"] = {"status": answered.status, "text": answered.output_text,
                            "previous": answered.previous_response_id, "asked": asked.id}
    elif scenario == "resume":
        # Read a background response's first events, drop the connection, resume.
        n = int(args[0])
        head = events(client.responses.create(
            model="looopy", input="slowly please", background=True, stream=True), limit=n)
        response_id = head[0]["response"]["id"]
        after = head[-1]["sequence_number"]
        tail = events(client.responses.retrieve(response_id, stream=True, starting_after=after))
        seen["numbers"] = [e["sequence_number"] for e in head + tail]
        seen["last"] = tail[-1]["type"]
        seen["text"] = "".join(e["delta"] for e in head + tail
                               if e["type"] == "response.output_text.delta")
    elif scenario == "head":
        n = int(args[0])
        created = client.responses.create(model="looopy", input="slowly please", background=True)
        check(Response, created, "response")
        seen["created_status"] = created.status
        head = events(client.responses.retrieve(created.id, stream=True), limit=n)
        seen["id"] = created.id
        seen["head"] = head
    elif scenario == "tail":
        response_id, after = args[0], int(args[1])
        tail = events(client.responses.retrieve(response_id, stream=True, starting_after=after))
        seen["tail"] = tail
        final = client.responses.retrieve(response_id)
        check(Response, final, "response")
        seen["status"] = final.status
        seen["output_text"] = final.output_text
    elif scenario == "cancel":
        created = client.responses.create(model="looopy", input="slowly please", background=True)
        cancelled = client.responses.cancel(created.id)
        check(Response, cancelled, "response")
        seen["status"] = cancelled.status
        seen["retrieved"] = client.responses.retrieve(created.id).status
        client.responses.delete(created.id)
        try:
            client.responses.retrieve(created.id)
            seen["after_delete"] = "found"
        except openai.NotFoundError as error:
            seen["after_delete"] = {"status": error.status_code, "code": error.code,
                                    "type": error.type}
    elif scenario == "chat":
        messages = [{"role": "user", "content": "What is 6*7?"}]
        whole = client.chat.completions.create(model="looopy", messages=messages)
        check(ChatCompletion, whole, "chat.completion")
        seen["whole"] = whole.choices[0].message.content
        seen["reasoning"] = (whole.choices[0].message.to_dict() or {}).get("reasoning_content")
        chunks = []
        for chunk in client.chat.completions.create(
            model="looopy", messages=messages, stream=True,
            stream_options={"include_usage": True},
        ):
            chunks.append(check(ChatCompletionChunk, chunk, "chat.completion.chunk"))
        seen["streamed"] = "".join(
            c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
        seen["usage"] = chunks[-1].get("usage")
        models = client.models.list()
        for model in models.data:
            check(Model, model, "model")
        seen["models"] = [m.id for m in models.data]
        try:
            client.responses.retrieve("resp_nope_1")
        except openai.NotFoundError as error:
            seen["not_found"] = {"status": error.status_code, "code": error.code,
                                 "type": error.type}
        try:
            client.responses.create(model="gpt-4o", input="hi")
        except openai.NotFoundError as error:
            seen["unknown_model"] = error.code
        try:
            client.chat.completions.create(model="looopy", messages=[])
        except openai.BadRequestError as error:
            seen["bad_request"] = error.code
    elif scenario == "function":
        tools = [{"type": "function", "name": "get_weather", "description": "The weather",
                  "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                 "required": ["city"]}}]
        first = client.responses.create(model="looopy", input="Weather in Oslo?", tools=tools)
        check(Response, first, "response")
        calls = [item for item in first.output if item.type == "function_call"]
        seen["first"] = {"status": first.status, "calls": [
            {"name": c.name, "arguments": json.loads(c.arguments)} for c in calls]}
        events_seen = events(client.responses.create(
            model="looopy", previous_response_id=first.id, tools=tools, stream=True,
            input=[{"type": "function_call_output", "call_id": calls[0].call_id,
                    "output": "sunny"}]))
        final = Response.model_validate(events_seen[-1]["response"])
        seen["second"] = {"status": final.status, "text": final.output_text,
                          "numbers": [e["sequence_number"] for e in events_seen]}
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    seen["invalid"] = invalid
    seen["sdk"] = openai.__version__
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
