"""`sliding_window`: the newest whole units until the budget is used.

Pinned units and the latest user message are taken first (compacted if even
they do not fit); then units newest first, in FULL form, stopping at the
first one that does not fit so the window stays contiguous. Like LangChain's
`trim_messages(strategy="last", start_on="human")`, window units older than
the first user message kept are dropped (`start_on_user`), because several
providers reject a history that opens with an assistant or tool message.
"""

from __future__ import annotations

from app.context.strategies.base import Selection, Strategy, register
from app.context.view import Form, HistoryView, Unit


@register
class SlidingWindow(Strategy):
    name = "sliding_window"
    fifo = True

    def __init__(self, start_on_user: bool = True) -> None:
        self.start_on_user = start_on_user

    def select(self, view: HistoryView, budget: int) -> Selection:
        sel, window = self._window(view, budget)
        self._start_on_user(view, sel, window)
        return sel

    def trim(self, view: HistoryView, target: int, budget: int) -> Selection:
        """The newest run cut down to the low-water mark, and not below it: the oldest
        units leave while what stays still reaches `target`. A cut at the mark itself
        would leave out a large unit just taken (a tool output read a step ago) that fits
        the budget, for room the cache would like (SPEC §3 "Recency before stability")."""
        sel, window = self._window(view, budget)
        cost = sel.cost(view)
        while window:
            oldest = window[-1]
            if cost - oldest.cost(Form.FULL) < target:
                break
            del sel.picks[oldest.index]
            cost -= oldest.cost(Form.FULL)
            window.pop()
        self._start_on_user(view, sel, window)
        return sel

    @staticmethod
    def _window(view: HistoryView, budget: int) -> tuple[Selection, list[Unit]]:
        """The mandatory units, then the newest units that fit, whole (newest first)."""
        sel = Selection()
        left = budget - sel.take_mandatory(view, budget)
        window: list[Unit] = []
        for unit in reversed(view.units):
            if unit.index in sel.picks:
                continue
            if unit.min_cost(Form.FULL) > left or unit.cost(Form.FULL) > left:
                break
            sel.pick(unit, Form.FULL, "window")
            left -= unit.cost(Form.FULL)
            window.append(unit)
        return sel, window

    def _start_on_user(self, view: HistoryView, sel: Selection, window: list[Unit]) -> None:
        if not self.start_on_user:
            return
        users = [i for i in sel.picks if view.units[i].kind == "user"]
        if users:
            first_user = min(users)
            for unit in window:
                if unit.index < first_user:
                    del sel.picks[unit.index]
                    sel.rules[unit.index] = "start_on_user"
