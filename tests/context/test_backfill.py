"""The compacted units a payload sends below the watermark (app/context/backfill.py):
whole, newest first, contiguous, never a user message, only in the room the effective
history leaves."""

from __future__ import annotations

from typing import Any

import pytest

from app.context import AssemblyRequest, SummaryBlock, assemble, backfill
from app.core.conversation import LoggedMessage
from tests.support.context_builders import COUNTER, assistant, check, log_of, tool, user


def _run(turns: int = 3, steps: int = 6, size: int = 40) -> list[LoggedMessage]:
    """`turns` turns of a user message and `steps` tool steps of about `size` tokens each."""
    msgs: list[dict[str, Any]] = []
    for t in range(turns):
        msgs.append(user(f"Turn {t}: fix the parser."))
        for s in range(steps):
            cid = f"c{t}_{s}"
            msgs += [assistant(None, cid), tool(cid, f"src/p{t}_{s}.py " + "x " * size)]
    return log_of(msgs)


def _assemble(
    history: list[LoggedMessage],
    through: int,
    budget: int,
    strategy: str = "key_messages",
    **kw: Any,
) -> Any:
    request = AssemblyRequest(
        history=history,
        counter=COUNTER,
        budget=budget,
        session_id="s",
        summary=SummaryBlock("the summary", through),
        strategy=strategy,
        history_from_seq=through + 1,
        history_complete_from=kw.pop("complete_from", 1),
        **kw,
    )
    result = assemble(request)
    check(request, result)
    return result


def _rules(result: Any) -> dict[int, tuple[str, str]]:
    return {
        s: (d.action, d.rule)
        for d in result.decisions
        for s in range(d.seq, (d.through or d.seq) + 1)
    }


def test_the_room_left_goes_to_the_newest_compacted_steps_whole() -> None:
    history = _run()
    through = 31  # the last turn opens at 27: its first two steps and the turns before
    result = _assemble(history, through, 1400)
    kept = list(result.kept_seqs)
    below = [s for s in kept if s <= through and s != 27]
    assert below, result.decisions
    # Contiguous from the watermark down, whole groups (a call with its result).
    assert below[-1] == through and len(below) % 2 == 0
    rules = _rules(result)
    for call in below[::2]:
        assert rules[call] == ("kept", backfill.RULE)
        assert rules[call + 1] == ("kept", "tool_group")
    # Never a user message below the watermark: the summary carries them. The run goes
    # on past one (into the turn before) where there is room.
    assert 14 not in kept and rules[14] == ("excluded", "summarized")
    # What is not sent below the watermark is the summary's, not dropped.
    assert result.dropped_count == 0
    assert all(rules[s] == ("excluded", "summarized") for s in range(1, below[0]) if s != 27)
    # Within the budget, and every effective step whole.
    assert result.usage.input_tokens <= 1400
    assert all(rules[s][0] == "kept" for s in range(through + 1, len(history) + 1))


def test_nothing_below_while_the_effective_history_is_not_sent_whole() -> None:
    history = _run(size=120)
    through = 20
    result = _assemble(history, through, 1100)
    rules = _rules(result)
    assert any(rules[s][0] in ("preview", "dropped") for s in range(through + 1, len(history) + 1))
    assert [s for s in result.kept_seqs if s <= through] == []


def test_the_run_stops_at_the_first_unit_that_does_not_fit() -> None:
    history = _run(turns=1, steps=12)  # the user at 1, steps (2, 3) ... (24, 25)
    # One step too big for the room, just below the newest compacted one: nothing older
    # than it is sent, though smaller steps would fit.
    big = history[16]
    body = {**big.body, "content": "y " * 1500}
    history[16] = LoggedMessage(
        seq=big.seq, id=big.id, role=big.role, body=body, token_count=COUNTER.count_message(body)
    )
    result = _assemble(history, 19, 1200, preview_limit_tokens=2000)
    kept = list(result.kept_seqs)
    assert 18 in kept and 19 in kept  # the newest compacted step fits
    assert [s for s in kept if 1 < s < 18] == []


def test_only_from_where_the_log_was_read_whole() -> None:
    history = _run()
    # The window read from seq 30 (the rows below it came for another reason).
    result = _assemble(history, 31, 1400, complete_from=30)
    assert [s for s in result.kept_seqs if s <= 31 and s != 27] == [30, 31]


@pytest.mark.parametrize("strategy", ["summary", "sliding_window"])
def test_other_strategies_never_see_compacted_units(strategy: str) -> None:
    history = _run()
    result = _assemble(history, 31, 1400, strategy=strategy)
    assert [s for s in result.kept_seqs if s <= 31 and s != 27] == []
