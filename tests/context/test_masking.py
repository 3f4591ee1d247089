"""Masking that knows what later steps refer to (SPEC §3 "Recency before stability").

Small hand-made agent runs: an old tool output whose identifiers a later step names keeps
the lines holding them; a step whose call the agent made again keeps its output whole; a
small output is never masked into a preview about as long as itself; a replayed layout
cuts an output to the same lines however the log grew since its trim, and whatever its
call's window still holds of what the trim saw.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, cast

from app.context import AssemblyRequest, assemble
from app.context.caches import Caches
from app.context.preview import CALL_VALUE_CHARS, _cut_call, _cut_values, message_path
from app.context.references import References, identifiers
from app.context.stability import StableStrategy
from app.context.strategies import get_strategy
from app.context.trim_state import Layout
from app.context.view import MASK_TOKENS, MASK_WORTH, Form, HistoryView, Limits
from app.core.conversation import LoggedMessage, split_groups
from app.db.models import SessionRow
from tests.support.context_builders import COUNTER, check, log_of, tool, user

HANDLER = "src/app/special_handler.py"


def call(call_id: str, command: str, text: str | None = None) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": command})},
            }
        ],
    }


def lint_output() -> str:
    """300 lines of a linter, the one that matters in the middle: a head-and-tail preview
    cannot hold it."""
    lines = [f"src/pkg/mod{i}.py:{i}:1: W0001 unused import os" for i in range(150)]
    lines.append(f"{HANDLER}:12:4: E1101 Instance of 'Refund' has no member 'amount_cents'")
    lines += [f"src/pkg/more{i}.py:{i}:1: W0001 unused import sys" for i in range(150)]
    return "\n".join(lines)


def filler_steps(n: int, start: int = 0) -> list[dict[str, Any]]:
    """`n` steps of their own, each output worth masking and naming nothing of the others."""
    out: list[dict[str, Any]] = []
    for i in range(start, start + n):
        out += [
            call(f"f{i}", f"run check number {i}"),
            tool(f"f{i}", f"check {i} finished, all good\n" * 40),
        ]
    return out


def run(history: list[LoggedMessage], budget: int) -> Any:
    request = AssemblyRequest(history=history, counter=COUNTER, budget=budget, session_id="s")
    result = assemble(request)
    check(request, result)
    return result


def sent_of(result: Any, call_id: str) -> dict[str, Any]:
    return next(m for m in result.messages if m.get("tool_call_id") == call_id)


def rule_of(result: Any, seq: int) -> tuple[str, str]:
    d = next(d for d in result.decisions if d.seq <= seq <= (d.through or d.seq))
    return d.action, d.rule


def test_a_later_step_naming_a_path_from_an_old_output_keeps_that_line() -> None:
    def history(named: bool) -> list[LoggedMessage]:
        msgs = [
            user("Make the linter pass."),
            call("lint", "ruff check ."),
            tool("lint", lint_output()),
        ]
        msgs += filler_steps(3)
        looked = f"Looking at {HANDLER} next." if named else "Looking at the next warning."
        msgs += [call("look", "git status", looked), tool("look", "nothing to commit")]
        msgs += filler_steps(6, start=3)
        return log_of(msgs)

    named, unnamed = history(True), history(False)
    lint_seq = 3
    budget = 3_000
    with_ref, without = run(named, budget), run(unnamed, budget)
    # Both masked (the output is far over the masked size), but not alike.
    kept = sent_of(with_ref, "lint")["content"]
    assert f"{HANDLER}:12:4: E1101" in kept  # the line the later step's path is on
    assert "naming what later steps use" in kept and "/sessions/s/messages/3" in kept
    assert rule_of(with_ref, lint_seq - 1) == ("kept", "referenced")  # the call leads
    assert rule_of(with_ref, lint_seq) == ("preview", "tool_group")
    plain = sent_of(without, "lint")["content"]
    assert HANDLER not in plain and plain.startswith("[tool output preview:")
    assert rule_of(without, lint_seq - 1)[1] == "recent"
    # The cut stays within what a referenced output may take.
    assert (
        COUNTER.count_message(sent_of(with_ref, "lint"))
        <= Limits.from_preview_limit("s", 1024).lines_tokens
    )


def test_a_repeated_call_keeps_its_earlier_output_whole() -> None:
    config = "".join(f"option_{i} = {i * 37}\n" for i in range(40))  # over twice the masked size

    def history(again: bool) -> list[LoggedMessage]:
        msgs = [user("Tune the service."), call("c1", "cat service.toml"), tool("c1", config)]
        msgs += filler_steps(3)
        if again:  # the file was edited since: the newer output differs
            msgs += [call("c2", "cat service.toml"), tool("c2", config.replace("= 0", "= 9"))]
        else:
            msgs += [call("c2", "cat other.toml"), tool("c2", "nothing here")]
        msgs += filler_steps(6, start=3)
        return log_of(msgs)

    assert COUNTER.count_text(config) > MASK_WORTH * MASK_TOKENS
    budget = 3_000
    repeated, single = run(history(True), budget), run(history(False), budget)
    assert sent_of(repeated, "c1")["content"] == config
    assert rule_of(repeated, 2) == ("kept", "referenced")
    assert sent_of(single, "c1")["content"].startswith("[tool output preview:")
    assert rule_of(single, 3) == ("preview", "tool_group")


def test_a_small_output_is_never_masked_into_a_preview_as_long_as_itself() -> None:
    # The example: a 67-token output became a preview about as long as itself.
    small = "id=4821 status=ok region=eu-west-1 bytes=23112 took=312ms cache=miss retry=0 " * 3
    msgs = [
        user("Check the service."),
        call("s", "curl -s localhost:8080/health"),
        tool("s", small),
    ]
    msgs += filler_steps(8)
    history = log_of(msgs)
    assert MASK_TOKENS < history[2].token_count <= MASK_WORTH * MASK_TOKENS
    result = run(history, 2_000)
    # The steps after it are masked (previews), the small output is sent as it is.
    assert rule_of(result, 5) == ("preview", "tool_group")
    assert sent_of(result, "s")["content"] == small
    # Every output the masked form previews shrinks to at most half of itself.
    groups, _ = split_groups(history)
    view = HistoryView.build(groups, Limits.from_preview_limit("s", 1024), COUNTER, Caches())
    for unit in view.units:
        for m, sent in zip(unit.messages, unit.render(Form.COMPACT)[0], strict=True):
            if m.role == "tool" and sent != m.body:
                assert COUNTER.count_message(sent) * 2 <= m.token_count


def test_a_replayed_cut_keeps_its_lines_however_the_log_grew() -> None:
    msgs = [
        user("Make the linter pass."),
        call("lint", "ruff check ."),
        tool("lint", lint_output()),
    ]
    msgs += [call("a", f"sed -n 1,20p {HANDLER}"), tool("a", "class Refund: ...")]
    history = log_of(msgs)
    later = log_of([*msgs, call("b", "sed -n 1,9p src/pkg/mod7.py"), tool("b", "import os")])

    def lines(log: list[LoggedMessage], horizon: int | None) -> str:
        groups, _ = split_groups(log)
        view = HistoryView.build(groups, Limits.from_preview_limit("s", 1024), COUNTER, Caches())
        assert view.refs is not None
        view.refs.set_horizon(horizon)
        unit = next(u for u in view.units if any(m.seq == 3 for m in u.messages))
        return str(unit.render(Form.LINES)[0][1]["content"])

    trimmed = lines(history, None)
    assert HANDLER in trimmed and "src/pkg/mod7.py" not in trimmed
    # The same layout replayed after a later step named another file: the same bytes.
    assert lines(later, history[-1].seq) == trimmed
    # A new trim sees the newer step too.
    assert "src/pkg/mod7.py:7:1" in lines(later, None)


def test_identifiers_said_before_an_output_are_not_what_it_told() -> None:
    assert {HANDLER, "web.chal.csaw.io", "a1b2c3d4", "48213", "getUserName"} <= identifiers(
        f"curl http://web.chal.csaw.io:8000 in {HANDLER} a1b2c3d4 order 48213 getUserName"
    )
    # The task names the path first: the grep output repeats it, it did not tell it.
    msgs = [
        user(f"Fix {HANDLER}."),
        call("g", "grep -rn Refund src"),
        tool("g", f"{HANDLER}:3: class Refund\n" + "src/other.py:1: x\n" * 200),
        call("o", f"sed -n 1,9p {HANDLER}"),
        tool("o", "class Refund: ..."),
    ]
    groups, _ = split_groups(log_of(msgs))
    view = HistoryView.build(groups, Limits.from_preview_limit("s", 1024), COUNTER, Caches())
    refs = view.refs
    assert isinstance(refs, References)
    grep = next(u for u in view.units if any(m.seq == 3 for m in u.messages))
    assert not refs.referenced(grep)


def test_a_replayed_cut_stays_the_same_when_the_window_moved_past_what_the_trim_saw() -> None:
    """The defect report (bill replay, seq 45 of `bill-anthropic-1`: "2 of 59 lines", then
    "6 of 59 lines" under one layout): a replay's view is the window the call read, the
    layout's units and what came after them, not what the trim saw. Here a dropped step
    named src/pkg/mod7.py before the linter did, so the trim cut the linter's output to
    the handler's line alone; once the window moved past that step the same output
    seemed to have told mod7.py too, and was cut to two lines. The layout now records
    the identifiers of its cuts, and the later payload starts with the earlier one."""
    msgs = [
        user("Make the linter pass."),
        call("n", "cat NOTES"),
        tool("n", "start with src/pkg/mod7.py and src/pkg/more3.py\n" + "note line\n" * 200),
        call("lint", "ruff check ."),
        tool("lint", lint_output()),
        call("a", f"sed -n 1,20p {HANDLER} src/pkg/mod7.py"),
        tool("a", "class Refund: ..."),
        *filler_steps(8),
    ]
    log = log_of([*msgs, call("b", "sed -n 1,9p src/pkg/mod8.py"), tool("b", "import os")])
    budget = 2400

    def payload(history: list[LoggedMessage], stored: Layout | None) -> tuple[Any, Layout]:
        row = cast(
            SessionRow,
            SimpleNamespace(generation=0, last_compaction_seq=0, last_seq=history[-1].seq),
        )
        layout = stored if stored is not None else Layout.untrimmed(row)
        stable = StableStrategy(get_strategy("key_messages"), layout, row, budget, 0.7)
        request = AssemblyRequest(
            history=history,
            counter=COUNTER,
            budget=budget,
            session_id="s",
            strategy=stable,
            history_from_seq=1,
        )
        result = assemble(request)
        check(request, result)
        return result, stable.current

    first, layout = payload(log[: len(msgs)], None)
    lint_seq = 5
    assert (log[lint_seq - 1].seq, log[lint_seq - 1].role) == (lint_seq, "tool")
    kept = {seqs: Form(form) for seqs, form, _ in layout.kept}
    assert kept.get((4, 5)) is Form.LINES and (2, 3) not in kept, layout.kept
    cut = str(sent_of(first, "lint")["content"])
    assert HANDLER in cut and "src/pkg/mod7.py:7:1" not in cut
    # The next call's window: the layout's units and every message after its trim (the
    # dropped step before the linter is no longer read).
    window = [m for m in log if m.seq in layout.kept_seqs() or m.seq > layout.through_seq]
    second, replayed = payload(window, layout)
    assert replayed == layout  # no trim: the same layout, replayed
    assert list(second.messages[: len(first.messages)]) == list(first.messages)
    assert len(second.messages) > len(first.messages)


def test_a_layout_keeps_the_identifiers_of_its_cuts_through_its_json() -> None:
    layout = Layout(0, 0, 9, (((4, 5), int(Form.LINES), "referenced"),), (), ((5, ("a.py",)),))
    again = Layout.of_json(0, 0, 9, layout.entries())
    assert again == layout and again.id == layout.id
    # A layout stored before the cuts were recorded reads as one without them.
    assert Layout.of_json(0, 0, 9, [[[4, 5], int(Form.LINES), "referenced"]]).lines == ()


def edit_call(call_id: str, path: str, old: str, new: str, todos: list[Any]) -> dict[str, Any]:
    """A coding agent's step: an edit whose two sides are long, and a to-do list."""
    return {
        "role": "assistant",
        "content": "Editing the handler.",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": "Edit",
                    "arguments": json.dumps(
                        {"file_path": path, "old_string": old, "new_string": new}
                    ),
                },
            },
            {
                "id": f"{call_id}-todo",
                "type": "function",
                "function": {"name": "TodoWrite", "arguments": json.dumps({"todos": todos})},
            },
        ],
    }


def test_a_masked_step_cuts_its_long_arguments_and_keeps_its_short_ones() -> None:
    old = "".join(f"    amount_{i} = refund.amount * {i}\n" for i in range(60))
    new = old.replace("refund.amount", "refund.amount_cents")
    todos = [
        {"id": str(i), "content": f"Port module number {i} to the new API", "status": "pending"}
        for i in range(12)
    ]
    msgs = [
        user("Port the refunds to cents."),
        edit_call("e", HANDLER, old, new, todos),
        tool("e", f"The file {HANDLER} has been updated."),
        tool("e-todo", "Todos have been modified successfully."),
    ]
    msgs += filler_steps(6)
    history = log_of(msgs)
    result = run(history, 3_000)
    sent = next(m for m in result.messages if m.get("tool_calls"))
    assert rule_of(result, 2)[0] == "cut"  # the step is masked, its calls kept
    edit, todo = sent["tool_calls"]
    assert (edit["id"], edit["function"]["name"]) == ("e", "Edit")
    assert (todo["id"], todo["function"]["name"]) == ("e-todo", "TodoWrite")
    args = json.loads(edit["function"]["arguments"])  # still a JSON object, same keys
    assert list(args) == ["file_path", "old_string", "new_string"]
    assert args["file_path"] == HANDLER  # a short value is what the call did: whole
    # The two long sides share what one long value would keep.
    half = CALL_VALUE_CHARS // 2
    for key, whole in (("old_string", old), ("new_string", new)):
        assert args[key].startswith(whole[:half]) and not args[key].startswith(whole[: half + 1])
        assert f"[{len(whole)} chars; full call: GET /sessions/s/messages/2]" in args[key]
    # A long list keeps its first items (whole objects), then says how many are left.
    listed = json.loads(todo["function"]["arguments"])["todos"]
    assert listed[0] == todos[0]
    assert listed[-1] == (
        f"… [{len(todos) - len(listed) + 1} more of {len(todos)}; "
        "full call: GET /sessions/s/messages/2]"
    )
    # The masked step costs a fraction of the step sent whole.
    groups, _ = split_groups(history)
    view = HistoryView.build(groups, Limits.from_preview_limit("s", 1024), COUNTER, Caches())
    step = view.units[1]
    assert step.cost(Form.COMPACT) * 4 < step.cost(Form.FULL)


def test_a_long_command_keeps_its_share_and_a_value_just_over_is_not_cut_longer() -> None:
    path = message_path("s", 2)
    command = "cd /repo && " + " && ".join(f"python -m pytest tests/test_{i}.py" for i in range(30))
    alone = json.loads(
        _cut_call(call("c", command)["tool_calls"][0], path)["function"]["arguments"]
    )
    # A call's only long value keeps the whole allowance: a command names what it ran.
    assert alone["command"].startswith(command[:CALL_VALUE_CHARS])
    assert not alone["command"].startswith(command[: CALL_VALUE_CHARS + 1])
    chars = CALL_VALUE_CHARS // 2
    short_over = "x" * (chars + 10)  # its note would make it longer
    assert _cut_values(short_over, path, chars) == short_over
    small_list = [{"id": "1", "content": "y" * (chars - 30)}]  # one item, nothing cut
    assert _cut_values(small_list, path, chars) == small_list
    long_text = "z" * (10 * chars)
    cut = _cut_values({"a": long_text, "n": 3, "flag": True}, path, chars)
    assert cut["n"] == 3 and cut["flag"] is True and len(cut["a"]) < len(long_text)
