"""The history as strategies see it: units with lazily rendered forms and exact costs.

Every unit has two forms:

- `Form.FULL`: the messages as logged (protocol fields only), except that a tool
  output over the preview limit is always a preview (SPEC §3 invariant);
- `Form.COMPACT`: what is left when the budget is short (observation masking): every
  tool output over `MASK_TOKENS` becomes a preview (size, head, tail, the path of the
  full message), a long assistant text is cut to a few lines and its key lines while its
  tool calls stay whole (none of the text is left when the calls alone fill
  `MASK_TOKENS`: the calls say what the step did), a long user text is cut to head and
  key lines. A tool output is masked only where the preview saves at least half of it
  (`MASK_WORTH`): a preview about as long as the output keeps none of it.
- `Form.LINES`: COMPACT, except that a tool output later steps refer to (its
  identifiers named later: app/context/references.py) keeps the lines holding them,
  up to `LINES_TOKENS`, instead of its head and tail.

Pinned messages are never compacted further than FULL.

Costs come from each message's cached `token_count`; only messages that are transformed
(previews, cuts, dropped unknown fields) are counted, once, and only when a strategy asks
for that form — so assembly costs what is kept, not what is logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from functools import partial
from typing import Any

from app.context.caches import Caches
from app.context.memo import Memo
from app.context.preview import cut_text, lines_tool, needs_sanitize, preview_tool, sanitize
from app.context.references import References
from app.context.types import Action, TokenCounter
from app.core.conversation import Group, LoggedMessage, UnitKind

# What a tool output or an assistant text becomes in the compact form: its header (size
# and the path of the full message) and a line or two of head and tail.
MASK_TOKENS = 64
# A tool output is masked only when it is over this many times the masked size: the
# preview's header alone is most of `MASK_TOKENS`, and a preview must save at least half
# of what it replaces to be worth more than the output itself.
MASK_WORTH = 2
# A tool output later steps refer to keeps up to this many tokens of the lines that name
# what they use (a few lines of a grep, a traceback, a listing).
LINES_TOKENS = 4 * MASK_TOKENS


class Form(IntEnum):
    FULL = 0
    COMPACT = 1
    LINES = 2


@dataclass(frozen=True, slots=True)
class Limits:
    session_id: str
    preview_tokens: int
    compact_preview_tokens: int
    cut_over_tokens: int
    cut_target_tokens: int
    lines_tokens: int = LINES_TOKENS

    @classmethod
    def from_preview_limit(cls, session_id: str, preview_tokens: int) -> Limits:
        # Observation masking: in the compact form the agent's own steps keep their
        # tool calls (paths, commands, ids) and give up their texts to a few lines, or
        # wholly when the calls alone fill the masked size (docs/agent-loop.md has what
        # keeping some of the text's names there did), so that many more of its actions
        # fit than whole outputs would. The user's words are cut less: they scale with
        # the preview limit and stay readable.
        user_cut = max(MASK_TOKENS, min(256, preview_tokens // 4))
        return cls(session_id, preview_tokens, MASK_TOKENS, 2 * user_cut, user_cut)


_Rendered = tuple[tuple[dict[str, Any], ...], tuple[Action, ...], int]
_Transformed = tuple[dict[str, Any], int, Action]


def _sent_as_logged(m: LoggedMessage) -> bool:
    return not needs_sanitize(m.body)


class Unit:
    """One keep-or-drop unit; `index` is its position in the view (log order)."""

    __slots__ = (
        "_caches",
        "_counter",
        "_floors",
        "_forms",
        "_limits",
        "_memos",
        "_plain",
        "_refs",
        "compacted",
        "group",
        "index",
        "latest_user",
        "pinned",
        "seqs",
    )

    def __init__(
        self,
        index: int,
        group: Group,
        limits: Limits,
        counter: TokenCounter,
        caches: Caches,
        refs: References | None = None,
    ) -> None:
        self.index = index
        self._refs = refs
        self.group = group
        # A unit's identity across calls (layouts store it): asked of every unit by
        # every replay, so made once.
        messages = group.messages
        if len(messages) == 1:  # most units: no generators for one message
            self.seqs: tuple[int, ...] = (messages[0].seq,)
            self.pinned: bool = messages[0].pinned
        else:
            self.seqs = tuple(m.seq for m in messages)
            self.pinned = any(m.pinned for m in messages)
        self.latest_user = False
        # Below the watermark: the summary stands for it; sent only as recent context
        # where the budget leaves room (app/context/backfill.py), never mandatory.
        self.compacted = False
        self._limits = limits
        self._counter = counter
        self._caches = caches
        self._forms: dict[Form, _Rendered] = {}
        self._floors: dict[Form, int] = {}
        self._plain: tuple[bool, ...] | None = None
        self._memos: tuple[Memo, ...] | None = None

    @property
    def kind(self) -> UnitKind:
        return self.group.kind

    @property
    def turn(self) -> int:
        return self.group.turn

    @property
    def messages(self) -> tuple[LoggedMessage, ...]:
        return self.group.messages

    @property
    def first_seq(self) -> int:
        return self.seqs[0]

    @property
    def logged_tokens(self) -> int:
        return sum(m.token_count for m in self.group.messages)

    def memos(self) -> tuple[Memo, ...]:
        """Each message's results that outlive this call (see `memo.py`), in message order."""
        memos = self._memos
        if memos is None:
            of = self._caches.memos.of
            memos = self._memos = tuple(of(m) for m in self.group.messages)
        return memos

    def _plain_flags(self) -> tuple[bool, ...]:
        """Per message: sent exactly as logged when not previewed or cut (no field to drop).

        Both forms and both floors ask this of every message: the protocol-field
        check runs once per message object (see `memo.py`), not once per form and
        per call.
        """
        plain = self._plain
        if plain is None:
            if self.group.strip_tool_calls:
                plain = (False,) * len(self.group.messages)
            else:
                plain = tuple(
                    memo.get("plain", partial(_sent_as_logged, memo.message))
                    for memo in self.memos()
                )
            self._plain = plain
        return plain

    def min_cost(self, form: Form) -> int:
        """A cheap estimate of `cost(form)` from below, to skip units without rendering them.

        Previews and cuts are built to land just under their limit, so three
        quarters of it is a safe floor in practice; erring low only costs a render.
        """
        done = self._forms.get(form)
        if done is not None:
            return done[2]
        floor = self._floors.get(form)
        if floor is None:
            floor = 0
            for m, kind, limit in self._plan(form):
                if kind == "preview":
                    floor += limit * 3 // 4
                elif kind == "lines":
                    floor += MASK_TOKENS // 2
                elif kind == "cut":
                    floor += limit * 3 // 4
                elif kind == "sanitize":
                    floor += 1
                else:
                    floor += m.token_count
            self._floors[form] = floor
        return floor

    def cost(self, form: Form) -> int:
        done = self._forms.get(form)
        return done[2] if done is not None else self._render(form)[2]

    def render(self, form: Form) -> tuple[tuple[dict[str, Any], ...], tuple[Action, ...]]:
        done = self._forms.get(form)
        messages, actions, _ = done if done is not None else self._render(form)
        return messages, actions

    def _plan(self, form: Form) -> list[tuple[LoggedMessage, str, int]]:
        """Per message, what `form` does to it: (message, "preview" | "cut" | "sanitize" |
        "as_logged", the preview limit or cut target)."""
        lim = self._limits
        compact = form is not Form.FULL
        plan: list[tuple[LoggedMessage, str, int]] = []
        for m, plain in zip(self.group.messages, self._plain_flags(), strict=True):
            if m.role == "tool":
                if (
                    compact
                    and not m.pinned
                    and m.token_count > MASK_WORTH * lim.compact_preview_tokens
                ):
                    if form is Form.LINES and self._lines_of(m):
                        plan.append((m, "lines", min(lim.lines_tokens, lim.preview_tokens)))
                    else:
                        plan.append((m, "preview", lim.compact_preview_tokens))
                    continue
                if m.token_count > lim.preview_tokens:
                    plan.append((m, "preview", lim.preview_tokens))
                    continue
            elif compact and not m.pinned:
                over, target = (
                    (lim.cut_over_tokens, lim.cut_target_tokens)
                    if m.role == "user"
                    else (2 * lim.compact_preview_tokens, lim.compact_preview_tokens)
                )
                if m.token_count > over:
                    plan.append((m, "cut", target))
                    continue
            plan.append((m, "as_logged" if plain else "sanitize", 0))
        return plan

    def _lines_of(self, m: LoggedMessage) -> frozenset[str]:
        return self._refs.lines(m, self) if self._refs is not None else frozenset()

    def forget_lines(self) -> None:
        """Forget the LINES form: the references it was cut to changed (another horizon)."""
        self._forms.pop(Form.LINES, None)
        self._floors.pop(Form.LINES, None)

    def _render(self, form: Form) -> _Rendered:
        done = self._forms.get(form)
        if done is not None:
            return done
        lim, strip = self._limits, self.group.strip_tool_calls
        out: list[dict[str, Any]] = []
        actions: list[Action] = []
        total = 0
        for i, (m, kind, limit) in enumerate(self._plan(form)):
            if kind == "as_logged":
                out.append(dict(m.body))
                actions.append("kept")
                total += m.token_count
                continue
            if kind == "preview":
                key: tuple[Any, ...] = ("preview", limit, lim.session_id)
            elif kind == "lines":
                key = ("lines", limit, lim.session_id, self._lines_of(m))
            elif kind == "cut":
                key = ("cut", limit, lim.session_id, strip)
            else:
                key = ("sanitize", strip)
            body, tokens, action = self._transformed(i, key)
            out.append(dict(body))  # each payload gets its own message dicts
            actions.append(action)
            total += tokens
        if form is not Form.FULL and not any(a != "kept" for a in actions):
            # Nothing to compact: share the FULL rendering (and its cost) if known.
            full = self._forms.get(Form.FULL)
            if full is not None:
                self._forms[form] = full
                return full
        rendered: _Rendered = (tuple(out), tuple(actions), total)
        self._forms[form] = rendered
        return rendered

    def _transformed(self, i: int, key: tuple[Any, ...]) -> _Transformed:
        """Message `i` previewed, cut or stripped of unknown fields, and its exact count.

        Kept per message object with the counter in the key (identity-hashed, so an
        entry also keeps its counter alive): the next call reuses it. A counter that
        cannot be hashed is simply not memoized.
        """
        counter, memo = self._counter, self.memos()[i]
        try:
            hash(counter)
        except TypeError:
            return self._transform(memo.message, key)
        return memo.get((*key, counter), lambda: self._transform(memo.message, key))

    def _transform(self, m: LoggedMessage, key: tuple[Any, ...]) -> _Transformed:
        lim, counter, strip = self._limits, self._counter, self.group.strip_tool_calls
        kind = key[0]
        if kind == "preview":
            body, tokens = preview_tool(
                m.body,
                seq=m.seq,
                session_id=lim.session_id,
                limit=key[1],
                token_count=m.token_count,
                counter=counter,
                cache=self._caches.previews,
            )
            return body, tokens, "preview"
        if kind == "lines":
            body, tokens = lines_tool(
                m.body,
                seq=m.seq,
                session_id=lim.session_id,
                names=key[3],
                limit=key[1],
                token_count=m.token_count,
                counter=counter,
                cache=self._caches.previews,
            )
            return body, tokens, "kept" if tokens >= m.token_count else "preview"
        if kind == "cut":
            body, tokens = cut_text(
                m.body,
                seq=m.seq,
                session_id=lim.session_id,
                target=key[1],
                token_count=m.token_count,
                counter=counter,
                cache=self._caches.previews,
                strip_tool_calls=strip,
            )
            return body, tokens, "cut"
        body = sanitize(m.body, strip_tool_calls=strip)
        return body, counter.count_message(body), "kept"


@dataclass(frozen=True, slots=True)
class HistoryView:
    """Sendable units in log order, and what a strategy needs to know about them."""

    units: tuple[Unit, ...]
    limits: Limits
    last_turn: int
    latest_user: Unit | None
    # What later steps refer to (app/context/references.py), for the LINES form.
    refs: References | None = None
    # The first seq from which every message of the log was read (None: unknown): the
    # compacted units from there up are a contiguous run below the watermark.
    complete_from: int | None = None
    summary_tokens: int = 0  # the summary sent beside them: app/context/backfill.py's cap

    @classmethod
    def build(
        cls,
        groups: list[Group],
        limits: Limits,
        counter: TokenCounter,
        caches: Caches,
        *,
        watermark: int | None = None,
        anchor: int | None = None,
        complete_from: int | None = None,
    ) -> HistoryView:
        """`watermark`: the groups hold compacted units at or below it, every one but the
        turn anchor (seq `anchor`) marked `compacted`."""
        made: list[Unit] = []
        refs = References(made)
        made += (Unit(i, g, limits, counter, caches, refs) for i, g in enumerate(groups))
        units = tuple(made)
        if watermark is not None:
            for u in units:
                if u.seqs[-1] <= watermark and u.seqs != (anchor,):
                    u.compacted = True
        latest = next((u for u in reversed(units) if u.kind == "user" and not u.compacted), None)
        if latest is not None:
            latest.latest_user = True
        last_turn = units[-1].turn if units else 0
        return cls(units, limits, last_turn, latest, refs, complete_from)

    def hard(self) -> list[Unit]:
        """Units every payload must hold: pinned ones and the latest user message (never
        a compacted one: the summary carries the pinned messages below the watermark)."""
        return [u for u in self.units if (u.pinned or u.latest_user) and not u.compacted]
