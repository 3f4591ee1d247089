"""Provenance: the seqs of the log each summary item stands for (SPEC §5).

An item carries its citation at its end, as the payload shows it: `text [#412-431]`,
`text [#7]` or `text [#3,7-9]`, so the citation is counted wherever the item is
(the summary's cap, a section's share) and survives every step that moves items
around. The stored structure also lists them apart (`seqs`, see `summary.py`).

A citation is only as good as the log: `Sources` holds the compacted range (each
message's text, tool calls and arguments included) and the previous summary's
items with their citations. An item's citation is kept where a cited seq *holds*
the item (one of its identifiers verbatim, or enough of its words), trimmed to the
seqs that do; a citation outside the range or of seqs that do not hold it is
replaced by the seqs that hold it best, or the citation of the previous summary's
item it restates; an item nothing holds is dropped (the model invented it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from app.compaction.signals import extract_identifiers, normalise, shorten
from app.conversation import LoggedMessage, call_function

Ranges = tuple[tuple[int, int], ...]

# `[#12]`, `[#12-15]`, `[#3,7-9]`, `[#3, #7-9]`: anywhere in an item (a model may put it
# mid-sentence), the canonical form at its end.
_RANGE = r"#?\d{1,12}(?:\s*[-–]\s*#?\d{1,12})?"
_CITE = re.compile(r"\s*\[#\s*(" + _RANGE + r"(?:\s*,\s*" + _RANGE + r")*)\s*\]")
_PART = re.compile(r"#?(\d+)(?:\s*[-–]\s*#?(\d+))?")
# At most this many ranges per item: a citation is a pointer, not an index.
MAX_RANGES = 3

_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
_LATIN = re.compile(r"[^\W\d_]{3,}|\d{2,}")
# Where an item's exact parts end: arrows of the trail, list commas, cut marks.
_ARROWS = re.compile(r" [→←] |, |…(?:\(\+\d+ lines?\))?|，|、")
_LABEL = re.compile(r"^\w+(?:: |：)")
# Codes (`E4042`, `4NQLHD`) and numbers of two digits or more.
_CODE = re.compile(r"(?<![\w.])(?:[A-Za-z][\w-]*\d[\w-]*|\d[\w-]*[A-Za-z][\w-]*|\d{2,})(?![\w])")
# Words every label or summary line has: they hold nothing.
_STOP = frozenset(
    """the and for with that this from into was were are has have had not but you your
    our its they them then than there their what when which who will would could should
    user assistant called tool result results identifiers summary said asked about also
    用户 助手 调用 工具 结果 标识""".split()
)


def split_cites(item: str) -> tuple[str, Ranges]:
    """The item's text without citations, and the ranges it cites (sorted, merged)."""
    found: list[tuple[int, int]] = []
    for m in _CITE.finditer(item):
        for part in _PART.finditer(m.group(1)):
            a = int(part.group(1))
            b = int(part.group(2)) if part.group(2) else a
            found.append((min(a, b), max(a, b)))
    if not found:
        return item.strip(), ()
    return _CITE.sub("", item).strip(), merge_ranges(found)


def strip_cites(item: str) -> str:
    return split_cites(item)[0]


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> Ranges:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return tuple(out)


def ranges_of(seqs: Iterable[int]) -> Ranges:
    return merge_ranges((s, s) for s in seqs)


def render_cite(ranges: Ranges) -> str:
    if not ranges:
        return ""
    return "[#" + ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges) + "]"


def cite(body: str, ranges: Ranges) -> str:
    """`body` ending with its citation (none when `ranges` is empty)."""
    mark = render_cite(ranges)
    return f"{body} {mark}" if mark else body


def cite_seqs(body: str, seqs: Iterable[int]) -> str:
    return cite(body, ranges_of(seqs))


def shorten_item(item: str, max_chars: int) -> str:
    """`signals.shorten` of the text, the citation kept whole after it."""
    body, ranges = split_cites(item)
    return cite(shorten(body, max_chars), ranges)


def cited_seqs(item: str) -> list[int]:
    return [s for a, b in split_cites(item)[1] for s in range(a, b + 1)]


def terms(text: str) -> set[str]:
    """Words of three letters or more, numbers, and pairs of CJK characters."""
    low = text.casefold()
    out = {w for w in _LATIN.findall(low) if w not in _STOP}
    for run in _CJK_RUN.findall(low):
        if len(run) == 1:
            out.add(run)
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    return out - _STOP


@dataclass(frozen=True, slots=True)
class _Need:
    """What a message must hold to hold an item."""

    ids: tuple[str, ...]  # normalised identifiers and exact phrases: one of them suffices
    terms: frozenset[str]
    enough: int  # shared terms that suffice
    strong: tuple[str, ...]  # normalised identifiers and codes only

    @classmethod
    def of(cls, body: str) -> _Need:
        found = [*extract_identifiers(body), *_CODE.findall(body)]
        strong = tuple(k for k in dict.fromkeys(normalise(i) for i in found) if len(k) >= 3)
        # The parts of an artifact (`ran: ls -la → exit 0`, `got: 4NQLHD ← get_user`) and a
        # short item whole (`hi`): exact strings a holder has verbatim.
        parts = [_LABEL.sub("", p.strip()) for p in _ARROWS.split(body)]
        found += [p for p in parts if len(normalise(p)) >= 5]
        if len(terms(body)) < 2:
            found.append(_LABEL.sub("", body))
        ids = tuple(k for k in dict.fromkeys(normalise(i) for i in found) if k)
        words = frozenset(terms(body))
        return cls(ids, words, max(1, min(3, math.ceil(len(words) * 0.34))), strong)

    def score(self, norm: str, words: frozenset[str]) -> int:
        """0 when the text does not hold the item; higher for a better holder."""
        hit_ids = sum(1 for i in self.ids if i and i in norm)
        shared = len(self.terms & words)
        if not hit_ids and shared < self.enough:
            return 0
        return hit_ids * 4 + shared

    def restates(self, norm: str, words: frozenset[str]) -> int:
        """Stricter than `score`, for another summary item whose citation would be taken
        over unchecked: one of its identifiers, or half its words (two at least)."""
        hit = sum(1 for i in self.strong if i in norm)
        shared = len(self.terms & words)
        if not hit and shared < max(2, math.ceil(len(self.terms) / 2)):
            return 0
        return hit * 4 + shared


def message_text(m: LoggedMessage) -> str:
    """What a message shows: its text and its tool calls' names and arguments."""
    parts = [m.text]
    for c in m.body.get("tool_calls") or ():
        if isinstance(c, dict):
            name, args = call_function(c) or ("", "")
            parts.append(f"{name}({args})")
    return "\n".join(p for p in parts if p)


@dataclass(slots=True)
class CiteStats:
    kept: int = 0
    corrected: int = 0
    dropped: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"kept": self.kept, "corrected": self.corrected, "dropped": self.dropped}


@dataclass(slots=True)
class Sources:
    """The texts citations are checked against (see the module docstring)."""

    seqs: list[int] = field(default_factory=list)
    norms: list[str] = field(default_factory=list)
    words: list[frozenset[str]] = field(default_factory=list)
    previous: list[tuple[str, frozenset[str], Ranges]] = field(default_factory=list)

    @classmethod
    def of(cls, messages: Sequence[LoggedMessage], previous_items: Iterable[str] = ()) -> Sources:
        src = cls()
        for m in messages:
            if not m.counts_in_context:
                continue
            text = message_text(m)
            src.seqs.append(m.seq)
            src.norms.append(normalise(text))
            src.words.append(frozenset(terms(text)))
        for item in previous_items:
            body, ranges = split_cites(item)
            if body:  # uncited: stored before provenance
                src.previous.append((normalise(body), frozenset(terms(body)), ranges))
        return src

    @property
    def first(self) -> int:
        return self.seqs[0] if self.seqs else 0

    @property
    def last(self) -> int:
        return self.seqs[-1] if self.seqs else 0

    def holds(self, seq: int, body: str) -> bool:
        i = self._index(seq)
        return i is not None and _Need.of(body).score(self.norms[i], self.words[i]) > 0

    def _index(self, seq: int) -> int | None:
        from bisect import bisect_left

        i = bisect_left(self.seqs, seq)
        return i if i < len(self.seqs) and self.seqs[i] == seq else None

    def _holders(self, need: _Need, lo: int, hi: int) -> list[tuple[int, int]]:
        from bisect import bisect_left, bisect_right

        out = []
        for i in range(bisect_left(self.seqs, lo), bisect_right(self.seqs, hi)):
            score = need.score(self.norms[i], self.words[i])
            if score:
                out.append((self.seqs[i], score))
        return out

    def _previous(self, body: str, need: _Need) -> Ranges | None:
        """The citation of the previous summary's item that `body` restates, if any (an
        empty one for an item stored before provenance); None when it restates none."""
        key = normalise(body)
        best: tuple[int, Ranges | None] = (0, None)
        for norm, words, ranges in self.previous:
            if norm == key:
                return ranges
            # An uncited item (stored before provenance) passes no citation on: the
            # lenient rule; a cited one passes its citation on unchecked: the strict one.
            score = need.restates(norm, words) if ranges else need.score(norm, words)
            if score > best[0]:
                best = (score, ranges)
        return best[1]

    def best(self, body: str) -> Ranges | None:
        """The seqs of the range that hold `body` best (at most MAX_RANGES), else the
        previous summary's citation of it, else None."""
        need = _Need.of(body)
        holders = self._holders(need, self.first, self.last)
        if holders:
            top = max(s for _, s in holders)
            picked = [q for q, s in holders if s == top]
            return ranges_of(picked)[:MAX_RANGES]
        return self._previous(body, need)

    def check(self, item: str, stats: CiteStats | None = None) -> str | None:
        """`item` with a citation the log bears out, or None when nothing holds it."""
        stats = stats if stats is not None else CiteStats()
        body, cited = split_cites(item)
        if not body:
            return None
        need = _Need.of(body)
        kept: list[tuple[int, int]] = []
        for a, b in cited:
            if b < self.first and a >= 1:
                prior = self._previous(body, need) or ()
                if any(pa <= a and b <= pb for pa, pb in prior):
                    kept.append((a, b))  # the previous summary's own citation
                continue
            holders = self._holders(need, max(a, self.first), min(b, self.last))
            if holders:
                kept.append((holders[0][0], holders[-1][0]))
        if kept:
            ranges = merge_ranges(kept)[:MAX_RANGES]
            if ranges == cited:
                stats.kept += 1
            else:
                stats.corrected += 1
            return cite(body, ranges)
        best = self.best(body)
        if best is None:
            stats.dropped += 1
            return None
        if best == cited:
            stats.kept += 1
        else:
            stats.corrected += 1
        return cite(body, best)
