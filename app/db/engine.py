"""Engines and their pools, the session factory, the per-request transaction, and
`Compiled` statements. Migrations are in `app/db/migrate.py`, what driver errors mean in
`app/db/driver_errors.py`, tsvector's codec in `app/db/tsvector.py`."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql import asyncpg as postgresql_asyncpg
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from app.db.pool import FairPool
from app.db.tsvector import binary_tsvector


def normalise_url(url: str) -> str:
    """Accept the usual `postgres://` and `postgresql://` spellings; we always drive asyncpg."""
    for prefix in (
        "postgres://",
        "postgresql://",
        "postgresql+psycopg://",
        "postgresql+psycopg2://",
    ):
        if url.startswith(prefix):
            return "postgresql+asyncpg://" + url[len(prefix) :]
    return url


# Every statement is planned for its own parameters, every time. asyncpg prepares
# each statement once per connection, and after five executions PostgreSQL may
# switch to a generic plan that it then keeps for the connection's life: a plan
# made for the table as it was then. A server that starts with small sessions
# (or an empty table, where a sequential scan is cheapest) keeps that plan while
# the log grows: the window query took 118 ms at 100k messages in a long-lived
# process and 5 ms in a fresh one. Re-planning costs a fraction of a millisecond
# for the window read and tens of microseconds for the primary-key statements
# (`bench/plans.py` (since removed, last at 97ba89a) EXPLAINed each hot statement
# both ways); the parse and describe round trips stay cached.
SERVER_SETTINGS = {"application_name": "contextd", "plan_cache_mode": "force_custom_plan"}

# Except on the payload reads' own pool (`Database.payloads()`), whose statements
# were shaped for it (app/context/repository.py: closed seq ranges, literal LIMITs, a
# literal role for the partial index): their generic plans are the custom ones at
# any size, even made on a small table and run at 100k messages:
# tests/db/test_payload_plans.py fails a payload statement whose plan, made on a
# small log, walks a large session. Planning the window read was ~0.5 ms of
# PostgreSQL's CPU per payload, most of what it cost: bench/load.py's closed loop
# went from 521-591 to 626-629 requests/s.
PAYLOAD_PLAN_CACHE_MODE = "force_generic_plan"

# A pooled connection idle for longer than this is pinged before a request gets it.
PING_AFTER_IDLE_S = 2.0


def create_engine(
    url: str,
    pool_size: int = 10,
    pool_timeout_s: float = 5.0,
    ping_after_idle_s: float = PING_AFTER_IDLE_S,
    plan_cache_mode: str = SERVER_SETTINGS["plan_cache_mode"],
) -> AsyncEngine:
    engine = create_async_engine(
        normalise_url(url),
        # Up to twice `pool_size` connections, as before, but every one opened stays in
        # the pool. As overflow, the second half churned under steady load: several
        # connections coming back in one loop iteration found the pool's queue full and
        # were closed, and the next burst opened them again; one new connection per ~50
        # appends at 50 clients, each a PostgreSQL backend start, the dialect's setup
        # queries and every statement prepared again (counted by bench/append_cpu.py,
        # since removed, last at 3a1b9bd).
        pool_size=2 * pool_size,
        # Waiters served in arrival order (app/db/pool.py): a saturated server queues for
        # connections, and SQLAlchemy's own queue let newcomers take them first.
        poolclass=FairPool,
        max_overflow=0,
        # An overloaded pool answers 503 in seconds rather than holding a client for 30.
        pool_timeout=pool_timeout_s,
        pool_recycle=1800,
        connect_args={"server_settings": {**SERVER_SETTINGS, "plan_cache_mode": plan_cache_mode}},
    )
    _ping_when_idle(engine, ping_after_idle_s)
    binary_tsvector(engine)
    return engine


def _ping_when_idle(engine: AsyncEngine, idle_s: float) -> None:
    """Pre-ping, but only connections that sat idle in the pool.

    `pool_pre_ping` costs a round trip on every checkout (~0.45 ms here, 5% of a
    context request). A connection in steady use has just proven itself; one that
    waited in the pool is where a database restart hides. A broken connection that
    slips through fails its request with a 503 (retryable) and invalidates the
    whole pool, so the next checkouts connect afresh.
    """

    @event.listens_for(engine.sync_engine, "checkin")
    def _checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.get("idle_since")
        if since is None or time.monotonic() - since < idle_s:
            return  # just connected, or back from a request a moment ago
        try:
            dbapi_connection.ping()
        except Exception as error:
            # The pool retries the checkout with a new connection, and drops the others
            # it holds: they were opened before whatever broke this one.
            raise sa_exc.InvalidatePoolError() from error


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    return async_sessionmaker(engine, expire_on_commit=False, autoflush=False)


async def transaction(factory: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """One transaction per request: commit on success, roll back on any error."""
    async with factory() as session, session.begin():
        yield session


class Compiled:
    """A fixed statement compiled for asyncpg: its SQL and its parameters in order."""

    __slots__ = ("names", "sql", "values")

    def __init__(self, stmt: Any) -> None:
        compiled = stmt.compile(dialect=postgresql_asyncpg.dialect())  # type: ignore[no-untyped-call]
        self.sql = str(compiled)
        self.names: tuple[str, ...] = tuple(compiled.positiontup or ())
        # Values SQLAlchemy turned into parameters itself (the 1 of `coalesce(…) + 1`).
        self.values = {k: compiled.binds[k].effective_value for k in self.names}

    def args(self, params: dict[str, Any]) -> list[Any]:
        return [params[k] if k in params else self.values[k] for k in self.names]
