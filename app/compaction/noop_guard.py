"""The noop guard: whether a compaction could free anything now, so that an append at
compact_needed queues no job that would end as a noop (SPEC §5)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.compaction.summary import summary_token_cap
from app.core.budget import session_compaction
from app.core.settings import Settings
from app.db.models import CompactionJobRow, SessionRow
from app.db.scope import of_session


def _regrown(row: SessionRow, settings: Settings) -> bool:
    """The regrowth guard on the session row alone, so appends do not queue doomed jobs.

    The job's plan applies the same guard exactly; this only spares the claim,
    the history read and the noop event when the answer is already known.
    """
    if not row.compaction_count:
        return True
    ratio = session_compaction(row, settings).regrowth_ratio
    history = row.context_tokens - row.watermark_context_tokens
    return history >= row.compacted_history_tokens * (1 + ratio)


def could_free(row: SessionRow, settings: Settings) -> bool:
    """Whether a compaction could free anything, from the session row's running totals.

    The preserved tail holds at most `keep_recent_ratio` of the usable budget
    (bar the current turn's last steps), and a plan must free `min_free_ratio`
    of it: an effective history no bigger than both together has nothing worth
    compacting, so no job is queued for it (SPEC §5: no job per append that ends
    as a `noop`). A necessary condition only; the plan decides exactly.
    """
    c = session_compaction(row, settings)
    history = row.context_tokens - row.watermark_context_tokens
    # At least this much lies outside the tail; its summary takes back its share.
    outside = history - int(c.keep_recent_ratio * c.usable_budget)
    if outside <= 0:
        return False
    freed = outside - min(outside, summary_token_cap(outside))
    return freed >= max(1, int(c.min_free_ratio * c.usable_budget)) and _regrown(row, settings)


def noop_state(row: SessionRow) -> dict[str, int]:
    """What an automatic noop is remembered by: the same state never gets another job."""
    return {
        "watermark": row.last_compaction_seq,
        "generation": row.generation,
        "context_tokens": row.context_tokens,
        "history_tokens": row.context_tokens - row.watermark_context_tokens,
    }


async def grown_since_noop_or_revert(db: AsyncSession, row: SessionRow, settings: Settings) -> bool:
    """False while the session is in the state (or barely past it) its last noop, or its
    last revert, left it in.

    A plan that found nothing to compact finds nothing again until the log has
    grown: by `regrowth_ratio` of the history it saw (at least `min_free_ratio`
    of the usable budget, and at least one token), on the same watermark and
    generation. A reverted compaction is not redone by the same rule: the revert
    remembers the state it restored (its watermark, the generation it bumped, the
    log's tokens then), and automatic compaction leaves the session alone until
    the log has grown that much past it (a manual `POST /compact` is not held back).
    Read from the session's latest noop job and latest revert (primary key prefix).
    """
    J = CompactionJobRow
    mine = of_session(J, row.tenant_id, row.id)
    last_noop = await db.scalar(
        select(J.result).where(mine, J.status == "noop").order_by(J.finished_at.desc()).limit(1)
    )
    last_revert = await db.scalar(
        select(J.revert_state)
        .where(mine, J.reverted_at.is_not(None))
        .order_by(J.reverted_at.desc())
        .limit(1)
    )
    return not _held(row, (last_noop or {}).get("state"), settings) and not _held(
        row, last_revert, settings
    )


def _held(row: SessionRow, state: object, settings: Settings) -> bool:
    """The session is still in `state` (a noop's or a revert's), or barely past it."""
    if not isinstance(state, dict):
        return False
    if (state.get("watermark"), state.get("generation")) != (
        row.last_compaction_seq,
        row.generation,
    ):
        return False  # compacted, cut, cleared or reverted since: a new state
    c = session_compaction(row, settings)
    growth = max(
        1,
        int(c.regrowth_ratio * int(state.get("history_tokens", 0))),
        int(c.min_free_ratio * c.usable_budget),
    )
    return row.context_tokens < int(state.get("context_tokens", 0)) + growth
