"""OpenAI Responses items <-> contextd chat messages, without loss (pure, no SDK).

contextd stores chat messages, because that is what it assembles payloads
from; agent frameworks such as the OpenAI Agents SDK keep Responses items. A
batch of items becomes chat messages like this:

- a user/system/developer/assistant `message` -> a message of that role
  (`developer` as `system`), its text, image and file parts as chat parts (an
  image given by `file_id`, which chat cannot name, as an `image_url` part with
  `file_id` in place of `url`);
- consecutive `function_call` items -> ONE assistant message with `tool_calls`
  (parallel calls must share a message for a chat model), and each
  `function_call_output` -> a `tool` message;
- a `reasoning` item, or any item a chat model cannot take (web search, computer
  calls, ...) -> an assistant message with `include_in_context: false`: kept
  in the log, never in a payload.

Whenever the plain chat message would not give the exact items back, the items
are stored verbatim in `metadata["responses_items"]`, and reading prefers them,
so `messages_to_items(items_to_messages(x)) == x` for every batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["ITEMS_KEY", "chat_to_items", "items_to_messages", "message_to_items"]

ITEMS_KEY = "responses_items"
# An `input_file`'s fields, kept as they are in a chat `file` part. Chat has no
# `file_url`; contextd stores the part whatever it holds, so it is kept too.
FILE_FIELDS = ("file_data", "file_id", "filename", "file_url")
Item = dict[str, Any]


def items_to_messages(items: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages (with contextd flags) for a batch of Responses items, in order."""
    out: list[dict[str, Any]] = []
    pending: list[Item] = []  # consecutive function calls, merged into one message
    for raw in items:
        item = _plain(raw)
        if item.get("type") == "function_call":
            pending.append(item)
            continue
        if pending:
            out.append(_stored(_calls_message(pending), pending))
            pending = []
        out.append(_stored(_one_message(item), [item]))
    if pending:
        out.append(_stored(_calls_message(pending), pending))
    return out


def message_to_items(message: Mapping[str, Any]) -> list[Item]:
    """The Responses items a stored message stands for (the verbatim ones if kept)."""
    meta = message.get("metadata") or {}
    kept = meta.get(ITEMS_KEY) if isinstance(meta, Mapping) else None
    if isinstance(kept, list):
        return [dict(i) for i in kept]
    return chat_to_items([message])


def chat_to_items(messages: Iterable[Mapping[str, Any]]) -> list[Item]:
    """Responses input items for chat messages (a contextd payload, say)."""
    out: list[Item] = []
    for msg in messages:
        role = msg.get("role")
        if role == "tool":
            out.append(_output_item(msg))
            continue
        content = msg.get("content")
        if role == "assistant":
            if content is not None or msg.get("refusal") is not None:
                out.append(_assistant_item(msg))
            out.extend(_call_item(c) for c in msg.get("tool_calls") or [])
            continue
        out.append({"role": role, "content": _parts_to_responses(content)})
    return out


# items -> chat --------------------------------------------------------------------


def _plain(item: Mapping[str, Any]) -> Item:
    # SDK items may be pydantic models dumped to dicts with None fields: keep as given.
    return json.loads(json.dumps(dict(item), default=str))  # type: ignore[no-any-return]


def _stored(message: dict[str, Any], items: list[Item]) -> dict[str, Any]:
    """Keep the verbatim items whenever the chat message alone would not give them back."""
    chat = {k: v for k, v in message.items() if k not in ("include_in_context", "metadata")}
    if chat_to_items([chat]) != items or not message.get("include_in_context", True):
        message["metadata"] = {ITEMS_KEY: items}
    return message


def _calls_message(calls: Sequence[Item]) -> dict[str, Any]:
    tool_calls = [
        {
            "id": str(c.get("call_id") or c.get("id")),
            "type": "function",
            "function": {"name": str(c.get("name")), "arguments": str(c.get("arguments") or "")},
        }
        for c in calls
    ]
    return {"role": "assistant", "content": None, "tool_calls": tool_calls}


def _one_message(item: Item) -> dict[str, Any]:
    kind = item.get("type", "message")
    if kind == "function_call_output":
        return {
            "role": "tool",
            "tool_call_id": str(item.get("call_id")),
            "content": _output_text(item.get("output")),
        }
    if kind == "message" and item.get("role") in ("user", "system", "developer", "assistant"):
        role = "system" if item["role"] == "developer" else item["role"]
        content = _parts_to_chat(item.get("content"), role)
        if role == "assistant" and isinstance(content, list):
            content = _text_of(content)  # chat assistants take text, not output parts
        return {"role": role, "content": content}
    # Reasoning, web search, computer calls, ...: in the log, out of every payload.
    return {"role": "assistant", "content": _summary_of(item), "include_in_context": False}


def _parts_to_chat(content: Any, role: str) -> Any:
    if not isinstance(content, list):
        return content if isinstance(content, str) else json.dumps(content)
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": str(part.get("text", ""))})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(part.get("refusal", ""))})
        elif kind == "input_image" and role == "user" and part.get("image_url"):
            image = {"url": part["image_url"], "detail": part.get("detail") or "auto"}
            parts.append({"type": "image_url", "image_url": image})
        elif kind == "input_image" and role == "user" and part.get("file_id"):
            # Chat takes images by URL only. An image part that names the file instead
            # still counts as an image in contextd's budget and maps back exactly.
            image = {"file_id": part["file_id"], "detail": part.get("detail") or "auto"}
            parts.append({"type": "image_url", "image_url": image})
        elif kind == "input_file" and role == "user":
            file = {k: part[k] for k in FILE_FIELDS if part.get(k) is not None}
            parts.append({"type": "file", "file": file})
        else:  # audio, ... a chat model cannot be given here: say it was there
            parts.append({"type": "text", "text": f"[{kind or 'part'}]"})
    if role != "user" and not all(p["type"] == "text" for p in parts):
        return _text_of(parts)
    return parts or ""


def _text_of(parts: Sequence[Mapping[str, Any]]) -> str:
    return "".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def _output_text(output: Any) -> Any:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        texts = [p for p in output if isinstance(p, dict) and p.get("type") == "input_text"]
        if len(texts) == len(output) and texts:
            return "".join(str(p.get("text", "")) for p in texts)
    return json.dumps(output, ensure_ascii=False)


def _summary_of(item: Item) -> str:
    summary = item.get("summary")
    if isinstance(summary, list):
        text = " ".join(str(s.get("text", "")) for s in summary if isinstance(s, dict))
        if text.strip():
            return text
    return f"[{item.get('type', 'item')}]"


# chat -> items --------------------------------------------------------------------


def _assistant_item(msg: Mapping[str, Any]) -> Item:
    # The easy form: every Responses endpoint takes it, and the Agents SDK's chat
    # converter too (an output message would need an id the model issued).
    content = msg.get("content")
    if content is None:
        return {"role": "assistant", "content": str(msg.get("refusal", ""))}
    text = content if isinstance(content, str) else _text_of(content)
    return {"role": "assistant", "content": text}


def _call_item(call: Mapping[str, Any]) -> Item:
    fn = call.get("function") or {}
    return {
        "type": "function_call",
        "call_id": call.get("id"),
        "name": fn.get("name"),
        "arguments": fn.get("arguments"),
    }


def _output_item(msg: Mapping[str, Any]) -> Item:
    content = msg.get("content")
    output = content if isinstance(content, str) else _text_of(content or [])
    return {"type": "function_call_output", "call_id": msg.get("tool_call_id"), "output": output}


def _parts_to_responses(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    out: list[Item] = []
    for part in content:
        if part.get("type") == "image_url":
            image = part.get("image_url") or {}
            item: Item = {"type": "input_image", "detail": image.get("detail") or "auto"}
            if image.get("url") is None and image.get("file_id") is not None:
                item["file_id"] = image["file_id"]
            else:
                item["image_url"] = image.get("url")
            out.append(item)
        elif part.get("type") == "file":
            file = part.get("file") or {}
            out.append({"type": "input_file", **{k: file[k] for k in FILE_FIELDS if k in file}})
        else:
            out.append({"type": "input_text", "text": str(part.get("text", ""))})
    return out
