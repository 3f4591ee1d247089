"""The support check of provenance (app/compaction/support.py): what holds an item."""

from __future__ import annotations

import pytest

from app.compaction.prompt import instruction_text
from app.compaction.provenance import CiteStats, Sources, split_cites
from app.compaction.signals import normalise
from app.compaction.support import Claim, Text, echo_of
from tests.support.compaction_builders import call, log_of


def _supported(item: str, *texts: str) -> bool:
    return Claim.of(item).supported([Text.of(t) for t in texts])


@pytest.mark.parametrize(
    ("item", "text", "held"),
    [
        ("10.0", "the value is 10 here", False),
        ("10.0", "the value is 10.0.", True),
        ("10", "version 1.10 and 10.5 and 110", False),
        ("10", "ran 10 times", True),
        ("10", "at 10:30, 1,10 and 10.5", False),
        ("2024", "booked on 2024-05-23", True),  # `-` parts numbers: a range, a date
        ("50元", "门票 20-50元", True),
        ("Budget cap is 4,200 EUR", "The budget cap is 4,200 EUR.", True),
        ("Budget cap is 4,200 EUR", "The budget cap is 200 EUR.", False),
        ("2024-05-23", "booked on 2024-05-23", True),
        ("Omar_rossi1241", "user id omar_rossi_1241", False),
        ("rossi_1241", "user id omar_rossi_1241", False),
        ("OMAR_ROSSI_1241", "user id omar_rossi_1241", True),  # case does not count
        ("v1.2", "released v1.2.3", False),
        ("app/calc.py", "cat ./app/calc.py", True),
        ("端口定为 8443", "并把 API 端口定为8443。", True),  # a CJK character is a boundary
        ("1, 2, 3, 4, 5, 6, 7", "1\n2\n3\n4\n5\n6\n7", False),  # a list held whole, or not
        ("user_name", "name: Liam", False),
        ("yes", "Yes, move it.", True),
        ("User: Yes, move it to May 24.", "Yes, move it to May 24.", True),
    ],
)
def test_identifiers_and_numbers_are_held_with_their_token_boundaries(
    item: str, text: str, held: bool
) -> None:
    assert _supported(item, text) is held


def test_enough_words_hold_a_reworded_item_in_either_language() -> None:
    said = "Hi! I need to change my flight from Houston to Seattle."
    assert _supported("The user wants to change the flight from Houston to Seattle", said)
    assert not _supported("The deployment to production succeeded on the first try", said)
    zh = "修复 app/calc.py 里失败的测试。不要修改 migrations 目录。"
    assert _supported("用户要求不要修改迁移目录", zh)  # reworded: 40% of its pairs held
    assert not _supported("部署到生产环境一次就成功了", zh)
    # The numbers are held and the words are not: invented around real numbers.
    assert not _supported("Flight HAT190 was cancelled because of the storm", "HAT190 on time")


def test_echoes_of_the_instructions() -> None:
    instructions = normalise(instruction_text())
    for echo in ("the order of events, one short line each", "user_prefs", "timeline",
                 "Keep every constraint, identifier, file path exactly as written"):  # fmt: skip
        assert echo_of(echo, instructions), echo
    for item in ("Fixed the failing test in app/calc.py", "The user wants the summary in Chinese",
                 "用户要求不要修改迁移目录"):  # fmt: skip
        assert not echo_of(item, instructions), item


def _sources() -> Sources:
    log = log_of(
        [
            {"role": "user", "content": "My user id is omar_rossi_1241. Check the order."},
            {"role": "assistant", "content": None,
             "tool_calls": [call("a", "get_order", {"order_id": "W123"})]},
            {"role": "tool", "tool_call_id": "a", "content": "status: shipped, 10 items"},
            {"role": "assistant", "content": "Order W123 for omar_rossi_1241 has shipped."},
        ]
    )  # fmt: skip
    previous = ["The user prefers email updates [#1]", "Old note without a citation"]
    return Sources.of(
        log, previous, own=["Always answer politely."], instructions=instruction_text()
    )


def test_a_citation_is_completed_from_the_range_and_the_drop_is_recorded() -> None:
    src = _sources()
    stats = CiteStats()
    # Cites the user's message, which holds the id; the order's code is in the call (2),
    # the count of items in its result (3).
    fixed = src.check("omar_rossi_1241's order W123: 10 items shipped [#1]", stats)
    assert fixed is not None and split_cites(fixed)[1] == ((1, 3),)
    assert src.check("Order W123 has 10.0 items [#3]", stats) is None
    assert src.check("the order of events, one short line each [#4]", stats) is None
    assert src.check("Omar_rossi1241 [#1]", stats) is None
    # The previous summary's item, restated: its citation, from below the range.
    assert src.check("The user prefers email updates", stats) == (
        "The user prefers email updates [#1]"
    )
    # The session's own words: kept, uncited.
    assert src.check("Always answer politely", stats) == "Always answer politely"
    assert stats.to_dict() | {"dropped_items": None} == {
        "kept": 1, "corrected": 2, "dropped": 3, "unsupported": 2, "echo": 1,
        "dropped_items": None,
    }  # fmt: skip
    assert [(d["text"], d["reason"], d.get("missing")) for d in stats.items] == [
        ("Order W123 has 10.0 items", "unsupported", ["10.0"]),
        ("the order of events, one short line each", "echo", None),
        ("Omar_rossi1241", "unsupported", ["omar_rossi1241"]),
    ]


# What SmolLM2-135M answered and contextd stored as summary items before this check
# (docs/compaction-model.md: the bench's 22 traces, chunks of ~700 tokens), each checked
# again against the chunks the bench had compacted by then: (trace, k, item, kept).
SMOLLM2_STORED = [
    *(("mini-swe-agent:gemini-3-pro:pydata__xarr", 3, n, False)
      for n in ("10.0", "11.0", "14.0", "16.0", "17.0", "19.0", "20.0")),
    ("openhands:multi-swe-bench:ponylang__pony", 3, "10.0", False),
    ("openhands:multi-swe-bench:ponylang__pony", 3,
     "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17", False),
    ("mini-swe-agent:gemini-3-pro:astropy__ast", 2, "the order of events, one short line each",
     False),
    ("mini-swe-agent:gemini-3-pro:astropy__ast", 3, "The order of events, one short line each",
     False),
    ("tau-bench:gpt-4o-airline:task4:trial2", 1, "user_name", False),
    ("tau-bench:gpt-4o-airline:task4:trial2", 1, "Omar_rossi1241", False),  # omar_rossi_1241
    ("tau-bench:gpt-4o-airline:task4:trial2", 1, "user_prefs", False),
    ("tau-bench:gpt-4o-airline:task17:trial1", 1, "May 23, 2024", False),
    ("tau-bench:gpt-4o-airline:task17:trial1", 1, "To May 24, 2024", False),
    # The dialogue's own words and numbers, reworded (garbled, even): supported, kept. The
    # check is of where an item's words and numbers come from, not of what it means.
    ("tau-bench:gpt-4o-airline:task17:trial1", 1, "Change your flight", True),
    ("tau-bench:gpt-4o-airline:task17:trial1", 1,
     "Change your flight to May 23, 2024, I'd like to move it to May 24, 2024", True),
    ("tau-bench:gpt-4o-airline:task17:trial1", 1,
     "To May 23, 2024, I'd like to move it to May 24, 2024", True),
    ("tau-bench:gpt-4o-airline:task17:trial1", 1, "I'm looking for a new flight. Can you "
     "please provide me with your user ID and reservation ID?", True),
    ("tau-bench:gpt-4o-airline:task17:trial1", 2,
     "Change your flight to May 24, 2024, I'd like to move it to May 24, 2024", True),
]  # fmt: skip


@pytest.mark.parametrize(("trace", "k", "item", "kept"), SMOLLM2_STORED)
def test_what_smollm2_invented_is_dropped_now(trace: str, k: int, item: str, kept: bool) -> None:
    from bench.model_bench import agent_sessions, chunks

    session = next(
        s
        for s in agent_sessions(100)
        if s["id"].startswith(trace) and chunks(s["messages"], 3, 700)
    )
    parts = chunks(session["messages"], 3, 700)
    log = log_of([m for part in parts[:k] for m in part if m["role"] != "system"])
    src = Sources.of(log, own=[session.get("system") or ""], instructions=instruction_text())
    stats = CiteStats()
    assert (src.check(item, stats) is not None) is kept, stats.items
