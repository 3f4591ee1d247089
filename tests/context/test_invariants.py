"""The invariants of SPEC §3 over generated histories and budgets, for every strategy."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.context import AssemblyRequest, SummaryBlock, assemble, available_strategies
from app.context.caches import Caches
from app.context.view import Form, HistoryView, Limits, Unit
from app.core.conversation import LoggedMessage, split_groups
from tests.support.context_builders import COUNTER, check, user
from tests.support.histories import histories, texts

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
        },
    }
]


@st.composite
def requests(draw: st.DrawFn, strategy: str) -> AssemblyRequest:
    history = draw(histories())
    summary = None
    if history and draw(st.integers(0, 3)) == 0:
        summary = SummaryBlock(draw(texts), draw(st.integers(0, max(0, len(history) // 3))))
    dynamic: list[Any] = draw(st.lists(st.one_of(texts, texts.map(user)), max_size=2))
    return AssemblyRequest(
        history=history,
        counter=COUNTER,
        budget=draw(st.integers(min_value=60, max_value=8000)),
        reserve_output_tokens=draw(st.sampled_from([0, 0, 20])),
        session_id="sess-1",
        system=draw(st.one_of(st.none(), texts)),
        tools=draw(st.sampled_from([[], TOOLS])),
        dynamic_context=dynamic,
        summary=summary,
        mode=draw(st.sampled_from([None, "agent", "chat"])),
        preview_limit_tokens=draw(st.sampled_from([64, 256, 1024])),
        strategy=strategy,
    )


# Modest by default so the unit layer stays fast; raise it for a deeper search.
EXAMPLES = int(os.environ.get("CONTEXT_HYPOTHESIS_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@SETTINGS
@given(requests("key_messages"))
def test_key_messages_invariants(request: AssemblyRequest) -> None:
    check(request, assemble(request))


@SETTINGS
@given(requests("sliding_window"))
def test_sliding_window_invariants(request: AssemblyRequest) -> None:
    check(request, assemble(request))


@SETTINGS
@given(requests("summary"))
def test_summary_invariants(request: AssemblyRequest) -> None:
    result = assemble(request)
    check(request, result)
    if request.summary is not None:
        assert result.summary.included
        assert result.summary.through_seq == request.summary.through_seq


@settings(max_examples=40, deadline=None)
@given(histories(), st.integers(min_value=200, max_value=4000))
def test_more_budget_never_loses_mandatory_units(history: list[LoggedMessage], budget: int) -> None:
    for name in available_strategies():
        small = assemble(
            AssemblyRequest(history=history, counter=COUNTER, budget=budget, strategy=name)
        )
        large = assemble(
            AssemblyRequest(history=history, counter=COUNTER, budget=budget * 4, strategy=name)
        )
        if not small.over_budget:
            assert not large.over_budget
        assert large.usage.input_tokens <= budget * 4 or large.over_budget


def _units_of(request: AssemblyRequest) -> list[Unit]:
    """The units the strategy saw, rebuilt the way the pipeline builds them."""
    through = request.summary.through_seq if request.summary else None
    history = list(request.history)
    if through is not None:
        anchor = next((m for m in reversed(history) if m.role == "user"), None)
        history = [m for m in history if m.seq > through or m is anchor]
    groups, _ = split_groups(history)
    limits = Limits.from_preview_limit(request.session_id, request.preview_limit_tokens)
    return list(HistoryView.build(groups, limits, request.counter, Caches()).units)


@SETTINGS
@given(st.sampled_from(["key_messages", "summary"]).flatmap(requests))
def test_a_user_message_is_dropped_only_when_it_cannot_fit(request: AssemblyRequest) -> None:
    """SPEC §3 / issue 8: tool outputs, assistant texts and old steps give way first. A user
    message left out would not fit, even compacted, beside the hard set, the newest unit and
    the user messages that were kept: nothing else took its room."""
    result = assemble(request)
    check(request, result)
    if result.over_budget:
        return
    b = result.usage.breakdown
    room = result.usage.budget - (b.total - b.history)
    units = _units_of(request)
    if not units:
        return
    kept = set(result.kept_seqs)
    sent_cost = {m.seq: request.counter.count_message(msg) for m, msg in _sent(result, request)}
    floor = 0
    for u in units:
        if u.first_seq in kept and (u.kind == "user" or u.pinned or u is units[-1]):
            floor += sum(sent_cost[m.seq] for m in u.messages)
    for u in units:
        if u.kind == "user" and u.first_seq not in kept:
            assert floor + u.cost(Form.COMPACT) > room, (u.first_seq, floor, room)


def _sent(result: Any, request: AssemblyRequest) -> list[tuple[LoggedMessage, dict[str, Any]]]:
    by_seq = {m.seq: m for m in request.history}
    kept = list(result.kept_seqs)
    tail = list(result.messages[len(result.messages) - len(kept) :]) if kept else []
    return [(by_seq[s], msg) for s, msg in zip(kept, tail, strict=True)]
