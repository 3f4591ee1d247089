"""A trim's choice of payload: recency first, then the longest prefix the cache keeps
(SPEC §3 "Recency before stability"; app/context/stability.py decides when a trim
happens, this module what it keeps of the previous payload)."""

from __future__ import annotations

from app.context.strategies.base import Selection, hard_rule
from app.context.trim_state import Layout
from app.context.view import Form, HistoryView, Unit

# Of the tokens `fresh` sends whole in its newest steps, the share a trim keeps whole
# when it masks more to keep the previous payload's oldest steps (and its prefix).
FULL_FLOOR = 0.67


def _previous_units(view: HistoryView, layout: Layout) -> list[tuple[Unit, Form, str]]:
    """The history units of the payload `layout` gave (the previous payload), log order."""
    kept = {seqs: (form, rule) for seqs, form, rule in layout.kept}
    out: list[tuple[Unit, Form, str]] = []
    for unit in view.units:
        seqs = unit.seqs
        if seqs in kept:
            form, rule = kept[seqs]
            out.append((unit, Form(form), rule))
        elif unit.messages[-1].seq > layout.through_seq:
            out.append(
                (unit, Form.FULL, hard_rule(unit) if unit.pinned or unit.latest_user else "new")
            )
    return out


def _is_step(unit: Unit, hard: set[int]) -> bool:
    """A unit of the agent's own work: not the user's, not a summary, not mandatory, not
    below the watermark (app/context/backfill.py: sent whole or not at all)."""
    return (
        unit.kind not in ("user", "summary")
        and not unit.pinned
        and unit.index not in hard
        and not unit.compacted
    )


def keep_masked(
    view: HistoryView, layout: Layout, fresh: Selection, target: int
) -> Selection | None:
    """A trim that keeps the oldest steps the previous payload sent, masked, where that
    costs the agent little of its recent work; None when it would cost more.

    `fresh` is the strategy's own selection at the low-water mark: the mandatory units,
    the newest steps whole, older ones masked, the oldest left out. Left alone, each
    trim would leave out a few more of the oldest steps and so change the payload right
    after its head: the provider's cache would serve the head and nothing else. This
    keeps the previous payload's first step and every step after it instead (masked:
    the ones it sent masked go exactly as they were sent), and makes room by masking
    `fresh`'s oldest whole steps, oldest first (SPEC §3: old tool outputs give way to
    previews before any step is dropped), as long as the steps `fresh` sends whole keep
    `FULL_FLOOR` of their tokens. So the masked steps in front stay byte for byte the
    same from trim to trim, and the oldest leave in one batch, when the newest would
    otherwise be masked too (then `fresh` is taken as it is: its masked share is small,
    so the following trims have room to keep theirs).
    """
    prev = _previous_units(view, layout)
    units = view.units
    if not prev or not units:
        return None
    hard = {u.index for u in view.hard()} | {units[-1].index}
    prev_steps = {u.index: (form, rule) for u, form, rule in prev if _is_step(u, hard)}
    if not prev_steps:
        return None
    first_prev = min(prev_steps)
    # The start of `fresh`'s newest contiguous run: what it leaves out before it is old.
    first_fresh = len(units)
    while first_fresh > 0 and units[first_fresh - 1].index in fresh.picks:
        first_fresh -= 1
    sel = Selection(picks=dict(fresh.picks), rules=dict(fresh.rules), warnings=list(fresh.warnings))
    if first_fresh <= first_prev:
        # `fresh` reaches back past the steps the previous payload had already left out:
        # sending them again would change the payload right after its head, for steps
        # older than any it sends.
        for unit in units[:first_prev]:
            if unit.index in sel.picks and _is_step(unit, hard):
                del sel.picks[unit.index]
        return sel
    total = fresh.cost(view)
    for unit in units[first_prev:first_fresh]:
        kept = prev_steps.get(unit.index)
        if kept is None or unit.index in sel.picks:
            continue
        # Masked as it was sent: a step cut to the lines later steps name stays so.
        form = Form.LINES if kept[0] is Form.LINES else Form.COMPACT
        sel.pick(unit, form, kept[1])
        total += unit.cost(form)
    whole = [
        u for u in units[first_fresh:] if _is_step(u, hard) and sel.picks[u.index][0] is Form.FULL
    ]
    whole_tokens = sum(u.cost(Form.FULL) for u in whole)
    floor = FULL_FLOOR * whole_tokens
    for unit in whole:  # oldest first
        if total <= target:
            break
        full = unit.cost(Form.FULL)
        if whole_tokens - full < floor:
            return None
        sel.picks[unit.index] = (Form.COMPACT, sel.picks[unit.index][1])
        total -= full - unit.cost(Form.COMPACT)
        whole_tokens -= full
    return sel if total <= target else None
