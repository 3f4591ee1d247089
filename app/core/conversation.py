"""The structure of a conversation, in one place (pure): logged messages, tool groups,
steps and turns, and the summary as a message.

- A *tool group* is an assistant message with `tool_calls` and the tool messages
  answering each call id (SPEC §1); it is kept or dropped whole. `split_groups`
  cuts a history into the units a payload keeps or drops (app/context/).
- A *step* is a complete tool group with any assistant text just before it, or a
  lone assistant message; a *turn* is a user message and everything up to the
  next one (SPEC §5). `split_turns` and `split_steps` cut a history into the
  units compaction plans with (app/compaction/turns.py says how it uses them).

Nothing here touches the database or HTTP, so every layer may use it and it is
tested directly.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from app.core.limits import Role


def is_summary_class(role: str, metadata: Mapping[str, Any] | None) -> bool:
    """A `system` message the client logged as a summary (`metadata.kind == "summary"`).

    Historical system messages are left out of the history sent, except these
    (SPEC §3): assembly sends them as summary units (`split_groups` below).
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


# --- tool groups: the units of a payload ----------------------------------------------

SetAsideAction = Literal["excluded", "dropped"]
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
    action: SetAsideAction
    rule: str


def is_summary_message(message: LoggedMessage) -> bool:
    return is_summary_class(message.role, message.metadata)


class _Open:
    __slots__ = ("answers", "call", "waiting")

    def __init__(self, call: LoggedMessage, call_ids: tuple[str, ...]) -> None:
        self.call = call
        self.waiting = set(call_ids)
        self.answers: list[LoggedMessage] = []


def split_groups(history: Iterable[LoggedMessage]) -> tuple[list[Group], list[SetAside]]:
    """One pass over `history` (seq order) into sendable units and set-aside messages.

    A unit is a user message, an assistant message without calls, a summary-class
    system message, or a whole tool group; a turn starts at each user message (units
    before the first are turn 0). Set aside, with their reason: `include_in_context:
    false` (excluded, `ui_only`); historical system messages (excluded,
    `system_message`); a group whose results are not all present at the end
    (excluded, `in_flight`; an assistant with an `error` record and text is still
    sent without its calls, so "continue" has an anchor); a tool message with no
    open call before it, or a group interrupted by another message (dropped,
    `tool_group`).
    """
    groups: list[Group] = []
    aside: list[SetAside] = []
    turn = 0
    open_group: _Open | None = None

    def abandon(rule: str, action: SetAsideAction) -> None:
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
        if m.role == "system" and not is_summary_message(m):
            # Left out of every payload, so it interrupts nothing: a note logged between
            # a call and its result made the whole group vanish from the payload.
            aside.append(SetAside(m, "excluded", "system_message"))
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
        else:  # a summary-class system message (the others are set aside above)
            groups.append(Group((m,), "summary", turn))

    if open_group is not None:
        call = open_group.call
        if call.error is not None and call.text and not open_group.answers:
            groups.append(Group((call,), "assistant", turn, strip_tool_calls=True))
        else:
            abandon("in_flight", "excluded")
    return groups, aside


# --- turns and steps: the units of compaction -------------------------------------------


def tokens_in_context(messages: Sequence[LoggedMessage]) -> int:
    """The tokens of the messages that reach the model."""
    return sum(m.token_count for m in messages if m.counts_in_context)


@dataclass(frozen=True, slots=True)
class Turn:
    messages: tuple[LoggedMessage, ...]

    @property
    def first_seq(self) -> int:
        return self.messages[0].seq

    @property
    def last_seq(self) -> int:
        return self.messages[-1].seq

    @property
    def has_user(self) -> bool:
        return self.messages[0].role == "user"

    @property
    def tokens(self) -> int:
        return tokens_in_context(self.messages)


def split_turns(messages: Sequence[LoggedMessage]) -> list[Turn]:
    """Turns in log order; a leading run of non-user messages is a turn of its own."""
    turns: list[list[LoggedMessage]] = []
    for message in messages:
        if message.role == "user" or not turns:
            turns.append([message])
        else:
            turns[-1].append(message)
    return [Turn(tuple(t)) for t in turns]


@dataclass(frozen=True, slots=True)
class Unit:
    """A keep-or-compact unit: a user message, a step, or a leading run of other messages.

    `start`/`end` index the planned messages; `closed_before` says whether every
    tool call before `start` has all its results before `start` (a valid cut).
    """

    start: int
    end: int
    kind: Literal["user", "step", "other"]
    turn: int
    open: bool
    tokens: int
    closed_before: bool


def split_steps(messages: Sequence[LoggedMessage]) -> list[Unit]:
    """Users, steps and leftovers in log order: a step is a complete tool group with any
    assistant text just before it, or a lone assistant message; tool results, UI-only
    and historical system messages belong to the step they follow; a step holding a
    group still missing a result is open, unless the user and then the assistant moved
    on after it (abandoned)."""
    answered_anywhere = {str(m.body.get("tool_call_id")) for m in messages if m.role == "tool"}
    starts: list[int] = []
    for i, m in enumerate(messages):
        if i == 0 or m.role == "user":
            starts.append(i)
        elif m.role == "assistant":
            prev = messages[i - 1]
            text_then_group = (
                prev.role == "assistant" and not prev.tool_call_ids and bool(m.tool_call_ids)
            )
            if not text_then_group:
                starts.append(i)
    # Which starts are clean cuts: no call before them still waiting for a result there.
    # A call with no result anywhere that the user moved on from (a user message, then
    # the assistant answering it) is abandoned, not waiting: it held back every later
    # cut, so one call left unanswered (or whose result a tail cut deleted) stopped the
    # session's compactions for good. A result that does come after a user's interjection,
    # before the assistant speaks again, still keeps its call with it.
    outstanding: set[str] = set()
    interrupted: set[str] = set()
    abandoned: set[str] = set()
    closed_at: dict[int, bool] = {}
    start_set = set(starts)
    for i, m in enumerate(messages):
        if m.role == "assistant" and interrupted:
            outstanding -= interrupted
            abandoned |= interrupted
            interrupted = set()
        if i in start_set:
            closed_at[i] = not outstanding
        if m.role == "tool":
            outstanding.discard(str(m.body.get("tool_call_id")))
        elif m.role == "user":
            interrupted |= outstanding - answered_anywhere
        outstanding.update(m.tool_call_ids)
    units: list[Unit] = []
    turn = 0
    for k, start in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(messages)
        first = messages[start]
        if first.role == "user" and start > 0:
            turn += 1
        kind: Literal["user", "step", "other"] = (
            "user" if first.role == "user" else "step" if first.role == "assistant" else "other"
        )
        chunk = messages[start:end]
        is_open = any(
            cid not in answered_anywhere and cid not in abandoned
            for m in chunk
            for cid in m.tool_call_ids
        )
        units.append(
            Unit(start, end, kind, turn, is_open, tokens_in_context(chunk), closed_at[start])
        )
    return units


def call_ids(messages: Iterable[LoggedMessage], made: set[str], answered: set[str]) -> None:
    """Adds the call ids the messages make (assistant) and answer (tool) to the sets."""
    for m in messages:
        if m.role == "tool":
            call_id = m.body.get("tool_call_id")
            if call_id:
                answered.add(str(call_id))
        elif m.role == "assistant":
            made.update(m.tool_call_ids)


def summary_message(text: str) -> dict[str, Any]:
    # No range in this head: a compaction changes it, and what follows the first change
    # misses a provider's prefix cache. render_summary ends the text with it.
    return {"role": "system", "content": f"Summary of the conversation so far:\n{text}"}
