from __future__ import annotations

import json

from app.compaction.prompt import (
    ANCHORS_HEADER,
    IDENTIFIERS_HEADER,
    PREVIOUS_HEADER,
    RANGE_HEADER,
    build_retry_request,
    build_summary_request,
    render_range,
)
from app.compaction.summary import StructuredSummary, summary_token_cap
from tests.support.compaction_builders import call, log_of
from tests.support.fakellm import parse_prompt

LOG = log_of(
    [
        {"role": "user", "content": "Fix the bug.\nYou must not change the API."},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "bash", {"cmd": "ls"})]},
        {"role": "tool", "tool_call_id": "c1", "content": "HEAD" + "x" * 5000 + "TAIL"},
        {"role": "assistant", "content": "Done."},
        {"role": "system", "content": "a historical system message"},
    ]
)


def test_range_rendering_is_compact_and_truncates_tool_output() -> None:
    text = render_range(LOG)
    assert "[#1 user] Fix the bug.\n    You must not change the API." in text
    assert '[#2 assistant call] bash({"cmd": "ls"})' in text
    assert "[#3 tool bash] HEAD" in text and text.rstrip().endswith("[#4 assistant] Done.")
    assert "chars omitted" in text and "TAIL" in text
    assert len(text) < 1500
    assert "historical system" not in text


def test_request_carries_temperature_cap_json_mode_and_sections() -> None:
    prev = StructuredSummary(facts=("Port 8080",), pinned=("not shown to the model",))
    cap = summary_token_cap(1000)
    req = build_summary_request(
        LOG,
        previous=prev,
        anchors=["Never drop tables"],
        identifiers=["src/db.py"],
        lang="zh",
        temperature=0.1,
        max_tokens=cap,
    )
    assert req.temperature == 0.1 and req.max_tokens == 300
    assert req.response_format == {"type": "json_object"}
    system, user = req.messages
    assert system["role"] == "system" and "Chinese" in system["content"]
    assert all(k in system["content"] for k in ("facts", "decisions", "open_todos", "timeline"))
    content = user["content"]
    for header in (ANCHORS_HEADER, IDENTIFIERS_HEADER, PREVIOUS_HEADER, RANGE_HEADER):
        assert header in content
    assert "not shown to the model" not in content
    parsed = parse_prompt(list(req.messages))
    assert parsed.anchors == ["Never drop tables"] and parsed.identifiers == ["src/db.py"]
    assert parsed.previous["facts"] == ["Port 8080"]
    assert parsed.lines[0] == ("user", "Fix the bug.\nYou must not change the API.")
    off = build_summary_request(
        LOG, previous=None, anchors=[], identifiers=[], lang="en", temperature=0.1,
        max_tokens=256, json_mode=False,
    )  # fmt: skip
    assert off.response_format is None
    assert json.loads(content.split(PREVIOUS_HEADER + "\n")[1].split("\n\n###")[0])


def test_retry_names_what_is_missing_and_keeps_the_conversation() -> None:
    req = build_summary_request(
        LOG, previous=None, anchors=["A1"], identifiers=["id-9"], lang="en", temperature=0.1,
        max_tokens=256,
    )  # fmt: skip
    retry = build_retry_request(
        req, '{"facts": []}', missing_anchors=["A1"], missing_identifiers=["id-9"],
        wrong_language="zh",
    )  # fmt: skip
    assert retry.messages[:2] == req.messages
    assert retry.messages[2] == {"role": "assistant", "content": '{"facts": []}'}
    correction = retry.messages[3]["content"]
    assert "- A1" in correction and "- id-9" in correction and "Chinese" in correction
    assert retry.max_tokens == req.max_tokens and retry.temperature == req.temperature
