"""Pooled connections broken behind the pool's back (a database restart, an
idle timeout in a proxy): an idle one is pinged and replaced before a request
sees it; one that just worked is trusted, and if it fails after all, the
request gets a retryable error and the pool starts afresh."""

from __future__ import annotations

from collections.abc import Callable

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.db import create_engine, is_unavailable
from tests.support.databases import plain_url


async def _kill_backends(url: str) -> int:
    admin = await asyncpg.connect(plain_url(url))
    try:
        killed = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'contextd'"
        )
    finally:
        await admin.close()
    return int(killed)


async def _backend(engine: object) -> int:
    async with engine.connect() as conn:  # type: ignore[attr-defined]
        return int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())


async def test_an_idle_connection_broken_meanwhile_is_replaced_unseen(
    make_database: Callable[[], str],
) -> None:
    url = make_database()
    engine = create_engine(url, pool_size=2, ping_after_idle_s=0.0)
    try:
        before = await _backend(engine)
        assert await _kill_backends(url) == 1
        after = await _backend(engine)  # no error: the ping found the dead one
        assert after != before
    finally:
        await engine.dispose()


async def test_a_busy_connection_is_trusted_and_a_failure_resets_the_pool(
    make_database: Callable[[], str],
) -> None:
    url = make_database()
    engine = create_engine(url, pool_size=2, ping_after_idle_s=3600)
    try:
        before = await _backend(engine)
        assert await _kill_backends(url) == 1
        with pytest.raises(DBAPIError) as failed:
            await _backend(engine)
        assert is_unavailable(failed.value)  # answered as 503 with Retry-After
        assert await _backend(engine) != before
    finally:
        await engine.dispose()
