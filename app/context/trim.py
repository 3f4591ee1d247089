"""A trim's choice of payload: recency first, then the longest prefix the cache keeps
(SPEC §3 "Recency before stability"; app/context/stability.py decides when a trim
happens, this module what it keeps of the previous payload)."""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence

from app.context.layout import Layout
from app.context.strategies.base import Selection, hard_rule
from app.context.view import Form, HistoryView, Unit


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


def _leading(view: HistoryView, sel: Selection, prev: list[tuple[Unit, Form, str]]) -> int:
    """How many leading units of `prev` the payload of `sel` repeats, in the same form."""
    n = 0
    picked = [(u, sel.picks[u.index][0]) for u in view.units if u.index in sel.picks]
    for (unit, form), (before, bform, _) in zip(picked, prev, strict=False):
        if unit is not before or form != bform:
            break
        n += 1
    return n


def keep_prefix(
    view: HistoryView, layout: Layout, fresh: Selection, target: int
) -> Selection | None:
    """A trim that keeps the previous payload's leading units as they were sent, where
    that costs the agent none of its recent work.

    `fresh` is the strategy's own selection at the low-water mark: the mandatory units,
    the newest units newest first, older ones in the room left. Its newest contiguous
    run is kept exactly as `fresh` sends it (SPEC §3 "Recency before stability"); only
    the older picks may give way to the longest run of the previous payload's leading
    units, in the form they were sent, so that the provider's cache still serves them.
    Accepted only when it keeps every unit `fresh` keeps that the user relies on: the
    hard units and every user message, each in at least the form `fresh` sends it in.
    None when no such prefix beats `fresh`'s own.
    """
    prev = _previous_units(view, layout)
    if not prev:
        return None
    floor = _leading(view, fresh, prev)
    units = view.units
    users = {i: form for i, (form, _) in fresh.picks.items() if units[i].kind == "user"}
    hard = {u.index for u in view.hard()}
    if units:
        hard.add(units[-1].index)
    # Recency before stability (SPEC §3): the newest contiguous run `fresh` keeps stays
    # as `fresh` sends it, whatever prefix that costs; only older picks give way.
    for unit in reversed(units):
        if unit.index not in fresh.picks:
            break
        hard.add(unit.index)
    # Every head size is tried, longest first, so each is priced from running sums
    # (linear in the view), never by re-pricing a whole selection per size: a trim at
    # 100k messages tried ~300 sizes over ~500 units.
    head_cost = _head_costs(prev, users, hard, target)
    usable = len(head_cost) - 1
    # The units a selection must hold: in the head when at or before its last unit,
    # else among `fresh`'s picks (from which only other units are dropped).
    needed = sorted(hard | users.keys())
    lacking_in_fresh = max((i for i in hard if i not in fresh.picks), default=-1)
    covered = [0]
    for unit, _, _ in prev[:usable]:
        covered.append(covered[-1] + (unit.index in hard or unit.index in users))
    order, fresh_cost, tail_cost = _fresh_costs(units, fresh)
    for size in range(usable, floor, -1):
        last = prev[size - 1][0].index
        if lacking_in_fresh > last or covered[size] != bisect.bisect_right(needed, last):
            continue
        start = bisect.bisect_right(order, last)
        cost = head_cost[size] + tail_cost[start]
        dropped: set[int] = set()
        for n in range(start, len(order)):  # oldest first: the newer-old region goes first
            if cost <= target:
                break
            i = order[n]
            if i in hard or units[i].kind == "user":
                continue
            cost -= fresh_cost[n]
            dropped.add(i)
        if cost > target:
            continue
        return _prefixed(fresh, prev[:size], order[start:], dropped)
    return None


def _head_costs(
    prev: list[tuple[Unit, Form, str]],
    users: Mapping[int, Form],
    hard: set[int],
    target: int,
) -> list[int]:
    """The running cost of `prev`'s leading units, over the longest head that may lead."""
    # The most prefix that fits at all, cut before its first unit that may not lead
    # (a pinned unit compacted, or a hard user unit `fresh` sends in full compacted):
    # every longer head would hold it too.
    head_cost = [0]
    for unit, form, _ in prev:
        cost = unit.cost(form)
        if head_cost[-1] + cost > target:
            break
        want = users.get(unit.index) if unit.index in hard else None
        if (unit.pinned and form != Form.FULL) or (want is Form.FULL and form != Form.FULL):
            break
        head_cost.append(head_cost[-1] + cost)
    return head_cost


def _fresh_costs(units: Sequence[Unit], fresh: Selection) -> tuple[list[int], list[int], list[int]]:
    """`fresh`'s picks in log order, the cost of each, and the cost of each suffix."""
    order = sorted(fresh.picks)
    fresh_cost = [units[i].cost(fresh.picks[i][0]) for i in order]
    tail_cost = [0] * (len(order) + 1)
    for n in range(len(order) - 1, -1, -1):
        tail_cost[n] = tail_cost[n + 1] + fresh_cost[n]
    return order, fresh_cost, tail_cost


def _prefixed(
    fresh: Selection, head: list[tuple[Unit, Form, str]], tail: list[int], dropped: set[int]
) -> Selection:
    """`head` as it was sent, then `fresh`'s picks of `tail` less `dropped`."""
    sel = Selection(rules=dict(fresh.rules), warnings=list(fresh.warnings))
    for unit, form, rule in head:
        sel.pick(unit, form, rule)
    for i in tail:
        if i not in dropped:
            sel.picks[i] = fresh.picks[i]
    return sel
