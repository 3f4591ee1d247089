"""`summary`: the compacted summary, the user's messages, and a window of the newest steps.

The pipeline renders the summary (a summary-class system message, "Summary of
the conversation so far: … (messages up to #N)") right before the history; this
strategy makes it required, so it is kept even when the mandatory history then
goes over budget, where the other strategies give the summary up first.

Over the effective history (`seq > watermark`): pinned units and the latest
user message (the turn anchor) first, compacted only if they must be; the
newest unit, FULL if it fits, else COMPACT; then every other user message,
short ones first and newest first (long ones cut), because the user's words
outrank any tool output; then a window of the newest units back from the
end, each FULL if it fits, else COMPACT (tool outputs as previews, long texts
cut), stopping at the first that fits in neither (old steps go). Cut user
messages are restored to FULL last, if room is left.
"""

from __future__ import annotations

from app.context.strategies.base import Selection, Strategy, register
from app.context.view import Form, HistoryView, Unit


@register
class SummaryWindow(Strategy):
    name = "summary"
    summary_required = True

    def select(self, view: HistoryView, budget: int) -> Selection:
        units = view.units
        if not units:
            return Selection()
        sel = Selection()
        total = sel.take_mandatory(view, budget)

        def fits(u: Unit, form: Form) -> bool:
            return u.min_cost(form) + total <= budget and u.cost(form) + total <= budget

        newest = units[-1]
        if newest.index not in sel.picks and fits(newest, Form.COMPACT):
            form = Form.FULL if fits(newest, Form.FULL) else Form.COMPACT
            sel.pick(newest, form, "window")
            total += newest.cost(form)
        cut_over = view.limits.cut_over_tokens
        users = [u for u in units if u.kind == "user" and u.index not in sel.picks]
        for u in sorted(users, key=lambda u: (u.logged_tokens > cut_over, -u.index)):
            if fits(u, Form.COMPACT):
                sel.pick(u, Form.COMPACT, "user")
                total += u.cost(Form.COMPACT)
        for u in reversed(units):
            if u.index in sel.picks:
                continue
            form = Form.FULL if fits(u, Form.FULL) else Form.COMPACT
            if form is Form.COMPACT and not fits(u, form):
                break
            sel.pick(u, form, "window")
            total += u.cost(form)
        for u in reversed(units):
            picked = sel.picks.get(u.index)
            if picked is None or picked[0] is Form.FULL or u.kind != "user" or u.pinned:
                continue
            extra = u.cost(Form.FULL) - u.cost(Form.COMPACT)
            if total + extra <= budget:
                sel.picks[u.index] = (Form.FULL, picked[1])
                total += extra
        return sel
