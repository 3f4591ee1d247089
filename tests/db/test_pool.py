"""The pool. Pooled connections broken behind the pool's back (a database
restart, an idle timeout in a proxy): an idle one is pinged and replaced before
a request sees it; one that just worked is trusted, and if it fails after all,
the request gets a retryable error and the pool starts afresh. Requests that
wait for a connection get one in the order they came, or a retryable error
after the pool timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.util import greenlet_spawn
from sqlalchemy.util import queue as sa_queue

from app.db.driver_errors import is_unavailable
from app.db.engine import create_engine
from app.db.pool import FairPool, FairQueue
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


# -- waiting for a connection: first come, first served ---------------------------


async def _checkout(engine: AsyncEngine) -> Any:
    return await greenlet_spawn(engine.sync_engine.pool.connect)


async def _checkin(fairy: Any) -> None:
    await greenlet_spawn(fairy.close)


async def test_waiters_get_connections_in_the_order_they_came(
    make_database: Callable[[], str],
) -> None:
    """A connection coming back goes to the request that waited longest, not to one that
    reaches the pool before the woken waiter runs (SQLAlchemy's own queue let it: on a
    saturated server that made some requests lose their turn again and again until the
    pool timeout, while the mean wait was a tenth of it)."""
    url = make_database()
    engine = create_engine(url, pool_size=1, pool_timeout_s=10)  # 2 connections
    served: list[str] = []

    async def request(name: str) -> None:
        fairy = await _checkout(engine)
        served.append(name)
        await asyncio.sleep(0.01)
        await _checkin(fairy)

    try:
        held = [await _checkout(engine), await _checkout(engine)]
        first = asyncio.create_task(request("first"))
        second = asyncio.create_task(request("second"))
        await asyncio.sleep(0.05)  # both wait for a connection now
        # A newcomer scheduled before the connection comes back runs before the woken
        # waiter does: the moment in which it could take the connection first.
        late = asyncio.create_task(request("late"))
        await _checkin(held.pop())
        await asyncio.wait_for(asyncio.gather(first, second, late), 10)
        assert served == ["first", "second", "late"]
    finally:
        for fairy in held:
            await _checkin(fairy)
        await engine.dispose()


async def test_a_wait_longer_than_the_pool_timeout_is_unavailable(
    make_database: Callable[[], str],
) -> None:
    url = make_database()
    engine = create_engine(url, pool_size=1, pool_timeout_s=0.2)
    try:
        held = [await _checkout(engine), await _checkout(engine)]
        with pytest.raises(sa_exc.TimeoutError) as waited:
            await _checkout(engine)
        assert is_unavailable(waited.value)  # a 503 with Retry-After
        await _checkin(held.pop())
        await _checkin(await _checkout(engine))  # the pool still works after the timeout
        await _checkin(held.pop())
        pool = engine.sync_engine.pool
        assert isinstance(pool, FairPool)
        assert pool.checkedout() == 0
    finally:
        await engine.dispose()


async def test_a_connection_handed_to_a_waiter_that_gives_up_goes_to_the_next() -> None:
    """Handed over in the same loop pass as the waiter's timeout or cancellation: the
    waiter never uses it, so it must not be lost to the pool."""
    queue = FairQueue(maxsize=2)
    item: Any = object()
    gave_up = asyncio.create_task(queue._wait(None))
    nxt = asyncio.create_task(queue._wait(None))
    await asyncio.sleep(0)  # both are waiting
    queue.put_nowait(item)  # to the first waiter...
    gave_up.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await gave_up
    assert await asyncio.wait_for(nxt, 1) is item
    assert queue.qsize() == 0


async def test_a_waiter_that_timed_out_leaves_the_line() -> None:
    queue = FairQueue(maxsize=1)
    item: Any = object()
    with pytest.raises(sa_queue.Empty):
        await queue._wait(0.01)
    queue.put_nowait(item)  # nobody waits any more: the item stays for the next get
    assert queue.get_nowait() is item
