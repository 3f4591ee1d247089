"""The guide's recipe for a compaction now on a short session (docs/guide.md,
"Compacting now, on a short session"): `force` alone is a noop whose detail counts the
turns really there and says what to lower; with the session's min_preserved_turns at 0
it compacts; `"compaction": null` returns the session to the defaults."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from app.core.settings import load_settings
from tests.support.apps import app_client
from tests.support.messages import user


async def test_force_alone_then_the_recipe(make_database: Callable[[], str], sid: str) -> None:
    # An app that runs compactions (the extractive summary), on a database of its own.
    async with app_client(load_settings(), make_database()) as client:
        await _recipe(client, sid)


async def _recipe(client: httpx.AsyncClient, sid: str) -> None:
    msgs = [user("first question"), {"role": "assistant", "content": "first answer"}]
    msgs += [user("second question"), {"role": "assistant", "content": "second answer"}]
    (await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})).raise_for_status()
    alone = await client.post(f"/sessions/{sid}/compact", json={"force": True, "wait": True})
    assert alone.status_code == 200, alone.text
    job = alone.json()
    assert job["status"] == "noop", job
    detail = job["compaction_metadata"]["detail"]
    assert "the current turn and 1 earlier turn," in detail, detail
    assert "min_preserved_turns (0 keeps only the current turn)" in detail, detail

    r = await client.put(f"/sessions/{sid}", json={"compaction": {"min_preserved_turns": 0}})
    assert r.status_code == 200, r.text
    now = await client.post(f"/sessions/{sid}/compact", json={"force": True, "wait": True})
    assert now.status_code == 200 and now.json()["status"] in ("success", "degraded"), now.text
    state = (await client.get(f"/sessions/{sid}/compaction")).json()
    assert state["last_compaction_seq"] == 2, state

    r = await client.put(f"/sessions/{sid}", json={"compaction": None})
    assert r.status_code == 200, r.text
    assert "min_preserved_turns" not in (await client.get(f"/sessions/{sid}")).json()["compaction"]
