"""Chat Completions messages → Anthropic Messages API `system` + `messages` (+ `tools`).

- The leading system messages (system prompt, mode banner, dynamic context and
  summary when they come first) become the top-level `system`, one text block
  each. A system message later in the payload becomes a user-role text block
  starting "System note:" where it stands, so the order is kept.
- user: text and image blocks (a data URL → base64 source, an http(s) URL → url
  source); a PDF data URL file → a document block; anything else Anthropic
  cannot take (audio, other files) → a short text note.
- assistant: text blocks, then one `tool_use` block per call (parallel calls
  in one message), `input` parsed from the call's JSON arguments.
- tool: a user-role `tool_result` block; `is_error` when the tool message was
  logged with an `error` record.
- Consecutive messages of one role are merged into one message, as the API
  requires alternation; in a user message the `tool_result` blocks come first.
- Empty or whitespace-only texts are left out (the API rejects empty text
  blocks); a message left with no block disappears.
- The first message must be user-role: only when the history starts with an
  assistant message is a user placeholder `PLACEHOLDER` inserted before it.
- `cache_control: {"type": "ephemeral"}` breakpoints (at most four, the API's
  limit), on the last block of: the system prompt (the first system message:
  tools and instructions, the longest-lived prefix), the leading system messages
  (the summary among them), the stable prefix (the first `stable_prefix` Chat
  messages), and the payload. Anthropic writes a cache entry only at a
  breakpoint and reads one only at a block boundary near a breakpoint, so the
  tail's breakpoint lets the next call, which repeats this payload and adds its
  step, read all of it; the others are what a trim or a compaction, which
  change the history or the summary, still find.
- Tool ids are mapped into Anthropic's alphabet `[A-Za-z0-9_-]` (other
  characters become `_`) identically in `tool_use` and `tool_result`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.context.formats.parts import data_url, omitted, texts, tool_input
from app.core.content_parts import is_base64

PLACEHOLDER = "(conversation continues)"
CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
SYSTEM_NOTE = "System note:\n"
_BAD_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(slots=True)
class _Turn:
    role: str
    # (index of the Chat message the block comes from, block)
    blocks: list[tuple[int, dict[str, Any]]] = field(default_factory=list)


def convert(
    messages: Sequence[Mapping[str, Any]],
    chat_tools: Sequence[Mapping[str, Any]],
    *,
    stable_prefix: int,
    tool_errors: Sequence[bool] = (),
) -> dict[str, Any]:
    """`{"system": [...], "messages": [...], "tools": [...]}` for `messages.create(**…)`."""
    lead = 0
    system: list[tuple[int, dict[str, Any]]] = []
    while lead < len(messages) and messages[lead].get("role") == "system":
        system.extend((lead, _text(t)) for t in texts(messages[lead].get("content")) if t.strip())
        lead += 1
    turns = _turns(messages, lead, iter(tool_errors))
    if not turns or turns[0].role != "user":
        # The API wants a user message first, and at least one (a history of blank user
        # messages, which carry no block, leaves none).
        turns.insert(0, _Turn("user", [(-1, _text(PLACEHOLDER))]))
    _no_trailing_space(turns[-1])
    _mark_breakpoints(system, turns, stable_prefix)
    return {
        "system": [block for _, block in system],
        "messages": [{"role": t.role, "content": [block for _, block in t.blocks]} for t in turns],
        "tools": tools(chat_tools),
    }


def _turns(
    messages: Sequence[Mapping[str, Any]], start: int, errors: Iterator[bool]
) -> list[_Turn]:
    turns: list[_Turn] = []
    for index in range(start, len(messages)):
        message = messages[index]
        role = str(message.get("role"))
        if role == "tool":
            blocks = [_tool_result(message, next(errors, False))]
            role = "user"
        elif role == "assistant":
            blocks = _assistant(message)
        elif role == "system":
            note = "\n".join(texts(message.get("content")))
            blocks = [_text(SYSTEM_NOTE + note)] if note.strip() else []
            role = "user"
        else:
            blocks = _user(message.get("content"))
        if not blocks:
            continue
        if not turns or turns[-1].role != role:
            turns.append(_Turn(role))
        turns[-1].blocks.extend((index, b) for b in blocks)
    for turn in turns:
        # A user message answering tool calls must start with its tool_result blocks.
        turn.blocks.sort(key=lambda item: item[1]["type"] != "tool_result")
    return turns


def _mark_breakpoints(
    system: list[tuple[int, dict[str, Any]]], turns: list[_Turn], stable_prefix: int
) -> None:
    blocks = [*system, *(b for t in turns for b in t.blocks)]
    if not blocks:
        return
    ends = [
        _last_from(system, lambda source: source == 0),  # the system prompt
        _last_from(system, lambda source: True),  # every leading system message
        _last_from(blocks, lambda source: source < stable_prefix) if stable_prefix > 0 else None,
        blocks[-1][1],  # the payload
    ]
    for block in ends:
        if block is not None:
            block["cache_control"] = dict(CACHE_CONTROL)


def _last_from(
    blocks: Sequence[tuple[int, dict[str, Any]]], keep: Callable[[int], bool]
) -> dict[str, Any] | None:
    found = None
    for source, block in blocks:
        if source >= 0 and keep(source):
            found = block
    return found


def _no_trailing_space(last: _Turn) -> None:
    """A payload that ends on the assistant (an answer cut off by an error, kept for
    "continue"; a blank latest user message) is a prefill, and Anthropic refuses a
    final assistant text that ends in whitespace, which a cut-off stream usually does."""
    if last.role != "assistant" or not last.blocks:
        return
    i, block = last.blocks[-1]
    if block.get("type") == "text":
        last.blocks[-1] = (i, {**block, "text": block["text"].rstrip()})


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_id(call_id: Any) -> str:
    """A tool_use id Anthropic takes (letters, digits, `_`, `-`). An id that needed
    changing gets a digest of the original, so no two ids become one: `ping:1` and
    `ping.1` both became `ping_1`, a duplicate tool_use id the API refuses (and a
    result the model could not tell from the other)."""
    raw = str(call_id)
    safe = _BAD_ID_CHARS.sub("_", raw)
    if safe == raw and raw:
        return raw
    return f"{safe}_{hashlib.sha1(raw.encode()).hexdigest()[:8]}"


def _assistant(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    blocks = [_text(t) for t in texts(message.get("content")) if t.strip()]
    refusal = message.get("refusal")
    if isinstance(refusal, str) and refusal.strip():
        blocks.append(_text(refusal))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        blocks.append(
            {
                "type": "tool_use",
                "id": tool_id(call.get("id")),
                "name": str(function.get("name", "")),
                "input": tool_input(function.get("arguments")),
            }
        )
    return blocks


def _tool_result(message: Mapping[str, Any], is_error: bool) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": tool_id(message.get("tool_call_id")),
    }
    content = [_text(t) for t in texts(message.get("content")) if t.strip()]
    if content:
        block["content"] = content
    if is_error:
        block["is_error"] = True
    return block


def _user(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [_text(content)] if content.strip() else []
    blocks: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else ():
        kind = part.get("type")
        if kind == "text":
            if part["text"].strip():
                blocks.append(_text(part["text"]))
        elif kind == "image_url":
            blocks.append(_image(part))
        elif kind == "file":
            blocks.append(_document(part))
        else:
            blocks.append(_text(omitted(part)))
    return blocks


def _image(part: Mapping[str, Any]) -> dict[str, Any]:
    image = part.get("image_url") or {}
    url = str(image.get("url", ""))
    inline = data_url(url)
    if inline is not None:
        media_type, data = inline
        if not is_base64(data) or not data:
            # Refused at the append since; one stored before must not fail every payload.
            return _text("[image omitted: its data URL does not hold base64]")
        media_type = _sniffed(data) or _ALIASES.get(media_type, media_type)
        if media_type in IMAGE_TYPES:
            source = {"type": "base64", "media_type": media_type, "data": data}
            return {"type": "image", "source": source}
        return _text(f"[image of type {media_type} omitted: Anthropic takes JPEG, PNG, GIF, WebP]")
    if url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    return _text(omitted(part))


# Names clients give these types that Anthropic does not take as written.
_ALIASES = {"image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg"}
# Leading bytes of each type Anthropic takes, as base64 text (a multiple of 3 bytes, so
# the prefix of the encoding is the encoding of the prefix).
_MAGIC = (
    (base64.b64encode(b"\x89PNG\r\n").decode(), "image/png"),
    (base64.b64encode(b"\xff\xd8\xff").decode(), "image/jpeg"),
    (base64.b64encode(b"GIF").decode(), "image/gif"),
)


def _sniffed(data: str) -> str | None:
    """The image type the bytes say. Anthropic refuses an image whose bytes are not of
    its `media_type` (a PNG sent as `data:image/jpeg`), which other providers accept."""
    for prefix, media_type in _MAGIC:
        if data.startswith(prefix):
            return media_type
    try:
        head = base64.b64decode(data[:16] + "=" * (-len(data[:16]) % 4), validate=False)
    except binascii.Error:
        return None
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def _document(part: Mapping[str, Any]) -> dict[str, Any]:
    file = part.get("file") or {}
    inline = data_url(str(file.get("file_data", "")))
    if inline is not None and inline[0] == "application/pdf" and inline[1] and is_base64(inline[1]):
        source = {"type": "base64", "media_type": "application/pdf", "data": inline[1]}
        block: dict[str, Any] = {"type": "document", "source": source}
        if isinstance(file.get("filename"), str):
            block["title"] = file["filename"]
        return block
    return _text(omitted(part))


def tools(chat_tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for tool in chat_tools:
        function = tool.get("function") or {}
        schema = function.get("parameters") or {}
        converted: dict[str, Any] = {
            "name": function.get("name"),
            "input_schema": {"type": "object", **schema},
        }
        if isinstance(function.get("description"), str):
            converted["description"] = function["description"]
        out.append(converted)
    return out
