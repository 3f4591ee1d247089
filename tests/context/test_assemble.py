"""The fixed pipeline: payload order, exclusions, previews, accounting and fallbacks."""

from __future__ import annotations

from typing import Any

from app.context import AssemblyRequest, SummaryBlock, assemble
from app.core.conversation import LoggedMessage
from tests.support.context_builders import COUNTER, assistant, check, log_of, logged, tool, user


def run(history: list[LoggedMessage], **kw: Any) -> Any:
    request = AssemblyRequest(history=history, counter=COUNTER, **{"budget": 100_000, **kw})
    result = assemble(request)
    check(request, result)
    return result


def test_payload_order_system_banner_dynamic_summary_history() -> None:
    history = log_of([user("hi"), assistant("hello")], start=11)
    result = run(
        history,
        system="Be brief.",
        mode="agent",
        dynamic_context=["Goal: ship it.", {"role": "user", "content": "Doc: x"}],
        summary=SummaryBlock("Earlier: we chose Postgres.", 10),
    )
    contents = [m["content"] for m in result.messages]
    assert contents[:4] == ["Be brief.", "Active mode: agent", "Goal: ship it.", "Doc: x"]
    assert contents[4] == "Summary of the conversation so far:\nEarlier: we chose Postgres."
    assert contents[5:] == ["hi", "hello"]
    assert result.summary.included and result.summary.through_seq == 10
    b = result.usage.breakdown
    assert b.system + b.reply_priming == COUNTER.count_messages(list(result.messages[:2]))
    assert b.reply_priming == COUNTER.count_messages([])
    assert b.dynamic == COUNTER.count_message(result.messages[2]) + COUNTER.count_message(
        result.messages[3]
    )
    assert result.decisions[0].seq == 11  # nothing dropped below the summary


def test_per_call_system_messages_replace_the_prompt() -> None:
    system = [{"role": "system", "content": "A"}, {"role": "system", "content": "B", "x": 1}]
    result = run(log_of([user("q")]), system=system)
    assert list(result.messages[:2]) == [
        {"role": "system", "content": "A"},
        {"role": "system", "content": "B"},
    ]


def test_only_protocol_fields_reach_the_model_and_counts_stay_exact() -> None:
    body = {"role": "user", "content": "hi", "client_ts": 123, "name": "ann"}
    call = assistant(None, "c1")
    call["tool_calls"][0]["index"] = 0  # streaming leftovers
    history = [
        logged(1, body),
        logged(2, call),
        logged(3, {**tool("c1", "out"), "name": "bash"}),
    ]
    result = run(history)
    assert result.messages[0] == {"role": "user", "content": "hi", "name": "ann"}
    assert "index" not in result.messages[1]["tool_calls"][0]
    assert result.messages[2] == tool("c1", "out")


def test_exclusions_and_their_rules() -> None:
    history = [
        logged(1, {"role": "system", "content": "old prompt"}),
        logged(2, {"role": "system", "content": "Summary: A."}, metadata={"kind": "summary"}),
        logged(3, user("shown only in the UI"), include_in_context=False),
        logged(4, user("q")),
        logged(5, assistant(None, "c9")),  # in flight: no result yet
    ]
    result = run(history)
    rules = {d.seq: (d.action, d.rule) for d in result.decisions}
    assert rules[1] == ("excluded", "system_message")
    assert rules[2][0] == "kept"
    assert rules[3] == ("excluded", "ui_only")
    assert rules[5] == ("excluded", "in_flight")
    assert [m["content"] for m in result.messages] == ["Summary: A.", "q"]
    assert any("without all their results" in w for w in result.warnings)


def test_errored_partial_answer_is_the_continue_anchor() -> None:
    partial = {**assistant("Half an ans", "c1")}
    history = [logged(1, user("q")), logged(2, partial, error={"type": "timeout", "message": "x"})]
    result = run(history)
    assert result.messages[-1] == {"role": "assistant", "content": "Half an ans"}


def test_orphan_tool_result_at_the_window_edge_is_dropped_whole() -> None:
    history = [logged(7, tool("c0", "from a call before the window")), logged(8, user("q"))]
    result = run(history, history_from_seq=3)
    assert result.decisions[0].as_dict() == {
        "seq": 3,
        "action": "dropped",
        "rule": "budget",
        "through": 6,
    }
    assert result.decisions[1].rule == "tool_group"
    assert result.dropped_count == 5


def test_preview_has_head_tail_size_and_path_within_the_limit() -> None:
    output = "HEAD-START " + "x = compute(1, 2)\n" * 2000 + " TAIL-END"
    chinese = "开始" + "北京的天气很好，我们明天去长城。" * 400 + "结束"
    history = log_of([user("run"), assistant(None, "c1", "c2"), tool("c1", output),
                      tool("c2", chinese)])  # fmt: skip
    result = run(history, session_id="abc", preview_limit_tokens=200)
    for seq, msg in ((3, result.messages[2]), (4, result.messages[3])):
        assert msg["content"].startswith("[tool output preview:")
        assert f"GET /sessions/abc/messages/{seq}" in msg["content"]
        assert 150 <= COUNTER.count_message(msg) <= 200
    assert "HEAD-START" in result.messages[2]["content"]
    assert result.messages[2]["content"].endswith("TAIL-END")
    assert result.messages[3]["content"].endswith("结束")


def test_over_budget_only_when_the_mandatory_part_cannot_fit() -> None:
    result = run(log_of([user("q " * 50)]), system="S " * 400, budget=100)
    assert result.over_budget
    assert result.kept_seqs == (1,)
    assert "over budget" in result.warnings[-1]
    assert "system block" in result.warnings[-1]


def test_mandatory_history_outranks_summary_then_dynamic() -> None:
    history = log_of([user("please keep this " * 10)], start=5)
    need = COUNTER.count_messages([{"role": "system", "content": "S"}, history[0].body])
    summary = SummaryBlock("long summary " * 50, 4)
    dynamic = ["first item " * 5, "second item " * 5]
    d = COUNTER.count_message({"role": "system", "content": dynamic[1]})
    budget = need + d + d // 2  # both items fit alone, not beside the mandatory history
    result = run(history, system="S", summary=summary, dynamic_context=dynamic, budget=budget)
    assert not result.over_budget
    assert not result.summary.included
    assert result.kept_seqs == (5,)
    assert any("summary" in w for w in result.warnings)
    kept_dynamic = [m["content"] for m in result.messages if m["content"] in dynamic]
    assert kept_dynamic == dynamic[:1]  # the last item was given up first

    pinned = run(history, system="S", summary=summary, budget=budget, strategy="summary")
    assert pinned.summary.included and pinned.over_budget


def test_reserve_comes_off_the_budget() -> None:
    result = run(log_of([user("q")]), budget=1000, reserve_output_tokens=300)
    assert result.usage.budget == 700


def test_decisions_are_run_length_encoded() -> None:
    history = log_of([user(f"message {i} " * 30) for i in range(40)])
    result = run(history, budget=300, strategy="sliding_window")
    assert result.decisions[0].seq == 1 and result.decisions[0].through is not None
    assert len(result.decisions) < 6
    assert result.to_dict()["decisions"][0]["action"] == "dropped"
