"""The recall tool and note in payloads (SPEC §3 "Recall"), over HTTP."""

from __future__ import annotations

import json
from typing import Any

import httpx

from app.context import recall
from app.core.tokens import get_counter
from tests.support.messages import call, result, user


async def grow(c: httpx.AsyncClient, sid: str, steps: int, start: int = 0) -> None:
    msgs: list[dict[str, Any]] = []
    for i in range(start, start + steps):
        msgs += [
            user(f"step {i}: " + "please continue with the migration work " * 6),
            call(f"c{i}", "shell", json.dumps({"cmd": f"make step-{i}"})),
            result(f"c{i}", f"step {i} ok, deploy token ZK-{88000 + i}\n" + "output line\n" * 20),
        ]
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text


def names(tools: list[dict[str, Any]]) -> list[str]:
    return [t.get("function", t).get("name") for t in tools]


def notes(messages: list[dict[str, Any]]) -> list[str]:
    return [
        m["content"]
        for m in messages
        if m["role"] == "system" and "not shown here" in str(m["content"])
    ]


async def test_a_trimmed_payload_offers_the_tool_and_says_what_it_left_out(
    client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.put(
        f"/sessions/{sid}",
        json={"recall": True, "model": "gpt-4o-mini", "strategy": "sliding_window"},
    )
    assert r.status_code == 201 and r.json()["recall"] is True
    await grow(client, sid, 30)
    body = (await client.get(f"/sessions/{sid}/context", params={"max_tokens": 3000})).json()
    assert names(body["tools"]) == ["recall"]
    [note] = notes(body["messages"])
    kept = set(body["kept_seqs"])
    ranges = body["recall"]["left_out"]
    left = {s for a, b in ranges for s in range(a, b + 1)}
    # No UI-only or system messages here: every seq is either sent or left out.
    assert left and not left & kept and left | kept == set(range(1, 91))
    assert body["recall"]["left_out_count"] == len(left)
    assert note.startswith(f"{len(left)} earlier messages")
    a, b = ranges[0]
    assert f"(seq {a}-{b}" in note or f"(seq {a}," in note or f"(seq {a} " in note
    # The note sits after the head (system block), right before the history.
    index = body["messages"].index(next(m for m in body["messages"] if m["content"] == note))
    assert all(m["role"] == "system" for m in body["messages"][:index])
    assert body["messages"][index + 1]["role"] != "system"
    # Both count: the total is exactly what is returned, and within the budget.
    counted = (
        await client.post(
            "/tokens/count",
            json={"model": "gpt-4o-mini", "messages": body["messages"], "tools": body["tools"]},
        )
    ).json()
    assert body["usage"]["input_tokens"] == counted["total"]
    assert body["usage"]["input_tokens"] <= 3000
    assert body["usage"]["breakdown"]["recall"] == recall.note_tokens(
        get_counter("gpt-4o-mini"), [tuple(x) for x in body["recall"]["left_out"]]
    )

    # The next call after one more step: the note and everything before the new step
    # are byte for byte the same (the selection only grew).
    await grow(client, sid, 1, start=30)
    again = (await client.get(f"/sessions/{sid}/context", params={"max_tokens": 3000})).json()
    assert set(again["kept_seqs"]) >= kept  # room left: no trim
    assert again["messages"][: len(body["messages"])] == body["messages"]
    assert notes(again["messages"]) == [note]
    assert again["usage"]["stable_prefix_messages"] >= index + 1

    # What the note points at is found by search and read in full.
    gone = sorted(s for s in left if s % 3 == 0)[0]  # a tool output left out
    token = f"ZK-{88000 + gone // 3 - 1}"
    assert token not in json.dumps(body["messages"])
    hits = (await client.get(f"/sessions/{sid}/search", params={"q": token})).json()
    assert [h["seq"] for h in hits["hits"]] == [gone]
    assert token in (await client.get(hits["hits"][0]["path"])).json()["content"]


async def test_per_call_parameter_overrides_the_session(
    client: httpx.AsyncClient, sid: str
) -> None:
    await grow(client, sid, 20)
    path = f"/sessions/{sid}/context"
    plain = (await client.get(path, params={"max_tokens": 2500})).json()
    assert "recall" not in names(plain["tools"]) and not notes(plain["messages"])
    on = (await client.get(path, params={"max_tokens": 2500, "recall": "true"})).json()
    assert names(on["tools"]) == ["recall"] and len(notes(on["messages"])) == 1
    posted = (await client.post(path, json={"max_tokens": 2500, "recall": True})).json()
    assert posted["messages"] == on["messages"] and posted["tools"] == on["tools"]
    # The same parameter spelled another way goes through the route: the same payload.
    spelled = (await client.get(path, params={"max_tokens": 2500, "recall": "1"})).json()
    assert spelled["messages"] == on["messages"]
    await client.put(f"/sessions/{sid}", json={"recall": True})
    off = (await client.get(path, params={"max_tokens": 2500, "recall": "false"})).json()
    assert "recall" not in names(off["tools"]) and not notes(off["messages"])
    bad = await client.post(path, json={"recall": "yes"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == "recall"
    bad_get = await client.get(path, params={"recall": "maybe"})
    assert bad_get.status_code == 422 and bad_get.json()["errors"][0]["loc"] == "recall"


async def test_nothing_left_out_means_no_note_and_own_tool_is_not_doubled(
    client: httpx.AsyncClient, sid: str
) -> None:
    await grow(client, sid, 2)
    own = {
        "type": "function",
        "function": {"name": "recall", "description": "mine", "parameters": {"type": "object"}},
    }
    body = (
        await client.post(f"/sessions/{sid}/context", json={"recall": True, "tools": [own]})
    ).json()
    assert body["tools"] == [own]
    assert not notes(body["messages"]) and body["recall"]["left_out_count"] == 0


async def test_every_format_carries_the_tool_and_the_note(
    client: httpx.AsyncClient, sid: str
) -> None:
    await grow(client, sid, 20)
    path = f"/sessions/{sid}/context"
    common: dict[str, Any] = {"max_tokens": 2500, "recall": "true"}
    responses = (await client.get(path, params={**common, "format": "responses"})).json()
    assert [t["name"] for t in responses["tools"]] == ["recall"]
    assert any("not shown here" in json.dumps(i) for i in responses["input"])
    anthropic = (await client.get(path, params={**common, "format": "anthropic"})).json()
    assert [t["name"] for t in anthropic["tools"]] == ["recall"]
    assert "input_schema" in anthropic["tools"][0]
    assert any("not shown here" in b["text"] for b in anthropic["system"])


def test_left_out_ranges_and_note_text() -> None:
    from app.context.types import Decision

    decisions = [
        Decision(1, "dropped", "budget", through=4),
        Decision(5, "kept", "recent"),
        Decision(6, "dropped", "budget", through=7),
        Decision(8, "excluded", "ui_only"),
        Decision(9, "kept", "recent"),
    ]
    assert recall.left_out([5, 9], decisions, 9) == [(1, 4), (6, 7)]
    assert recall.left_out([], [], 3) == [(1, 3)]
    assert recall.left_out([1, 2], [], 2) == []
    text = recall.note_text([(1, 4), (6, 7), (9, 9), (11, 12), (14, 15), (20, 20)])
    assert text.startswith("12 earlier messages") and "seq 1-4, 6-7, 9, 11-12 and 2 more" in text
    counter = get_counter("gpt-4o-mini")
    wide = [(1, 10**12), *((10**12 + 9 * i, 10**12 + 9 * i + 5) for i in range(1, 9))]
    assert recall.note_tokens(counter, wide) <= recall.reserve(counter)
