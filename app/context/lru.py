"""A small thread-safe LRU map for per-process caches of pure results."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most `size` entries and, with `weigh`, at most `max_weight` in all.

    An entry heavier than `max_weight` on its own is not kept.
    """

    def __init__(
        self,
        size: int,
        *,
        max_weight: int | None = None,
        weigh: Callable[[V], int] | None = None,
    ) -> None:
        self._size = size
        self._max_weight = max_weight
        self._weigh = weigh
        self._weight = 0
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            item = self._items.get(key)
            if item is None:
                return None
            self._items.move_to_end(key)
            return item[0]

    def put(self, key: K, value: V) -> None:
        weight = self._weigh(value) if self._weigh is not None else 0
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._weight -= old[1]
            if self._max_weight is not None and weight > self._max_weight:
                return
            self._items[key] = (value, weight)
            self._weight += weight
            while len(self._items) > self._size or (
                self._max_weight is not None and self._weight > self._max_weight
            ):
                _, (_, w) = self._items.popitem(last=False)
                self._weight -= w

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._weight = 0
