"""Undoing a stored compaction (SPEC §2 `POST /sessions/{id}/compaction/{job_id}/revert`).

The summary and watermark the job's store replaced come back in one fenced update
of the session row, locked and lease-checked exactly like an append; the log is
untouched. Rules:

- Only the top of the stack can be reverted: the session's newest stored
  compaction not yet reverted, and only while the session still holds its state
  (a clear since empties the stack). After a revert the compaction before it is
  the newest again, so successive reverts walk back one compaction at a time.
- The revert bumps the session's `generation`, as a tail delete or clear does:
  a compaction job that read the history before the revert fails its store's
  fence (its basis is gone), and every payload stream's layout is dropped
  (app/context/stability.py), as after a compaction, so the next payload is
  selected afresh from the restored state: the payload the same log had before
  the compaction.
- Jobs still pending or running for the session are ended as failed: run on the
  state before the revert, they would store on a basis that no longer holds, and
  queued before it, they would redo what was just undone.
- Automatic compaction then leaves the session alone until its log has grown
  past the state the revert restored (`revert_state`, app/compaction/noop_guard.py).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncSession

from app.compaction import revert_repository as repo
from app.compaction.noop_guard import noop_state
from app.compaction.revert_repository import STATE_COLUMNS, STORED
from app.core.budget import effective_model
from app.core.conversation import summary_message
from app.core.errors import Conflict, NotFound
from app.core.settings import Settings
from app.core.tokens import get_counter
from app.db.models import CompactionJobRow, SessionRow
from app.observability.events import record_event
from app.sessions import repository as sessions
from app.sessions.lease_rule import check_write
from app.sessions.watermark import watermark_tokens


def holds(row: SessionRow, job: CompactionJobRow) -> bool:
    """The session's compaction state is still the one this job stored."""
    replaced = job.replaced or {}
    return (
        job.watermark_after == row.last_compaction_seq
        and int(replaced.get("compaction_count", -1)) + 1 == row.compaction_count
    )


async def revertable_job(db: AsyncSession, row: SessionRow) -> str | None:
    """The id of the job a revert would undo now, if any (for the state and the console)."""
    top = await repo.latest_stored(db, row.tenant_id, row.id)
    if top is None or top.replaced is None or not holds(row, top):
        return None
    return top.id


async def revert(
    db: AsyncSession,
    tenant: str,
    sid: str,
    job_id: str,
    lock_token: str | None,
    settings: Settings,
) -> dict[str, Any]:
    locked = await sessions.get_for_update(db, tenant, sid)
    if locked is None:
        raise NotFound(f"session {sid!r} does not exist")
    row, lease_live = locked
    check_write(row, lease_live, lock_token)
    job = await db.get(CompactionJobRow, (tenant, sid, job_id), populate_existing=True)
    if job is None:
        raise NotFound(f"compaction job {job_id!r} does not exist in session {sid!r}")
    _check_revertable(job)
    top = await repo.latest_stored(db, tenant, sid)
    if top is None or top.id != job.id or not holds(row, job):
        later = f" (the latest is {top.id!r})" if top is not None and top.id != job.id else ""
        raise Conflict(
            "not_latest_compaction",
            f"compaction job {job_id!r} is not the session's latest stored compaction{later}: "
            "only the latest can be reverted (a clear since leaves none)",
            latest_job_id=top.id if top is not None and holds(row, top) else None,
        )
    replaced = job.replaced or {}
    reverted_watermark = row.last_compaction_seq
    for column in STATE_COLUMNS:
        setattr(row, column, replaced[column])
    # Counted again rather than restored: the stored figure is of the log as it was at the
    # store. A user message appended since makes the restored state's turn anchor no
    # longer sent (and a tail cut since can make it the latest again); a model switch
    # since recounted the log in another tokenizer (app/sessions/recount.py).
    row.watermark_context_tokens = await watermark_tokens(db, tenant, sid, row.last_compaction_seq)
    if replaced.get("tokenizer", row.tokenizer) != row.tokenizer:
        counter = get_counter(effective_model(row, settings))
        text = row.summary_text
        row.summary_tokens = counter.count_message(summary_message(text)) if text else 0
    row.generation += 1
    await db.flush()
    cancelled = await repo.cancel_active(
        db, tenant, sid, f"cancelled: compaction {job_id} was reverted"
    )
    state = noop_state(row)
    job.reverted_at = func.now()
    job.revert_state = state
    await db.flush()
    await db.refresh(job, ["reverted_at"])
    answer = {
        "job_id": job.id,
        "reverted": True,
        "last_compaction_seq": row.last_compaction_seq,
        "watermark_restored": row.last_compaction_seq,
        "watermark_reverted": reverted_watermark,
        "summary_restored": row.summary_text is not None,
        "compaction_count": row.compaction_count,
        "cancelled_jobs": cancelled,
        "reverted_at": job.reverted_at,
    }
    await record_event(
        db,
        tenant,
        sid,
        "compaction.reverted",
        {k: v for k, v in answer.items() if k != "reverted_at"},
    )
    return answer


def _check_revertable(job: CompactionJobRow) -> None:
    if job.reverted_at is not None:
        raise Conflict("already_reverted", f"compaction job {job.id!r} was already reverted")
    if job.status not in STORED or job.watermark_after is None:
        raise Conflict(
            "not_revertable",
            f"compaction job {job.id!r} is {job.status}: it stored nothing, so there is "
            "nothing to revert",
            job_status=job.status,
        )
    if job.replaced is None:
        raise Conflict(
            "not_revertable",
            f"compaction job {job.id!r} was stored before reverts were recorded: "
            "what it replaced is not known",
            job_status=job.status,
        )
