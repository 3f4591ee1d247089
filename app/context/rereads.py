"""Re-reads (SPEC §3): a tool call whose name and arguments repeat an earlier call whose
result the payload no longer held whole. Pure: app/messages/rereads.py asks it, at the
append that makes the repeated call, about what the server knows of the last payload.

"The payload" is the stream's last payload as the server can rebuild it without
having recorded it: the session's most recently stored stream layout
(`context_layouts`, app/context/layout.py) when it still holds for the session's
generation and watermark, else an untrimmed payload. The earlier result was *not held
whole* when any of these is true:

- it is at or below the watermark: folded into the summary;
- the layout's trim covered it (its seq is at or below the layout's `through_seq`) and
  kept it in no unit, or only in a unit sent in the compact form (masked to a
  preview or cut): left out or masked;
- its tokens exceed the tool-output preview limit (`CONTEXTD_TOOL_PREVIEW_TOKENS`):
  every payload sends it as a preview.

A result appended after the layout's trim (above `through_seq`) was sent whole, as
the stream's next payloads append every message after it until the next trim.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.context.layout import Layout
from app.context.view import Form


@dataclass(frozen=True, slots=True)
class Earlier:
    """The earlier call's result: its seq and tokens."""

    seq: int
    tokens: int


def held_whole(
    result: Earlier, *, watermark: int, layout: Layout | None, preview_limit: int
) -> bool:
    """Whether the last payload held `result` whole (see the module's docstring)."""
    if result.seq <= watermark:
        return False
    if result.tokens > preview_limit:
        return False
    if layout is None or result.seq > layout.through_seq:
        return True
    for seqs, form, _ in layout.kept:
        if result.seq in seqs:
            return form == Form.FULL
    return False


def payload_layout(generation: int, watermark: int, newest: Layout | None) -> Layout | None:
    """The layout of the session's last payload: its newest stored layout while that still
    holds (same generation and watermark), else None (the stream sent it untrimmed)."""
    if newest is None or newest.generation != generation or newest.watermark != watermark:
        return None
    return newest
