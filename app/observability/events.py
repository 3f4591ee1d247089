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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import structlog
from sqlalchemy import exc as sa_exc
from sqlalchemy import insert, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import EventRow, SessionRow
from app.db.scope import of_session, of_sessions, session_row_sql
from app.observability.metrics import EVENTS_DEFERRED

if TYPE_CHECKING:
    from app.db.database import Database

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
    stmt = select(EventRow).where(of_session(EventRow, tenant, sid), EventRow.id > after_id)
    if type_prefix:
        stmt = stmt.where(EventRow.type.startswith(type_prefix, autoescape=True))
    stmt = stmt.order_by(EventRow.id).limit(limit)
    return list((await db.execute(stmt)).scalars())


@dataclass(slots=True)
class PendingBill:
    """A session's payload calls not yet added to its bill (SPEC §4): their sums, the
    last call's time, and the summariser totals they have reported."""

    calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    full_history_input_tokens: int = 0
    last_call_at: datetime | None = None
    summariser_input_seen: int = 0
    summariser_output_seen: int = 0


# Adds one session's pending sums to its row. One statement per session, run as one
# executemany in key order: the rows are locked in that order, so two processes'
# flushes (and group appends, which lock the same way) never deadlock, and each
# statement names its session, so a table distributed by session routes it to one
# shard (a join with an unnest of every session's key touched them all).
_ADD_BILL = text(f"""
UPDATE sessions SET
    bill_calls = bill_calls + :calls,
    bill_input_tokens = bill_input_tokens + :input,
    bill_cached_input_tokens = bill_cached_input_tokens + :cached,
    bill_full_history_input_tokens = bill_full_history_input_tokens + :full,
    bill_last_call_at = GREATEST(bill_last_call_at, CAST(:at AS timestamptz)),
    bill_summariser_input_seen = GREATEST(bill_summariser_input_seen, :sin),
    bill_summariser_output_seen = GREATEST(bill_summariser_output_seen, :sout)
WHERE {session_row_sql(tenant=":tenant", sid=":sid")}
""")


_RECENT_MAX = 50_000


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
        self._bills: dict[tuple[str, str], PendingBill] = {}
        self.clock_offset_s = 0.0
        # Each session's last call here and the summariser totals it reported, kept past
        # the flush: a call that reads the row while a flush is in flight still sees them.
        self._recent: dict[tuple[str, str], tuple[datetime, int, int]] = {}
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

    def bill(
        self,
        tenant: str,
        sid: str,
        *,
        input_tokens: int,
        cached_input_tokens: int,
        full_history_input_tokens: int,
        at: datetime,
        summariser_seen: tuple[int, int],
    ) -> None:
        """Add one payload call to the session's bill (written with the next batch)."""
        b = self._bills.get((tenant, sid))
        if b is None:
            b = self._bills[(tenant, sid)] = PendingBill()
        b.calls += 1
        b.input_tokens += input_tokens
        b.cached_input_tokens += cached_input_tokens
        b.full_history_input_tokens += full_history_input_tokens
        b.last_call_at = at if b.last_call_at is None else max(b.last_call_at, at)
        b.summariser_input_seen = max(b.summariser_input_seen, summariser_seen[0])
        b.summariser_output_seen = max(b.summariser_output_seen, summariser_seen[1])
        if len(self._recent) >= _RECENT_MAX:
            self._recent.clear()
        self._recent[(tenant, sid)] = (b.last_call_at, *summariser_seen)
        self._wake.set()

    def now(self) -> datetime:
        """The time of a payload call: the wall clock, plus `clock_offset_s`, which a test
        or a bench moves forward to stand for a pause between an agent's calls."""
        return datetime.now(UTC) + timedelta(seconds=self.clock_offset_s)

    def recent_call(self, tenant: str, sid: str) -> tuple[datetime, int, int] | None:
        """The session's last payload call in this process: its time and the summariser
        totals it reported (the row may not show them yet)."""
        return self._recent.get((tenant, sid))

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
            await self._flush_bills()
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

    async def _flush_bills(self) -> None:
        bills, self._bills = self._bills, {}
        if not bills:
            return
        params = [
            {
                "tenant": tenant,
                "sid": sid,
                "calls": b.calls,
                "input": b.input_tokens,
                "cached": b.cached_input_tokens,
                "full": b.full_history_input_tokens,
                "at": b.last_call_at,
                "sin": b.summariser_input_seen,
                "sout": b.summariser_output_seen,
            }
            for (tenant, sid), b in sorted(bills.items())
        ]
        try:
            async with self.database.transaction() as db:
                await db.execute(_ADD_BILL, params)
        except BaseException:
            for key, b in bills.items():  # back, merged with what came meanwhile
                now = self._bills.get(key)
                if now is not None:
                    b.calls += now.calls
                    b.input_tokens += now.input_tokens
                    b.cached_input_tokens += now.cached_input_tokens
                    b.full_history_input_tokens += now.full_history_input_tokens
                    if now.last_call_at is not None:
                        b.last_call_at = max(b.last_call_at or now.last_call_at, now.last_call_at)
                    b.summariser_input_seen = max(
                        b.summariser_input_seen, now.summariser_input_seen
                    )
                    b.summariser_output_seen = max(
                        b.summariser_output_seen, now.summariser_output_seen
                    )
                self._bills[key] = b
            raise

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
                .where(of_sessions(SessionRow, keys))
                .with_for_update(read=True, key_share=True)
            )
            live = {(tenant, sid) for tenant, sid in found}
            kept = [p for p in batch if (p["tenant_id"], p["session_id"]) in live]
            if kept:
                await db.execute(insert(EventRow), kept)
        return len(kept)
