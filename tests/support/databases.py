"""PostgreSQL URLs and admin statements, for the test fixtures and the benchmarks.

The app speaks SQLAlchemy's `postgresql+asyncpg://`; asyncpg itself, pgbench and
`CREATE DATABASE` want the plain spelling and a database of their own.
"""

from __future__ import annotations

import asyncpg

from app.db.engine import normalise_url


def plain_url(url: str) -> str:
    """asyncpg's own spelling of any URL the app accepts (`postgres://`, `+asyncpg`, ...)."""
    return normalise_url(url).replace("postgresql+asyncpg://", "postgresql://", 1)


def with_database(url: str, name: str) -> str:
    """The same server and options, database `name`."""
    head, sep, query = url.partition("?")
    return f"{head.rsplit('/', 1)[0]}/{name}{sep}{query}"


async def admin(url: str, sql: str) -> None:
    """Run `sql` on the server's `postgres` database (CREATE or DROP DATABASE)."""
    conn = await asyncpg.connect(with_database(plain_url(url), "postgres"), timeout=30)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()
