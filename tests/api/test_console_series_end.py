"""The console's token chart ends on what the session holds now, compactions stored
after the last message included (issue 24: it ended on a stale value)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from app.settings import load_settings
from tests.support.apps import app_client
from tests.support.console_data import turn

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
async def runner_client(make_database: Callable[[], str]) -> AsyncIterator[httpx.AsyncClient]:
    # Extractive summaries (no model), run by the app's own runner on a database of its own.
    settings = load_settings(run_compactions_in_process=True)
    async with app_client(settings, make_database(), "http://console.test") as c:
        yield c


async def test_the_chart_ends_on_the_tokens_after_the_last_compaction(
    runner_client: httpx.AsyncClient,
) -> None:
    c = runner_client
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
