"""bench/anthropic_cache.py: the model of Anthropic's prompt cache the agent-loop bench
bills `format=anthropic` payloads with."""

from __future__ import annotations

import json
from typing import Any

from bench.anthropic_cache import (
    LOOKBACK,
    MIN_CACHEABLE,
    Billed,
    Cache,
    Counter,
    blocks,
    marked,
    one_at,
)


def request(*texts: str, mark: tuple[int, ...] = ()) -> list[tuple[str, dict[str, Any]]]:
    content: list[dict[str, Any]] = [{"type": "text", "text": t} for t in texts]
    for i in mark:
        content[i]["cache_control"] = {"type": "ephemeral"}
    return blocks({"tools": [], "system": [], "messages": [{"role": "user", "content": content}]})


COUNT = Counter(len)


class Sender:
    """A stream's cache, sent requests as the bench sends them."""

    def __init__(self) -> None:
        self.cache = Cache()

    def send(self, request: list[tuple[str, dict[str, Any]]], marks: list[int]) -> Billed:
        return self.cache.send(COUNT.prepare(request), marks)


def size(text: str) -> int:
    """A text block's tokens as the model counts them here: its JSON's characters."""
    return len(json.dumps({"text": text, "type": "text"}, sort_keys=True))


BIG = "x" * MIN_CACHEABLE


def test_a_breakpoint_on_the_tail_lets_the_next_call_read_all_of_this_one() -> None:
    cache = Sender()
    first = request(BIG, "a" * 100, mark=(1,))
    billed = cache.send(first, marked(first))
    assert (billed.read, billed.uncached) == (0, 0) and billed.written == billed.total
    second = request(BIG, "a" * 100, "b" * 50, mark=(1, 2))
    again = cache.send(second, marked(second))
    assert again.read == billed.total and again.written == again.total - billed.total
    assert again.cost() < 1


def test_one_breakpoint_at_the_stable_prefix_leaves_each_new_step_uncached_once_more() -> None:
    cache = Sender()
    first = request(BIG, "a" * 100)
    assert cache.send(first, one_at(first, 1)).written > 0  # the stable prefix: BIG only
    second = request(BIG, "a" * 100, "b" * 50)
    billed = cache.send(second, one_at(second, 2))  # it reads BIG, writes the step "a"
    assert billed.read == size(BIG) and billed.written == size("a" * 100)
    assert billed.uncached == size("b" * 50)


def test_an_entry_further_back_than_the_lookback_is_not_found() -> None:
    cache = Sender()
    head = request(BIG)
    cache.send(head, [0])
    near = request(BIG, *["s"] * LOOKBACK)
    assert cache.send(near, [LOOKBACK]).read == size(BIG)
    far = request(BIG, *["t"] * (LOOKBACK + 1))
    assert cache.send(far, [LOOKBACK + 1]).read == 0


def test_a_prefix_shorter_than_the_minimum_is_never_written() -> None:
    cache = Sender()
    short = request("x" * (MIN_CACHEABLE - 100), mark=(0,))
    billed = cache.send(short, marked(short))
    assert billed.written == 0 and billed.uncached == billed.total
    assert cache.send(short, marked(short)).read == 0
