"""Migration 0015 marks the search vectors stored before it whose positions PostgreSQL
did not all keep (app/index/lexemes.py POSITIONS_CUT), so that an identifier in the
later lines of an old long tool output is found as in a new one."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncpg
from alembic import command

from app.core.settings import load_settings
from app.db.migrate import alembic_config, run_migrations
from tests.support.apps import app_client
from tests.support.databases import plain_url
from tests.support.messages import call, result, user
from tests.support.search import append, lint_output, search, seqs

MARKED = "SELECT seq FROM messages WHERE session_id = $1 AND search @@ '''~cut'''::tsquery"


async def test_migration_0015_marks_the_long_outputs_stored_before(
    make_database: Callable[[], str],
) -> None:
    url = make_database()
    sid = "cut-migrated"
    settings = load_settings(run_compactions_in_process=False)
    async with app_client(settings, url) as c:
        await append(c, sid, user("lint it"), call("c1", "lint"), result("c1", lint_output(300)))
    conn = await asyncpg.connect(plain_url(url))
    try:
        assert [r["seq"] for r in await conn.fetch(MARKED, sid)] == [3]  # appends mark it
        # Back to 0014 for real (its downgrade takes the marks away), then forward again.
        await asyncio.to_thread(
            command.downgrade, alembic_config(url), "0014_summary_carries_pinned"
        )
        assert await conn.fetch(MARKED, sid) == []
        async with app_client(settings, url) as c:  # unmarked: only the phrase of parts
            assert seqs(await search(c, sid, "special_handler.py")) == []
        await asyncio.to_thread(run_migrations, url)
        assert [r["seq"] for r in await conn.fetch(MARKED, sid)] == [3]
    finally:
        await conn.close()
    async with app_client(settings, url) as c:
        assert seqs(await search(c, sid, "special_handler.py")) == [3]
        assert seqs(await search(c, sid, "src/app/special_handler.py")) == [3]
