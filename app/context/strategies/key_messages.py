"""`key_messages` (the default): mandatory units first, the rest by explainable score.

Mandatory: pinned units, the latest user message, the newest unit (what the
model is reacting to, often a tool result) and every unit of the last
`recent_turns` turns (default 2: the exchange in progress and the one before
it; older turns compete by score, where recency is one signal, so a short
early constraint can beat a long recent digression).

Next come the user's constraints ("never…", "must…" in a user message) from any
turn: short, and what the model must not forget, so they are kept whenever the
selection still fits with mandatory units compacted; only if it cannot are
they left to compete by score.

The rest is scored by named signals and picked greedily, best first, FULL
form if it fits, else COMPACT. The rule of a kept unit names its score and top
signals, e.g. `score:14(user_constraint,constraint,user)`.

Over budget, in order: (1) every mandatory unit (and constraint) goes COMPACT
(tool results become short previews, long texts are cut to head and key
lines) and the newest are restored to FULL while they fit; (2) last of all
only the last `fallback_turns` (K=4) turns and the user's constraints compete,
in COMPACT form, by score, around the hard set (pinned + latest user message).
If the hard set alone does not fit even compacted, the pipeline reports
`over_budget`.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache, partial

from app.context.signals import SCAN_CHARS, found
from app.context.strategies.base import (
    Selection,
    Strategy,
    fit_by_compacting,
    hard_rule,
    register,
)
from app.context.view import Form, HistoryView, Unit
from app.messages.types import LoggedMessage

POINTS = {
    "user_constraint": 6,
    "summary": 6,
    "constraint": 5,
    "user": 3,
    "decision": 3,
    "path": 2,
    "code": 2,
    "number": 1,
}
SIGNAL_ORDER = ("constraint", "decision", "path", "code", "number")
RECENCY_MAX = 6
MIN_UNIT_TOKENS = 5  # the framing of the smallest message: below it nothing fits
BIG_TOOL_PENALTY = (2, 4)  # over the preview limit, over four times it


def prose_signals(m: LoggedMessage) -> frozenset[str]:
    """Signals in the text of a user, assistant or system message and in its tool calls."""
    names = set(found(m.text))
    for call in m.body.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            names.update(found(f"{fn.get('name')} {str(fn.get('arguments'))[:SCAN_CHARS]}"))
    return frozenset(names)


def score(unit: Unit, distance: int, preview_tokens: int) -> tuple[int, list[tuple[str, int]]]:
    """Points of a unit and the signals that gave them; `distance` counts units from the end."""
    tool_tokens = 0
    names: set[str] = set()
    for m, memo in zip(unit.messages, unit.memos(), strict=True):
        if m.role == "tool":
            tool_tokens += m.token_count
        else:
            # Once per message object: the next call finds them (see app/context/memo.py).
            names.update(memo.get("prose_signals", partial(prose_signals, m)))
    signals: list[tuple[str, int]] = []
    if unit.kind in ("user", "summary"):
        signals.append((unit.kind, POINTS[unit.kind]))
    if unit.kind == "user" and "constraint" in names:
        # What the user required or forbade outranks what is merely recent: a model
        # that forgets "never deploy on Fridays" fails the user, one that forgets a
        # recent digression does not.
        signals.append(("user_constraint", POINTS["user_constraint"]))
    signals.extend((name, POINTS[name]) for name in SIGNAL_ORDER if name in names)
    recency = RECENCY_MAX - distance // 2
    if recency > 0:
        signals.append(("recency", recency))
    if tool_tokens > preview_tokens:
        big = BIG_TOOL_PENALTY[1] if tool_tokens > 4 * preview_tokens else BIG_TOOL_PENALTY[0]
        signals.append(("big_tool", -big))
    return sum(p for _, p in signals), signals


def explain(points: int, signals: list[tuple[str, int]]) -> str:
    return _explain(points, tuple(signals))


@lru_cache(maxsize=1024)  # a few dozen distinct signal sets recur in every payload
def _explain(points: int, signals: tuple[tuple[str, int], ...]) -> str:
    top = sorted((s for s in signals if s[1] > 0), key=lambda s: -s[1])[:3]
    return f"score:{points}({','.join(name for name, _ in top)})"


@register
class KeyMessages(Strategy):
    name = "key_messages"

    def __init__(self, recent_turns: int = 2, fallback_turns: int = 4) -> None:
        self.recent_turns = recent_turns
        self.fallback_turns = fallback_turns

    def select(self, view: HistoryView, budget: int) -> Selection:
        units = view.units
        if not units:
            return Selection()
        newest = units[-1]
        mandatory = {u.index: u for u in (*view.hard(), newest)}
        first_recent = view.last_turn - self.recent_turns + 1
        for u in units:
            if u.turn >= first_recent:
                mandatory.setdefault(u.index, u)

        hard = {u.index for u in view.hard()} | {newest.index}
        sel = Selection()
        for u in mandatory.values():
            sel.pick(u, Form.FULL, hard_rule(u) if u.index in hard else "recent")

        # The user's constraints come next, from any turn: they are short and what the
        # model must not forget, so recent units are compacted to make room for them
        # before any is dropped. Only if that cannot fit are they left to compete.
        constraints = self._user_constraints(view, self._rest(units, sel))
        if constraints:
            trial = Selection(dict(sel.picks))
            for u, rule in constraints:
                trial.pick(u, Form.FULL, rule)
            if self._fits(trial, view, budget) or self._newest_full_rest_compact(
                trial, view, budget
            ):
                left = budget - trial.cost(view)
                self._fill(view, trial, self._rest(units, trial), left, compact_only=False)
                return trial

        if self._fits(sel, view, budget) or self._newest_full_rest_compact(sel, view, budget):
            left = budget - sel.cost(view)
            self._fill(view, sel, self._rest(units, sel), left, compact_only=False)
            return sel

        sel = Selection()
        total = sel.take_mandatory(view, budget)
        first_kept_turn = view.last_turn - self.fallback_turns + 1
        keep = {u.index for u, _ in constraints}
        pool = [u for u in self._rest(units, sel) if u.turn >= first_kept_turn or u.index in keep]
        self._fill(view, sel, pool, budget - total, compact_only=True, first=newest)
        return sel

    @staticmethod
    def _user_constraints(view: HistoryView, pool: Iterable[Unit]) -> list[tuple[Unit, str]]:
        """User messages stating a constraint, with the rule that would explain them."""
        last = len(view.units) - 1
        preview = view.limits.preview_tokens
        out = []
        for u in pool:
            if u.kind != "user":
                continue
            points, signals = score(u, last - u.index, preview)
            if any(name == "user_constraint" for name, _ in signals):
                out.append((u, explain(points, signals)))
        return out

    @staticmethod
    def _rest(units: Iterable[Unit], sel: Selection) -> list[Unit]:
        return [u for u in units if u.index not in sel.picks]

    @staticmethod
    def _newest_full_rest_compact(sel: Selection, view: HistoryView, budget: int) -> bool:
        """Newest picks FULL while the older ones still fit COMPACT, the rest COMPACT.

        Renders each unit in about one form. The floors of the older units are
        estimates: when they prove optimistic, everything older goes COMPACT and
        the newer FULL picks are compacted too, oldest first, before giving up;
        False then (the last-resort fallback takes over).
        """
        order = sorted(sel.picks, reverse=True)
        units = view.units
        floors = [units[i].min_cost(Form.COMPACT) for i in order]
        older = sum(floors)
        total = 0
        for k, i in enumerate(order):
            unit, rule = units[i], sel.picks[i][1]
            older -= floors[k]
            room = budget - total - older
            full = unit.min_cost(Form.FULL) <= room and unit.cost(Form.FULL) <= room
            form = Form.FULL if full or unit.pinned else Form.COMPACT
            sel.picks[i] = (form, rule)
            total += unit.cost(form)
            if total + older > budget:
                for j in order[k + 1 :]:
                    if not units[j].pinned:
                        sel.picks[j] = (Form.COMPACT, sel.picks[j][1])
                total = sel.cost(view)
                break
        if total > budget:  # the floors were optimistic: compact more, oldest first
            total = fit_by_compacting(sel, view, [units[i] for i in order], budget)
        return total <= budget

    @staticmethod
    def _fits(sel: Selection, view: HistoryView, budget: int) -> bool:
        # Newest first with an early exit: past the budget, older forms need no rendering.
        total = 0
        for i in sorted(sel.picks, reverse=True):
            form = sel.picks[i][0]
            total += view.units[i].cost(form)
            if total > budget:
                return False
        return True

    @staticmethod
    def _fill(
        view: HistoryView,
        sel: Selection,
        pool: list[Unit],
        left: int,
        *,
        compact_only: bool,
        first: Unit | None = None,
    ) -> None:
        if left <= 0 or not pool:
            return
        last = len(view.units) - 1
        preview = view.limits.preview_tokens
        ranked = []
        for u in pool:
            if u.min_cost(Form.COMPACT) > left:
                continue  # cannot fit in any form: not worth scoring
            points, signals = score(u, last - u.index, preview)
            ranked.append((u is first, points, u.index, u, signals))
        ranked.sort(key=lambda r: (r[0], r[1], r[2]), reverse=True)
        forms = (Form.COMPACT,) if compact_only else (Form.FULL, Form.COMPACT)
        for _, points, _, u, signals in ranked:
            if left < MIN_UNIT_TOKENS:
                break
            for form in forms:
                if u.min_cost(form) <= left and (cost := u.cost(form)) <= left:
                    sel.pick(u, form, explain(points, signals))
                    left -= cost
                    break
