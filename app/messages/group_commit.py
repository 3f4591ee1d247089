"""Group commit: appends of different sessions that arrive together share a transaction.

An append alone is a small transaction whose fixed costs (a pooled connection
checked out and in, BEGIN, COMMIT, a round trip each, PostgreSQL's per-transaction
work) were more of a busy server's CPU than the append itself. Here appends queue;
at most `lanes` groups are written at once, each taking up to `max_size` queued
appends, so under load a group is whatever arrived while the last one was written,
and a lone append on an idle server is written at once, alone.

Each append is acknowledged only after its own group committed (SPEC §6: an
acknowledged write is durable). Two appends of one session never share a group,
nor run in two groups of this process at once: the second waits for the next
group, so seqs stay in arrival order per session as they were. What a group could
not take (its writer returns None for it) goes back to its caller, which appends
it alone, the way that names every problem.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

# Concurrent groups per process: with one, the event loop idles while PostgreSQL
# writes; beyond a few, groups only get smaller (bench/throughput.py).
LANES = 3
MAX_SIZE = 64


@dataclass(slots=True)
class _Waiting(Generic[T, R]):
    key: Hashable
    item: T
    done: asyncio.Future[R | None] = field(default_factory=lambda: _future())


def _future() -> asyncio.Future[Any]:
    return asyncio.get_running_loop().create_future()


class GroupCommit(Generic[T, R]):
    """Batches `submit`ted items into calls of `write(items) -> results`, in order.

    `write` returns one result per item, None for an item the group did not take
    (its caller then writes it alone), or raises: every caller of the group gets
    the error.
    """

    def __init__(
        self,
        write: Callable[[list[T]], Awaitable[list[R | None]]],
        lanes: int = LANES,
        max_size: int = MAX_SIZE,
    ) -> None:
        self._write = write
        self._lanes = lanes
        self._max_size = max_size
        self._queue: deque[_Waiting[T, R]] = deque()
        self._writing: set[Hashable] = set()  # keys of the groups being written
        self._running = 0
        self.writers: set[asyncio.Task[None]] = set()  # the tasks writing groups
        self.groups = 0  # groups written, and the appends in them: for the bench
        self.items = 0

    async def submit(self, key: Hashable, item: T) -> R | None:
        waiting: _Waiting[T, R] = _Waiting(key, item)
        self._queue.append(waiting)
        if self._running < self._lanes:
            # A task, not this request's own coroutine: whatever else arrives before
            # the loop runs it joins the group, and no request waits for others'. In a
            # context of its own: it writes for many requests, and would otherwise log
            # with this one's request and session ids (structlog's contextvars).
            self._running += 1
            task = asyncio.get_running_loop().create_task(
                self._drain(), context=contextvars.Context()
            )
            self.writers.add(task)
            task.add_done_callback(self.writers.discard)
        return await waiting.done

    async def _drain(self) -> None:
        try:
            while group := self._take():
                await self._run(group)
        finally:
            self._running -= 1

    def _take(self) -> list[_Waiting[T, R]]:
        """Up to max_size queued items, one per key, none of a key being written."""
        group: list[_Waiting[T, R]] = []
        keys: set[Hashable] = set()
        held: list[_Waiting[T, R]] = []
        while self._queue and len(group) < self._max_size:
            waiting = self._queue.popleft()
            if waiting.key in keys or waiting.key in self._writing:
                held.append(waiting)
            else:
                keys.add(waiting.key)
                group.append(waiting)
        # Held items go back first, in their order: the next group of their key takes
        # them. The lane writing that key loops on after its group, so none is stranded.
        self._queue.extendleft(reversed(held))
        self._writing |= keys
        return group

    async def _run(self, group: list[_Waiting[T, R]]) -> None:
        try:
            results = await self._write([w.item for w in group])
        except asyncio.CancelledError:
            for waiting in group:
                waiting.done.cancel()
            raise
        except Exception as exc:
            # The writer hands back (None) what it knows was rolled back; an error that
            # reaches here may have come after the commit was sent, so the callers get
            # it, as an append alone would, rather than write again what may be stored.
            for waiting in group:
                if not waiting.done.done():
                    waiting.done.set_exception(exc)
            return
        finally:
            self._writing.difference_update(w.key for w in group)
            self.groups += 1
            self.items += len(group)
        for waiting, result in zip(group, results, strict=True):
            if not waiting.done.done():
                waiting.done.set_result(result)

    async def close(self) -> None:
        """Wait for the groups being written (a server stopping)."""
        while self.writers:
            await asyncio.gather(*self.writers, return_exceptions=True)
