"""The preserved tail of a compaction plan (SPEC §5): the last turns within their
token share, never less than the current turn's last steps; and where a range may
be cut before it (app/compaction/turns.py defines the words)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.core.conversation import LoggedMessage, Unit, tokens_in_context

TailLimit = Literal["min_preserved_turns", "keep_recent_ratio", "min_preserved_steps", "history"]


@dataclass(frozen=True, slots=True)
class Tail:
    """Where the preserved tail starts and what set it (for `dry_run`)."""

    start: int  # index in the planned messages
    limited_by: TailLimit
    tokens: int
    current_turn_steps: int
    kept_steps: int
    open_seqs: tuple[int, ...] = ()


def preserved_tail(
    messages: Sequence[LoggedMessage],
    units: Sequence[Unit],
    *,
    min_preserved_turns: int,
    min_preserved_steps: int,
    keep_recent_tokens: int | None,
) -> Tail:
    """The start of the preserved tail (SPEC §5), before cut-point adjustments."""
    current = units[-1].turn
    oldest_turn = current - max(0, min_preserved_turns)
    # Newest first, whole units, within the last turns and the token share.
    soft = len(messages)
    tokens = 0
    limited_by: TailLimit = "history"
    for u in reversed(units):
        if u.turn < oldest_turn:
            limited_by = "min_preserved_turns"
            break
        if keep_recent_tokens is not None and tokens + u.tokens > keep_recent_tokens:
            limited_by = "keep_recent_ratio"
            break
        tokens += u.tokens
        soft = u.start
    # Floor: the current turn's last `min_preserved_steps` complete steps (all if fewer).
    steps = [u for u in units if u.turn == current and u.kind == "step" and not u.open]
    kept = steps[-max(1, min_preserved_steps) :] if steps else []
    hard = kept[0].start if kept else len(messages)
    if hard < soft:
        limited_by = "min_preserved_steps"
        tokens = tokens_in_context(messages[hard:])
    # The message holding the unanswered call, not its step's first (often the text
    # the assistant wrote before calling).
    opens = tuple(
        next((m.seq for m in messages[u.start : u.end] if m.tool_call_ids), messages[u.start].seq)
        for u in units
        if u.open
    )
    return Tail(min(soft, hard), limited_by, tokens, len(steps), len(kept), opens)


def clean_cut(units: Sequence[Unit], tail_start: int) -> int:
    """The latest clean cut at or before `tail_start` that does not end on a user message."""
    candidates = [u for u in units if u.start <= tail_start]
    for k in range(len(candidates) - 1, -1, -1):
        u = candidates[k]
        if u.start == 0:
            return 0
        if not u.closed_before:
            continue  # a call before it is still waiting for a result at or after it
        if units[k - 1].kind == "user" and u.kind != "user":
            continue  # the range would end on a user message: keep it with its answer
        return u.start
    return 0
