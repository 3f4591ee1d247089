"""The per-session event log (context.compressed, compaction.*, budget.*).

Events that belong to a write (compaction stores, budget transitions of an
append) are inserted in that write's transaction. `context.compressed` belongs
to a read: assembling a payload writes nothing else, and an agent asks for one
before every model call, so those events go through `EventWriter`, which
inserts them in batches off the request path.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import exc as sa_exc
from sqlalchemy import insert, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import EventRow, SessionRow
from app.observability.metrics import EVENTS_DEFERRED

if TYPE_CHECKING:
    from app.database import Database

log = structlog.get_logger("contextd.events")


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


class EventWriter:
    """Batches events and inserts them every `interval_s`, in one statement per batch.

    `created_at` is the time of `add()`, so the log's timestamps are exact; ids
    are assigned at insert and may order a deferred event after a write's event
    of the same instant. `flush()` makes everything added so far visible; the
    event endpoint calls it, so a client of this process reads its own events.
    While the database is away events wait (at most `max_pending`, then the
    oldest are dropped and counted); an event of a session deleted meanwhile
    is dropped. Events still pending when the process is killed are lost:
    they describe reads, which changed nothing.
    """

    def __init__(
        self, database: Database, *, interval_s: float = 0.05, max_pending: int = 10_000
    ) -> None:
        self.database = database
        self.interval_s = interval_s
        self.max_pending = max_pending
        self._pending: list[dict[str, Any]] = []  # rows of `events`, in order
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def add(self, tenant: str, sid: str, type_: str, data: dict[str, Any]) -> None:
        self._pending.append(
            {
                "tenant_id": tenant,
                "session_id": sid,
                "type": type_,
                "data": data,
                "created_at": datetime.now(UTC),
            }
        )
        if len(self._pending) > self.max_pending:
            dropped = len(self._pending) - self.max_pending
            del self._pending[:dropped]
            EVENTS_DEFERRED.labels("dropped_backlog").inc(dropped)
        self._wake.set()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name="contextd-event-writer")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        with contextlib.suppress(Exception):
            await self.flush()

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            # Let a burst of requests add to the same batch.
            await asyncio.sleep(self.interval_s)
            self._wake.clear()
            try:
                await self.flush()
            except Exception as exc:
                log.warning("could not write events; will retry", error=type(exc).__name__)
                await asyncio.sleep(1.0)
                if self._pending:
                    self._wake.set()

    async def flush(self) -> None:
        """Insert everything added so far. Raises if the database is unreachable
        (the events stay pending)."""
        async with self._lock:
            batch, self._pending = self._pending, []
            if not batch:
                return
            try:
                written = await self._insert(batch)
            except BaseException:
                self._pending[:0] = batch  # back in front, order kept
                raise
            EVENTS_DEFERRED.labels("written").inc(written)
            if written < len(batch):
                EVENTS_DEFERRED.labels("dropped_session_gone").inc(len(batch) - written)

    async def _insert(self, batch: list[dict[str, Any]]) -> int:
        try:
            async with self.database.transaction() as db:
                await db.execute(insert(EventRow), batch)
            return len(batch)
        except sa_exc.IntegrityError:
            pass  # a session was deleted after its payload was assembled
        keys = {(p["tenant_id"], p["session_id"]) for p in batch}
        async with self.database.transaction() as db:
            # KEY SHARE keeps the sessions found from being deleted before the insert.
            found = await db.execute(
                select(SessionRow.tenant_id, SessionRow.id)
                .where(tuple_(SessionRow.tenant_id, SessionRow.id).in_(keys))
                .with_for_update(read=True, key_share=True)
            )
            live = {(tenant, sid) for tenant, sid in found}
            kept = [p for p in batch if (p["tenant_id"], p["session_id"]) in live]
            if kept:
                await db.execute(insert(EventRow), kept)
        return len(kept)
