"""Where a compaction is undone: the snapshot a store takes of what it replaces, and the
jobs a revert reads and marks. Repositories flush, never commit.

The session's compaction state forms a stack: every stored compaction pushes (its
job keeps, in `replaced`, the state it covered), every revert pops (the state comes
back from that job). A clear empties the stack (`compaction_count` back to 0), so
jobs stored before it can never be the top again.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import CompactionJobRow, SessionRow
from app.db.scope import of_session

Job = CompactionJobRow

# The session columns a compaction's store sets (bar `generation`, which it only
# reads): the state a revert puts back, column for column.
STATE_COLUMNS = (
    "last_compaction_seq",
    "watermark_context_tokens",
    "summary",
    "summary_text",
    "summary_tokens",
    "summary_carries_pinned",
    "compaction_metadata",
    "memory_flush_candidates",
    "compacted_history_tokens",
    "compaction_count",
)

STORED = ("success", "degraded")


def _session_key(job: Job) -> ColumnElement[bool]:
    return of_session(SessionRow, job.tenant_id, job.session_id)


async def state_before_store(db: AsyncSession, job: Job) -> dict[str, Any] | None:
    """The session's compaction state, its row locked (as the store's UPDATE would) so
    that it is exactly the state the store then replaces. None: the session is gone."""
    stmt = (
        select(*(getattr(SessionRow, c) for c in STATE_COLUMNS), SessionRow.tokenizer)
        .where(_session_key(job))
        .with_for_update(key_share=True)
    )
    row = (await db.execute(stmt)).first()
    # The tokenizer the counts are in: a model switch since recounts the log, not this.
    return None if row is None else dict(zip((*STATE_COLUMNS, "tokenizer"), row, strict=True))


async def keep_replaced(db: AsyncSession, job: Job, replaced: dict[str, Any]) -> None:
    """Record on the job what its store replaced (in the store's transaction)."""
    await db.execute(
        update(Job)
        .where(of_session(Job, job.tenant_id, job.session_id), Job.id == job.id)
        .values(replaced=replaced, watermark_before=replaced["last_compaction_seq"])
        .execution_options(synchronize_session=False)
    )


async def latest_stored(db: AsyncSession, tenant: str, sid: str) -> Job | None:
    """The session's newest stored compaction not reverted: the top of the stack, when
    the session still holds its state (the caller checks that against the row)."""
    stmt = (
        select(Job)
        .where(
            of_session(Job, tenant, sid),
            Job.status.in_(STORED),
            Job.watermark_after.is_not(None),
            Job.reverted_at.is_(None),
        )
        .order_by(Job.finished_at.desc(), Job.created_at.desc())
        .limit(1)
        .execution_options(populate_existing=True)
    )
    return (await db.execute(stmt)).scalar_one_or_none()


async def cancel_active(db: AsyncSession, tenant: str, sid: str, reason: str) -> list[str]:
    """End the session's pending and running jobs as failed: a job queued or running on the
    state a revert replaces would redo what was undone. A running one's runner then finds
    its job closed and writes nothing (its store also fails the generation fence)."""
    stmt = (
        update(Job)
        .where(of_session(Job, tenant, sid), Job.status.in_(("pending", "running")))
        .values(
            status="failed",
            reason=reason,
            result={"status": "failed", "reason": reason},
            finished_at=func.now(),
            lease_expires_at=None,
        )
        .returning(Job.id)
        .execution_options(synchronize_session=False)
    )
    return [str(r[0]) for r in (await db.execute(stmt)).all()]
