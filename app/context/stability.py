"""Prompt-cache stability (SPEC §3 "Payload stability"): when a payload's selection may change.

Providers bill the part of an input that repeats the start of a recent call at
about a tenth of the price, so consecutive payloads must share their prefix.
A strategy re-selecting on every call reshuffles what it keeps as the log
grows; this layer freezes its choice instead:

- A **payload stream** is every call of one session with the same parameters
  (strategy, budget, reserve, mode, format, preview limit and tokenizer:
  `params_key`). The system block, tools and dynamic context are not part of
  it: they are the head of the payload, sent whole, and a call that changes
  them changes only the head.
- A stream's **layout** is what its last trim kept: the units (messages, whole
  tool groups) up to `through_seq`, each in the form it was sent (full or
  compacted), for one session `generation` and `watermark`. The payload is
  that layout plus every unit appended after `through_seq`, in full, in log
  order. While that fits the budget nothing else is consulted: the previous
  payload plus the new messages, byte for byte.
- When it no longer fits, or the layout no longer holds (a compaction moved the
  watermark, a tail delete or clear bumped the generation, a kept message is
  gone, a pinned or latest user message would be missing), the strategy
  selects again, against the **low-water mark** `trim_target_ratio` x budget
  (0.7 by default) so the following calls have room to append. That new layout
  is written with one upsert (`context_layouts`, keyed by tenant, session and
  `params_key`). No other call writes anything: a stream that never trimmed
  has no row (its layout is everything after the watermark).

A trim keeps what the agent just did before anything the cache would like
(SPEC §3 "Recency before stability"). The strategy's fresh selection at the
low-water mark holds the mandatory units and the user's messages, then the
agent's steps newest first (the older ones masked: tool outputs as previews, long
texts cut), never an older step while a newer one is left out. `keep_masked`
(app/context/trim.py) may keep the previous payload's masked steps in front, as
they were sent, so that the provider's cache still serves them, masking more of
the fresh selection's oldest whole steps to make room, but only while the steps
sent whole keep `FULL_FLOOR` of their tokens; the hard units and every user
message stay as the strategy chose them. A FIFO
strategy (`sliding_window`) keeps no older prefix at all: its history is the
newest contiguous run plus the hard units on every call, and a replay that no
longer is (a new user message took the turn anchor's place) trims instead. The
strategy's `trim` makes the selection: by default its selection at the mark, while
`sliding_window` cuts its run down to the mark but not below it.

So the strategy decides *what* a trim keeps, this layer decides *when*. The
state lives in PostgreSQL: every replica replays the same layout, a restart
changes nothing, and two replicas trimming at once write the same row (the
selection is a pure function of the log and the parameters; of two different
trims the one for the newer log wins).

**The previous payload, without a write per call.** The server does not record
what it sent. `prefix_id` names a payload: the layout, the last seq of the log
it was built from, and digests of its tools and head messages. A client that
echoes the previous response's `prefix_id` (`previous_prefix_id`) gets an exact
`usage.stable_prefix_tokens`: the server rebuilds that earlier payload from its
layout and the log and compares. Without the echo the server assumes the
previous call was for the log without the newest unit, with the same head:
right for an agent loop that appends one step per model call. Across a tail
delete or clear (seqs reused) only the head is claimed: a lower bound.

`stable_prefix_tokens` counts, when the tools are unchanged, the tools'
tokens plus every leading message identical to the previous payload's
(`stable_prefix_messages` of them): the part a provider's prompt cache can
serve. Nothing is shared when the tools changed (providers render them first).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from app.context import backfill
from app.context.strategies.base import NoSelection, Selection, Strategy, hard_rule
from app.context.trim import keep_masked
from app.context.trim_state import Layout
from app.context.view import Form, HistoryView, Unit
from app.core.conversation import LoggedMessage

if TYPE_CHECKING:  # only read: its generation, watermark and seqs
    from app.db.models import SessionRow

# A stream with no layout row yet (or a stale one) starts from "everything after
# the watermark"; if the window read did not reach that far back, more than this
# many unread messages are not fetched one by one: the call trims instead.
MAX_FETCH = 512


def replay(
    view: HistoryView, layout: Layout, budget: int, *, fifo: bool = False
) -> Selection | None:
    """The layout's selection over `view`, or None when it does not hold or fit (or, for a
    FIFO strategy, when it is no longer the newest run plus the hard units: a new user
    message took the turn anchor's place)."""
    by_seqs = {u.seqs: u for u in view.units}
    if view.refs is not None:
        # Steps cut to the lines later steps name are cut as the trim that chose them
        # saw the log (to the identifiers it recorded; app/context/references.py): the
        # payload's prefix stays the same until the next trim.
        view.refs.set_horizon(
            None if layout.through_seq <= layout.watermark else layout.through_seq,
            fixed=layout_lines(layout),
        )
    sel = Selection()
    for seqs, form, rule in layout.kept:
        unit = by_seqs.get(seqs)
        if unit is None or (unit.pinned and form != Form.FULL):
            return None
        if unit.compacted and rule != backfill.RULE:
            return None  # the turn anchor it kept is the summary's now: a new turn began
        sel.pick(unit, Form(form), rule)
    dropped = dict(layout.dropped)
    # A layout that decided nothing past the watermark (no trim since the last
    # compaction) holds the whole view: the turn anchor too, which stays below the
    # watermark in the effective history. Taken as decided, it forced a trim to the
    # low-water mark on the first call after every compaction that passed it.
    untrimmed = layout.through_seq <= layout.watermark
    for unit in view.units:
        if unit.index in sel.picks or (untrimmed and unit.compacted):
            continue
        if untrimmed or unit.messages[-1].seq > layout.through_seq:
            sel.pick(unit, Form.FULL, hard_rule(unit) if unit.pinned or unit.latest_user else "new")
        elif unit.first_seq in dropped:
            sel.rules[unit.index] = dropped[unit.first_seq]
    if any(u.index not in sel.picks for u in view.hard()):
        return None
    if fifo and not _newest_run(view, sel):
        return None
    if sel.cost(view) > budget:
        return None
    return sel


def _newest_run(view: HistoryView, sel: Selection) -> bool:
    """Whether every unit from the oldest non-hard pick to the end of the history is picked:
    the newest contiguous run plus the hard units, nothing older."""
    hard = {u.index for u in view.hard()}
    first = min((i for i in sel.picks if i not in hard), default=len(view.units))
    return all(i in sel.picks for i in range(first, len(view.units)))


def layout_of(view: HistoryView, sel: Selection, session: SessionRow) -> Layout:
    """The layout a trim's selection fixes: every unit of the view is decided."""
    kept = tuple(
        (u.seqs, int(sel.picks[u.index][0]), sel.picks[u.index][1])
        for u in view.units
        if u.index in sel.picks
    )
    dropped = tuple(
        (u.first_seq, sel.rules[u.index])
        for u in view.units
        if u.index not in sel.picks and sel.rules.get(u.index, "budget") != "budget"
    )
    through = max((u.messages[-1].seq for u in view.units), default=session.last_compaction_seq)
    lines: list[tuple[int, tuple[str, ...]]] = []
    if view.refs is not None:
        for u in view.units:
            if u.index in sel.picks and sel.picks[u.index][0] is Form.LINES:
                # Every output, none too: one cut to no identifier went as a preview.
                lines += (
                    (m.seq, tuple(sorted(view.refs.lines(m, u))))
                    for m in u.messages
                    if m.role == "tool"
                )
    return Layout(
        session.generation, session.last_compaction_seq, through, kept, dropped, tuple(lines)
    )


def layout_lines(layout: Layout) -> dict[int, frozenset[str]]:
    """The identifiers each tool output the layout cut was cut for."""
    return {seq: frozenset(names) for seq, names in layout.lines}


class StableStrategy(Strategy):
    """Wraps a strategy: replays the stream's layout while it holds and fits, and asks the
    strategy for a new selection (at the low-water mark) only when it does not. It answers
    to its inner strategy's name: the payload names the strategy that selected.
    `replay_only`: the layout as it is or nothing (`NoSelection`); no trim, no backfill."""

    def __init__(
        self,
        inner: Strategy,
        layout: Layout | None,
        session: SessionRow,
        limit: int,
        ratio: float,
        *,
        replay_only: bool = False,
    ) -> None:
        self.inner = inner
        self.name = inner.name
        self.summary_required = inner.summary_required
        self.fifo = inner.fifo
        self.backfill = inner.backfill
        self.layout = layout or Layout.untrimmed(session)
        self.force = layout is None
        self.session = session
        self.limit = limit
        self.ratio = ratio
        self.replay_only = replay_only
        self.trimmed: Layout | None = None
        self.view: HistoryView | None = None
        self.selection: Selection | None = None

    def select(self, view: HistoryView, budget: int) -> Selection:
        self.view = view
        sel = None if self.force else replay(view, self.layout, budget, fifo=self.fifo)
        if self.replay_only:
            if sel is None:
                raise NoSelection("the layout no longer holds or fits")
            self.trimmed, self.selection = None, sel
            return sel
        # The low-water mark: what the head leaves of ratio x the input limit.
        target = budget - math.ceil((1 - self.ratio) * self.limit)
        if sel is not None:
            self.trimmed = None
            if self.backfill and self.layout.through_seq <= self.layout.watermark:
                # The first payload since a compaction: the room its preserved tail leaves
                # below the low-water mark goes to the newest compacted units, and the
                # layout fixes them (one write per compaction and stream), so the payloads
                # that follow replay them until the next trim.
                before = len(sel.picks)
                sel = backfill.fill(view, sel, target)
                if len(sel.picks) > before:
                    self.trimmed = layout_of(view, sel, self.session)
        else:
            # Cut to the low-water mark. When even the mandatory units do not fit there in
            # full, the whole budget.
            if view.refs is not None:
                # A trim looks at the whole history, but an output the previous payload
                # sent cut stays cut to the same lines: kept masked, it goes as it was sent.
                view.refs.set_horizon(None, fixed=None if self.force else layout_lines(self.layout))
            if sum(u.cost(Form.FULL) for u in view.hard()) > target:
                target = budget
            sel = self.inner.trim(view, target, budget)
            if not self.force and not self.fifo:
                sel = keep_masked(view, self.layout, sel, target) or sel
            self.trimmed = layout_of(view, sel, self.session)
        self.selection = sel
        return sel

    def units_sent(self) -> list[tuple[Unit, Form]]:
        view, sel = self.view, self.selection
        if view is None or sel is None:
            return []
        return [(u, sel.picks[u.index][0]) for u in view.units if u.index in sel.picks]

    @property
    def current(self) -> Layout:
        return self.trimmed or self.layout


def missing_seqs(
    layout: Layout, session: SessionRow, history: Sequence[LoggedMessage]
) -> list[int] | None:
    """The seqs the layout needs that the window did not read; None if too many."""
    have = {m.seq for m in history}
    need = layout.kept_seqs() - have
    newer = session.last_seq - layout.through_seq
    if newer - sum(1 for s in have if s > layout.through_seq) > MAX_FETCH:
        return None
    need.update(s for s in range(layout.through_seq + 1, session.last_seq + 1) if s not in have)
    return sorted(need)
