"""Queries on the `sessions` table. Repositories flush, never commit."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.database import Driver
from app.db.models import SessionRow
from app.db.models.job import ACTIVE
from app.db.scope import of_session, of_tenant, session_sql
from app.sessions.lease_rule import lease_live


async def get(db: AsyncSession, tenant: str, sid: str) -> SessionRow | None:
    return await db.get(SessionRow, (tenant, sid))


async def get_for_update(db: AsyncSession, tenant: str, sid: str) -> tuple[SessionRow, bool] | None:
    """The row, locked for this transaction, and whether its lease is live by the database clock.

    FOR NO KEY UPDATE, not FOR UPDATE: rows that reference the session (events,
    jobs, messages) take KEY SHARE on it through their foreign key, and FOR UPDATE
    would block them. A compaction runner closing a job (job row locked, then an
    event inserted) against a request holding the session and waiting on that job
    deadlocked that way (found by schemathesis).
    """
    live = lease_live().label("lease_live")
    stmt = (
        select(SessionRow, live)
        .where(of_session(SessionRow, tenant, sid))
        .with_for_update(key_share=True)
        .execution_options(populate_existing=True)
    )
    row = (await db.execute(stmt)).first()
    return None if row is None else (row[0], bool(row[1]))


async def insert_if_missing(db: AsyncSession, values: dict[str, Any]) -> bool:
    """Create the row unless a concurrent request did; True when this call created it."""
    stmt = (
        insert(SessionRow)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["tenant_id", "id"])
        .returning(SessionRow.id)
    )
    return (await db.execute(stmt)).first() is not None


async def page(db: AsyncSession, tenant: str, after_id: str | None, limit: int) -> list[SessionRow]:
    stmt = select(SessionRow).where(of_tenant(SessionRow, tenant))
    if after_id is not None:
        stmt = stmt.where(SessionRow.id > after_id)
    stmt = stmt.order_by(SessionRow.id).limit(limit)
    return list((await db.execute(stmt)).scalars())


async def remove(db: AsyncSession, tenant: str, sid: str) -> bool:
    stmt = delete(SessionRow).where(of_session(SessionRow, tenant, sid)).returning(SessionRow.id)
    return (await db.execute(stmt)).first() is not None


async def set_values(db: AsyncSession, tenant: str, sid: str, values: dict[str, Any]) -> None:
    await db.execute(
        update(SessionRow)
        .where(of_session(SessionRow, tenant, sid))
        .values(**values)
        .execution_options(synchronize_session=False)
    )


# What the append asks of compaction, and all it asks: whether the session's compaction
# is under way, so that an append that makes the session compact_needed joins that job
# instead of queueing another (the append never imports compaction: this is the seam).
_HAS_ACTIVE = f"""
SELECT EXISTS (
    SELECT 1 FROM compaction_jobs
    WHERE {session_sql()} AND status IN {ACTIVE!r}
)
"""


async def has_active_job(conn: Driver, tenant: str, sid: str) -> bool:
    """Whether the session has a pending or running compaction job, as of a fresh snapshot."""
    return bool(await conn.fetchval(_HAS_ACTIVE, tenant, sid))
