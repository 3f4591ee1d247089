"""Replaying dataset sessions as an agent loop, for `bench/agent_loop.py`.

A trace's model calls are the points before each of its assistant messages; at
each one the agent sends a payload built from the messages before it. These
helpers find the calls, compare consecutive payloads, and build LangChain's
`trim_messages` payload of a call, all with the exact o200k counter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage, convert_to_messages, trim_messages

from app.tokens import get_counter
from bench.context_quality import Case

MODEL = "gpt-4o"
COUNTER = get_counter(MODEL)
PRIMING = COUNTER.count_messages([])
# Cache reads bill at a tenth of the input price (Anthropic; OpenAI bills 0.25-0.5x and
# caches from 1,024 tokens in 128-token steps, which the benches ignore).
CACHED_PRICE = 0.1


def shared_prefix(before: Sequence[dict[str, Any]] | None, after: Sequence[dict[str, Any]]) -> int:
    """Tokens of the leading messages identical in both payloads (no tools in the dataset)."""
    if before is None:
        return 0
    tokens = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        tokens += COUNTER.count_message(b)
    return tokens


def fresh_tail(before: Sequence[dict[str, Any]] | None, after: Sequence[dict[str, Any]]) -> int:
    """Tokens of the payload's trailing messages found nowhere in the previous payload.

    They are the call's new messages as the method sent them; none of them can
    be part of a prefix shared with the previous payload.
    """
    seen = {json.dumps(m, sort_keys=True) for m in before or ()}
    tokens = 0
    for message in reversed(after):
        if json.dumps(message, sort_keys=True) in seen:
            break
        tokens += COUNTER.count_message(message)
    return tokens


def call_points(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Indexes i where the agent calls its model with messages[:i]: before each assistant."""
    return [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]


def full_tokens(case: Case, upto: int) -> int:
    """The whole history before call `upto` with the system prompt: what a call sends untrimmed."""
    system = [{"role": "system", "content": case.system}] if case.system else []
    return sum(case.counts[:upto]) + COUNTER.count_messages(system)


def mid_run(case: Case, upto: int) -> list[Any]:
    """Planted instructions already in messages[:upto], except the latest user message."""
    users = [i for i in case.users if i < upto]
    latest = max(users) if users else -1
    return [ins for i, ins in case.planted.items() if i < upto and i != latest]


@dataclass(frozen=True, slots=True)
class Trimmed:
    payload: list[dict[str, Any]]
    input_tokens: int
    kept: list[int]  # indexes into the case's messages, in order


def run_langchain(case: Case, upto: int, budget: int) -> Trimmed:
    """LangChain's `trim_messages(strategy="last", include_system=True, start_on="human")` of
    messages[:upto], same counter, given `budget - PRIMING` (it does not count the reply
    priming we count)."""
    msgs: list[BaseMessage] = convert_to_messages(case.messages[:upto])
    counts = {str(i): c for i, c in enumerate(case.counts[:upto])}
    for i, m in enumerate(msgs):
        m.id = str(i)
    if case.system:
        msgs = [SystemMessage(case.system, id="system"), *msgs]
        counts["system"] = COUNTER.count_message({"role": "system", "content": case.system})

    def counter(batch: list[BaseMessage]) -> int:
        return sum(counts[str(m.id)] for m in batch)

    out = trim_messages(
        msgs,
        max_tokens=budget - PRIMING,
        token_counter=counter,
        strategy="last",
        include_system=True,
        start_on="human",
    )
    kept = [int(str(m.id)) for m in out if m.id != "system"]
    payload = [{"role": "system", "content": case.system}] if case.system else []
    payload += [case.messages[i] for i in kept]
    return Trimmed(payload, counter(out) + PRIMING, kept)
