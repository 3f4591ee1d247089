"""Payload streams of the prefix-echo tests: their steps, and the prefix two payloads share
measured on the payloads themselves."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.tokens import get_counter

MODEL = "gpt-4o"
COUNTER = get_counter(MODEL)
WIDE = 100_000
NARROW = 600  # trims once the log passes ~5 of these messages


def say(role: str, i: int) -> dict[str, Any]:
    words = " ".join(f"{role}{i}-{w}" for w in range(40))
    return {"role": role, "content": f"step {i}: {words}"}


def measured(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> int:
    """Tokens of the leading messages identical in both payloads (no tools sent)."""
    tokens = 0
    for a, b in zip(before, after, strict=False):
        if a != b:
            break
        tokens += COUNTER.count_message(b)
    return tokens
