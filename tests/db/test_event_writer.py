"""`context.compressed` events are written off the request path, in batches."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.db.database import Database
from app.db.engine import create_engine, session_factory
from app.db.models import DEFAULT_TENANT
from app.observability.events import EventWriter
from tests.support.databases import plain_url
from tests.support.messages import user


async def _events(database_url: str, sid: str) -> list[str]:
    conn = await asyncpg.connect(plain_url(database_url))
    try:
        rows = await conn.fetch(
            "SELECT type FROM events WHERE tenant_id = $1 AND session_id = $2 ORDER BY id",
            DEFAULT_TENANT,
            sid,
        )
    finally:
        await conn.close()
    return [r["type"] for r in rows]


async def test_a_trimmed_payload_is_recorded_without_anyone_asking(
    client: httpx.AsyncClient, database_url: str, sid: str
) -> None:
    await client.put(f"/sessions/{sid}", json={})
    msgs = [user(f"question {i}: " + "words " * 60) for i in range(20)]
    await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    r = await client.get(f"/sessions/{sid}/context", params={"max_tokens": 400})
    assert r.status_code == 200 and r.json()["dropped_count"] > 0
    # Nobody reads /events (which flushes): the writer's own loop must get it there.
    for _ in range(100):
        if "context.compressed" in await _events(database_url, sid):
            break
        await asyncio.sleep(0.05)
    assert (await _events(database_url, sid)).count("context.compressed") == 1


async def test_events_of_a_deleted_session_are_dropped_and_the_rest_written(
    app: FastAPI, client: httpx.AsyncClient, database_url: str, sid: str
) -> None:
    await client.put(f"/sessions/{sid}", json={})
    writer = EventWriter(app.state.database)  # not started: flushed by hand
    writer.add(DEFAULT_TENANT, sid, "context.compressed", {"n": 1})
    writer.add(DEFAULT_TENANT, sid + "-gone", "context.compressed", {"n": 2})
    writer.add(DEFAULT_TENANT, sid, "context.compressed", {"n": 3})
    await writer.flush()
    assert await _events(database_url, sid) == ["context.compressed"] * 2
    assert await _events(database_url, sid + "-gone") == []
    await writer.flush()  # nothing pending: nothing written twice
    assert len(await _events(database_url, sid)) == 2


async def test_while_the_database_is_away_events_wait(database_url: str, sid: str) -> None:
    # Port 9 (discard) on loopback: nothing listens, connecting fails at once.
    engine = create_engine("postgresql://postgres@127.0.0.1:9/nowhere", pool_size=1)
    try:
        writer = EventWriter(Database(session_factory(engine)), max_pending=3)
        for n in range(5):
            writer.add(DEFAULT_TENANT, sid, "context.compressed", {"n": n})
        with pytest.raises(OSError):
            await writer.flush()
        # Bounded: the two oldest were dropped; the rest are still there, in order.
        assert [p["data"]["n"] for p in writer._pending] == [2, 3, 4]
    finally:
        await engine.dispose()
