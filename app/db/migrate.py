"""Schema migrations: Alembic's configuration built in code, the upgrade, the revision a
database is at, and the UTF8 check every command that uses a database runs first."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from app.db.engine import normalise_url

if TYPE_CHECKING:
    from alembic.config import Config


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
