"""Strategy behaviours (key_messages scoring and fallbacks) and the plugin registry."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from typing import Any

import pytest

from app.context import AssemblyRequest, assemble, available_strategies, get_strategy
from app.context.strategies import base
from app.context.strategies.base import Selection, Strategy
from app.context.view import Form, HistoryView
from app.core.conversation import LoggedMessage
from tests.support.context_builders import COUNTER, assistant, check, log_of, logged, tool, user

CONSTRAINT = "Never push to the main branch; we must open a PR."


def chat(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [user(CONSTRAINT), assistant("Understood.")]
    for i in range(n):
        out += [user(f"Tell me about item {i}, in detail " * 3), assistant("It is fine. " * 20)]
    return out


def run(history: list[LoggedMessage], **kw: Any) -> Any:
    request = AssemblyRequest(history=history, counter=COUNTER, **{"budget": 100_000, **kw})
    result = assemble(request)
    check(request, result)
    return result


def test_key_messages_keeps_an_early_user_message_that_the_window_forgets() -> None:
    # Kept for being the user's, whatever it says: no detector word in it.
    plain = "Note for this whole session: my laptop runs Windows 11, so give PowerShell commands."
    history = log_of([user(plain), *chat(20)[1:]])
    window = run(history, budget=800, strategy="sliding_window")
    key = run(history, budget=800, strategy="key_messages")
    assert 1 not in window.kept_seqs
    assert 1 in key.kept_seqs
    rule = next(d.rule for d in key.decisions if d.seq == 1)
    assert rule.startswith("user:")
    assert history[-1].seq in key.kept_seqs  # the newest exchange is mandatory


def agent_run(steps: int, output: str) -> list[dict[str, Any]]:
    """A task and `steps` steps, each output `output` with its lines marked by the step
    (outputs that repeat a newer one are masked sooner: test_..._repeats_a_newer_one)."""
    msgs = [user("Fix src/app.py. You must keep the API stable.")]
    for i in range(steps):
        out = "".join(f"{line} #{i}\n" for line in output.splitlines())
        call = assistant(f"Step {i}: reading part {i}.", f"c{i}")
        # Each step its own command: a call made again is a sign its output is needed.
        call["tool_calls"][0]["function"]["arguments"] = json.dumps({"part": i})
        msgs += [call, tool(f"c{i}", out)]
    return msgs


def forms_of(result: Any, history: list[LoggedMessage]) -> list[str]:
    """Per step of an agent run (its tool result's seq), in log order: how it was sent."""
    actions = {d.seq: d.action for d in result.decisions}
    return [
        "whole" if actions.get(m.seq) == "kept" else "masked" if m.seq in actions else "gone"
        for m in history
        if m.role == "tool"
    ]


def test_key_messages_sends_the_newest_steps_whole_older_masked_the_oldest_gone() -> None:
    """Recency before stability (SPEC §3): newest steps whole, then masked (observation
    masking), then left out; never an older step in a better form than a newer one."""
    history = log_of(agent_run(40, "def handler(event):\n    return event['id']\n" * 40))
    result = run(history, budget=6000, session_id="s")
    forms = forms_of(result, history)
    assert not result.over_budget
    assert forms[-1] == "whole" and forms[0] == "gone"
    assert "masked" in forms
    rank = {"gone": 0, "masked": 1, "whole": 2}
    assert all(rank[a] <= rank[b] for a, b in itertools.pairwise(forms)), forms
    assert 1 in result.kept_seqs  # the task


@pytest.mark.parametrize("viewed_last", [False, True])
def test_key_messages_masks_a_step_whose_output_a_newer_one_repeats(viewed_last: bool) -> None:
    """A file viewed again: the older view is masked where it would fit whole (the newer
    one is sent whole, the newest unit of the history or not), and the room goes to
    older steps, which stay whole."""
    view = "".join(
        f"{n:6}\tdef rule_{n}(tokens): return parse(tokens, {n * 7})\n" for n in range(60)
    )

    def history(first_view: str) -> list[LoggedMessage]:
        msgs = agent_run(12, "checked one more module of the package\n" * 20)
        msgs += [assistant("Viewing the parser.", "v1"), tool("v1", first_view)]
        msgs += agent_run(3, "ran one more test of the suite, it passed\n" * 20)[1:]
        msgs += [assistant("Viewing the parser again.", "v2"), tool("v2", view)]
        if not viewed_last:
            msgs += [assistant("Editing it.", "e1"), tool("e1", "done")]
        return log_of(msgs)

    again = history(view)
    other = history(view.replace("rule_", "step_"))
    repeated = run(again, budget=4000, session_id="s")
    distinct = run(other, budget=4000, session_id="s")
    first_view = next(m.seq for m in again if m.body.get("tool_call_id") == "v1")
    assert [d.action for d in repeated.decisions if d.seq == first_view] == ["preview"]
    assert [d.action for d in distinct.decisions if d.seq == first_view] == ["kept"]
    whole = {m.seq for m in again if m.role == "tool" and m.seq < first_view}
    held_whole = {d.seq for d in repeated.decisions if d.action == "kept"} & whole
    held_whole_distinct = {d.seq for d in distinct.decisions if d.action == "kept"} & whole
    assert held_whole > held_whole_distinct  # the room went to older steps
    assert again[-1].seq in repeated.kept_seqs and not repeated.over_budget


def test_key_messages_cuts_a_long_old_task_before_the_agents_recent_work() -> None:
    """A long user message beyond the user's share of the budget is cut (head and key
    lines), oldest first; at a budget with room for it, it is sent whole."""
    task = "Implement the parser described below. " + "The grammar has many rules. " * 700
    history = log_of([user(task), *agent_run(80, "x = compute(1)\n" * 60)])
    tight = run(history, budget=8000, session_id="s")
    roomy = run(history, budget=16000, session_id="s")
    assert tight.dropped_count and roomy.dropped_count
    assert {d.seq: d.action for d in tight.decisions}[1] == "cut"
    assert {d.seq: d.action for d in roomy.decisions}[1] == "kept"
    assert forms_of(tight, history)[-3:] == ["whole"] * 3


def test_key_messages_compacts_before_dropping_the_current_turn() -> None:
    big = "error: line failed at src/app.py\n" * 400
    msgs = [user("Fix src/app.py. You must keep the API stable.")]
    for i in range(6):
        msgs += [assistant(f"Step {i}: running the tests.", f"c{i}"), tool(f"c{i}", big)]
    history = log_of(msgs)
    full = run(history, budget=1_000_000, preview_limit_tokens=2000)
    assert full.dropped_count == 0
    tight = run(history, budget=1500, preview_limit_tokens=2000, session_id="s")
    assert not tight.over_budget
    actions = {d.action for d in tight.decisions}
    assert "preview" in actions
    assert 1 in tight.kept_seqs and history[-1].seq in tight.kept_seqs


def test_key_messages_compacts_recent_steps_before_dropping_a_user_constraint() -> None:
    # An agent run: early constraints, then a task turn of tool steps that fills the
    # budget. The recent turns are mandatory; the older constraint (17 tokens) used to
    # find 6 tokens left and be dropped. Now recent units are compacted to make room.
    msgs: list[dict[str, Any]] = []
    for c in (
        "Never push to the main branch; open a PR.",
        "You must not touch the migrations folder.",
    ):
        msgs += [user(c), assistant("Understood.")]
    msgs.append(user("Fix the failing test in tests/test_api.py. " + "Context line. " * 40))
    for i in range(6):
        out = "".join(
            f"step {i}.{k}: FAILED tests/test_api.py::test_{k} value={k * 7}\n" for k in range(60)
        )
        msgs += [assistant(f"Running step {i}: " + "reasoning " * 30, f"c{i}"), tool(f"c{i}", out)]
    history = log_of(msgs)
    result = run(history, budget=2000, preview_limit_tokens=300)
    assert not result.over_budget and result.usage.input_tokens <= 2000
    assert {1, 3, 5} <= set(result.kept_seqs)  # both constraints and the task
    assert history[-1].seq in result.kept_seqs
    rules = {d.seq: d.rule for d in result.decisions}
    assert rules[1].startswith("user:") and "constraint" in rules[1]
    # The window strategy, for contrast, forgets them.
    window = run(history, budget=2000, preview_limit_tokens=300, strategy="sliding_window")
    assert not {1, 3} & set(window.kept_seqs)


def test_key_messages_last_resort_keeps_only_the_hard_set() -> None:
    msgs = [user("A " * 300), assistant("B " * 300)] * 3 + [user("Now what? " * 100)]
    result = run(log_of(msgs), budget=100, preview_limit_tokens=256)
    assert result.kept_seqs == (7,)
    assert result.decisions[-1].action == "cut"
    assert result.decisions[0].as_dict() == {
        "seq": 1,
        "action": "dropped",
        "rule": "budget",
        "through": 6,
    }
    assert not result.over_budget


def test_pinned_messages_survive_every_strategy() -> None:
    msgs = chat(15)
    history = [logged(i + 1, m, pinned=(i == 4)) for i, m in enumerate(msgs)]
    for name in available_strategies():
        result = run(history, budget=400, strategy=name)
        assert 5 in result.kept_seqs, name
        assert next(d.rule for d in result.decisions if d.seq == 5) == "pinned"


def test_unknown_strategy_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        get_strategy("nope")


class NewestOnly(Strategy):
    name = "newest_only"

    def select(self, view: HistoryView, budget: int) -> Selection:
        sel = Selection()
        left = budget - sel.take_mandatory(view, budget)
        for unit in reversed(view.units):
            if unit.index not in sel.picks and unit.cost(Form.FULL) <= left:
                sel.pick(unit, Form.FULL, "newest")
                left -= unit.cost(Form.FULL)
        return sel


class Forgetful(Strategy):
    name = "forgetful"

    def select(self, view: HistoryView, budget: int) -> Selection:
        return Selection()


class Crashing(Strategy):
    name = "crashing"

    def select(self, view: HistoryView, budget: int) -> Selection:
        raise RuntimeError("bug in a plugin")


@pytest.fixture
def plugins(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    here = __name__
    eps = [
        EntryPoint("newest_only", f"{here}:NewestOnly", base.ENTRY_POINT_GROUP),
        EntryPoint("forgetful", f"{here}:Forgetful", base.ENTRY_POINT_GROUP),
        EntryPoint("crashing", f"{here}:Crashing", base.ENTRY_POINT_GROUP),
        EntryPoint("broken", "no_such_module_xyz:Thing", base.ENTRY_POINT_GROUP),
        EntryPoint("not_a_strategy", "builtins:dict", base.ENTRY_POINT_GROUP),
        EntryPoint("sliding_window", f"{here}:NewestOnly", base.ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(base, "entry_points", lambda group: eps)
    base.reset_plugins()
    yield
    base.reset_plugins()


@pytest.mark.usefixtures("plugins")
def test_entry_point_plugins_load_lazily_and_safely(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        names = available_strategies()
    assert {"newest_only", "forgetful", "crashing"} <= set(names)
    assert "broken" not in names and "not_a_strategy" not in names
    assert "failed to load" in caplog.text and "not a Strategy" in caplog.text
    assert type(get_strategy("sliding_window")).__name__ == "SlidingWindow"  # built-ins win
    result = run(log_of(chat(3)), strategy="newest_only")
    assert result.strategy == "newest_only" and result.dropped_count == 0


@pytest.mark.usefixtures("plugins")
def test_pipeline_guards_invariants_against_plugins() -> None:
    history = log_of(chat(3))
    forgot = run(history, strategy="forgetful")
    assert forgot.kept_seqs == (history[-2].seq,)  # the latest user message was added
    assert any("left out seq" in w for w in forgot.warnings)
    crashed = run(history, strategy="crashing")
    assert crashed.dropped_count == 0
    assert any("crashing failed" in w for w in crashed.warnings)


def agent_run_with_instructions() -> tuple[list[LoggedMessage], list[int]]:
    """One task, 30 steps with 3k-token outputs, three short instructions typed mid-run."""
    notes = {
        8: "From this point forward, every price in euros, rounded at two decimals.",
        17: "往后所有回答都用公制单位，比如公里和摄氏度。",
        25: "Hinweis für die ganze Sitzung: mein Rechner läuft unter Debian 12.",
    }
    msgs: list[dict[str, Any]] = [user("Fix the failing test in tests/test_api.py.")]
    for i in range(30):
        if i in notes:
            msgs.append(user(notes[i]))
        out = "".join(f"line {k} of step {i}: value={k * 7} ok\n" for k in range(400))
        msgs += [assistant(f"Step {i}: " + "thinking " * 80, f"c{i}"), tool(f"c{i}", out)]
    history = log_of(msgs)
    return history, [m.seq for m in history if m.role == "user"]


@pytest.mark.parametrize("strategy", ["key_messages", "summary"])
def test_tool_output_and_old_steps_give_way_before_user_words(strategy: str) -> None:
    history, users = agent_run_with_instructions()
    result = run(history, budget=2000, preview_limit_tokens=1024, strategy=strategy)
    assert not result.over_budget
    assert set(users) <= set(result.kept_seqs)
    decided = {s: d for d in result.decisions for s in range(d.seq, (d.through or d.seq) + 1)}
    assert all(decided[s].action == "kept" for s in users)  # whole, not cut
    assert history[-1].seq in result.kept_seqs  # the newest step, as a preview
    assert decided[history[-1].seq].action == "preview"
    dropped_steps = [s for s, d in decided.items() if d.action == "dropped"]
    assert dropped_steps and not set(dropped_steps) & set(users)


@pytest.mark.parametrize("strategy", ["key_messages", "summary"])
def test_when_not_every_user_message_fits_short_ones_stay(strategy: str) -> None:
    long_ask = "Here is the whole spec again. " + "Requirement text, clause after clause. " * 300
    msgs: list[dict[str, Any]] = []
    for i in range(12):
        msgs += [user(long_ask if i % 3 == 0 else f"Short note {i}: keep going."), assistant("Ok.")]
    msgs.append(user("Go on."))
    history = log_of(msgs)
    result = run(history, budget=300, preview_limit_tokens=256, strategy=strategy)
    assert not result.over_budget and result.usage.input_tokens <= 300
    shorts = [m.seq for m in history if m.role == "user" and m.token_count < 30]
    assert set(shorts) <= set(result.kept_seqs)


def test_a_masked_step_keeps_its_calls_with_long_arguments_cut_to_their_head() -> None:
    """A step that wrote a file through a heredoc is masked to its call's head: valid JSON
    arguments with the same keys, the head of the command (the path it wrote), where the
    rest is, and far fewer tokens than the whole call."""
    heredoc = "cat <<'EOF' > src/parser.py\n" + "def rule_%d(): return %d\n" * 300 + "EOF"
    command = heredoc % tuple(x for i in range(300) for x in (i, i))
    msgs: list[dict[str, Any]] = [user("Write the parser in src/parser.py.")]
    msgs.append(
        {
            "role": "assistant",
            "content": "THOUGHT: I will write the parser now.",
            "tool_calls": [
                {
                    "id": "w1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                }
            ],
        }
    )
    msgs.append(tool("w1", "done"))
    msgs += agent_run(40, "check output line\n" * 24)[1:]
    history = log_of(msgs)
    result = run(history, budget=6000, session_id="s")
    sent = next(
        m for m in result.messages if m.get("tool_calls") and m["tool_calls"][0]["id"] == "w1"
    )
    args = json.loads(sent["tool_calls"][0]["function"]["arguments"])
    assert set(args) == {"command"}
    assert args["command"].startswith("cat <<'EOF' > src/parser.py")
    assert "/sessions/s/messages/2" in args["command"]
    assert COUNTER.count_message(sent) < history[1].token_count // 5
