"""Every strategy over the real sessions of the shared dataset, at several budgets."""

from __future__ import annotations

from typing import Any

import pytest

from app.context import AssemblyRequest, assemble
from app.core.conversation import LoggedMessage
from tests.support.context_builders import COUNTER, check, load_sessions, log_of
from tests.support.planted import plant

FRACTIONS = (0.05, 0.2, 0.5, 1.2)


@pytest.fixture(scope="module")
def sessions() -> list[tuple[dict[str, Any], list[LoggedMessage]]]:
    return [(s, log_of(s["messages"])) for s in load_sessions()]


@pytest.mark.parametrize("strategy", ["sliding_window", "key_messages", "summary"])
def test_invariants_on_real_sessions(
    sessions: list[tuple[dict[str, Any], list[LoggedMessage]]], strategy: str
) -> None:
    for session, history in sessions:
        system = COUNTER.count_message({"role": "system", "content": session["system"] or ""})
        total = sum(m.token_count for m in history) + system + 20
        for fraction in FRACTIONS:
            request = AssemblyRequest(
                history=history,
                counter=COUNTER,
                budget=max(64, int(total * fraction)),
                session_id=session["id"].replace("/", "_")[:128],
                system=session["system"],
                mode="agent" if session["meta"]["kind"] == "agent" else "chat",
                preview_limit_tokens=512,
                strategy=strategy,
            )
            result = assemble(request)
            check(request, result)
            if fraction > 1 and not result.over_budget:
                # Everything fits: nothing sendable is dropped.
                assert result.dropped_count == 0, session["id"]


def test_everything_fits_keeps_the_log_verbatim(
    sessions: list[tuple[dict[str, Any], list[LoggedMessage]]],
) -> None:
    for session, history in sessions:
        request = AssemblyRequest(
            history=history,
            counter=COUNTER,
            budget=10_000_000,
            system=session["system"],
            preview_limit_tokens=10_000_000,
        )
        result = assemble(request)
        head = 1 if session["system"] else 0
        assert list(result.messages[head:]) == session["messages"], session["id"]
        assert result.kept_seqs == tuple(m.seq for m in history)


def test_tool_outputs_over_the_limit_become_previews(
    sessions: list[tuple[dict[str, Any], list[LoggedMessage]]],
) -> None:
    big = [(s, h) for s, h in sessions if any(m.token_count > 2000 for m in h)]
    assert big, "the dataset has large tool outputs"
    for _session, history in big[:5]:
        request = AssemblyRequest(
            history=history,
            counter=COUNTER,
            budget=1_000_000,
            session_id="s1",
            preview_limit_tokens=300,
            strategy="sliding_window",
        )
        result = assemble(request)
        check(request, result)
        previews = [d for d in result.decisions if d.action == "preview"]
        assert previews
        for d in previews:
            sent = result.messages[list(result.kept_seqs).index(d.seq) - len(result.kept_seqs)]
            assert sent["content"].startswith("[tool output preview:")
            assert f"GET /sessions/s1/messages/{d.seq}" in sent["content"]


def test_key_messages_is_explainable(
    sessions: list[tuple[dict[str, Any], list[LoggedMessage]]],
) -> None:
    rules = set()
    for _, history in sessions:
        total = sum(m.token_count for m in history)
        result = assemble(AssemblyRequest(history=history, counter=COUNTER, budget=total // 4))
        rules |= {d.rule.split("(")[0].split(":")[0] for d in result.decisions}
    assert {"user", "latest_user", "recent", "tool_group", "budget"} <= rules


@pytest.mark.parametrize("strategy", ["key_messages", "summary"])
@pytest.mark.parametrize("budget", [2000, 4000, 8000])
def test_agent_traces_keep_every_mid_run_instruction(strategy: str, budget: int) -> None:
    """Real agent traces with short user instructions typed mid-run, in four languages and
    without a detector word: at a fixed budget every one of them that fits is sent verbatim,
    tool outputs and old steps giving way first; tool groups stay whole."""
    checked = 0
    for n, session in enumerate(load_sessions()):
        if session["meta"]["kind"] != "agent":
            continue
        msgs, planted = plant(session["messages"], 4, offset=n)
        history = log_of(msgs)
        if sum(m.token_count for m in history) <= budget:
            continue  # everything fits: nothing to choose
        request = AssemblyRequest(
            history=history,
            counter=COUNTER,
            budget=budget,
            session_id="s1",
            system=session["system"],
            strategy=strategy,
        )
        result = assemble(request)
        check(request, result)  # tool groups whole, log order, exact accounting
        assert not result.over_budget, session["id"]
        users = [m.seq for m in history if m.role == "user"]
        assert set(users) <= set(result.kept_seqs), (session["id"], users, result.kept_seqs)
        for p in planted:
            assert p.instruction.visible_in(result.messages), (session["id"], p.instruction.key)
            assert history[p.index].body in result.messages  # verbatim, not cut
        checked += 1
    assert checked >= 10
