"""Cutting the log: removing its tail (an agent undoing a step) and clearing it.

Both lock the session row exactly like an append, so they serialise with
appends and are fenced by the same lease check. Both bump the session's
`generation`: a compaction job that read its history before the cut finds the
generation changed at its store and writes nothing, so no summary of deleted
messages is ever stored (seqs are reused by later appends, so the watermark
alone could not tell the old messages from the new ones).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.budget import Budget, budget_of
from app.core.errors import Conflict, NotFound
from app.core.limits import ROLES
from app.core.settings import Settings
from app.db.models import MessageRow, SessionRow
from app.messages import repository as repo
from app.messages import tail_repository as tail_repo
from app.messages.service import message_view
from app.observability.events import record_event
from app.sessions import repository as sessions
from app.sessions.lease_rule import check_write
from app.sessions.watermark import context_tokens_through, watermark_tokens


@dataclass(frozen=True, slots=True)
class CutResult:
    deleted: list[dict[str, Any]]
    deleted_count: int
    last_seq: int
    budget: Budget


async def _locked(db: AsyncSession, tenant: str, sid: str, lock_token: str | None) -> SessionRow:
    locked = await sessions.get_for_update(db, tenant, sid)
    if locked is None:
        raise NotFound(f"session {sid!r} does not exist")
    row, lease_live = locked
    check_write(row, lease_live, lock_token)
    return row


async def delete_tail(
    db: AsyncSession,
    tenant: str,
    sid: str,
    from_seq: int,
    lock_token: str | None,
    settings: Settings,
) -> CutResult:
    """Remove every message with `seq >= from_seq`; the next append gets `from_seq` again.

    Only the effective history can be cut: `from_seq` at or below the watermark
    would remove messages the summary stands for, which is a 409
    `below_watermark`. A `from_seq` past the end deletes nothing (a retried
    delete is harmless while nothing was appended since).
    """
    row = await _locked(db, tenant, sid, lock_token)
    if from_seq <= row.last_compaction_seq:
        raise Conflict(
            "below_watermark",
            f"from_seq {from_seq} is at or below the compaction watermark "
            f"{row.last_compaction_seq}: those messages are summarised; only seqs above "
            "it can be deleted",
            last_compaction_seq=row.last_compaction_seq,
        )
    if from_seq > row.last_seq:
        return CutResult([], 0, row.last_seq, budget_of(row, settings))
    rows = await repo.tail(db, tenant, sid, from_seq)
    deleted = [message_view(m) for m in rows]
    made = [c for m in rows if m.role == "assistant" for c in _call_ids(m)]
    answered = [str(m.body["tool_call_id"]) for m in rows if m.role == "tool"]
    await tail_repo.delete_from(db, tenant, sid, from_seq, made, answered)

    for role in ROLES:
        n = sum(1 for m in rows if m.role == role)
        setattr(row, f"count_{role}", getattr(row, f"count_{role}") - n)
    row.context_tokens = await context_tokens_through(db, tenant, sid, from_seq - 1)
    row.last_seq = from_seq - 1
    if row.last_compaction_seq > 0:
        # The cut may take every user message after the watermark: the latest one then
        # lies below it, is sent again as the turn anchor and counts again (an append of
        # a user message gave its tokens back, app/messages/repository.py `_GIVE_BACK`).
        row.watermark_context_tokens = await watermark_tokens(
            db, tenant, sid, row.last_compaction_seq
        )
    row.generation += 1
    await db.flush()
    await record_event(
        db,
        tenant,
        sid,
        "messages.deleted",
        {"from_seq": from_seq, "deleted_count": len(rows), "last_seq": row.last_seq},
    )
    return CutResult(deleted, len(rows), row.last_seq, budget_of(row, settings))


async def clear(
    db: AsyncSession, tenant: str, sid: str, lock_token: str | None, settings: Settings
) -> CutResult:
    """Empty the log, the summary, the flush candidates and the watermark; keep the settings,
    the lease and the event log."""
    row = await _locked(db, tenant, sid, lock_token)
    count = sum(getattr(row, f"count_{role}") for role in ROLES)
    await tail_repo.delete_all(db, tenant, sid)
    for role in ROLES:
        setattr(row, f"count_{role}", 0)
    row.last_seq = 0
    row.context_tokens = 0
    row.last_compaction_seq = 0
    row.watermark_context_tokens = 0
    row.summary = None
    row.summary_text = None
    row.summary_tokens = 0
    row.summary_carries_pinned = False
    row.compaction_metadata = None
    row.memory_flush_candidates = []
    row.compacted_history_tokens = 0
    row.compaction_count = 0
    row.generation += 1
    await db.flush()
    await record_event(db, tenant, sid, "session.cleared", {"deleted_count": count})
    return CutResult([], count, 0, budget_of(row, settings))


def _call_ids(m: MessageRow) -> list[str]:
    calls = m.body.get("tool_calls") or ()
    return [str(c.get("id")) for c in calls if isinstance(c, dict) and c.get("id") is not None]
