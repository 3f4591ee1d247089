"""Lock order between requests and compaction runners: no deadlock, no 500.

Found by schemathesis in CI: `POST /compact` held the session FOR UPDATE and
waited on the job a runner was closing, while the runner, holding that job,
inserted an event whose foreign key needed KEY SHARE on the session. PostgreSQL
broke the cycle by killing the request, which the client saw as a 500.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.core.settings import load_settings
from app.db.models import DEFAULT_TENANT
from app.main import create_app
from tests.support.compaction_http import SMALL, long_session
from tests.support.databases import plain_url


@pytest.fixture(scope="module")
def own_database(make_database: Callable[[], str]) -> str:
    # Pending jobs here must not be claimed by any other app's runner.
    return make_database()


@pytest.fixture(scope="module")
async def quiet_client(own_database: str) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(
        load_settings(database_url=None, run_compactions_in_process=False),
        database_url=own_database,
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://lock.test") as c:
            yield c


async def _waiting_on_locks(conn: asyncpg.Connection, timeout_s: float = 10.0) -> int:
    """How many other backends of this database wait on a lock, once one does."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        n = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
        if n or asyncio.get_running_loop().time() > deadline:
            return int(n)
        await asyncio.sleep(0.02)


async def test_a_compact_request_never_deadlocks_with_a_runner_closing_the_job(
    quiet_client: httpx.AsyncClient, own_database: str, sid: str
) -> None:
    c = quiet_client
    await c.put(f"/sessions/{sid}", json={})
    first = await c.post(f"/sessions/{sid}/compact", json={})
    assert first.status_code == 202, first.text
    job_id = first.json()["job_id"]

    runner = await asyncpg.connect(plain_url(own_database))
    try:
        tx = runner.transaction()
        await tx.start()
        # What a runner does when it closes a job: the job row changes...
        await runner.execute(
            "UPDATE compaction_jobs SET status = 'noop', finished_at = now()"
            " WHERE tenant_id = $1 AND session_id = $2 AND id = $3",
            DEFAULT_TENANT,
            sid,
            job_id,
        )
        # ...while a request for the same session waits to learn whether that job is
        # still active (the unique index on active jobs).
        second = asyncio.create_task(c.post(f"/sessions/{sid}/compact", json={}))
        assert await _waiting_on_locks(runner) == 1
        # ...and the runner records its event, whose foreign key locks the session.
        await asyncio.wait_for(
            runner.execute(
                "INSERT INTO events (tenant_id, session_id, type, data)"
                " VALUES ($1, $2, 'compaction.noop', '{}'::jsonb)",
                DEFAULT_TENANT,
                sid,
            ),
            timeout=10,
        )
        await tx.commit()
        r = await asyncio.wait_for(second, timeout=10)
    finally:
        await runner.close()
    assert r.status_code == 202, r.text
    assert r.json()["job_id"] != job_id  # the old job was closed: a new one was queued
    jobs = (await c.get(f"/sessions/{sid}/compaction")).json()["jobs"]
    assert {j["job_id"]: j["status"] for j in jobs} == {
        job_id: "noop",
        r.json()["job_id"]: "pending",
    }


async def test_deletes_and_compactions_racing_a_live_runner_never_fail(
    make_database: Callable[[], str], sid: str
) -> None:
    """A real in-process runner closes jobs while clients request compactions and
    delete the sessions under it: every answer is a documented one, never 5xx."""
    app: FastAPI = create_app(
        load_settings(database_url=None, run_compactions_in_process=True),
        database_url=make_database(),
    )
    statuses: list[int] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://race.test") as c:

            async def round_(i: int) -> None:
                s = f"{sid}-{i}"
                await long_session(c, s, turns=6, settings=SMALL)
                calls: list[Any] = [
                    c.post(f"/sessions/{s}/compact", json={"force": i % 2 == 0}) for _ in range(3)
                ]
                calls.append(c.delete(f"/sessions/{s}"))
                calls += [c.post(f"/sessions/{s}/compact", json={}) for _ in range(2)]
                for r in await asyncio.gather(*calls):
                    statuses.append(r.status_code)

            for i in range(12):
                await round_(i)
    assert statuses
    assert set(statuses) <= {202, 204, 404}, statuses
    assert statuses.count(204) == 12
