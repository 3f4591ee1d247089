"""The summary's `artifacts` section: what is read off a range, rolled, rendered (SPEC §5)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from app.compaction.artifacts import (
    HEADINGS_TOKENS,
    ITEM_OVERHEAD_TOKENS,
    call_artifacts,
    decode,
    range_artifacts,
    render_artifacts,
    roll_artifacts,
)
from app.compaction.engine import summarise
from app.compaction.outcome import SummaryOutcome
from app.compaction.provenance import cite, strip_cites
from app.compaction.shell_commands import outcome, shell_files
from app.compaction.summary import StructuredSummary, render_summary
from app.compaction.turns import CompactionPlan, plan_range
from app.core.conversation import LoggedMessage
from tests.support.compaction_builders import (
    COUNTER,
    EngineSettings,
    call,
    dataset_sessions,
    log_of,
)
from tests.support.fakellm import FakeLLM, Raw


def _kinds(items: tuple[str, ...] | list[str], kind: str) -> list[str]:
    return [a.text for a in map(decode, items) if a is not None and a.kind == kind]


# -- shell commands ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "command,expected",
    [
        ("cat app/main.py", [("read", "app/main.py")]),
        ("nl -ba xarray/core/merge.py | sed -n '820,845p'", [("read", "xarray/core/merge.py")]),
        ("grep -n 'def merge(' src/merge.py src/util.py", [("read", "src/merge.py"), ("read", "src/util.py")]),
        ("grep -rn pattern.py src/", [("read", "src/")]),  # the pattern is not a file
        ("sed -i 's/a/b/' lib/x.py", [("changed", "lib/x.py")]),
        ("echo hi >> notes.txt; python run.py 2>/dev/null", [("changed", "notes.txt")]),
        ("mv /w/game_2048.py /w/2048.py", [("changed", "/w/game_2048.py"), ("changed", "/w/2048.py")]),
        ("cp a/b.cfg c/d.cfg", [("read", "a/b.cfg"), ("changed", "c/d.cfg")]),
        ("rm -f build/out.o && touch done.flag", [("changed", "build/out.o"), ("changed", "done.flag")]),
        ("cd /repo && git checkout -- src/app.py", [("changed", "src/app.py")]),
        ("head -n 20 README.md", [("read", "README.md")]),
        ("ls -la", []),
        ("pytest tests/test_x.py -x", []),  # a program run, not a file read: the command says it
        ("sudo FOO=1 cat /etc/hosts", [("read", "/etc/hosts")]),
        ("cat 'unbalanced.py", [("read", "unbalanced.py")]),  # words rather than nothing
    ],
)  # fmt: skip
def test_file_operands_of_shell_commands(command: str, expected: list[tuple[str, str]]) -> None:
    assert shell_files(command) == expected


def test_here_document_bodies_are_content_not_operands() -> None:
    command = (
        "cat <<'EOF' > repro.py\nimport os\nprint(open('secret.txt').read())\nEOF\npython repro.py"
    )
    assert shell_files(command) == [("changed", "repro.py")]
    (ran,) = _kinds(
        [a.encode() for a in call_artifacts("bash", json.dumps({"command": command}), "")], "ran"
    )
    assert ran == "cat <<'EOF' > repro.py …(+4 lines)"  # the exact first line, the rest counted


# -- how a call ended --------------------------------------------------------------------


@pytest.mark.parametrize(
    "output,expected",
    [
        ("<returncode>0</returncode>\n<output>\nok\n</output>", "exit 0"),
        (
            "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n"
            '  File "x.py", line 3\nModuleNotFoundError: No module named \'yaml\'\n</output>',
            "exit 1 · ModuleNotFoundError: No module named 'yaml'",
        ),
        ("lots of output\n[Command finished with exit code 2]", "exit 2"),
        ("FAILED tests/test_a.py::test_b - assert 1 == 2\nExit code: 1", "exit 1 · FAILED tests/test_a.py::test_b - assert 1 == 2"),
        ("1023.0", "1023.0"),
        ("Wrong flag!\n(Open file: n/a)", "Wrong flag! …(+1 lines)"),
        ("ls: cannot access 'src/lib': No such file or directory", "ls: cannot access 'src/lib': No such file or directory"),
        ("", ""),
        ("x" * 500, ""),  # a long answer is left to the values section, not cut into a line
        # A long output: the code at its head, the error at its end, both found.
        ("<returncode>1</returncode>\n" + "noise\n" * 5000 + "ValueError: bad", "exit 1 · ValueError: bad"),
    ],
)  # fmt: skip
def test_outcome_is_the_exit_code_and_the_error_line_verbatim(output: str, expected: str) -> None:
    assert outcome(output) == expected


# -- tool calls in general ---------------------------------------------------------------


def _arts(name: str, args: dict[str, Any] | str, output: str | None = None) -> list[str]:
    raw = args if isinstance(args, str) else json.dumps(args)
    return [a.encode() for a in call_artifacts(name, raw, output)]


def test_editor_tools_read_or_change_by_their_action_not_their_name() -> None:
    assert _arts("str_replace_editor", {"command": "view", "path": "/w/a.py"}) == ["read: /w/a.py"]
    edit = {"command": "str_replace", "path": "/w/a.py", "old_str": "x", "new_str": "y"}
    assert _arts("str_replace_editor", edit) == ["changed: /w/a.py"]
    assert _arts("write_file", {"file_path": "docs/b.md", "content": "..."}) == [
        "changed: docs/b.md"
    ]
    assert _arts("readFile", {"targetFile": "src/c.ts"}) == ["read: src/c.ts"]
    assert _arts("open", {"path": "d.py"}) == ["read: d.py"]
    assert _arts("delete_file", {"paths": ["e.py", "f.py"]}) == ["changed: e.py", "changed: f.py"]
    # `file_text` is content, not a path.
    assert _arts("create", {"path": "g.py", "file_text": "a/b.py"}) == ["changed: g.py"]


def test_commands_are_found_by_argument_key_or_tool_name() -> None:
    out = "<returncode>0</returncode>"
    assert _arts("bash", {"command": "pwd"}, out) == ["ran: pwd → exit 0"]
    assert _arts("execute", {"cmd": "make test"}, out) == ["ran: make test → exit 0"]
    assert _arts("run_terminal_cmd", {"command": ["git", "status"]}, out) == [
        "ran: git status → exit 0"
    ]
    assert _arts("shell", "ls src", "a.py") == ["ran: ls src → a.py"]  # arguments not JSON


def test_other_calls_keep_their_arguments_and_short_answer() -> None:
    assert _arts("get_reservation_details", {"reservation_id": "4NQLHD"}) == [
        "ran: get_reservation_details(reservation_id=4NQLHD)"
    ]
    assert _arts("calculate", {"expression": "1023 - 62 - 500"}, "461.0") == [
        "ran: calculate(expression=1023 - 62 - 500) → 461.0"
    ]
    # `destination: SEA` names an airport, not a path: the call stays a call.
    assert _arts("search_flight", {"origin": "IAH", "destination": "SEA"}) == [
        "ran: search_flight(origin=IAH, destination=SEA)"
    ]


def test_long_commands_keep_an_exact_prefix() -> None:
    command = "echo " + "0110" * 100
    (item,) = _arts("bash", {"command": command})
    text = item.removeprefix("ran: ")
    assert len(text) <= 200 and text.endswith("…")
    assert command.startswith(text.removesuffix("…"))


# -- a range -----------------------------------------------------------------------------


def _agent_range() -> list[LoggedMessage]:
    return log_of(
        [
            {"role": "user", "content": "Change the flight of user liam_khan_2521."},
            {"role": "assistant", "content": None, "tool_calls": [call("c1", "get_user_details", {"user_id": "liam_khan_2521"})]},
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"reservations": ["4NQLHD", "KHIK97"], "zip": "10148"})},
            {"role": "assistant", "content": "Two reservations. Checking the first.\n```\n\"zip\": \"10148\"\n```"},
            {"role": "assistant", "content": None, "tool_calls": [call("c2", "get_reservation_details", {"reservation_id": "4NQLHD"})]},
            {"role": "tool", "tool_call_id": "c2", "content": json.dumps({"flights": ["HAT190"], "payment_id": "credit_card_7434610"})},
            {"role": "assistant", "content": None, "tool_calls": [call("c3", "bash", {"command": "cat conf/app.yaml"})]},
            {"role": "tool", "tool_call_id": "c3", "content": "<returncode>0</returncode>\nport: 8443"},
        ]
    )  # fmt: skip


def test_values_tools_returned_are_kept_when_reused_later() -> None:
    tail = log_of([{"role": "assistant", "content": "Paying with credit_card_7434610."}], start=9)
    items = range_artifacts(_agent_range(), tail)
    got = _kinds(items, "got")
    # 4NQLHD: returned by get_user_details, reused by the next call.
    assert "4NQLHD ← get_user_details" in got
    # Reused only by the preserved tail.
    assert "credit_card_7434610 ← get_reservation_details" in got
    # The agent's own argument, a value nobody reused, one only pasted back in a code block.
    texts = " ".join(got)
    assert "liam_khan_2521" not in texts and "KHIK97" not in texts and "10148" not in texts
    assert _kinds(items, "read") == ["conf/app.yaml"]
    assert _kinds(items, "ran") == [
        # A short answer is how the call ended, verbatim.
        'get_user_details(user_id=liam_khan_2521) → {"reservations": ["4NQLHD", "KHIK97"], '
        '"zip": "10148"}',
        'get_reservation_details(reservation_id=4NQLHD) → {"flights": ["HAT190"], '
        '"payment_id": "credit_card_7434610"}',
        "cat conf/app.yaml → exit 0",
    ]


def test_names_in_any_script_are_values_and_plain_words_are_not() -> None:
    items = range_artifacts(
        log_of(
            [
                {"role": "user", "content": "找一个景点。"},
                {"role": "assistant", "content": None, "tool_calls": [call("q", "query_db", {"domain": "景点"})]},
                {"role": "tool", "tool_call_id": "q", "content": '[{"名称": "云蒙山森林公园", "状态": "open", "来源": "Beijing"}]'},
                {"role": "assistant", "content": "推荐云蒙山森林公园，状态 open，在 Beijing。"},
            ]
        )
    )  # fmt: skip
    assert _kinds(items, "got") == ["云蒙山森林公园 ← query_db"]


def test_a_repeated_artifact_moves_to_its_latest_position_with_its_latest_outcome() -> None:
    items = range_artifacts(
        log_of(
            [
                {"role": "user", "content": "Fix it."},
                {"role": "assistant", "content": None, "tool_calls": [call("a", "bash", {"command": "pytest -x"})]},
                {"role": "tool", "tool_call_id": "a", "content": "1 failed\nexit code 1"},
                {"role": "assistant", "content": None, "tool_calls": [call("b", "bash", {"command": "cat a.py"})]},
                {"role": "tool", "tool_call_id": "b", "content": "exit code 0"},
                {"role": "assistant", "content": None, "tool_calls": [call("c", "bash", {"command": "pytest -x"})]},
                {"role": "tool", "tool_call_id": "c", "content": "1 passed\nexit code 0"},
            ]
        )
    )  # fmt: skip
    assert tuple(map(strip_cites, items)) == (
        "read: a.py",
        "ran: cat a.py → exit 0",
        "ran: pytest -x → exit 0",
    )
    # Each cites the call and its result; the repeated one its latest.
    assert items[-1].endswith(" [#6-7]") and items[0].endswith(" [#4-5]")


def test_tool_messages_left_out_of_context_give_nothing() -> None:
    log = _agent_range()
    hidden = [
        LoggedMessage(m.seq, m.id, m.role, m.body, m.token_count, include_in_context=False)
        for m in log
    ]
    assert range_artifacts(hidden) == ()


# -- rolling and the share ---------------------------------------------------------------


def _cost(items: tuple[str, ...]) -> int:
    return sum(
        COUNTER.count_text(cite(a.text, a.cites)) + ITEM_OVERHEAD_TOKENS
        for a in map(decode, items)
        if a
    )


def test_rolling_keeps_the_newest_that_fit_and_drops_the_oldest() -> None:
    previous = tuple(f"read: src/old_{i}.py" for i in range(30))
    new = tuple(f"ran: make step_{i} → exit 0" for i in range(30))
    everything, dropped = roll_artifacts(previous, new, max_tokens=10_000, counter=COUNTER)
    assert everything == previous + new and dropped == ()
    budget = HEADINGS_TOKENS + _cost(new) + 2 * _cost(previous[-1:])
    kept, dropped = roll_artifacts(previous, new, max_tokens=budget, counter=COUNTER)
    assert kept == previous[-2:] + new  # a newest run, nothing older skipped over
    assert dropped == previous[:-2]
    assert _cost(kept) + HEADINGS_TOKENS <= budget
    assert roll_artifacts(previous, new, max_tokens=0, counter=COUNTER)[0] == ()


def test_rolling_ignores_items_that_are_not_artifacts() -> None:
    kept, _ = roll_artifacts(
        ["junk", "read: ", "read: a.py"], ["ran: x"], max_tokens=500, counter=COUNTER
    )
    assert kept == ("read: a.py", "ran: x")


# -- rendering ---------------------------------------------------------------------------


def test_rendered_grouped_one_line_each_and_in_chinese() -> None:
    items = (
        "ran: pytest -x → exit 1 · E assert 2 == 3",
        "read: a.py",
        "changed: b.py",
        "got: 4NQLHD ← get_user",
    )
    en = render_artifacts(items, "en")
    assert en == [
        "Artifacts (exact strings, oldest first):",
        "Files changed:", "- b.py",
        "Files read:", "- a.py",
        "Commands and calls (→ how they ended):", "- pytest -x → exit 1 · E assert 2 == 3",
        "Values from tools (← which tool):", "- 4NQLHD ← get_user",
    ]  # fmt: skip
    zh = render_artifacts(items, "zh")
    assert (
        zh[0] == "操作记录（原文，按时间先后）：" and "- pytest -x → exit 1 · E assert 2 == 3" in zh
    )
    summary = StructuredSummary(facts=("事实",), artifacts=items)
    assert "\n".join(zh) in render_summary(summary, "zh")
    # Stored as JSON and read back.
    assert StructuredSummary.from_dict(summary.to_dict()).artifacts == items


# -- the engine: both paths, rolling -----------------------------------------------------


def _plan(log: list[LoggedMessage]) -> CompactionPlan:
    plan = plan_range(log, watermark=0, min_preserved_turns=1, keep_recent_tokens=300)
    assert isinstance(plan, CompactionPlan)
    return plan


def _coding_log(start: int, files: int, lang: str = "en") -> list[dict[str, Any]]:
    ask = "修复构建。" if lang == "zh" else "Fix the build."
    items: list[dict[str, Any]] = [{"role": "user", "content": ask}]
    for i in range(start, start + files):
        items += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    call(
                        f"v{i}",
                        "str_replace_editor",
                        {"command": "view", "path": f"src/mod_{i}.py"},
                    )
                ],
            },
            {
                "role": "tool",
                "tool_call_id": f"v{i}",
                "content": f"def handler_{i}():\n    return {i}\n" * 20,
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call(f"b{i}", "bash", {"command": f"pytest tests/test_{i}.py -q"})],
            },
            {
                "role": "tool",
                "tool_call_id": f"b{i}",
                "content": f"Traceback (most recent call last):\nAssertionError: got {i}\n[Command finished with exit code 1]",
            },
            {
                "role": "assistant",
                "content": ("继续看下一个模块。" if lang == "zh" else "Next module.") * 3,
            },
        ]
    return items


async def _outcome(
    llm: FakeLLM | None, plan: CompactionPlan, previous: StructuredSummary | None, **settings: Any
) -> SummaryOutcome:
    from app.compaction.model_client import ChatModelClient

    client = None
    if llm is not None:
        client = ChatModelClient(base_url=llm.base_url, model="fake", api_key="k", max_retries=0)
    try:
        out = await summarise(
            plan, previous, [], client=client, settings=EngineSettings(**settings), counter=COUNTER
        )
        assert out.metadata()["artifacts"] == len(out.summary.artifacts)
    finally:
        if client is not None:
            await client.aclose()
    assert "\n".join(render_artifacts(out.summary.artifacts, out.language)) in out.rendered_text
    return out


async def _summarise(
    llm: FakeLLM | None, plan: CompactionPlan, previous: StructuredSummary | None, **settings: Any
) -> StructuredSummary:
    return (await _outcome(llm, plan, previous, **settings)).summary


@pytest.mark.parametrize("path", ["model", "extractive"])
@pytest.mark.parametrize("lang", ["en", "zh"])
async def test_both_paths_carry_the_trail_and_roll_it(llm: FakeLLM, path: str, lang: str) -> None:
    model = llm if path == "model" else None
    first = _plan(log_of(_coding_log(0, 6, lang)))
    s1 = await _summarise(model, first, None)
    expected1 = range_artifacts(first.range_messages, first.preserved_messages)
    assert expected1 and s1.artifacts == expected1
    bare1 = tuple(map(strip_cites, s1.artifacts))
    assert "read: src/mod_0.py" in bare1
    assert "ran: pytest tests/test_0.py -q → exit 1 · AssertionError: got 0" in bare1
    # The next range rolls onto the first: previous trail first, then the new one.
    log = log_of([*_coding_log(0, 6, lang), *_coding_log(6, 6, lang)])
    second = plan_range(
        log, watermark=first.new_watermark, min_preserved_turns=1, keep_recent_tokens=300
    )
    assert isinstance(second, CompactionPlan)
    s2 = await _summarise(model, second, s1)
    expected2 = range_artifacts(second.range_messages, second.preserved_messages)
    assert tuple(map(strip_cites, s2.artifacts)) == tuple(
        dict.fromkeys(map(strip_cites, (*expected1, *expected2)))
    )
    # Over the share: the newest are kept, as a contiguous newest run.
    cut = await _outcome(model, second, s1, artifacts_ratio=0.002)
    small = cut.summary
    assert small.artifacts and len(small.artifacts) < len(s2.artifacts)
    assert cut.metadata()["artifacts_dropped"] == len(s2.artifacts) - len(small.artifacts)
    assert s2.artifacts[-len(small.artifacts) :] == small.artifacts
    off = await _summarise(model, second, s1, artifacts_ratio=0)
    assert off.artifacts == ()


async def test_a_models_own_artifacts_key_is_ignored(llm: FakeLLM) -> None:
    plan = _plan(log_of(_coding_log(0, 3)))
    answer = {"facts": ["Tests fail."], "artifacts": ["read: invented.py"], "timeline": ["x"]}
    llm.script(
        Raw(
            200,
            {
                "id": "c",
                "object": "chat.completion",
                "model": "fake",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": json.dumps(answer)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 10},
            },
        )
    )
    summary = await _summarise(llm, plan, None)
    assert "read: invented.py" not in summary.artifacts
    assert summary.artifacts == range_artifacts(plan.range_messages, plan.preserved_messages)


# -- the dataset's agent traces ----------------------------------------------------------


def test_dataset_agent_traces_give_a_trail_of_their_own_strings() -> None:
    seen_kinds: set[str] = set()
    for session in dataset_sessions():
        if session["meta"]["kind"] != "agent":
            continue
        log = log_of(session["messages"])
        items = range_artifacts(log)
        raw = json.dumps(session["messages"], ensure_ascii=False)
        for item in items:
            a = decode(item)
            assert a is not None and "\n" not in a.text and len(a.text) <= 2 * 200 + 10
            seen_kinds.add(a.kind)
            if a.kind in ("read", "changed"):
                # A file artifact is an exact string of the trace (JSON-escaped there).
                assert json.dumps(a.text, ensure_ascii=False)[1:-1] in raw, (session["id"], a)
    assert seen_kinds == {"read", "changed", "ran", "got"}


def test_a_value_returned_before_the_range_joins_the_trail_when_the_range_reuses_it() -> None:
    earlier = log_of(
        [
            {"role": "user", "content": "Book it."},
            {"role": "assistant", "content": None,
             "tool_calls": [call("u", "get_user_details", {"user_id": "daiki_lee_6987"})]},
            {"role": "tool", "tool_call_id": "u", "content": '{"last_four": "9734", "zip": "76173"}'},
        ]
    )  # fmt: skip
    later = log_of(
        [
            {"role": "assistant", "content": "You can pay with the card ending in 9734."},
            {"role": "user", "content": "Yes."},
        ],
        start=4,
    )
    assert range_artifacts(later) == ()
    # Cited where the tool returned it; the zip code nothing reuses is not a value of it.
    assert range_artifacts(later, (), earlier) == ("got: 9734 ← get_user_details [#3]",)
