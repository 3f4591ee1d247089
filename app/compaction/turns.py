"""Turn and step split and compaction planning by tokens and steps (SPEC §5).

Definitions used throughout compaction:

- A *turn* is a user message and every message after it up to the next user
  message. Messages before the first user message form a leading turn of their
  own (e.g. an assistant greeting, or the rest of a turn whose opening user
  message an earlier compaction moved behind the watermark).
- The *current* turn is the turn that holds the latest user message, whether
  or not the assistant has answered yet. If there is no user message at all,
  the last turn is current.
- A *step* is a complete tool group with any assistant text just before it,
  or a lone assistant message. A group still missing a result is *open*; a
  step holding one is open too. Tool results, UI-only and historical system
  messages belong to the step they follow.
- The *preserved tail* is the current turn and the `min_preserved_turns`
  turns before it, but only as much of them (newest first, whole steps) as
  fits in `keep_recent_tokens`; and never less than the current turn's last
  `min_preserved_steps` complete steps.
- The *compressible range* is every message after the watermark and before
  the tail, cut only at a step boundary where every tool call before the cut
  has its results before it: so it never splits a group and never holds an
  open one, and it may reach inside the current turn. A range never ends on
  a user message that something answers after the cut (the user's words stay
  with what answered them).
- The *turn anchor* is the user message opening the current turn. When the
  range reaches inside the current turn the watermark moves past it, but it
  stays in the effective history verbatim (the context read adds the
  session's latest user message whatever the watermark, see
  `app/context/statements.py`) and its tokens are not counted as freed. It is
  summarised too (verbatim in `user_messages`) so it outlives its turn. A
  later compaction inside the same turn finds no user message after the
  watermark: the anchor then lies below it (`carried_anchor`, read by the
  caller), and it is still the plan's anchor, counted in the history it keeps.
- Pinned messages inside the range are summarised *and* carried verbatim into
  the summary's `pinned` section.
- Tokens are the cached `token_count` of messages that reach the model
  (`LoggedMessage.counts_in_context`: `include_in_context`, not historical
  `system` messages).

Everything here is pure: the runner and `dry_run` call it on the history read
after the watermark.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from app.compaction.preserved import Tail, clean_cut, preserved_tail
from app.compaction.summary import summary_token_cap
from app.compaction.why_noop import NoopCode, thrash_guard, why_empty
from app.core.conversation import LoggedMessage, Unit, split_steps
from app.core.conversation import tokens_in_context as _tokens


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What one compaction would do; also the body of a `dry_run` answer.

    `range_messages` are what the summary folds; `preserved_messages` are what
    stays in the effective history. When the watermark moves past the turn
    anchor it is in both: the summary carries it verbatim (it must outlive the
    turn: once the next user message arrives it is no longer read as the
    anchor) and the effective history keeps it while its turn lasts, so its
    tokens are not counted as freed. When an earlier compaction already moved
    the watermark past it, it is in `preserved_messages` only (the previous
    summary carries it) and `anchor_tokens` still counts it.
    """

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
    anchor: LoggedMessage | None = None
    explanation: dict[str, Any] = field(default_factory=dict)

    @property
    def first_seq(self) -> int:
        return self.range_messages[0].seq

    @property
    def pinned(self) -> tuple[LoggedMessage, ...]:
        return tuple(m for m in self.range_messages if m.pinned and m.counts_in_context)

    @property
    def summarized_count(self) -> int:
        return sum(1 for m in self.range_messages if m.counts_in_context)

    @property
    def preserved_count(self) -> int:
        return sum(1 for m in self.preserved_messages if m.counts_in_context)

    @property
    def anchor_tokens(self) -> int:
        """Tokens below the new watermark that stay in the effective history (the anchor)."""
        return (
            self.anchor.token_count
            if self.anchor is not None and self.anchor.counts_in_context
            else 0
        )

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
            "turn_anchor_seq": self.anchor.seq if self.anchor is not None else None,
            "forced": self.forced,
            **self.explanation,
        }


@dataclass(frozen=True, slots=True)
class NoopReason:
    """Why nothing is compacted; stored as the job's reason, nothing else is written."""

    code: NoopCode
    detail: str
    range_tokens: int = 0
    history_tokens: int = 0
    explanation: dict[str, Any] = field(default_factory=dict)

    def report(self) -> dict[str, Any]:
        return {
            "would_compact": False,
            "reason": self.code,
            "detail": self.detail,
            "range_tokens": self.range_tokens,
            "history_tokens": self.history_tokens,
            **self.explanation,
        }


def plan_range(
    messages_after_watermark: Sequence[LoggedMessage],
    *,
    watermark: int,
    min_preserved_turns: int,
    min_preserved_steps: int = 4,
    keep_recent_tokens: int | None = None,
    min_free_tokens: int = 0,
    regrowth_ratio: float = 0.0,
    tokens_at_last_compaction: int | None = None,
    summary_ratio: float = 0.3,
    summary_floor_tokens: int = 256,
    force: bool = False,
    carried_anchor: LoggedMessage | None = None,
) -> CompactionPlan | NoopReason:
    """Choose the compressible range, or say why there is none.

    `keep_recent_tokens` None means no token limit on the tail (whole turns).
    Thrash guards (skipped when `force`): the range must free at least
    `min_free_tokens` once its summary (at most `summary_ratio` of it, at least
    `summary_floor_tokens`) is counted; and when `tokens_at_last_compaction`
    (the effective-history tokens the last compaction left behind) is known,
    the effective history must have grown by `regrowth_ratio` of it since.
    `carried_anchor` is the session's latest user message when it lies at or below
    the watermark (an earlier compaction cut inside its turn).
    """
    messages = [m for m in messages_after_watermark if m.seq > watermark]
    carried = _carried(carried_anchor, messages, watermark)
    # The effective history, as budget status counts it: the anchor below the watermark
    # too, so the regrowth guard compares it with the base the last plan left.
    history_tokens = _tokens(messages) + (_tokens((carried,)) if carried is not None else 0)
    if not messages:
        return NoopReason("empty_history", "no messages after the watermark")
    units = split_steps(messages)
    tail = preserved_tail(
        messages,
        units,
        min_preserved_turns=min_preserved_turns,
        min_preserved_steps=min_preserved_steps,
        keep_recent_tokens=keep_recent_tokens,
    )
    cut = clean_cut(units, tail.start)
    span = _Range.at(messages, units, cut)
    explanation = _explain(messages, tail, cut, keep_recent_tokens)
    if cut == 0 or span.folded == 0:
        return NoopReason(
            "nothing_compressible",
            why_empty(messages, units, tail, cut, min_preserved_turns, min_preserved_steps),
            span.tokens,
            history_tokens,
            explanation,
        )
    freed = span.freed(summary_ratio, summary_floor_tokens)
    if not force:
        guard = thrash_guard(
            history_tokens=history_tokens,
            range_tokens=span.tokens,
            freed=freed,
            tokens_at_last_compaction=tokens_at_last_compaction,
            regrowth_ratio=regrowth_ratio,
            min_free_tokens=min_free_tokens,
        )
        if guard is not None:
            code, detail = guard
            return NoopReason(code, detail, span.tokens, history_tokens, explanation)
    return span.plan(messages, units, watermark, history_tokens, freed, force, explanation, carried)


def _carried(
    anchor: LoggedMessage | None, messages: Sequence[LoggedMessage], watermark: int
) -> LoggedMessage | None:
    """The turn anchor below the watermark, if it still is the turn anchor.

    Why the rule: the payload sends the session's latest user message whatever the
    watermark (`app/context/statements.py`), so that message is in the effective
    history however many compactions moved the watermark past it. A compaction that
    cuts inside its turn once more reads no user message after the watermark, yet
    must still keep it counted (it is the plan's anchor: its tokens stay below the new
    watermark, `store_summary`'s `kept_below_tokens`), or budget status and the
    compaction trigger fall short of what is sent. A user message after the watermark
    opens a newer turn: the one below is then summarised only, and not sent.
    """
    if anchor is None or anchor.role != "user" or anchor.seq > watermark:
        return None
    if any(m.role == "user" for m in messages):
        return None
    return anchor


@dataclass(frozen=True, slots=True)
class _Range:
    """The messages before `cut`, and the current turn's anchor (its user message) when
    the cut passes it."""

    cut: int
    messages: tuple[LoggedMessage, ...]
    tokens: int
    anchor_unit: Unit | None
    anchor: LoggedMessage | None
    anchor_tokens: int

    @classmethod
    def at(cls, messages: Sequence[LoggedMessage], units: Sequence[Unit], cut: int) -> _Range:
        current = units[-1].turn
        anchor_unit = next(
            (u for u in units if u.turn == current and u.kind == "user" and u.start < cut), None
        )
        anchor = messages[anchor_unit.start] if anchor_unit is not None else None
        range_messages = tuple(messages[:cut])
        range_tokens = _tokens(range_messages)
        anchor_tokens = _tokens((anchor,)) if anchor is not None else 0
        return cls(cut, range_messages, range_tokens, anchor_unit, anchor, anchor_tokens)

    @property
    def folded(self) -> int:
        """The tokens the summary folds: the anchor stays in the history too."""
        return self.tokens - self.anchor_tokens

    def freed(self, summary_ratio: float, summary_floor_tokens: int) -> int:
        """What folding the range frees once the summary that replaces it is counted."""
        folded = self.folded
        return folded - min(folded, summary_token_cap(folded, summary_ratio, summary_floor_tokens))

    def plan(
        self,
        messages: Sequence[LoggedMessage],
        units: Sequence[Unit],
        watermark: int,
        history_tokens: int,
        freed: int,
        force: bool,
        explanation: dict[str, Any],
        carried: LoggedMessage | None = None,
    ) -> CompactionPlan:
        """The plan that folds this range; the anchor is preserved as well, the one in the
        range or, when the range holds none, the one `carried` below the watermark
        (already counted in `history_tokens`, never in the range's tokens)."""
        cut = self.cut
        anchor = self.anchor if self.anchor is not None else carried
        preserved = (*((anchor,) if anchor is not None else ()), *messages[cut:])
        range_turns = {u.turn for u in units if u.start < cut}
        kept_turns = {u.turn for u in units if u.start >= cut or u is self.anchor_unit}
        return CompactionPlan(
            range_messages=self.messages,
            preserved_messages=preserved,
            previous_watermark=watermark,
            new_watermark=messages[cut - 1].seq,
            range_tokens=self.tokens,
            preserved_tokens=history_tokens - self.tokens + self.anchor_tokens,
            summarized_turns=len(range_turns),
            preserved_turns=len(kept_turns),
            estimated_freed_tokens=freed,
            forced=force,
            anchor=anchor,
            explanation=explanation,
        )


def _explain(
    messages: Sequence[LoggedMessage], tail: Tail, cut: int, keep_recent_tokens: int | None
) -> dict[str, Any]:
    """How the tail and the cut were found, for `dry_run` and the job's metadata."""
    return {
        "tail": {
            "from_seq": messages[tail.start].seq if tail.start < len(messages) else None,
            "tokens": tail.tokens,
            "limited_by": tail.limited_by,
            "current_turn_complete_steps": tail.current_turn_steps,
            "kept_steps": tail.kept_steps,
            "keep_recent_tokens": keep_recent_tokens,
        },
        "cut_moved_back": cut < tail.start,
        "open_group_seqs": list(tail.open_seqs),
    }


class PlanSettings(Protocol):
    """The `CompactionSettings` fields planning reads."""

    @property
    def min_preserved_turns(self) -> int: ...
    @property
    def min_preserved_steps(self) -> int: ...
    @property
    def keep_recent_ratio(self) -> float: ...
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
    carried_anchor: LoggedMessage | None = None,
) -> CompactionPlan | NoopReason:
    """`plan_range` with a session's settings; the ratios are of the usable budget."""
    return plan_range(
        messages_after_watermark,
        watermark=watermark,
        min_preserved_turns=settings.min_preserved_turns,
        min_preserved_steps=settings.min_preserved_steps,
        keep_recent_tokens=int(settings.keep_recent_ratio * usable_budget),
        min_free_tokens=int(settings.min_free_ratio * usable_budget),
        regrowth_ratio=settings.regrowth_ratio,
        tokens_at_last_compaction=tokens_at_last_compaction,
        force=force,
        carried_anchor=carried_anchor,
    )
