"""Checks a payload against the providers' own SDK types (`openai`, `anthropic`: dev deps).

`strictly(adapter, value)` validates in strict mode and then requires the
validated value to equal the input: pydantic ignores keys a TypedDict does not
declare and validates `Iterable[...]` fields lazily, so the comparison (after
draining every lazy iterator) is what catches an unknown key or a bad block.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from anthropic.types import MessageParam, TextBlockParam, ToolParam
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
from openai.types.responses import FunctionToolParam, ResponseInputParam
from pydantic import TypeAdapter

CHAT_MESSAGES: TypeAdapter[list[ChatCompletionMessageParam]] = TypeAdapter(
    list[ChatCompletionMessageParam]
)
CHAT_TOOLS: TypeAdapter[list[ChatCompletionToolParam]] = TypeAdapter(list[ChatCompletionToolParam])
RESPONSES_INPUT: TypeAdapter[ResponseInputParam] = TypeAdapter(ResponseInputParam)
RESPONSES_TOOLS: TypeAdapter[list[FunctionToolParam]] = TypeAdapter(list[FunctionToolParam])
ANTHROPIC_MESSAGES: TypeAdapter[list[MessageParam]] = TypeAdapter(list[MessageParam])
ANTHROPIC_SYSTEM: TypeAdapter[list[TextBlockParam]] = TypeAdapter(list[TextBlockParam])
ANTHROPIC_TOOLS: TypeAdapter[list[ToolParam]] = TypeAdapter(list[ToolParam])


def drained(value: Any) -> Any:
    """`value` with every lazy validator iterator turned into a list, recursively."""
    if isinstance(value, Mapping):
        return {k: drained(v) for k, v in value.items()}
    if isinstance(value, str | bytes):
        return value
    if isinstance(value, Iterable):
        return [drained(v) for v in value]
    return value


def strictly(adapter: TypeAdapter[Any], value: Any) -> None:
    validated = drained(adapter.validate_python(value, strict=True))
    assert validated == value, "the SDK type drops or changes part of the payload"


def check_openai(body: Mapping[str, Any]) -> None:
    strictly(CHAT_MESSAGES, body["messages"])
    strictly(CHAT_TOOLS, body["tools"])


def check_responses(body: Mapping[str, Any]) -> None:
    assert "messages" not in body
    strictly(RESPONSES_INPUT, body["input"])
    strictly(RESPONSES_TOOLS, body["tools"])
    calls = [i["call_id"] for i in body["input"] if i["type"] == "function_call"]
    outputs = [i["call_id"] for i in body["input"] if i["type"] == "function_call_output"]
    assert sorted(calls) == sorted(outputs), "every function_call has exactly one output"
    for n, item in enumerate(body["input"]):
        if item["type"] == "function_call_output":
            earlier = body["input"][:n]
            assert any(i.get("call_id") == item["call_id"] for i in earlier), "output before call"


def check_anthropic(body: Mapping[str, Any]) -> None:
    """SDK types, strict alternation starting with user, every tool_use answered by a
    tool_result in the very next message (results first), at most four breakpoints (the
    API's limit)."""
    strictly(ANTHROPIC_SYSTEM, body["system"])
    strictly(ANTHROPIC_MESSAGES, body["messages"])
    strictly(ANTHROPIC_TOOLS, body["tools"])
    messages = body["messages"]
    if messages:
        assert messages[0]["role"] == "user"
    for a, b in itertools.pairwise(messages):
        assert a["role"] != b["role"], "roles must alternate"
    for n, message in enumerate(messages):
        assert message["role"] in ("user", "assistant")
        kinds = [block["type"] for block in message["content"]]
        assert kinds, "no message may be empty"
        for block in message["content"]:
            if block["type"] == "text":
                assert block["text"].strip(), "no empty text blocks"
        uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        if uses:
            assert message["role"] == "assistant"
            reply = messages[n + 1]["content"]
            answered = [b["tool_use_id"] for b in reply if b["type"] == "tool_result"]
            assert sorted(answered) == sorted(uses), "each tool_use answered in the next message"
            head = [b["type"] for b in reply[: len(answered)]]
            assert head == ["tool_result"] * len(answered), "tool_result blocks come first"
        results = [b for b in message["content"] if b["type"] == "tool_result"]
        if results:
            previous = messages[n - 1]["content"] if n else []
            ids = {b["id"] for b in previous if b["type"] == "tool_use"}
            assert all(r["tool_use_id"] in ids for r in results), "tool_result without its call"
    assert len(breakpoints(body)) <= 4


def breakpoints(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    blocks = [*body["system"], *(b for m in body["messages"] for b in m["content"])]
    return [b for b in blocks if "cache_control" in b]
