"""Token counts of a payload's head, memoized: system block, mode banner, dynamic items,
summary and tool schemas.

Every call of a session counts the same system prompt, tools and summary again, and
running the tokenizer over them was ~12% of a context call's CPU in the load bench
(a summary is hundreds of tokens). A count depends only on the counter and the exact
text, so it is kept per (counter, role, content) for the plain `{role, content}`
messages the head is made of, and per (counter, tools JSON) for the schemas; any
other message shape is counted directly. Bounded by entries and by the characters
held. A counter that cannot be hashed is simply not memoized.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from app.context.lru import LRU
from app.context.types import TokenCounter

# (counter, what was counted) -> (its count, its size in characters); Caches.counts.
CountCache = LRU[Hashable, tuple[int, int]]


def message_tokens(counter: TokenCounter, message: Mapping[str, Any], cache: CountCache) -> int:
    """`counter.count_message(message)`."""
    role, content = message.get("role"), message.get("content")
    if len(message) != 2 or not isinstance(role, str) or not isinstance(content, str):
        return counter.count_message(message)
    return _memo(cache, counter, ("message", role, content), len(content), message)


def tools_tokens(
    counter: TokenCounter, tools: Sequence[Mapping[str, Any]], cache: CountCache
) -> int:
    """`counter.count_tools(tools)`."""
    if not tools:
        return counter.count_tools(tools)
    # Key order kept: the count of an unknown shape follows its JSON as given.
    text = json.dumps(tools, ensure_ascii=False, separators=(",", ":"), default=str)
    return _memo(cache, counter, ("tools", text), len(text), tools)


def _memo(
    cache: CountCache, counter: TokenCounter, what: tuple[str, ...], size: int, value: Any
) -> int:
    try:
        key = (counter, *what)
        hit = cache.get(key)
    except TypeError:  # an unhashable counter
        return _count(counter, what[0], value)
    if hit is None:
        hit = (_count(counter, what[0], value), size)
        cache.put(key, hit)
    return hit[0]


def _count(counter: TokenCounter, kind: str, value: Any) -> int:
    return counter.count_message(value) if kind == "message" else counter.count_tools(value)
