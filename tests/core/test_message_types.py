"""The shared readings of a logged message: what counts, its text, its calls."""

from __future__ import annotations

from app.core.conversation import call_function, content_text, counts_in_context


def test_included_messages_count_except_non_summary_system_ones() -> None:
    assert counts_in_context("user", True, None) and counts_in_context("tool", True, None)
    assert not counts_in_context("system", True, None)
    assert not counts_in_context("system", True, {"kind": "note"})
    assert counts_in_context("system", True, {"kind": "summary"})
    assert not counts_in_context("system", False, {"kind": "summary"})
    assert not counts_in_context("assistant", False, None)


def test_content_text_joins_text_parts_and_adds_nothing_for_others() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x/y.png"}}
    body = {"content": [{"type": "text", "text": "a"}, image, {"type": "text", "text": "b"}]}
    assert content_text(body) == "a\nb"
    assert content_text({"content": "plain"}) == "plain"
    assert content_text({"content": None, "tool_calls": []}) == ""


def test_call_function_reads_name_and_arguments_as_text() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    assert call_function(call) == ("f", '{"a": 1}')
    assert call_function({"id": "c1", "function": {"name": "f", "arguments": {"a": "é"}}}) == (
        "f",
        '{"a": "é"}',
    )
    assert call_function({"id": "c1"}) is None and call_function("junk") is None
