"""Queries on `messages` and `tool_calls`. Every query filters on (tenant_id, session_id)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import MessageRow, ToolCallRow


def _in_session(tenant: str, sid: str) -> tuple[Any, ...]:
    return (MessageRow.tenant_id == tenant, MessageRow.session_id == sid)


# One probe of the unique (message_id, tenant_id, session_id) key per id. With
# `message_id IN (...)` and no statistics, PostgreSQL priced the primary key's
# (tenant_id, session_id) prefix as cheap as the unique key (both "one row") and
# walked the whole session to find the ids: 13 ms at 5k messages, growing with
# the log. An equality on every column of a unique key is one row by construction.
_MESSAGES_BY_ID = text(
    """
    SELECT m.* FROM unnest(CAST(:ids AS text[])) AS c(message_id)
    CROSS JOIN LATERAL (
        SELECT * FROM messages m
        WHERE m.message_id = c.message_id AND m.tenant_id = :tenant AND m.session_id = :sid
        OFFSET 0
    ) AS m
    """
)


async def by_message_ids(
    db: AsyncSession, tenant: str, sid: str, ids: Sequence[str]
) -> dict[str, MessageRow]:
    if not ids:
        return {}
    stmt = select(MessageRow).from_statement(_MESSAGES_BY_ID)
    rows = await db.scalars(stmt, {"ids": sorted(set(ids)), "tenant": tenant, "sid": sid})
    return {m.message_id: m for m in rows}


# One primary-key probe per id, whatever the planner knows. `call_id IN (...)`
# over a table never analysed (a new deployment, a restore) plans as a scan of the
# session's calls filtered afterwards: 44 ms at 100k messages instead of 0.03.
# OFFSET 0 keeps PostgreSQL from flattening the lateral subquery into that plan.
_CALLS_BY_ID = text(
    """
    SELECT t.* FROM unnest(CAST(:ids AS text[])) AS c(call_id)
    CROSS JOIN LATERAL (
        SELECT * FROM tool_calls t
        WHERE t.tenant_id = :tenant AND t.session_id = :sid AND t.call_id = c.call_id
        OFFSET 0
    ) AS t
    """
)


async def tool_calls(
    db: AsyncSession, tenant: str, sid: str, call_ids: Sequence[str]
) -> dict[str, ToolCallRow]:
    ids = sorted(set(call_ids))
    if not ids:
        return {}
    stmt = select(ToolCallRow).from_statement(_CALLS_BY_ID)
    rows = await db.scalars(stmt, {"ids": ids, "tenant": tenant, "sid": sid})
    return {c.call_id: c for c in rows}


async def insert_batch(
    db: AsyncSession,
    messages: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    answers: list[dict[str, Any]],
) -> None:
    """One multi-row INSERT per table, whatever the batch size."""
    await db.execute(insert(MessageRow), messages)
    if calls:
        await db.execute(insert(ToolCallRow), calls)
    if answers:
        await db.execute(update(ToolCallRow), answers)


async def page(
    db: AsyncSession, tenant: str, sid: str, after_seq: int, limit: int
) -> list[MessageRow]:
    stmt = (
        select(MessageRow)
        .where(*_in_session(tenant, sid), MessageRow.seq > after_seq)
        .order_by(MessageRow.seq)
        .limit(limit)
    )
    return list((await db.execute(stmt)).scalars())


async def one(db: AsyncSession, tenant: str, sid: str, seq: int) -> MessageRow | None:
    return await db.get(MessageRow, (tenant, sid, seq))
