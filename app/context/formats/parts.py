"""Pieces shared by the converters: texts of content, data URLs, tool arguments."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

_DATA_URL = re.compile(r"^data:([\w.+-]+/[\w.+-]+)?((?:;[\w-]+=[^;,]*)*);base64,(.*)$", re.DOTALL)


def texts(content: Any) -> list[str]:
    """The text pieces of a Chat Completions `content` (string or parts), in order."""
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    out: list[str] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "text" and isinstance(part.get("text"), str):
            out.append(part["text"])
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            out.append(part["refusal"])
    return out


def joined_text(content: Any) -> str:
    return "\n".join(texts(content))


def data_url(url: str) -> tuple[str, str] | None:
    """`(media_type, base64 data)` of a base64 data URL, None for anything else."""
    found = _DATA_URL.match(url)
    if found is None:
        return None
    return (found.group(1) or "application/octet-stream").lower(), found.group(3)


def tool_input(arguments: Any) -> dict[str, Any]:
    """A tool call's JSON arguments as the object Anthropic's `tool_use.input` needs.

    Arguments that are not a JSON object (a model's malformed or streamed-partial
    output) are kept verbatim under `"arguments"` rather than lost.
    """
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {"arguments": arguments}


def omitted(part: Mapping[str, Any]) -> str:
    """What a content part the target format cannot carry is replaced by."""
    kind = str(part.get("type", "part"))
    name = ""
    file = part.get("file")
    if isinstance(file, Mapping) and isinstance(file.get("filename"), str):
        name = f" {file['filename']}"
    return f"[{kind}{name} omitted: not supported in this format]"
