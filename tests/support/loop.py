"""How the event loop fares while some work runs: its turns and the gaps between them."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LoopTurns:
    took: float  # seconds the work took
    turns: int  # turns the loop gave another task meanwhile
    longest_gap: float  # the longest the loop left that task waiting, in seconds


async def watch_loop(work: Awaitable[T]) -> tuple[T, LoopTurns]:
    """Awaits `work` while a task that only yields records each turn of the loop."""
    stamps: list[float] = []

    async def turn() -> None:
        while True:
            stamps.append(time.perf_counter())
            await asyncio.sleep(0)

    ticker = asyncio.create_task(turn())
    await asyncio.sleep(0)
    start = time.perf_counter()
    result = await work
    took = time.perf_counter() - start
    await asyncio.sleep(0)  # the turn that ends the last gap
    ticker.cancel()
    during = [t for t in stamps if t >= start]
    gaps = [b - a for a, b in itertools.pairwise([start, *during])]
    return result, LoopTurns(took, len(during), max(gaps, default=took))
