"""What Anthropic's prompt cache would bill for a stream of payloads in contextd's
`format=anthropic`, from the rules its documentation states.

- A request is tools, then system blocks, then the messages' content blocks. A
  `cache_control` breakpoint writes a cache entry for the prefix that ends with its
  block, when that prefix is at least `MIN_CACHEABLE` tokens.
- A request reads the longest prefix with an entry that ends at a block boundary no
  more than `LOOKBACK` blocks before one of its breakpoints (at it included).
- Billing: tokens read at 0.1x, tokens from there to the last breakpoint written at
  1.25x (the 5-minute entry), the rest at 1x. Entries outlive the calls of one agent
  loop here: the TTL is not modelled.

Tokens per block are counted on the block's JSON, as the payload's tokens are
elsewhere in the benches: the same count for every placement compared, not the
provider's own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MIN_CACHEABLE = 1024  # Claude Sonnet; Haiku and Opus take more
LOOKBACK = 20
READ_PRICE = 0.1
WRITE_PRICE = 1.25

Count = Callable[[str], int]


@dataclass
class Billed:
    read: int = 0
    written: int = 0
    uncached: int = 0

    @property
    def total(self) -> int:
        return self.read + self.written + self.uncached

    def cost(self) -> float:
        """Relative to sending every token uncached."""
        if not self.total:
            return 0.0
        return (self.uncached + WRITE_PRICE * self.written + READ_PRICE * self.read) / self.total

    def add(self, other: Billed) -> None:
        self.read += other.read
        self.written += other.written
        self.uncached += other.uncached


def blocks(rendered: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(where, block) in request order; `where` names the block's place (the tools, the
    system, or a message's index and role), which is part of the prefix too."""
    out: list[tuple[str, dict[str, Any]]] = [("tools", dict(t)) for t in rendered["tools"]]
    out += [("system", dict(b)) for b in rendered["system"]]
    for i, message in enumerate(rendered["messages"]):
        out += [(f"{i}:{message['role']}", dict(b)) for b in message["content"]]
    return out


@dataclass
class Prepared:
    """A request's prefixes (a digest per block boundary) and the tokens up to each."""

    prefixes: list[bytes]
    ends: list[int]


@dataclass
class Counter:
    """Tokens per block text, memoised: consecutive payloads repeat most blocks."""

    count: Count
    _memo: dict[str, int] = field(default_factory=dict)

    def prepare(self, request: Sequence[tuple[str, dict[str, Any]]]) -> Prepared:
        digest = hashlib.sha256()
        prefixes: list[bytes] = []
        ends: list[int] = []
        total = 0
        for where, block in request:
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            text = json.dumps(plain, sort_keys=True, ensure_ascii=False)
            digest.update(f"{where}\0{text}\0".encode())
            prefixes.append(digest.copy().digest())
            n = self._memo.get(text)
            if n is None:
                n = self._memo[text] = self.count(text)
            total += n
            ends.append(total)
        return Prepared(prefixes, ends)


@dataclass
class Cache:
    """One stream's entries (one session, method and budget)."""

    entries: set[bytes] = field(default_factory=set)

    def send(self, request: Prepared, marks: Sequence[int]) -> Billed:
        """Bill one request whose blocks at `marks` carry breakpoints; keep its entries."""
        prefixes, ends = request.prefixes, request.ends
        total = ends[-1] if ends else 0
        marks = sorted(set(marks))
        read = 0
        for mark in marks:
            for j in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if prefixes[j] in self.entries:
                    read = max(read, ends[j])
                    break
        cacheable = [m for m in marks if ends[m] >= MIN_CACHEABLE]
        written = max(0, ends[cacheable[-1]] - read) if cacheable else 0
        self.entries.update(prefixes[m] for m in cacheable)
        return Billed(read=read, written=written, uncached=total - read - written)


def marked(request: Sequence[tuple[str, dict[str, Any]]]) -> list[int]:
    """The blocks that carry a breakpoint."""
    return [i for i, (_, block) in enumerate(request) if "cache_control" in block]


def one_at(request: Sequence[tuple[str, dict[str, Any]]], stable_blocks: int) -> list[int]:
    """contextd's placement before 2026-11-29: one breakpoint, on the last block of the
    stable prefix (`stable_blocks` blocks from the start; tools count)."""
    return [stable_blocks - 1] if stable_blocks > 0 else []
