"""A database not encoded UTF8 is refused at start, in one line naming the database and
its encoding, before any table is made in it (docs/reliability.md). In a LATIN1
database the first Chinese message was a 500 after a clean start; in a SQL_ASCII one
text was stored unchecked."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from tests.support.databases import admin, with_database
from tests.support.ports import free_port
from tests.support.processes import REPO


@pytest.fixture(scope="module", params=["SQL_ASCII", "LATIN1"])
def encoded(request: pytest.FixtureRequest, database_server: str) -> Iterator[tuple[str, str]]:
    encoding = str(request.param)
    name = f"contextd_test_{encoding.lower()}_{uuid.uuid4().hex[:8]}"
    asyncio.run(
        admin(
            database_server,
            f"CREATE DATABASE \"{name}\" ENCODING '{encoding}' "
            "LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0",
        )
    )
    try:
        yield with_database(database_server, name), encoding
    finally:
        asyncio.run(admin(database_server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _refused(url: str, *args: str) -> str:
    env = {**os.environ, "CONTEXTD_DATABASE_URL": url, "CONTEXTD_LOG_FORMAT": "json"}
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done.stderr


async def _tables(url: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return [r["tablename"] for r in rows]
    finally:
        await conn.close()


@pytest.mark.parametrize(
    "args",
    [["migrate"], ["serve", "--workers", "1", "--port", "0"], ["worker", "--port", "0"]],
    ids=["migrate", "serve", "worker"],
)
def test_a_database_not_encoded_utf8_is_refused_at_start(
    encoded: tuple[str, str], args: list[str]
) -> None:
    url, encoding = encoded
    if args[0] == "worker":
        args = ["worker", "--port", str(free_port())]
    err = _refused(url, *args)
    name = make_url(url).database
    assert "cannot use the database" in err, err
    assert f"database '{name}' is encoded {encoding}, not UTF8" in err, err
    assert "createdb -E UTF8 -T template0" in err, err
    assert asyncio.run(_tables(url)) == []  # refused before the first migration
