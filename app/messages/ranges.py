"""Reading the log by seq ranges: what a summary item cites (`[#412-431]`, `[#3,7-9]`),
read back at once and bounded (SPEC §5 "Provenance").

`GET /sessions/{id}/messages` (`seqs`, `from_seq`/`to_seq`, `max_chars`), the MCP
tool `read_messages` and the payload's recall tool (run by the clients over that
route) all read through `read`: the ranges given as the summary writes them, a page
of at most `limit` messages, and the text of the page held to `max_chars` characters.
Within that bound short messages come whole and the long ones share what is left
(each cut to the same length, its `range` saying which characters of how many it
holds), so a range of one huge tool output among short turns still shows every turn.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.core.conversation import content_text
from app.core.errors import NotFound, invalid
from app.core.limits import BIGINT_MAX, SEQS_MAX_CHARS, SEQS_MAX_RANGES
from app.messages import repository as repo
from app.messages.service import message_view, slice_text
from app.sessions.service import get_session

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from app.db.database import Database
    from app.db.models import MessageRow, SessionRow

Range = tuple[int, int]

# What a model may wrap a citation in when it copies it: `[#412-431]`, `#412 - 431`,
# an en dash. Only the numbers, commas and dashes are read.
_WRAPPING = re.compile(r"[\[\]#\s]")
_DASHES = re.compile(r"[\u2010-\u2015\u2212~]")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def parse_seqs(text: str, field: str = "seqs") -> list[Range]:
    """`"412-431"`, `"3,7-9"`, `"[#412-431]"`: the ranges, merged and in order, or a 422
    naming `field`."""
    if len(text) > SEQS_MAX_CHARS:
        raise invalid(field, f"at most {SEQS_MAX_CHARS} characters")
    plain = _DASHES.sub("-", _WRAPPING.sub("", text))
    parts = [p for p in plain.split(",") if p]
    if not parts:
        raise invalid(field, 'give seqs as a summary cites them: "412-431" or "3,7-9"')
    if len(parts) > SEQS_MAX_RANGES:
        raise invalid(field, f"at most {SEQS_MAX_RANGES} ranges")
    ranges: list[Range] = []
    for part in parts:
        m = _RANGE.match(part)
        if m is None:
            raise invalid(field, f'{part[:40]!r} is not a seq or a range like "412-431"')
        a = int(m.group(1))
        b = int(m.group(2)) if m.group(2) is not None else a
        if not 1 <= a <= BIGINT_MAX or not 1 <= b <= BIGINT_MAX:
            raise invalid(field, f"seqs are between 1 and {BIGINT_MAX}")
        if b < a:
            raise invalid(field, f"{part!r}: a range's end must not be below its start")
        ranges.append((a, b))
    return merged(ranges)


def merged(ranges: Sequence[Range]) -> list[Range]:
    out: list[Range] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def cite(ranges: Sequence[Range]) -> str:
    """Ranges written as a summary cites them, without the brackets: `3,7-9`."""
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def clipped(ranges: Sequence[Range], low: int, high: int) -> list[Range]:
    """The part of `ranges` within `low..high`."""
    return [(max(a, low), min(b, high)) for a, b in ranges if b >= low and a <= high]


def share(lengths: Sequence[int], budget: int) -> int | None:
    """The length every text is cut to so that all of them together hold at most
    `budget` characters, the short ones whole; None when all fit whole."""
    if sum(lengths) <= budget:
        return None
    left, count = budget, len(lengths)
    for n in sorted(lengths):
        if n * count > left:
            return left // count
        left -= n
        count -= 1
    return None  # not reached: the lengths did not all fit


@dataclass(frozen=True, slots=True)
class Page:
    messages: list[dict[str, Any]]
    next_after_seq: int | None
    next_before_seq: int | None
    # With `seqs`: what of them is left to read after this page, as a citation.
    next_seqs: str | None
    last_seq: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "next_after_seq": self.next_after_seq,
            "next_before_seq": self.next_before_seq,
            "next_seqs": self.next_seqs,
            "last_seq": self.last_seq,
        }


async def read(
    s: AsyncSession,
    tenant: str,
    session: SessionRow,
    *,
    limit: int,
    after_seq: int = 0,
    before_seq: int | None = None,
    from_seq: int | None = None,
    to_seq: int | None = None,
    seqs: str | None = None,
    descending: bool = False,
    max_chars: int | None = None,
) -> Page:
    """One page of the log: `after_seq < seq < before_seq`, within `from_seq..to_seq`
    (inclusive) and within `seqs` (a citation) when given, `limit` messages at most,
    their text held to `max_chars` characters when given."""
    if from_seq is not None and to_seq is not None and to_seq < from_seq:
        raise invalid("to_seq", "must not be below from_seq")
    low = max(after_seq + 1, from_seq or 1)
    high = min(before_seq - 1 if before_seq is not None else BIGINT_MAX, to_seq or BIGINT_MAX)
    ranges = clipped(parse_seqs(seqs), low, high) if seqs is not None else [(low, high)]
    sid = session.id
    rows: list[MessageRow] = []
    if low > high:
        ranges = []
    # One primary-key walk per range, in reading order, until the page is full: a
    # citation of far-apart seqs reads what it cites, never the log between them.
    for a, b in reversed(ranges) if descending else ranges:
        rows += await repo.page(
            s,
            tenant,
            sid,
            a - 1,
            limit + 1 - len(rows),
            before_seq=b + 1 if b < BIGINT_MAX else None,
            descending=descending,
        )
        if len(rows) > limit:
            break
    more = len(rows) > limit
    items = [message_view(m) for m in rows[:limit]]
    if max_chars is not None:
        cut(items, max_chars)
    cursor = int(items[-1]["seq"]) if more else None
    rest = None
    if seqs is not None and cursor is not None:
        left = clipped(ranges, low, cursor - 1) if descending else clipped(ranges, cursor + 1, high)
        rest = cite(left) or None
    return Page(
        messages=items,
        next_after_seq=None if descending else cursor,
        next_before_seq=cursor if descending else None,
        next_seqs=rest,
        last_seq=session.last_seq,
    )


def cut(items: list[dict[str, Any]], max_chars: int) -> None:
    """Hold the messages' text to `max_chars` characters in all: the long ones cut to
    their share (`content` the first characters, `range` saying how many of how many)."""
    texts = [content_text(m) for m in items]
    level = share([len(t) for t in texts], max_chars)
    if level is None:
        return
    for m, text in zip(items, texts, strict=True):
        if len(text) > level:
            m["content"] = text[:level]
            m["range"] = {"unit": "char", "start": 0, "end": level, "total": len(text)}


async def read_one(
    database: Database,
    tenant: str,
    sid: str,
    seq: int,
    *,
    char_start: int | None = None,
    char_end: int | None = None,
    line_start: int | None = None,
    line_end: int | None = None,
) -> dict[str, Any]:
    """One message in full, or a range of its text: `GET /sessions/{id}/messages/{seq}`'s
    answer, and the MCP tool `read`'s."""
    async with database.transaction() as s:
        await get_session(s, tenant, sid)
        m = await repo.one(s, tenant, sid, seq)
    if m is None:
        raise NotFound(f"session {sid!r} has no message {seq}")
    out = message_view(m)
    chars = char_start is not None or char_end is not None
    lines = line_start is not None or line_end is not None
    if chars and lines:
        raise invalid("line_start", "give a character range or a line range, not both")
    if chars or lines:
        out["content"], out["range"] = slice_text(m, char_start, char_end, line_start, line_end)
    return out
