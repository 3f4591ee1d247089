"""Compaction over the real conversations of the shared dataset (sessions.jsonl)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from app.compaction.candidates import extract_candidates
from app.compaction.checks import conversation_language_of
from app.compaction.engine import summarise
from app.compaction.model_client import ChatModelClient
from app.compaction.signals import classify, split_sentences
from app.compaction.turns import CompactionPlan, NoopReason, plan_range
from tests.support.compaction_builders import COUNTER, EngineSettings, dataset_sessions, log_of
from tests.support.fakellm import FakeLLM


def _multi_turn() -> list[dict[str, Any]]:
    return [s for s in dataset_sessions() if sum(m["role"] == "user" for m in s["messages"]) >= 4]


@pytest.fixture
async def model(llm: FakeLLM) -> AsyncIterator[tuple[FakeLLM, ChatModelClient]]:
    async with ChatModelClient(base_url=llm.base_url, model="fake") as client:
        yield llm, client


async def test_every_multi_turn_session_compacts_with_the_model_and_without(
    model: tuple[FakeLLM, ChatModelClient],
) -> None:
    llm, client = model
    sessions = _multi_turn()
    assert len(sessions) >= 15
    for session in sessions:
        log = log_of(session["messages"])
        plan = plan_range(log, watermark=0, min_preserved_turns=2)
        assert isinstance(plan, CompactionPlan), session["id"]
        lang = conversation_language_of(log)
        assert lang == session["meta"]["lang"], session["id"]
        before = llm.call_count
        with_model = await summarise(
            plan, None, [], client=client, settings=EngineSettings(), counter=COUNTER
        )
        assert with_model.status == "success", (session["id"], with_model.reason)
        assert llm.call_count - before == with_model.model_calls
        extractive = await summarise(
            plan, None, [], client=None, settings=EngineSettings(), counter=COUNTER
        )
        assert extractive.status == "success"
        for outcome in (with_model, extractive):
            assert outcome.language == lang
            assert outcome.rendered_text.startswith("[此前对话摘要" if lang == "zh" else "[Summary")
        # Every constraint the user stated in the range survives the extractive summary.
        for m in plan.range_messages:
            if m.role != "user":
                continue
            for sentence in split_sentences(m.text):
                if "constraint" in classify(sentence) and len(sentence) <= 300:
                    assert sentence in extractive.rendered_text, (session["id"], sentence)


def test_single_turn_agent_traces_have_nothing_compressible() -> None:
    # The whole run is one turn (one user task); it is current, so compaction is a no-op
    # and trimming (previews, dropped old tool groups) is what keeps it in budget.
    session = next(s for s in dataset_sessions() if str(s["id"]).startswith("swe-agent:ctf"))
    result = plan_range(log_of(session["messages"]), watermark=0, min_preserved_turns=0)
    assert isinstance(result, NoopReason) and result.code == "nothing_compressible"


def test_candidates_over_the_whole_dataset_respect_limits() -> None:
    for session in dataset_sessions():
        found = extract_candidates(log_of(session["messages"]), session_id=session["id"])
        assert len(found) <= 20
        for c in found:
            assert len(c.candidate_text.encode("utf-8")) <= 2048
            assert 0 <= c.confidence <= 1 and c.constraint_tags


async def test_real_token_counter_on_a_chinese_session(
    model: tuple[FakeLLM, ChatModelClient],
) -> None:
    from app.core.tokens import get_counter

    counter = get_counter("gpt-4o")
    session = next(s for s in dataset_sessions() if str(s["id"]).startswith("crosswoz:"))
    plan = plan_range(log_of(session["messages"]), watermark=0, min_preserved_turns=2)
    assert isinstance(plan, CompactionPlan)
    _, client = model
    for c in (client, None):
        outcome = await summarise(
            plan, None, [], client=c, settings=EngineSettings(), counter=counter
        )
        assert outcome.status == "success" and outcome.language == "zh"
        assert outcome.summary_tokens == counter.count_text(outcome.rendered_text)
        assert outcome.summary_tokens < plan.range_tokens
