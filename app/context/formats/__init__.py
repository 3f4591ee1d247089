"""The payload in each provider's own format (SPEC §2 `format`, §3 Formats); pure functions.

    body = formats.render(body, "anthropic", tool_errors=...)

`render` takes the context object of `AssembledContext.to_dict()` (Chat
Completions `messages` and `tools`) and returns it in the requested format;
`usage`, `kept_seqs`, `decisions` and the rest are kept as they are, so every
count still describes the Chat Completions payload the budget was fitted to.

- `openai` (default): unchanged, `messages` for `chat.completions.create`.
- `responses`: `input` (items for `responses.create(input=…)`) and `tools`
  in the Responses shape; `messages` is not returned. See `responses.py`.
- `anthropic`: `system`, `messages` and `tools` for `messages.create(…)`,
  with `cache_control` breakpoints at the end of the system prompt, of the
  system, of the stable prefix and of the payload. See `anthropic.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.context.formats import anthropic, responses
from app.core.conversation import LoggedMessage
from app.core.limits import DEFAULT_FORMAT, FORMATS, Format

__all__ = ["DEFAULT_FORMAT", "FORMATS", "Format", "render"]


def render(
    body: Mapping[str, Any],
    fmt: str = DEFAULT_FORMAT,
    *,
    stable_prefix: int | None = None,
    tool_errors: Sequence[bool] = (),
) -> dict[str, Any]:
    """`body` in format `fmt` (one of FORMATS), with `"format"` naming it.

    `stable_prefix` is how many leading Chat messages form the stable prefix; None
    takes `usage.stable_prefix_messages` (the messages shared with the previous
    payload) when it is positive, else everything before the newest step
    (`default_stable_prefix`), which is what the next call will repeat.
    `tool_errors[i]` says whether the i-th tool message of the payload records a
    failed tool call (see `tool_error_flags`).
    """
    out = {k: v for k, v in body.items() if k not in ("messages", "tools")}
    out["format"] = fmt
    messages: Sequence[Mapping[str, Any]] = body["messages"]
    tools: Sequence[Mapping[str, Any]] = body["tools"]
    if fmt == "responses":
        out["input"] = responses.input_items(messages)
        out["tools"] = responses.tools(tools)
    elif fmt == "anthropic":
        prefix = stable_prefix if stable_prefix is not None else _stable_prefix(body)
        out.update(
            anthropic.convert(messages, tools, stable_prefix=prefix, tool_errors=tool_errors)
        )
    elif fmt == "openai":
        out["messages"] = list(messages)
        out["tools"] = list(tools)
    else:
        raise ValueError(f"unknown format {fmt!r}")
    return out


def _stable_prefix(body: Mapping[str, Any]) -> int:
    usage = body.get("usage")
    shared = usage.get("stable_prefix_messages") if isinstance(usage, Mapping) else None
    if isinstance(shared, int) and shared > 0:
        return shared
    return default_stable_prefix(body["messages"])


def default_stable_prefix(messages: Sequence[Mapping[str, Any]]) -> int:
    """The messages before the newest step: everything up to (not including) the last
    user or assistant message and the tool results after it. The newest step is what
    the previous call did not have; what precedes it is what two calls share."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") in ("user", "assistant"):
            return index
    return len(messages)


def tool_error_flags(
    history: Sequence[LoggedMessage], kept_seqs: Sequence[int]
) -> tuple[bool, ...]:
    """For each tool message the payload sends, in order: was it logged with an `error`?

    The payload's tool messages are exactly the tool-role messages among
    `kept_seqs` (previews keep their role and call id), in seq order.
    """
    by_seq = {m.seq: m for m in history}
    flags: list[bool] = []
    for seq in kept_seqs:
        message = by_seq.get(seq)
        if message is not None and message.role == "tool":
            flags.append(message.error is not None)
    return tuple(flags)


__all__ = [
    "DEFAULT_FORMAT",
    "FORMATS",
    "Format",
    "default_stable_prefix",
    "render",
    "tool_error_flags",
]
