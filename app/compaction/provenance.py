"""Provenance: the seqs of the log each summary item stands for (SPEC §5).

An item carries its citation at its end, as the payload shows it: `text [#412-431]`,
`text [#7]` or `text [#3,7-9]`, so the citation is counted wherever the item is
(the summary's cap, a section's share) and survives every step that moves items
around. The stored structure also lists them apart (`seqs`, see `summary.py`).

A citation is only as good as the log: `Sources` holds the compacted range (each
message's text, tool calls and arguments included) and the previous summary's
items with their citations. An item is kept where what it cites *supports* it
(`support.py`: its identifiers and numbers with the same token boundaries, enough of
its words), its citation trimmed to the holders that hold something of it and
completed from the range or the previous summary when they fall short (a citation
outside the range or of seqs that do not hold it is corrected so). An item nothing
supports is dropped as `unsupported` (the model invented it), unless the session's
anchors or system prompt support it (then it is kept uncited: the session's words);
one that repeats the summariser's own instructions is dropped as `echo`. Each drop is
counted and listed (`CiteStats`), in the job's `gate` record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.compaction.signals import normalise, shorten
from app.compaction.support import Claim, Text, echo_of, flat, held
from app.core.conversation import LoggedMessage, call_function

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
    """`body` citing `seqs`: every one of them (as one span when they are many ranges)."""
    return cite(body, capped(ranges_of(seqs)))


def capped(ranges: Ranges) -> Ranges:
    """At most MAX_RANGES ranges: one span over them all when there are more (a span holds
    what each of its ranges holds; a cut list would not)."""
    return ((ranges[0][0], ranges[-1][1]),) if len(ranges) > MAX_RANGES else ranges


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


def message_text(m: LoggedMessage) -> str:
    """What a message shows: its text and its tool calls' names and arguments."""
    parts = [m.text]
    for c in m.body.get("tool_calls") or ():
        if isinstance(c, dict):
            name, args = call_function(c) or ("", "")
            parts.append(f"{name}({args})")
    return "\n".join(p for p in parts if p)


def _holder_text(m: LoggedMessage) -> str:
    """`message_text`, and the values of its calls' arguments decoded: an item may quote
    `grep "x" a.py` where the call's JSON says `grep \\"x\\" a.py`."""
    parts = [message_text(m)]
    for c in m.body.get("tool_calls") or ():
        if isinstance(c, dict):
            try:
                args = json.loads((call_function(c) or ("", ""))[1] or "null")
            except ValueError:
                continue
            stack = [args]
            while stack:
                v = stack.pop()
                if isinstance(v, dict):
                    stack.extend(v.values())
                elif isinstance(v, list):
                    stack.extend(v)
                elif isinstance(v, str):
                    parts.append(v)
    return "\n".join(parts)


# The dropped items a job's record lists (the count covers them all), each cut to this.
MAX_LISTED = 20
LISTED_CHARS = 120


@dataclass(slots=True)
class CiteStats:
    """What the citation check did to one answer's items; `dropped` by reason: `unsupported`
    (nothing the log or the session holds supports it: invented) or `echo` (the summariser's
    own instructions repeated)."""

    kept: int = 0
    corrected: int = 0
    dropped: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)

    def drop(self, body: str, reason: str, missing: Sequence[str] = ()) -> None:
        self.dropped += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1
        if len(self.items) < MAX_LISTED:
            entry: dict[str, Any] = {"text": shorten(body, LISTED_CHARS), "reason": reason}
            if missing:
                entry["missing"] = [shorten(m, LISTED_CHARS) for m in missing[:5]]
            self.items.append(entry)

    @property
    def invented(self) -> int:
        return self.dropped

    def to_dict(self) -> dict[str, Any]:
        return {
            "kept": self.kept,
            "corrected": self.corrected,
            "dropped": self.dropped,
            "unsupported": self.reasons.get("unsupported", 0),
            "echo": self.reasons.get("echo", 0),
            "dropped_items": list(self.items),
        }


@dataclass(frozen=True, slots=True)
class _Holder:
    """A text items may cite: a message of the range, or an item of the previous summary
    (citing it means citing what that item cites; an uncited one passes nothing on)."""

    text: Text
    ranges: Ranges
    in_range: bool


@dataclass(slots=True)
class Sources:
    """The texts citations are checked against (see the module docstring)."""

    seqs: list[int] = field(default_factory=list)
    texts: list[Text] = field(default_factory=list)
    previous: list[tuple[str, _Holder]] = field(default_factory=list)
    # The session's own words (anchors, system prompt): an item they support is kept uncited.
    own: list[Text] = field(default_factory=list)
    # The summariser's instructions, `normalise`d: an item repeating them is an echo.
    instructions: str = ""

    @classmethod
    def of(
        cls,
        messages: Sequence[LoggedMessage],
        previous_items: Iterable[str] = (),
        *,
        own: Iterable[str] = (),
        instructions: str = "",
    ) -> Sources:
        src = cls(instructions=normalise(instructions))
        for m in messages:
            if not m.counts_in_context:
                continue
            src.seqs.append(m.seq)
            src.texts.append(Text.of(_holder_text(m)))
        for item in previous_items:
            body, ranges = split_cites(item)
            if body:
                src.previous.append((normalise(body), _Holder(Text.item(body), ranges, False)))
        src.own = [Text.of(t) for t in own if t.strip()]
        return src

    @property
    def first(self) -> int:
        return self.seqs[0] if self.seqs else 0

    @property
    def last(self) -> int:
        return self.seqs[-1] if self.seqs else 0

    def _pool(self) -> list[_Holder]:
        here = [_Holder(t, ((s, s),), True) for s, t in zip(self.seqs, self.texts, strict=True)]
        return [*here, *(h for _, h in self.previous)]

    def supports(self, ranges: Ranges, body: str, *, keys_only: bool = False) -> bool:
        """Whether the messages of `ranges` (those this log has) support `body`; with
        `keys_only`, hold its identifiers and numbers (what an item contextd wrote by rule
        from them must hold: its other words are contextd's, `ran: … → exit 0`)."""
        texts = [t for s, t in zip(self.seqs, self.texts, strict=True)
                 if any(a <= s <= b for a, b in ranges)]  # fmt: skip
        if not texts:
            return False
        claim = Claim.of(body)
        if keys_only:
            return not [k for k in claim.keys() if not any(claim.holds_key(k, t) for t in texts)]
        return claim.supported(texts)

    def _support(self, claim: Claim, cited: Ranges) -> Ranges | None:
        """The citation of the holders that support `claim`: those of `cited` that hold
        something of it, completed from the range and the previous summary (the holder
        with most of its words, then those with identifiers still missing); None when
        nothing completes it."""
        pool = self._pool()

        def overlaps(h: _Holder) -> bool:
            return any(a <= d and c <= b for a, b in cited for c, d in h.ranges)

        chosen = [h for h in pool if overlaps(h) and claim.touches(h.text)]
        texts = [h.text for h in chosen]
        have = claim.shared(texts)
        if have < claim.need:
            rest = [h for h in pool if h not in chosen]
            best = max(
                rest, key=lambda h: (claim.shared([*texts, h.text]), h.in_range), default=None
            )
            if best is not None and claim.shared([*texts, best.text]) > have:
                chosen.append(best)
        for _ in range(len(claim.keys()) + 1):
            missing = set(claim.missing([h.text for h in chosen]))
            if not missing:
                break
            # The holder with most of what is still missing (the range's before the
            # previous summary's, then the earliest).
            adds = [
                (len(missing - set(claim.missing([h.text]))), h.in_range, -i)
                for i, h in enumerate(pool)
                if h not in chosen
            ]
            top = max(adds, default=(0, False, 0))
            if not top[0]:
                return None
            chosen.append(pool[-top[2]])
        if not claim.supported([h.text for h in chosen]):
            return None
        return capped(merge_ranges(r for h in chosen for r in h.ranges))

    def best(self, body: str) -> Ranges | None:
        """The citation of what in the range (or the previous summary) supports `body`."""
        return self._support(Claim.of(body), ())

    def echoes(self, body: str) -> bool:
        """`body` repeats the summariser's instructions, and no message holds it verbatim."""
        if not self.instructions or not echo_of(body, self.instructions):
            return False
        whole = flat(body)
        return not any(held(whole, t.flat) for t in self.texts)

    def check(self, item: str, stats: CiteStats | None = None) -> str | None:
        """`item` with a citation the log bears out, or None when it is dropped: an echo of
        the instructions, or supported by nothing (the log, the previous summary, the
        session's anchors and system prompt)."""
        stats = stats if stats is not None else CiteStats()
        body, cited = split_cites(item)
        if not body:
            return None
        if self.echoes(body):
            stats.drop(body, "echo")
            return None
        key = normalise(body)
        same = next((h for norm, h in self.previous if norm == key), None)
        claim = Claim.of(body)
        ranges = same.ranges if same is not None else self._support(claim, cited)
        if ranges is None:
            if any(claim.supported([t]) for t in self.own):
                stats.kept += 1  # the session's words, not the log's: uncited
                return body
            stats.drop(body, "unsupported", claim.missing([*self.texts, *self.own]))
            return None
        if ranges == cited:
            stats.kept += 1
        else:
            stats.corrected += 1
        return cite(body, ranges)
