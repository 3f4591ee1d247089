"""Messages stored before search existed (migration 0012) are found after an upgrade.

A migration imports no live code, so 0012 only adds the column: the rows stored before
it keep no vector until every command that migrates indexes them, after the migrations
(app/index/unindexed.py), with the vector an append writes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import asyncpg
from alembic import command

from app.core.settings import load_settings
from app.core.tokens.counter import get_counter
from app.db.migrate import alembic_config, run_migrations
from app.index.lexemes import message_tsvector, session_lexeme
from app.index.unindexed import index_unindexed
from tests.support.apps import app_client
from tests.support.databases import plain_url
from tests.support.messages import user
from tests.support.search import append, search, seqs

REPO = Path(__file__).resolve().parents[2]

OLD: list[dict[str, Any]] = [
    user("Please fix the failing import in src/app/models.py"),  # 1
    {"role": "assistant", "content": "The run failed with code HXDUBJ: total mismatch"},  # 2
    user("数据库连接失败了，请检查配置文件。"),  # 3
    {"role": "assistant", "content": "Die Datenbankverbindung ist fehlgeschlagen, Größe 12."},
    user("and getUserName returns None in snake_case_name"),  # 5
]
UNINDEXED = "SELECT count(*) FROM messages WHERE search IS NULL"


async def store_as_before_0012(conn: asyncpg.Connection, sid: str) -> None:
    """What a server before 0012 wrote for an append of OLD to a new session: the
    session's counters and the rows, no vector (it had no column for one)."""
    counter = get_counter(None)
    counts = [counter.count_message(m) for m in OLD]
    roles = Counter(m["role"] for m in OLD)
    async with conn.transaction():
        await conn.execute(
            "INSERT INTO sessions (tenant_id, id, tokenizer, last_seq, count_user,"
            " count_assistant, context_tokens) VALUES ('default', $1, $2, $3, $4, $5, $6)",
            sid,
            counter.name,
            len(OLD),
            roles["user"],
            roles["assistant"],
            sum(counts),
        )
        running = 0
        for seq, (body, n) in enumerate(zip(OLD, counts, strict=True), start=1):
            running += n
            await conn.execute(
                "INSERT INTO messages (tenant_id, session_id, seq, message_id, role, body,"
                " token_count, context_tokens_through)"
                " VALUES ('default', $1, $2, $3, $4, $5::jsonb, $6, $7)",
                sid,
                seq,
                f"msg_{sid}_{seq}",
                body["role"],
                json.dumps(body, ensure_ascii=False),
                n,
                running,
            )


def contextd_migrate(url: str) -> str:
    env = {**os.environ, "CONTEXTD_DATABASE_URL": url, "CONTEXTD_LOG_FORMAT": "json"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "migrate"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


async def test_messages_stored_before_0012_are_found_after_contextd_migrate(
    make_database: Callable[[], str],
) -> None:
    url = make_database()
    sid = "stored-before-recall"
    settings = load_settings(run_compactions_in_process=False)
    conn = await asyncpg.connect(plain_url(url))
    try:
        await asyncio.to_thread(command.downgrade, alembic_config(url), "0011_summary_class_tokens")
        await store_as_before_0012(conn, sid)
        # The migrations alone leave them without a vector, and search without them.
        await asyncio.to_thread(run_migrations, url)
        assert await conn.fetchval(UNINDEXED) == len(OLD)
        async with app_client(settings, url) as c:
            assert seqs(await search(c, sid, "HXDUBJ")) == []

        said = await asyncio.to_thread(contextd_migrate, url)
        assert "indexed the messages stored before search" in said
        assert await conn.fetchval(UNINDEXED) == 0
        # The vector an append writes (lexemes() as text, tests/index/test_vector_stored.py).
        key = session_lexeme("default", sid)
        rows = await conn.fetch(
            "SELECT body, search::text AS v FROM messages WHERE session_id = $1 ORDER BY seq", sid
        )
        for r in rows:
            want = message_tsvector(json.loads(r["body"]), key)
            assert r["v"] == await conn.fetchval("SELECT $1::text::tsvector::text", want)
    finally:
        await conn.close()
    async with app_client(settings, url) as c:
        assert seqs(await search(c, sid, "HXDUBJ")) == [2]
        assert seqs(await search(c, sid, "src/app/models.py")) == [1]
        assert seqs(await search(c, sid, "配置文件")) == [3]
        assert seqs(await search(c, sid, "UserName")) == [5]


async def test_indexing_goes_by_batches_once_and_writes_no_row_that_has_a_vector(
    make_database: Callable[[], str],
) -> None:
    url = make_database()
    settings = load_settings(run_compactions_in_process=False)
    async with app_client(settings, url) as c:
        await append(c, "appended", user("code HXDUBJ, appended with its vector"))
    conn = await asyncpg.connect(plain_url(url))
    try:
        await store_as_before_0012(conn, "old")
        version = "SELECT xmin::text FROM messages WHERE session_id = 'appended'"
        appended = await conn.fetchval(version)
        assert await asyncio.to_thread(index_unindexed, url, 2) == len(OLD)
        assert await conn.fetchval(UNINDEXED) == 0
        assert await asyncio.to_thread(index_unindexed, url, 2) == 0
        assert await conn.fetchval(version) == appended  # never rewritten
    finally:
        await conn.close()
    async with app_client(settings, url) as c:
        assert seqs(await search(c, "old", "HXDUBJ")) == [2]
        assert seqs(await search(c, "appended", "HXDUBJ")) == [1]
