from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.compaction.turns import CompactionPlan, NoopReason, plan_range
from app.core.conversation import LoggedMessage, split_turns
from tests.support.compaction_builders import call, chat, log_of, msg


def _plan(messages: list[LoggedMessage], **kw: Any) -> CompactionPlan:
    kw.setdefault("watermark", 0)
    kw.setdefault("min_preserved_turns", 0)
    result = plan_range(messages, **kw)
    assert isinstance(result, CompactionPlan), result
    return result


def _noop(messages: list[LoggedMessage], **kw: Any) -> NoopReason:
    kw.setdefault("watermark", 0)
    kw.setdefault("min_preserved_turns", 0)
    result = plan_range(messages, **kw)
    assert isinstance(result, NoopReason), result
    return result


def test_split_turns_leading_non_user_messages_form_turn_zero() -> None:
    log = log_of(
        [
            {"role": "assistant", "content": "Hi, how can I help?"},
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "two"},
        ]
    )
    turns = split_turns(log)
    assert [[m.seq for m in t.messages] for t in turns] == [[1], [2, 3], [4]]
    assert [t.has_user for t in turns] == [False, True, True]


def test_current_turn_is_excluded_even_when_answered() -> None:
    log = chat([("q1", "a1"), ("q2", "a2"), ("q3", "a3")])
    plan = _plan(log)
    assert plan.new_watermark == 4  # q3/a3 is the current turn
    assert [m.seq for m in plan.preserved_messages] == [5, 6]
    assert plan.summarized_turns == 2 and plan.preserved_turns == 1


def test_min_preserved_turns_are_kept_before_the_current_turn() -> None:
    log = chat([(f"q{i}", f"a{i}") for i in range(6)])
    plan = _plan(log, min_preserved_turns=2)
    assert plan.new_watermark == 6  # turns 0-2 compacted, 3-4 preserved, 5 current
    assert plan.preserved_turns == 3
    assert plan.summarized_count == 6 and plan.preserved_count == 6


def test_nothing_compressible_is_a_noop() -> None:
    log = chat([("q1", "a1"), ("q2", "a2")])
    noop = _noop(log, min_preserved_turns=1)
    assert noop.code == "nothing_compressible"
    assert _noop([], watermark=0).code == "empty_history"
    assert _noop(log[:1]).code == "nothing_compressible"


def test_only_messages_after_the_watermark_are_planned() -> None:
    log = chat([(f"q{i}", f"a{i}") for i in range(5)])
    plan = _plan(log, watermark=4)
    assert plan.first_seq == 5 and plan.new_watermark == 8
    assert plan.previous_watermark == 4


def test_tool_group_answered_after_a_user_interjection_is_not_split() -> None:
    log = log_of(
        [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "run the tests"},
            {"role": "assistant", "content": None, "tool_calls": [call("c1", "bash", {})]},
            {"role": "user", "content": "also, hurry"},  # arrives before the tool result
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "done"},
            {"role": "user", "content": "thanks"},
        ]
    )
    plan = _plan(log, min_preserved_turns=1)
    # Cutting after turn 2 would leave call c1 behind the watermark and its result after it.
    assert plan.new_watermark == 2
    called = {cid for m in plan.range_messages for cid in m.tool_call_ids}
    assert "c1" not in called


def test_a_call_the_conversation_moved_on_from_does_not_stop_compaction() -> None:
    """A call never answered (or whose result a tail cut deleted), after which the user
    and the assistant moved on, is abandoned: later cuts are clean."""
    log = log_of(
        [
            {"role": "user", "content": "run the tests"},
            {"role": "assistant", "content": None, "tool_calls": [call("c1", "bash", {})]},
            {"role": "user", "content": "never mind, read the docs instead"},
            {"role": "assistant", "content": "Reading them."},
            *[
                m
                for i in range(4)
                for m in (
                    {"role": "user", "content": f"q{i}"},
                    {"role": "assistant", "content": f"a{i}"},
                )
            ],
        ]
    )
    plan = _plan(log, min_preserved_turns=1)
    assert plan.new_watermark == 8  # all but the last turn and the one before it
    assert "c1" in {cid for m in plan.range_messages for cid in m.tool_call_ids}
    assert plan.report()["open_group_seqs"] == []
    # Still waiting (the assistant has not spoken since the user's message): held back.
    waiting = log[:3]
    assert _noop(waiting).code == "nothing_compressible"


def test_tool_groups_inside_a_turn_stay_whole() -> None:
    log = log_of(
        [
            {"role": "user", "content": "list files"},
            {"role": "assistant", "content": None, "tool_calls": [call("c1", "ls", {"p": "."})]},
            {"role": "tool", "tool_call_id": "c1", "content": "a.py b.py"},
            {"role": "assistant", "content": "two files"},
            {"role": "user", "content": "next"},
        ]
    )
    plan = _plan(log)
    assert [m.seq for m in plan.range_messages] == [1, 2, 3, 4]


def test_ui_only_and_system_messages_do_not_count_as_tokens() -> None:
    log = [
        msg(1, "user", "q1", tokens=10),
        msg(2, "assistant", "a1", tokens=20),
        msg(3, "assistant", "ui note", tokens=500, include_in_context=False),
        msg(4, "system", "old system", tokens=700),
        msg(5, "user", "q2", tokens=5),
    ]
    plan = _plan(log)
    assert plan.range_tokens == 30
    assert plan.new_watermark == 4
    assert plan.summarized_count == 2


def test_pinned_messages_in_the_range_are_reported() -> None:
    log = log_of(
        [
            {"role": "user", "content": "remember: deploy to eu-west-1", "pinned": True},
            {"role": "assistant", "content": "noted"},
            {"role": "user", "content": "now"},
        ]
    )
    plan = _plan(log)
    assert [m.seq for m in plan.pinned] == [1]
    assert plan.report()["pinned_seqs"] == [1]


def test_too_little_to_free_is_skipped_unless_forced() -> None:
    log = [msg(1, "user", "q", tokens=100), msg(2, "assistant", "a", tokens=100)]
    log.append(msg(3, "user", "q2", tokens=10))
    noop = _noop(log, min_free_tokens=100)  # 200 tokens, summary floor 256: frees nothing
    assert noop.code == "too_little_to_free" and noop.range_tokens == 200
    assert _plan(log, min_free_tokens=100, force=True).forced
    big = [msg(1, "user", "q", tokens=5000), msg(2, "user", "q2", tokens=10)]
    assert _plan(big, min_free_tokens=1000).estimated_freed_tokens == 3500


def test_regrowth_guard() -> None:
    log = [msg(i, "user", "q", tokens=100) for i in range(1, 6)]  # 500 tokens of history
    noop = _noop(log, tokens_at_last_compaction=450, regrowth_ratio=0.25)
    assert noop.code == "not_regrown" and noop.history_tokens == 500
    assert isinstance(plan_range(log, watermark=0, min_preserved_turns=0,
                                 tokens_at_last_compaction=400, regrowth_ratio=0.25),
                      CompactionPlan)  # fmt: skip
    assert _plan(log, tokens_at_last_compaction=450, regrowth_ratio=0.25, force=True)


def test_dry_run_report_names_range_tokens_and_preserved_turns() -> None:
    log = chat([(f"q{i}", f"a{i}") for i in range(4)])
    report = _plan(log, min_preserved_turns=1).report()
    assert report["would_compact"] is True
    assert report["range"] == {"from_seq": 1, "to_seq": 4}
    assert report["preserved_turns"] == 2
    assert report["range_tokens"] > 0
    assert _noop(log, min_preserved_turns=5).report()["reason"] == "nothing_compressible"


# A history: turns of (user text, groups), a group being an assistant text or a tool call
# whose result may arrive after a user interjection.
_turn = st.tuples(
    st.booleans(),  # starts with a user message (only meaningful for the first turn)
    st.lists(st.sampled_from(["text", "tool", "late_tool", "unanswered"]), max_size=3),
)


def _history(spec: list[tuple[bool, list[str]]]) -> list[LoggedMessage]:
    items: list[dict[str, Any]] = []
    pending: list[str] = []
    for i, (starts_user, groups) in enumerate(spec):
        if starts_user or i > 0:
            items.append({"role": "user", "content": f"u{i}"})
        items.extend({"role": "tool", "tool_call_id": c, "content": "late"} for c in pending)
        pending = []
        for j, kind in enumerate(groups):
            if kind == "text":
                items.append({"role": "assistant", "content": f"a{i}.{j}"})
                continue
            cid = f"c{i}_{j}"
            items.append({"role": "assistant", "content": None, "tool_calls": [call(cid, "t", {})]})
            if kind == "tool":
                items.append({"role": "tool", "tool_call_id": cid, "content": "r"})
            elif kind == "late_tool":
                pending.append(cid)
            # "unanswered": no result ever comes
    items.extend({"role": "tool", "tool_call_id": c, "content": "late"} for c in pending)
    return log_of(items)


@settings(max_examples=150, deadline=None)
@given(st.lists(_turn, min_size=1, max_size=12), st.integers(0, 4))
def test_plan_invariants(spec: list[tuple[bool, list[str]]], keep: int) -> None:
    log = _history(spec)
    result = plan_range(log, watermark=0, min_preserved_turns=keep)
    if isinstance(result, NoopReason):
        return
    users = [m.seq for m in log if m.role == "user"]
    # Never covers the current turn.
    assert not users or result.new_watermark < users[-1]
    # Range and preserved partition the log at the watermark, in order.
    assert [m.seq for m in (*result.range_messages, *result.preserved_messages)] == [
        m.seq for m in log
    ]
    called = {c for m in result.range_messages for c in m.tool_call_ids}
    answered_later = {m.body.get("tool_call_id") for m in result.preserved_messages}
    assert not called & answered_later
    # A call with no result is compacted only once the user and the assistant moved on.
    for c in called - {m.body.get("tool_call_id") for m in log}:
        at = next(m.seq for m in log if c in m.tool_call_ids)
        user = next(m.seq for m in log if m.role == "user" and m.seq > at)
        assert any(m.role == "assistant" and m.seq > user for m in result.range_messages)
    assert len(split_turns(result.preserved_messages)) - 1 >= keep


def test_plan_for_settings_reads_the_compaction_settings() -> None:
    from app.compaction.turns import plan_for_settings
    from app.core.settings import CompactionSettings

    s = CompactionSettings(min_preserved_turns=1, min_free_ratio=0.05, regrowth_ratio=0.25)
    log = [msg(i, "user", "q", tokens=1000) for i in range(1, 5)]
    plan = plan_for_settings(log, watermark=0, settings=s, usable_budget=10_000)
    assert isinstance(plan, CompactionPlan) and plan.new_watermark == 2
    noop = plan_for_settings(log, watermark=0, settings=s, usable_budget=100_000)
    assert isinstance(noop, NoopReason) and noop.code == "too_little_to_free"  # 1400 < 5000
    again = plan_for_settings(
        log, watermark=0, settings=s, usable_budget=10_000, tokens_at_last_compaction=3500
    )
    assert isinstance(again, NoopReason) and again.code == "not_regrown"


def test_a_system_note_between_a_call_and_its_result_interrupts_nothing() -> None:
    """A historical system message is left out of every payload: logged between a call
    and its result, it made the whole group vanish from the payload."""
    from app.core.conversation import split_groups

    log = log_of(
        [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": None, "tool_calls": [call("c1", "read_file", {})]},
            {"role": "system", "content": "note"},
            {"role": "tool", "tool_call_id": "c1", "content": "the file"},
            {"role": "user", "content": "b"},
        ]
    )
    groups, aside = split_groups(log)
    assert [[m.seq for m in g.messages] for g in groups] == [[1], [2, 4], [5]]
    assert [(a.message.seq, a.action, a.rule) for a in aside] == [(3, "excluded", "system_message")]


def test_a_second_cut_inside_one_turn_keeps_the_anchor_below_the_watermark() -> None:
    # One user message and tool-less steps; a first compaction moved the watermark to 4.
    log = [msg(1, "user", "task", tokens=30)]
    log += [msg(i, "assistant", f"step {i}", tokens=100) for i in range(2, 12)]
    after = [m for m in log if m.seq > 4]
    plan = _plan(
        after, watermark=4, keep_recent_tokens=200, min_preserved_steps=2, carried_anchor=log[0]
    )
    assert plan.anchor is log[0] and plan.anchor_tokens == 30
    assert plan.report()["turn_anchor_seq"] == 1
    assert plan.range_tokens == 500  # seqs 5..9: the anchor is in no range again
    assert plan.preserved_tokens == 30 + 200  # what budget status keeps counting
    assert plan.preserved_messages[0] is log[0]
    # Without it the plan would count only what lies after the watermark.
    assert (
        _plan(after, watermark=4, keep_recent_tokens=200, min_preserved_steps=2).anchor_tokens == 0
    )
    # A user message after the watermark opens a newer turn: the old one is not sent.
    newer = [*after, msg(12, "user", "next", tokens=5)]
    assert (
        _plan(
            newer, watermark=4, keep_recent_tokens=200, min_preserved_steps=2, carried_anchor=log[0]
        ).anchor
        is None
    )
    # The regrowth guard sees the same effective history budget status counts.
    noop = _noop(after, watermark=4, keep_recent_tokens=200, min_preserved_steps=2,
                 carried_anchor=log[0], tokens_at_last_compaction=731, regrowth_ratio=0.0)  # fmt: skip
    assert noop.code == "not_regrown" and noop.history_tokens == 730
