"""Queries on `messages` and `tool_calls`. Every query filters on (tenant_id, session_id)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
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
    *,
    skip_stored_ids: bool = False,
) -> int:
    """One multi-row INSERT per table, whatever the batch size; the messages inserted.

    `skip_stored_ids`: a message whose id the session already has is not inserted
    (and not counted) instead of failing the statement.
    """
    if skip_stored_ids:
        stmt = (
            pg_insert(MessageRow)
            .on_conflict_do_nothing(index_elements=["message_id", "tenant_id", "session_id"])
            .returning(MessageRow.message_id)
        )
        inserted = len((await db.scalars(stmt, messages)).all())
    else:
        await db.execute(insert(MessageRow), messages)
        inserted = len(messages)
    if calls:
        await db.execute(insert(ToolCallRow), calls)
    if answers:
        await db.execute(update(ToolCallRow), answers)
    return inserted


async def page(
    db: AsyncSession,
    tenant: str,
    sid: str,
    after_seq: int,
    limit: int,
    *,
    before_seq: int | None = None,
    descending: bool = False,
) -> list[MessageRow]:
    """Messages with `after_seq < seq < before_seq`, from either end of the range.

    Both directions walk the primary key, so reading the tail of a long log
    costs the page, never the log.
    """
    stmt = select(MessageRow).where(*_in_session(tenant, sid), MessageRow.seq > after_seq)
    if before_seq is not None:
        stmt = stmt.where(MessageRow.seq < before_seq)
    order = MessageRow.seq.desc() if descending else MessageRow.seq
    return list((await db.execute(stmt.order_by(order).limit(limit))).scalars())


async def one(db: AsyncSession, tenant: str, sid: str, seq: int) -> MessageRow | None:
    return await db.get(MessageRow, (tenant, sid, seq))


async def tail(db: AsyncSession, tenant: str, sid: str, from_seq: int) -> list[MessageRow]:
    """Every message with `seq >= from_seq`, in log order."""
    stmt = (
        select(MessageRow)
        .where(*_in_session(tenant, sid), MessageRow.seq >= from_seq)
        .order_by(MessageRow.seq)
    )
    return list((await db.execute(stmt)).scalars())


async def context_tokens_through(db: AsyncSession, tenant: str, sid: str, seq: int) -> int:
    """The running in-context token total through `seq` (0 before the first message)."""
    if seq <= 0:
        return 0
    stmt = select(MessageRow.context_tokens_through).where(
        *_in_session(tenant, sid), MessageRow.seq == seq
    )
    return int(await db.scalar(stmt) or 0)


async def delete_from(
    db: AsyncSession,
    tenant: str,
    sid: str,
    from_seq: int,
    made: Sequence[str],
    answered: Sequence[str],
) -> None:
    """Delete the messages with `seq >= from_seq` and their tool-call bookkeeping.

    `made` are the call ids of the deleted assistant messages: forgotten, so
    they may be used again. `answered` are the call ids the deleted tool
    messages answered: a call made earlier is open again. Both go by the
    `tool_calls` primary key, so the cost follows the tail, not the log.
    """
    calls = (ToolCallRow.tenant_id == tenant, ToolCallRow.session_id == sid)
    if made:
        await db.execute(
            delete(ToolCallRow).where(
                *calls, ToolCallRow.call_id.in_(sorted(set(made))), ToolCallRow.seq >= from_seq
            )
        )
    if answered:
        await db.execute(
            update(ToolCallRow)
            .where(
                *calls,
                ToolCallRow.call_id.in_(sorted(set(answered))),
                ToolCallRow.answered_seq >= from_seq,
            )
            .values(answered_seq=None)
            .execution_options(synchronize_session=False)
        )
    await db.execute(
        delete(MessageRow).where(*_in_session(tenant, sid), MessageRow.seq >= from_seq)
    )


async def delete_all(db: AsyncSession, tenant: str, sid: str) -> None:
    """Delete the whole log of a session and its tool-call bookkeeping."""
    await db.execute(
        delete(ToolCallRow).where(ToolCallRow.tenant_id == tenant, ToolCallRow.session_id == sid)
    )
    await db.execute(delete(MessageRow).where(*_in_session(tenant, sid)))
