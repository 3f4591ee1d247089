"""bench/agent_loop.py measures what it says: its metrics on hand-made payloads, and one
small session through the app."""

from __future__ import annotations

import argparse
import io
import json
from typing import Any

from bench.agent_loop import (
    BASELINES,
    COUNTER,
    HALVES,
    NAIVE,
    PRIMING,
    TRIM_MESSAGES,
    Call,
    Case,
    Entry,
    History,
    Stream,
    Tally,
    Tokens,
    as_identifier,
    call_points,
    call_results,
    grounded,
    half_of,
    held_by_seq,
    identifiers,
    locate_misses,
    long_runs,
    measure,
    naive_window,
    needed,
    recent_tokens,
    repeats_of,
    run,
    shared,
    without_nul,
    write_misses,
)
from tests.support.planted import INSTRUCTIONS

SYSTEM = "You are a coding agent. Tools: open_file, run. Repository root: /repo."
FILLER = "lorem ipsum dolor sit amet " * 60


def _call(i: int, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }


def _result(i: int, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": text}


def _messages() -> list[dict[str, Any]]:
    """A short agent run: each step uses what the step before it returned."""
    return [
        {"role": "user", "content": "The order export fails for order 48213. Fix it."},
        _call(0, "run", command="grep -rn export_orders src"),
        _result(0, "src/shop/export.py:1088: def export_orders(batch_size=500):\n" + FILLER),
        _call(1, "open_file", path="src/shop/export.py", line=1088),
        _result(1, "export.py line 1088: raises KeyError 'HXDUBJ' for order 48213\n" + FILLER),
        INSTRUCTIONS[0].message(),
        {"role": "assistant", "content": "The key HXDUBJ is missing in src/shop/export.py."},
        {"role": "user", "content": "Then patch export_orders and run the tests."},
        _call(2, "run", command="pytest tests/test_export.py -k HXDUBJ"),
        _result(2, "1 passed in 0.31s\n" + FILLER),
        {"role": "assistant", "content": "Fixed: export_orders skips HXDUBJ; order 48213 exports."},
    ]


def _case(messages: list[dict[str, Any]] | None = None, system: str | None = SYSTEM) -> Case:
    msgs = messages if messages is not None else _messages()
    users = {i for i, m in enumerate(msgs) if m["role"] == "user"}
    planted = {i: INSTRUCTIONS[0] for i, m in enumerate(msgs) if m == INSTRUCTIONS[0].message()}
    case = Case("hand-made", system, msgs, planted, users, max(users))
    case.counts = [COUNTER.count_message(m) for m in msgs]
    return case


def test_identifiers_are_paths_names_codes_and_long_numbers() -> None:
    found = identifiers(
        "Open src/shop/export.py and setup.cfg, call os.path.join and export_orders, "
        "e.g. for HXDUBJ or W2378156, order 48213 costs 42 (3.14159)."
    )
    assert {
        "src/shop/export.py",
        "setup.cfg",
        "os.path.join",
        "export_orders",
        "HXDUBJ",
        "W2378156",
        "48213",
    } <= found
    assert not {"e.g", "42", "14159", "Open", "call"} & found


def test_the_next_step_needs_what_only_the_history_said() -> None:
    case = _case()
    history = History(case)
    # Before the call that opens the file: the path came from the grep output, and 1088.
    assert needed(history, 3, case.messages[3]) == ["1088", "src/shop/export.py"]
    # What the system prompt says is not counted ("/repo" is in it)...
    assert needed(history, 3, _call(9, "open_file", path="/repo")) == []
    # ...nor what the history has not said yet (HXDUBJ comes back at message 4).
    assert needed(history, 3, {"role": "assistant", "content": "Look up HXDUBJ."}) == []
    assert needed(history, 6, case.messages[6]) == ["HXDUBJ", "src/shop/export.py"]


def test_what_the_history_holds_only_inside_longer_tokens_it_did_not_tell() -> None:
    case = _case()
    case.messages[2] = {**case.messages[2], "content": "sed -n 1240,1260p src/shop/export.pyc"}
    history = History(case)
    step = {"role": "assistant", "content": "Now lines 240 to 260 of src/shop/export.py."}
    # `240` and `260` are inside `1240,1260p`, the path inside `export.pyc`.
    assert needed(history, 3, step) == []
    assert history.last_said("1240", 3) == 2 and history.last_said("240", 3) is None
    # A payload holding them only inside longer tokens does not ground them either.
    assert grounded(["240", "src/shop/export.py"], case.messages[:3]) == 0
    assert grounded(["1240", "1260p"], case.messages[:3]) == 2


def test_grounding_of_a_payload_without_the_file_the_next_step_opens_is_below_one() -> None:
    case = _case()
    ids = needed(History(case), 3, case.messages[3])
    whole = [{"role": "system", "content": SYSTEM}, *case.messages[:3]]
    assert grounded(ids, whole) == len(ids) == 2
    without = [{"role": "system", "content": SYSTEM}, case.messages[0], case.messages[1]]
    assert grounded(ids, without) == 0
    # A preview holding the head of the tool output still grounds the path.
    preview = {**case.messages[2], "content": case.messages[2]["content"][:60] + " [...]"}
    assert grounded(ids, [*without, preview]) == 2


def test_misses_name_the_message_that_said_it_and_how_it_was_sent() -> None:
    case = _case()
    history = History(case)
    ids = needed(history, 3, case.messages[3])
    call = Call(case, 3, 8_000, True, ids, 0)
    system = {"role": "system", "content": SYSTEM}
    preview = {**case.messages[2], "content": "[tool output preview: ...]"}
    out = io.StringIO()
    # seqs are 1-based: the tool output (index 2) sent as a preview, index 1 whole.
    got = {"kept_seqs": [1, 2, 3]}
    write_misses(out, ("off", "tuning", "agent traces", 8_000, "key_messages"), call, history,
                 [system, *case.messages[:2], preview], got)  # fmt: skip
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    # Both were said only by the grep output, which the payload sent as a preview.
    assert [(r["id"], r["at"], r["back"], r["role"], r["sent"]) for r in records] == [
        ("1088", 2, 1, "tool", "shrunk"),
        ("src/shop/export.py", 2, 1, "tool", "shrunk"),
    ]
    whole = io.StringIO()
    write_misses(whole, ("off", "tuning", "agent traces", 8_000, "key_messages"), call, history,
                 [system, *case.messages[:3]], got)  # fmt: skip
    assert whole.getvalue() == ""
    dropped = io.StringIO()
    write_misses(dropped, ("off", "tuning", "agent traces", 8_000, "key_messages"), call, history,
                 [system, case.messages[0]], {"kept_seqs": [1]})  # fmt: skip
    assert {json.loads(line)["sent"] for line in dropped.getvalue().splitlines()} == {"dropped"}


def test_recent_tokens_are_the_newest_contiguous_run_held() -> None:
    held = {0: 10, 1: 20, 2: 30, 4: 50}
    assert recent_tokens(5, held) == 50  # 3 is left out: the run stops there
    assert recent_tokens(3, held) == 60
    # The newest unit dropped: nothing recent, however much older work is held.
    assert recent_tokens(6, held) == 0
    assert recent_tokens(0, held) == 0


def test_the_naive_window_keeps_the_task_and_the_newest_whole_units() -> None:
    case = _case()
    upto = 10  # before the final answer
    budget = (
        COUNTER.count_messages([{"role": "system", "content": SYSTEM}])
        + case.counts[0]
        + sum(case.counts[7:10])
        + 5
    )
    out = naive_window(case, upto, budget)
    assert out.kept == [0, 7, 8, 9]  # the task, then user + the last tool group, whole
    assert out.input_tokens <= budget
    assert out.payload[0] == {"role": "system", "content": SYSTEM}
    assert out.payload[1:] == [case.messages[i] for i in out.kept]
    # A tool group too large for the room left goes whole, and older units are tried.
    tight = naive_window(case, upto, budget - case.counts[9])
    assert 8 not in tight.kept and 9 not in tight.kept and 7 in tight.kept


def test_measure_compares_consecutive_payloads_and_counts_the_trimming_calls() -> None:
    case = _case()
    t = Tally()
    stream = Stream()
    upto = 10
    first = naive_window(case, 8, 100_000)
    ids = needed(History(case), upto, case.messages[upto])
    for payload, trimming in (
        (first.payload, False),
        (naive_window(case, upto, 100_000).payload, True),
    ):
        counts = [COUNTER.count_message(m) for m in payload]
        held = {i: case.counts[i] for i in range(len(payload) - 1)}
        measure(t, Call(case, upto, 100_000, trimming, ids, 7), payload, counts, held, stream)
    assert t.calls == 2 and t.trim_calls == 1
    assert t.trim_stable == sum(COUNTER.count_message(m) for m in first.payload)
    assert t.ids_needed == len(ids) > 0 and t.ids_held == len(ids)
    assert t.instructions == t.instructions_kept == 1
    assert t.latest_user == t.with_user == 2 and t.violations == 0
    assert t.recent == sum(case.counts[:upto])
    assert t.trim_input == sum(COUNTER.count_message(m) for m in stream.payload or []) + PRIMING


def test_the_input_not_served_from_the_prefix_is_split_by_why() -> None:
    case = _case()
    user, step, other = (
        {"role": "user", "content": "Fix the parser."},
        {"role": "assistant", "content": "Reading src/parser.py now."},
        {"role": "assistant", "content": "Summary: the parser was fixed."},
    )
    t, stream = Tally(), Stream()
    call = Call(case, 10, 100_000, True, [], None)
    # Grown (appended only), then changed after the head (a trim), then a new summary.
    for payload, new_summary in (
        ([user], False),
        ([user, step], False),
        ([user, other, step], False),
        ([other, step], True),
    ):
        counts = [COUNTER.count_message(m) for m in payload]
        measure(t, call, payload, counts, {}, stream, None, new_summary)
    n = {id(m): COUNTER.count_message(m) for m in (user, step, other)}
    assert t.resent_grown == n[id(user)] + PRIMING + n[id(step)] + PRIMING
    assert t.resent_trim == n[id(other)] + n[id(step)] + PRIMING
    assert t.resent_summary == n[id(other)] + n[id(step)] + PRIMING
    assert t.resent_grown + t.resent_trim + t.resent_summary == t.trim_input - t.trim_stable


def test_shared_counts_the_leading_messages_and_names_the_first_that_differs() -> None:
    a, b, c = ({"role": "user", "content": x} for x in "abc")
    assert shared(None, [a], [3]) == (0, None)  # the first payload of a stream
    assert shared([a, b], [a, b, c], [3, 4, 5]) == (7, None)  # it only grew
    assert shared([a, b], [a, c], [3, 5]) == (3, 1)
    assert shared([a, b, c], [a, b], [3, 4]) == (7, 2)  # its third message left


def test_held_by_seq_refuses_a_payload_that_does_not_line_up() -> None:
    case = _case()
    tokens = Tokens()
    got = {
        "kept_seqs": [1, 3],
        "messages": [{"role": "system", "content": SYSTEM}, case.messages[0], case.messages[2]],
    }
    assert held_by_seq(case, got, tokens) == {
        0: COUNTER.count_message(case.messages[0]),
        2: COUNTER.count_message(case.messages[2]),
    }
    bad = {"kept_seqs": [1, 2], "messages": [case.messages[0], case.messages[2]]}
    try:
        held_by_seq(case, bad, tokens)
    except RuntimeError as e:
        assert "seq 2" in str(e)
    else:
        raise AssertionError("a misaligned payload was accepted")


def test_halves_split_by_a_hash_of_the_id_and_long_runs_take_both() -> None:
    ids = [f"session-{n}" for n in range(40)]
    halves = [half_of(i) for i in ids]
    assert set(halves) == set(HALVES) and halves == [half_of(i) for i in ids]  # deterministic
    assert Entry(_case(), "agent traces").half == half_of("hand-made")

    def run_of(n: int) -> dict[str, Any]:
        return {"id": ids[n], "messages": _messages(), "meta": {"kind": "agent", "lang": "en"}}

    sessions = [run_of(n) for n in range(6)]
    two = long_runs(sessions, 2, 0)
    assert {half_of(r["id"]) for r in two} == set(HALVES)  # a sample holds both halves
    assert len(long_runs(sessions, 99, 0)) == 6
    # Cut before the first assistant message past the token limit: tool groups stay whole.
    limit = sum(_case().counts[:4])
    cut = long_runs(sessions, 1, limit)[0]["messages"]
    whole = _messages()
    assert cut == whole[: len(cut)] and len(cut) < len(whole)
    assert whole[len(cut)]["role"] == "assistant"  # the first model call past the limit
    assert sum(COUNTER.count_message(m) for m in whole[: len(cut) + 1]) > limit
    last_call = max(i for i, m in enumerate(cut) if m["role"] == "assistant")
    assert sum(COUNTER.count_message(m) for m in cut[: last_call + 1]) <= limit


def test_nul_characters_are_replaced_where_the_log_would_refuse_them() -> None:
    session = {"id": "x", "messages": [{"role": "tool", "content": "a\x00b", "n": [1, "\x00"]}]}
    assert without_nul(session) == {
        "id": "x",
        "messages": [{"role": "tool", "content": "a\ufffdb", "n": [1, "\ufffd"]}],
    }


def test_a_repeated_call_is_a_re_read_unless_an_earlier_result_is_held_whole() -> None:
    messages = _messages()
    again = _call(7, "open_file", line=1088, path="src/shop/export.py")  # keys reordered
    case = _case([*messages[:5], again, _result(7, "the same file again")])
    results = call_results(case.messages)
    assert repeats_of(results, 5, again) == [[4]]  # the open_file of index 3 answered at 4
    assert repeats_of(results, 5, _call(8, "open_file", path="README.md")) == []
    call = Call(case, 5, 100_000, False, [], 0, repeats_of(results, 5, again))
    payload = [{"role": "system", "content": SYSTEM}, *case.messages[:5]]
    counts = [COUNTER.count_message(m) for m in payload]
    held = {i: case.counts[i] for i in range(5)}
    t = Tally()
    measure(t, call, payload, counts, held, Stream(), {0, 1, 2, 3, 4})
    assert (t.repeats, t.rereads) == (1, 0)
    measure(t, call, payload, counts, held, Stream(), {0, 1, 2, 3})  # index 4 as a preview
    assert (t.repeats, t.rereads) == (2, 1)


def test_misses_are_counted_where_the_history_last_said_them() -> None:
    case = _case()
    history = History(case)
    ids = needed(history, 3, case.messages[3])
    assert history.last_said("src/shop/export.py", 3) == 2
    assert history.last_said("src/shop/export.py", 7) == 6
    assert history.last_said("nowhere", 7) is None
    call = Call(case, 3, 8_000, True, ids, 0)
    system = {"role": "system", "content": SYSTEM}
    preview = {**case.messages[2], "content": "[tool output preview: ...]"}
    t = Tally()
    held = {0: 1, 1: 1, 2: 1}
    assert locate_misses(t, call, history, [system, *case.messages[:2], preview], held) == ids
    assert (t.missed_masked, t.missed_left_out) == (2, 0)
    assert locate_misses(t, call, history, [system, case.messages[0]], {0: 1}) == ids
    assert (t.missed_masked, t.missed_left_out) == (2, 2)
    assert locate_misses(t, call, history, [system, *case.messages[:3]], held) == []


async def test_one_session_through_the_app(database_url: str) -> None:
    case = _case()
    args = argparse.Namespace(
        budgets=[600],
        long_budgets=[],
        dialogue_budgets=[],
        strategies=["key_messages", "sliding_window"],
        compaction=["off", "on"],
        misses=io.StringIO(),
        calls=io.StringIO(),
    )
    totals = await run(args, database_url, [Entry(case, "agent traces", "tuning")])
    calls = len(call_points(case.messages))
    for mode in ("off", "on"):
        for strategy in args.strategies:
            t = totals.tallies[(mode, "tuning", "agent traces", 600, strategy)]
            assert t.calls == calls and t.trim_calls > 0
            assert t.latest_user == t.with_user == calls
            assert t.violations == 0 and t.over_budget == 0
            assert t.ids_needed > 0 and 0 < t.ids_held <= t.ids_needed
            assert 0 < t.recent <= t.budget
            missed = t.ids_needed - t.ids_held
            assert t.missed_masked + t.missed_left_out == missed
            # The search endpoint finds what the payload missed (the words are in the log).
            assert 0 < t.ids_recalled <= missed
    # With auto-compaction on, the extractive summariser ran (every strategy reads one session).
    assert totals.compactions >= 1
    for method in BASELINES:
        assert totals.tallies[("-", "tuning", "agent traces", 600, method)].calls == calls
    assert {TRIM_MESSAGES, NAIVE} == set(BASELINES)
    # One line per identifier a contextd payload lacked, each from a message not sent whole.
    misses = [json.loads(line) for line in args.misses.getvalue().splitlines()]
    lacked = sum(t.ids_needed - t.ids_held for k, t in totals.tallies.items() if k[0] != "-")
    assert len(misses) == lacked > 0
    assert {m["sent"] for m in misses} <= {"shrunk", "dropped"}
    # One line per contextd payload, adding up to the tallies; a summary a compaction
    # stored changes the payload where it stands, right after the system prompt.
    lines = [json.loads(line) for line in args.calls.getvalue().splitlines()]
    for (mode, _, _, _, method), t in totals.tallies.items():
        mine = [x for x in lines if (x["mode"], x["strategy"]) == (mode, method)]
        assert len(mine) == (t.calls if mode != "-" else 0)
        if mine:
            assert sum(x["stable"] for x in mine) == t.stable_tokens
            assert sum(x["input"] for x in mine) == t.input_tokens
    changed = [x for x in lines if x["summary_changed"]]
    assert changed and {x["mode"] for x in changed} == {"on"}
    assert all(x["summary_tokens"] > 0 and x["first_changed"] == 1 for x in changed)


def test_an_identifier_inside_a_longer_token_is_not_held_as_one() -> None:
    # The search finds identifiers on part edges only; the bench reports apart the
    # misses the log holds only inside longer tokens.
    assert not as_identifier("240", "sed -n '1240,1260p' f.py")
    assert not as_identifier("621", "a.py:2:19: W0621: Redefining")
    assert not as_identifier("x/s", "/Users/me/sandbox/sunpy")
    assert as_identifier("os.makedirs", '{"command": "import os\\n\\nos.makedirs(\\".a\\")"}')
    assert as_identifier("special_handler.py", "src/app/special_handler.py:12:4")
    assert as_identifier("getItem", "window.localStorage.getItem(")


def test_a_chinese_case_needs_the_names_the_history_said() -> None:
    case = _case(
        [
            {"role": "user", "content": "帮我找一家北京的酒店，要有免费WiFi。"},
            {"role": "assistant", "content": "好的，我查一下。"},
            {"role": "tool", "content": "结果：北京国际饭店，地址建国门内大街九号；王府井大酒店。"},
            {"role": "assistant", "content": "推荐北京国际饭店，它在建国门内大街九号。"},
        ],
        system="你是一个旅行助手。",
    )
    history = History(case)
    reply = case.messages[3]
    # The longest piece of each run the history said: the hotel and its street.
    assert needed(history, 3, reply, chinese=True) == ["北京国际饭店", "建国门内大街九号"]
    assert needed(history, 3, reply) == []  # an English case: identifiers only
    # Before the tool said them, nothing: "北京" alone is under four characters.
    assert needed(history, 1, reply, chinese=True) == []
    # Chinese has no edges inside a run: a name inside a longer one is found.
    assert as_identifier("国际饭店", "北京国际饭店地址")
