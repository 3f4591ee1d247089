"""The text search sees of a message: content, name, refusal, its calls' names and arguments."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.core.conversation import call_function, content_text


def searchable_text(body: Mapping[str, Any]) -> str:
    """The text search sees of a message: content, the `name`, and every tool call's
    function name and arguments (`arguments_text`)."""
    pieces = [content_text(body)]
    name = body.get("name")
    if isinstance(name, str) and name:
        pieces.append(name)
    for call in body.get("tool_calls") or ():
        fn = call_function(call)
        if fn is not None:
            pieces.append(fn[0])
            pieces.append(arguments_text(fn[1]))
    refusal = body.get("refusal")
    if isinstance(refusal, str):
        pieces.append(refusal)
    return "\n".join(p for p in pieces if p)


def arguments_text(raw: str) -> str:
    """A tool call's arguments as the model wrote them: the keys and values of their JSON,
    one a line, or the raw text when it is not JSON. Written out as JSON, a script's new
    lines are `\\n`, which would join the words around them (`import os\\nos.makedirs`
    would hold `nos.makedirs`, not `os.makedirs`)."""
    if not raw.lstrip().startswith(("{", "[")):
        return raw
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    out: list[str] = []
    _leaves(value, out)
    return "\n".join(out)


def _leaves(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            out.append(str(k))
            _leaves(v, out)
    elif isinstance(value, list):
        for v in value:
            _leaves(v, out)
    elif isinstance(value, str):
        out.append(value)
    elif value is not None:
        out.append(json.dumps(value))
