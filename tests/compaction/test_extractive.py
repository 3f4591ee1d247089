from __future__ import annotations

from typing import Any

from app.compaction.checks import conversation_language_of
from app.compaction.engine import summarise
from app.compaction.extractive import extractive_summary, fit_to_tokens
from app.compaction.provenance import strip_cites
from app.compaction.summary import StructuredSummary, render_summary
from app.compaction.turns import CompactionPlan, plan_range
from app.core.conversation import LoggedMessage
from tests.support.compaction_builders import COUNTER, EngineSettings, call, chat, log_of

CONSTRAINTS = [
    "You must keep the public API backwards compatible.",
    "Never log the API key.",
    "I prefer pytest over unittest.",
    "Don't touch the migrations folder.",
]


def _noisy_range() -> list[LoggedMessage]:
    items: list[dict[str, Any]] = []
    for i, rule in enumerate(CONSTRAINTS):
        items.append({"role": "user", "content": f"Step {i}: look at module_{i}.py please. {rule}"})
        items.append(
            {"role": "assistant", "content": None, "tool_calls": [call(f"c{i}", "read", {"i": i})]}
        )
        items.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x" * 3000})
        items.append({"role": "assistant", "content": f"Read module_{i}.py; it is fine. " * 20})
    return log_of(items)


def test_every_user_constraint_and_tool_call_is_kept() -> None:
    s = extractive_summary(_noisy_range(), lang="en")
    text = render_summary(s, "en")
    for rule in CONSTRAINTS:
        assert rule in map(strip_cites, s.user_prefs)
        assert rule in text
    assert any(t.startswith('called read({"i": 0}) → xxx') for t in s.timeline)
    assert sum(1 for t in s.timeline if t.startswith("User: ")) == len(CONSTRAINTS)
    assert any("module_3.py" in f for f in s.facts)
    assert "x" * 200 not in text  # tool outputs are condensed


def test_size_cap_keeps_constraints_and_drops_old_timeline_first() -> None:
    merged = extractive_summary(_noisy_range() * 1, lang="en")
    fitted = fit_to_tokens(merged, lang="en", max_tokens=150, counter=COUNTER)
    assert COUNTER.count_text(render_summary(fitted, "en")) <= 150 + 20
    assert fitted.user_prefs == merged.user_prefs
    assert len(fitted.timeline) < len(merged.timeline)


def test_cap_never_drops_pinned_or_carried_anchors() -> None:
    s = StructuredSummary(
        timeline=tuple("event " * 20 for _ in range(50)),
        pinned=("P" * 400,),
        carried_anchors=("anchor text",),
    )
    fitted = fit_to_tokens(s, lang="en", max_tokens=50, counter=COUNTER)
    assert fitted.pinned == s.pinned and fitted.carried_anchors == s.carried_anchors
    assert len(fitted.timeline) < 50


def test_chinese_conversation_gets_chinese_headings() -> None:
    log = chat(
        [
            ("我想去北京玩三天，酒店必须在地铁站附近。", "好的，我帮你查一下。"),
            ("预算不要超过2000元。", "明白了，我们决定住在王府井。"),
            ("谢谢", "不客气"),
        ]
    )
    lang = conversation_language_of(log)
    assert lang == "zh"
    s = extractive_summary(log, lang=lang)
    text = render_summary(s, lang)
    assert text.startswith("[此前对话摘要")
    assert "用户偏好与约束：" in text and "时间线：" in text
    assert "我想去北京玩三天，酒店必须在地铁站附近。 [#1]" in s.user_prefs
    assert "预算不要超过2000元。 [#3]" in s.user_prefs
    assert any(t.startswith("用户：") for t in s.timeline)
    assert "Summary" not in text


def _plan(log: list[LoggedMessage], watermark: int) -> CompactionPlan:
    plan = plan_range(log, watermark=watermark, min_preserved_turns=1)
    assert isinstance(plan, CompactionPlan)
    return plan


async def test_rolling_extractive_summaries_grow_sub_linearly() -> None:
    def turns(round_: int) -> list[tuple[str, str]]:
        return [
            (
                f"Round {round_} step {i}: you must keep invariant_{round_}_{i}. "
                + "Some background detail that is not important. " * 8,
                "Acknowledged; working on it. " * 10,
            )
            for i in range(12)
        ]

    log: list[LoggedMessage] = []
    previous: StructuredSummary | None = None
    watermark = 0
    sizes: list[int] = []
    for round_ in range(3):
        log += chat(turns(round_), start=len(log) + 1)
        plan = _plan(log, watermark)
        # The verbatim `user_messages` section is bounded by its share of the budget
        # (15% of 4000 here), not by the range: growth is measured at that bound.
        settings = EngineSettings(usable_budget=4000)
        outcome = await summarise(
            plan, previous, [], client=None, settings=settings, counter=COUNTER
        )
        assert outcome.status == "success" and outcome.summarizer == "extractive"
        assert len(outcome.summary.user_messages) < 12  # over the share: the oldest folded
        assert outcome.summary_tokens < plan.range_tokens + 600
        previous, watermark = outcome.summary, plan.new_watermark
        sizes.append(outcome.summary_tokens)
    assert sizes[2] - sizes[1] < sizes[1] - sizes[0] < sizes[0]
    assert sizes[2] < 2.5 * sizes[0]
    assert previous is not None
    # Every constraint of every compacted range survives (the last two turns are not compacted).
    prefs = " ".join(previous.user_prefs)
    assert all(f"invariant_{r}_{i}." in prefs for r in range(3) for i in range(10))
