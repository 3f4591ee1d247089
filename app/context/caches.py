"""The caches of context assembly that outlive one call, owned by one object.

An agent asks for a payload before every model call, and most of what a call
works out is what the previous call of its session worked out: the same rows,
the same previews and cuts, the same counts of the system prompt and tools.
`Caches` holds those results. The app makes one (`Services.caches`, app/api/lanes.py)
and every payload of the process shares it; an assembly given none works with
an empty one that nothing else sees. A test or a benchmark that wants a first
call makes a `Caches()` of its own: there is no global state to clear.

Every entry is a function of its key alone (a message object by identity, a text
by value, a row by seq, message id and creation time within its tenant and
session), so one object serves every session and tenant and nothing is ever
invalidated, only evicted when a bound is reached.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from app.context.lru import LRU
from app.context.memo import Memos
from app.core.conversation import LoggedMessage

# Bodies of the windows read last, per session (app/context/repository.py): an agent's
# window barely moves between two calls, so most of the bytes a read would carry (and
# decode) are the same as last time. Bounded by the tokens held (about 4 bytes each).
WINDOW_CACHE_TOKENS = 4_000_000
WINDOW_CACHE_SESSIONS = 1024

# Token counts of a payload's head (app/context/counts.py), bounded by the characters held.
COUNT_ENTRIES = 4096
COUNT_CHARS = 16_000_000

# Previews and cuts (app/context/preview.py), asked for on every call of an agent.
PREVIEW_ENTRIES = 2048


@dataclass(frozen=True, slots=True)
class KnownRows:
    """The rows of a session's last read: every seq in `lo..hi`, plus `extra` (older)."""

    rows: dict[int, LoggedMessage]
    lo: int
    hi: int
    extra: list[int]

    @classmethod
    def of(cls, rows: dict[int, LoggedMessage]) -> KnownRows:
        if not rows:
            return NOTHING_KNOWN
        hi = lo = max(rows)
        while lo - 1 in rows:
            lo -= 1
        # Older rows come back from the window statement only as user or pinned messages
        # (a layout's other old units are read by seqs, which name the known ones
        # themselves): the array every row of the window is tested against stays short.
        extra = [s for s, m in rows.items() if s < lo and (m.role == "user" or m.pinned)]
        return cls(rows, lo, hi, extra)

    @property
    def weight(self) -> int:
        return sum(m.token_count for m in self.rows.values()) + len(self.rows)


NOTHING_KNOWN = KnownRows({}, 0, -1, [])


class Caches:
    """What assembly keeps between calls: window rows per session, per-message results,
    previews and cuts, head counts."""

    __slots__ = ("counts", "memos", "previews", "windows")

    def __init__(self) -> None:
        self.windows: LRU[tuple[str, str], KnownRows] = LRU(
            WINDOW_CACHE_SESSIONS, max_weight=WINDOW_CACHE_TOKENS, weigh=lambda k: k.weight
        )
        self.memos = Memos()
        self.previews: LRU[tuple[Any, ...], tuple[dict[str, Any], int]] = LRU(PREVIEW_ENTRIES)
        self.counts: LRU[Hashable, tuple[int, int]] = LRU(
            COUNT_ENTRIES, max_weight=COUNT_CHARS, weigh=lambda entry: entry[1]
        )
