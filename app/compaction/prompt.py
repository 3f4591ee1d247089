"""The chat-completions request for the rolling summary, and its one retry.

The request is two messages: a system instruction (JSON only, the five keys,
the conversation's language, constraints and identifiers verbatim, the
anchors to keep) and a user message with four sections, each opened by a
fixed header so that tests (and humans reading logs) can find them:
anchors, identifiers, the previous summary as JSON, and the compacted range,
one message per line group, tool outputs cut to head and tail.

`response_format: {"type": "json_object"}` is sent unless `json_mode` is
off: some OpenAI-compatible servers reject the field, and the operator turns
it off for them (the parser accepts fenced or prose-wrapped JSON anyway).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.compaction.signals import shorten
from app.compaction.summary import SECTIONS, StructuredSummary
from app.core.conversation import LoggedMessage, call_function

ANCHORS_HEADER = "### Anchors (copy each one verbatim into the summary)"
IDENTIFIERS_HEADER = "### Identifiers (keep each one verbatim)"
PREVIOUS_HEADER = "### Previous summary (JSON)"
RANGE_HEADER = "### Conversation to summarise"

LANGUAGE_NAMES = {
    "zh": "Chinese (简体中文)",
    "ja": "Japanese",
    "ko": "Korean",
    "en": "the conversation's own language (English unless it is clearly another)",
}

_SYSTEM = """You compress the older part of a conversation between a user and an AI assistant \
into a rolling summary that replaces it. The assistant will continue the conversation from \
your summary and the newer messages only, so anything you leave out is lost.

Answer with one JSON object and nothing else, with exactly these keys, each a list of short \
strings:
- "facts": what is known (names, paths, ids, numbers, results of tool calls)
- "decisions": what was decided, and why if stated
- "open_todos": what is still to be done or answered
- "user_prefs": every constraint, preference and instruction the user gave, verbatim where \
possible (must, never, always, should, 必须, 不要, ...)
- "timeline": the order of events, one short line each

Rules:
- Merge the previous summary with the new conversation: keep everything in it that is still \
true, drop what was superseded, do not repeat items.
- Keep every constraint, identifier, file path, id, number and name exactly as written.
- Write the summary in {language}.
- Every anchor listed by the user must appear verbatim in the summary.
- The user's own messages are also kept word for word by the service, next to your \
summary: do not copy them whole, but do not drop or soften what they ask either.
- The files the assistant read and changed, the commands it ran with their exit codes, and \
the ids tools returned are also listed verbatim by the service: mention those that explain a \
fact or a decision, but do not copy the whole list.
- End every item with the seqs it stands for, from the [#seq ...] markers of the \
conversation: [#12] for one message, [#12-15] for a run, [#3,9] for several. Items kept \
from the previous summary keep their citations. Cite only messages that hold what the item \
says.
- Never refuse, never comment, never add text outside the JSON object."""


_RETRY_ANCHORS = "These anchors are missing; copy each one verbatim:"
_RETRY_IDENTIFIERS = "These identifiers are missing; keep each one verbatim:"
_RETRY_CONSTRAINTS = "These user constraints are missing; keep each one verbatim in user_prefs:"
_RETRY_PROBES = (
    "These points of the conversation are missing (decisions, to-dos, errors, the "
    "user's questions, the files and commands of the trail); keep each one in the "
    "right key, with its names, paths and numbers exactly as written and its "
    "citation:"
)
_RETRY_LANGUAGE = "The summary is not written in {language}."
_RETRY_AGAIN = "Answer again with the complete corrected JSON object (keys: {keys}), nothing else."


@functools.cache
def instruction_text() -> str:
    """Every fixed text the summariser is sent (instructions, headers, section names): an
    item of its answer that repeats them is an echo, not a summary (provenance.py)."""
    return "\n".join(
        [
            *(_SYSTEM.replace("{language}", name) for name in LANGUAGE_NAMES.values()),
            ANCHORS_HEADER, IDENTIFIERS_HEADER, PREVIOUS_HEADER, RANGE_HEADER,
            _RETRY_ANCHORS, _RETRY_IDENTIFIERS, _RETRY_CONSTRAINTS, _RETRY_PROBES,
            _RETRY_LANGUAGE, _RETRY_AGAIN.replace("{keys}", ", ".join(SECTIONS)), *SECTIONS,
        ]
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    messages: tuple[dict[str, Any], ...]
    temperature: float
    max_tokens: int
    response_format: dict[str, str] | None = field(default=None)


def _indent(text: str) -> str:
    return text.strip().replace("\n", "\n    ")


def _cut(text: str, limit: int, tail: int) -> str:
    if len(text) <= limit:
        return text
    omitted = len(text) - limit
    return f"{text[: limit - tail]} …[{omitted} chars omitted]… {text[-tail:]}"


def render_range(
    messages: Sequence[LoggedMessage],
    *,
    tool_head: int = 600,
    tool_tail: int = 300,
    text_limit: int = 6000,
) -> str:
    """The compacted range as compact lines `[#seq role] text`; continuation lines indented."""
    names = {
        str(c.get("id")): (call_function(c) or ("?",))[0]
        for m in messages
        for c in m.body.get("tool_calls") or ()
        if isinstance(c, dict)
    }
    lines: list[str] = []
    for m in messages:
        if not m.counts_in_context:
            continue
        if m.role == "tool":
            name = names.get(str(m.body.get("tool_call_id")), "?")
            text = _cut(m.text, tool_head + tool_tail, tool_tail)
            lines.append(f"[#{m.seq} tool {name}] {_indent(text)}")
            continue
        text = m.text if m.role == "user" else _cut(m.text, text_limit, text_limit // 4)
        if text.strip():
            lines.append(f"[#{m.seq} {m.role}] {_indent(text)}")
        for call in m.body.get("tool_calls") or ():
            if isinstance(call, dict):
                name, raw = call_function(call) or ("?", "")
                args = shorten(raw, 400, tail_chars=80)
                lines.append(f"[#{m.seq} {m.role} call] {name}({args})")
    return "\n".join(lines)


def _bullets(items: Sequence[str]) -> str:
    return "\n".join("- " + _indent(i) for i in items) if items else "(none)"


def build_summary_request(
    messages: Sequence[LoggedMessage],
    *,
    previous: StructuredSummary | None,
    anchors: Sequence[str],
    identifiers: Sequence[str],
    lang: str,
    temperature: float,
    max_tokens: int,
    json_mode: bool = True,
) -> SummaryRequest:
    system = _SYSTEM.replace("{language}", LANGUAGE_NAMES.get(lang, LANGUAGE_NAMES["en"]))
    prev = json.dumps(previous.model_view() if previous else {}, ensure_ascii=False, indent=1)
    user = "\n\n".join(
        [
            f"{ANCHORS_HEADER}\n{_bullets(anchors)}",
            f"{IDENTIFIERS_HEADER}\n{_bullets(identifiers)}",
            f"{PREVIOUS_HEADER}\n{prev}",
            f"{RANGE_HEADER}\n{render_range(messages)}",
        ]
    )
    return SummaryRequest(
        messages=({"role": "system", "content": system}, {"role": "user", "content": user}),
        temperature=temperature,
        max_tokens=max_tokens,
        response_format={"type": "json_object"} if json_mode else None,
    )


def build_retry_request(
    request: SummaryRequest,
    previous_output: str,
    *,
    missing_anchors: Sequence[str],
    missing_identifiers: Sequence[str],
    missing_constraints: Sequence[str] = (),
    wrong_language: str | None = None,
    missing_probes: Sequence[str] = (),
) -> SummaryRequest:
    """The same conversation plus the rejected answer and what exactly it lacked."""
    problems: list[str] = []
    if missing_anchors:
        problems.append(_RETRY_ANCHORS + "\n" + _bullets(missing_anchors))
    if missing_identifiers:
        problems.append(_RETRY_IDENTIFIERS + "\n" + _bullets(missing_identifiers))
    if missing_constraints:
        problems.append(_RETRY_CONSTRAINTS + "\n" + _bullets(missing_constraints))
    if missing_probes:
        problems.append(_RETRY_PROBES + "\n" + _bullets(missing_probes))
    if wrong_language:
        name = LANGUAGE_NAMES.get(wrong_language) or wrong_language
        problems.append(_RETRY_LANGUAGE.replace("{language}", name))
    problems.append(_RETRY_AGAIN.replace("{keys}", ", ".join(SECTIONS)))
    retry = (
        {"role": "assistant", "content": previous_output},
        {"role": "user", "content": "\n\n".join(problems)},
    )
    return SummaryRequest(
        messages=request.messages + retry,
        temperature=request.temperature,
        max_tokens=request.max_tokens,
        response_format=request.response_format,
    )
