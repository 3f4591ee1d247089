"""Planning by tokens and steps (SPEC §5): the range may reach inside the current turn."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.compaction.turns import CompactionPlan, NoopReason, plan_range
from app.core.conversation import LoggedMessage, split_steps
from tests.support.compaction_builders import call, log_of, msg


def _agent_run(steps: int, *, open_last: bool = False, text_before: bool = True) -> list[Any]:
    """One user message, then `steps` tool steps (assistant text + call + result)."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "fix the failing build"}]
    for i in range(steps):
        if text_before:
            items.append({"role": "assistant", "content": f"step {i}: looking at module {i}"})
        items.append(
            {"role": "assistant", "content": None, "tool_calls": [call(f"c{i}", "sh", {"i": i})]}
        )
        if not (open_last and i == steps - 1):
            items.append({"role": "tool", "tool_call_id": f"c{i}", "content": "x " * 200})
    return items


def test_steps_join_the_text_just_before_a_group() -> None:
    log = log_of(_agent_run(3))
    units = split_steps(log)
    assert [u.kind for u in units] == ["user", "step", "step", "step"]
    assert [(log[u.start].seq, log[u.end - 1].seq) for u in units] == [
        (1, 1),
        (2, 4),
        (5, 7),
        (8, 10),
    ]
    assert not any(u.open for u in units)


def test_single_turn_agent_run_is_compacted_inside_the_turn() -> None:
    log = log_of(_agent_run(40))
    plan = plan_range(log, watermark=0, min_preserved_turns=8, keep_recent_tokens=2000)
    assert isinstance(plan, CompactionPlan)
    # The user message that opens the turn is the anchor: below the watermark, still kept.
    assert plan.anchor is not None and plan.anchor.seq == 1
    assert plan.preserved_messages[0].seq == 1
    # The tail holds whole steps, at least four, within the 2000 tokens.
    tail = plan.preserved_messages[1:]
    assert tail[0].role == "assistant" and tail[0].body["content"].startswith("step ")
    assert len([m for m in tail if m.tool_call_ids]) >= 4
    assert sum(m.token_count for m in tail) <= 2000
    assert plan.estimated_freed_tokens > sum(m.token_count for m in log) // 2
    assert plan.report()["tail"]["limited_by"] == "keep_recent_ratio"
    assert plan.report()["turn_anchor_seq"] == 1


def test_min_preserved_steps_wins_over_the_token_share() -> None:
    log = log_of(_agent_run(10))
    plan = plan_range(
        log, watermark=0, min_preserved_turns=8, min_preserved_steps=6, keep_recent_tokens=10
    )
    assert isinstance(plan, CompactionPlan)
    assert len([m for m in plan.preserved_messages if m.tool_call_ids]) == 6
    assert plan.report()["tail"]["limited_by"] == "min_preserved_steps"


def test_an_open_group_stops_the_range() -> None:
    items = _agent_run(1, open_last=True)  # seq 3: a call whose result never arrived
    later = _agent_run(10)[1:]
    for m in later:  # other call ids: c0 stays unanswered
        if m.get("tool_calls"):
            m["tool_calls"][0]["id"] = "x" + m["tool_calls"][0]["id"]
        if m.get("tool_call_id"):
            m["tool_call_id"] = "x" + m["tool_call_id"]
    log = log_of([*items, *later])
    result = plan_range(log, watermark=0, min_preserved_turns=0, min_preserved_steps=1,
                        keep_recent_tokens=100)  # fmt: skip
    assert isinstance(result, NoopReason)
    assert result.code == "nothing_compressible"
    # The group is named by its call (seq 3), not by the text that opens its step (seq 2).
    assert "missing a result" in result.detail and "seq 3" in result.detail
    assert result.report()["open_group_seqs"] == [3]


def test_why_a_plan_is_empty_is_explained() -> None:
    log = log_of(_agent_run(4))
    noop = plan_range(log, watermark=0, min_preserved_turns=8, keep_recent_tokens=10)
    assert isinstance(noop, NoopReason)
    assert "min_preserved_steps" in noop.detail and "4 complete step" in noop.detail
    small = plan_range(log, watermark=0, min_preserved_turns=8, keep_recent_tokens=100_000)
    assert isinstance(small, NoopReason) and "keep_recent_ratio" in small.detail


def test_range_never_ends_on_a_user_message() -> None:
    log = log_of(
        [
            {"role": "user", "content": "q1 " * 100},
            {"role": "assistant", "content": "a1 " * 100},
            {"role": "user", "content": "q2 " * 100},
            {"role": "assistant", "content": "a2 " * 100},
        ]
    )
    plan = plan_range(log, watermark=0, min_preserved_turns=8, keep_recent_tokens=80)
    assert isinstance(plan, CompactionPlan)
    assert plan.new_watermark == 2 and plan.range_messages[-1].role == "assistant"


# --- properties over generated histories --------------------------------------------------

_step = st.sampled_from(["text", "tool", "text_tool", "two_calls", "open"])
_turn_spec = st.tuples(
    st.lists(_step, max_size=8),
    st.integers(1, 400),  # user message size in tokens
    st.booleans(),  # pinned user message
)


def _build(spec: list[tuple[list[str], int, bool]], sizes: list[int]) -> list[LoggedMessage]:
    out: list[LoggedMessage] = []
    size = itertools.cycle(sizes)

    def add(role: Any, content: str | None = None, **kw: Any) -> None:
        out.append(msg(len(out) + 1, role, content, tokens=next(size), **kw))

    for t, (steps, user_tokens, pinned) in enumerate(spec):
        out.append(msg(len(out) + 1, "user", f"u{t}", tokens=user_tokens, pinned=pinned))
        for j, kind in enumerate(steps):
            cid = f"c{t}_{j}"
            if kind in ("text", "text_tool"):
                add("assistant", f"a{t}.{j}")
            if kind in ("tool", "text_tool", "open"):
                add("assistant", None, tool_calls=[call(cid, "t", {})])
                if kind != "open":
                    add("tool", "r", tool_call_id=cid)
            if kind == "two_calls":
                add(
                    "assistant",
                    None,
                    tool_calls=[call(cid + "a", "t", {}), call(cid + "b", "t", {})],
                )
                add("tool", "r", tool_call_id=cid + "a")
                add("tool", "r", tool_call_id=cid + "b")
    return out


def _abandoned(log: list[LoggedMessage], cut: int) -> set[str]:
    """Calls before `cut` (an index: log[:cut] is before it) with no result anywhere that
    the conversation moved on from by then: a user message after the call, then an
    assistant message at or before the cut."""
    answered = {str(m.body.get("tool_call_id")) for m in log if m.role == "tool"}
    out: set[str] = set()
    for i, m in enumerate(log[:cut]):
        user = next((j for j in range(i + 1, len(log)) if log[j].role == "user"), None)
        if user is None:
            continue
        last = min(cut, len(log) - 1)
        if any(log[k].role == "assistant" for k in range(user + 1, last + 1)):
            out.update(c for c in m.tool_call_ids if c not in answered)
    return out


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_turn_spec, min_size=1, max_size=6),
    st.lists(st.integers(1, 600), min_size=1, max_size=7),
    st.integers(0, 4),
    st.integers(1, 5),
    st.integers(50, 5000),
)
def test_plan_properties(
    spec: list[tuple[list[str], int, bool]],
    sizes: list[int],
    turns: int,
    steps: int,
    keep_tokens: int,
) -> None:
    log = _build(spec, sizes)
    result = plan_range(
        log,
        watermark=0,
        min_preserved_turns=turns,
        min_preserved_steps=steps,
        keep_recent_tokens=keep_tokens,
    )
    units = split_steps(log)
    current = units[-1].turn
    complete_steps = [u for u in units if u.turn == current and u.kind == "step" and not u.open]
    if isinstance(result, NoopReason):
        assert result.detail
        if result.code == "too_little_to_free":  # min_free_tokens=0: a range all summary
            assert result.range_tokens <= 256 + (result.range_tokens - 1)
            return
        assert result.code == "nothing_compressible"
        # Brute force: no clean step boundary lies before the preserved tail.
        from_seq = result.explanation["tail"]["from_seq"]
        tail_start = len(log) if from_seq is None else from_seq - 1
        for c in range(1, tail_start + 1):
            before, nxt = log[:c], log[c] if c < len(log) else None
            calls = {i for m in before for i in m.tool_call_ids} - _abandoned(log, c)
            answered = {str(m.body.get("tool_call_id")) for m in before if m.role == "tool"}
            boundary = nxt is None or nxt.role == "user" or (
                nxt.role == "assistant"
                and not (log[c - 1].role == "assistant" and not log[c - 1].tool_call_ids
                         and nxt.tool_call_ids)
            )  # fmt: skip
            ends_on_asked = log[c - 1].role == "user" and nxt is not None and nxt.role != "user"
            only_anchor = all(m.role == "user" for m in before) and all(
                m.role != "user" for m in log[c:]
            )  # the current turn's opener alone: nothing would be freed
            assert not (calls <= answered and boundary and not ends_on_asked and not only_anchor), c
        return
    wm = result.new_watermark
    ranged = {m.seq for m in result.range_messages}
    assert ranged == {m.seq for m in log if m.seq <= wm}
    # Never splits a group, never holds an open one (an abandoned call is not open).
    calls = {c for m in log if m.seq <= wm for c in m.tool_call_ids} - _abandoned(log, wm)
    answers_before = {
        str(m.body.get("tool_call_id")) for m in log if m.role == "tool" and m.seq <= wm
    }
    answers_after = {
        str(m.body.get("tool_call_id")) for m in log if m.role == "tool" and m.seq > wm
    }
    assert calls <= answers_before
    assert not answers_after & calls
    # Never covers the current turn's last `steps` complete steps.
    for u in complete_steps[-steps:]:
        assert log[u.start].seq > wm
    # Never ends on a user message; the current turn's opener stays visible.
    assert log[wm - 1].role != "user" or wm == len(log) or log[wm].role == "user"
    current_user = next(
        (log[u.start] for u in units if u.turn == current and u.kind == "user"), None
    )
    if current_user is not None and current_user.seq <= wm:
        assert result.anchor is current_user
        assert current_user in result.preserved_messages
    # Frees what the budget needs: the tail is within the share unless the step floor
    # or a clean cut forced it bigger; the freed estimate is the range minus the anchor.
    tail = [m for m in log if m.seq > wm]
    tail_tokens = sum(m.token_count for m in tail)
    if result.explanation["tail"]["limited_by"] == "keep_recent_ratio":
        assert tail_tokens <= keep_tokens or result.explanation["cut_moved_back"]
    assert result.range_tokens == sum(m.token_count for m in log if m.seq <= wm)
