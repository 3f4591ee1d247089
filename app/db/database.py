"""A request's access to PostgreSQL: `Database` and the `Driver` protocol (infrastructure).

Every domain reads and writes through `Database`: `transaction()` (an ORM
session in one transaction), `reading()` (an ORM session without BEGIN and
COMMIT), and, on the hot paths, the pooled asyncpg connection itself,
`driver()` for appends and `payloads()` for payload reads. Engines, pools,
compiled statements are in `app/db/engine.py`, migrations in `app/db/migrate.py`.
Nothing here knows a domain or HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
from sqlalchemy.util import greenlet_spawn

from app.db.driver_errors import is_unavailable


class Driver(Protocol):
    """What the hot paths use of a pooled asyncpg connection (`asyncpg.Connection`)."""

    async def execute(self, query: str, *args: Any) -> str: ...
    # Rows are asyncpg Records (by position or column name), which asyncpg leaves untyped.
    async def fetch(self, query: str, *args: Any) -> list[Any]: ...
    async def fetchrow(self, query: str, *args: Any) -> Any: ...
    async def fetchval(self, query: str, *args: Any) -> Any: ...
    def is_closed(self) -> bool: ...
    def is_in_transaction(self) -> bool: ...


class Database:
    """Opens the one transaction of a request.

    Handlers commit by leaving `transaction()` before they build their
    response: an acknowledged write has always been committed (SPEC §6), which
    a dependency's exit code, run after the response is built, cannot promise.
    """

    def __init__(
        self, factory: async_sessionmaker[AsyncSession], payloads: AsyncEngine | None = None
    ) -> None:
        self.factory = factory
        self.engine: AsyncEngine = factory.kw["bind"]
        self._autocommit = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self.payload_engine: AsyncEngine = payloads or self.engine

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncSession]:
        async with self.factory() as session, session.begin():
            yield session

    @asynccontextmanager
    async def driver(self) -> AsyncIterator[Driver]:
        """The pooled asyncpg connection itself, for the append path's few fixed statements.

        An append through the ORM cost ~3 ms of CPU, most of it building, compiling and
        caching statements and loading rows into objects; asyncpg runs a prepared
        statement in tens of microseconds. The caller opens its own transaction. A
        connection that comes back still in a transaction (its rollback failed) is
        closed, never pooled; one that failed as "database away" invalidates the
        pool, as SQLAlchemy does on a disconnect, so the next checkouts connect
        afresh.
        """
        async with _checkout(self.engine) as raw:
            yield raw

    @asynccontextmanager
    async def payloads(self) -> AsyncIterator[Driver]:
        """As `driver()`, on the payload reads' own pool, where statements run on generic
        plans (app/db/engine.py: PAYLOAD_PLAN_CACHE_MODE); only statements shaped for that. No
        transaction: each read takes its own snapshot, as in READ COMMITTED, and a
        trim's one write is one statement. A session and its connection around the
        driver cost ~60 us of a payload's ~0.8 ms of CPU."""
        async with _checkout(self.payload_engine) as raw:
            yield raw

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncSession]:
        """A session for reads that write nothing: no BEGIN and COMMIT round trips.

        Each statement reads its own snapshot, exactly as in a READ COMMITTED
        transaction, so a reader gains nothing from one.
        """
        async with self.factory(bind=self._autocommit) as session:
            yield session


@asynccontextmanager
async def _checkout(engine: AsyncEngine) -> AsyncIterator[Driver]:
    # The pool itself, not a Connection around it: checking out and in through
    # engine.connect() built two wrappers and ran two greenlet hand-offs more.
    pool = engine.sync_engine.pool
    dialect = engine.dialect
    try:
        fairy = await greenlet_spawn(pool.connect)
    except dialect.loaded_dbapi.Error as err:
        # Wrapped as engine.connect() wraps it, so "database away" stays a 503.
        raise DBAPIError.instance(None, None, err, dialect.loaded_dbapi.Error) from err
    raw: Driver | None = fairy.driver_connection
    assert raw is not None  # a checked-out connection is open
    try:
        yield raw
    except BaseException as exc:
        if isinstance(exc, Exception) and is_unavailable(exc):
            pool._invalidate(fairy, exc)
            fairy.invalidate(exc)
        raise
    finally:
        if fairy.is_valid and (raw.is_closed() or raw.is_in_transaction()):
            fairy.invalidate()
        await greenlet_spawn(fairy.close)
