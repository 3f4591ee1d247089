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
low-water mark holds the mandatory units, then the newest units newest first
(older ones masked: tool outputs as previews, long texts cut), then older ones
in the room left. `keep_prefix` may swap only those older picks for the
previous payload's leading units, as they were sent, so that the provider's
cache still serves them; the newest contiguous run of the fresh selection, the
hard units and every user message stay as the strategy chose them. A FIFO
strategy (`sliding_window`) keeps no older prefix at all: its history is the
newest contiguous run plus the hard units on every call, and a replay that no
longer is (a new user message took the turn anchor's place) trims instead.

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

import bisect
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from sqlalchemy import and_, bindparam, tuple_
from sqlalchemy.dialects.postgresql import insert

from app.context.strategies.base import Selection, Strategy, hard_rule
from app.context.types import TokenCounter
from app.context.view import Form, HistoryView, Unit
from app.conversation import LoggedMessage
from app.db import Compiled
from app.models import ContextLayoutRow, SessionRow

# A stream with no layout row yet (or a stale one) starts from "everything after
# the watermark"; if the window read did not reach that far back, more than this
# many unread messages are not fetched one by one: the call trims instead.
MAX_FETCH = 512

# Units as a layout stores them: the seqs of the unit's messages, its form, its rule.
UnitKey = tuple[tuple[int, ...], int]


def _digest(value: Any, size: int = 12) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def params_key(**params: Any) -> str:
    """The stream a call belongs to: a digest of the parameters that shape its selection."""
    return _digest(params, 32)


@dataclass(frozen=True, slots=True)
class Layout:
    """What a stream's last trim kept; `through_seq` = watermark and no units: untrimmed."""

    generation: int
    watermark: int
    through_seq: int
    kept: tuple[tuple[tuple[int, ...], int, str], ...] = ()
    # Why the units the trim left out were left out (first seq, rule), for `decisions`.
    dropped: tuple[tuple[int, str], ...] = ()

    @property
    def id(self) -> str:
        return _digest([self.generation, self.watermark, self.through_seq, self.entries()])

    def entries(self) -> list[list[Any]]:
        """The JSON of `kept` and `dropped`: [[seqs], form, rule], form -1 for dropped."""
        out = [[list(seqs), form, rule] for seqs, form, rule in self.kept]
        out += [[[seq], -1, rule] for seq, rule in self.dropped]
        return out

    def holds_for(self, session: SessionRow) -> bool:
        return (
            self.generation == session.generation
            and self.watermark == session.last_compaction_seq
            and self.through_seq <= session.last_seq
        )

    def kept_seqs(self) -> set[int]:
        return {s for seqs, _, _ in self.kept for s in seqs}

    @classmethod
    def untrimmed(cls, session: SessionRow) -> Layout:
        return cls(session.generation, session.last_compaction_seq, session.last_compaction_seq)

    @classmethod
    def of_json(cls, generation: int, watermark: int, through: int, entries: Any) -> Layout:
        kept = tuple(
            (tuple(int(s) for s in k[0]), int(k[1]), str(k[2])) for k in entries if k[1] >= 0
        )
        dropped = tuple((int(k[0][0]), str(k[2])) for k in entries if k[1] < 0)
        return cls(generation, watermark, through, kept, dropped)

    def to_json(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "watermark": self.watermark,
            "through_seq": self.through_seq,
            "kept": self.entries(),
        }


def replay(
    view: HistoryView, layout: Layout, budget: int, *, fifo: bool = False
) -> Selection | None:
    """The layout's selection over `view`, or None when it does not hold or fit (or, for a
    FIFO strategy, when it is no longer the newest run plus the hard units: a new user
    message took the turn anchor's place)."""
    by_seqs = {u.seqs: u for u in view.units}
    sel = Selection()
    for seqs, form, rule in layout.kept:
        unit = by_seqs.get(seqs)
        if unit is None or (unit.pinned and form != Form.FULL):
            return None
        sel.pick(unit, Form(form), rule)
    dropped = dict(layout.dropped)
    for unit in view.units:
        if unit.index in sel.picks:
            continue
        if unit.messages[-1].seq > layout.through_seq:
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
    return Layout(session.generation, session.last_compaction_seq, through, kept, dropped)


def _stable_class(inner: type[Strategy]) -> type[StableStrategy]:
    cls = _CLASSES.get(inner)
    if cls is None:
        cls = type(
            f"Stable{inner.__name__}",
            (StableStrategy,),
            {"name": inner.name, "summary_required": inner.summary_required, "fifo": inner.fifo},
        )
        _CLASSES[inner] = cls
    return cls


class StableStrategy(Strategy):
    """Wraps a strategy: replays the stream's layout while it holds and fits, and asks the
    strategy for a new selection (at the low-water mark) only when it does not."""

    name: ClassVar[str] = "stable"

    def __init__(
        self, inner: Strategy, layout: Layout | None, session: SessionRow, limit: int, ratio: float
    ) -> None:
        self.inner = inner
        self.layout = layout or Layout.untrimmed(session)
        self.force = layout is None
        self.session = session
        self.limit = limit
        self.ratio = ratio
        self.trimmed: Layout | None = None
        self.view: HistoryView | None = None
        self.selection: Selection | None = None

    @classmethod
    def wrap(
        cls, inner: Strategy, layout: Layout | None, session: SessionRow, limit: int, ratio: float
    ) -> StableStrategy:
        return _stable_class(type(inner))(inner, layout, session, limit, ratio)

    def select(self, view: HistoryView, budget: int) -> Selection:
        self.view = view
        sel = None if self.force else replay(view, self.layout, budget, fifo=self.fifo)
        if sel is not None:
            self.trimmed = None
        else:
            # Cut to the low-water mark: what the head leaves of ratio x the input limit.
            # When even the mandatory units do not fit there in full, the whole budget.
            target = budget - math.ceil((1 - self.ratio) * self.limit)
            if sum(u.cost(Form.FULL) for u in view.hard()) > target:
                target = budget
            sel = self.inner.select(view, target)
            if not self.force and not self.fifo:
                sel = keep_prefix(view, self.layout, sel, target) or sel
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


_CLASSES: dict[type[Strategy], type[StableStrategy]] = {}


# --- storage ---------------------------------------------------------------------------------


# Every stored stream of a session, read along with its row (app/context/repository.py
# `payload_session`, a LEFT JOIN: one row per stream, usually one): params_key, then
# what `stored` reads. The columns as stored, not aggregated into one JSON value:
# building that value detoasts and re-serialises every layout (~0.3-0.5 ms here).
STREAM_COLUMNS = (
    ContextLayoutRow.params_key,
    ContextLayoutRow.generation,
    ContextLayoutRow.watermark,
    ContextLayoutRow.through_seq,
    ContextLayoutRow.kept,
    ContextLayoutRow.replaced,
)
STREAM_JOIN = and_(
    ContextLayoutRow.tenant_id == SessionRow.tenant_id,
    ContextLayoutRow.session_id == SessionRow.id,
)


def stored(streams: Mapping[str, Sequence[Any]], key: str) -> tuple[Layout | None, Layout | None]:
    """The stream's stored layout and the one it replaced; `streams` maps each stored
    params_key to the rest of its `STREAM_COLUMNS`."""
    row = streams.get(key)
    if row is None:
        return None, None
    layout = Layout.of_json(row[0], row[1], row[2], row[3])
    old = row[4]
    replaced = (
        Layout.of_json(old["generation"], old["watermark"], old["through_seq"], old["kept"])
        if isinstance(old, dict)
        else None
    )
    return layout, replaced


_STORED = (  # the key first
    "tenant_id",
    "session_id",
    "params_key",
    "generation",
    "watermark",
    "through_seq",
    "kept",
    "layout_id",
    "replaced",
)


def _store_statement() -> Any:
    # Built once: a statement made per call is compiled per call (SQLAlchemy caches by
    # statement structure, and building `excluded` alone was ~4% of a trimming call).
    t = ContextLayoutRow.__table__
    stmt = insert(ContextLayoutRow).values({k: bindparam(k, type_=t.c[k].type) for k in _STORED})
    excluded = stmt.excluded
    return stmt.on_conflict_do_update(
        index_elements=[t.c.tenant_id, t.c.session_id, t.c.params_key],
        set_={
            k: excluded[k] for k in _STORED if k not in ("tenant_id", "session_id", "params_key")
        },
        where=tuple_(t.c.generation, t.c.watermark, t.c.through_seq)
        <= tuple_(excluded.generation, excluded.watermark, excluded.through_seq),
    )


_STORE = Compiled(_store_statement())


async def store(db: Any, session: SessionRow, key: str, layout: Layout, replaced: Layout) -> None:
    """The trim's one write, on the payload's asyncpg connection (one statement, its own
    transaction). Of two trims racing, the one for the newer log stays."""
    values = {
        "tenant_id": session.tenant_id,
        "session_id": session.id,
        "params_key": key,
        "generation": layout.generation,
        "watermark": layout.watermark,
        "through_seq": layout.through_seq,
        # JSON text: the dialect's jsonb codec on the connection takes it as such.
        "kept": json.dumps(layout.entries()),
        "layout_id": layout.id,
        "replaced": json.dumps(replaced.to_json()),
    }
    await db.execute(_STORE.sql, *_STORE.args(values))


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


# --- the previous payload and the shared prefix ------------------------------------------------


@dataclass(frozen=True, slots=True)
class PrefixId:
    """`layout.P.tools.head1-head2…`: which layout, the last seq of the log it was built
    from, and digests of the tools and of each head message (system, dynamic, summary)."""

    layout: str
    last_seq: int
    tools: str
    head: tuple[str, ...] = field(default=())

    def __str__(self) -> str:
        return f"{self.layout}.{self.last_seq}.{self.tools}.{'-'.join(self.head)}"

    @classmethod
    def parse(cls, text: str) -> PrefixId | None:
        parts = text.split(".")
        if len(parts) != 4 or not parts[1].isdigit():
            return None
        head = tuple(h for h in parts[3].split("-") if h)
        return cls(parts[0], int(parts[1]), parts[2], head)


def message_digest(message: Mapping[str, Any]) -> str:
    return _digest(message, 8)


@dataclass(frozen=True, slots=True)
class SharedPrefix:
    messages: int
    tokens: int
    prefix_id: str


def shared_prefix(
    *,
    stable: StableStrategy,
    previous: Sequence[Layout],
    head: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    tools_tokens: int,
    head_tokens: int,
    counter: TokenCounter,
    last_seq: int,
    echoed: str | None,
) -> SharedPrefix:
    """This payload's `prefix_id` and what it shares with the previous payload.

    `previous[0]` is the layout in force before this call (the stored one, or the
    untrimmed default), then the stored one even if it no longer holds; `echoed`
    the `prefix_id` the client got last time.
    """
    sent = stable.units_sent()
    current = stable.current
    tools_digest = _digest([dict(t) for t in tools], 8)
    head_digests = tuple(message_digest(m) for m in head)
    me = str(PrefixId(current.id, last_seq, tools_digest, head_digests))
    before = _previous_payload(
        echoed, previous, current, sent, last_seq, tools_digest, head_digests
    )
    if before is None:
        return SharedPrefix(0, 0, me)
    layout, prev_last, prev_tools, prev_head = before
    if prev_tools != tools_digest:
        return SharedPrefix(0, 0, me)
    if prev_head != head_digests:
        messages, tokens = _shared_head(head, head_digests, prev_head, counter, tools_tokens)
        return SharedPrefix(messages, tokens, me)
    # The whole head is shared: its cost is known without counting it again.
    messages, tokens = len(head), tools_tokens + head_tokens
    if layout.generation != stable.session.generation:
        # A tail delete or clear since: seqs were reused, so the earlier payload cannot be
        # rebuilt from the log. Only the head is counted (a lower bound).
        return SharedPrefix(messages, tokens, me)
    before_units = _units_of(layout, stable.view, prev_last)
    if before_units is None:  # a unit it kept is gone: nothing known beyond the head
        return SharedPrefix(messages, tokens, me)
    messages, tokens = _shared_units(stable, sent, before_units, counter, messages, tokens)
    return SharedPrefix(messages, tokens, me)


def _previous_payload(
    echoed: str | None,
    previous: Sequence[Layout],
    current: Layout,
    sent: list[tuple[Unit, Form]],
    last_seq: int,
    tools_digest: str,
    head_digests: tuple[str, ...],
) -> tuple[Layout, int, str, tuple[str, ...]] | None:
    """The previous payload's layout, last seq, tools digest and head digests; None when
    it is unknown (an echo that does not parse or names an unknown layout)."""
    prev_id = PrefixId.parse(echoed) if echoed else None
    if echoed and prev_id is None:
        return None
    if prev_id is not None:
        candidates = {x.id: x for x in (*previous, current)}
        layout = candidates.get(prev_id.layout)
        if layout is None:  # a layout neither in force nor just replaced: unknown
            return None
        return layout, prev_id.last_seq, prev_id.tools, prev_id.head
    # No echo: the previous call had the same head and lacked the newest unit.
    prev_last = sent[-1][0].messages[0].seq - 1 if sent else last_seq
    return previous[0], prev_last, tools_digest, head_digests


def _shared_head(
    head: Sequence[Mapping[str, Any]],
    head_digests: tuple[str, ...],
    prev_head: tuple[str, ...],
    counter: TokenCounter,
    tokens: int,
) -> tuple[int, int]:
    """The leading head messages both payloads share, and `tokens` plus their cost."""
    messages = 0
    for i, digest in enumerate(head_digests):
        if i >= len(prev_head) or prev_head[i] != digest:
            break
        messages += 1
        tokens += counter.count_message(head[i])
    return messages, tokens


def _shared_units(
    stable: StableStrategy,
    sent: list[tuple[Unit, Form]],
    before_units: list[UnitKey],
    counter: TokenCounter,
    messages: int,
    tokens: int,
) -> tuple[int, int]:
    """`messages` and `tokens` plus the leading history messages both payloads share."""
    by_seqs = {u.seqs: u for u in stable.view.units} if stable.view else {}
    for (unit, form), before in zip(sent, before_units, strict=False):
        if before == (unit.seqs, form):
            messages += len(unit.messages)
            tokens += unit.cost(form)
            continue
        # A different unit or form may still start with the same messages (a form that
        # compacts nothing, a tool group whose call is unchanged): compare them.
        other = by_seqs.get(before[0])
        if other is None:
            break
        now, then = unit.render(form)[0], other.render(Form(before[1]))[0]
        same = 0
        for a, b in zip(now, then, strict=False):
            if a != b:
                break
            same += 1
            tokens += counter.count_message(a)
        messages += same
        if same < len(now) or len(now) != len(then):
            break
    return messages, tokens


def _units_of(layout: Layout, view: HistoryView | None, last_seq: int) -> list[UnitKey] | None:
    """The history units (seqs, form) of the payload `layout` gave for the log up to
    `last_seq`, in log order; None when a unit it kept is not in `view`."""
    if view is None:
        return None
    kept = {seqs: form for seqs, form, _ in layout.kept}
    out: list[UnitKey] = []
    for unit in view.units:
        seqs = unit.seqs
        if seqs in kept:
            out.append((seqs, kept.pop(seqs)))
        elif layout.through_seq < seqs[-1] <= last_seq:
            out.append((seqs, int(Form.FULL)))
    return None if kept else out
