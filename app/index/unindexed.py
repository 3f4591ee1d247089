"""Search vectors for the messages stored before search indexed them.

Migration 0012 added `messages.search`; the rows stored before it have none (NULL),
and search does not find them until this gives them the vector an append would have
written (`message_vector`). A migration cannot: what a message is indexed by is live
code (app/index/lexemes.py), and a migration running it would do something else each
time the index changed. So every command that migrates (app/cli.py) runs `upgrade`:
the migrations, then this. With nothing left to index it costs one probe of
`ix_messages_unindexed`, a partial index of just these rows.

Rows are read in batches by primary key and each batch written by one statement, so
no statement holds more than a batch of row locks. Only rows still without a vector
are written: a run that stopped halfway, or one run again, indexes each row once.
Processes starting at once take turns, as they do for the migrations.
"""

from __future__ import annotations

import asyncio

import structlog

from app.db.database import Database, Driver
from app.db.engine import create_engine, session_factory
from app.db.migrate import run_migrations
from app.db.scope import session_sql
from app.index.lexemes import session_lexeme
from app.index.vector import message_vector

BATCH = 2000
# Any constant shared by every contextd process (not the migrations' own: env.py).
LOCK_ID = 0x636F6E7469

log = structlog.get_logger("contextd")

_NEXT = (
    "SELECT tenant_id, session_id, seq, body FROM messages"
    " WHERE search IS NULL AND (tenant_id, session_id, seq) > ($1, $2, $3)"
    " ORDER BY tenant_id, session_id, seq LIMIT $4"
)
_WRITE = (
    "UPDATE messages AS m SET search = v.search"
    " FROM unnest($1::text[], $2::text[], $3::bigint[], $4::tsvector[]) AS v(t, s, q, search)"
    f" WHERE {session_sql('m', 'v.t', 'v.s')} AND m.seq = v.q AND m.search IS NULL"
)


def upgrade(url: str) -> int:
    """The schema to head, then every message indexed; returns how many it indexed.
    Synchronous (each step drives its own event loop): call it from a thread."""
    run_migrations(url)
    indexed = index_unindexed(url)
    if indexed:
        log.info("indexed the messages stored before search", messages=indexed)
    return indexed


def index_unindexed(url: str, batch: int = BATCH) -> int:
    """Index every message that has no search vector; returns how many it indexed."""
    return asyncio.run(_index_at(url, batch))


async def _index_at(url: str, batch: int) -> int:
    engine = create_engine(url, pool_size=1)
    try:
        async with Database(session_factory(engine)).driver() as conn:
            return await _index(conn, batch)
    finally:
        await engine.dispose()


async def _index(conn: Driver, batch: int) -> int:
    # The vectors go in binary, through the codec every engine registers (app/db/tsvector.py).
    await conn.execute("SELECT pg_advisory_lock($1)", LOCK_ID)
    try:
        done = 0
        after: tuple[str, str, int] = ("", "", 0)
        while rows := await conn.fetch(_NEXT, *after, batch):
            vectors = [
                message_vector(r["body"], session_lexeme(r["tenant_id"], r["session_id"]))
                for r in rows
            ]
            status = await conn.execute(
                _WRITE,
                [r["tenant_id"] for r in rows],
                [r["session_id"] for r in rows],
                [r["seq"] for r in rows],
                vectors,
            )
            done += int(status.rsplit(" ", 1)[-1])
            after = (rows[-1]["tenant_id"], rows[-1]["session_id"], rows[-1]["seq"])
        return done
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", LOCK_ID)
