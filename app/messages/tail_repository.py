"""The statements that cut a log: its tail's messages and their tool calls, or all of them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import MessageRow, ToolCallRow
from app.db.scope import of_session


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
    calls = of_session(ToolCallRow, tenant, sid)
    if made:
        await db.execute(
            delete(ToolCallRow).where(
                calls, ToolCallRow.call_id.in_(sorted(set(made))), ToolCallRow.seq >= from_seq
            )
        )
    if answered:
        await db.execute(
            update(ToolCallRow)
            .where(
                calls,
                ToolCallRow.call_id.in_(sorted(set(answered))),
                ToolCallRow.answered_seq >= from_seq,
            )
            .values(answered_seq=None)
            .execution_options(synchronize_session=False)
        )
    await db.execute(
        delete(MessageRow).where(of_session(MessageRow, tenant, sid), MessageRow.seq >= from_seq)
    )


async def delete_all(db: AsyncSession, tenant: str, sid: str) -> None:
    """Delete the whole log of a session and its tool-call bookkeeping."""
    await db.execute(delete(ToolCallRow).where(of_session(ToolCallRow, tenant, sid)))
    await db.execute(delete(MessageRow).where(of_session(MessageRow, tenant, sid)))
