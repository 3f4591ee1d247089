"""When a payload stream takes up the summary of an automatic compaction: at its next trim.

Automatic compaction runs ahead of need (when an append leaves the session at
`compact_needed`, short of the budget) so that a summary is ready when the payload
must shrink. Taking it up at once changes the payload right after its system block,
and every call re-sends it uncached; the payload would then grow from the low-water
mark to the next compaction, a shorter run than from the mark to the budget. So a
stream whose layout was fixed under the summary the compaction replaced keeps
replaying that layout, with that summary, byte for byte, while it still holds and
fits the budget: the calls in between pay only for their new steps, and the switch
to the new summary comes with the trim the budget forces, one re-send for both.

Nothing is lost meanwhile: the older summary plus every message after its watermark
is the same history the newer summary stands for, in more detail. Only an automatic
compaction waits; `POST /compact` asks for a smaller payload now. Only the compaction
on top of the stack (not reverted, the one that set the session's watermark) and only
the state it replaced: a stream two compactions behind switches at once.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select

from app.context.session_read import with_state
from app.context.statements import ONE, fetch
from app.context.trim_state import Layout
from app.db.database import Driver
from app.db.engine import Compiled
from app.db.models import CompactionJobRow, SessionRow
from app.db.scope import of_session

_JOB = CompactionJobRow

# What a payload reads of the state a compaction replaced (the JSON summary and the
# flush candidates are never part of a payload).
_STATE = ("summary_text", "summary_tokens", "summary_carries_pinned", "watermark_context_tokens")
_COUNTS = ("compacted_history_tokens", "compaction_count")

# The session's newest finished job, whatever it was: a compaction asked for since (even
# one that found nothing to do) ends the wait.
_LATEST = Compiled(
    select(
        _JOB.trigger,
        _JOB.status,
        _JOB.reverted_at.is_(None),
        _JOB.watermark_before,
        _JOB.watermark_after,
        *(_JOB.replaced[k].astext for k in (*_STATE, *_COUNTS, "tokenizer")),
    )
    .where(
        of_session(_JOB, bindparam("tenant"), bindparam("sid")),
        _JOB.finished_at.is_not(None),
    )
    .order_by(_JOB.finished_at.desc())
    .limit(ONE)
)


def may_wait(stored: Layout, row: SessionRow) -> bool:
    """Whether the stream's layout was fixed under an earlier summary of this log."""
    return (
        stored.generation == row.generation
        and stored.watermark < row.last_compaction_seq
        and stored.through_seq <= row.last_seq
    )


async def earlier_row(db: Driver, row: SessionRow, stored: Layout) -> SessionRow | None:
    """The session as it was before the compaction on top of its stack, when that was an
    automatic one that replaced the summary `stored` was fixed under; else None."""
    rows = await fetch(db, _LATEST, {"tenant": row.tenant_id, "sid": row.id})
    if not rows:
        return None
    trigger, status, standing, before, after, *replaced = rows[0]
    if (
        trigger != "auto"
        or status not in ("success", "degraded")
        or not standing
        or (before, after) != (stored.watermark, row.last_compaction_seq)
    ):
        return None
    values = dict(zip((*_STATE, *_COUNTS, "tokenizer"), replaced, strict=True))
    if values["tokenizer"] not in (None, row.tokenizer):
        return None  # counted with another model's tokenizer: its figures do not add up
    if values["compaction_count"] is None or int(values["compaction_count"]) + 1 != (
        row.compaction_count
    ):
        return None  # not the top of the stack: a revert or a clear came between
    state: dict[str, Any] = {
        "last_compaction_seq": stored.watermark,
        "summary_text": values["summary_text"],
        "summary_tokens": int(values["summary_tokens"] or 0),
        "summary_carries_pinned": values["summary_carries_pinned"] == "true",
        "watermark_context_tokens": int(values["watermark_context_tokens"] or 0),
        "compacted_history_tokens": int(values["compacted_history_tokens"] or 0),
        "compaction_count": int(values["compaction_count"]),
    }
    return with_state(row, state)
