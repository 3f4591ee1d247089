"""Per-message results that outlive one assembly, for as long as the message object does.

An agent asks for a payload on every model call, and the repository hands
back the very same `LoggedMessage` objects for the rows it read last time
(`app/context/repository.py`). What assembly derives from one message — is it
sent as logged, its preview or cut and their exact token counts, the signals
in its text — depends only on that message and the parameters in the key, so
it is computed once per message object instead of once per call.

Entries are found by the object's `id()` and hold a strong reference to the
object, checked with `is`: while an entry exists its object cannot be
collected, so its id cannot be reused by another object, and a hit is always
for the very object asked about. A message is immutable (a frozen dataclass,
and nothing in assembly mutates a body), so its results stay true. Fresh
objects (every call of a test, a new row) simply start empty. Bounded by
entries and by the tokens of the messages held.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from app.core.conversation import LoggedMessage

MEMO_MESSAGES = 32_768
MEMO_TOKENS = 4_000_000

T = TypeVar("T")


class Memo:
    __slots__ = ("_results", "message")

    def __init__(self, message: LoggedMessage) -> None:
        self.message = message
        self._results: dict[Hashable, Any] = {}

    def get(self, key: Hashable, compute: Callable[[], T]) -> T:
        """The result stored under `key`, computed (once) by `compute()` if absent.

        `key` must name everything besides the message that the result depends on.
        """
        try:
            result: T = self._results[key]
        except KeyError:
            result = self._results[key] = compute()
        return result


class Memos:
    """The `Memo` of every message object assembly has seen, up to a bound (one per
    `Caches`, app/context/caches.py)."""

    __slots__ = ("_held_tokens", "_memos")

    def __init__(self) -> None:
        # A plain dict, not the LRU: it is consulted for every message of every call, and
        # GIL-atomic dict operations need no lock. When it is full it is emptied at once
        # (the next call of each session refills it), which keeps the bound without any
        # bookkeeping per hit.
        self._memos: dict[int, Memo] = {}
        self._held_tokens = 0

    def of(self, message: LoggedMessage) -> Memo:
        key = id(message)
        memo = self._memos.get(key)
        if memo is not None and memo.message is message:
            return memo
        if len(self._memos) >= MEMO_MESSAGES or self._held_tokens > MEMO_TOKENS:
            self._memos.clear()
            self._held_tokens = 0
        memo = self._memos[key] = Memo(message)
        self._held_tokens += message.token_count
        return memo
