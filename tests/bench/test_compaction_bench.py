"""bench/compaction_bench.py picks its sessions by the planner's rule, and the app agrees."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bench.compaction_bench import (
    CONFIGS,
    Run,
    Source,
    Variant,
    harness,
    prepare,
    run_session,
    select_cases,
)


@pytest.fixture(scope="module")
def database_url(make_database: Callable[[], str]) -> str:
    """A database of this module's own: the harness runs a compaction runner, which would
    claim the jobs other files leave pending in the shared one."""
    return make_database()


def _source(steps: int) -> Source:
    """Four short turns, then one agent turn of `steps` tool steps, then three short turns.

    The bench puts the agent turn at the end of the first chunk and one short turn
    in the second. With six steps (in the bench's smallest window, 8,192 tokens)
    what the first compaction keeps of the agent turn and the next short turn fit
    `keep_recent_ratio` whole, so the second compaction has nothing to fold; with
    two it compacts three times. Which step counts do depends on where the chunks
    are cut and how large the window is: only the planner can say.
    """
    messages: list[dict[str, Any]] = []
    for i in range(4):
        messages.append({"role": "user", "content": f"Question {i} about my trip?"})
        messages.append({"role": "assistant", "content": f"Answer {i}."})
    messages.append({"role": "user", "content": "Now rebook every leg of the trip."})
    for i in range(steps):
        arguments = f'{{"leg": {i}}}'
        call = {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "leg", "arguments": arguments},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append(
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "content": f"leg {i}: " + "seat 12A window " * 80,
            }
        )
    messages.append({"role": "assistant", "content": "All legs rebooked."})
    for i in range(3):
        messages.append({"role": "user", "content": f"Follow-up {i}?"})
        messages.append({"role": "assistant", "content": f"Reply {i}."})
    return Source(f"steps-{steps}", "test", "agent", "en", None, messages)


def test_a_session_the_planner_would_not_compact_three_times_is_left_out() -> None:
    kept_whole = _source(steps=6)
    # Counting turns, as the bench did, takes it: it has enough turns for three chunks.
    assert prepare(kept_whole, ["C1", "C2", "C3"], 2) is not None
    selection = select_cases([_source(steps=2), kept_whole], None, 2)
    assert [c.source.id for c in selection.cases] == ["steps-2"]
    assert selection.qualified == 1 and selection.too_few_turns == 0
    assert selection.planner_noops == [("steps-6", 2, "nothing_compressible")]
    watermarks = selection.cases[0].watermarks
    assert len(watermarks) == 3 and list(watermarks) == sorted(set(watermarks))


async def test_the_app_compacts_where_the_selection_planned(database_url: str) -> None:
    (case,) = select_cases([_source(steps=2)], None, 2).cases
    extractive = next(c for c in CONFIGS if not c.use_model)
    async with harness(database_url) as h:
        h.use(extractive)
        run = Run(case)
        # Raises when a compaction is a noop or moves the watermark elsewhere.
        await run_session(h, case, Variant(extractive, 2), run)
    assert [s.status for s in run.steps] == ["success"] * 3
