"""What later steps refer to: the identifiers an old tool output told the agent, and its calls.

SPEC §3 "Recency before stability": what later steps refer to is masked last. A tool
output is *referenced* when a later message names, in its text or its tool-call
arguments, an identifier (a path, host, dotted or snake_case name, id, code, number)
that this output introduced: no message before it in the history held it, so the
agent learned it here (the path a grep found, the id an API returned). Identifiers
every step repeats (the repository's root, the task's words) were said before and do
not count. A step is *repeated* when a later step made one of its tool calls again
(same name, same arguments): the agent went back for what it said. An identifier
counts when a message within `LOOKAHEAD` messages after the output names it, and
before the horizon below.

`key_messages` sends a referenced output, when it must be masked, cut to the lines
that hold those identifiers instead of its head and tail (`Form.LINES` in
app/context/view.py), and a repeated step whole where it fits.

Only messages up to a *horizon* count as later steps. A fresh selection looks at the
whole history; a replayed layout at the history as it was when its trim chose it
(`Layout.through_seq`). But a view is a window that moves with the log: a message the
trim saw (one that first said an identifier, or named it later) may have left it by
the next call, and the same output would be cut to other lines. So a trim records, in
its layout, the identifiers each output it cut was cut for (`Layout.lines`), and a
replay cuts to those (`set_horizon`'s `fixed`): the lines an output keeps do not change
from call to call and the payload's prefix stays byte for byte the same until the next
trim, which keeps them too for the outputs it cuts again.
Identifiers are found once per message object (app/context/memo.py), and each distinct
word of a view once (`identifiers`).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Protocol

from app.context.memo import Memo
from app.core.conversation import LoggedMessage


class Unit(Protocol):
    """What references read of the view's units (app/context/view.py `Unit`), which
    hold a `References` themselves: declared here so neither module imports the other."""

    @property
    def messages(self) -> tuple[LoggedMessage, ...]: ...

    def memos(self) -> tuple[Memo, ...]: ...

    def forget_lines(self) -> None: ...


# What an identifier looks like, in any tool's output or any agent's command: a path
# (a/b, /a/b.py, ./a, ~/a, a URL's host and path), a dotted name or host
# (os.path.join, api.example.com), a snake_case or camelCase name, a code or id of
# letters and digits (HXDUBJ, W2378156, a1b2c3d), a number of 3 digits or more. Each
# form with the characters a match of it must hold (`_NEEDS`).
_FORMS = (
    (r"(?:~|\.{1,2})?/?(?:[\w.@-]+/)+[\w.@-]+", "/"),
    (r"\b[A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+\b", "."),
    (r"\b_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*", "_"),
    (r"\b[a-z]+(?:[A-Z][a-z0-9]+)+\b", "A"),
    (r"\b(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,}\b", "A"),
    (r"\b(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{4,}\b", "0"),
    (r"(?<![\w.])\d{3,}(?!\w)", "0"),
)
_IDENTIFIER = re.compile("|".join(form for form, _ in _FORMS))
_NEEDS = "/._A0"  # a slash, a dot, an underscore, an ASCII capital, a digit
# A tool output's identifiers are looked for this far into it: past this, a line kept
# for them would not fit a masked output anyway.
SCAN_CHARS = 200_000
# Later steps are the messages up to this many after the output: what the agent did
# with what it had just read. Bounded so that once the log has moved past them an
# output's cut is final, and a trim that keeps it sends it byte for byte as before (an
# unbounded look-ahead re-cut old outputs at every trim: docs/agent-loop.md).
LOOKAHEAD = 40


# The same expression with only the forms whose characters a word holds, by the bits of
# `_NEEDS` it holds (None: no form can match). Leaving out a form that cannot match
# anywhere in a word changes no match: it never was the first to match at a position.
_BY_NEEDS: tuple[Callable[[str], list[str]] | None, ...] = tuple(
    re.compile("|".join(f for f, need in _FORMS if 1 << _NEEDS.index(need) & bits)).findall
    if bits
    else None
    for bits in range(1 << len(_NEEDS))
)
_DIGIT = re.compile(r"\d").search
# Characters no identifier holds, taken off a word's ends (the `.` an identifier may
# end with stays: a path's form starts with it, and `rstrip` below takes it off).
_NOT_IN_IDENTIFIERS = ",;:!?()[]{}\"'`<>*=|#$%^&+\\"


def identifiers(text: str, words: dict[str, tuple[str, ...]] | None = None) -> frozenset[str]:
    """The identifiers in `text` (at least 3 characters, trailing punctuation off).

    The same as every match of `_IDENTIFIER` over the text, found word by word: no
    identifier holds a space, and a match never reaches past a character no identifier
    holds (the expression's lookarounds read one as they read the end of a text), so a
    word's matches are the text's matches inside it. A distinct word is matched once, in
    `words` (word -> its identifiers) across the texts given the same dict, with only the
    forms it can hold: most words need no expression at all. Checked against the plain
    expression in tests/context/test_references_identity.py.
    """
    if words is None:
        words = {}
    out: set[str] = set()
    for word in set(text[:SCAN_CHARS].split()):
        found = words.get(word)
        if found is None:
            found = words[word] = _word_identifiers(word)
        if found:
            out.update(found)
    return frozenset(out)


def _word_identifiers(word: str) -> tuple[str, ...]:
    core = word.strip(_NOT_IN_IDENTIFIERS)
    if core.isalpha() and core[1:].islower():
        # Most words: letters only, no capital past the first. Every form needs a slash,
        # a dot, an underscore, a digit, or (camelCase, CODES) a capital past the first.
        return ()
    bits = (
        ("/" in core)
        | ("." in core) << 1
        | ("_" in core) << 2
        | (not core.islower()) << 3  # maybe a capital (or no cased letter at all)
        | (_DIGIT(core) is not None) << 4
    )
    findall = _BY_NEEDS[bits]
    if findall is None:
        return ()
    values = (value.rstrip(".-@") for value in findall(core))
    return tuple(value for value in values if len(value) >= 3)


def call_signatures(m: LoggedMessage) -> frozenset[tuple[str, str]]:
    """(name, arguments) of each tool call of `m`, arguments re-serialised with sorted keys
    where they parse, so that the same call written twice compares equal."""
    out = set()
    for call in m.body.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict):
            continue
        raw = fn.get("arguments")
        try:
            args = json.dumps(json.loads(raw), sort_keys=True) if isinstance(raw, str) else ""
        except ValueError:
            args = str(raw)
        out.add((str(fn.get("name")), args))
    return frozenset(out)


def _said(m: LoggedMessage, words: dict[str, tuple[str, ...]] | None = None) -> frozenset[str]:
    """What a message names: for a tool output its text, for the others their text and
    their tool calls' arguments (`words`: as `identifiers` takes it)."""
    text = m.text
    if m.role != "tool":
        calls = m.body.get("tool_calls") or ()
        args = [
            str(c["function"].get("arguments") or "")
            for c in calls
            if isinstance(c, dict) and isinstance(c.get("function"), dict)
        ]
        text = "\n".join([text, *args])
    return identifiers(text, words)


class References:
    """Per view (one call): what later steps refer to, up to `horizon` (a seq; None: the
    whole view)."""

    def __init__(self, units: Sequence[Unit]) -> None:
        self._units = units
        self.horizon: int | None = None
        self._lines: dict[int, frozenset[str]] = {}  # tool output's seq -> its referenced ids
        self._repeated: dict[tuple[str, str], int] | None = None
        self._fixed: dict[int, frozenset[str]] = {}
        # The identifiers of each distinct word of the view's texts, found once per view.
        self._words: dict[str, tuple[str, ...]] = {}

    def set_horizon(
        self, horizon: int | None, fixed: Mapping[int, frozenset[str]] | None = None
    ) -> None:
        """Later steps are those up to seq `horizon`, except for the tool outputs `fixed`
        maps to the identifiers a trim cut them for (a layout's `lines`): those are cut
        to them whatever this view holds. Forms rendered before are forgotten."""
        fixed = dict(fixed or {})
        if horizon == self.horizon and fixed == self._fixed:
            return
        self.horizon = horizon
        self._fixed = fixed
        self._lines.clear()
        self._repeated = None
        for u in self._units:
            u.forget_lines()

    def _said(self, m: LoggedMessage, memo: Any) -> frozenset[str]:
        result: frozenset[str] = memo.get("said", partial(_said, m, self._words))
        return result

    def prepare(self, units: Iterable[Unit]) -> None:
        """Finds the referenced identifiers of the tool outputs of `units` in one pass over
        the view (a unit asked for later alone costs a pass of its own)."""
        targets: list[tuple[LoggedMessage, frozenset[str]]] = []
        for u in units:
            for m, memo in zip(u.messages, u.memos(), strict=True):
                if m.role == "tool" and m.seq not in self._lines:
                    targets.append((m, self._said(m, memo)))
        if not targets:
            return
        wanted = frozenset().union(*(ids for _, ids in targets))
        # Past the newest target's look-ahead no message matters: not read at all.
        last = max(m.seq for m, _ in targets)
        stop = last + LOOKAHEAD if self.horizon is None else min(last + LOOKAHEAD, self.horizon)
        messages = [
            (m, memo)
            for u in self._units
            for m, memo in zip(u.messages, u.memos(), strict=True)
            if m.seq <= stop
        ]
        # The seqs of the messages (not tool outputs) naming each identifier, in log order.
        named: dict[str, list[int]] = {}
        for m, memo in messages:
            if m.role != "tool":
                for value in wanted & self._said(m, memo):
                    named.setdefault(value, []).append(m.seq)
        later: dict[int, set[str]] = {}  # target seq -> its identifiers named after it
        for m, ids in targets:
            upto = m.seq + LOOKAHEAD
            found = later[m.seq] = set()
            for v in ids & named.keys():
                seqs = named[v]
                after = bisect_right(seqs, m.seq)
                if after < len(seqs) and seqs[after] <= upto:
                    found.add(v)
        # Of those, the ones no message before the target held: it told them.
        candidates = set().union(*later.values())
        first: dict[str, int] = {}
        for m, memo in messages:
            if m.seq > last or len(first) == len(candidates):
                break
            for value in candidates & self._said(m, memo):
                first.setdefault(value, m.seq)
        for m, _ in targets:
            self._lines[m.seq] = frozenset(v for v in later[m.seq] if first.get(v) == m.seq)

    def lines(self, m: LoggedMessage, unit: Unit) -> frozenset[str]:
        """The identifiers tool output `m` introduced that a later step names."""
        found = self._fixed.get(m.seq)
        if found is None:
            found = self._lines.get(m.seq)
        if found is None:
            self.prepare([unit])
            found = self._lines.get(m.seq, frozenset())
        return found

    def referenced(self, unit: Unit) -> bool:
        """Whether a later step names an identifier one of the unit's outputs introduced."""
        return any(m.role == "tool" and self.lines(m, unit) for m in unit.messages)

    def repeated(self, unit: Unit) -> bool:
        """Whether a later step made one of the unit's tool calls again."""
        latest = self._repeated
        if latest is None:
            latest = self._repeated = {}
            for u in self._units:
                for m, memo in zip(u.messages, u.memos(), strict=True):
                    if self.horizon is not None and m.seq > self.horizon:
                        break
                    if m.role == "assistant" and m.body.get("tool_calls"):
                        for sig in memo.get("calls", partial(call_signatures, m)):
                            latest[sig] = m.seq
        for m, memo in zip(unit.messages, unit.memos(), strict=True):
            if m.role == "assistant" and m.body.get("tool_calls"):
                sigs = memo.get("calls", partial(call_signatures, m))
                if any(latest.get(sig, -1) > m.seq for sig in sigs):
                    return True
        return False
