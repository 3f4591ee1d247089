"""Recall in the payload (SPEC §3 "Recall"): the recall tool and the note on what was left out.

With `recall` on (the session's setting, or the call's `recall` parameter) a payload

- offers the recall tool (app/core/recall_tool.py) among its `tools`, unless the caller's
  tools already hold one of that name (an adapter that sends its own);
- says in one short system note, at the end of its head (after the system block,
  dynamic context and summary, before the history), how many messages of the log
  it does not show, which seqs (as ranges), and that the recall tool finds them.

Both count toward the budget: the tool as any tool; the note through a reserve of
its largest possible size, taken from the budget before the history is selected
(as `reserve_output_tokens` is), so adding it never pushes a payload over. The note
is a function of what was left out alone: it stays byte for byte the same between
calls while the selection only grows, and changes when a trim or compaction does.

Left out: every seq before the first message the payload keeps from the log
(trimmed, compacted or never reached by the window), and the runs the strategy
dropped, or the summary stands for, between kept ones. UI-only and historical
system messages between kept messages are not counted: the model was never meant
to see them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from app.context.types import AssembledContext, Decision, TokenCounter
from app.core import recall_tool as recall_tools

# The note names at most this many ranges, then how many more there are.
MAX_RANGES = 4
# The widest seq a note could name (a bigint's digits): sizes the reserve.
_WIDE = 10**18


def enabled(asked: bool | None, session_setting: bool) -> bool:
    """The call's `recall` when given, else the session's setting."""
    return session_setting if asked is None else asked


def with_tool(tools: Sequence[Mapping[str, Any]] | None) -> list[dict[str, Any]]:
    """`tools` plus the recall tool, unless one of that name is there already."""
    out = [dict(t) for t in tools or ()]
    if not any(_tool_name(t) == recall_tools.NAME for t in out):
        out.append(recall_tools.chat_tool())
    return out


def _tool_name(tool: Mapping[str, Any]) -> str | None:
    fn = tool.get("function")
    if isinstance(fn, Mapping):
        name = fn.get("name")
        return name if isinstance(name, str) else None
    name = tool.get("name")
    return name if isinstance(name, str) else None


def note_text(ranges: Sequence[tuple[int, int]]) -> str:
    count = sum(b - a + 1 for a, b in ranges)
    shown = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges[:MAX_RANGES])
    more = len(ranges) - MAX_RANGES
    if more > 0:
        shown += f" and {more} more range{'s' if more > 1 else ''}"
    noun = "message" if count == 1 else "messages"
    return (
        f"{count} earlier {noun} of this conversation are not shown here (seq {shown}). "
        "They are kept in full: the recall tool searches them and reads any of them by seq."
    )


def note_message(ranges: Sequence[tuple[int, int]]) -> dict[str, Any]:
    return {"role": "system", "content": note_text(ranges)}


_RESERVES: dict[str, int] = {}


def reserve(counter: TokenCounter) -> int:
    """Tokens the note may take at most: kept free of the history's budget."""
    known = _RESERVES.get(counter.name)
    if known is None:
        # The widest note: the first range the longest, then two-sided ranges of the
        # widest seqs, one more than a note names (so "and 1 more range" too).
        widest = [(1, _WIDE)] + [(_WIDE + 3 * i, _WIDE + 3 * i + 1) for i in range(MAX_RANGES)]
        known = _RESERVES[counter.name] = note_tokens(counter, widest)
    return known


def note_tokens(counter: TokenCounter, ranges: Sequence[tuple[int, int]]) -> int:
    """What the note adds to a payload's input tokens."""
    return counter.count_messages([note_message(ranges)]) - counter.count_messages([])


def left_out(
    kept_seqs: Iterable[int], decisions: Iterable[Decision], last_seq: int
) -> list[tuple[int, int]]:
    """The seq ranges the payload leaves out (see the module docstring), in order."""
    kept = sorted(set(kept_seqs))
    if not kept:
        return [(1, last_seq)] if last_seq > 0 else []
    ranges: list[tuple[int, int]] = []
    if kept[0] > 1:
        ranges.append((1, kept[0] - 1))
    # Past the first kept seq, a seq no decision covers was never read (the compacted
    # messages between the turn anchor and the window): left out as well.
    covered = kept[0]
    for d in sorted(decisions, key=lambda d: d.seq):
        end = d.through if d.through is not None else d.seq
        if d.seq > covered + 1:
            ranges.append((covered + 1, d.seq - 1))
        # Between kept messages, what the summary stands for is not shown either (the
        # compacted messages after the turn anchor or the compacted units sent, up to
        # the watermark: app/context/backfill.py).
        gone = d.action == "dropped" or (d.action == "excluded" and d.rule == "summarized")
        if gone and end > kept[0]:
            ranges.append((max(d.seq, kept[0] + 1), end))
        covered = max(covered, end)
    if covered < kept[-1]:
        covered = kept[-1]
    if covered < last_seq:
        ranges.append((covered + 1, last_seq))
    return _merged(ranges)


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def add_note(
    body: dict[str, Any],
    result: AssembledContext,
    head_messages: int,
    last_seq: int,
    counter: TokenCounter,
) -> None:
    """Put the note into `body` (the context object before formatting) at the end of the
    head, and count it: `usage.input_tokens`, `usage.breakdown.recall`, and the stable
    prefix when the note lies inside it. Adds `recall: {left_out_count, left_out}`."""
    ranges = left_out(result.kept_seqs, result.decisions, last_seq)
    usage = body["usage"]
    usage["breakdown"]["recall"] = 0
    body["recall"] = {
        "left_out_count": sum(b - a + 1 for a, b in ranges),
        "left_out": [[a, b] for a, b in ranges],
    }
    if not ranges:
        return
    tokens = note_tokens(counter, ranges)
    body["messages"].insert(head_messages, note_message(ranges))
    usage["input_tokens"] += tokens
    usage["breakdown"]["recall"] = tokens
    # Shared with the previous payload beyond the head: the history is the same, so
    # what was left out, and the note, are too.
    if usage.get("stable_prefix_messages", 0) > head_messages:
        usage["stable_prefix_messages"] += 1
        usage["stable_prefix_tokens"] = usage.get("stable_prefix_tokens", 0) + tokens
