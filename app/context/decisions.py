"""Per-seq explanations of a payload, run-length encoded.

Every seq of the effective history gets one action (kept, preview, cut,
dropped, excluded) and the rule that decided it. Seqs the repository did not
read (older than the budget can reach) are `dropped` by `budget`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.context.strategies.base import Selection
from app.context.types import Action, Decision
from app.context.view import HistoryView
from app.core.conversation import SetAside

_SENT: frozenset[Action] = frozenset({"kept", "preview", "cut"})


# Per seq: (action, rule). Plain tuples: a payload explains every seq of its window,
# and one frozen dataclass per seq (and per merge step) cost more than the rest of
# the bookkeeping; `Decision`s are made once per run.
Decided = dict[int, tuple[Action, str]]


def per_seq(view: HistoryView, sel: Selection, aside: Iterable[SetAside]) -> Decided:
    out: Decided = {}
    for s in aside:
        out[s.message.seq] = (s.action, s.rule)
    for unit in view.units:
        picked = sel.picks.get(unit.index)
        if picked is None:
            dropped: tuple[Action, str] = (
                # Below the watermark the summary stands for what is not sent.
                ("excluded", "summarized")
                if unit.compacted
                else ("dropped", sel.rules.get(unit.index, "budget"))
            )
            for m in unit.messages:
                out[m.seq] = dropped
            continue
        form, rule = picked
        _, actions = unit.render(form)
        # One message carries the unit's reason; its tool-group mates say why they follow.
        lead = (
            next((m for m in unit.messages if m.pinned), unit.messages[0])
            if rule == "pinned"
            else unit.messages[0]
        )
        for m, action in zip(unit.messages, actions, strict=True):
            out[m.seq] = (action, rule if m is lead else "tool_group")
    return out


def encode(decided: Decided, from_seq: int | None) -> tuple[list[Decision], int]:
    """Decisions in seq order with gaps filled as dropped, merged into runs; and the drop count."""
    runs: list[list[Any]] = []  # [seq, through, action, rule]
    dropped = 0
    expected = from_seq

    def push(seq: int, through: int, action: Action, rule: str) -> None:
        if runs:
            last = runs[-1]
            if last[2] == action and last[3] == rule and last[1] + 1 == seq:
                last[1] = through
                return
        runs.append([seq, through, action, rule])

    for seq in sorted(decided):
        if expected is not None and seq > expected:
            push(expected, seq - 1, "dropped", "budget")
            dropped += seq - expected
        action, rule = decided[seq]
        push(seq, seq, action, rule)
        if action == "dropped":
            dropped += 1
        # max: the turn anchor may come from below the watermark (seq < from_seq).
        expected = seq + 1 if expected is None else max(expected, seq + 1)
    out = [Decision(a, action, rule, b if b != a else None) for a, b, action, rule in runs]
    return out, dropped


def kept_seqs(decided: Decided) -> tuple[int, ...]:
    return tuple(seq for seq in sorted(decided) if decided[seq][0] in _SENT)
