"""`sliding_window` is FIFO on every call (SPEC §3): through the stability layer, as the
log grows and trims happen, the history sent is the newest contiguous run of the
effective history plus the hard units (pinned, the latest user message), never an
older prefix kept for the cache; the first call of a stream included."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.context import AssemblyRequest, assemble
from app.context.stability import StableStrategy
from app.context.strategies import get_strategy
from app.context.trim_state import Layout
from app.core.conversation import LoggedMessage, split_groups
from app.db.models import SessionRow
from tests.support.context_builders import COUNTER, assistant, logged, tool, user
from tests.support.histories import histories


def _row(last_seq: int) -> SessionRow:
    return cast(SessionRow, SimpleNamespace(generation=0, last_compaction_seq=0, last_seq=last_seq))


def _call(
    history: list[LoggedMessage], stored: Layout | None, budget: int
) -> tuple[Any, Layout | None]:
    """One payload call as `app/context/service.py` makes it, with the layout kept here."""
    row = _row(history[-1].seq if history else 0)
    layout = stored if stored is not None and stored.holds_for(row) else Layout.untrimmed(row)
    stable = StableStrategy(get_strategy("sliding_window"), layout, row, budget, 0.7)
    result = assemble(
        AssemblyRequest(
            history=history,
            counter=COUNTER,
            budget=budget,
            session_id="s",
            system="You are a careful agent.",
            strategy=stable,
            history_from_seq=1,
        )
    )
    return result, stable.trimmed or stored


def _newest_run_plus_hard(history: list[LoggedMessage], kept: set[int]) -> bool:
    """Every unit from the oldest kept one that is not hard to the newest is kept."""
    groups, _ = split_groups([m for m in history if m.counts_in_context])
    latest_user = max((i for i, g in enumerate(groups) if g.kind == "user"), default=-1)
    held = [any(m.seq in kept for m in g.messages) for g in groups]
    hard = [i == latest_user or any(m.pinned for m in g.messages) for i, g in enumerate(groups)]
    first = next((i for i, g in enumerate(groups) if held[i] and not hard[i]), len(groups))
    return all(held[first:])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.integers(min_value=150, max_value=3000), st.integers(1, 4))
def test_every_call_sends_the_newest_contiguous_run(
    history: list[LoggedMessage], budget: int, step: int
) -> None:
    stored: Layout | None = None
    for end in range(step, len(history) + step, step):
        result, stored = _call(history[:end], stored, budget)
        assert _newest_run_plus_hard(history[:end], set(result.kept_seqs)), result.kept_seqs


def test_a_fresh_session_of_alternating_turns_keeps_the_newest_not_the_oldest() -> None:
    """The defect report: 31 alternating messages, a first call at a small budget gave
    seqs [1, 2, 31]; FIFO gives the latest messages as one run."""
    history = [
        logged(
            i + 1,
            user(f"question {i}")
            if i % 2 == 0
            else {"role": "assistant", "content": f"answer {i}"},
        )
        for i in range(31)
    ]
    result, _ = _call(history, None, 367)
    kept = list(result.kept_seqs)
    assert kept[-1] == 31 and len(kept) > 3
    assert kept == list(range(kept[0], 32))


def test_a_trim_keeps_the_output_just_read_when_it_fits_the_budget() -> None:
    """The defect report: the newest tool group fits the budget but not the low-water
    mark; the trim cut to the mark and sent the agent's last sentence without the
    output it was about (seqs [3, 6], 24 tokens of a 2,400 budget)."""
    history = [
        logged(1, user("Earlier question: " + "context words " * 400)),
        logged(2, {"role": "assistant", "content": "Earlier answer."}),
        logged(3, user("Why does the build fail?")),
        logged(4, assistant(None, "c1", "c2")),
        logged(5, tool("c1", "error: undefined reference to foo_bar in module 12\n" * 70)),
        logged(6, tool("c2", "error: undefined reference to foo_baz in module 13\n" * 70)),
        logged(7, {"role": "assistant", "content": "The linker cannot find foo_bar."}),
    ]
    result, stored = _call(history, None, 2400)
    assert list(result.kept_seqs) == [3, 4, 5, 6, 7]
    assert 0.7 * 2400 < result.usage.input_tokens <= 2400
    # The next step appends to it while it fits: the trim did not cut below the mark.
    more = [*history, logged(8, user("And now?"))]
    again, _ = _call(more, stored, 2400)
    assert list(again.kept_seqs) == [3, 4, 5, 6, 7, 8]
