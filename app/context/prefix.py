"""The previous payload and the prefix a payload shares with it (`prefix_id`,
`usage.stable_prefix_tokens`; SPEC §3 "Payload stability").

The server does not record what it sent. `prefix_id` names a payload: the layout,
the last seq of the log it was built from, and digests of its tools and head
messages. A client that echoes the previous response's `prefix_id`
(`previous_prefix_id`) gets an exact `usage.stable_prefix_tokens`: the server
rebuilds that earlier payload from its layout and the log and compares. Without
the echo the server assumes the previous call was for the log without the newest
unit, with the same head: right for an agent loop that appends one step per model
call. Across a tail delete or clear (seqs reused) only the head is claimed: a
lower bound. An echoed layout a compaction or revert retired is no longer known,
but its `prefix_id` still names the tools and head it was sent with; a compaction
changes the head (the summary), so comparing those is exact.

After a compaction that moved the watermark past the turn anchor (the latest user
message), the anchor opens the history of every payload until a new user message
takes its place; rebuilding an earlier payload must put it there too, and must
not when the anchor that payload had is now covered by the summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.context.stability import StableStrategy
from app.context.trim_state import Layout, UnitKey, digest
from app.context.types import TokenCounter
from app.context.view import Form, HistoryView, Unit


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


def messagedigest(message: Mapping[str, Any]) -> str:
    return digest(message, 8)


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
    tools_digest = digest([dict(t) for t in tools], 8)
    head_digests = tuple(messagedigest(m) for m in head)
    me = str(PrefixId(current.id, last_seq, tools_digest, head_digests))
    prev_id = PrefixId.parse(echoed) if echoed else None
    if echoed and prev_id is None:
        return SharedPrefix(0, 0, me)
    before = _previous_payload(prev_id, previous, current, sent, last_seq)
    # An echoed layout that is neither in force nor just replaced (one a compaction or a
    # revert retired) still names its tools and head: what they share is known exactly,
    # and a compaction changed the head (the summary) anyway.
    prev_tools = prev_id.tools if prev_id is not None else tools_digest
    prev_head = prev_id.head if prev_id is not None else head_digests
    if prev_tools != tools_digest:
        return SharedPrefix(0, 0, me)
    if prev_head != head_digests:
        messages, tokens = _shared_head(head, head_digests, prev_head, counter, tools_tokens)
        return SharedPrefix(messages, tokens, me)
    # The whole head is shared: its cost is known without counting it again.
    messages, tokens = len(head), tools_tokens + head_tokens
    if before is None:  # the history it was sent with cannot be rebuilt: a lower bound
        return SharedPrefix(messages, tokens, me)
    layout, prev_last = before
    if layout.generation != stable.session.generation:
        # A tail delete or clear since (seqs were reused, so the earlier payload cannot be
        # rebuilt from the log), or a revert: only the head is counted (a lower bound;
        # a revert changed the summary, so the head differed already).
        return SharedPrefix(messages, tokens, me)
    before_units = _units_of(layout, stable.view, prev_last)
    if before_units is None:  # a unit it kept is gone: nothing known beyond the head
        return SharedPrefix(messages, tokens, me)
    messages, tokens = _shared_units(stable, sent, before_units, counter, messages, tokens)
    return SharedPrefix(messages, tokens, me)


def _previous_payload(
    prev_id: PrefixId | None,
    previous: Sequence[Layout],
    current: Layout,
    sent: list[tuple[Unit, Form]],
    last_seq: int,
) -> tuple[Layout, int] | None:
    """The previous payload's layout and last seq; None when its layout is unknown (an
    echo that names a layout neither in force nor just replaced)."""
    if prev_id is not None:
        candidates = {x.id: x for x in (*previous, current)}
        layout = candidates.get(prev_id.layout)
        if layout is None:
            return None
        return layout, prev_id.last_seq
    # No echo: the previous call had the same head and lacked the newest unit.
    prev_last = sent[-1][0].messages[0].seq - 1 if sent else last_seq
    return previous[0], prev_last


def _shared_head(
    head: Sequence[Mapping[str, Any]],
    head_digests: tuple[str, ...],
    prev_head: tuple[str, ...],
    counter: TokenCounter,
    tokens: int,
) -> tuple[int, int]:
    """The leading head messages both payloads share, and `tokens` plus their cost."""
    messages = 0
    for i, head_digest in enumerate(head_digests):
        if i >= len(prev_head) or prev_head[i] != head_digest:
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
    `last_seq`, in log order; None when a unit it kept is not in `view`.

    A layout that decided nothing past the watermark (no trim since the compaction) gave
    the whole effective history, as `stability.replay` does: the turn anchor too, the
    latest user message, which stays in front of the history when a compaction moved
    the watermark past it (app/context/assemble.py `_unsummarized`).
    """
    if view is None:
        return None
    kept = {seqs: form for seqs, form, _ in layout.kept}
    untrimmed = layout.through_seq <= layout.watermark
    out: list[UnitKey] = []
    for unit in view.units:
        seqs = unit.seqs
        if seqs in kept:
            out.append((seqs, kept.pop(seqs)))
        elif untrimmed and seqs[-1] <= layout.watermark and not unit.compacted:
            # Below the watermark only today's turn anchor is in the view; it was the
            # anchor for `last_seq` too, as no user message came after it.
            if seqs[-1] <= last_seq:
                out.append((seqs, int(Form.FULL)))
        elif layout.through_seq < seqs[-1] <= last_seq:
            out.append((seqs, int(Form.FULL)))
    if kept:
        return None
    if untrimmed and _anchor_summarized(view, layout.watermark, last_seq):
        # The earlier payload's history opened on an anchor the summary now covers: no
        # unit of this view; nothing of the history is shared.
        out.insert(0, ((), int(Form.FULL)))
    return out


def _anchor_summarized(view: HistoryView, watermark: int, last_seq: int) -> bool:
    """Whether the turn anchor for the log up to `last_seq` lay below `watermark` and is
    no longer in `view`: today's latest user message came after `last_seq`, and no user
    message of the view lies between the watermark and `last_seq`. (A log without a user
    message below the watermark had no anchor there: counted as one, a lower bound.)"""
    latest = view.latest_user
    if watermark <= 0 or latest is None or latest.seqs[-1] <= last_seq:
        return False  # nothing is summarized, or the anchor is still today's
    return not any(u.kind == "user" and watermark < u.seqs[-1] <= last_seq for u in view.units)
