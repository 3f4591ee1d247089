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
        if self.start_on_user:
            users = [i for i in sel.picks if view.units[i].kind == "user"]
            if users:
                first_user = min(users)
                for unit in window:
                    if unit.index < first_user:
                        del sel.picks[unit.index]
                        sel.rules[unit.index] = "start_on_user"
        return sel
