"""What the console shows is what the session holds: its chart after a clear, past a turn
anchor, under calibration and after many jobs; its payload view writes nothing."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from app.console import queries
from app.core.settings import load_settings
from tests.support.apps import app_client
from tests.support.compaction_http import agent_run
from tests.support.console_data import turn
from tests.support.messages import user

SMALL: dict[str, Any] = {
    "context_limit": 4000,
    "auto_compact": False,
    "compaction": {
        "reserved_output_tokens": 0,
        "safety_margin_tokens": 0,
        "min_preserved_turns": 1,
        "min_free_ratio": 0.0,
        "regrowth_ratio": 0.0,
    },
}


@pytest.fixture(scope="module")
async def c(make_database: Callable[[], str]) -> AsyncIterator[httpx.AsyncClient]:
    # Extractive summaries (no model), run by the app's own runner on a database of its own.
    settings = load_settings(run_compactions_in_process=True)
    async with app_client(settings, make_database(), "http://console.test") as client:
        yield client


def _sid(tag: str) -> str:
    return f"{tag}-{uuid.uuid4().hex[:8]}"


async def _compact(c: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    r = await c.post(f"/sessions/{sid}/compact", json={"wait": True, "force": True})
    assert r.status_code == 200 and r.json()["status"] in ("success", "degraded"), r.text
    done: dict[str, Any] = r.json()
    return done


async def _ends_on_the_budget(c: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    """The chart's last point is the last message's sample and equals the budget's count."""
    session = (await c.get(f"/sessions/{sid}")).json()
    series: dict[str, Any] = (await c.get(f"/ui/api/sessions/{sid}/series")).json()
    last = series["points"][-1]
    assert last["seq"] == session["last_seq"] and "now" not in last, series["points"][-3:]
    assert last["tokens"] == session["budget"]["current_tokens"], (last, session["budget"])
    return series


async def test_after_a_clear_the_chart_follows_the_new_log(c: httpx.AsyncClient) -> None:
    sid = _sid("clr")
    (await c.put(f"/sessions/{sid}", json=SMALL)).raise_for_status()
    batch = [m for k in range(12) for m in turn(k)]
    (await c.post(f"/sessions/{sid}/messages", json={"messages": batch})).raise_for_status()
    await _compact(c, sid)
    (await c.post(f"/sessions/{sid}/clear", json={})).raise_for_status()
    for k in range(3):
        (await c.post(f"/sessions/{sid}/messages", json={"messages": turn(k)})).raise_for_status()

    series = await _ends_on_the_budget(c, sid)
    # The job stays in the history but describes no message of the new log.
    [job] = series["compactions"]
    assert job["status"] in ("success", "degraded") and job["watermark_through"] is None
    tokens = [p["tokens"] for p in series["points"]]
    assert tokens == sorted(tokens) and tokens[0] < tokens[-1], tokens  # the log grows again


async def test_the_chart_counts_the_turn_anchor_kept_below_the_watermark(
    c: httpx.AsyncClient,
) -> None:
    sid = _sid("anchor")
    (await c.put(f"/sessions/{sid}", json=SMALL)).raise_for_status()
    task = "Refactor the pkg modules one by one; never change a public name. " * 4
    run = [user(task), *agent_run(12)]
    (await c.post(f"/sessions/{sid}/messages", json={"messages": run})).raise_for_status()
    done = await _compact(c, sid)
    assert done["watermark_after"] > 1  # past the opening user message, which stays sent
    step = agent_run(1, first=12)
    (await c.post(f"/sessions/{sid}/messages", json={"messages": step})).raise_for_status()
    await _ends_on_the_budget(c, sid)


async def test_the_chart_counts_tokens_as_the_calibrated_budget_does(
    c: httpx.AsyncClient,
) -> None:
    sid = _sid("cal")
    # A model without a local tokenizer: estimated counts, scaled by what usage reports.
    body = {**SMALL, "model": "claude-3-5-sonnet-20241022", "context_limit": 10000}
    (await c.put(f"/sessions/{sid}", json=body)).raise_for_status()
    batch = [m for k in range(4) for m in turn(k)]
    (await c.post(f"/sessions/{sid}/messages", json={"messages": batch})).raise_for_status()
    for _ in range(6):
        ctx = (await c.get(f"/sessions/{sid}/context")).json()
        raw = ctx["usage"]["uncalibrated_input_tokens"]
        report = {"input_tokens": raw * 2, "uncalibrated_input_tokens": raw}
        (await c.post(f"/sessions/{sid}/usage", json=report)).raise_for_status()
    session = (await c.get(f"/sessions/{sid}")).json()
    assert session["budget"]["tokenizer_mode"] == "estimate"
    series = await _ends_on_the_budget(c, sid)
    assert series["points"][-1]["tokens"] > 1.5 * raw  # scaled: the factor is about 2


async def test_the_newest_compaction_is_drawn_after_many_jobs(
    c: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(queries, "MAX_JOBS", 3)
    sid = _sid("many")
    (await c.put(f"/sessions/{sid}", json=SMALL)).raise_for_status()
    batch = [m for k in range(12) for m in turn(k)]
    (await c.post(f"/sessions/{sid}/messages", json={"messages": batch})).raise_for_status()
    first = await _compact(c, sid)
    for _ in range(4):  # more jobs than the chart lists, none of them stored
        r = await c.post(f"/sessions/{sid}/compact", json={"wait": True})
        assert r.json()["status"] == "noop", r.text
    more = [m for k in range(12, 20) for m in turn(k)]
    (await c.post(f"/sessions/{sid}/messages", json={"messages": more})).raise_for_status()
    second = await _compact(c, sid)
    (await c.post(f"/sessions/{sid}/messages", json={"messages": turn(20)})).raise_for_status()

    series = await _ends_on_the_budget(c, sid)
    stored = [j["job_id"] for j in series["compactions"] if j["watermark_through"] is not None]
    assert stored == [first["job_id"], second["job_id"]]
    assert len(series["compactions"]) == 4  # the newest 3 jobs, and the older stored one


async def test_the_payload_view_stores_no_trim_and_records_no_event(
    c: httpx.AsyncClient,
) -> None:
    sid = _sid("look")
    tight = {**SMALL, "context_limit": 1200}
    (await c.put(f"/sessions/{sid}", json=tight)).raise_for_status()
    batch = [m for k in range(8) for m in turn(k)]
    (await c.post(f"/sessions/{sid}/messages", json={"messages": batch})).raise_for_status()

    async def trims() -> int:
        events = (await c.get(f"/sessions/{sid}/events")).json()["events"]
        return sum(1 for e in events if e["type"] == "context.compressed")

    for _ in range(2):
        seen = await c.get(f"/ui/api/sessions/{sid}/context")
        assert seen.status_code == 200 and seen.json()["dropped_count"] > 0, seen.text
    assert await trims() == 0
    # The agent's own call still trims afresh: the console's look fixed no layout.
    agent = (await c.get(f"/sessions/{sid}/context")).json()
    assert agent["kept_seqs"] == seen.json()["kept_seqs"]
    assert await trims() == 1
    assert (await c.get(f"/ui/api/sessions/{sid}x/context")).status_code == 404


async def test_the_page_answers_head(c: httpx.AsyncClient) -> None:
    for path in ("/ui/", "/ui/static/console.js"):
        r = await c.head(path)
        assert r.status_code == 200 and r.content == b"", path


async def test_the_chart_ends_on_the_tokens_after_the_last_compaction(
    c: httpx.AsyncClient,
) -> None:
    """After a compaction stored since the last message, the chart ends on what the
    session holds now (it ended on a stale value)."""
    sid = f"end-{uuid.uuid4().hex[:8]}"
    (await c.put(f"/sessions/{sid}", json=SMALL)).raise_for_status()
    batch = [m for k in range(12) for m in turn(k)]
    (await c.post(f"/sessions/{sid}/messages", json={"messages": batch})).raise_for_status()
    before = (await c.get(f"/ui/api/sessions/{sid}/series")).json()
    held_before = before["points"][-1]["tokens"]

    r = await c.post(f"/sessions/{sid}/compact", json={"wait": True, "force": True})
    assert r.status_code == 200 and r.json()["status"] in ("success", "degraded"), r.text
    session = (await c.get(f"/sessions/{sid}")).json()
    held_now = session["budget"]["current_tokens"]
    assert held_now < held_before  # the compaction freed something

    after = (await c.get(f"/ui/api/sessions/{sid}/series")).json()
    last = after["points"][-1]
    assert last["seq"] == session["last_seq"]
    assert last["tokens"] == held_now, (last, held_now)
    assert last.get("now") is True
    # The samples before it still show what each message was written under.
    assert after["points"][-2]["tokens"] == held_before
    [mark] = after["compactions"]
    assert mark["at_seq"] == session["last_seq"]
