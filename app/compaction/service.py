"""Requesting compactions, dry runs, and reading compaction state."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.compaction import reads
from app.compaction import repository as repo
from app.compaction.revert import revertable_job
from app.compaction.turns import CompactionPlan, NoopReason, plan_for_settings
from app.core.budget import session_compaction
from app.core.conversation import LoggedMessage, summary_message
from app.core.errors import NotFound
from app.core.settings import CompactionSettings, Settings
from app.db.database import Database
from app.db.models import SessionRow
from app.db.models.job import ACTIVE
from app.sessions import repository as sessions
from app.sessions.lease_rule import check_write
from app.sessions.service import get_session


def job_view(job: repo.Job) -> dict[str, Any]:
    return {
        "job_id": job.id,
        "status": job.status,
        "trigger": job.trigger,
        "force": job.force,
        "attempts": job.attempts,
        "reason": job.reason,
        "watermark_before": job.watermark_before,
        "watermark_after": job.watermark_after,
        "compaction_metadata": job.result,
        # The quality gate of SPEC §5 (gate.Verdict.record): None for jobs that stored nothing.
        "gate": (job.result or {}).get("gate"),
        "created_at": job.created_at,
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "reverted_at": job.reverted_at,
    }


def plan_session(
    history: Sequence[LoggedMessage],
    row: SessionRow,
    c: CompactionSettings,
    *,
    force: bool,
    anchor_below: LoggedMessage | None = None,
) -> CompactionPlan | NoopReason:
    """The plan for a session's history after its watermark (`anchor_below`: the turn
    anchor at or below it, `reads.anchor_below`).

    One function for the job and the dry run, so that a dry run answers what
    the job would do.
    """
    return plan_for_settings(
        history,
        watermark=row.last_compaction_seq,
        settings=c,
        usable_budget=c.usable_budget,
        tokens_at_last_compaction=row.compacted_history_tokens if row.compaction_count else None,
        force=force,
        carried_anchor=anchor_below,
    )


async def request(
    db: Database,
    tenant: str,
    sid: str,
    *,
    lock_token: str | None,
    force: bool,
    dry_run: bool,
    settings: Settings,
) -> tuple[dict[str, Any], bool]:
    """Returns (body, created). A dry run plans and answers without writing anything."""
    if dry_run:
        return await _dry_run(db, tenant, sid, force=force, settings=settings), False
    async with db.transaction() as s:
        locked = await sessions.get_for_update(s, tenant, sid)
        if locked is None:
            raise NotFound(f"session {sid!r} does not exist")
        row, lease_live = locked
        check_write(row, lease_live, lock_token)
        job, created = await repo.request_job(
            s, tenant, sid, trigger="manual", force=force, lock_token=lock_token
        )
        return {"job_id": job.id, "status": job.status}, created


async def _dry_run(
    db: Database, tenant: str, sid: str, *, force: bool, settings: Settings
) -> dict[str, Any]:
    """The plan a compaction would make now.

    A read: no lease is needed (the console asks it of sessions an agent holds, which
    is when "why still compact_needed?" matters) and no row lock is taken, so appends
    do not wait on the planning of a long history. One snapshot, so the history read
    starts at the watermark of the row read.
    """
    async with db.transaction() as s:
        await s.execute(text("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"))
        row = await get_session(s, tenant, sid)
        history = await reads.history_after(s, tenant, sid, row.last_compaction_seq)
        below = await reads.anchor_below(s, tenant, sid, row.last_compaction_seq, history)
    plan = plan_session(
        history, row, session_compaction(row, settings), force=force, anchor_below=below
    )
    would = "noop" if isinstance(plan, NoopReason) else "compact"
    return {"dry_run": True, "would": would, **plan.report()}


async def wait_for(
    db: Database, tenant: str, sid: str, job_id: str, timeout_s: float
) -> dict[str, Any] | None:
    """The finished job, or None if it is still active when the time is up."""
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    while True:
        async with db.transaction() as s:
            job = await repo.get_job(s, tenant, sid, job_id)
            if job is None:
                raise NotFound(f"compaction job {job_id!r} is gone (session deleted?)")
            if job.status not in ACTIVE:
                return job_view(job)
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.25)


async def state(s: AsyncSession, tenant: str, sid: str) -> dict[str, Any]:
    # Jobs first: each statement reads its own snapshot (READ COMMITTED), and a job and
    # its summary commit together, so a job read as finished has its summary in the row
    # read after it. The other order could show a success with the old watermark.
    jobs = await repo.recent_jobs(s, tenant, sid)
    row = await get_session(s, tenant, sid)
    compacted = summary_message(row.summary_text) if row.summary_text else None
    return {
        "compacted_context": compacted,
        "summary": {
            "text": row.summary_text,
            "structure": row.summary,
            "tokens": row.summary_tokens,
            "through_seq": row.last_compaction_seq if row.summary_text else None,
        },
        "last_compaction_seq": row.last_compaction_seq,
        "compaction_count": row.compaction_count,
        "compaction_metadata": row.compaction_metadata,
        "memory_flush_candidates": row.memory_flush_candidates,
        "jobs": [job_view(j) for j in jobs],
        "revertable_job_id": await revertable_job(s, row),
    }
