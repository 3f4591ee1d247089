"""The gate bench (bench/gate_bench.py) on a few dataset sessions: what it reports holds."""

from __future__ import annotations

import pytest

from app.compaction.checks import conversation_language_of
from app.core.tokens import get_counter
from bench.gate_bench import SUMMARISERS, Tally, logged, run_session
from tests.support.compaction_builders import dataset_sessions
from tests.support.fakellm import FakeLLM


@pytest.mark.parametrize("times", [1, 3])
async def test_no_stored_summary_misses_a_fitting_probe_or_cites_what_the_log_lacks(
    times: int,
) -> None:
    counter = get_counter("gpt-4o-mini")
    picked: dict[str, list[list]] = {"en": [], "zh": []}  # type: ignore[type-arg]
    for s in dataset_sessions():
        messages = logged(s["messages"], counter)
        lang = "zh" if conversation_language_of(messages) == "zh" else "en"
        if len(messages) >= 12 and len(picked[lang]) < 2:
            picked[lang].append(messages)
    async with FakeLLM() as llm:
        for summariser in SUMMARISERS:
            tally = Tally()
            for sessions in picked.values():
                for messages in sessions:
                    model = None if summariser == "extractive" else llm
                    await run_session(messages, times, summariser, model, tally, counter)
            assert tally.compactions >= 2 * times, summariser
            assert tally.lost_fitting == 0, summariser
            assert tally.unborne == 0, summariser
            for kind, scores in tally.final.items():
                assert len(scores) <= tally.compactions, kind
