"""Responses items <-> chat messages: nothing lost, and chat a model accepts."""

from __future__ import annotations

from typing import Any

from contextd_client._responses import (
    ITEMS_KEY,
    chat_to_items,
    items_to_messages,
    message_to_items,
)

# What the Agents SDK hands a session after a run with a chat-completions model,
# plus the item kinds a Responses model adds.
USER: dict[str, Any] = {"role": "user", "content": "How many lines in notes.txt?"}
TYPED_USER: dict[str, Any] = {
    "type": "message",
    "role": "user",
    "content": [
        {"type": "input_text", "text": "What is in this picture?"},
        {"type": "input_image", "image_url": "https://x/y.png", "detail": "low"},
    ],
}
REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "The user wants a count."}],
    "encrypted_content": "gAAAA...",
}
CALL_A = {"type": "function_call", "call_id": "call_a", "name": "read_file",
          "arguments": '{"path": "a"}', "id": "__fake_id__", "provider_data": {"model": "m"}}  # fmt: skip
CALL_B = {"type": "function_call", "call_id": "call_b", "name": "read_file", "arguments": '{"path": "b"}'}  # fmt: skip
OUT_A = {"type": "function_call_output", "call_id": "call_a", "output": "3 lines"}
OUT_B = {"type": "function_call_output", "call_id": "call_b", "output": [{"type": "input_text", "text": "4 lines"}]}  # fmt: skip
ANSWER = {
    "id": "__fake_id__",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [
        {"type": "output_text", "text": "a has 3, b has 4.", "annotations": [], "logprobs": []}
    ],
}
SEARCH = {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"query": "q"}}
DEVELOPER = {"role": "developer", "content": "Answer in French."}

RUN: list[dict[str, Any]] = [
    USER,
    TYPED_USER,
    DEVELOPER,
    REASONING,
    CALL_A,
    CALL_B,
    OUT_A,
    OUT_B,
    SEARCH,
    ANSWER,
]


def stored(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # As contextd hands them back: the chat body plus metadata, flags dropped.
    return [{k: v for k, v in m.items() if k != "include_in_context"} for m in messages]


def test_a_whole_run_round_trips_exactly() -> None:
    messages = items_to_messages(RUN)
    back = [item for m in stored(messages) for item in message_to_items(m)]
    assert back == RUN


def test_the_chat_side_is_what_a_chat_model_accepts() -> None:
    messages = items_to_messages(RUN)
    chat = [(m["role"], m.get("include_in_context", True)) for m in messages]
    assert chat == [
        ("user", True),
        ("user", True),
        ("system", True),  # developer instructions are system messages in chat
        ("assistant", False),  # reasoning: in the log, never in a payload
        ("assistant", True),  # both parallel calls in ONE assistant message
        ("tool", True),
        ("tool", True),
        ("assistant", False),  # a web search call has no chat form
        ("assistant", True),
    ]
    calls = messages[4]
    assert calls["content"] is None
    assert [c["id"] for c in calls["tool_calls"]] == ["call_a", "call_b"]
    assert calls["tool_calls"][0]["function"] == {"name": "read_file", "arguments": '{"path": "a"}'}
    assert [m["tool_call_id"] for m in messages[5:7]] == ["call_a", "call_b"]
    assert messages[6]["content"] == "4 lines"
    assert messages[1]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "https://x/y.png", "detail": "low"},
    }
    assert messages[3]["content"] == "The user wants a count."
    assert messages[3]["metadata"][ITEMS_KEY] == [REASONING]
    assert messages[-1]["content"] == "a has 3, b has 4."


def test_plain_items_are_stored_without_a_verbatim_copy() -> None:
    plain_call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    plain_out = {"type": "function_call_output", "call_id": "c", "output": "ok"}
    messages = items_to_messages([USER, plain_call, plain_out])
    assert all("metadata" not in m for m in messages)
    assert [i for m in messages for i in message_to_items(m)] == [USER, plain_call, plain_out]


def test_a_payload_becomes_responses_input_items() -> None:
    payload: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "[preview: 10 lines] see /sessions/s/messages/4"},
        {"role": "assistant", "content": "Done."},
    ]  # fmt: skip
    items = chat_to_items(payload)
    assert [i.get("type", i.get("role")) for i in items] == [
        "system", "user", "assistant", "function_call", "function_call_output", "assistant",
    ]  # fmt: skip
    # Assistant text in the easy form, which every Responses endpoint and the Agents
    # SDK's chat converter take (an output message needs an id a model issued).
    assert items[2] == {"role": "assistant", "content": "Let me look."}
    assert items[3] == {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
    assert items[4]["output"].startswith("[preview")


def test_files_and_images_by_id_map_to_chat_parts_and_back_exactly() -> None:
    user = {"role": "user", "content": [
        {"type": "input_file", "filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"},
        {"type": "input_file", "file_id": "file-1", "filename": "b.pdf"},
        {"type": "input_file", "file_url": "https://x/c.pdf"},
        {"type": "input_image", "file_id": "file-2", "detail": "high"},
    ]}  # fmt: skip
    [message] = items_to_messages([user])
    assert "metadata" not in message  # the chat form alone gives the item back
    assert [p["type"] for p in message["content"]] == ["file", "file", "file", "image_url"]
    assert message["content"][1]["file"] == {"file_id": "file-1", "filename": "b.pdf"}
    assert message["content"][3]["image_url"] == {"file_id": "file-2", "detail": "high"}
    assert chat_to_items([message]) == [user]
