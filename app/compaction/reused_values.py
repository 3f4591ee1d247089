"""Values from tools in the trail: identifiers a tool returned that the agent's words reuse."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from app.compaction.provenance import Ranges
from app.compaction.signals import extract_identifiers
from app.core.conversation import LoggedMessage, call_function


class Reuse(NamedTuple):
    """A value a tool returned and the agent reused: where among the range's other
    artifacts it goes (the output's place), the tool's name and the output's seq."""

    place: int
    value: str
    tool: str
    cites: Ranges


# A Latin word of prose, not a name: quoted `"time"` or `"None"` says nothing a later step
# needs verbatim. Codes (`IAH`) and names in other scripts (`云蒙山森林公园`) are values.
_PLAIN_WORD = re.compile(r"^[A-Za-z][a-z]*$")


@dataclass(slots=True)
class Uses:
    """The texts that may reuse a value, in log order, and where each message's begin."""

    parts: list[str]
    size: int = 0

    def add(self, text: str) -> None:
        if text:
            self.parts.append(text)
            self.size += len(text) + 1


def occurs(text: str, value: str, start: int = 0, end: int | None = None) -> bool:
    """`value` as a whole token in `text[start:end]`: `822` is not in `1822`, nor `a.py` in
    `data.pyc`. `str.find` and a look at the two neighbours, not a regex per value."""
    return token_at(text, value, start, end) >= 0


def token_at(text: str, value: str, start: int = 0, end: int | None = None) -> int:
    """Where `value` first stands as a whole token in `text[start:end]` (-1: nowhere).
    Whether an occurrence is whole reads its neighbours in all of `text`, whatever the
    bounds."""
    stop = len(text) if end is None else end
    i = text.find(value, start, stop)
    while i >= 0:
        j = i + len(value)
        left = text[i - 1] if i > 0 else " "
        right = text[j] if j < len(text) else " "
        # ASCII neighbours only: Chinese runs words together, `推荐云蒙山` reuses `云蒙山`.
        if not (left.isascii() and (left.isalnum() or left in "_.")) and not (
            right.isascii() and (right.isalnum() or right == "_")
        ):
            return i
        i = text.find(value, i + 1, stop)
    return -1


def reused_values(
    outputs: list[tuple[int, int, str, str, int]], uses: Uses, later: str
) -> list[Reuse]:
    """Identifiers first seen in a tool's output that a later message or call reuses,
    with the output's place among the range's other artifacts."""
    blob = "\n".join(uses.parts)
    found: list[Reuse] = []
    seen: set[str] = set()
    # The same values come back output after output: where each first stands whole in the
    # uses, and whether `later` holds it, are looked up once (a search of all the uses
    # for each output that names it cost seconds on a long run).
    first: dict[str, int] = {}
    in_later: dict[str, bool] = {}
    for offset, place, name, text, seq in outputs:
        for value in extract_identifiers(text)[:200]:
            if value in seen or not 3 <= len(value) <= 120 or _PLAIN_WORD.match(value):
                continue
            at = first.get(value)
            if at is None:
                at = first[value] = token_at(blob, value)
            if 0 <= at and at + len(value) <= offset:  # the agent had it before the tool gave it
                continue
            # Reused after it: the first whole occurrence is past the output's offset, or
            # (one that straddles the offset) a later one is.
            after = at >= offset or (at >= 0 and occurs(blob, value, offset))
            if not after:
                reused = in_later.get(value)
                if reused is None:
                    reused = in_later[value] = occurs(later, value)
                after = reused
            if after:
                seen.add(value)
                found.append(Reuse(place, value, name, ((seq, seq),)))
    return found


# Values of the range's and the tail's texts looked up in earlier outputs, at most.
MAX_EARLIER_VALUES = 200


def earlier_reused_values(
    earlier: Sequence[LoggedMessage], uses: Uses, later: str, known: set[str]
) -> list[Reuse]:
    """Identifiers the range's or the tail's agent texts use that a tool output of `earlier`
    holds (the newest such output), placed first: they were returned before the range.
    Looked up from the texts' side, so the cost follows the range, not the older log."""
    outputs = [m for m in earlier if m.role == "tool" and m.counts_in_context]
    if not outputs:
        return []
    names = {
        str(c.get("id")): (call_function(c) or ("tool",))[0]
        for m in earlier
        for c in m.body.get("tool_calls") or ()
        if isinstance(c, dict)
    }
    found: list[Reuse] = []
    said = "\n".join([*uses.parts, later])
    for value in extract_identifiers(said)[:MAX_EARLIER_VALUES]:
        if value in known or not 3 <= len(value) <= 120 or _PLAIN_WORD.match(value):
            continue
        for m in reversed(outputs):
            if occurs(m.text, value):
                name = names.get(str(m.body.get("tool_call_id")), "tool")
                found.append(Reuse(0, value, name, ((m.seq, m.seq),)))
                known.add(value)
                break
    return found
