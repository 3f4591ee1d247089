"""Tool outputs that repeat newer ones (the same file viewed again, the same tests run
again), and how a step that does not fit whole is sent (`masked_form`).

`key_messages` masks such a step where it would otherwise send it whole: the newer
copy is in the payload whole, and the older one spends the room of steps the payload
holds nowhere else. Lines are compared by hash, per message object once (the memo of
app/context/memo.py), so a call costs a set intersection per large output.
"""

from __future__ import annotations

from functools import partial

from app.context.view import Form, HistoryView, Unit
from app.core.conversation import LoggedMessage

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


def masked_form(view: HistoryView, u: Unit, sent: set[int]) -> tuple[Form, str]:
    """How `key_messages` sends a step that does not fit whole (SPEC §3: what later steps
    refer to is masked last; app/context/references.py). One whose tool outputs
    introduced identifiers later steps name, or whose call a later step made again, is
    sent whole where that costs at most `Limits.lines_tokens` more than masking it, else
    with those outputs cut to the lines naming them (both `referenced`); the others are
    masked to previews (`recent`), and so is one whose outputs repeat a newer output sent
    whole (`recent:repeated`, `sent`: its lines): the newer copy is there."""
    refs = view.refs
    if refs is None or not any(m.role == "tool" for m in u.messages):
        return Form.COMPACT, "recent"
    if not (refs.referenced(u) or refs.repeated(u)):
        return Form.COMPACT, "recent"
    outputs = output_lines(u, view.limits.compact_preview_tokens)
    if sent and outputs and repeated(outputs, sent):
        return Form.COMPACT, "recent:repeated"
    if u.cost(Form.FULL) <= view.limits.lines_tokens + u.cost(Form.COMPACT):
        return Form.FULL, "referenced"
    return Form.LINES, "referenced"
