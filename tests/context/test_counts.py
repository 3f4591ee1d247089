"""Memoized head counts (app/context/counts.py) equal the counter's own, whatever repeats."""

from __future__ import annotations

from typing import Any

from app.context import counts
from app.context.caches import Caches
from app.core.tokens import get_counter


class Unhashable:
    """A counter double that cannot be a cache key: counted directly every time."""

    __hash__ = None  # type: ignore[assignment]
    mode, name = "exact", "double"

    def count_message(self, message: Any) -> int:
        return 7

    def count_messages(self, messages: Any) -> int:
        return 7 * len(messages) + 3

    def count_tools(self, tools: Any) -> int:
        return 11 * len(tools)


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "grep",
            "description": "Search files.",
            "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
        },
    }
]


def test_memoized_counts_equal_direct_counts_for_every_counter_and_shape() -> None:
    cache = Caches().counts
    exact, estimate = get_counter("gpt-4o"), get_counter("some-unknown-model")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are careful. 必须先运行测试。"},
        {"role": "system", "content": "You are careful. 必须先运行测试"},
        {"role": "user", "content": "You are careful. 必须先运行测试。"},
        {"role": "system", "content": "x", "name": "banner"},  # not the memoized shape
        {"role": "user", "content": [{"type": "text", "text": "parts"}]},
    ]
    for _ in range(2):  # the second round is served from the memo
        for counter in (exact, estimate):
            for m in messages:
                assert counts.message_tokens(counter, m, cache) == counter.count_message(m)
            assert counts.tools_tokens(counter, TOOLS, cache) == counter.count_tools(TOOLS)
            assert counts.tools_tokens(counter, [], cache) == 0
    # One text, two tokenizers: never the other's count.
    text = {"role": "user", "content": "ids a1b2c3d4e5f6a7b8c9d0 and 数字 12345"}
    assert counts.message_tokens(exact, text, cache) == exact.count_message(text)
    assert counts.message_tokens(estimate, text, cache) == estimate.count_message(text)


def test_an_unhashable_counter_is_counted_directly() -> None:
    counter = Unhashable()
    cache = Caches().counts
    assert counts.message_tokens(counter, {"role": "user", "content": "hi"}, cache) == 7
    assert counts.tools_tokens(counter, TOOLS, cache) == 11
