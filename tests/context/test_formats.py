"""The provider formats (app/context/formats), pure, checked against the SDK types."""

from __future__ import annotations

from typing import Any

import pytest

from app.context import formats
from app.context.formats import anthropic
from app.context.formats.anthropic import tool_id
from tests.support.sdk_types import breakpoints, check_anthropic, check_openai, check_responses

PNG = "data:image/png;base64,iVBORw0KGgo="
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {"type": "function", "function": {"name": "now"}},
]


def call(call_id: str, name: str = "read_file", args: str = '{"path": "a.py"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def body_of(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {"messages": messages, "tools": TOOLS if tools is None else tools, "kept_seqs": [1]}


HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {"role": "system", "content": "Active mode: agent"},
    {"role": "system", "content": "Summary of the conversation so far:\n...\n(messages up to #4)"},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is in these?"},
            {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.jpg"}},
        ],
    },
    {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c.2", "now", "")]},
    {"role": "tool", "tool_call_id": "c1", "content": "print('hi')"},
    {"role": "tool", "tool_call_id": "c.2", "content": "clock unavailable"},
    {"role": "assistant", "content": "The file prints hi."},
    {"role": "assistant", "content": "", "tool_calls": [call("c3")]},
    {"role": "tool", "tool_call_id": "c3", "content": [{"type": "text", "text": "x = 1"}]},
    {"role": "user", "content": "And now?"},
]


def test_openai_is_unchanged_and_named() -> None:
    out = formats.render(body_of(HISTORY), "openai")
    assert out["messages"] == HISTORY and out["tools"] == TOOLS and out["format"] == "openai"
    assert out["kept_seqs"] == [1]
    check_openai(out)


def test_responses_items() -> None:
    out = formats.render(body_of(HISTORY), "responses")
    check_responses(out)
    items = out["input"]
    assert [i["type"] for i in items] == [
        "message", "message", "message", "message",
        "function_call", "function_call", "function_call_output", "function_call_output",
        "message", "function_call", "function_call_output", "message",
    ]  # fmt: skip
    assert items[0] == {"type": "message", "role": "system", "content": "Be brief."}
    assert items[3]["content"][1] == {"type": "input_image", "image_url": PNG, "detail": "low"}
    assert items[3]["content"][2]["detail"] == "auto"
    assert items[5] == {"type": "function_call", "call_id": "c.2", "name": "now", "arguments": ""}
    assert items[10] == {"type": "function_call_output", "call_id": "c3", "output": "x = 1"}
    assert out["tools"][0] == {
        "type": "function",
        "name": "read_file",
        "parameters": TOOLS[0]["function"]["parameters"],
        "strict": False,
        "description": "Read a file.",
    }
    assert out["tools"][1]["parameters"] == {"type": "object", "properties": {}}


def test_responses_keeps_images_and_files_given_by_id() -> None:
    """Parts the Agents adapter stores for input given by file id come back as the
    Responses API took them (an image part holds `file_id` where chat has `url`)."""
    parts = [
        {"type": "image_url", "image_url": {"file_id": "file-img1", "detail": "high"}},
        {"type": "file", "file": {"file_id": "file-doc1", "filename": "a.pdf"}},
        {"type": "file", "file": {"file_url": "https://example.com/b.pdf"}},
    ]
    out = formats.render(body_of([{"role": "user", "content": parts}]), "responses")
    check_responses(out)
    assert out["input"][0]["content"] == [
        {"type": "input_image", "file_id": "file-img1", "detail": "high"},
        {"type": "input_file", "file_id": "file-doc1", "filename": "a.pdf"},
        {"type": "input_file", "file_url": "https://example.com/b.pdf"},
    ]


def test_anthropic_merges_roles_and_pairs_tool_calls() -> None:
    out = formats.render(body_of(HISTORY), "anthropic", tool_errors=[False, True, False])
    check_anthropic(out)
    assert [b["text"] for b in out["system"]] == [m["content"] for m in HISTORY[:3]]
    roles = [m["role"] for m in out["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    first = out["messages"][0]["content"]
    assert first[1]["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": "iVBORw0KGgo=",
    }
    assert first[2]["source"] == {"type": "url", "url": "https://example.com/a.jpg"}
    uses = out["messages"][1]["content"]
    assert [(b["type"], b["id"]) for b in uses] == [
        ("tool_use", "c1"),
        ("tool_use", tool_id("c.2")),
    ]
    assert tool_id("c.2").startswith("c_2_")
    assert uses[0]["input"] == {"path": "a.py"} and uses[1]["input"] == {}
    results = out["messages"][2]["content"]
    assert [b.get("is_error", False) for b in results] == [False, True]
    # The lone text and the next step's call merge into one assistant message.
    assert [b["type"] for b in out["messages"][3]["content"]] == ["text", "tool_use"]
    last = out["messages"][4]["content"]
    assert [b["type"] for b in last] == ["tool_result", "text"]
    assert out["tools"][0]["input_schema"]["properties"] == {"path": {"type": "string"}}
    assert out["tools"][1]["input_schema"] == {"type": "object"}


def test_anthropic_breakpoints_end_the_prompt_the_system_the_stable_prefix_and_the_payload() -> (
    None
):
    mark = {"cache_control": {"type": "ephemeral"}}
    # Default stable prefix: everything before the newest step (here the final user message).
    out = formats.render(body_of(HISTORY), "anthropic")
    assert breakpoints(out) == [
        {"type": "text", "text": "Be brief.", **mark},  # the system prompt (tools before it)
        {"type": "text", "text": HISTORY[2]["content"], **mark},  # the system, summary included
        {"type": "tool_result", "tool_use_id": "c3", "content": [
            {"type": "text", "text": "x = 1"}], **mark},  # the stable prefix
        {"type": "text", "text": "And now?", **mark},  # the payload: the next call reads it
    ]  # fmt: skip
    # A stable prefix of the three system messages ends where the system does.
    out = formats.render(body_of(HISTORY), "anthropic", stable_prefix=3)
    assert breakpoints(out) == [
        out["system"][0],
        out["system"][2],
        out["messages"][-1]["content"][-1],
    ]
    assert breakpoints(formats.render(body_of(HISTORY), "anthropic", stable_prefix=0)) == (
        breakpoints(out)
    )
    # No system message: the stable prefix and the payload only.
    no_system = formats.render(body_of(HISTORY[3:]), "anthropic")
    assert [b["type"] for b in breakpoints(no_system)] == ["tool_result", "text"]


def test_anthropic_placeholder_only_when_history_starts_with_assistant() -> None:
    messages = [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": "go on"},
    ]
    out = formats.render(body_of(messages, []), "anthropic")
    check_anthropic(out)
    assert out["messages"][0] == {
        "role": "user",
        "content": [{"type": "text", "text": anthropic.PLACEHOLDER}],
    }
    plain = formats.render(body_of(messages[2:], []), "anthropic")
    assert plain["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "go on", "cache_control": {"type": "ephemeral"}}],
        }
    ]
    assert plain["system"] == []


def test_anthropic_later_system_messages_and_odd_inputs() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "Summary of the conversation so far ..."},
        {"role": "assistant", "content": "   "},
        {"role": "assistant", "content": None, "tool_calls": [call("a:b", args="not json")]},
        {"role": "tool", "tool_call_id": "a:b", "content": ""},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": {"url": "data:image/bmp;base64,Qk0="}},
                {"type": "input_audio", "input_audio": {"data": "AAA=", "format": "wav"}},
                {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE",
                                          "filename": "spec.pdf"}},
            ],
        },
    ]  # fmt: skip
    out = formats.render(body_of(messages, []), "anthropic")
    check_anthropic(out)
    first = out["messages"][0]["content"]
    assert first[1]["text"].startswith(anthropic.SYSTEM_NOTE)
    use = out["messages"][1]["content"]
    assert use == [
        {
            "type": "tool_use",
            "id": tool_id("a:b"),
            "name": "read_file",
            "input": {"arguments": "not json"},
        }
    ]
    last = out["messages"][2]["content"]
    # The stable prefix ends before the newest user message: its tool result carries it.
    assert last[0] == {
        "type": "tool_result",
        "tool_use_id": tool_id("a:b"),
        "cache_control": {"type": "ephemeral"},
    }
    assert "image/bmp" in last[1]["text"] and "input_audio" in last[2]["text"]
    assert last[3]["type"] == "document" and last[3]["title"] == "spec.pdf"
    check_responses(formats.render(body_of(messages, []), "responses"))


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], 1),
        ([{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}], 1),
        ([{"role": "system", "content": "s"}], 1),
        (HISTORY, len(HISTORY) - 1),
        (HISTORY[:-1], 8),
    ],
)
def test_default_stable_prefix(messages: list[dict[str, Any]], expected: int) -> None:
    assert formats.default_stable_prefix(messages) == expected


def test_unknown_format_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown format"):
        formats.render(body_of(HISTORY), "gemini")


def test_anthropic_breakpoint_follows_the_reported_stable_prefix() -> None:
    """`usage.stable_prefix_messages` (messages shared with the previous payload) wins
    when positive; 0 (a first call, a trim) falls back to the newest-step rule."""
    body = {**body_of(HISTORY), "usage": {"stable_prefix_messages": 3}}
    out = formats.render(body, "anthropic")
    in_history = [b for b in breakpoints(out) if b not in out["system"]]
    assert in_history == [out["messages"][-1]["content"][-1]] and out["usage"] == body["usage"]
    body["usage"] = {"stable_prefix_messages": 0}
    fallback = formats.render(body, "anthropic")
    assert [b["type"] for b in breakpoints(fallback)[2:]] == ["tool_result", "text"]


def test_anthropic_tool_ids_stay_distinct_and_paired() -> None:
    """Ids that differ only in characters Anthropic does not take stay two ids: `ping:1`
    and `ping.1` both became `ping_1`, a duplicate the API refuses."""
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Check both hosts"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": i, "type": "function", "function": {"name": "ping", "arguments": "{}"}}
                for i in ("ping:1", "ping.1", "ping_1")
            ],
        },
        {"role": "tool", "tool_call_id": "ping:1", "content": "host a: up"},
        {"role": "tool", "tool_call_id": "ping.1", "content": "host b: DOWN"},
        {"role": "tool", "tool_call_id": "ping_1", "content": "host c: up"},
    ]
    out = formats.render(body_of(history), "anthropic")
    check_anthropic(out)
    uses = [b["id"] for b in out["messages"][1]["content"]]
    results = {b["tool_use_id"]: b["content"][0]["text"] for b in out["messages"][2]["content"]}
    assert len(set(uses)) == 3 and "ping_1" in uses  # a valid id is kept as it is
    assert results[tool_id("ping.1")] == "host b: DOWN" and results["ping_1"] == "host c: up"


def test_anthropic_payload_ends_as_the_api_takes_it() -> None:
    """A payload ending on the assistant (an answer cut off by an error) ends without
    trailing whitespace; one whose user messages are all blank still has a message."""
    cut = [
        {"role": "user", "content": "Summarize the report"},
        {"role": "assistant", "content": "The report covers three areas:\n "},
    ]
    out = formats.render(body_of(cut), "anthropic")
    check_anthropic(out)
    assert out["messages"][-1]["content"][-1]["text"] == "The report covers three areas:"
    blank = formats.render(body_of([{"role": "user", "content": " "}]), "anthropic")
    check_anthropic(blank)
    assert [m["role"] for m in blank["messages"]] == ["user"]


def test_anthropic_images_are_typed_by_their_bytes() -> None:
    """A PNG labelled as JPEG (Anthropic refuses a media_type its bytes contradict) goes as
    PNG; `image/jpg`, a common alias, goes as JPEG instead of being left out."""
    import base64

    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(16)).decode()
    jpeg = base64.b64encode(b"\xff\xd8\xff\xe0" + bytes(16)).decode()
    parts = [
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{png}"}},
        {"type": "image_url", "image_url": {"url": f"data:image/jpg;base64,{jpeg}"}},
    ]
    out = formats.render(body_of([{"role": "user", "content": parts}]), "anthropic")
    check_anthropic(out)
    sources = [b["source"] for b in out["messages"][0]["content"]]
    assert [s["media_type"] for s in sources] == ["image/png", "image/jpeg"]
