"""What a trim keeps (SPEC §3 "Recency before stability", app/context/trim.py), through the
stability layer as app/context/service.py drives it, over an agent loop of many calls:

- at every call, the agent's steps go newest whole, then masked, then left out: an older
  step is never sent in a better form than a newer one, and the newest is whole;
- a trim that can keep the previous payload's masked steps keeps them byte for byte, so
  the provider's cache serves more than the head; the oldest steps leave in batches;
- the steps `fresh` would send whole keep at least `FULL_FLOOR` of their tokens.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any, cast

from app.context import AssemblyRequest, assemble
from app.context.stability import StableStrategy
from app.context.strategies import get_strategy
from app.context.trim_state import Layout
from app.context.view import Form, HistoryView
from app.core.conversation import LoggedMessage
from app.db.models import SessionRow
from tests.support.context_builders import COUNTER, assistant, log_of, tool, user

SYSTEM = "You are a careful coding agent."
BUDGET = 12000


def _row(last_seq: int) -> SessionRow:
    return cast(SessionRow, SimpleNamespace(generation=0, last_compaction_seq=0, last_seq=last_seq))


def _call(history: list[LoggedMessage], stored: Layout | None) -> tuple[Any, StableStrategy]:
    row = _row(history[-1].seq)
    layout = stored if stored is not None and stored.holds_for(row) else Layout.untrimmed(row)
    stable = StableStrategy(get_strategy("key_messages"), layout, row, BUDGET, 0.7)
    result = assemble(
        AssemblyRequest(
            history=history,
            counter=COUNTER,
            budget=BUDGET,
            session_id="s",
            system=SYSTEM,
            strategy=stable,
            history_from_seq=1,
        )
    )
    return result, stable


def _run(steps: int) -> list[tuple[Any, StableStrategy]]:
    """An agent loop: one step appended per call, each output of a different size."""
    msgs: list[dict[str, Any]] = [user("Audit src/ and report. Never edit tests/.")]
    calls = []
    stored: Layout | None = None
    for i in range(steps):
        output = "\n".join(
            f"src/mod_{i}.py:{k}: value_{i}_{k} = {i * k}" for k in range(30 + i % 25)
        )
        msgs += [assistant(f"Step {i}: reading mod_{i}.", f"c{i}"), tool(f"c{i}", output)]
        result, stable = _call(log_of(msgs), stored)
        stored = stable.current
        calls.append((result, stable))
    return calls


def _forms(result: Any) -> list[str]:
    """How each step present in the log was sent, by its tool result, in log order."""
    actions = {d.seq: d.action for d in result.decisions}
    return [
        "whole" if actions[s] == "kept" else "masked" if actions[s] != "dropped" else "gone"
        for s in sorted(actions)
        if s % 2 == 1 and s > 1  # the tool results: seq 3, 5, ...
    ]


def test_every_payload_sends_steps_newest_whole_then_masked_then_gone() -> None:
    rank = {"gone": 0, "masked": 1, "whole": 2}
    calls = _run(90)
    for result, _ in calls:
        forms = _forms(result)
        assert not result.over_budget
        assert forms[-1] == "whole"
        assert all(rank[a] <= rank[b] for a, b in itertools.pairwise(forms)), forms
    assert any(_forms(r).count("masked") > 3 for r, _ in calls)


def test_a_trim_keeps_the_masked_steps_in_front_as_they_were_sent() -> None:
    calls = _run(90)
    kept_in_front = batches = 0
    for (before, _), (after, stable) in itertools.pairwise(calls):
        if stable.trimmed is None:
            assert after.messages[: len(before.messages)] == before.messages  # a replay
            continue
        first_before = _first_step(before)
        first_after = _first_step(after)
        shared = _shared(before.messages, after.messages)
        if first_after == first_before:
            # Same oldest step: every step that was masked before is sent as it was.
            assert shared >= 2 + sum(1 for a in _actions(before) if a == "masked"), shared
            kept_in_front += 1
        else:
            assert first_after > first_before  # the oldest leave, in one batch
            batches += 1
    assert kept_in_front >= 2, kept_in_front
    assert batches >= 1 and batches < kept_in_front


def _actions(result: Any) -> list[str]:
    """The action of every history message sent, in payload order ("masked" for previews)."""
    by_seq = {d.seq: d.action for d in result.decisions}
    out = []
    for seq in result.kept_seqs:
        if seq == 1:
            continue
        out.append("masked" if by_seq.get(seq) in ("preview", "cut") else "whole")
    return out


def _first_step(result: Any) -> int:
    return min(int(s) for s in result.kept_seqs if s > 1)


def _shared(a: Any, b: Any) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def test_a_trim_keeps_at_least_the_floor_of_what_fresh_sends_whole() -> None:
    from app.context.trim import FULL_FLOOR

    for result, stable in _run(90):
        if stable.trimmed is None or stable.view is None:
            continue
        view: HistoryView = stable.view
        fresh = get_strategy("key_messages").select(view, _target(view, stable))
        whole_fresh = sum(
            view.units[i].cost(Form.FULL)
            for i, (form, _) in fresh.picks.items()
            if form is Form.FULL and view.units[i].kind == "tool_group"
        )
        sel = stable.selection
        assert sel is not None
        whole_sent = sum(
            view.units[i].cost(Form.FULL)
            for i, (form, _) in sel.picks.items()
            if form is Form.FULL and view.units[i].kind == "tool_group"
        )
        assert whole_sent >= FULL_FLOOR * whole_fresh - 1, (result.kept_seqs, whole_sent)


def _target(view: HistoryView, stable: StableStrategy) -> int:
    """The low-water mark the stability layer trimmed to (see StableStrategy.select)."""
    import math

    budget = BUDGET - COUNTER.count_messages([{"role": "system", "content": SYSTEM}])
    return budget - math.ceil((1 - stable.ratio) * stable.limit)
