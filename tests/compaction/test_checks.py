from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.compaction import signals
from app.compaction.checks import (
    constraints_to_keep,
    conversation_language,
    identifiers_to_keep,
    is_visible,
    language_matches,
    message_texts,
    missing_anchors,
    missing_identifiers,
)
from app.compaction.signals import extract_identifiers, truncate_utf8
from app.core.tokens import get_counter
from tests.support.compaction_builders import call, dataset_sessions, log_of
from tests.support.identifiers import whole_text_identifiers

TOKENS = get_counter("gpt-4o")


def test_anchor_match_ignores_case_width_and_whitespace() -> None:
    texts = ["System: be kind.", "Summary:\n- The  deploy   TARGET is\n eu-west-1."]
    assert missing_anchors(["The deploy target is eu-west-1"], texts) == []
    assert missing_anchors(["ＡＰＩ key"], ["never print the api KEY"]) == []
    assert missing_anchors(["The deploy target is us-east-2"], texts) == [
        "The deploy target is us-east-2"
    ]
    assert missing_anchors(["", "  "], []) == []


def test_long_anchor_fuzzy_fallback_requires_80_percent_in_one_passage() -> None:
    anchor = "Always run the full integration suite against staging before tagging a release"
    reflowed = "Before tagging any release, always run the full integration suite against staging."
    assert is_visible(anchor, ["intro text " * 50 + reflowed + " outro" * 50])
    scattered = " ".join(["always run"] + ["filler"] * 200 + ["integration suite staging release"])
    assert not is_visible(anchor, [scattered])
    assert not is_visible("short anchor text", ["anchor short text"])  # short: exact only


def test_cjk_anchors() -> None:
    anchor = "所有的数据库迁移必须在周五之前完成并通知运维团队"
    assert is_visible(anchor, ["摘要：所有的数据库迁移 必须在周五之前完成并通知运维团队。"])
    reworded = "运维团队要被通知，所有的数据库迁移必须在周五之前完成"
    assert is_visible(anchor, [reworded])
    assert not is_visible(anchor, ["数据库很好，周末见"])


def test_identifiers_are_extracted() -> None:
    text = (
        "Edit app/compaction/engine.py (see https://example.com/x?y=1), commit 3f2a9c1d, "
        "ticket ABC-123, version v1.2.3, port 8080, took 250 ms, class ChatModelClient, "
        'field max_tokens, run `make test`, the "blue-green" rollout, phone 010-69771665'
    )
    ids = extract_identifiers(text)
    for expected in [
        "app/compaction/engine.py",
        "https://example.com/x?y=1",
        "3f2a9c1d",
        "ABC-123",
        "v1.2.3",
        "8080",
        "250 ms",
        "ChatModelClient",
        "max_tokens",
        "make test",
        "blue-green",
        "010-69771665",
    ]:
        assert expected in ids, expected
    assert "engine.py" not in ids  # contained in its path
    assert extract_identifiers("门票35元，游玩12小时，去“居庸关长城”") == [
        "35元",
        "12小时",
        "居庸关长城",
    ]


def test_an_id_of_dashed_parts_is_kept_whole() -> None:
    # The tail of one (`ID-770`, `123`) is no help to the step that reuses the whole.
    text = "found RUN-ID-770, ORD-2024-00017 and build-abc-123; a state-of-the-art fix"
    assert extract_identifiers(text) == ["RUN-ID-770", "ORD-2024-00017", "build-abc-123"]


def test_json_structure_is_not_an_identifier_and_its_values_are() -> None:
    # A closing quote taken for an opening one paired `"a": {"` into `: {` and hid the
    # next value; tool results and arguments are JSON, so this was most of them.
    text = (
        '{"name": "Project Phoenix", "a": {"b": [1, 2]}, "flights": [{"origin": "JFK", '
        '"flight_number": "HAT170"}], "status": "ok!", "tags": ["blue", "green"], "n": 3}'
    )
    ids = extract_identifiers(text)
    for fragment in (": {", ": [", "}]", ": [{", ": [1, 2]}", ","):
        assert fragment not in ids, fragment
    assert all(any(c.isalnum() for c in i) for i in ids), ids
    for value in ("Project Phoenix", "JFK", "HAT170", "flight_number", "blue", "green"):
        assert value in ids, value
    assert "origin" not in ids and "name" not in ids  # keys are not names
    assert extract_identifiers('the "--" flag and `->` and "..." and "…"') == []
    assert extract_identifiers('said "hello!", then "world"') == ["hello!", "world"]


def test_identifiers_to_keep_are_those_mentioned_again_later() -> None:
    range_texts = ["Look at src/db.py and src/api.py; the id is 7f3e2a91c."]
    later = ["Now fix the bug in src/db.py"]
    keep = identifiers_to_keep(range_texts, later)
    assert keep == ["src/db.py"]
    assert missing_identifiers(keep, "Summary mentions SRC/DB.PY") == []
    assert missing_identifiers(keep, "Summary without it") == ["src/db.py"]


def test_message_texts_include_tool_calls_and_skip_hidden_messages() -> None:
    log = log_of(
        [
            {"role": "assistant", "content": None, "tool_calls": [call("c", "grep", {"q": "x"})]},
            {"role": "system", "content": "old system prompt"},
        ]
    )
    assert message_texts(log) == ['grep({"q": "x"})']


def test_language_detection_and_matching() -> None:
    assert conversation_language(["我想去北京，请看 app/main.py 这个文件里的问题"]) == "zh"
    assert conversation_language(["Please look at the file", "ok"]) == "en"
    assert conversation_language(["これは日本語のテキストです"]) == "ja"
    assert conversation_language(["", "123"]) == "und"
    assert language_matches("用户想去北京旅游", "zh")
    assert not language_matches("The user wants to travel to Beijing", "zh")
    assert not language_matches("用户想去北京旅游三天", "en")
    assert language_matches("anything", "und")


def test_truncate_utf8_never_cuts_a_character() -> None:
    assert truncate_utf8("ab中文", 4) == "ab"
    assert truncate_utf8("abc", 10) == "abc"


def test_language_check_is_lenient_with_code_and_quoted_names() -> None:
    assert language_matches(
        "修改了 app/compaction/engine.py 中的 summarise 函数和 max_tokens", "zh"
    )
    assert language_matches("The user wants to visit 北京 and 上海 next week", "en")
    assert not language_matches("", "zh")


def test_constraints_to_keep_fit_their_share_of_a_small_window_newest_first() -> None:
    # A small window and a long run of "must" sentences: every one of them in the
    # summary would not fit the window the summary is for (it was then left out of
    # the payload whole). Under `max_tokens` the newest stay, in log order.
    words = TOKENS.count_text
    log = log_of(
        [{"role": "user", "content": f"job-{i:02d}: the build must stay green."} for i in range(40)]
    )
    every = constraints_to_keep(log)
    assert len(every) == 40
    budget = 250
    kept = constraints_to_keep(log, max_tokens=budget, counter=TOKENS)
    assert 0 < len(kept) < 40
    assert kept == every[-len(kept) :]
    assert sum(words(k) for k in kept) <= budget
    assert sum(words(k) for k in every[-len(kept) - 1 :]) > budget


EDGES = [
    "build ٣٤٥ms and ab12cd٣4ef",  # Unicode digits match \d
    "ÉTAT du service ÀB-12",  # upper case outside ASCII only
    "SHOUTING WITHOUT DIGITS",
    "see https://x.io/a_b/c.py, v1.2.3 at $1,200 or ¥30 or 12,500 (PROJ-42)",
    "「部署名」用了 3 小时 and 《手册》 and “quoted name” and `code span`",
    '{"path": "src/a.py", "note": "a quoted value"}',
    "550e8400-e29b-41d4-a716-446655440000 at 2026-11-23 call +1-555-0100",
    "",
    "plain lower case words only",
    # Needles at the ends of lines, and units whose space is a line break: the pattern
    # runs over whole lines only, and those must include the next one.
    "took 5ms, then 7\nms and 9\n% and 10\n\nms and 3\r\nms",
    "took 5ms, then 7\nms",  # the next line holds no needle of its own
    "src/a.py\0 and a.py and snake_\0case",
    "abcdef1 1abcdef 1234567a a1234567 1234567 abcdefa deadbeef00",  # hex runs
    # the separator of the containment test
    "/\nsrc/a.py\n/ and a/\nb and _\n_snake_case_\n, 1,200\n,300 and -\n12-34\nPROJ-\n7",
    "FooBar\nBazQux\n3f2a9c1d\n3f2a9c1\nv1.2\n.3 and 1.2.3\n٣٤٥\n٣٤",
]

# Pieces that open, close or cross what the patterns and their needles look for.
_PIECES = st.sampled_from(
    [
        *'\n \t\r-./_,:`"$%5٣aAfgZ',
        "ms",
        " ms",
        "min",
        "元",
        "小时",
        "12",
        "2026",
        "3f2a9c1d",
        "e29b",
        "src",
        "a.py",
        "v1",
        "Foo",
        "Bar",
        "PROJ",
        "1,200",
        "“x”",
        "「名」",
        "https://",
        "~/",
        "..",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40).map("".join))
def test_needles_find_every_match_the_whole_text_holds(text: str) -> None:
    assert signals.extract_identifiers(text) == whole_text_identifiers(text)


def test_the_gates_never_skip_a_pattern_that_would_match() -> None:
    texts = list(EDGES)
    for session in dataset_sessions():
        for m in session["messages"]:
            content = m.get("content")
            if isinstance(content, str):
                texts.append(content)
                texts.extend(signals.split_sentences(content))
            for tc in m.get("tool_calls") or []:
                texts.append(tc["function"]["arguments"])
    assert len(texts) > 10_000
    for text in texts:
        assert signals.extract_identifiers(text) == whole_text_identifiers(text), text[:200]
