"""Reads for planning: the history after the watermark; the turn anchor, tool turns below it."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import literal_column, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.conversation import LoggedMessage
from app.db.models import MessageRow
from app.db.scope import of_session


async def history_after(
    db: AsyncSession, tenant: str, sid: str, watermark: int
) -> list[LoggedMessage]:
    """The session's messages after `watermark`, in log order: the history a plan cuts."""
    stmt = (
        select(MessageRow)
        .where(
            of_session(MessageRow, tenant, sid),
            MessageRow.seq > watermark,
        )
        .order_by(MessageRow.seq)
    )
    return [_logged(m) for m in await db.scalars(stmt)]


async def anchor_below(
    db: AsyncSession, tenant: str, sid: str, watermark: int, history: Sequence[LoggedMessage]
) -> LoggedMessage | None:
    """The turn anchor at or below `watermark`: the session's latest user message, when
    `history` (what lies after the watermark) holds none. The payload still sends it, so
    a compaction must keep counting it (`turns._carried` says why). One row of the
    partial index on users."""
    if watermark <= 0 or any(m.role == "user" for m in history):
        return None
    stmt = (
        select(MessageRow)
        .where(
            of_session(MessageRow, tenant, sid),
            MessageRow.role == literal_column("'user'"),
            MessageRow.seq <= watermark,
        )
        .order_by(MessageRow.seq.desc())
        .limit(1)
    )
    found = await db.scalar(stmt)
    return _logged(found) if found is not None else None


async def tool_turns_before(
    db: AsyncSession, tenant: str, sid: str, watermark: int, limit: int
) -> list[LoggedMessage]:
    """The last `limit` tool outputs and tool-calling messages at or below `watermark`, in
    log order: where values the next range reuses were returned (artifacts.py)."""
    stmt = (
        select(MessageRow)
        .where(
            of_session(MessageRow, tenant, sid),
            MessageRow.seq <= watermark,
            MessageRow.role.in_(("tool", "assistant")),
        )
        .order_by(MessageRow.seq.desc())
        .limit(limit)
    )
    return [_logged(m) for m in reversed(list(await db.scalars(stmt)))]


def _logged(m: MessageRow) -> LoggedMessage:
    """A stored `messages` row as the message the pure layers read."""
    return LoggedMessage(
        seq=m.seq,
        id=m.message_id,
        role=m.role,  # type: ignore[arg-type]  # the column only ever holds validated roles
        body=m.body,
        token_count=m.token_count,
        pinned=m.pinned,
        include_in_context=m.include_in_context,
        mode=m.mode,
        run_id=m.run_id,
        metadata=m.metadata_,
        error=m.error,
        created_at=m.created_at,
    )
