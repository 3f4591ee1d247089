"""Turn split and compaction planning (SPEC §5, first steps).

Definitions used throughout compaction:

- A *turn* is a user message and every message after it up to the next user
  message. Messages before the first user message form a leading turn of their
  own (turn 0, e.g. an assistant greeting).
- The *current* turn is the turn that holds the latest user message, whether
  or not the assistant has answered yet: the user may still be waiting on it.
  If there is no user message at all, the last turn is current. It is never
  compacted, so the watermark can never cover it.
- The *compressible range* is every turn after the watermark except the
  current turn and the `min_preserved_turns` complete turns before it.
  Its boundary is moved earlier if it would separate a tool call from its
  result, so tool groups stay whole.
- Pinned messages inside the range are summarised *and* carried verbatim into
  the summary's `pinned` section, so they stay visible without the context
  assembler having to look below the watermark.
- Tokens are the cached `token_count` of messages that reach the model
  (`include_in_context`, not historical `system` messages).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from app.compaction.summary import summary_token_cap
from app.messages.types import LoggedMessage

NoopCode = Literal["empty_history", "nothing_compressible", "not_regrown", "too_little_to_free"]


def in_context(message: LoggedMessage) -> bool:
    """Whether the message is part of what the model sees (and so of what compaction frees)."""
    return message.include_in_context and message.role != "system"


@dataclass(frozen=True, slots=True)
class Turn:
    messages: tuple[LoggedMessage, ...]

    @property
    def first_seq(self) -> int:
        return self.messages[0].seq

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq

    @property
    def has_user(self) -> bool:
        return self.messages[0].role == "user"

    @property
    def tokens(self) -> int:
        return sum(m.token_count for m in self.messages if in_context(m))


def split_turns(messages: Sequence[LoggedMessage]) -> list[Turn]:
    """Turns in log order; a leading run of non-user messages is a turn of its own."""
    turns: list[list[LoggedMessage]] = []
    for message in messages:
        if message.role == "user" or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return [Turn(tuple(t)) for t in turns]


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What one compaction would do; also the body of a `dry_run` answer."""

    range_messages: tuple[LoggedMessage, ...]
    preserved_messages: tuple[LoggedMessage, ...]
    previous_watermark: int
    new_watermark: int
    range_tokens: int
    preserved_tokens: int
    summarized_turns: int
    preserved_turns: int
    estimated_freed_tokens: int
    forced: bool = False

    @property
    def first_seq(self) -> int:
        return self.range_messages[0].seq

    @property
    def pinned(self) -> tuple[LoggedMessage, ...]:
        return tuple(m for m in self.range_messages if m.pinned and in_context(m))

    @property
    def summarized_count(self) -> int:
        return sum(1 for m in self.range_messages if in_context(m))

    @property
    def preserved_count(self) -> int:
        return sum(1 for m in self.preserved_messages if in_context(m))

    def report(self) -> dict[str, Any]:
        return {
            "would_compact": True,
            "range": {"from_seq": self.first_seq, "to_seq": self.new_watermark},
            "previous_watermark": self.previous_watermark,
            "new_watermark": self.new_watermark,
            "range_tokens": self.range_tokens,
            "preserved_tokens": self.preserved_tokens,
            "estimated_freed_tokens": self.estimated_freed_tokens,
            "summarized_turns": self.summarized_turns,
            "summarized_count": self.summarized_count,
            "preserved_turns": self.preserved_turns,
            "preserved_count": self.preserved_count,
            "pinned_seqs": [m.seq for m in self.pinned],
            "forced": self.forced,
        }


@dataclass(frozen=True, slots=True)
class NoopReason:
    """Why nothing is compacted; stored as the job's reason, nothing else is written."""

    code: NoopCode
    detail: str
    range_tokens: int = 0
    history_tokens: int = 0

    def report(self) -> dict[str, Any]:
        return {
            "would_compact": False,
            "reason": self.code,
            "detail": self.detail,
            "range_tokens": self.range_tokens,
            "history_tokens": self.history_tokens,
        }


def _splits_tool_group(before: Sequence[Turn], after: Sequence[Turn]) -> bool:
    called = {cid for t in before for m in t.messages for cid in m.tool_call_ids}
    answered_later = {
        str(m.body.get("tool_call_id")) for t in after for m in t.messages if m.role == "tool"
    }
    return bool(called & answered_later)


def plan_range(
    messages_after_watermark: Sequence[LoggedMessage],
    *,
    watermark: int,
    min_preserved_turns: int,
    min_free_tokens: int = 0,
    regrowth_ratio: float = 0.0,
    tokens_at_last_compaction: int | None = None,
    summary_ratio: float = 0.3,
    summary_floor_tokens: int = 256,
    force: bool = False,
) -> CompactionPlan | NoopReason:
    """Choose the compressible range, or say why there is none.

    Thrash guards (skipped when `force`): the range must free at least
    `min_free_tokens` once its summary (at most `summary_ratio` of it, at least
    `summary_floor_tokens`) is counted; and when `tokens_at_last_compaction`
    (the effective-history tokens the last compaction left behind) is known,
    the effective history must have grown by `regrowth_ratio` of it since.
    """
    messages = [m for m in messages_after_watermark if m.seq > watermark]
    history_tokens = sum(m.token_count for m in messages if in_context(m))
    if not messages:
        return NoopReason("empty_history", "no messages after the watermark")
    turns = split_turns(messages)
    # The last turn holds the latest user message (or there is none): it is current.
    complete = turns[:-1]
    cut = max(0, len(complete) - max(0, min_preserved_turns))
    while cut > 0 and _splits_tool_group(turns[:cut], turns[cut:]):
        cut -= 1
    range_turns = turns[:cut]
    range_messages = tuple(m for t in range_turns for m in t.messages)
    range_tokens = sum(t.tokens for t in range_turns)
    if not range_turns or range_tokens == 0:
        return NoopReason(
            "nothing_compressible",
            f"{len(complete)} complete turn(s) after the watermark, "
            f"{min_preserved_turns} are preserved and the current turn is never compacted",
            range_tokens,
            history_tokens,
        )
    if not force and tokens_at_last_compaction is not None:
        needed = tokens_at_last_compaction * (1 + regrowth_ratio)
        if history_tokens < needed:
            return NoopReason(
                "not_regrown",
                f"history is {history_tokens} tokens; the last compaction left "
                f"{tokens_at_last_compaction} and it must grow by {regrowth_ratio:.0%} first",
                range_tokens,
                history_tokens,
            )
    summary_cap = min(
        range_tokens, summary_token_cap(range_tokens, summary_ratio, summary_floor_tokens)
    )
    freed = range_tokens - summary_cap
    if not force and freed < min_free_tokens:
        return NoopReason(
            "too_little_to_free",
            f"compacting {range_tokens} tokens would free about {freed}, "
            f"less than the minimum of {min_free_tokens}",
            range_tokens,
            history_tokens,
        )
    preserved = tuple(m for t in turns[cut:] for m in t.messages)
    return CompactionPlan(
        range_messages=range_messages,
        preserved_messages=preserved,
        previous_watermark=watermark,
        new_watermark=range_messages[-1].seq,
        range_tokens=range_tokens,
        preserved_tokens=history_tokens - range_tokens,
        summarized_turns=len(range_turns),
        preserved_turns=len(turns) - cut,
        estimated_freed_tokens=freed,
        forced=force,
    )


class PlanSettings(Protocol):
    """The `CompactionSettings` fields planning reads."""

    @property
    def min_preserved_turns(self) -> int: ...
    @property
    def min_free_ratio(self) -> float: ...
    @property
    def regrowth_ratio(self) -> float: ...


def plan_for_settings(
    messages_after_watermark: Sequence[LoggedMessage],
    *,
    watermark: int,
    settings: PlanSettings,
    usable_budget: int,
    tokens_at_last_compaction: int | None = None,
    force: bool = False,
) -> CompactionPlan | NoopReason:
    """`plan_range` with a session's settings; `min_free_ratio` is of the usable budget."""
    return plan_range(
        messages_after_watermark,
        watermark=watermark,
        min_preserved_turns=settings.min_preserved_turns,
        min_free_tokens=int(settings.min_free_ratio * usable_budget),
        regrowth_ratio=settings.regrowth_ratio,
        tokens_at_last_compaction=tokens_at_last_compaction,
        force=force,
    )
