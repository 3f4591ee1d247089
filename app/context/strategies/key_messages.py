"""`key_messages` (the default): the user's words, then the agent's newest work, then by score.

Mandatory: pinned units, the latest user message (the turn anchor: the user
message that opens the current turn) and the newest unit (what the model is
reacting to, often a tool result), whole.

Next, every other user message of the effective history, whatever it says: a
30-token "from here on, dates as ISO 8601" typed in the middle of an agent run
is worth more than any kilobyte of tool output, and whether a user's message
matters cannot be told from its words (no keyword list decides it). Long ones
beyond `USER_SHARE` of the budget are cut to head and key lines, oldest first
(the task of a session's first hour must not crowd out the work of its last).

Then the agent's steps, newest first (SPEC §3 "Recency before stability"):
whole while they fit in the room less `MASK_SHARE` of it (at most
`MASK_MAX_TOKENS`), then masked (tool
outputs as short previews with the path of the full message, long texts cut,
tool calls whole), so that the oldest steps are the first to go and more of the
agent's own actions fit than whole outputs would leave. A step larger than
`BIG_SHARE` of the room is masked alone, and so is one whose tool outputs mostly
repeat newer ones sent whole (`REPEAT_SHARE`: a file viewed again, tests run
again). Among the masked steps, what later steps refer to is masked last
(`masked_form` in app/context/repeats.py): a step whose tool output introduced an
identifier a later step names, or whose call a later step made again, is sent
whole where small, else cut to the lines naming those identifiers (`referenced`).
An older step is never sent while a newer one is left out: a scored
pick from the past would sit at the front of the payload and change at every
trim (the prompt cache's loss) for little the next step uses. The rule of a
kept unit names why: `recent` (`recent:repeated`), `referenced`, or `user:…` with the
named signals of a user message (constraints, decisions, paths, code, numbers,
recency), for explanation only.

When even the user's messages do not fit whole: the hard set (compacted if it
must be), the newest unit compacted if it fits, then the user messages (short
ones first, newest first; long ones cut), then the steps compacted, newest
first, the old ones that do not fit left out; cut user messages are restored
first, then steps to FULL, newest first; last of all only the last
`fallback_turns` (K=4) turns compete for what is left, compacted, by score.
If the hard set alone does not fit even compacted, the pipeline reports
`over_budget`.

A trim starts from this selection at the low-water mark; app/context/trim.py
keeps the previous payload's masked steps in front where that costs little of
the newest steps' room (the prompt cache).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache, partial

from app.context import backfill
from app.context.repeats import masked_form, output_lines, repeated
from app.context.scoring import SCAN_CHARS, found
from app.context.strategies.base import (
    Selection,
    Strategy,
    hard_rule,
    register,
)
from app.context.view import Form, HistoryView, Unit
from app.core.conversation import LoggedMessage

POINTS = {
    "summary": 6,
    "constraint": 5,
    "user": 3,
    "decision": 3,
    "path": 2,
    "code": 2,
    "number": 1,
}
SIGNAL_ORDER = ("constraint", "decision", "path", "code", "number")
RECENCY_MAX = 6
# Of the room the agent's steps get, the share kept for older steps sent masked (the
# newest steps are sent whole in the rest)...
MASK_SHARE = 0.25
# ... and never more than this many tokens: masked steps tell the model what it did, and
# past a few thousand tokens of them whole recent steps serve the next step better.
MASK_MAX_TOKENS = 6_000
# A step larger than this share of the room (and than the room left for whole steps) is
# masked alone; the steps before it are still sent whole.
BIG_SHARE = 0.35
# The user's long messages beyond this share of the budget are cut, oldest first.
USER_SHARE = 0.3
MIN_UNIT_TOKENS = 5  # the framing of the smallest message: below it nothing fits
BIG_TOOL_PENALTY = (2, 4)  # over the preview limit, over four times it


def prose_signals(m: LoggedMessage) -> frozenset[str]:
    """Signals in the text of a user, assistant or system message and in its tool calls."""
    names = set(found(m.text))
    for call in m.body.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            names.update(found(f"{fn.get('name')} {str(fn.get('arguments'))[:SCAN_CHARS]}"))
    return frozenset(names)


def score(unit: Unit, distance: int, preview_tokens: int) -> tuple[int, list[tuple[str, int]]]:
    """Points of a unit and the signals that gave them; `distance` counts units from the end."""
    tool_tokens = 0
    names: set[str] = set()
    for m, memo in zip(unit.messages, unit.memos(), strict=True):
        if m.role == "tool":
            tool_tokens += m.token_count
        else:
            # Once per message object: the next call finds them (see app/context/memo.py).
            names.update(memo.get("prose_signals", partial(prose_signals, m)))
    signals: list[tuple[str, int]] = []
    if unit.kind in ("user", "summary"):
        signals.append((unit.kind, POINTS[unit.kind]))
    signals.extend((name, POINTS[name]) for name in SIGNAL_ORDER if name in names)
    recency = RECENCY_MAX - distance // 2
    if recency > 0:
        signals.append(("recency", recency))
    if tool_tokens > preview_tokens:
        big = BIG_TOOL_PENALTY[1] if tool_tokens > 4 * preview_tokens else BIG_TOOL_PENALTY[0]
        signals.append(("big_tool", -big))
    return sum(p for _, p in signals), signals


def explain(points: int, signals: list[tuple[str, int]]) -> str:
    return _explain(points, tuple(signals))


@lru_cache(maxsize=1024)  # a few dozen distinct signal sets recur in every payload
def _explain(points: int, signals: tuple[tuple[str, int], ...]) -> str:
    top = sorted((s for s in signals if s[1] > 0), key=lambda s: -s[1])[:3]
    return f"score:{points}({','.join(name for name, _ in top)})"


def _has_media(unit: Unit) -> bool:
    """Whether a message of the unit carries non-text parts (images, audio): a cut keeps
    text only, so the user's pictures are not folded away with their words."""
    for m in unit.messages:
        content = m.body.get("content")
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") != "text" for p in content
        ):
            return True
    return False


@register
class KeyMessages(Strategy):
    name = "key_messages"
    backfill = True

    def __init__(self, fallback_turns: int = 4) -> None:
        self.fallback_turns = fallback_turns

    def select(self, view: HistoryView, budget: int) -> Selection:
        units = view.units
        if not units:
            return Selection()
        newest = units[-1]
        hard = {u.index for u in view.hard()} | {newest.index}
        # Every user message of the effective history, whatever it says: which of them
        # matter cannot be told from their words (no keyword list decides it).
        # The compacted units below the watermark only fill what room is left (`backfill`).
        effective = [u for u in units if u.index not in hard and not u.compacted]
        users = [u for u in effective if u.kind in ("user", "summary")]
        steps = [u for u in effective if u.kind not in ("user", "summary")]

        sel = Selection()
        for i in sorted(hard):
            sel.pick(units[i], Form.FULL, hard_rule(units[i]))
        for u in users:
            sel.pick(u, Form.FULL, self._user_rule(view, u))
        for u in steps:
            sel.pick(u, Form.FULL, "recent")
        if self._fits(sel, view, budget):
            return backfill.fill(view, sel, budget)
        for u in steps:
            del sel.picks[u.index]
        anchor = [u for u in view.hard() if u.latest_user and not u.pinned]
        folding = users + anchor
        self._fold_users(view, sel, folding, int(USER_SHARE * budget), media=False)
        if not self._fits(sel, view, budget):
            # The user's messages do not fit whole even so: the oldest long ones are cut
            # (pictures included) before the tight path gives up on their order.
            fixed = sel.cost(view) - sum(u.cost(sel.picks[u.index][0]) for u in folding)
            self._fold_users(view, sel, folding, budget - fixed, media=True)
        if not self._fits(sel, view, budget):
            # The user's own messages before any summary kept in the log: a summary
            # competes with the steps there (SPEC §3: a user message is dropped only
            # when it cannot fit).
            words = [u for u in users if u.kind == "user"]
            rest = sorted((u for u in users if u.kind != "user"), key=lambda u: u.index)
            return self._tight(view, budget, words, sorted(rest + steps, key=lambda u: u.index))
        self._newest_run(view, sel, steps, budget - sel.cost(view))
        return backfill.fill(view, sel, budget)

    @staticmethod
    def _fold_users(
        view: HistoryView, sel: Selection, users: list[Unit], limit: int, *, media: bool
    ) -> None:
        """Long user messages are cut to head and key lines, oldest first, until the
        user's messages fit in `limit` tokens.

        With `USER_SHARE` of the budget as the limit: a session of several tasks (or
        pasted documents) would otherwise spend the room of the agent's recent work on
        the text of tasks long done. Short messages (instructions, corrections) are
        never cut, the latest user message is cut last, and a message with pictures is
        cut only when `media` allows it (a cut keeps text only).
        """
        total = sum(u.cost(sel.picks[u.index][0]) for u in users)
        cut_over = view.limits.cut_over_tokens
        for u in users:  # oldest first
            if total <= limit:
                break
            form, rule = sel.picks[u.index]
            if form is Form.COMPACT or u.pinned or u.logged_tokens <= cut_over:
                continue
            if not media and _has_media(u):
                continue
            total -= u.cost(Form.FULL) - u.cost(Form.COMPACT)
            sel.picks[u.index] = (Form.COMPACT, rule)

    def _newest_run(self, view: HistoryView, sel: Selection, steps: list[Unit], room: int) -> None:
        """The agent's steps newest first (SPEC §3 "Recency before stability"): whole
        while they fit in the room less `MASK_SHARE` of it, then masked (observation
        masking: tool outputs as previews, long texts cut, tool calls whole) while they
        fit at all, so that old steps go first and more of the agent's own actions stay
        than whole outputs would leave; a step whose outputs repeat newer ones sent
        whole is masked where it stands. When every step fits, masked ones are
        restored, newest first."""
        full_left = room - min(int(MASK_SHARE * room), MASK_MAX_TOKENS)
        big = int(BIG_SHARE * room)
        left = room
        masking = False
        taken: list[Unit] = []
        limit = view.limits.compact_preview_tokens
        sent: set[int] = set()  # the lines of the tool outputs sent whole so far
        for i, (form, _) in sel.picks.items():  # the newest unit and pinned ones
            if form is Form.FULL:
                for lines in output_lines(view.units[i], limit):
                    sent |= lines
        refs = view.refs
        prepared = refs is None
        for n, u in enumerate(reversed(steps)):
            if not masking:
                outputs = output_lines(u, limit)
                if sent and outputs and repeated(outputs, sent):
                    cost = u.cost(Form.COMPACT)
                    if cost <= left:
                        sel.pick(u, Form.COMPACT, "recent:repeated")
                        full_left -= cost
                        left -= cost
                        taken.append(u)
                        continue
                cost = u.cost(Form.FULL)
                if cost <= min(full_left, left):
                    sel.pick(u, Form.FULL, "recent")
                    full_left -= cost
                    left -= cost
                    taken.append(u)
                    for lines in outputs:
                        sent |= lines
                    continue
                # One step larger than a share of the room, and than what is left of
                # it, is masked alone: the steps before it are still sent whole.
                masking = cost <= big
            if not prepared and refs is not None:
                # What later steps refer to, found in one pass for this step and every
                # older one (the newer ones are sent whole).
                refs.prepare(steps[: len(steps) - n])
                prepared = True
            form, rule = masked_form(view, u, sent)
            cost = u.cost(form)
            if cost > left and form is not Form.COMPACT:
                form, rule = Form.COMPACT, "recent"
                cost = u.cost(form)
            if cost > left:
                break
            sel.pick(u, form, rule)
            left -= cost
            taken.append(u)
        else:
            for u in taken:  # newest first, and no older step whole while a newer is not
                if sel.picks[u.index][0] is Form.FULL or u.cost(Form.FULL) > big:
                    continue
                extra = u.cost(Form.FULL) - u.cost(sel.picks[u.index][0])
                if extra > left:
                    break
                sel.picks[u.index] = (Form.FULL, "recent")
                left -= extra
            return

    def _tight(
        self, view: HistoryView, budget: int, users: list[Unit], recent: list[Unit]
    ) -> Selection:
        """The budget cannot hold the user's messages and the recent turns, even compacted.

        In order, each step only with what the previous ones left: the hard set
        (compacted if it must be); the newest unit, compacted; every user message
        (short ones first, newest first; long ones cut), because a user's words
        are worth more than any tool output; the recent units compacted (tool
        outputs as previews, long texts cut), newest first, skipping what does not
        fit (old steps go); then cut user messages restored, then recent units
        restored to FULL, newest first; last, the rest of the last
        `fallback_turns` turns compete by score, compacted.
        """
        units = view.units
        sel = Selection()
        total = sel.take_mandatory(view, budget)
        cut_over = view.limits.cut_over_tokens

        def add(u: Unit, form: Form, rule: str) -> None:
            nonlocal total
            if u.index in sel.picks:
                return
            if u.min_cost(form) + total <= budget and (cost := u.cost(form)) + total <= budget:
                sel.pick(u, form, rule)
                total += cost

        newest = units[-1]
        add(newest, Form.COMPACT, "latest")
        for u in sorted(users, key=lambda u: (u.logged_tokens > cut_over, -u.index)):
            add(u, Form.COMPACT, self._user_rule(view, u))
        # What the agent just read, whole, before any older step is sent at all.
        chosen = sel.picks.get(newest.index)
        if chosen is not None and chosen[0] is Form.COMPACT and not newest.pinned:
            extra = newest.cost(Form.FULL) - newest.cost(Form.COMPACT)
            if total + extra <= budget:
                sel.picks[newest.index] = (Form.FULL, chosen[1])
                total += extra
        for u in reversed(recent):
            add(u, Form.COMPACT, "recent")
        picked = [u for u in reversed(units) if u.index in sel.picks]
        # Cut user messages are restored before any tool output or assistant text.
        for u in sorted(picked, key=lambda u: u.kind != "user"):
            form, rule = sel.picks[u.index]
            if form is Form.FULL or u.pinned:
                continue
            extra = u.cost(Form.FULL) - u.cost(Form.COMPACT)
            if total + extra <= budget:
                sel.picks[u.index] = (Form.FULL, rule)
                total += extra
        first_kept_turn = view.last_turn - self.fallback_turns + 1
        pool = [u for u in self._rest(units, sel) if u.turn >= first_kept_turn and not u.compacted]
        self._fill(view, sel, pool, budget - total, compact_only=True, first=units[-1])
        return sel

    @staticmethod
    def _user_rule(view: HistoryView, unit: Unit) -> str:
        last, preview = len(view.units) - 1, view.limits.preview_tokens
        points, signals = score(unit, last - unit.index, preview)
        return "user:" + explain(points, signals).removeprefix("score:")

    @staticmethod
    def _rest(units: Iterable[Unit], sel: Selection) -> list[Unit]:
        return [u for u in units if u.index not in sel.picks]

    @staticmethod
    def _fits(sel: Selection, view: HistoryView, budget: int) -> bool:
        # Newest first with an early exit: past the budget, older forms need no rendering.
        total = 0
        for i in sorted(sel.picks, reverse=True):
            form = sel.picks[i][0]
            total += view.units[i].cost(form)
            if total > budget:
                return False
        return True

    @staticmethod
    def _fill(
        view: HistoryView,
        sel: Selection,
        pool: list[Unit],
        left: int,
        *,
        compact_only: bool,
        first: Unit | None = None,
    ) -> None:
        if left <= 0 or not pool:
            return
        last = len(view.units) - 1
        preview = view.limits.preview_tokens
        ranked = []
        for u in pool:
            if u.min_cost(Form.COMPACT) > left:
                continue  # cannot fit in any form: not worth scoring
            points, signals = score(u, last - u.index, preview)
            ranked.append((u is first, points, u.index, u, signals))
        ranked.sort(key=lambda r: (r[0], r[1], r[2]), reverse=True)
        forms = (Form.COMPACT,) if compact_only else (Form.FULL, Form.COMPACT)
        for _, points, _, u, signals in ranked:
            if left < MIN_UNIT_TOKENS:
                break
            for form in forms:
                if u.min_cost(form) <= left and (cost := u.cost(form)) <= left:
                    sel.pick(u, form, explain(points, signals))
                    left -= cost
                    break
