"""SPEC §6 under concurrency: acknowledged appends are there exactly once, in order, gap-free."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.core.settings import Settings
from app.main import create_app
from tests.support.messages import call, log_of, result, user


@pytest.fixture
async def second_client(settings: Settings, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A second app with its own engine and pool: another server process on the same database."""
    other: FastAPI = create_app(settings, database_url=database_url)
    async with other.router.lifespan_context(other):
        transport = httpx.ASGITransport(app=other)
        async with httpx.AsyncClient(transport=transport, base_url="http://second.test") as c:
            yield c


async def test_concurrent_appenders_get_gap_free_unique_seqs(
    client: httpx.AsyncClient, second_client: httpx.AsyncClient, sid: str
) -> None:
    writers, per_writer = 12, 8

    async def writer(w: int) -> list[tuple[str, int]]:
        c = client if w % 2 else second_client
        acked = []
        for i in range(per_writer):
            batch = [user(f"w{w}-{i}-a", id=f"w{w}-{i}-a"), user(f"w{w}-{i}-b", id=f"w{w}-{i}-b")]
            r = await c.post(f"/sessions/{sid}/messages", json={"messages": batch})
            assert r.status_code == 201, r.text
            acked += [(a["id"], a["seq"]) for a in r.json()["messages"]]
        return acked

    acks = [a for w in await asyncio.gather(*(writer(w) for w in range(writers))) for a in w]
    log = await log_of(client, sid)
    total = writers * per_writer * 2
    assert [m["seq"] for m in log] == list(range(1, total + 1))
    assert sorted(m["id"] for m in log) == sorted(mid for mid, _ in acks)
    assert {m["id"]: m["seq"] for m in log} == dict(acks)
    # A batch is atomic and contiguous: the two halves of each batch sit side by side.
    by_id = {m["id"]: m["seq"] for m in log}
    for w in range(writers):
        for i in range(per_writer):
            assert by_id[f"w{w}-{i}-b"] == by_id[f"w{w}-{i}-a"] + 1
    s = (await client.get(f"/sessions/{sid}")).json()
    assert s["last_seq"] == total
    assert s["stats"]["context_tokens"] == sum(m["token_count"] for m in log)


async def test_concurrent_replays_store_each_message_once(
    client: httpx.AsyncClient, second_client: httpx.AsyncClient, sid: str
) -> None:
    batch = {
        "messages": [
            user("retry me", id="r-1"),
            call("cc") | {"id": "r-2"},
            result("cc") | {"id": "r-3"},
        ]
    }
    responses = await asyncio.gather(
        *(
            (client if i % 2 else second_client).post(f"/sessions/{sid}/messages", json=batch)
            for i in range(10)
        )
    )
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] * 9 + [201]
    assert all(r.json()["messages"] == responses[0].json()["messages"] for r in responses)
    assert [m["id"] for m in await log_of(client, sid)] == ["r-1", "r-2", "r-3"]


async def test_concurrent_first_appends_create_one_session(
    client: httpx.AsyncClient, second_client: httpx.AsyncClient, sid: str
) -> None:
    responses = await asyncio.gather(
        *(
            (client if i % 2 else second_client).post(
                f"/sessions/{sid}/messages", json={"messages": [user(f"hello {i}")]}
            )
            for i in range(10)
        )
    )
    assert all(r.status_code == 201 for r in responses)
    assert sorted(r.json()["messages"][0]["seq"] for r in responses) == list(range(1, 11))


async def test_a_lease_holder_and_intruders_race(
    client: httpx.AsyncClient, second_client: httpx.AsyncClient, sid: str
) -> None:
    await client.put(f"/sessions/{sid}", json={})
    lease = (await client.post(f"/sessions/{sid}/lock", json={"owner": "main", "ttl_s": 30})).json()

    async def holder(i: int) -> int:
        r = await client.post(
            f"/sessions/{sid}/messages",
            json={"messages": [user(f"h{i}")], "lock_token": lease["lock_token"]},
        )
        return r.status_code

    async def intruder(i: int) -> int:
        r = await second_client.post(
            f"/sessions/{sid}/messages", json={"messages": [user(f"x{i}")]}
        )
        return r.status_code

    codes = await asyncio.gather(*(holder(i) for i in range(10)), *(intruder(i) for i in range(10)))
    assert codes[:10] == [201] * 10 and codes[10:] == [409] * 10
    log = await log_of(client, sid)
    assert sorted(m["content"] for m in log) == sorted(f"h{i}" for i in range(10))
