"""The extractive summary: deterministic, no model, nothing the user said silently gone.

Used when no model is configured and as the fallback when the model fails.
Every user message of the range leaves a timeline entry (its head plus its
key lines), every constraint/preference sentence of the user is kept
verbatim in `user_prefs`, decisions and TODOs are kept from any speaker, tool
calls become one-liners `called name(args) → result`, and identifiers are
listed as facts. `fit_to_tokens` then trims to a token cap, timeline first and
user constraints last; pinned messages and carried anchors are never trimmed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from app.compaction.provenance import cite_seqs, shorten_item
from app.compaction.signals import classify, extract_identifiers, shorten, split_sentences
from app.compaction.summary import (
    StructuredSummary,
    dedupe,
    render_summary,
)
from app.core.conversation import LoggedMessage, call_function
from app.core.tokens.counter import TextCounter

_LABELS = {
    "en": {
        "user": "User: ",
        "assistant": "Assistant: ",
        "tool": "Tool result: ",
        "ids": "Identifiers: ",
    },
    "zh": {"user": "用户：", "assistant": "助手：", "tool": "工具结果：", "ids": "涉及的标识："},
}
_KEY_TAGS = {"constraint", "preference", "decision", "todo"}


def _labels(lang: str) -> dict[str, str]:
    return _LABELS["zh"] if lang == "zh" else _LABELS["en"]


def tool_call_line(call: dict[str, object], result: str | None, lang: str = "en") -> str:
    """`called name(args-short) → result-short`, the one-line memory of a tool call."""
    name, args = call_function(call) or ("?", "")
    verb = "调用" if lang == "zh" else "called"
    line = f"{verb} {name}({shorten(args, 80)})"
    if result is not None:
        line += " → " + (shorten(result, 100, tail_chars=30) or "∅")
    return line


def message_gist(m: LoggedMessage, results: dict[str, str], lang: str = "en") -> str:
    """The text of a message, or its tool calls as one-liners when it has no text."""
    parts = [m.text] if m.text.strip() else []
    for call in m.body.get("tool_calls") or ():
        if isinstance(call, dict):
            parts.append(tool_call_line(call, results.get(str(call.get("id"))), lang))
    return "\n".join(parts)


def tool_results(messages: Sequence[LoggedMessage]) -> dict[str, str]:
    return {str(m.body.get("tool_call_id")): m.text for m in messages if m.role == "tool"}


def _argument_values(call: dict[str, Any]) -> str:
    """The argument values of a call (not its JSON keys), where identifiers live."""
    raw = (call_function(call) or ("", ""))[1]
    try:
        parsed = json.loads(raw)
    except ValueError:
        return raw
    values: list[str] = []
    stack = [parsed]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))
        elif item is not None:
            values.append(str(item))
    return "\n".join(values)


def pinned_entries(messages: Sequence[LoggedMessage], lang: str = "en") -> tuple[str, ...]:
    """Pinned messages verbatim (tool-call-only messages as one-liners), for `pinned`,
    each citing its seq."""
    results = tool_results(messages)
    return tuple(
        cite_seqs(message_gist(m, results, lang), (m.seq,))
        for m in messages
        if m.pinned and m.counts_in_context
    )


def _condense(text: str, key_lines: Sequence[str]) -> str:
    head = shorten(text, 160)
    extra = [shorten(s, 200) for s in key_lines if shorten(s, 200) not in head]
    return " | ".join([head, *extra[:3]])


def extractive_summary(messages: Sequence[LoggedMessage], *, lang: str) -> StructuredSummary:
    """A summary of `messages` built from their own words (see the module docstring), each
    item citing the seqs it was taken from."""
    labels = _labels(lang)
    results = tool_results(messages)
    answered = set(results)
    result_seq = {str(m.body.get("tool_call_id")): m.seq for m in messages if m.role == "tool"}
    facts_ids: list[tuple[str, int]] = []
    decisions: list[tuple[str, int]] = []
    todos: list[tuple[str, int]] = []
    prefs: list[tuple[str, int]] = []
    timeline: list[str] = []
    for m in messages:
        if not m.counts_in_context:
            continue
        text = m.text
        calls = [c for c in m.body.get("tool_calls") or () if isinstance(c, dict)]
        sentences = split_sentences(text) if m.role != "tool" else []
        tagged = [(s, classify(s)) for s in sentences]
        key = [s for s, tags in tagged if tags & _KEY_TAGS]
        here = (m.seq,)
        if m.role == "user":
            timeline.append(cite_seqs(labels["user"] + _condense(text, key), here))
            prefs.extend((s, m.seq) for s, tags in tagged if tags & {"constraint", "preference"})
        elif m.role == "assistant":
            if text.strip():
                timeline.append(cite_seqs(labels["assistant"] + shorten(text, 120), here))
            for call in calls:
                cid = str(call.get("id"))
                line = tool_call_line(call, results.get(cid), lang)
                timeline.append(cite_seqs(line, (m.seq, result_seq.get(cid, m.seq))))
        elif m.role == "tool" and str(m.body.get("tool_call_id")) not in answered:
            timeline.append(cite_seqs(labels["tool"] + shorten(text, 100, tail_chars=30), here))
        decisions.extend((s, m.seq) for s, tags in tagged if "decision" in tags)
        todos.extend((s, m.seq) for s, tags in tagged if "todo" in tags)
        if m.role != "tool":
            found = extract_identifiers("\n".join([text, *map(_argument_values, calls)]))
            facts_ids.extend((i, m.seq) for i in found)
    first: dict[str, int] = {}
    for ident, seq in facts_ids:
        first.setdefault(ident, seq)
    ids = [i for i in dedupe(first) if i in first][:60]
    facts = tuple(
        cite_seqs(labels["ids"] + ", ".join(chunk), {first[i] for i in chunk})
        for chunk in (ids[i : i + 12] for i in range(0, len(ids), 12))
    )

    def cited(found: list[tuple[str, int]]) -> tuple[str, ...]:
        return dedupe(cite_seqs(shorten(s, 300), (seq,)) for s, seq in found)

    return StructuredSummary(
        facts=facts,
        decisions=cited(decisions),
        open_todos=cited(todos),
        user_prefs=cited(prefs),
        timeline=tuple(timeline),
        pinned=pinned_entries(messages, lang),
    )


Stage = Callable[[StructuredSummary, int], StructuredSummary]


def _fixed_tokens(
    summary: StructuredSummary, lang: str, counter: TextCounter, through_seq: int | None
) -> int:
    """Tokens of the parts outside the cap (pinned, carried anchors, the user's messages,
    the artifacts: each has a budget of its own)."""
    fixed = StructuredSummary(
        pinned=summary.pinned,
        carried_anchors=summary.carried_anchors,
        user_messages=summary.user_messages,
        artifacts=summary.artifacts,
    )
    return counter.count_text(render_summary(fixed, lang, through_seq=through_seq))


def tokens_over_cap(
    summary: StructuredSummary,
    *,
    lang: str,
    max_tokens: int,
    counter: TextCounter,
    through_seq: int | None = None,
) -> int:
    """How far `summary` is over `max_tokens` as `fit_to_tokens` counts it (<= 0: it fits)."""
    total = counter.count_text(render_summary(summary, lang, through_seq=through_seq))
    return total - _fixed_tokens(summary, lang, counter, through_seq) - max_tokens


def _drop_oldest(name: str) -> Stage:
    def stage(s: StructuredSummary, k: int) -> StructuredSummary:
        items: tuple[str, ...] = getattr(s, name)
        return replace(s, **{name: items[k:]})

    return stage


def fit_to_tokens(
    summary: StructuredSummary,
    *,
    lang: str,
    max_tokens: int,
    counter: TextCounter,
    through_seq: int | None = None,
) -> StructuredSummary:
    """Trim `summary` until its rendering fits `max_tokens` (pinned, anchors, the
    user's messages and the artifacts excepted: they have budgets of their own).

    Order: old timeline entries (the last three kept), long items shortened,
    old TODOs and facts, the rest of the timeline, then user constraints and
    decisions shortened and, only as a last resort, dropped oldest first.
    """

    def cost(s: StructuredSummary) -> int:
        return counter.count_text(render_summary(s, lang, through_seq=through_seq))

    budget = max_tokens + _fixed_tokens(summary, lang, counter, through_seq)
    if cost(summary) <= budget:
        return summary

    def shorten_sections(names: Sequence[str], n: int) -> Stage:
        def stage(s: StructuredSummary, _: int) -> StructuredSummary:
            return replace(
                s, **{k: tuple(shorten_item(i, n) for i in getattr(s, k)) for k in names}
            )

        return stage

    plan: list[tuple[Stage, str | None, int]] = [
        (_drop_oldest("timeline"), "timeline", 3),
        (shorten_sections(("timeline", "facts", "open_todos"), 120), None, 0),
        (_drop_oldest("open_todos"), "open_todos", 3),
        (_drop_oldest("facts"), "facts", 0),
        (_drop_oldest("timeline"), "timeline", 0),
        (_drop_oldest("open_todos"), "open_todos", 0),
        (shorten_sections(("user_prefs", "decisions"), 160), None, 0),
        (_drop_oldest("decisions"), "decisions", 0),
        (_drop_oldest("user_prefs"), "user_prefs", 0),
    ]
    current = summary
    for stage, name, keep in plan:
        if name is None:
            current = stage(current, 0)
        else:
            most = max(0, len(getattr(current, name)) - keep)
            lo, hi = 0, most
            # Smallest number of oldest items to drop so that the rest fits.
            while lo < hi:
                mid = (lo + hi) // 2
                if cost(stage(current, mid)) <= budget:
                    hi = mid
                else:
                    lo = mid + 1
            current = stage(current, lo)
        if cost(current) <= budget:
            return current
    return current
