"""A turn anchor below the watermark stops counting once a user message follows (SPEC §5).

A compaction that cuts inside a turn keeps that turn's user message counted: the
payload sends the session's latest user message whatever the watermark. A new user
message makes it no longer the latest, no longer sent, so the session's budget must
stop counting it at once (the append's own statement gives its tokens back), also when
that user message lands while a compaction is running, after a revert to a state that
kept it, and again when a tail cut makes it the latest once more. Every check is
against what `GET /sessions/{id}/context` sends. Real PostgreSQL, over HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.core.conversation import summary_message
from app.core.settings import load_settings
from app.core.tokens import REPLY_PRIMING, get_counter
from app.main import create_app
from app.messages.group_transaction import write_group
from tests.support.apps import app_client, model_settings
from tests.support.compaction_http import SMALL, agent_run, compact, state
from tests.support.fakellm import FakeLLM
from tests.support.groups import pending
from tests.support.messages import log_of, user
from tests.support.turn_anchor import MODEL, SYSTEM, TASK, TOOLS

pytestmark = pytest.mark.fake_llm(slow_s=1.5)

NEXT = "Now write the summary of pkg/ into REPORT.md, one line per module."


@pytest.fixture(scope="module")
async def served(
    make_database: Callable[[], str],
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    # Compactions run in process, with no model: the extractive summary. The app too,
    # for the group commit's own entry point.
    app = create_app(load_settings(), database_url=make_database())
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://released.test", timeout=30
        ) as c:
            yield app, c


@pytest.fixture(scope="module")
def ec(served: tuple[FastAPI, httpx.AsyncClient]) -> httpx.AsyncClient:
    return served[1]


async def _append(c: httpx.AsyncClient, sid: str, msgs: list[dict[str, Any]]) -> None:
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text


async def _start(c: httpx.AsyncClient, sid: str) -> None:
    r = await c.put(
        f"/sessions/{sid}", json={**SMALL, "model": MODEL, "system_prompt": SYSTEM, "tools": TOOLS}
    )
    assert r.status_code == 201, r.text


async def _assert_counts_what_is_sent(c: httpx.AsyncClient, sid: str) -> bool:
    """Stats and budget add up exactly what the payload sends: system, tools, summary, the
    history after the watermark and, only while it is the session's latest user message,
    the one at or below it. Returns whether such an anchor is counted."""
    counter = get_counter(MODEL)
    s = await state(c, sid)
    watermark = s["last_compaction_seq"]
    log = await log_of(c, sid)
    users = [m for m in log if m["role"] == "user"]
    latest = users[-1]
    anchored = bool(latest["seq"] <= watermark)
    history = sum(m["token_count"] for m in log if m["seq"] > watermark)
    history += latest["token_count"] if anchored else 0
    session = (await c.get(f"/sessions/{sid}")).json()
    assert session["stats"]["context_tokens"] == history, (session["stats"], history, anchored)
    summary = counter.count_message(summary_message(s["summary"]["text"])) if watermark else 0
    assert s["summary"]["tokens"] == summary
    system = counter.count_message({"role": "system", "content": SYSTEM})
    expected = system + counter.count_tools(TOOLS) + summary + history + REPLY_PRIMING
    budget = (await c.get(f"/sessions/{sid}/budget")).json()
    assert budget["current_tokens"] == expected, (budget, expected, anchored)
    # What the payload sends: the latest user message, and no older one verbatim below
    # the watermark (the summary carries those).
    r = await c.get(f"/sessions/{sid}/context")
    assert r.status_code == 200, r.text
    sent = [m["content"] for m in r.json()["messages"] if m["role"] == "user"]
    assert latest["content"] in sent, sent
    below = [m["content"] for m in users[:-1] if m["seq"] <= watermark]
    assert not any(text in sent for text in below), (below, sent)
    return anchored


async def test_a_user_message_after_a_compaction_inside_its_turn_releases_the_anchor(
    ec: httpx.AsyncClient, sid: str
) -> None:
    await _start(ec, sid)
    await _append(ec, sid, [user(TASK), *agent_run(40)])
    first = await compact(ec, sid, force=True)
    assert first["compaction_metadata"]["turn_anchor_tokens"] > 0, first
    assert await _assert_counts_what_is_sent(ec, sid)
    await _append(ec, sid, agent_run(12, first=100))
    second = await compact(ec, sid, force=True)
    assert second["status"] == "success", second
    assert await _assert_counts_what_is_sent(ec, sid)

    # The new turn: the task below the watermark is no longer sent, nor counted.
    await _append(ec, sid, [user(NEXT), *agent_run(3, first=200)])
    assert not await _assert_counts_what_is_sent(ec, sid)
    next_seq = next(m["seq"] for m in await log_of(ec, sid) if m["content"] == NEXT)

    # A revert to the second compaction's predecessor: its stored figure kept the task
    # counted, but the task is still not the latest user message.
    r = await ec.post(f"/sessions/{sid}/compaction/{second['job_id']}/revert")
    assert r.status_code == 200, r.text
    assert (await state(ec, sid))["last_compaction_seq"] == first["watermark_after"]
    assert not await _assert_counts_what_is_sent(ec, sid)

    # Cutting the new turn away makes the task the latest user message again: sent and
    # counted once more.
    r = await ec.delete(f"/sessions/{sid}/messages", params={"from_seq": next_seq})
    assert r.status_code == 200, r.text
    assert await _assert_counts_what_is_sent(ec, sid)

    # Several appends at once, each with a user message: serialised on the session row,
    # the first gives the anchor back and the others find nothing more to give.
    await asyncio.gather(
        *(
            _append(ec, sid, [user(f"{NEXT} ({k})"), *agent_run(2, first=300 + 10 * k)])
            for k in range(4)
        )
    )
    assert not await _assert_counts_what_is_sent(ec, sid)
    # And a compaction inside the newest turn keeps its own anchor, as before.
    await _append(ec, sid, agent_run(30, first=400))
    third = await compact(ec, sid, force=True)
    assert third["status"] == "success", third
    await _assert_counts_what_is_sent(ec, sid)


async def test_a_group_commit_releases_each_sessions_anchor(
    served: tuple[FastAPI, httpx.AsyncClient],
) -> None:
    app, c = served
    sids = [f"s-released-{k}" for k in range(2)]
    for sid in sids:
        await _start(c, sid)
        await _append(c, sid, [user(TASK), *agent_run(40)])
        done = await compact(c, sid, force=True)
        assert done["compaction_metadata"]["turn_anchor_tokens"] > 0, done
        assert await _assert_counts_what_is_sent(c, sid)
    # One statement for both sessions (WRITE_GROUP), one with a user message, one without.
    settings = app.state.services.settings
    items = [
        pending(settings, sids[0], [user(NEXT), *agent_run(2, first=100)]),
        pending(settings, sids[1], agent_run(2, first=100)),
    ]
    results = await write_group(app.state.database, items)
    assert all(r is not None and r.created for r in results), results
    assert not await _assert_counts_what_is_sent(c, sids[0])
    assert await _assert_counts_what_is_sent(c, sids[1])


async def test_a_user_message_while_a_compaction_runs_is_not_overcounted_by_its_store(
    llm: FakeLLM, make_database: Callable[[], str], sid: str
) -> None:
    # The job reads the history (no user message after the watermark), then waits on the
    # model; the user message lands meanwhile. Appends do not fence a store: the store
    # itself must see that its anchor is no longer the latest user message.
    llm.behaviour = "normal"
    settings = model_settings(llm.base_url, 30.0)
    async with app_client(settings, make_database(), "http://released-race.test") as c:
        await _start(c, sid)
        await _append(c, sid, [user(TASK), *agent_run(40)])
        first = await compact(c, sid, force=True)
        assert first["status"] == "success", first
        assert first["compaction_metadata"]["turn_anchor_tokens"] > 0, first
        await _append(c, sid, agent_run(12, first=100))
        llm.behaviour = "slow"
        calls = llm.call_count
        r = await c.post(f"/sessions/{sid}/compact", json={"force": True})
        assert r.status_code in (200, 202), r.text
        job_id = r.json()["job_id"]
        for _ in range(300):
            if llm.call_count > calls:
                break
            await asyncio.sleep(0.05)
        assert llm.call_count > calls, "the job never asked the model"
        await _append(c, sid, [user(NEXT), *agent_run(2, first=200)])
        for _ in range(300):
            job = next(j for j in (await state(c, sid))["jobs"] if j["job_id"] == job_id)
            if job["status"] not in ("pending", "running"):
                break
            await asyncio.sleep(0.1)
        assert job["status"] in ("success", "degraded"), job
        assert job["compaction_metadata"]["turn_anchor_tokens"] > 0, job
        assert not await _assert_counts_what_is_sent(c, sid)
