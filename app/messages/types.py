"""Plain data shapes of logged messages, shared by assembly and compaction.

These carry no database or HTTP types so that the pure layers (strategies,
turn splitting, summaries) can be tested directly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.limits import Role

__all__ = [
    "LoggedMessage",
    "Role",
    "call_function",
    "content_text",
    "counts_in_context",
    "is_summary_class",
]


def is_summary_class(role: str, metadata: Mapping[str, Any] | None) -> bool:
    """A `system` message the client logged as a summary (`metadata.kind == "summary"`).

    Historical system messages are left out of the history sent, except these
    (SPEC §3): assembly sends them as summary units (`app/context/groups.py`).
    """
    return role == "system" and (metadata or {}).get("kind") == "summary"


def counts_in_context(
    role: str, include_in_context: bool, metadata: Mapping[str, Any] | None
) -> bool:
    """Whether a logged message reaches the model, and so counts toward the context tokens.

    The one statement of the rule: `include_in_context: false` messages are
    UI-only, and historical `system` messages stay in the log but are left
    out of the history sent (SPEC §3), except summary-class ones, which are
    sent and so counted. The session's running `context_tokens`,
    `context_tokens_through`, `watermark_context_tokens` and what compaction
    counts as freed all sum the messages this is true of. Takes plain fields
    so the write path and the recount, which never build a `LoggedMessage`,
    can use it too.
    """
    if not include_in_context:
        return False
    return role != "system" or is_summary_class(role, metadata)


def content_text(body: Mapping[str, Any]) -> str:
    """The text of a message's `content`: the string, or its parts' `text` joined by newlines.

    Parts with no `text` (images, audio, files, refusals) add nothing, not even
    an empty line, so character offsets into this text agree wherever it is
    taken (a context preview names offsets that `GET …/messages/{seq}` reads).
    """
    content = body.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def call_function(call: object) -> tuple[str, str] | None:
    """`(name, arguments)` of a Chat Completions tool call; None if it has no function object.

    Appends are validated, so stored calls have both as strings; arguments that
    are not (a body from elsewhere) come back as JSON text, never a Python repr.
    """
    fn = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(fn, Mapping):
        return None
    raw = fn.get("arguments", "")
    args = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
    return str(fn.get("name", "")), args


@dataclass(frozen=True, slots=True)
class LoggedMessage:
    """One message of a session's log, as stored.

    `body` is the OpenAI chat message verbatim (role, content, tool_calls,
    tool_call_id, name and any unknown fields the client sent); contextd's own
    flags live beside it, never inside it.
    """

    seq: int
    id: str
    role: Role
    body: dict[str, Any]
    token_count: int
    pinned: bool = False
    include_in_context: bool = True
    mode: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    created_at: datetime | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def counts_in_context(self) -> bool:
        """See `counts_in_context`: whether the model sees this message."""
        return counts_in_context(self.role, self.include_in_context, self.metadata)

    @property
    def tool_call_ids(self) -> tuple[str, ...]:
        calls = self.body.get("tool_calls") or ()
        return tuple(str(c.get("id")) for c in calls if isinstance(c, dict))

    @property
    def text(self) -> str:
        """The message's text content (`content_text`), for scoring and summaries."""
        return content_text(self.body)
