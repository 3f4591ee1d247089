"""A connection pool whose waiters are served in the order they came.

SQLAlchemy's `AsyncAdaptedQueuePool` keeps its idle connections in an
`asyncio.Queue`. A connection coming back wakes the first waiter but stays in
the queue until that waiter runs, one pass of the event loop later; any request
that reaches the pool meanwhile takes it without waiting (the adapter tries
`get_nowait` first), and the waiter that was woken finds the queue empty and
queues again at the back. On a saturated loop a pass takes tens of
milliseconds, so most returns were taken that way. In three instrumented runs
of the 200-agent load bench (2 processes of 10 connections, ~70 requests
waiting per process) 62-69% of the checkouts that did not wait took a
connection while others were waiting, a waiter lost its turn 1.2-1.3 times on
average and up to 8-10 times, and the wait's tail ran into the 5 s pool timeout
(p99 4.1-5.0 s; 23-90 retried 503s) while the mean wait was 0.5-0.6 s.

Here a returned connection is handed to the first waiter itself: nobody else
can take it, and a request waits for the requests ahead of it only. A wait is
then about the work queued in front of it, so the pool timeout's 503 answers a
backlog of that many seconds (genuine overload), not bad luck.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import Any

from sqlalchemy.pool import AsyncAdaptedQueuePool, ConnectionPoolEntry
from sqlalchemy.util import queue as sa_queue
from sqlalchemy.util.concurrency import await_


class FairQueue(sa_queue.AsyncAdaptedQueue[ConnectionPoolEntry]):
    """First come, first served: an item put while someone waits goes to the first waiter.

    Invariant: idle items and live waiters never coexist, so `get_nowait` (which the
    pool uses while it still opens new connections, and on dispose) cannot jump
    the line either.
    """

    def __init__(self, maxsize: int = 0, use_lifo: bool = False) -> None:
        super().__init__(maxsize, use_lifo)
        self._items: deque[ConnectionPoolEntry] = deque()
        self._waiters: deque[asyncio.Future[ConnectionPoolEntry]] = deque()

    def empty(self) -> bool:
        return not self._items

    def full(self) -> bool:
        return 0 < self.maxsize <= len(self._items)

    def qsize(self) -> int:
        return len(self._items)

    def put_nowait(self, item: ConnectionPoolEntry) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(item)
                return
        if self.full():
            raise sa_queue.Full()
        self._items.append(item)

    def put(self, item: ConnectionPoolEntry, block: bool = True, timeout: Any = None) -> None:
        # The pool puts without blocking (a full queue closes the connection instead).
        self.put_nowait(item)

    def get_nowait(self) -> ConnectionPoolEntry:
        if not self._items:
            raise sa_queue.Empty()
        return self._items.pop() if self.use_lifo else self._items.popleft()

    def get(self, block: bool = True, timeout: float | None = None) -> ConnectionPoolEntry:
        if self._items or not block:
            return self.get_nowait()
        item: ConnectionPoolEntry = await_(self._wait(timeout))
        return item

    async def _wait(self, limit_s: float | None) -> ConnectionPoolEntry:
        waiter: asyncio.Future[ConnectionPoolEntry] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(limit_s):
                return await waiter
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                # Handed over just as the wait timed out or the request was cancelled:
                # pass it on, or the connection would be lost to the pool.
                self.put_nowait(waiter.result())
            else:
                waiter.cancel()
                with contextlib.suppress(ValueError):  # a put may have dropped it already
                    self._waiters.remove(waiter)
            if isinstance(exc, TimeoutError):
                raise sa_queue.Empty() from exc
            raise


class FairPool(AsyncAdaptedQueuePool):
    """`AsyncAdaptedQueuePool` on a `FairQueue`."""

    _queue_class = FairQueue
