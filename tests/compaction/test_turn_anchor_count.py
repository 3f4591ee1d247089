"""The turn anchor stays counted however many compactions cut inside its turn (SPEC §5).

An agent run is one user message and many tool steps. The first compaction inside it
moves the watermark past that message; the next ones read no user message after the
watermark, yet the payload still sends it, so the session's budget must still count
it. Real PostgreSQL, the extractive summary (no model configured), over HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from app.core.conversation import summary_message
from app.core.settings import load_settings
from app.core.tokens import REPLY_PRIMING, get_counter
from tests.support.apps import app_client
from tests.support.compaction_http import SMALL, agent_run, compact, state
from tests.support.messages import log_of, user
from tests.support.turn_anchor import MODEL, SYSTEM, TASK, TOOLS


@pytest.fixture(scope="module")
async def ec(make_database: Callable[[], str]) -> AsyncIterator[httpx.AsyncClient]:
    # Compactions run in process, with no model: the extractive summary.
    async with app_client(load_settings(), make_database(), "http://anchor.test") as c:
        yield c


async def _append(c: httpx.AsyncClient, sid: str, msgs: list[dict[str, Any]]) -> None:
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text


async def _assert_counts_the_anchor(c: httpx.AsyncClient, sid: str) -> None:
    """Budget and stats add up exactly what the payload sends: system, tools, summary,
    the turn anchor below the watermark and the history after it."""
    counter = get_counter(MODEL)
    s = await state(c, sid)
    watermark = s["last_compaction_seq"]
    log = await log_of(c, sid)
    anchor = log[0]
    assert anchor["role"] == "user" and anchor["seq"] <= watermark, (anchor, watermark)
    assert not any(m["role"] == "user" for m in log[1:])
    history = anchor["token_count"] + sum(m["token_count"] for m in log if m["seq"] > watermark)
    session = (await c.get(f"/sessions/{sid}")).json()
    assert session["stats"]["context_tokens"] == history, (session["stats"], history)
    summary = counter.count_message(summary_message(s["summary"]["text"]))
    assert s["summary"]["tokens"] == summary
    system = counter.count_message({"role": "system", "content": SYSTEM})
    expected = system + counter.count_tools(TOOLS) + summary + history + REPLY_PRIMING
    budget = (await c.get(f"/sessions/{sid}/budget")).json()
    assert budget["current_tokens"] == expected, (budget, expected)
    # The payload does send it: the anchor opens the history, verbatim.
    r = await c.get(f"/sessions/{sid}/context")
    assert r.status_code == 200, r.text
    users = [m for m in r.json()["messages"] if m["role"] == "user"]
    assert any(m["content"] == TASK for m in users), users


async def test_every_compaction_inside_one_turn_keeps_its_anchor_counted(
    ec: httpx.AsyncClient, sid: str
) -> None:
    r = await ec.put(
        f"/sessions/{sid}",
        json={**SMALL, "model": MODEL, "system_prompt": SYSTEM, "tools": TOOLS},
    )
    assert r.status_code == 201, r.text
    await _append(ec, sid, [user(TASK), *agent_run(40)])
    jobs = []
    for n in range(3):
        if n:
            await _append(ec, sid, agent_run(12, first=100 * n))
            dry = (await ec.post(f"/sessions/{sid}/compact", json={"dry_run": True})).json()
            # Planned with the anchor below the watermark, not as if it were gone.
            assert dry["would"] == "compact" and dry["turn_anchor_seq"] == 1, dry
        before = (await state(ec, sid))["last_compaction_seq"]
        done = await compact(ec, sid, force=True)
        assert done["status"] == "success", done
        assert done["watermark_after"] > before
        assert done["compaction_metadata"]["turn_anchor_tokens"] > 0, done
        jobs.append(done)
        await _assert_counts_the_anchor(ec, sid)
        # The plan's own figure (what the regrowth guard starts from) agrees with it.
        budget = (await ec.get(f"/sessions/{sid}/budget")).json()["current_tokens"]
        assert done["compaction_metadata"]["compacted_context_tokens"] + REPLY_PRIMING == budget

    r = await ec.post(f"/sessions/{sid}/compaction/{jobs[-1]['job_id']}/revert")
    assert r.status_code == 200, r.text
    assert (await state(ec, sid))["last_compaction_seq"] == jobs[1]["watermark_after"]
    await _assert_counts_the_anchor(ec, sid)
