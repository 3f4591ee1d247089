"""Why a plan compacts nothing: the noop codes, the thrash guards, what kept the range empty."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from app.compaction.preserved import Tail
from app.core.conversation import LoggedMessage, Unit

NoopCode = Literal["empty_history", "nothing_compressible", "not_regrown", "too_little_to_free"]


def thrash_guard(
    *,
    history_tokens: int,
    range_tokens: int,
    freed: int,
    tokens_at_last_compaction: int | None,
    regrowth_ratio: float,
    min_free_tokens: int,
) -> tuple[NoopCode, str] | None:
    """Why a compressible range is still not worth a compaction (unforced), or None."""
    if tokens_at_last_compaction is not None:
        needed = tokens_at_last_compaction * (1 + regrowth_ratio)
        if history_tokens < needed:
            return (
                "not_regrown",
                f"history is {history_tokens} tokens; the last compaction left "
                f"{tokens_at_last_compaction} and it must grow by {regrowth_ratio:.0%} first",
            )
    if freed < min_free_tokens:
        return (
            "too_little_to_free",
            f"compacting {range_tokens} tokens would free about {freed}, "
            f"less than the minimum of {min_free_tokens}",
        )
    return None


def why_empty(
    messages: Sequence[LoggedMessage],
    units: Sequence[Unit],
    tail: Tail,
    cut: int,
    min_preserved_turns: int,
    min_preserved_steps: int,
) -> str:
    """A sentence for `dry_run` and the noop job: what kept everything out of the range."""
    if cut > 0:
        return "only the turn anchor, UI-only or system messages lie before the preserved tail"
    if all(m.role == "user" or not m.counts_in_context for m in messages[: tail.start]):
        if tail.limited_by == "min_preserved_steps":
            return (
                f"the current turn has {tail.current_turn_steps} complete step(s) after the "
                f"watermark and its last {min_preserved_steps} (min_preserved_steps) are "
                "always kept; they reach back to the watermark"
            )
        earlier = len({u.turn for u in units if u.start >= tail.start}) - 1
        turns = f"{earlier} earlier turn" + ("" if earlier == 1 else "s")
        return (
            f"the preserved tail holds everything after the watermark ({tail.tokens} tokens): "
            f"the current turn and {turns}, within the {min_preserved_turns} "
            "min_preserved_turns, fit in keep_recent_ratio of the usable budget; `force` "
            "skips only the guards, so to compact them now lower the session's "
            "min_preserved_turns (0 keeps only the current turn)"
        )
    first_open = next((u for u in units if u.open), None)
    if first_open is not None and first_open.start < tail.start:
        return (
            f"a tool group still missing a result (seq {tail.open_seqs[0]}) is "
            "never compacted, nor anything after it"
        )
    return (
        f"no step boundary before seq {messages[min(tail.start, len(messages) - 1)].seq} "
        "leaves every tool call with "
        "its results and the range ending on a message other than the user's"
    )
