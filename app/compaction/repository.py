"""Compaction jobs and the fenced, monotonic store. Repositories flush, never commit."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, or_, select, text, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.messages.types import LoggedMessage
from app.models import CompactionJobRow, MessageRow, SessionRow
from app.models.job import ACTIVE

Job = CompactionJobRow


def _job_key(job: Job) -> tuple[ColumnElement[bool], ...]:
    return (Job.tenant_id == job.tenant_id, Job.session_id == job.session_id, Job.id == job.id)


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
        return created, True
    active = await db.scalar(
        select(Job).where(Job.tenant_id == tenant, Job.session_id == sid, Job.status.in_(ACTIVE))
    )
    if active is None:  # finished between our insert and this read: ask again
        return await request_job(
            db, tenant, sid, trigger=trigger, force=force, lock_token=lock_token, chain=chain
        )
    return active, False


async def claim_next(db: AsyncSession, worker: str, lease_s: float) -> Job | None:
    """Take the oldest pending job, or a running one whose worker's lease ran out."""
    candidate = (
        select(Job.tenant_id, Job.session_id, Job.id)
        .where(
            or_(
                Job.status == "pending",
                # A lapsed lease of this very process only means a late heartbeat:
                # its runner is alive and still working on the job.
                (Job.status == "running")
                & (Job.lease_expires_at < func.now())
                & Job.worker.is_distinct_from(worker),
            )
        )
        .order_by(Job.created_at)
        .limit(1)
        .with_for_update(skip_locked=True)
        .cte("candidate")
    )
    stmt = (
        update(Job)
        .where(
            Job.tenant_id == candidate.c.tenant_id,
            Job.session_id == candidate.c.session_id,
            Job.id == candidate.c.id,
        )
        .values(
            status="running",
            worker=worker,
            lease_expires_at=func.now() + timedelta(seconds=lease_s),
            attempts=Job.attempts + 1,
            started_at=func.coalesce(Job.started_at, func.now()),
        )
        .returning(Job)
        .execution_options(synchronize_session=False)
    )
    return (await db.execute(stmt)).scalar_one_or_none()


async def extend_lease(db: AsyncSession, job: Job, worker: str, lease_s: float) -> bool:
    stmt = (
        update(Job)
        .where(*_job_key(job), Job.worker == worker, Job.status == "running")
        .values(lease_expires_at=func.now() + timedelta(seconds=lease_s))
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
        .where(SessionRow.tenant_id == job.tenant_id, SessionRow.id == job.session_id)
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
) -> bool:
    """The one fenced, monotonic write of SPEC §5.

    It lands only if the watermark moves forward, the session's `generation` is
    still the one the job read its history at (no tail delete or clear since:
    the range it summarised still exists, seq for seq) and, while a lease is
    live, the lease still carries the job's token. Otherwise nothing is written.
    """
    through = (
        select(MessageRow.context_tokens_through)
        .where(
            MessageRow.tenant_id == job.tenant_id,
            MessageRow.session_id == job.session_id,
            MessageRow.seq == new_watermark,
        )
        .scalar_subquery()
    )
    lease_ok = or_(
        SessionRow.lease_token.is_(None),
        SessionRow.lease_expires_at <= func.now(),
        SessionRow.lease_token == job.lock_token,
    )
    stmt = (
        update(SessionRow)
        .where(
            SessionRow.tenant_id == job.tenant_id,
            SessionRow.id == job.session_id,
            SessionRow.last_compaction_seq < new_watermark,
            SessionRow.generation == generation,
            lease_ok,
        )
        .values(
            last_compaction_seq=new_watermark,
            watermark_context_tokens=through,
            compaction_count=SessionRow.compaction_count + 1,
            **values,
        )
        .returning(SessionRow.id)
        .execution_options(synchronize_session=False)
    )
    return (await db.execute(stmt)).first() is not None


async def history_after(
    db: AsyncSession, tenant: str, sid: str, watermark: int
) -> list[LoggedMessage]:
    from app.context.repository import to_logged

    stmt = (
        select(MessageRow)
        .where(
            MessageRow.tenant_id == tenant,
            MessageRow.session_id == sid,
            MessageRow.seq > watermark,
        )
        .order_by(MessageRow.seq)
    )
    return [to_logged(m) for m in await db.scalars(stmt)]


async def recent_jobs(db: AsyncSession, tenant: str, sid: str, limit: int = 20) -> list[Job]:
    stmt = (
        select(Job)
        .where(Job.tenant_id == tenant, Job.session_id == sid)
        .order_by(Job.created_at.desc())
        .limit(limit)
    )
    return list(await db.scalars(stmt))


async def get_job(db: AsyncSession, tenant: str, sid: str, job_id: str) -> Job | None:
    return await db.get(Job, (tenant, sid, job_id), populate_existing=True)
