"""An append's batch measured before it holds a connection: each message's tokens and
search vector, counted with the tokenizer its session was last seen with here."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from app.core.conversation import counts_in_context
from app.core.tokens import TokenCounter
from app.index.lexemes import session_lexeme
from app.index.vector import message_vector
from app.messages.validation import Incoming

# The model each session was last seen with, so that the next append counts with
# the right tokenizer before it reads the row. Only a guess: the write checks it
# against the row it locked. Bounded; forgotten wholesale when full.
_MODEL_HINTS: dict[tuple[str, str], str | None] = {}


_MODEL_HINTS_MAX = 50_000


def model_hint(tenant: str, sid: str, default: str | None) -> str | None:
    """The model the session was last seen with in this process, else `default`."""
    return _MODEL_HINTS.get((tenant, sid), default)


def remember_model(tenant: str, sid: str, model: str | None) -> None:
    """The model of the session row an append read: the session's next append counts with it."""
    if len(_MODEL_HINTS) >= _MODEL_HINTS_MAX:
        _MODEL_HINTS.clear()
    _MODEL_HINTS[(tenant, sid)] = model


def in_context(m: Incoming) -> bool:
    """Whether the message's tokens count in the session's context."""
    return counts_in_context(m.role, m.include_in_context, m.metadata)


# Tokenising this many bytes in the event loop would stall other requests.
THREAD_THRESHOLD_BYTES = 64 * 1024


async def count_tokens(counter: TokenCounter, batch: Sequence[Incoming]) -> list[int]:
    """Each message's tokens (in a thread for large batches)."""

    def run() -> list[int]:
        return [counter.count_message(m.body) for m in batch]

    return await asyncio.to_thread(run) if _content_bytes(batch) > THREAD_THRESHOLD_BYTES else run()


async def measure(
    counter: TokenCounter, batch: Sequence[Incoming], tenant: str, sid: str
) -> tuple[list[int], list[bytes | None]]:
    """Each message's tokens and search vector, before the append holds a connection (in
    a thread for large batches, where it would stall the event loop)."""
    key = session_lexeme(tenant, sid)

    def run() -> tuple[list[int], list[bytes | None]]:
        counts = [counter.count_message(m.body) for m in batch]
        return counts, [message_vector(m.body, key) for m in batch]

    return await asyncio.to_thread(run) if _content_bytes(batch) > THREAD_THRESHOLD_BYTES else run()


def _content_bytes(batch: Sequence[Incoming]) -> int:
    return sum(len(str(m.body.get("content") or "")) for m in batch)
