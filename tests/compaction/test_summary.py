from __future__ import annotations

import json

import pytest

from app.compaction.summary import (
    StructuredSummary,
    SummaryRejected,
    merge_summaries,
    parse_summary_output,
    render_summary,
    summary_token_cap,
)

GOOD = {
    "facts": ["The repo is at /srv/app", "Port 8080"],
    "decisions": ["Use PostgreSQL"],
    "open_todos": [],
    "user_prefs": ["Never push to main"],
    "timeline": ["User asked for a plan", "Assistant proposed one"],
}


def test_plain_json_is_parsed() -> None:
    s = parse_summary_output(json.dumps(GOOD))
    assert s.facts == ("The repo is at /srv/app", "Port 8080")
    assert s.open_todos == ()
    assert s.pinned == () and s.carried_anchors == ()


@pytest.mark.parametrize(
    "text",
    [
        "```json\n" + json.dumps(GOOD) + "\n```",
        "Here is the summary:\n```\n" + json.dumps(GOOD, indent=2) + "\n```\nHope it helps.",
        "Sure! " + json.dumps(GOOD) + " Let me know.",
    ],
)
def test_fenced_or_prose_wrapped_json_is_tolerated(text: str) -> None:
    assert parse_summary_output(text).decisions == ("Use PostgreSQL",)


STALE = {"facts": ["STALE previous fact"], "timeline": ["old"]}


@pytest.mark.parametrize(
    "text",
    [
        # A reasoning model's thoughts left in the answer, quoting the previous summary.
        f"<think>The previous summary was {json.dumps(STALE)}; update it.</think>\n"
        + json.dumps(GOOD),
        # No think tags: the summary is the last object with a section, not the first.
        f"The previous summary was {json.dumps(STALE)}. The new one: " + json.dumps(GOOD),
        "The previous summary was {}, so here is a first one: " + json.dumps(GOOD),
    ],
)
def test_the_answer_is_the_last_summary_not_one_quoted_before_it(text: str) -> None:
    s = parse_summary_output(text)
    assert s.decisions == ("Use PostgreSQL",) and "STALE previous fact" not in s.facts


def test_characters_no_database_text_holds_are_cleaned() -> None:
    """NUL and lone surrogates in a model's answer made the store fail (and every later
    job of the session with it): they are dropped or replaced, the rest kept."""
    answer = json.dumps({"facts": ["a\u0000b", "half \ud800 pair"], "timeline": ["ok"]})
    s = parse_summary_output(answer)
    assert s.facts == ("ab", "half \ufffd pair")
    "".join(s.facts).encode("utf-8")  # storable: no lone surrogate left


def test_missing_or_null_sections_are_empty_and_numbers_become_text() -> None:
    s = parse_summary_output(json.dumps({"facts": ["a", 42], "decisions": None}))
    assert s.facts == ("a", "42") and s.decisions == ()


def test_what_a_small_model_gets_wrong_is_taken_where_it_is_valid() -> None:
    """Shapes a 135M model answers with: a section as one string, items as objects or
    lists, booleans and nulls among them, keys missing. What is text is kept."""
    answer = json.dumps({
        "facts": "The test tests/test_calc.py::test_add failed with exit code 1",
        "decisions": [{"what": "use PostgreSQL", "why": "JSONB", "ok": True}, None],
        "timeline": [["ran pytest", 3], False, "fixed app/calc.py"],
        "open_todos": {"next": "run the suite"},
    })  # fmt: skip
    s = parse_summary_output("Sure! Here you go:\n```json\n" + answer + "\n```\nDone.")
    assert s.facts == ("The test tests/test_calc.py::test_add failed with exit code 1",)
    assert s.decisions == ("what: use PostgreSQL; why: JSONB",)
    assert s.timeline == ("ran pytest", "3", "fixed app/calc.py")
    assert s.open_todos == ("next: run the suite",) and s.user_prefs == ()


def test_raw_newlines_in_a_string_do_not_lose_the_answer() -> None:
    """SmolLM2 on llama.cpp copied a line of tool output with its newline into a string:
    strict JSON refused the whole answer and only an inner `{}` parsed (not_a_summary)."""
    answer = '{ "facts": [ "1463: msg = \'x\'.format(\n  ", "kept"], "timeline": ["a\tb"] }'
    s = parse_summary_output(answer)
    assert s.facts == ("1463: msg = 'x'.format(", "kept") and s.timeline == ("a\tb",)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("I'm sorry, but I can't help with that.", "refusal"),
        ("抱歉，我无法完成这个请求。", "refusal"),
        ("Error: upstream model overloaded", "error_text"),
        ("<html><body>502 Bad Gateway</body></html>", "error_text"),
        ('{"error": {"message": "rate limited"}}', "error_text"),
        ("The user and the assistant discussed the project.", "not_json"),
        ('{"summary": "everything went fine"}', "not_a_summary"),
        ('{"facts": [true]}', "wrong_types"),
        ('{"facts": [{"k": [1]}], "timeline": [null, false]}', "wrong_types"),
        ('{"facts": {"k": {"deep": 1}}}', "wrong_types"),
        ('{"facts": [], "decisions": [], "timeline": ["  "]}', "all_empty"),
        ('{"facts": ["I\'m sorry, I cannot summarise this."]}', "refusal"),
    ],
)
def test_invalid_outputs_are_rejected_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(SummaryRejected) as info:
        parse_summary_output(text)
    assert info.value.reason == reason


def test_render_in_english_and_chinese() -> None:
    s = StructuredSummary(
        facts=("multi\nline",), user_prefs=("不要删除数据",), pinned=("pinned text",)
    )
    en = render_summary(s, "en", through_seq=42)
    assert en.startswith("[Summary of the earlier conversation]\n")
    assert en.endswith("\n(messages up to #42)")
    assert "Facts:\n- multi\n  line" in en
    assert "Pinned messages (verbatim):\n- pinned text" in en
    assert "Decisions" not in en  # empty sections are left out
    zh = render_summary(s, "zh", through_seq=42)
    assert zh.startswith("[此前对话摘要]\n")
    assert zh.endswith("\n（截至第 42 条消息）")
    assert "用户偏好与约束：\n- 不要删除数据" in zh


def test_a_rolled_summary_keeps_the_previous_render_up_to_its_first_growing_section() -> None:
    # What a prefix cache of tokens keeps across a compaction: the user's words and the
    # other rarely changed sections lead, the range covered comes last.
    before = StructuredSummary(
        user_messages=("Never touch prod.",), user_prefs=("keep answers short",),
        decisions=("use PostgreSQL",), facts=("the API is at /v2",), timeline=("read a.py",),
    )  # fmt: skip
    after = merge_summaries(
        before, StructuredSummary(facts=("the tests pass",), timeline=("ran pytest",))
    )
    old, new = (
        render_summary(before, "en", through_seq=10),
        render_summary(after, "en", through_seq=20),
    )
    n = next((i for i, (x, y) in enumerate(zip(old, new, strict=False)) if x != y), len(old))
    shared = old[:n]
    for unchanged in ("Never touch prod.", "keep answers short", "use PostgreSQL", "/v2"):
        assert unchanged in shared
    assert new.index("The user's own messages") < new.index("Decisions:") < new.index("Facts:")
    assert old.endswith("(messages up to #10)") and new.endswith("(messages up to #20)")


def test_roundtrip_through_dict() -> None:
    s = StructuredSummary(facts=("a",), carried_anchors=("keep me",))
    data = s.to_dict()
    assert data["schema_version"] == 1
    assert StructuredSummary.from_dict(data) == s
    assert StructuredSummary.from_dict({"facts": "junk", "timeline": [1, "x"]}).timeline == ("x",)


def test_merge_dedupes_and_bounds_the_timeline() -> None:
    prev = StructuredSummary(facts=("Port 8080",), timeline=tuple(f"e{i}" for i in range(5)))
    new = StructuredSummary(facts=("port  8080", "Host db"), timeline=("e5", "e6"))
    merged = merge_summaries(prev, new, max_timeline=4)
    assert merged.facts == ("Port 8080", "Host db")
    assert merged.timeline == ("e3", "e4", "e5", "e6")


def test_summary_cap() -> None:
    assert summary_token_cap(10_000) == 3000
    assert summary_token_cap(100) == 256
    assert summary_token_cap(100_000, ceiling=4096) == 4096
