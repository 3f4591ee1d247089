"""Prompt-cache stability (SPEC §3 "Payload stability") through HTTP and real PostgreSQL.

An agent loop appends one step per model call and asks for the payload before
each call. While the log only grows, each payload is the previous one plus the
new messages; a trim cuts to the low-water mark (0.7 of the budget); the state
lives in the database, so a second app instance on it answers the same; and
`usage.stable_prefix_tokens` equals the prefix measured by comparing payloads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.core.settings import Settings
from app.core.tokens import get_counter
from app.main import create_app
from tests.support.compaction_http import SMALL, compact
from tests.support.messages import call, result, user
from tests.support.stability import (
    BUDGET,
    SYSTEM,
    TOOLS,
    append,
    is_prefix,
    payload,
    shared_prefix,
    step,
    tool_groups_whole,
)


@pytest.fixture
async def second(settings: Settings, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A second app instance (its own pool and caches) on the same database."""
    other: FastAPI = create_app(settings, database_url=database_url)
    async with other.router.lifespan_context(other):
        transport = httpx.ASGITransport(app=other)
        async with httpx.AsyncClient(transport=transport, base_url="http://second.test") as c:
            yield c


async def start(c: httpx.AsyncClient, sid: str) -> None:
    r = await c.put(f"/sessions/{sid}", json={"system_prompt": SYSTEM, "tools": TOOLS})
    assert r.status_code in (200, 201), r.text
    await append(c, sid, [user("Please audit every module under src/ and report findings.")])


async def test_agent_loop_appends_and_trims_to_the_low_water_mark(
    client: httpx.AsyncClient, second: httpx.AsyncClient, sid: str
) -> None:
    await start(client, sid)
    prev: dict[str, Any] | None = None
    trims = appends = 0
    for i in range(45):
        await append(client, sid, step(i))
        # Alternate the two instances: one database, one stream.
        c = client if i % 2 else second
        body = await payload(c, sid, prev["prefix_id"] if prev else None)
        messages, usage = body["messages"], body["usage"]
        assert usage["input_tokens"] <= BUDGET and not body["over_budget"]
        assert tool_groups_whole(messages)
        assert messages[0] == {"role": "system", "content": SYSTEM}
        assert f"c{i}" in {m.get("tool_call_id") for m in messages}  # the newest step is sent
        # The other instance, asked the same, answers the same, byte for byte.
        other = await payload(
            client if c is second else second, sid, prev["prefix_id"] if prev else None
        )
        assert other == body
        if prev is not None:
            n, tokens = shared_prefix(prev, body)
            assert usage["stable_prefix_messages"] == n
            assert usage["stable_prefix_tokens"] == tokens
            if is_prefix(prev["messages"], messages):
                appends += 1
                assert messages[len(prev["messages"]) :][-2:] == step(i)
            else:
                trims += 1
                # Cut to the low-water mark, not just under the budget.
                assert usage["input_tokens"] <= 0.7 * BUDGET
                assert n >= 1  # the system block is still shared
        prev = body
    # ~150 tokens per step: the log outgrows the budget ~2.5 times over.
    assert trims >= 2
    assert appends >= 3 * trims  # 0.3 x 2500 tokens of room: ~4 steps between trims


async def test_an_instance_started_after_the_trims_answers_the_same(
    client: httpx.AsyncClient, settings: Settings, database_url: str, sid: str
) -> None:
    """A restart changes nothing: the selection a trim fixed is read from the database,
    not from the process that trimmed."""
    await start(client, sid)
    calls: list[tuple[str | None, dict[str, Any]]] = []
    trims: list[int] = []
    for i in range(40):
        await append(client, sid, step(i))
        previous = calls[-1][1]["prefix_id"] if calls else None
        calls.append((previous, await payload(client, sid, previous)))
        if i and not is_prefix(calls[-2][1]["messages"], calls[-1][1]["messages"]):
            trims.append(i)
        elif len(trims) >= 2:
            break  # the last call replays a stored trim
    assert len(trims) >= 2 and trims[-1] < len(calls) - 1
    previous, last = calls[-1]
    fresh: FastAPI = create_app(settings, database_url=database_url)
    async with fresh.router.lifespan_context(fresh):
        transport = httpx.ASGITransport(app=fresh)
        async with httpx.AsyncClient(transport=transport, base_url="http://fresh.test") as c:
            assert await payload(c, sid, previous) == last
            await append(c, sid, step(len(calls)))
            after = await payload(c, sid, last["prefix_id"])
    # The new step appended to the replayed layout, and the first instance agrees.
    assert is_prefix(last["messages"], after["messages"])
    assert await payload(client, sid, last["prefix_id"]) == after


def steps_sent(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """The agent steps a payload holds (whole or masked), by their call ids `c<i>`."""
    return [
        int(c["id"][1:]) for m in messages for c in m.get("tool_calls") or () if c["id"][0] == "c"
    ]


async def test_a_trim_keeps_the_agents_recent_work_before_the_cache(
    client: httpx.AsyncClient, sid: str
) -> None:
    """Recency before stability (SPEC §3): at every call the payload holds the newest steps
    as one contiguous run ending at the step just taken, the newest one whole; old steps
    leave before new ones; the system block, the task and every user message stay in
    front; `usage.recent_tokens` counts that newest run."""
    await start(client, sid)
    task = user("Please audit every module under src/ and report findings.")
    rule = user("Also: never edit anything under tests/.")
    counter = get_counter("gpt-4o")
    prev: dict[str, Any] | None = None
    trims: list[int] = []
    for i in range(45):
        await append(client, sid, [*step(i), *([rule] if i == 5 else [])])
        body = await payload(client, sid, prev["prefix_id"] if prev else None)
        messages = body["messages"]
        assert body["usage"]["input_tokens"] <= BUDGET and tool_groups_whole(messages)
        assert messages[:2] == [{"role": "system", "content": SYSTEM}, task]
        if i >= 5:
            assert rule in messages
        sent = steps_sent(messages)
        assert sent == list(range(sent[0], i + 1)), sent  # the newest run, nothing older
        assert step(i)[1] in messages  # what the agent just read, whole
        if i > 5:
            # The run reaches back to the task while step 0 is held, to the rule (logged
            # between steps 5 and 6) while step 6 is.
            newest = [m for m in messages[1 if sent[0] == 0 else 2 :] if m != rule or sent[0] <= 6]
            assert body["usage"]["recent_tokens"] == sum(map(counter.count_message, newest))
        if prev is not None and not is_prefix(prev["messages"], messages):
            n, _ = shared_prefix(prev, body)
            trims.append(n)
            assert sent[0] >= steps_sent(prev["messages"])[0]  # masked or gone: oldest first
        prev = body
    assert len(trims) >= 3
    assert all(n >= 2 for n in trims), trims  # system block and task: the cache's head


async def test_a_new_summary_or_tail_delete_invalidates_the_kept_selection(
    client: httpx.AsyncClient, sid: str
) -> None:
    await start(client, sid)
    for i in range(30):
        await append(client, sid, step(i))
    first = await payload(client, sid)
    assert first["dropped_count"] > 0
    again = await payload(client, sid, first["prefix_id"])
    assert again["messages"] == first["messages"]
    assert again["usage"]["stable_prefix_messages"] == len(first["messages"])
    # Undo the last step and take a different one: the deleted result is never sent.
    last = max(again["kept_seqs"])
    r = await client.delete(f"/sessions/{sid}/messages", params={"from_seq": last - 1})
    assert r.status_code == 200, r.text
    await append(client, sid, [call("other"), result("other", "a different result")])
    after = await payload(client, sid, again["prefix_id"])
    sent = {m.get("tool_call_id") for m in after["messages"]}
    assert "other" in sent and "c29" not in sent
    assert tool_groups_whole(after["messages"])
    # Seqs were reused: across a tail delete only the head is claimed (a lower bound).
    assert 1 <= after["usage"]["stable_prefix_messages"] <= shared_prefix(again, after)[0]
    # Clear: nothing of the old log comes back.
    r = await client.post(f"/sessions/{sid}/clear")
    assert r.status_code == 200, r.text
    await append(client, sid, [user("Start over."), *step(100)])
    fresh = await payload(client, sid, after["prefix_id"])
    assert [m.get("tool_call_id") for m in fresh["messages"] if m["role"] == "tool"] == ["c100"]
    assert 1 <= fresh["usage"]["stable_prefix_messages"] <= shared_prefix(after, fresh)[0]


async def test_pinned_and_latest_user_messages_stay_after_a_replay(
    client: httpx.AsyncClient, sid: str
) -> None:
    await start(client, sid)
    for i in range(25):
        await append(client, sid, step(i))
    await payload(client, sid)  # a trim fixes the selection
    await append(client, sid, [user("Keep every answer under 50 words.", pinned=True)])
    for i in range(25, 40):
        await append(client, sid, step(i))
    body = await payload(client, sid)
    texts = [m.get("content") for m in body["messages"]]
    assert "Keep every answer under 50 words." in texts
    assert tool_groups_whole(body["messages"])
    assert body["usage"]["input_tokens"] <= BUDGET


async def test_a_changed_head_shares_only_what_is_equal(
    client: httpx.AsyncClient, sid: str
) -> None:
    await start(client, sid)
    for i in range(20):
        await append(client, sid, step(i))

    async def post(**body: Any) -> dict[str, Any]:
        r = await client.post(f"/sessions/{sid}/context", json={"max_tokens": BUDGET, **body})
        assert r.status_code == 200, r.text
        out: dict[str, Any] = r.json()
        return out

    first = await post(dynamic_context=["Goal: audit src/."])
    same = await post(dynamic_context=["Goal: audit src/."], previous_prefix_id=first["prefix_id"])
    assert same["messages"] == first["messages"]
    assert same["usage"]["stable_prefix_tokens"] == shared_prefix(first, same)[1]
    assert same["usage"]["stable_prefix_messages"] == len(first["messages"])
    # A new goal: the system prompt is still shared, nothing after the changed item.
    other = await post(dynamic_context=["Goal: fix tests/."], previous_prefix_id=same["prefix_id"])
    assert other["messages"][2:] == same["messages"][2:]  # the history selection is unchanged
    assert other["usage"]["stable_prefix_messages"] == 1 == shared_prefix(same, other)[0]
    assert other["usage"]["stable_prefix_tokens"] == shared_prefix(same, other)[1]
    # Other tools: providers render them first, so nothing is shared.
    tools = [{"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}]
    new_tools = await post(
        dynamic_context=["Goal: fix tests/."], tools=tools, previous_prefix_id=other["prefix_id"]
    )
    assert new_tools["usage"]["stable_prefix_tokens"] == 0
    # An unknown or malformed echo claims nothing and is not an error.
    odd = await post(dynamic_context=["Goal: fix tests/."], previous_prefix_id="nonsense")
    assert odd["usage"]["stable_prefix_tokens"] == 0
    bad = await client.post(
        f"/sessions/{sid}/context", json={"max_tokens": BUDGET, "previous_prefix_id": 7}
    )
    assert bad.status_code == 422 and "previous_prefix_id" in bad.text


async def test_a_new_summary_starts_a_new_selection(
    cclient: httpx.AsyncClient,
    sid: str,
) -> None:
    r = await cclient.put(
        f"/sessions/{sid}", json={**SMALL, "system_prompt": SYSTEM, "tools": TOOLS}
    )
    assert r.status_code in (200, 201), r.text
    for i in range(24):
        turn = [user(f"Now look at module {i}.")] if i % 4 == 0 else []
        await append(cclient, sid, [*turn, *step(i)])
    before = await payload(cclient, sid)
    assert before["dropped_count"] > 0 and not before["summary"]["included"]
    done = await compact(cclient, sid, force=True)
    assert done["status"] == "success", done
    watermark = int(done["watermark_after"])
    after = await payload(cclient, sid, before["prefix_id"])
    assert after["summary"] == {"included": True, "through_seq": watermark}
    assert min(after["kept_seqs"]) > watermark
    assert tool_groups_whole(after["messages"])
    # The summary follows the system prompt: only the system message is shared.
    assert after["usage"]["stable_prefix_messages"] == 1 == shared_prefix(before, after)[0]
    assert after["usage"]["stable_prefix_tokens"] == shared_prefix(before, after)[1]
    # And the calls after it append again.
    await append(cclient, sid, step(99))
    later = await payload(cclient, sid, after["prefix_id"])
    assert is_prefix(after["messages"], later["messages"])
    assert later["usage"]["stable_prefix_messages"] == len(after["messages"])


async def test_after_a_compaction_past_the_turn_anchor_what_fits_is_sent_whole(
    cclient: httpx.AsyncClient,
    sid: str,
) -> None:
    """One long agent turn compacted inside the turn: the watermark passes the opening
    user message, which stays in the effective history. A payload whose budget holds all
    of it sends all of it, the newest steps whole (it used to trim to the low-water mark
    on every first call after such a compaction)."""
    r = await cclient.put(f"/sessions/{sid}", json={**SMALL, "system_prompt": SYSTEM})
    assert r.status_code in (200, 201), r.text
    await append(cclient, sid, [user("Run the whole migration, step by step.")])
    for i in range(12):
        await append(cclient, sid, step(i))
    done = await compact(cclient, sid, force=True)
    assert done["status"] == "success" and int(done["watermark_after"]) > 1, done
    budget = (await cclient.get(f"/sessions/{sid}/budget")).json()["current_tokens"]
    whole = await payload(cclient, sid, max_tokens=budget + 50)
    assert whole["dropped_count"] == 0 and not whole["over_budget"], whole["decisions"]
    # Sent, or the summary's (the compacted steps the window read below the watermark).
    assert all(
        d["action"] == "kept" or (d["action"], d["rule"]) == ("excluded", "summarized")
        for d in whole["decisions"]
    ), whole["decisions"]
    assert whole["kept_seqs"][0] == 1  # the turn anchor, below the watermark
    # And the next call, one step later, appends to it.
    await append(cclient, sid, step(12))
    later = await payload(cclient, sid, whole["prefix_id"], max_tokens=budget + 400)
    assert is_prefix(whole["messages"], later["messages"]) and later["dropped_count"] == 0


async def test_recent_tokens_stop_at_units_a_replay_did_not_read(
    client: httpx.AsyncClient, sid: str
) -> None:
    """A replayed layout reads only the old units it keeps (the user's messages here),
    not the ones it left out between them: the newest run still ends at the first unit
    left out, on the call that trimmed and on the calls that replay it."""
    log: list[dict[str, Any]] = []
    for t in range(8):
        log.append(user(f"Turn {t}: fix src/app/models.py", **({"pinned": True} if t == 0 else {})))
        for s in range(2):
            ids = [f"c{t}_{s}_{k}" for k in range(3)]
            log.append({**call(ids[0]), "tool_calls": [call(i)["tool_calls"][0] for i in ids]})
            for k, i in enumerate(ids):
                log.append(result(i, f"line {k} of the output of {i}\n" * (220 if k == 0 else 8)))
        log.append({"role": "assistant", "content": f"Done with turn {t}."})
    await append(client, sid, log)
    counter = get_counter("gpt-4o")
    answers = [await payload(client, sid, max_tokens=1000) for _ in range(3)]
    for body in answers:
        assert body["kept_seqs"] == answers[0]["kept_seqs"]
        kept = body["kept_seqs"]
        run = 1
        while run < len(kept) and kept[-run - 1] == kept[-run] - 1:
            run += 1
        assert run < len(kept)  # older user messages are kept apart from the newest run
        newest = body["messages"][-run:]
        assert body["usage"]["recent_tokens"] == sum(map(counter.count_message, newest))
