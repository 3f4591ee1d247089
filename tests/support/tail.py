"""What a watermark may cover, checked from outside (SPEC §5–§6), for tests and benches.

Since compaction may reach inside the current turn, "the watermark stays below the
latest user message" is no longer the rule; what stays is the current turn's last
`min_preserved_steps` steps (and, in effect, its opening user message, which the
payload keeps verbatim: the turn anchor).

The step rule is written out again here on purpose, over the JSON a client reads,
rather than imported from `app/core/conversation.py` (`split_steps`): a checker that
reused the code it checks would agree with any bug in it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def step_starts(turn: Sequence[Mapping[str, Any]]) -> list[int]:
    """The first seq of each step of a turn's messages (after its user message).

    A step is a tool group with any assistant text just before it, or a lone
    assistant message; tool results belong to the step of their call.
    """
    starts: list[int] = []
    text_pending: int | None = None
    for m in turn:
        if m["role"] != "assistant":
            continue
        if m.get("tool_calls"):
            starts.append(text_pending if text_pending is not None else int(m["seq"]))
            text_pending = None
        else:
            if text_pending is not None:
                starts.append(text_pending)
            text_pending = int(m["seq"])
    if text_pending is not None:
        starts.append(text_pending)
    return starts


def tail_violation(
    log: Sequence[Mapping[str, Any]], watermark: int, min_preserved_steps: int = 4
) -> str | None:
    """Why `watermark` covers what must stay in the effective history, or None.

    Lenient where the log alone cannot tell (an open last step counts as a step),
    so a report is always a real violation.
    """
    users = [int(m["seq"]) for m in log if m["role"] == "user"]
    if not watermark or not users or watermark < users[-1]:
        return None
    turn = [m for m in log if int(m["seq"]) > users[-1]]
    starts = step_starts(turn)
    keep = min(min_preserved_steps, len(starts))
    if keep == 0:
        return f"watermark {watermark} covers the current turn (user at {users[-1]}), which has no step"
    if watermark >= starts[-keep]:
        return (
            f"watermark {watermark} covers the current turn's last {keep} steps "
            f"(from seq {starts[-keep]})"
        )
    return None
