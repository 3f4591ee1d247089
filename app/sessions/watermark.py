"""The session's running token figures at a seq of its log: what a revert and a tail
delete rebuild `context_tokens` and `watermark_context_tokens` from, under the session
row's lock. Repositories flush, never commit."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.conversation import counts_in_context
from app.db.models import MessageRow
from app.db.scope import of_session


async def context_tokens_through(db: AsyncSession, tenant: str, sid: str, seq: int) -> int:
    """The log's running in-context token total through `seq` (0 before the first)."""
    if seq <= 0:
        return 0
    stmt = select(MessageRow.context_tokens_through).where(
        of_session(MessageRow, tenant, sid), MessageRow.seq == seq
    )
    return int(await db.scalar(stmt) or 0)


async def anchor_tokens_below(
    db: AsyncSession, tenant: str, sid: str, seq: int, *, latest: bool = False
) -> int:
    """The in-context tokens of the last user message at or below `seq`: the turn anchor,
    when the compaction that moved the watermark to `seq` cut inside its turn. `latest`:
    only if it is the session's latest user message (none follows `seq`), else 0."""
    stmt = (
        select(
            MessageRow.token_count,
            MessageRow.role,
            MessageRow.include_in_context,
            MessageRow.metadata_,
            MessageRow.seq,
        )
        .where(
            of_session(MessageRow, tenant, sid),
            MessageRow.role == "user",
        )
        .order_by(MessageRow.seq.desc())
        .limit(1)
    )
    if not latest:
        stmt = stmt.where(MessageRow.seq <= seq)
    found = (await db.execute(stmt)).first()
    if found is None:
        return 0
    n, role, include, metadata, at = found
    if at > seq:
        return 0  # a user message follows: the one below is no longer sent
    return int(n) if counts_in_context(role, include, metadata) else 0


async def watermark_tokens(db: AsyncSession, tenant: str, sid: str, watermark: int) -> int:
    """`watermark_context_tokens` as the payload counts it: the log's in-context total
    through `watermark`, less the turn anchor's tokens while the session's latest user
    message lies at or below it (the payload sends that message whatever the watermark,
    SPEC §5). Once a user message follows the watermark the one below is no longer sent,
    and the whole total is below. For what rebuilds the figure under the session row's
    lock (a revert, a tail delete): two probes, the primary key and the partial index on
    users."""
    if watermark <= 0:
        return 0
    through = await context_tokens_through(db, tenant, sid, watermark)
    return through - await anchor_tokens_below(db, tenant, sid, watermark, latest=True)
