"""A model switch recounts every count the session stores, not only the log's: the
summary's tokens, the system prompt's and the tools' follow the session's tokenizer,
and so does the turn anchor a compaction kept below the watermark, so budgets and
status never add figures of two tokenizers. Real PostgreSQL, the extractive summary
(no model configured), over HTTP."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from app.core.conversation import summary_message
from app.core.settings import load_settings
from app.core.tokens import REPLY_PRIMING, get_counter
from tests.support.apps import app_client
from tests.support.compaction_http import SMALL, agent_run, compact, long_session, state
from tests.support.messages import log_of, user

SYSTEM = "You are a careful agent. Ответ — коротко. 回答要简短。" * 4
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository. 读取文件。",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
EXTRA = {"system_prompt": SYSTEM, "tools": TOOLS}
SWITCHES = [("gpt-4o", "gpt-4"), ("gpt-4", "claude-sonnet-4"), ("claude-sonnet-4", "gpt-4o")]


@pytest.fixture(scope="module")
async def ec(make_database: Callable[[], str]) -> AsyncIterator[httpx.AsyncClient]:
    # An app that runs compactions in process, with no model: the extractive summary.
    async with app_client(load_settings(), make_database(), "http://switch.test") as c:
        yield c


async def _turns(c: httpx.AsyncClient, sid: str, model: str) -> None:
    """Many short turns: the compaction ends between two of them."""
    await long_session(c, sid, settings={"model": model, **EXTRA})


async def _one_long_turn(c: httpx.AsyncClient, sid: str, model: str) -> None:
    """One turn of many steps: the compaction cuts inside it, past its user message."""
    await c.put(f"/sessions/{sid}", json={**SMALL, "model": model, **EXTRA})
    msgs = [user("Go through every module of pkg/ and report. 逐个检查。"), *agent_run(40)]
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text


async def _anchor(c: httpx.AsyncClient, sid: str) -> dict[str, Any] | None:
    """The user message below the watermark that the effective history still holds."""
    s = await state(c, sid)
    watermark = s["last_compaction_seq"]
    log = await log_of(c, sid)
    after = sum(m["token_count"] for m in log if m["seq"] > watermark)
    held = (await c.get(f"/sessions/{sid}")).json()["stats"]["context_tokens"]
    if held == after:
        return None
    below = [m for m in log if m["seq"] <= watermark and m["role"] == "user"]
    assert below and held == after + below[-1]["token_count"], (held, after)
    return below[-1]


async def _assert_counted_with(c: httpx.AsyncClient, sid: str, model: str, anchored: bool) -> None:
    counter = get_counter(model)
    s = await state(c, sid)
    text = s["summary"]["text"]
    assert s["summary"]["tokens"] == counter.count_message(summary_message(text)), s["summary"]
    session = (await c.get(f"/sessions/{sid}")).json()
    assert session["tokenizer"] == counter.name
    watermark = s["last_compaction_seq"]
    log = await log_of(c, sid)
    history = sum(m["token_count"] for m in log if m["seq"] > watermark)
    anchor = await _anchor(c, sid)
    assert (anchor is not None) == anchored, anchor
    if anchor is not None:
        history += anchor["token_count"]
    assert session["stats"]["context_tokens"] == history
    # What the budget adds up: system, tools, summary and history, each in this tokenizer.
    system = counter.count_message({"role": "system", "content": SYSTEM})
    expected = system + counter.count_tools(TOOLS) + s["summary"]["tokens"] + history
    budget = (await c.get(f"/sessions/{sid}/budget")).json()
    assert budget["current_tokens"] == expected + REPLY_PRIMING, (budget, expected)


@pytest.mark.parametrize("shape", [_turns, _one_long_turn], ids=["turns", "one_long_turn"])
@pytest.mark.parametrize(("first", "then"), SWITCHES)
async def test_a_model_switch_recounts_the_summary_and_the_turn_anchor(
    ec: httpx.AsyncClient, sid: str, first: str, then: str, shape: Any
) -> None:
    await shape(ec, sid, first)
    done = await compact(ec, sid)
    assert done["status"] == "success", done
    before = await state(ec, sid)
    old = get_counter(first).count_message(summary_message(before["summary"]["text"]))
    assert before["summary"]["tokens"] == old
    # Each shape is what it says: a turn anchor below the watermark or none.
    anchored = shape is _one_long_turn
    await _assert_counted_with(ec, sid, first, anchored)

    r = await ec.put(f"/sessions/{sid}", json={"model": then})
    assert r.status_code == 200, r.text
    assert get_counter(then).name != get_counter(first).name
    await _assert_counted_with(ec, sid, then, anchored)
    after = await state(ec, sid)
    assert after["summary"]["text"] == before["summary"]["text"]
    # The test can fail: this summary counts differently in the two tokenizers.
    assert after["summary"]["tokens"] != old


async def test_a_revert_after_a_model_switch_keeps_the_restored_turn_anchor(
    ec: httpx.AsyncClient, sid: str
) -> None:
    await _one_long_turn(ec, sid, "gpt-4o")
    first = await compact(ec, sid)
    msgs = agent_run(12, first=100)
    r = await ec.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    second = await compact(ec, sid, force=True)
    assert first["status"] == second["status"] == "success", (first, second)
    # The second compaction read no user message after the first one's watermark, yet
    # the payload still sends the first one's anchor: it stays counted.
    await _assert_counted_with(ec, sid, "gpt-4o", anchored=True)
    r = await ec.put(f"/sessions/{sid}", json={"model": "gpt-4"})
    assert r.status_code == 200, r.text
    await _assert_counted_with(ec, sid, "gpt-4", anchored=True)
    r = await ec.post(f"/sessions/{sid}/compaction/{second['job_id']}/revert")
    assert r.status_code == 200, r.text
    assert (await state(ec, sid))["last_compaction_seq"] == first["watermark_after"]
    # The first compaction's turn anchor is in the restored history, counted anew.
    await _assert_counted_with(ec, sid, "gpt-4", anchored=True)


async def _regrowth(c: httpx.AsyncClient, sid: str) -> tuple[int, int]:
    """The history now and the regrowth guard's base, as a dry run's noop names them."""
    r = await c.post(f"/sessions/{sid}/compact", json={"dry_run": True})
    assert r.status_code == 200, r.text
    found = re.search(r"history is (\d+) tokens; the last compaction left (\d+)", r.text)
    assert found, r.text
    return int(found[1]), int(found[2])


async def test_a_model_switch_scales_the_regrowth_guard_base_with_the_history(
    ec: httpx.AsyncClient, sid: str
) -> None:
    await _turns(ec, sid, "gpt-4o")
    assert (await compact(ec, sid))["status"] == "success"
    r = await ec.put(
        f"/sessions/{sid}", json={"compaction": {**SMALL["compaction"], "regrowth_ratio": 5}}
    )
    assert r.status_code == 200, r.text
    # Enough new turns that a range lies outside the preserved tail, not enough to regrow.
    turns = [
        m
        for i in range(6)
        for m in (user(f"And module {i}? 模块"), {"role": "assistant", "content": "Fine. " * 30})
    ]
    r = await ec.post(f"/sessions/{sid}/messages", json={"messages": turns})
    assert r.status_code == 201, r.text
    history, base = await _regrowth(ec, sid)
    r = await ec.put(f"/sessions/{sid}", json={"model": "claude-sonnet-4"})
    assert r.status_code == 200, r.text
    history2, base2 = await _regrowth(ec, sid)
    assert history2 != history and base2 != base  # both recounted, in the estimate
    assert base2 == round(base * history2 / history)


async def test_a_changed_default_model_recounts_the_stored_counts_at_the_next_append(
    make_database: Callable[[], str], sid: str
) -> None:
    # A session with no model of its own follows the server's default: a restart with
    # another default switches its tokenizer, and its next append recounts (the path
    # in app/messages/service.py), the system prompt, tools and summary with the log.
    url = make_database()
    async with app_client(load_settings(default_model="gpt-4o"), url) as c:
        await long_session(c, sid, settings=EXTRA)
        assert (await compact(c, sid))["status"] == "success"
        await _assert_counted_with(c, sid, "gpt-4o", anchored=False)
    async with app_client(load_settings(default_model="claude-sonnet-4"), url) as c:
        r = await c.post(f"/sessions/{sid}/messages", json={"messages": [user("next")]})
        assert r.status_code == 201, r.text
        await _assert_counted_with(c, sid, "claude-sonnet-4", anchored=False)
