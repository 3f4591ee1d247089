"""A compaction whose database work cannot get a pooled connection in time (a server
saturated by requests) goes back to the queue and finishes later; it is not failed."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import httpx
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from app.compaction import repository as repo
from app.compaction.runner import CompactionRunner
from app.core.settings import load_settings
from app.db import engine as database
from app.db.database import Database
from app.db.models import CompactionJobRow
from app.main import create_app
from tests.support.apps import model_settings
from tests.support.compaction_http import SMALL_COMPACTION, long_session, state
from tests.support.fakellm import FakeLLM

PATIENT = {"compaction": {**SMALL_COMPACTION, "compact_timeout_s": 6.0}}


async def test_a_pool_wait_timeout_puts_the_job_back_and_it_finishes(
    make_database: Callable[[], str], sid: str
) -> None:
    async with FakeLLM(behaviour="slow", slow_s=0.5) as llm:
        settings = model_settings(llm.base_url, 6.0).model_copy(
            update={"db_pool_size": 2, "db_pool_timeout_s": 0.3, "compaction_workers": 1}
        )
        app = create_app(settings, database_url=make_database())
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                await long_session(c, sid, settings=PATIENT)
                r = await c.post(f"/sessions/{sid}/compact", json={})
                assert r.status_code == 202, r.text
                job_id = r.json()["job_id"]
                deadline = time.monotonic() + 10
                while llm.call_count == 0:
                    assert time.monotonic() < deadline, "the job never called the model"
                    await asyncio.sleep(0.02)
                # Every pooled connection taken while the model answers: the job's store
                # waits 0.3 s for one, then times out.
                engine = app.state.engine
                async with contextlib.AsyncExitStack() as held:
                    for _ in range(engine.pool.size()):  # twice db_pool_size (app/db/engine.py)
                        conn = await held.enter_async_context(engine.connect())
                        await conn.execute(text("SELECT 1"))
                    await asyncio.sleep(2.0)
                    states = await _job_states(engine, sid, job_id)
                assert states[0] in ("pending", "running"), states
                while (s := await state(c, sid))["jobs"][0]["status"] in ("pending", "running"):
                    assert time.monotonic() < deadline + 20, s
                    await asyncio.sleep(0.1)
                job = next(j for j in s["jobs"] if j["job_id"] == job_id)
                assert job["status"] == "success", job
                assert s["last_compaction_seq"] > 0 and s["summary"]["text"]
                attempts = (await _job_states(engine, sid, job_id))[1]
                assert attempts == 2
                assert llm.call_count >= 2


async def _job_states(engine: object, sid: str, job_id: str) -> tuple[str, int]:
    """The job's status and attempts, read on a connection outside the pool's limit."""
    side = create_async_engine(engine.url, poolclass=NullPool)  # type: ignore[attr-defined]
    try:
        async with side.connect() as conn:
            row = (
                await conn.execute(
                    select(CompactionJobRow.status, CompactionJobRow.attempts).where(
                        CompactionJobRow.session_id == sid, CompactionJobRow.id == job_id
                    )
                )
            ).one()
    finally:
        await side.dispose()
    return str(row[0]), int(row[1])


async def test_a_failure_recorded_while_the_pool_is_exhausted_lands_when_it_frees(
    make_database: Callable[[], str],
) -> None:
    """No runner takes over its own jobs, so a job whose "failed" could not be written
    would stay "running" for good in a one-process server."""
    url = make_database()
    engine = database.create_engine(url, pool_size=1, pool_timeout_s=0.2)
    db = Database(database.session_factory(engine))
    runner = CompactionRunner(db, load_settings(), client=None)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO sessions (tenant_id, id, tokenizer) VALUES ('t', 's', 'o200k_base');"
                )
            )
            await conn.execute(
                text(
                    "INSERT INTO compaction_jobs (tenant_id, session_id, id, trigger)"
                    " VALUES ('t', 's', 'j1', 'manual')"
                )
            )
        async with db.transaction() as s:
            job = await repo.claim_next(s, runner.worker_id, 30.0)
        assert job is not None and job.id == "j1"
        async with contextlib.AsyncExitStack() as held:
            for _ in range(engine.pool.size()):  # type: ignore[attr-defined]
                conn = await held.enter_async_context(engine.connect())
                await conn.execute(text("SELECT 1"))
            failing = asyncio.create_task(runner._fail(job, "compaction timed out"))
            await asyncio.sleep(1.0)
            assert not failing.done()  # still trying while every connection is taken
        await asyncio.wait_for(failing, 10)
        side = create_async_engine(engine.url, poolclass=NullPool)
        async with side.connect() as conn:
            status, reason = (
                await conn.execute(text("SELECT status, reason FROM compaction_jobs"))
            ).one()
        await side.dispose()
        assert (status, reason) == ("failed", "compaction timed out")
    finally:
        await runner.stop()
        await engine.dispose()
