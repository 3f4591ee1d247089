"""`key_messages` (the default): the user's words first, then the rest by explainable score.

Mandatory: pinned units, the latest user message (the turn anchor: the user
message that opens the current turn) and the newest unit (what the model is
reacting to, often a tool result).

Next, every other user message of the effective history, whatever it says: a
30-token "from here on, dates as ISO 8601" typed in the middle of an agent run
is worth more than any kilobyte of tool output, and whether a user's message
matters cannot be told from its words (no keyword list decides it). Then every
unit of the last `recent_turns` turns (default 2: the exchange in progress and
the one before it; in an agent run, the run's steps since the last user
message).

The rest is scored by named signals (constraints, decisions, paths, code,
numbers, recency; big tool outputs penalised) and picked greedily, best
first, FULL form if it fits, else COMPACT. The rule of a kept unit names its
score and top signals, e.g. `score:9(constraint,path,recency)`; a user message
kept as such says `user:…` with its signals, for explanation only.

Over budget, in order, so that no user message is dropped while something
else could give way: (1) every unit above goes COMPACT (tool results become
short previews, long texts are cut to head and key lines) and the newest are
restored to FULL while they fit; (2) if even that does not fit: the hard set
(compacted if it must be), the newest unit compacted if it fits, then the
user messages (short ones first, newest
first; long ones cut), then the recent units compacted, newest first, the old
steps that do not fit left out; cut user messages are restored first, then
recent units to FULL, newest first; last of all only the last
`fallback_turns` (K=4) turns compete for what is left, compacted, by score.
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
from app.conversation import LoggedMessage

POINTS = {
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
        hard = {u.index for u in view.hard()} | {newest.index}
        first_recent = view.last_turn - self.recent_turns + 1
        # Every user message of the effective history, whatever it says: which of them
        # matter cannot be told from their words (no keyword list decides it).
        users = [u for u in units if u.kind == "user" and u.index not in hard]
        recent = [
            u for u in units if u.turn >= first_recent and u.index not in hard and u.kind != "user"
        ]

        sel = Selection()
        for i in sorted(hard):
            sel.pick(units[i], Form.FULL, hard_rule(units[i]))
        for u in users:
            sel.pick(u, Form.FULL, self._user_rule(view, u))
        for u in recent:
            sel.pick(u, Form.FULL, "recent")
        if self._fits(sel, view, budget) or self._newest_full_rest_compact(sel, view, budget):
            left = budget - sel.cost(view)
            self._fill(view, sel, self._rest(units, sel), left, compact_only=False)
            return sel
        return self._tight(view, budget, users, recent)

    def _tight(
        self, view: HistoryView, budget: int, users: list[Unit], recent: list[Unit]
    ) -> Selection:
        """The budget cannot hold the user's messages and the recent turns, even compacted.

        In order, each step only with what the previous ones left: the hard set
        (compacted if it must be); the newest unit, compacted; every user message
        (short ones first, newest first; long ones cut), because a user's words
        are worth more than any tool output; the recent units compacted (tool
        outputs as previews, long texts cut), newest first, skipping what does not
        fit (old steps go); then cut user messages restored, then recent units
        restored to FULL, newest first; last, the rest of the last
        `fallback_turns` turns compete by score, compacted.
        """
        units = view.units
        sel = Selection()
        total = sel.take_mandatory(view, budget)
        cut_over = view.limits.cut_over_tokens

        def add(u: Unit, form: Form, rule: str) -> None:
            nonlocal total
            if u.index in sel.picks:
                return
            if u.min_cost(form) + total <= budget and (cost := u.cost(form)) + total <= budget:
                sel.pick(u, form, rule)
                total += cost

        newest = units[-1]
        add(newest, Form.COMPACT, "latest")
        for u in sorted(users, key=lambda u: (u.logged_tokens > cut_over, -u.index)):
            add(u, Form.COMPACT, self._user_rule(view, u))
        # What the agent just read, whole, before any older step is sent at all.
        chosen = sel.picks.get(newest.index)
        if chosen is not None and chosen[0] is Form.COMPACT and not newest.pinned:
            extra = newest.cost(Form.FULL) - newest.cost(Form.COMPACT)
            if total + extra <= budget:
                sel.picks[newest.index] = (Form.FULL, chosen[1])
                total += extra
        for u in reversed(recent):
            add(u, Form.COMPACT, "recent")
        picked = [u for u in reversed(units) if u.index in sel.picks]
        # Cut user messages are restored before any tool output or assistant text.
        for u in sorted(picked, key=lambda u: u.kind != "user"):
            form, rule = sel.picks[u.index]
            if form is Form.FULL or u.pinned:
                continue
            extra = u.cost(Form.FULL) - u.cost(Form.COMPACT)
            if total + extra <= budget:
                sel.picks[u.index] = (Form.FULL, rule)
                total += extra
        first_kept_turn = view.last_turn - self.fallback_turns + 1
        pool = [u for u in self._rest(units, sel) if u.turn >= first_kept_turn]
        self._fill(view, sel, pool, budget - total, compact_only=True, first=units[-1])
        return sel

    @staticmethod
    def _user_rule(view: HistoryView, unit: Unit) -> str:
        last, preview = len(view.units) - 1, view.limits.preview_tokens
        points, signals = score(unit, last - unit.index, preview)
        return "user:" + explain(points, signals).removeprefix("score:")

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
        newest = units[-1]
        if sel.picks[newest.index][0] is Form.COMPACT and not newest.pinned:
            # Every older step masked, yet no room for what the agent just read: old
            # steps must go instead (the tight path), recency before completeness.
            return False
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
