"""Units of history: single messages and whole tool groups, with their turn.

A *unit* is what a strategy keeps or drops: a user message, an assistant
message without calls, a summary-class system message, or a tool group (an
assistant message with `tool_calls` and the tool messages answering every call
id, which the API requires to follow it directly). A *turn* starts at each
user message; units before the first user message are turn 0.

Messages that can never be sent are set aside here with their reason, so every
strategy sees only sendable units:

- `include_in_context: false` → excluded, `ui_only`;
- historical system messages → excluded, `system_message` (except summary-class:
  `metadata.kind == "summary"`);
- a tool group whose results are not all present yet at the end of the input →
  excluded, `in_flight` (an assistant with an `error` record and text is still
  sent, without its unanswered calls, so "continue" has an anchor);
- a tool message with no open call before it, or a group interrupted by another
  message → dropped, `tool_group` (e.g. the read window began mid-group).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from app.context.types import Action
from app.messages.types import LoggedMessage, is_summary_class

UnitKind = Literal["user", "assistant", "tool_group", "summary"]


@dataclass(frozen=True, slots=True)
class Group:
    messages: tuple[LoggedMessage, ...]
    kind: UnitKind
    turn: int
    strip_tool_calls: bool = False


@dataclass(frozen=True, slots=True)
class SetAside:
    message: LoggedMessage
    action: Action
    rule: str


def is_summary_message(message: LoggedMessage) -> bool:
    return is_summary_class(message.role, message.metadata)


class _Open:
    __slots__ = ("answers", "call", "waiting")

    def __init__(self, call: LoggedMessage, call_ids: tuple[str, ...]) -> None:
        self.call = call
        self.waiting = set(call_ids)
        self.answers: list[LoggedMessage] = []


def split_units(history: Iterable[LoggedMessage]) -> tuple[list[Group], list[SetAside]]:
    """One pass over `history` (seq order) into sendable units and set-aside messages."""
    groups: list[Group] = []
    aside: list[SetAside] = []
    turn = 0
    open_group: _Open | None = None

    def abandon(rule: str, action: Action) -> None:
        nonlocal open_group
        if open_group is not None:
            for m in (open_group.call, *open_group.answers):
                aside.append(SetAside(m, action, rule))
            open_group = None

    for m in history:
        if not m.include_in_context:
            aside.append(SetAside(m, "excluded", "ui_only"))
            continue
        if m.role == "tool":
            call_id = m.body.get("tool_call_id")
            if open_group is not None and call_id in open_group.waiting:
                open_group.waiting.discard(call_id)
                open_group.answers.append(m)
                if not open_group.waiting:
                    members = (open_group.call, *open_group.answers)
                    groups.append(Group(members, "tool_group", turn))
                    open_group = None
            else:
                aside.append(SetAside(m, "dropped", "tool_group"))
            continue
        abandon("tool_group", "dropped")
        if m.role == "user":
            turn += 1
            groups.append(Group((m,), "user", turn))
        elif m.role == "assistant":
            call_ids = m.tool_call_ids
            if call_ids:
                open_group = _Open(m, call_ids)
            else:
                groups.append(Group((m,), "assistant", turn))
        elif is_summary_message(m):
            groups.append(Group((m,), "summary", turn))
        else:
            aside.append(SetAside(m, "excluded", "system_message"))

    if open_group is not None:
        call = open_group.call
        if call.error is not None and call.text and not open_group.answers:
            groups.append(Group((call,), "assistant", turn, strip_tool_calls=True))
        else:
            abandon("in_flight", "excluded")
    return groups, aside
