"""`format` on GET/POST /context through the real HTTP API and PostgreSQL (SPEC §2, §3).

One realistic history — a pinned instruction, images as content parts, parallel
tool calls, failed tool calls, a compacted summary — rendered in every format and
validated against the providers' SDK types (tests/support/sdk_types.py).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.core.settings import Settings
from tests.support.apps import model_settings
from tests.support.compaction_http import SMALL, compact
from tests.support.fakellm import FakeLLM
from tests.support.messages import call, result, user
from tests.support.sdk_types import breakpoints, check_anthropic, check_openai, check_responses


@pytest.fixture(scope="module")
def llm_settings(llm: FakeLLM) -> Settings:
    # Trims cut to the whole budget here (no low-water mark): this file checks the
    # shapes of one selection; what a trim keeps is tests/context/test_stability.py's.
    # Compactions get seconds, not a fraction of one: busy machines.
    return model_settings(llm.base_url, 3.0, trim_target_ratio=1.0)


PNG = "data:image/png;base64,iVBORw0KGgo="
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}},
]
PINNED = "Always answer in French; never touch prod."


def parallel(i: int) -> list[dict[str, Any]]:
    """A step with two parallel calls; the second fails."""
    calls = [
        {"id": f"r{i}", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}},
        {"id": f"g{i}", "type": "function", "function": {"name": "grep", "arguments": '{"q": "x"}'}},
    ]  # fmt: skip
    return [
        {"role": "assistant", "content": f"Looking at step {i}.", "tool_calls": calls},
        result(f"r{i}", f"def f{i}(): pass\n" * 8),
        {**result(f"g{i}", "grep: invalid regex"), "error": {"type": "tool", "message": "exit 2"}},
    ]


def image_turn(i: int) -> dict[str, Any]:
    return user(
        [
            {"type": "text", "text": f"Turn {i}: compare these screenshots."},
            {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
            {"type": "image_url", "image_url": {"url": f"https://example.com/{i}.png"}},
        ]
    )


async def build_history(c: httpx.AsyncClient, sid: str) -> int:
    """A compacted session whose effective history holds every case; returns the watermark."""
    r = await c.put(
        f"/sessions/{sid}",
        json={**SMALL, "system_prompt": "You are a coding agent.", "tools": TOOLS},
    )
    assert r.status_code in (200, 201), r.text
    msgs: list[dict[str, Any]] = []
    for i in range(8):
        msgs += [image_turn(i), *parallel(i), {"role": "assistant", "content": f"Step {i} done."}]
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    done = await compact(c, sid)
    assert done["status"] == "success", done
    # Pinned above the watermark (below it, the summary carries pinned text).
    tail = [user(PINNED, pinned=True), image_turn(8), *parallel(8), {"role": "assistant", "content": "Noted."},
            user("Now fix it."), call("last"), result("last", "fixed")]  # fmt: skip
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": tail})
    assert r.status_code == 201, r.text
    return int(done["watermark_after"])


async def context(c: httpx.AsyncClient, sid: str, fmt: str, **params: Any) -> dict[str, Any]:
    r = await c.get(f"/sessions/{sid}/context", params={"format": fmt, **params})
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert body["format"] == fmt
    return body


async def test_every_format_validates_for_a_full_history(
    cclient: httpx.AsyncClient,
    sid: str,
) -> None:
    watermark = await build_history(cclient, sid)
    # 1,800: room for a failed call beside the summary, whose items cite their seqs.
    for params in ({}, {"max_tokens": 1800}, {"mode": "agent", "strategy": "sliding_window"}):
        chat = await context(cclient, sid, "openai", **params)
        check_openai(chat)
        assert chat["summary"]["included"] and chat["summary"]["through_seq"] == watermark
        responses = await context(cclient, sid, "responses", **params)
        check_responses(responses)
        claude = await context(cclient, sid, "anthropic", **params)
        check_anthropic(claude)
        # One selection, three shapes: everything but the payload is identical.
        for other in (responses, claude):
            for key in ("kept_seqs", "decisions", "summary", "dropped_count"):
                assert other[key] == chat[key]
            # What a call shares with the previous one depends on the calls, not the format.
            assert without_prefix(other["usage"]) == without_prefix(chat["usage"])
        assert_same_content(chat, responses, claude)


# The call's bill depends on the calls before it and on the provider a format names.
CALL_BILL = {
    "cached_input_tokens",
    "cache_provider",
    "summariser_input_tokens",
    "summariser_output_tokens",
}


def without_prefix(usage: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v for k, v in usage.items() if not k.startswith("stable_prefix") and k not in CALL_BILL
    }


def assert_same_content(
    chat: dict[str, Any], responses: dict[str, Any], claude: dict[str, Any]
) -> None:
    sent = chat["messages"]
    calls = [c["id"] for m in sent for c in m.get("tool_calls") or []]
    assert [i["call_id"] for i in responses["input"] if i["type"] == "function_call"] == calls
    blocks = [b for m in claude["messages"] for b in m["content"]]
    assert [b["id"] for b in blocks if b["type"] == "tool_use"] == calls
    # Failed calls (logged with an error record) and only those carry is_error.
    failed = {b["tool_use_id"] for b in blocks if b.get("is_error")}
    assert failed == {c for c in calls if c.startswith("g")} and failed
    leading = [m for m in sent[: next(i for i, m in enumerate(sent) if m["role"] != "system")]]
    assert [b["text"] for b in claude["system"]] == [m["content"] for m in leading]
    assert any("Summary of the conversation" in b["text"] for b in claude["system"])
    assert any(m["content"] == PINNED for m in sent)
    assert any(b["type"] == "text" and b["text"] == PINNED for b in blocks)
    images = [b["source"]["type"] for b in blocks if b["type"] == "image"]
    assert images and set(images) == {"base64", "url"}
    # The system prompt, the system (summary included), the stable prefix, the payload.
    marked = breakpoints(claude)
    assert marked[:2] == [claude["system"][0], claude["system"][-1]]
    assert marked[-1] is claude["messages"][-1]["content"][-1] and len(marked) in (3, 4)
    assert_responses_content(sent, responses["input"])


def assert_responses_content(sent: list[dict[str, Any]], items: list[dict[str, Any]]) -> None:
    """The Responses items carry every case of the Chat Completions payload, not just a
    shape the SDK accepts: summary and pinned text, both image kinds, parallel calls
    adjacent, failed outputs sent as logged (Responses has no error flag)."""
    said = [(i["role"], i["content"]) for i in items if i["type"] == "message"]
    assert ("user", PINNED) in said
    assert any(r == "system" and "Summary of the conversation" in str(c) for r, c in said)
    parts = [p for _, c in said if isinstance(c, list) for p in c]
    images = {
        (p["image_url"].split(":")[0], p["detail"]) for p in parts if p["type"] == "input_image"
    }
    assert images == {("data", "low"), ("https", "auto")}
    kinds = [i["type"] for i in items]
    for m in sent:
        ids = [c["id"] for c in m.get("tool_calls") or []]
        if len(ids) > 1:
            at = next(n for n, i in enumerate(items) if i.get("call_id") == ids[0])
            assert [i["call_id"] for i in items[at : at + len(ids)]] == ids
            assert kinds[at : at + len(ids)] == ["function_call"] * len(ids)
    outputs = {i["call_id"]: i["output"] for i in items if i["type"] == "function_call_output"}
    assert outputs == {m["tool_call_id"]: m["content"] for m in sent if m["role"] == "tool"}
    assert any(o == "grep: invalid regex" for o in outputs.values())


async def test_post_context_takes_format_and_dynamic_context(
    client: httpx.AsyncClient, sid: str
) -> None:
    await client.post(
        f"/sessions/{sid}/messages",
        json={
            "messages": [
                {"role": "assistant", "content": "Hello."},
                user("hi"),
                call("c1"),
                result("c1"),
            ]
        },
    )
    r = await client.post(
        f"/sessions/{sid}/context",
        json={"format": "anthropic", "system": "Be terse.", "dynamic_context": ["Goal: ship."]},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    check_anthropic(body)
    assert [b["text"] for b in body["system"]] == ["Be terse.", "Goal: ship."]
    # The history starts with an assistant message: a user placeholder goes first.
    assert body["messages"][0]["content"][0]["text"] == "(conversation continues)"
    # Breakpoints end the system prompt, the system, the prefix before the newest step
    # (the last call and its result) and the payload.
    mark = {"cache_control": {"type": "ephemeral"}}
    assert breakpoints(body) == [
        {"type": "text", "text": "Be terse.", **mark},
        {"type": "text", "text": "Goal: ship.", **mark},
        {"type": "text", "text": "hi", **mark},
        body["messages"][-1]["content"][-1],
    ]
    assert body["messages"][-1]["content"][-1]["tool_use_id"] == "c1"


@pytest.mark.parametrize("where", ["get", "post"])
async def test_unknown_format_is_a_422_naming_it(
    client: httpx.AsyncClient, sid: str, where: str
) -> None:
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    if where == "get":
        r = await client.get(f"/sessions/{sid}/context", params={"format": "gemini"})
    else:
        r = await client.post(f"/sessions/{sid}/context", json={"format": "gemini"})
    assert r.status_code == 422, r.text
    assert [e["loc"] for e in r.json()["errors"]] == ["format"]


async def test_error_record_only_on_assistant_and_tool_messages(
    client: httpx.AsyncClient, sid: str
) -> None:
    bad = {**user("hi"), "error": {"type": "t", "message": "m"}}
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [bad]})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "messages[0].error"
