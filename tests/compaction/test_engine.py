"""The engine end to end over real HTTP against tests/support/fakellm.py."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import httpx
import pytest

from app.compaction.engine import summarise
from app.compaction.extractive import tokens_over_cap
from app.compaction.outcome import SummaryOutcome
from app.compaction.summary import StructuredSummary, render_summary, summary_token_cap
from app.compaction.turns import CompactionPlan, plan_range
from app.core.conversation import LoggedMessage
from tests.support.compaction_builders import COUNTER, EngineSettings, call, log_of
from tests.support.fakellm import FakeLLM, summary_answer
from tests.support.loop import watch_loop

ANCHOR = "The production database is called orders_prod and must never be dropped."
CONSTRAINTS = ["You must keep all timestamps in UTC.", "Never commit directly to main."]


def _log() -> list[LoggedMessage]:
    items: list[dict[str, Any]] = [
        {"role": "user", "content": f"We are migrating the billing service. {CONSTRAINTS[0]}"},
        {"role": "assistant", "content": "Understood. Let's go with Alembic for migrations."},
        {"role": "user", "content": f"The config lives in deploy/billing.yaml. {CONSTRAINTS[1]}"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "read_file", {"p": "x"})]},
        {"role": "tool", "tool_call_id": "c1", "content": "port: 5432\n" + "filler\n" * 300},
        {"role": "assistant", "content": "The file sets port 5432. " * 5},
        {"role": "user", "content": "Pin this: release freeze starts 2025-03-01.", "pinned": True},
        {"role": "assistant", "content": "Noted the freeze date. " * 5},
    ]
    for i in range(3):
        items.append({"role": "user", "content": f"Background question {i} " + "lorem " * 80})
        items.append({"role": "assistant", "content": "Background answer " + "ipsum " * 80})
    items += [
        {"role": "user", "content": "Now update deploy/billing.yaml for the new cluster."},
        {"role": "assistant", "content": "Working on it."},
        {"role": "user", "content": "And double-check the port."},
    ]
    return log_of(items)


def _plan(log: list[LoggedMessage] | None = None) -> CompactionPlan:
    plan = plan_range(log or _log(), watermark=0, min_preserved_turns=1)
    assert isinstance(plan, CompactionPlan)
    return plan


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


async def _run(
    llm: FakeLLM | None,
    http: httpx.AsyncClient,
    *,
    plan: CompactionPlan | None = None,
    previous: StructuredSummary | None = None,
    anchors: tuple[str, ...] = (ANCHOR,),
    system_texts: tuple[str, ...] = (),
    **settings: Any,
) -> SummaryOutcome:
    from app.compaction.model_client import ChatModelClient

    client = None
    if llm is not None:
        # One attempt per call: the engine's own fallbacks are under test here; the
        # transport's retries are tested in test_llm.py.
        client = ChatModelClient(base_url=llm.base_url, model="fake", api_key="sk-k", max_retries=0)
    try:
        return await summarise(
            plan or _plan(),
            previous,
            list(anchors),
            client=client,
            settings=EngineSettings(**settings),
            counter=COUNTER,
            system_texts=system_texts,
        )
    finally:
        if client is not None:
            await client.aclose()


def _assert_nothing_lost(outcome: SummaryOutcome) -> None:
    for rule in CONSTRAINTS:
        assert rule in outcome.rendered_text
    assert ANCHOR in outcome.rendered_text
    assert "Pin this: release freeze starts 2025-03-01. [#7]" in outcome.summary.pinned
    assert "deploy/billing.yaml" in outcome.rendered_text  # mentioned again in a later turn


async def test_normal_success_makes_exactly_one_call(llm: FakeLLM, http: httpx.AsyncClient) -> None:
    plan = _plan()
    outcome = await _run(llm, http, plan=plan)
    assert (outcome.status, outcome.summarizer, outcome.reason) == ("success", "model", None)
    assert llm.call_count == 1 and outcome.model_calls == 1
    assert outcome.anchor_validation_passed and not outcome.anchor_retry_used
    assert outcome.missing_anchors == () and outcome.summary.carried_anchors == ()
    _assert_nothing_lost(outcome)
    body = llm.calls[0].body
    assert body["temperature"] == 0.1
    assert body["max_tokens"] == summary_token_cap(plan.range_tokens)
    assert body["response_format"] == {"type": "json_object"}
    assert llm.calls[0].headers["authorization"] == "Bearer sk-k"
    assert outcome.prompt_tokens > 0 and outcome.completion_tokens > 0
    assert outcome.input_tokens == plan.range_tokens
    assert outcome.summary_tokens == COUNTER.count_text(outcome.rendered_text)
    assert outcome.metadata()["anchor_validation_passed"] is True


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        ("timeout", "model_timeout"),
        ("500", "model_http_error"),
        ("garbage", "model_protocol_error"),
        ("drop_connection", "model_connection_error"),
        ("refuse", "model_refusal"),
        ("refuse_text", "invalid_output:refusal"),
        ("not_json", "invalid_output:not_json"),
        ("wrong_types", "invalid_output:wrong_types"),
        ("empty", "invalid_output:empty"),
        ("truncate", "invalid_output:truncated"),
    ],
)
async def test_failures_degrade_to_the_extractive_summary(
    llm: FakeLLM, http: httpx.AsyncClient, behaviour: str, reason: str
) -> None:
    llm.behaviour = behaviour
    started = time.monotonic()
    # A model that never answers runs into a short limit on purpose; the others get one
    # no busy machine reaches, and their fallback comes at once, not when it runs out.
    limit = 0.5 if behaviour == "timeout" else 60
    outcome = await _run(llm, http, compact_timeout_s=limit)
    assert time.monotonic() - started < limit / 2 + 3
    assert (outcome.status, outcome.summarizer, outcome.reason) == (
        "degraded",
        "extractive",
        reason,
    )
    assert llm.call_count == 1  # invalid output is not retried, the fallback is immediate
    _assert_nothing_lost(outcome)
    assert outcome.summary_tokens < _plan().range_tokens


async def test_slow_model_within_the_timeout_succeeds(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    llm.behaviour, llm.slow_s = "slow", 0.2
    outcome = await _run(llm, http, compact_timeout_s=5)
    assert outcome.status == "success" and llm.call_count == 1


async def test_omitted_anchor_is_fixed_by_one_retry(llm: FakeLLM, http: httpx.AsyncClient) -> None:
    llm.script("omit_anchors", "normal")
    outcome = await _run(llm, http)
    assert (outcome.status, outcome.anchor_retry_used) == ("success", True)
    assert outcome.anchor_validation_passed and outcome.missing_anchors == ()
    assert llm.call_count == 2 and outcome.model_calls == 2
    retry_messages = llm.calls[1].body["messages"]
    assert retry_messages[-2]["role"] == "assistant"
    assert ANCHOR in retry_messages[-1]["content"]
    _assert_nothing_lost(outcome)


async def test_anchor_still_missing_after_retry_is_carried_verbatim(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    llm.behaviour = "omit_anchors"
    outcome = await _run(llm, http)
    assert (outcome.status, outcome.summarizer) == ("degraded", "model")
    assert outcome.reason == "anchors_missing_after_retry"
    assert not outcome.anchor_validation_passed and outcome.anchor_retry_used
    assert outcome.summary.carried_anchors == (ANCHOR,)
    assert "Must stay visible (verbatim):\n- " + ANCHOR in outcome.rendered_text
    assert llm.call_count == 2


async def test_retry_failure_keeps_the_first_summary_with_anchors_carried(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    llm.script("omit_anchors", "500")
    outcome = await _run(llm, http)
    assert (outcome.status, outcome.summarizer) == ("degraded", "model")
    assert outcome.summary.carried_anchors == (ANCHOR,) and llm.call_count == 2


async def test_retry_disabled_means_one_call(llm: FakeLLM, http: httpx.AsyncClient) -> None:
    llm.behaviour = "omit_anchors"
    outcome = await _run(llm, http, anchor_retry_enabled=False)
    assert outcome.status == "degraded" and outcome.reason == "anchors_missing"
    assert not outcome.anchor_retry_used and llm.call_count == 1
    assert outcome.summary.carried_anchors == (ANCHOR,)


async def test_anchor_visible_in_the_system_prompt_needs_no_retry(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    llm.behaviour = "omit_anchors"
    outcome = await _run(llm, http, system_texts=(f"Rules: {ANCHOR}",))
    assert outcome.status == "success" and llm.call_count == 1


async def test_no_model_configured_uses_the_extractive_summary(http: httpx.AsyncClient) -> None:
    outcome = await _run(None, http)
    assert (outcome.status, outcome.summarizer, outcome.model_calls) == ("success", "extractive", 0)
    _assert_nothing_lost(outcome)
    # The anchor is nowhere in the conversation: it is carried verbatim, and says so.
    assert outcome.summary.carried_anchors == (ANCHOR,)
    assert not outcome.anchor_validation_passed


async def test_previous_summary_is_rolled_in(llm: FakeLLM, http: httpx.AsyncClient) -> None:
    previous = StructuredSummary(
        user_prefs=("Always answer in metric units.",), pinned=("old pinned note",)
    )
    outcome = await _run(llm, http, previous=previous)
    assert "Always answer in metric units." in outcome.summary.user_prefs
    assert outcome.summary.pinned[0] == "old pinned note"
    sent = llm.calls[0].body["messages"][1]["content"]
    assert "metric units" in sent and "old pinned note" not in sent
    assert outcome.input_tokens > _plan().range_tokens


def _chinese_log() -> list[LoggedMessage]:
    turns = [
        ("我们下周去杭州出差，酒店必须在西湖附近。", "好的，我们决定住在湖滨银泰附近。"),
        ("预算不要超过每晚800元，发票抬头是“星辰科技有限公司”。", "明白，我会记住发票抬头。"),
        ("会议在周二下午两点，地点是杭州国际博览中心。", "收到，已记下会议时间和地点。"),
        ("帮我查一下高铁票。", "上午九点有一班，二等座。"),
        ("发票抬头别写错，是星辰科技有限公司。", "好的。"),
    ]
    items: list[dict[str, Any]] = []
    for user, assistant in turns:
        items += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    return log_of(items)


async def test_chinese_conversation_gets_a_chinese_summary(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    plan = plan_range(_chinese_log(), watermark=0, min_preserved_turns=1)
    assert isinstance(plan, CompactionPlan)
    outcome = await _run(llm, http, plan=plan, anchors=())
    assert outcome.status == "success" and outcome.language == "zh"
    assert outcome.rendered_text.startswith("[此前对话摘要")
    assert "酒店必须在西湖附近。" in outcome.rendered_text
    assert "星辰科技有限公司" in outcome.rendered_text  # mentioned again in the last turns
    assert "Chinese" in llm.calls[0].body["messages"][0]["content"]


async def test_summary_in_the_wrong_language_is_retried_then_rejected(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    plan = plan_range(_chinese_log(), watermark=0, min_preserved_turns=1)
    assert isinstance(plan, CompactionPlan)
    llm.behaviour = "english"
    outcome = await _run(llm, http, plan=plan, anchors=())
    assert (outcome.status, outcome.summarizer, outcome.reason) == (
        "degraded",
        "extractive",
        "wrong_language",
    )
    assert llm.call_count == 2
    assert outcome.rendered_text.startswith("[此前对话摘要")
    assert "The user talked" not in outcome.rendered_text


async def test_identifiers_missing_after_retry_are_patched_into_facts(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    llm.behaviour = "minimal"
    # A `user_messages` share too small for any message: the identifier of a user
    # message is then only where the model put it.
    outcome = await _run(llm, http, anchors=(), usable_budget=10)
    assert (outcome.status, outcome.summarizer) == ("success", "model")
    assert outcome.anchor_retry_used and llm.call_count == 2
    assert "deploy/billing.yaml" in outcome.patched_identifiers
    assert "deploy/billing.yaml" in outcome.summary.facts[-1]
    assert "deploy/billing.yaml" in llm.calls[1].body["messages"][-1]["content"]


async def test_what_the_check_saw_is_still_there_after_the_fit_to_the_cap(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    # The model names the identifier and the anchor only in its oldest timeline entries,
    # then writes far more than its cap: the check sees both, the fit to the cap drops
    # those entries. Both must be in the summary that is stored, and it must still fit.
    filler = [
        # Items the range bears out (seq 6 says so): an invented one (a step number the
        # range never states) would be dropped.
        "The file sets port 5432. " * (12 + i)
        for i in range(12)
    ]
    llm.script(
        summary_answer(
            {
                "timeline": [
                    "Read deploy/billing.yaml for the cluster settings.",
                    ANCHOR,
                    *filler,
                ]
            }
        )
    )
    # A `user_messages` share too small for any message (cap at its 256-token floor): the
    # identifier is then only where the model put it. No retry: what the answer lacks
    # (the gate's decision probe among it) is patched in.
    outcome = await _run(llm, http, usable_budget=10, anchor_retry_enabled=False)
    assert llm.call_count == 1 and not outcome.anchor_retry_used
    assert outcome.status == "success" and outcome.anchor_validation_passed
    assert "deploy/billing.yaml" in outcome.rendered_text
    assert ANCHOR in outcome.rendered_text
    trimmable = replace(outcome.summary, pinned=(), user_messages=(), carried_anchors=())
    fixed_only = StructuredSummary(
        pinned=outcome.summary.pinned,
        user_messages=outcome.summary.user_messages,
        carried_anchors=outcome.summary.carried_anchors,
    )
    assert not trimmable.timeline[0].startswith("Read deploy/billing.yaml")  # it was trimmed
    assert outcome.patched_identifiers == ("deploy/billing.yaml",)
    assert outcome.summary.carried_anchors == (ANCHOR,) == outcome.missing_anchors
    budget = 256 + COUNTER.count_text(
        render_summary(fixed_only, "en", through_seq=_plan().new_watermark)
    )
    assert outcome.summary_tokens <= budget


async def test_identifiers_the_patch_pushes_out_are_patched_in_too(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    # The model's summary fits its cap and names src/alpha_io.py only in its oldest timeline
    # entry; five other files it leaves out. Patching them in pushes the summary a few tokens
    # past the cap (from well under it), and the fit that follows drops the entry with alpha:
    # alpha must come back too, and the cap still hold.
    others = [f"src/{name}_io.py" for name in ("beta", "gamma", "delta", "epsilon", "zeta")]
    files = ["src/alpha_io.py", *others]
    log = log_of(
        [
            {"role": "user", "content": f"Read {', '.join(files)}. " + "x " * 300},
            {"role": "assistant", "content": "Read them all carefully. " + "y " * 300},
            {"role": "user", "content": "Thanks."},
            {"role": "assistant", "content": "You are welcome."},
            {"role": "user", "content": f"Now change {', '.join(files)}."},
        ]
    )
    plan = plan_range(log, watermark=0, min_preserved_turns=1)
    assert isinstance(plan, CompactionPlan)

    def over(summary: StructuredSummary) -> int:
        return tokens_over_cap(
            summary, lang="en", max_tokens=256, counter=COUNTER, through_seq=plan.new_watermark
        )

    def patched_over(timeline: tuple[str, ...]) -> int:
        # The patch cites the seq that names them all.
        facts = ("Identifiers: " + ", ".join(others) + " [#1]",)
        return over(StructuredSummary(facts=facts, timeline=timeline))

    # Items the range bears out, with their citations (an invented one, such as a step
    # number the range never states, would be dropped).
    timeline: tuple[str, ...] = ("Read src/alpha_io.py for the readers. [#1]",)
    while patched_over((*timeline, "Read carefully. [#2]")) <= 0:
        longer = (*timeline, "Read them all carefully. " * len(timeline) + "[#2]")
        timeline = longer if patched_over(longer) <= 0 else (*timeline, "Read carefully. [#2]")
    while patched_over(timeline) <= 0:  # grow the last entry to just past the cap
        body = timeline[-1].removesuffix(" [#2]")
        timeline = (*timeline[:-1], body + " Carefully. [#2]")
    assert len(timeline) > 4 and over(StructuredSummary(timeline=timeline)) < -20
    assert 0 < patched_over(timeline) <= 3
    llm.script(summary_answer({"timeline": list(timeline)}))
    outcome = await _run(
        llm, http, plan=plan, anchors=(), usable_budget=10, anchor_retry_enabled=False
    )
    assert llm.call_count == 1 and outcome.summarizer == "model"
    assert not outcome.summary.timeline[0].startswith("Read src/alpha_io.py")  # trimmed
    for name in files:
        assert name in outcome.rendered_text, name
    assert over(outcome.summary) <= 0


def _audit_plan(outputs: int) -> CompactionPlan:
    """A range of `outputs` tool outputs of ~5k characters each, full of identifiers."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "Audit the service logs."}]
    for i in range(outputs):
        output = "".join(
            f"2026-11-{i % 28 + 1:02d} svc/worker_{j}.py:{j} took {j * 7} ms id=ab{j:06x}\n"
            for j in range(100)
        )
        items += [
            {"role": "assistant", "content": None, "tool_calls": [call(f"c{i}", "read", {})]},
            {"role": "tool", "tool_call_id": f"c{i}", "content": output},
        ]
    items += [
        {"role": "user", "content": "Now summarise svc/worker_7.py."},
        {"role": "assistant", "content": "Reading it."},
        {"role": "user", "content": "Thanks."},
    ]
    return _plan(log_of(items))


async def test_a_long_range_is_summarised_without_stalling_the_event_loop(
    http: httpx.AsyncClient,
) -> None:
    # A server compacts in process by default: the CPU of a summary (reading identifiers
    # and constraints off the range, checking, fitting) must leave its requests running.
    # ~150k characters of tool output took 0.4 s of one uninterrupted turn of the loop;
    # since identifiers are read line by line, 300k take ~0.25 s, in turns of a few ms.
    plan = _audit_plan(60)
    assert sum(len(m.text) for m in plan.range_messages) > 250_000
    outcome, loop = await watch_loop(_run(None, http, plan=plan))
    assert outcome.status == "success"
    assert loop.turns >= 10, loop
    assert loop.longest_gap < loop.took / 4, loop


async def test_a_patch_larger_than_the_cap_reports_only_what_it_kept(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    # Forty files the later turns mention again, none in the model's summary: patching them
    # all in is larger than the whole cap (its 256-token floor), so the last fit trims the
    # patch itself. What the outcome calls patched must be in the stored summary.
    files = [f"services/module_{i:02d}/request_handler_{i:02d}.py" for i in range(40)]
    log = log_of(
        [
            {"role": "user", "content": "Read " + ", ".join(files) + ". " + "x " * 300},
            {"role": "assistant", "content": "Read them all carefully. " + "y " * 300},
            {"role": "user", "content": "Thanks."},
            {"role": "assistant", "content": "You are welcome."},
            {"role": "user", "content": "Now change " + ", ".join(files) + "."},
        ]
    )
    plan = plan_range(log, watermark=0, min_preserved_turns=1)
    assert isinstance(plan, CompactionPlan)
    llm.script(summary_answer({"timeline": ["Read the files."]}))
    outcome = await _run(
        llm, http, plan=plan, anchors=(), usable_budget=10, anchor_retry_enabled=False
    )
    over = tokens_over_cap(
        outcome.summary, lang="en", max_tokens=256, counter=COUNTER, through_seq=plan.new_watermark
    )
    assert over <= 0
    kept = [f for f in files if f in outcome.rendered_text]
    assert 0 < len(kept) < len(files)  # the patch alone did not fit
    assert list(outcome.patched_identifiers) == kept


async def test_summaries_leave_the_default_executor_to_large_appends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A large append counts its tokens in the loop's default executor
    # (app/messages/service.py); eight compactions at once (CONTEXTD_COMPACTION_WORKERS=8)
    # must not make it wait there until summaries free a thread. Every summary's first
    # step holds its thread until the append is done: were those threads the default
    # executor's (two here, as a small machine has few), the append could not start and
    # each summary would wait out its 5 s. Ordering by wall time instead was flaky: on a
    # busy machine a summary's own thread may well finish before the append's.
    from app.compaction import brief

    plan = _audit_plan(6)
    appended = threading.Event()
    waited_out: list[str] = []
    prepare = brief.brief_for

    def held(*args: Any) -> Any:
        if not appended.wait(timeout=5):
            waited_out.append(threading.current_thread().name)
        return prepare(*args)

    monkeypatch.setattr(brief, "brief_for", held)
    loop = asyncio.get_running_loop()
    default = ThreadPoolExecutor(max_workers=2, thread_name_prefix="default")
    loop.set_default_executor(default)

    async def append() -> None:
        await asyncio.to_thread(COUNTER.count_text, "a large tool output. " * 4_000)
        appended.set()

    try:
        summaries = [
            asyncio.create_task(
                summarise(plan, None, [], client=None, settings=EngineSettings(), counter=COUNTER)
            )
            for _ in range(8)
        ]
        await asyncio.sleep(0.01)  # every summary has asked for a thread
        await append()
        outcomes = await asyncio.gather(*summaries)
    finally:
        appended.set()
        loop.set_default_executor(ThreadPoolExecutor())
        default.shutdown(wait=False)
    assert waited_out == []
    assert [o.summarizer for o in outcomes] == ["extractive"] * 8


async def test_a_constraint_folded_out_of_the_users_words_stays_in_the_summary(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    """The user's messages are carried verbatim until their share is full; the one a
    compaction folds out then must be in what the model wrote or be patched in (it was
    in no later prompt and no later check: a model that never restated it lost it)."""
    rule = "You must never book me on Ryanair flights."
    previous = StructuredSummary(
        facts=("The user is planning trips.",), user_messages=(rule, "I live in Lisbon.")
    )
    llm.script(summary_answer({"facts": ["The user asked about several trips."], "user_prefs": []}))
    # A share that holds the range's user messages but not the previous ones as well.
    outcome = await _run(llm, http, previous=previous, anchors=(), usable_budget=300)
    assert rule not in outcome.summary.user_messages  # folded, oldest first
    assert outcome.status == "success"
    assert any("Ryanair" in p for p in outcome.summary.user_prefs), outcome.summary
    assert "Ryanair" in outcome.rendered_text


async def test_an_answer_cut_off_at_the_output_cap_degrades(
    llm: FakeLLM, http: httpx.AsyncClient
) -> None:
    """A cut-off answer is not a summary, even when a fragment of it parses: the inner
    object of a truncated one was stored as a success."""
    cut = '{"timeline": ["a"], "facts": [{"facts": ["BOGUS INNER"]}'
    answer = summary_answer({})
    assert isinstance(answer.body, dict)
    answer.body["choices"][0]["message"]["content"] = cut
    answer.body["choices"][0]["finish_reason"] = "length"
    llm.script(answer)
    outcome = await _run(llm, http, anchors=())
    assert (outcome.status, outcome.summarizer) == ("degraded", "extractive"), outcome
    assert outcome.reason == "invalid_output:truncated"
    assert "BOGUS INNER" not in outcome.rendered_text
