"""Recent work below the watermark (SPEC §3 "Recency before stability", §5).

A compaction keeps only its preserved tail after the watermark (`keep_recent_ratio` of
the usable budget), so right after one the payload would hold the summary and that
tail, and leave the rest of the budget empty, while the agent's steps just before the
watermark, the ones its next step most likely builds on, are only in the summary.

A strategy that opts in (`Strategy.backfill`: `key_messages`) is offered those steps
as *compacted* units of its view (`Unit.compacted`), and `fill` spends the room the
effective history leaves on them: whole units (a tool group with its call and every
result, or one message), newest first, contiguous from the watermark down, the first
that does not fit ending the run. They stay in log order, between the summary and the
effective history. The summary still stands for them: they are recent context, never
mandatory, and any trim drops them first (they are the oldest units of the view).

- Only once every unit of the effective history is sent whole: an older step is never
  sent while a newer one is masked or left out.
- A compacted user message is not sent again (`recent:compacted` goes on past it): the
  summary carries the user's words verbatim in its `user_messages` section (or folded
  them by its rule), and a user message repeated in the history reads as a new request.
  Pinned messages below the watermark likewise (the summary carries them).
- Only from the first seq every message was read from (`HistoryView.complete_from`):
  a unit below it is in the view because a layout kept it, with unknown gaps before it.
- Never more, with the summary, than the compacted units the view holds: in a short
  session the whole compacted range fits the room, and sending it again beside its own
  summary would make the payload larger than the history it replaces (the bill's
  `full_history_input_tokens`). In a long one the view holds twice the room below the
  watermark, so this never binds.

The units sent are fixed by the stream's layout like any other (app/context/stability.py):
the prefix stays byte for byte the same between trims.
"""

from __future__ import annotations

from app.context.strategies.base import Selection
from app.context.view import Form, HistoryView

RULE = "recent:compacted"

# Whether the run goes on past a compacted user message (and the turn anchor, when the
# watermark moved past it) into the turn before; False: it ends at the turn's start.
ACROSS_TURNS = True


def fill(view: HistoryView, sel: Selection, budget: int) -> Selection:
    """`sel` plus the newest compacted units that fit in `budget` (whole, newest first,
    contiguous); `sel` as it is while any unit of the effective history is not sent
    whole."""
    units = view.units
    newest = next((u.index for u in reversed(units) if u.compacted), None)
    floor = view.complete_from
    if newest is None or floor is None:
        return sel
    picks = sel.picks
    left = budget
    # What the summary costs against what the compacted units in view would cost whole.
    spare = sum(u.cost(Form.FULL) for u in units if u.compacted) - view.summary_tokens
    for u in units:
        picked = picks.get(u.index)
        if u.compacted:
            if picked is not None:
                left -= u.cost(picked[0])
            continue
        if picked is None or picked[0] is not Form.FULL:
            return sel
        left -= u.cost(Form.FULL)
    for u in reversed(units[: newest + 1]):
        if u.first_seq < floor:
            break
        if u.kind in ("user", "summary") or u.pinned or not u.compacted:
            # The turn anchor (sent already), or what the summary carries (see above).
            if u.kind == "user" and not ACROSS_TURNS:
                break
            continue
        if u.index in picks:
            continue
        if u.min_cost(Form.FULL) > left:
            break
        cost = u.cost(Form.FULL)
        if cost > left or cost > spare:
            break
        sel.pick(u, Form.FULL, RULE)
        left -= cost
        spare -= cost
    return sel
