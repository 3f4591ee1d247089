"""Chat Completions messages → OpenAI Responses API input items (`responses.create(input=…)`).

- system, user: a `message` item of the same role, in place. System messages stay
  input items rather than moving to `instructions`: the payload keeps its order,
  so its prefix stays the prefix the provider cached (`instructions` would also
  be dropped when a client chains calls with `previous_response_id`).
- user content parts: text → `input_text`, `image_url` → `input_image` (URL or
  data URL, or the `file_id` a part holds instead of a URL; `detail` kept, else
  "auto"), `file` → `input_file`; audio, which
  Responses input messages do not take, becomes a short text note.
- assistant: its text as an `assistant` message item, then one `function_call`
  item per tool call (parallel calls stay adjacent, in order).
- tool: a `function_call_output` item with the output text. Responses has no
  error flag for tool outputs, so a failed tool's output is sent as it is.
- tools: `{"type": "function", "name", "description", "parameters", "strict"}`;
  `strict` is false unless the tool asked for it (Responses defaults to true,
  which rejects the optional properties Chat Completions schemas usually have).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.context.formats.parts import joined_text, omitted


def input_items(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(message.get("tool_call_id", "")),
                    "output": joined_text(message.get("content")),
                }
            )
        elif role == "assistant":
            items.extend(_assistant(message))
        else:
            content = message.get("content")
            items.append(
                {
                    "type": "message",
                    "role": "system" if role == "system" else "user",
                    "content": content if isinstance(content, str) else _parts(content),
                }
            )
    return items


def _assistant(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    text = joined_text(message.get("content"))
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal:
        text = f"{text}\n{refusal}" if text else refusal
    if text:
        items.append({"type": "message", "role": "assistant", "content": text})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        items.append(
            {
                "type": "function_call",
                "call_id": str(call.get("id", "")),
                "name": str(function.get("name", "")),
                "arguments": str(function.get("arguments", "")),
            }
        )
    return items


def _parts(content: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        kind = part.get("type")
        if kind == "text":
            out.append({"type": "input_text", "text": part["text"]})
        elif kind == "image_url":
            image = part.get("image_url") or {}
            detail = image.get("detail")
            item: dict[str, Any] = {
                "type": "input_image",
                "detail": detail if detail in ("low", "high", "auto") else "auto",
            }
            # An image the Responses API was given by file id (chat names images by URL
            # only; the Python Agents adapter stores `file_id` in place of `url`).
            if "url" not in image and isinstance(image.get("file_id"), str):
                item["file_id"] = image["file_id"]
            else:
                item["image_url"] = str(image.get("url", ""))
            out.append(item)
        elif kind == "file":
            file = part.get("file") or {}
            keep = ("file_data", "file_id", "filename", "file_url")
            out.append({"type": "input_file", **{k: file[k] for k in keep if k in file}})
        else:
            out.append({"type": "input_text", "text": omitted(part)})
    return out


def tools(chat_tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in chat_tools:
        function = tool.get("function") or {}
        converted: dict[str, Any] = {
            "type": "function",
            "name": function.get("name"),
            "parameters": function.get("parameters") or {"type": "object", "properties": {}},
            "strict": function.get("strict") is True,
        }
        if isinstance(function.get("description"), str):
            converted["description"] = function["description"]
        out.append(converted)
    return out
