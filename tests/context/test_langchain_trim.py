"""`sliding_window` against LangChain's `trim_messages`, with the same token counter.

Accounting difference, on purpose: we count the reply priming (3 tokens) once
per request inside the budget; LangChain sums per-message counts. So our
budget B is compared with LangChain's `max_tokens = B - 3`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    BaseMessage,
    SystemMessage,
    convert_to_messages,
    convert_to_openai_messages,
    trim_messages,
)

from app.context import AssemblyRequest, assemble
from tests.support.context_builders import (
    COUNTER,
    assistant,
    iter_groups,
    load_sessions,
    log_of,
    tool,
    user,
)

PRIMING = COUNTER.count_messages([])
SYSTEM = "You are a helpful assistant."


def lc_counter(messages: list[BaseMessage]) -> int:
    return sum(COUNTER.count_message(m) for m in _openai(messages))


def _openai(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return list(convert_to_openai_messages(list(messages)))


def langchain_last(
    history: list[dict[str, Any]], budget: int, start_on: str | None = "human"
) -> list[dict[str, Any]]:
    msgs = [SystemMessage(SYSTEM), *convert_to_messages(history)]
    kept = trim_messages(
        msgs,
        max_tokens=budget - PRIMING,
        token_counter=lc_counter,
        strategy="last",
        include_system=True,
        start_on=start_on,
    )
    return _openai(kept)


def ours(history: list[dict[str, Any]], budget: int) -> list[dict[str, Any]]:
    request = AssemblyRequest(
        history=log_of(history),
        counter=COUNTER,
        budget=budget,
        system=SYSTEM,
        strategy="sliding_window",
        preview_limit_tokens=10_000_000,
    )
    return [dict(m) for m in assemble(request).messages]


def floor_budget(history: list[dict[str, Any]]) -> int:
    """The least budget that holds the system prompt and everything from the latest user
    message on: below it we keep the latest user message over budget, LangChain drops it."""
    last_user = max(i for i, m in enumerate(history) if m["role"] == "user")
    tail = [{"role": "system", "content": SYSTEM}, *history[last_user:]]
    return COUNTER.count_messages(tail)


def test_same_messages_as_langchain_on_plain_dialogues() -> None:
    plain = [
        s["messages"]
        for s in load_sessions()
        if all(
            m["role"] in ("user", "assistant") and not m.get("tool_calls") for m in s["messages"]
        )
    ]
    assert len(plain) >= 5
    compared = 0
    for history in plain:
        full = COUNTER.count_messages([{"role": "system", "content": SYSTEM}, *history])
        low = floor_budget(history)
        for budget in range(low, full + 40, max(1, (full - low) // 25)):
            assert ours(history, budget) == langchain_last(history, budget), budget
            compared += 1
    assert compared > 100


texts = st.text(alphabet="abc xyz 12 必须", min_size=1, max_size=60)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["user", "assistant"]), texts), min_size=1, max_size=20),
    st.integers(min_value=0, max_value=400),
)
def test_same_messages_as_langchain_on_generated_dialogues(
    turns: list[tuple[str, str]], extra: int
) -> None:
    history = [{"role": role, "content": text} for role, text in turns]
    if not any(m["role"] == "user" for m in history):
        history.insert(0, user("hello"))
    budget = floor_budget(history) + extra
    assert ours(history, budget) == langchain_last(history, budget)


AGENT = [
    user("Fix the failing test in tests/test_app.py; never edit the test itself."),
    assistant("Let me look.", "c1"),
    tool("c1", "tests/test_app.py::test_add FAILED " + "trace line\n" * 30),
    assistant(None, "c2", "c3"),
    tool("c2", "def add(a, b):\n    return a - b\n"),
    tool("c3", "ok " * 200),
    assistant("Found it: add subtracts.", "c4"),
    tool("c4", "patched app.py"),
]


def _budget_for_last(n: int) -> int:
    # Enough for the system prompt and the last n messages, not for the user message.
    return COUNTER.count_messages([{"role": "system", "content": SYSTEM}, *AGENT[-n:]])


def test_divergence_start_on_human_loses_the_whole_agent_turn() -> None:
    budget = _budget_for_last(5)
    theirs = langchain_last(AGENT, budget)
    assert [m["role"] for m in theirs] == ["system"]  # the task and all its work are gone
    mine = ours(AGENT, budget + 40)
    assert mine[1] == AGENT[0]  # the latest user message is mandatory
    assert list(iter_groups(mine)) == []
    assert mine[-2:] == AGENT[-2:]


def test_divergence_without_start_on_langchain_splits_a_tool_group() -> None:
    budget = _budget_for_last(4)  # reaches into the c2/c3 group: only c3's result fits
    theirs = langchain_last(AGENT, budget, start_on=None)
    assert list(iter_groups(theirs)), "LangChain sends a tool result without its call"
    mine = ours(AGENT, budget)
    assert list(iter_groups(mine)) == []


def test_divergence_in_flight_call_is_left_out() -> None:
    history = [*AGENT, assistant(None, "c5")]  # the call's result is not logged yet
    theirs = langchain_last(history, 100_000)
    assert list(iter_groups(theirs)), "LangChain sends a call without its result"
    mine = ours(history, 100_000)
    assert list(iter_groups(mine)) == []
    assert mine[-1] == AGENT[-1]
