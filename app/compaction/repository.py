"""Compaction jobs and the fenced, monotonic store. Repositories flush, never commit."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, case, delete, func, literal_column, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.compaction import revert_repository
from app.db.models import CompactionJobRow, CompactionWorkerRow, MessageRow, SessionRow
from app.db.models.job import ACTIVE
from app.db.scope import of_session
from app.sessions.lease_rule import store_admits

Job = CompactionJobRow

# NOTIFY channel of new jobs (request_job), LISTENed to by `contextd worker`.
JOBS_CHANNEL = "contextd_compaction_jobs"


def _job_key(job: Job) -> tuple[ColumnElement[bool], ...]:
    return (of_session(Job, job.tenant_id, job.session_id), Job.id == job.id)


async def request_job(
    db: AsyncSession,
    tenant: str,
    sid: str,
    *,
    trigger: str,
    force: bool,
    lock_token: str | None,
    chain: int = 0,
) -> tuple[Job, bool]:
    """The session's active job, created if there is none; True when this call created it.

    The partial unique index on active jobs decides races: concurrent requests
    for one session end up sharing the one job that got in.
    """
    stmt = (
        insert(Job)
        .values(
            tenant_id=tenant,
            session_id=sid,
            id=uuid.uuid4().hex,
            trigger=trigger,
            force=force,
            lock_token=lock_token,
            chain=chain,
        )
        .on_conflict_do_nothing(
            index_elements=["tenant_id", "session_id"],
            index_where=text("status IN ('pending', 'running')"),
        )
        .returning(Job)
    )
    created = (await db.execute(stmt)).scalar_one_or_none()
    if created is not None:
        # Delivered at commit: `contextd worker` processes wake at once instead of at
        # their next poll (the server that queued the job wakes its own runner).
        await db.execute(text("SELECT pg_notify(:channel, '')"), {"channel": JOBS_CHANNEL})
        return created, True
    active = await db.scalar(
        select(Job).where(of_session(Job, tenant, sid), Job.status.in_(ACTIVE))
    )
    if active is None:  # finished between our insert and this read: ask again
        return await request_job(
            db, tenant, sid, trigger=trigger, force=force, lock_token=lock_token, chain=chain
        )
    if trigger == "manual" and active.trigger != "manual":
        # A request joined it: the job answers a request now. A payload takes up what an
        # automatic compaction stores at its next trim (app/context/summary_switch.py),
        # what a requested one stores at once; and a requested job is claimed first.
        active.trigger = "manual"
    return active, False


# The session's active job, on the asyncpg connection itself (Database.driver): a
# probe of uq_compaction_jobs_active, whose predicate the status test repeats so
# that the planner may use it.
# Any constant works: it only has to be the same in every process. Claims take it
# for their transaction, so they run one at a time (a claim is a few index
# lookups) and the fair pick never sees another claim half done.
CLAIM_LOCK_KEY = 0x636F6D70  # "comp"

# A `contextd worker` heartbeats every WORKER_HEARTBEAT_S; one silent for
# WORKER_STALE_S is taken for gone (killed, partitioned) and no longer deferred to.
WORKER_HEARTBEAT_S = 2.0
WORKER_STALE_S = 10.0

# A running job whose lease ran out, oldest lapse first. A lapsed lease of this
# very process only means a late heartbeat: its runner is alive and still working.
_ORPHAN = text(
    """
    SELECT tenant_id, session_id, id FROM compaction_jobs
    WHERE status = 'running' AND lease_expires_at < now() AND worker IS DISTINCT FROM :worker
    ORDER BY lease_expires_at
    LIMIT 1
    FOR UPDATE SKIP LOCKED
    """
)

# The fair pick (SPEC §7). Among tenants with pending jobs and fewer than :cap
# running: tenants whose next job is manual (POST /compact) first, then the tenant
# whose most recent claim is the oldest (never claimed: first), which makes the
# claims round-robin over tenants. A tenant's next job: manual first, then oldest.
#
# Every step is an index probe, so a claim costs O(tenants with pending jobs),
# whatever the queue's length: the tenants come from a loose index scan (the
# recursive CTE skips from one tenant_id to the next on ix_compaction_jobs_pending,
# its ORDER BY spelling out that index's columns so no other index is chosen),
# a tenant's next job is the first entry of that index for it, its running jobs are
# counted on ix_compaction_jobs_running and its latest claim is one backward step
# on ix_compaction_jobs_tenant_started.
_FAIR = text(
    """
    WITH RECURSIVE tenants AS (
        (SELECT tenant_id FROM compaction_jobs WHERE status = 'pending'
         ORDER BY tenant_id, (trigger = 'manual') DESC, created_at LIMIT 1)
        UNION ALL
        SELECT (SELECT p.tenant_id FROM compaction_jobs p
                WHERE p.status = 'pending' AND p.tenant_id > t.tenant_id
                ORDER BY p.tenant_id, (p.trigger = 'manual') DESC, p.created_at LIMIT 1)
        FROM tenants t WHERE t.tenant_id IS NOT NULL
    )
    SELECT j.tenant_id, j.session_id, j.id
    FROM tenants t
    CROSS JOIN LATERAL (
        SELECT h.session_id, h.id, h.trigger = 'manual' AS manual FROM compaction_jobs h
        WHERE h.tenant_id = t.tenant_id AND h.status = 'pending'
        ORDER BY (h.trigger = 'manual') DESC, h.created_at
        LIMIT 1
    ) head
    JOIN compaction_jobs j
      ON j.tenant_id = t.tenant_id AND j.session_id = head.session_id AND j.id = head.id
    WHERE t.tenant_id IS NOT NULL
      AND (SELECT count(*) FROM compaction_jobs r
           WHERE r.tenant_id = t.tenant_id AND r.status = 'running') < :cap
    ORDER BY head.manual DESC,
             (SELECT max(c.started_at) FROM compaction_jobs c
              WHERE c.tenant_id = t.tenant_id) ASC NULLS FIRST,
             t.tenant_id
    LIMIT 1
    FOR UPDATE OF j SKIP LOCKED
    """
)

_LIVE_WORKER = text(
    "SELECT EXISTS (SELECT 1 FROM compaction_workers"
    " WHERE heartbeat_at > now() - make_interval(secs => :stale))"
)


async def live_worker(db: AsyncSession) -> bool:
    """A `contextd worker` heartbeated recently."""
    return bool(await db.scalar(_LIVE_WORKER, {"stale": WORKER_STALE_S}))


async def claim_next(
    db: AsyncSession,
    worker: str,
    lease_s: float,
    *,
    tenant_cap: int | None = None,
    defer_to_workers: bool = False,
) -> Job | None:
    """Claim one job for `worker`: an orphan whose lease ran out, else the fair pick.

    `tenant_cap`: no tenant gets more than this many running jobs (None: no cap).
    `defer_to_workers`: claim nothing while a `contextd worker` is alive (the
    server's in-process runner in "auto" mode).
    """
    if defer_to_workers and await live_worker(db):
        return None
    await db.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": CLAIM_LOCK_KEY})
    # A taken-over orphan was already counted as running for its tenant: no cap check.
    key = (await db.execute(_ORPHAN, {"worker": worker})).first()
    if key is None:
        cap = tenant_cap if tenant_cap is not None else 2**31 - 1
        key = (await db.execute(_FAIR, {"cap": cap})).first()
    if key is None:
        return None
    stmt = (
        update(Job)
        .where(of_session(Job, key[0], key[1]), Job.id == key[2])
        .values(
            status="running",
            worker=worker,
            lease_expires_at=func.now() + timedelta(seconds=lease_s),
            attempts=Job.attempts + 1,
            # The clock, not now() (the transaction's start, before the lock wait):
            # claims are serialised, so their started_at order is their claim order,
            # which the round-robin reads back.
            started_at=func.coalesce(Job.started_at, func.clock_timestamp()),
        )
        .returning(Job)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    return (await db.execute(stmt)).scalar_one_or_none()


async def worker_heartbeat(db: AsyncSession, worker: str) -> None:
    """Record that `worker` is alive; forget workers silent for an hour (killed ones)."""
    stmt = insert(CompactionWorkerRow).values(id=worker)
    stmt = stmt.on_conflict_do_update(index_elements=["id"], set_={"heartbeat_at": func.now()})
    await db.execute(stmt)
    await db.execute(
        delete(CompactionWorkerRow).where(
            CompactionWorkerRow.heartbeat_at < func.now() - timedelta(hours=1)
        )
    )


async def worker_gone(db: AsyncSession, worker: str) -> None:
    """A worker that stops cleanly leaves at once: servers resume claiming without delay."""
    await db.execute(delete(CompactionWorkerRow).where(CompactionWorkerRow.id == worker))


async def extend_lease(db: AsyncSession, job: Job, worker: str, lease_s: float) -> bool:
    stmt = (
        update(Job)
        .where(*_job_key(job), Job.worker == worker, Job.status == "running")
        .values(lease_expires_at=func.now() + timedelta(seconds=lease_s))
        .returning(Job.id)
        .execution_options(synchronize_session=False)
    )
    return (await db.execute(stmt)).first() is not None


async def give_back(db: AsyncSession, job: Job, worker: str) -> bool:
    """Return a running job to the queue (pending, no worker, no lease), unless another
    worker took it over meanwhile. Its attempts stay counted."""
    stmt = (
        update(Job)
        .where(*_job_key(job), Job.worker == worker, Job.status == "running")
        .values(status="pending", worker=None, lease_expires_at=None)
        .returning(Job.id)
        .execution_options(synchronize_session=False)
    )
    return (await db.execute(stmt)).first() is not None


async def hold_session(db: AsyncSession, job: Job) -> bool:
    """KEY SHARE on the job's session, False if it is gone.

    Locks are taken session first, then job, everywhere: requests and the session
    delete hold the session while they touch its jobs, so a runner that locked the
    job and then the session (through an event's foreign key) could deadlock them.
    """
    stmt = (
        select(SessionRow.id)
        .where(of_session(SessionRow, job.tenant_id, job.session_id))
        .with_for_update(read=True, key_share=True)
    )
    return (await db.execute(stmt)).first() is not None


async def finish_job(
    db: AsyncSession,
    job: Job,
    worker: str,
    status: str,
    result: dict[str, Any],
    reason: str | None = None,
    watermark_after: int | None = None,
) -> bool:
    """Close the job, unless another worker took it over meanwhile (then it is theirs)."""
    stmt = (
        update(Job)
        .where(*_job_key(job), Job.worker == worker, Job.status == "running")
        .values(
            status=status,
            result=result,
            reason=reason,
            watermark_after=watermark_after,
            finished_at=func.now(),
            lease_expires_at=None,
        )
        .returning(Job.id)
        .execution_options(synchronize_session=False)
    )
    return (await db.execute(stmt)).first() is not None


async def store_summary(
    db: AsyncSession,
    job: Job,
    *,
    new_watermark: int,
    generation: int,
    values: dict[str, Any],
    kept_below_tokens: int = 0,
) -> bool:
    """The one fenced, monotonic write of SPEC §5.

    It lands only if the watermark moves forward, the session's `generation` is
    still the one the job read its history at (no tail delete or clear since:
    the range it summarised still exists, seq for seq) and, while a lease is
    live, the lease still carries the job's token. Otherwise nothing is written.
    `kept_below_tokens` are tokens at or below the new watermark that stay in the
    effective history (the turn anchor, SPEC §5): budget status keeps counting them.
    The state it replaces is kept on the job, so that a revert can put it back.
    """
    replaced = await revert_repository.state_before_store(db, job)
    if replaced is None:
        return False
    through = (
        select(MessageRow.context_tokens_through)
        .where(
            of_session(MessageRow, job.tenant_id, job.session_id),
            MessageRow.seq == new_watermark,
        )
        .scalar_subquery()
    )
    kept: Any = kept_below_tokens
    if kept_below_tokens:
        # The plan read no user message after its watermark, but an append may have brought
        # one since (appends do not fence a store). The anchor is then no longer the latest
        # user message, no longer sent, and must not be kept counted (the append's own
        # give-back, app/messages/repository.py `_GIVE_BACK`, saw the older watermark).
        # `state_before_store` holds the row lock, so this statement sees every append
        # that committed and none can commit before this transaction does.
        user_after = (
            select(MessageRow.seq)
            .where(
                of_session(MessageRow, job.tenant_id, job.session_id),
                MessageRow.role == literal_column("'user'"),
                MessageRow.seq > new_watermark,
            )
            .exists()
        )
        kept = case((user_after, 0), else_=kept_below_tokens)
    stmt = (
        update(SessionRow)
        .where(
            of_session(SessionRow, job.tenant_id, job.session_id),
            SessionRow.last_compaction_seq < new_watermark,
            SessionRow.generation == generation,
            store_admits(job.lock_token),
        )
        .values(
            last_compaction_seq=new_watermark,
            watermark_context_tokens=through - kept,
            compaction_count=SessionRow.compaction_count + 1,
            **values,
        )
        .returning(SessionRow.id)
        .execution_options(synchronize_session=False)
    )
    if (await db.execute(stmt)).first() is None:
        return False
    await revert_repository.keep_replaced(db, job, replaced)
    return True


async def recent_jobs(db: AsyncSession, tenant: str, sid: str, limit: int = 20) -> list[Job]:
    stmt = (
        select(Job).where(of_session(Job, tenant, sid)).order_by(Job.created_at.desc()).limit(limit)
    )
    return list(await db.scalars(stmt))


async def get_job(db: AsyncSession, tenant: str, sid: str, job_id: str) -> Job | None:
    return await db.get(Job, (tenant, sid, job_id), populate_existing=True)
