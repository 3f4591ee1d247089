"""An agent loop over HTTP for the payload-stability tests (SPEC §3 "Payload stability"):
its steps, its payloads, and what two payloads share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from app.core.tokens import get_counter
from tests.support.messages import call, result

BUDGET = 2500
SYSTEM = "You are a careful coding agent. Follow the user's instructions exactly."
TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


def step(i: int) -> list[dict[str, Any]]:
    """One agent step: a tool call and its result, some 150 tokens."""
    text = " ".join(f"line {i}.{k}: value={i * 31 + k} in src/mod_{i % 7}.py" for k in range(12))
    return [call(f"c{i}"), result(f"c{i}", text)]


def shared_prefix(
    before: Mapping[str, Any], after: Mapping[str, Any], model: str = "gpt-4o"
) -> tuple[int, int]:
    """(messages, tokens) identical at the start of both payloads, measured on the payloads:
    the tools (when unchanged) plus each leading message equal in both."""
    if before["tools"] != after["tools"]:
        return 0, 0
    counter = get_counter(model)
    n, tokens = 0, counter.count_tools(after["tools"])
    for a, b in zip(before["messages"], after["messages"], strict=False):
        if a != b:
            break
        n += 1
        tokens += counter.count_message(b)
    return n, tokens


def is_prefix(before: Sequence[Any], after: Sequence[Any]) -> bool:
    return len(before) <= len(after) and list(after[: len(before)]) == list(before)


def tool_groups_whole(messages: Sequence[Mapping[str, Any]]) -> bool:
    open_ids: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            if m["tool_call_id"] not in open_ids:
                return False
            open_ids.discard(m["tool_call_id"])
        else:
            if open_ids:
                return False
            open_ids = {c["id"] for c in m.get("tool_calls") or []}
    return not open_ids


async def payload(
    c: httpx.AsyncClient, sid: str, previous: str | None = None, **params: Any
) -> dict[str, Any]:
    query: dict[str, Any] = {"max_tokens": BUDGET, **params}
    if previous:
        query["previous_prefix_id"] = previous
    r = await c.get(f"/sessions/{sid}/context", params=query)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def append(c: httpx.AsyncClient, sid: str, messages: list[dict[str, Any]]) -> None:
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": messages})
    assert r.status_code == 201, r.text
