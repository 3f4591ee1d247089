"""Tool outputs that repeat newer ones: the same file viewed again, the same tests run again.

`key_messages` masks such a step where it would otherwise send it whole: the newer
copy is in the payload whole, and the older one spends the room of steps the payload
holds nowhere else. Lines are compared by hash, per message object once (the memo of
app/context/memo.py), so a call costs a set intersection per large output.
"""

from __future__ import annotations

from functools import partial

from app.context.view import Unit
from app.conversation import LoggedMessage

# A step whose large tool outputs repeat at least this share of their lines in newer
# outputs sent whole is masked even where it would fit whole: an agent views a file again
# after editing it and runs the same tests again, and the older copy spends the room of
# steps the payload holds nowhere else. Half to seven tenths ground alike (docs/agent-loop.md).
REPEAT_SHARE = 0.6


def _lines(m: LoggedMessage) -> frozenset[int]:
    """Hashes of a tool output's lines with some content (a line of punctuation, or a
    blank one, repeats in any two outputs)."""
    return frozenset(
        hash(stripped) for line in m.text.splitlines() if len(stripped := line.strip()) > 10
    )


def output_lines(unit: Unit, limit: int) -> list[frozenset[int]]:
    """The lines of each tool output of `unit` that masking would shrink (over `limit`)."""
    return [
        memo.get("repeat_lines", partial(_lines, m))
        for m, memo in zip(unit.messages, unit.memos(), strict=True)
        if m.role == "tool" and m.token_count > limit
    ]


def repeated(outputs: list[frozenset[int]], sent: set[int]) -> bool:
    """Whether `REPEAT_SHARE` of the lines of a step's large tool outputs (`output_lines`)
    are in outputs already sent whole (the same file viewed again, the same test run
    again)."""
    total = sum(len(lines) for lines in outputs)
    return total > 0 and sum(len(lines & sent) for lines in outputs) >= REPEAT_SHARE * total
