"""Engine, session factory, the per-request transaction, and schema migrations."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects.postgresql import asyncpg as postgresql_asyncpg
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from app.db.pool import FairPool

if TYPE_CHECKING:
    from alembic.config import Config


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
# tests/api/test_payload_plans.py fails a payload statement whose plan, made on a
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
    _binary_tsvector(engine)
    return engine


def _binary_tsvector(engine: AsyncEngine) -> None:
    """tsvector goes both ways in PostgreSQL's binary form on every connection.

    The append sends each message's search vector made ready (app/index/vector.py):
    PostgreSQL reads the binary form without parsing it, where the text form
    (`'a':1 'b':2,5`) cost about as much of its CPU as storing and indexing the row.
    A tsvector read back comes as the text PostgreSQL would have sent.
    """

    @event.listens_for(engine.sync_engine, "connect")
    def _connected(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.run_async(
            lambda conn: conn.set_type_codec(
                "tsvector",
                schema="pg_catalog",
                encoder=_as_is,
                decoder=tsvector_text,
                format="binary",
            )
        )


def _as_is(data: bytes) -> bytes:
    return data


_WEIGHTS = ("", "C", "B", "A")


def tsvector_text(data: bytes) -> str:
    """A tsvector's binary form (tsvectorsend) as PostgreSQL's text form (tsvectorout):
    `'lexeme':1,5B 'other'`, quotes and backslashes doubled."""
    count = int.from_bytes(data[:4], "big")
    at = 4
    out: list[str] = []
    for _ in range(count):
        end = data.index(b"\0", at)
        lexeme = data[at:end].decode().replace("'", "''").replace("\\", "\\\\")
        n = int.from_bytes(data[end + 1 : end + 3], "big")
        at = end + 3
        if n:
            words = [int.from_bytes(data[i : i + 2], "big") for i in range(at, at + 2 * n, 2)]
            at += 2 * n
            positions = ",".join(f"{w & 0x3FFF}{_WEIGHTS[w >> 14]}" for w in words)
            out.append(f"'{lexeme}':{positions}")
        else:
            out.append(f"'{lexeme}'")
    return " ".join(out)


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


def migrations_dir() -> Path:
    """`app/db/migrations`, in a checkout and in an installed wheel alike."""
    return Path(__file__).resolve().parent / "migrations"


# Alembic is imported where it is used: a `--workers` child, or an app built in a test,
# needs it only at its first readiness probe, not to start.


def alembic_config(url: str) -> Config:
    # Built in code, not read from alembic.ini, which an installed wheel does not have;
    # alembic.ini is for the `alembic` command line in a checkout.
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("path_separator", "os")
    cfg.attributes["database_url"] = normalise_url(url)
    return cfg


def database_url_for_alembic(cfg: Config) -> str:
    url = cfg.attributes.get("database_url")
    if not url:
        # Plain `alembic` on the command line: resolve the URL the way the service does.
        from app.core.settings import load_settings
        from app.db.embedded import resolve_database_url

        url = normalise_url(resolve_database_url(load_settings()))
    return str(url)


class DatabaseNotUtf8(Exception):
    """The database is not encoded UTF8: every command that uses it refuses to start."""


# contextd stores what agents send, in any language. In a LATIN1 database the first
# Chinese message fails to convert (a 500, after the service had started fine); in a
# SQL_ASCII one the bytes are stored unchecked and case folding, lengths and substrings
# work on bytes, not characters. Refused at start, naming the fix.
ENCODING_SQL = "SELECT current_database(), current_setting('server_encoding')"


def encoding_refusal(database: str, encoding: str) -> str | None:
    """Why the database `database`, encoded `encoding`, cannot be used (None: it can)."""
    if encoding.upper() == "UTF8":
        return None
    return (
        f"database {database!r} is encoded {encoding}, not UTF8: contextd stores text in "
        "UTF-8 (non-ASCII text would fail or be stored unchecked). Create a UTF8 database "
        f"(createdb -E UTF8 -T template0 <name>, or CREATE DATABASE <name> ENCODING 'UTF8' "
        "TEMPLATE template0) and point CONTEXTD_DATABASE_URL at it"
    )


def check_encoding(connection: Connection) -> None:
    """Raise DatabaseNotUtf8 unless the connection's database is UTF8 (the migration
    step runs it first, so `serve`, `migrate`, `demo` and `keys` refuse alike)."""
    from sqlalchemy import text

    database, encoding = connection.execute(text(ENCODING_SQL)).one()
    problem = encoding_refusal(str(database), str(encoding))
    if problem is not None:
        raise DatabaseNotUtf8(problem)


def check_database_encoding(url: str) -> None:
    """`check_encoding` for a process that does not migrate (`contextd worker`).
    Synchronous, like `run_migrations`."""
    import asyncio

    async def check() -> None:
        engine = create_async_engine(normalise_url(url))
        try:
            async with engine.connect() as conn:
                await conn.run_sync(check_encoding)
        finally:
            await engine.dispose()

    asyncio.run(check())


def run_migrations(url: str) -> None:
    """Upgrade to head. Synchronous (Alembic drives its own event loop): call it from a thread."""
    from alembic import command

    command.upgrade(alembic_config(url), "head")


@functools.cache  # it reads every migration script, on the event loop of each /readyz
def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config("postgresql+asyncpg://unused/"))
    return script.get_current_head()


def current_revision(connection: Connection) -> str | None:
    from alembic.runtime.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


async def schema_is_current(engine: AsyncEngine) -> bool:
    async with engine.connect() as conn:
        current: Any = await conn.run_sync(current_revision)
    return bool(current) and current == head_revision()


def _unavailable_classes() -> tuple[type[Exception], ...]:
    import asyncpg
    from sqlalchemy import exc as sa_exc

    return (
        sa_exc.SQLAlchemyError,
        asyncpg.PostgresError,
        asyncpg.InterfaceError,
        asyncpg.InternalClientError,
        OSError,
        TimeoutError,
    )


# Error classes that may mean "the database is away"; `is_unavailable` decides.
UNAVAILABLE_CLASSES = _unavailable_classes()


def _driver_error(exc: BaseException) -> BaseException:
    """The asyncpg error under SQLAlchemy's wrapping (`orig`, then one `__cause__`)."""
    from sqlalchemy import exc as sa_exc

    if isinstance(exc, sa_exc.DBAPIError):
        exc = exc.orig if exc.orig is not None else exc
        exc = getattr(exc, "__cause__", None) or exc
    return exc


def is_rolled_back(exc: BaseException) -> bool:
    """True when PostgreSQL rolled the transaction back to break a conflict (deadlock,
    serialization failure): nothing was written and the same request may be retried."""
    import asyncpg

    return isinstance(_driver_error(exc), asyncpg.TransactionRollbackError)


def is_unavailable(exc: BaseException) -> bool:
    """True for errors that mean "the database is away", which clients should retry (503)."""
    import asyncpg
    from sqlalchemy import exc as sa_exc

    if isinstance(exc, sa_exc.TimeoutError | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(
        _driver_error(exc),
        asyncpg.PostgresConnectionError
        | asyncpg.CannotConnectNowError
        | asyncpg.InternalClientError
        | asyncpg.AdminShutdownError
        | asyncpg.InterfaceError
        | ConnectionError
        | OSError,
    )


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
