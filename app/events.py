"""The per-session event log (context.compressed, compaction.*, budget.*)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import EventRow


async def record_event(
    db: AsyncSession, tenant: str, sid: str, type_: str, data: dict[str, Any]
) -> None:
    await db.execute(
        insert(EventRow).values(tenant_id=tenant, session_id=sid, type=type_, data=data)
    )


async def page(
    db: AsyncSession, tenant: str, sid: str, after_id: int, limit: int, type_prefix: str | None
) -> list[EventRow]:
    stmt = select(EventRow).where(
        EventRow.tenant_id == tenant, EventRow.session_id == sid, EventRow.id > after_id
    )
    if type_prefix:
        stmt = stmt.where(EventRow.type.startswith(type_prefix, autoescape=True))
    stmt = stmt.order_by(EventRow.id).limit(limit)
    return list((await db.execute(stmt)).scalars())
