"""Async Alembic environment.

The URL is handed over by `app.db.migrate.run_migrations` in `config.attributes`, never
read from alembic.ini, so the same settings drive the service and its schema.
An advisory lock makes concurrent `contextd serve` start-ups migrate once.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.db.migrate import check_encoding, database_url_for_alembic
from app.db.models import Base

MIGRATION_LOCK_ID = 0x636F6E7478  # "contx": any constant shared by every contextd process

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    check_encoding(connection)  # before any table is made in a database contextd cannot use
    context.configure(
        connection=connection, target_metadata=target_metadata, compare_server_default=True
    )
    connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": MIGRATION_LOCK_ID})
    try:
        with context.begin_transaction():
            context.run_migrations()
    finally:
        connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": MIGRATION_LOCK_ID})
        connection.commit()


async def _run_async() -> None:
    engine = create_async_engine(database_url_for_alembic(config))
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=database_url_for_alembic(config), target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_async())
