"""Fair compaction claims (SPEC §7) against a real PostgreSQL: round-robin over
tenants, a per-tenant cap on running jobs, manual ahead of automatic, orphan
takeover, and servers deferring to live `contextd worker` processes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.compaction import repository as repo
from app.core.settings import load_settings
from app.db import engine as database
from app.db.database import Database
from app.main import create_app

LEASE_S = 30.0


@pytest.fixture(scope="module")
def fair_db(make_database: Callable[[], str]) -> str:
    # A database of its own: no runner of any other test may claim these jobs.
    return make_database()


@pytest.fixture
async def engine(fair_db: str) -> AsyncIterator[AsyncEngine]:
    eng = database.create_engine(fair_db, pool_size=2)
    async with eng.begin() as conn:  # each test starts from an empty queue
        await conn.execute(text("TRUNCATE sessions, compaction_jobs, compaction_workers CASCADE"))
    yield eng
    await eng.dispose()


async def _queue(
    engine: AsyncEngine, tenant: str, n: int, trigger: str = "auto", age_s: float = 0.0
) -> list[str]:
    """n sessions of `tenant`, each with one pending job; the first is the oldest."""
    prefix = f"{tenant}-{trigger}-{age_s}"
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO sessions (tenant_id, id, tokenizer)"
                " SELECT :t, :p || '-' || g, 'o200k_base' FROM generate_series(1, :n) g"
            ),
            {"t": tenant, "p": prefix, "n": n},
        )
        rows = await conn.execute(
            text(
                "INSERT INTO compaction_jobs (tenant_id, session_id, id, trigger, created_at)"
                " SELECT :t, :p || '-' || g, 'job-' || :p || '-' || g, :trigger,"
                "  now() - make_interval(secs => :age + (:n - g) * 0.001)"
                " FROM generate_series(1, :n) g ORDER BY g RETURNING id"
            ),
            {"t": tenant, "p": prefix, "n": n, "trigger": trigger, "age": age_s},
        )
        return [r[0] for r in rows]


async def _claim(
    engine: AsyncEngine, worker: str = "w", cap: int | None = None, defer: bool = False
) -> repo.Job | None:
    db = Database(database.session_factory(engine))
    async with db.transaction() as s:
        return await repo.claim_next(s, worker, LEASE_S, tenant_cap=cap, defer_to_workers=defer)


async def _finish(engine: AsyncEngine, job: repo.Job) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE compaction_jobs SET status = 'success', finished_at = now() WHERE id = :id"
            ),
            {"id": job.id},
        )


async def test_a_burst_does_not_delay_another_tenants_job_by_more_than_one_job(
    engine: AsyncEngine,
) -> None:
    # Two runners busy with tenant A's burst of 500 (queued first, so FIFO would put
    # B's job 499 places behind). B's one job must be the next claim: B waits at most
    # for one of A's running jobs to end.
    await _queue(engine, "a", 500, age_s=60)
    running = [await _claim(engine, "r1"), await _claim(engine, "r2")]
    assert all(j is not None and j.tenant_id == "a" for j in running)
    [b_job] = await _queue(engine, "b", 1)
    first = running[0]
    assert first is not None
    await _finish(engine, first)  # one job's time later, a runner is free
    nxt = await _claim(engine, "r1")
    assert nxt is not None and nxt.id == b_job
    # And A keeps the runners afterwards: nothing else waits.
    after = await _claim(engine, "r3")
    assert after is not None and after.tenant_id == "a"


async def test_claims_round_robin_over_tenants(engine: AsyncEngine) -> None:
    await _queue(engine, "a", 50, age_s=60)
    await _queue(engine, "b", 3, age_s=30)
    await _queue(engine, "c", 3, age_s=10)
    order = []
    for _ in range(12):
        job = await _claim(engine)
        assert job is not None
        order.append(job.tenant_id)
        await _finish(engine, job)
    assert order[:9] == ["a", "b", "c"] * 3
    assert order[9:] == ["a", "a", "a"]


async def test_within_a_tenant_jobs_go_oldest_first(engine: AsyncEngine) -> None:
    ids = await _queue(engine, "a", 5)
    claimed = []
    for _ in range(5):
        job = await _claim(engine)
        assert job is not None
        claimed.append(job.id)
    assert claimed == ids
    assert await _claim(engine) is None


async def test_per_tenant_cap_on_running_jobs(engine: AsyncEngine) -> None:
    await _queue(engine, "a", 10, age_s=60)
    got = [await _claim(engine, f"r{i}", cap=2) for i in range(3)]
    assert [j.tenant_id if j else None for j in got] == ["a", "a", None]
    [b_job] = await _queue(engine, "b", 1)
    b = await _claim(engine, "r3", cap=2)
    assert b is not None and b.id == b_job  # the cap is per tenant, not global
    first = got[0]
    assert first is not None
    await _finish(engine, first)
    again = await _claim(engine, "r4", cap=2)
    assert again is not None and again.tenant_id == "a"
    assert await _claim(engine, "r5", cap=2) is None


async def test_manual_jobs_go_ahead_of_automatic_ones(engine: AsyncEngine) -> None:
    await _queue(engine, "a", 5, trigger="auto", age_s=60)
    await _queue(engine, "b", 5, trigger="auto", age_s=60)
    [z_manual] = await _queue(engine, "z", 1, trigger="manual")
    [b_manual] = await _queue(engine, "b", 1, trigger="manual")
    first, second, third = [await _claim(engine) for _ in range(3)]
    # Tenants with a manual job first, though a's jobs are older and a sorts first;
    # within tenant b its manual job ahead of its five older automatic ones.
    assert first is not None and second is not None and third is not None
    assert {first.id, second.id} == {z_manual, b_manual}
    assert (third.tenant_id, third.trigger) == ("a", "auto")


async def test_a_request_joining_an_automatic_job_makes_it_a_requested_one(
    engine: AsyncEngine,
) -> None:
    [queued] = await _queue(engine, "a", 1, trigger="auto")
    [pending] = await _queue(engine, "b", 1, trigger="auto")
    db = Database(database.session_factory(engine))
    async with db.transaction() as s:
        job, created = await repo.request_job(
            s, "a", "a-auto-0.0-1", trigger="manual", force=False, lock_token=None
        )
    assert (job.id, created) == (queued, False)
    async with engine.begin() as conn:
        triggers: dict[str, str] = dict(
            (await conn.execute(text("SELECT id, trigger FROM compaction_jobs"))).all()
        )
    # The payload takes up what it stores at once, and it is claimed ahead of the others.
    assert triggers == {queued: "manual", pending: "auto"}
    first = await _claim(engine)
    assert first is not None and first.id == queued


async def test_an_orphaned_job_is_taken_over_first(engine: AsyncEngine) -> None:
    await _queue(engine, "a", 3, age_s=60)
    orphan = await _claim(engine, "dead")
    assert orphan is not None and orphan.attempts == 1
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "UPDATE compaction_jobs SET lease_expires_at = now() - interval '1 second'"
                " WHERE id = :id"
            ),
            {"id": orphan.id},
        )
    # Its own runner does not take it over (a late heartbeat is not a death) ...
    own = await _claim(engine, "dead")
    assert own is not None and own.id != orphan.id
    # ... another one does, ahead of pending work and regardless of the tenant cap.
    taken = await _claim(engine, "alive", cap=1)
    assert taken is not None and taken.id == orphan.id
    assert taken.worker == "alive" and taken.attempts == 2


async def test_concurrent_claims_never_share_a_job(engine: AsyncEngine) -> None:
    await _queue(engine, "a", 20, age_s=60)
    await _queue(engine, "b", 20, age_s=60)
    jobs = await asyncio.gather(*(_claim(engine, f"r{i}", cap=5) for i in range(12)))
    claimed = [j for j in jobs if j is not None]
    assert len({j.id for j in claimed}) == len(claimed) == 10  # 5 per tenant, then the cap
    assert sorted(j.tenant_id for j in claimed) == ["a"] * 5 + ["b"] * 5


async def test_a_deferring_claim_waits_for_no_live_worker(engine: AsyncEngine) -> None:
    [job_id] = await _queue(engine, "a", 1)
    db = Database(database.session_factory(engine))
    async with db.transaction() as s:
        await repo.worker_heartbeat(s, "host:1:abc")
    assert await _claim(engine, defer=True) is None
    async with engine.begin() as conn:  # the worker went silent (killed): not live any more
        await conn.execute(
            text("UPDATE compaction_workers SET heartbeat_at = now() - interval '1 minute'")
        )
    job = await _claim(engine, defer=True)
    assert job is not None and job.id == job_id
    async with db.transaction() as s:
        await repo.worker_heartbeat(s, "host:1:abc")  # back again
    await _queue(engine, "b", 1)
    assert await _claim(engine, defer=True) is None
    assert await _claim(engine, defer=False) is not None  # a worker never defers
    async with db.transaction() as s:
        await repo.worker_gone(s, "host:1:abc")
    await _queue(engine, "c", 1)
    assert await _claim(engine, defer=True) is not None


async def test_server_in_auto_mode_defers_to_a_live_worker(
    engine: AsyncEngine, fair_db: str
) -> None:
    settings = load_settings(database_url=None, run_compactions_in_process="auto")
    assert settings.run_compactions_in_process == "auto"
    app = create_app(settings, database_url=fair_db)
    async with app.router.lifespan_context(app):
        async with app.state.database.transaction() as s:
            await repo.worker_heartbeat(s, "elsewhere:1:abc")
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            assert (await c.put("/sessions/deferred", json={})).status_code in (200, 201)
            job_id = (await c.post("/sessions/deferred/compact", json={})).json()["job_id"]
            await asyncio.sleep(2.5)  # two polls of the in-process runner, and a wake
            jobs = (await c.get("/sessions/deferred/compaction")).json()["jobs"]
            assert [(j["job_id"], j["status"]) for j in jobs] == [(job_id, "pending")]
            assert "contextd_compaction_workers_live 1.0" in (await c.get("/metrics")).text
            async with app.state.database.transaction() as s:
                await repo.worker_gone(s, "elsewhere:1:abc")
            app.state.compactions.wake()
            for _ in range(100):
                jobs = (await c.get("/sessions/deferred/compaction")).json()["jobs"]
                if jobs[0]["status"] not in ("pending", "running"):
                    break
                await asyncio.sleep(0.1)
            assert jobs[0]["status"] == "noop"  # an empty session: nothing to compact
            assert "contextd_compaction_workers_live 0.0" in (await c.get("/metrics")).text


def test_run_compactions_in_process_accepts_auto_and_booleans(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for raw, want in (("auto", "auto"), ("true", True), ("false", False), ("0", False)):
        monkeypatch.setenv("CONTEXTD_RUN_COMPACTIONS_IN_PROCESS", raw)
        assert load_settings().run_compactions_in_process == want
    monkeypatch.delenv("CONTEXTD_RUN_COMPACTIONS_IN_PROCESS")
    assert load_settings().run_compactions_in_process == "auto"


async def test_a_queued_job_wakes_listening_workers(engine: AsyncEngine) -> None:
    from app.worker import _wake_on_jobs

    woken, listening = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(_wake_on_jobs(engine, woken.set, listening))
    try:
        await asyncio.wait_for(listening.wait(), 10)
        async with engine.begin() as conn:
            await conn.execute(
                text("INSERT INTO sessions (tenant_id, id, tokenizer) VALUES ('a', 'n', 'x')")
            )
        db = Database(database.session_factory(engine))
        async with db.transaction() as s:
            _job, created = await repo.request_job(
                s, "a", "n", trigger="manual", force=False, lock_token=None
            )
            assert created
            await asyncio.sleep(0.2)
            assert not woken.is_set()  # NOTIFY is delivered at commit, not before
        await asyncio.wait_for(woken.wait(), 10)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
