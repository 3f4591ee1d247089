"""The structured rolling summary: its shape, parsing model output, rendering.

A summary is five lists of short statements (`facts`, `decisions`,
`open_todos`, `user_prefs`, `timeline`) written by the model or by the
extractive fallback, plus lists contextd fills in itself and the model
never writes: `pinned` (pinned messages of compacted ranges, verbatim),
`user_messages` (the user's own messages of compacted ranges, verbatim, see
`user_messages.py`), `artifacts` (the agent's trail: files, commands and how
they ended, values tools returned, verbatim, see `artifacts.py`) and
`carried_anchors` (session anchors the summary failed to keep, verbatim). A
model's own `user_messages` or `artifacts` key is ignored.

Model output is accepted only if it is one JSON object with those keys, not
all empty, and not a refusal or an error message in disguise; anything else
raises `SummaryRejected` and is never stored as a summary. Within it, what is
valid is taken as a small model writes it (a section that is one string, items
that are numbers or flat objects, nested lists), and what is not (booleans,
nulls, deeper structures) is left out: the checks and patches after the parse
fill in what the model missed. An object whose sections hold nothing valid at all
is `wrong_types`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

from app.compaction.artifacts import render_artifacts
from app.compaction.provenance import split_cites, strip_cites
from app.compaction.signals import normalise
from app.core.jsonsafe import storable_text

SECTIONS = ("facts", "decisions", "open_todos", "user_prefs", "timeline")
SCHEMA_VERSION = 1

RejectReason = Literal[
    "empty",
    "refusal",
    "error_text",
    "not_json",
    "not_a_summary",
    "wrong_types",
    "all_empty",
    "truncated",
]


class SummaryRejected(ValueError):
    """Model output that must not be stored as a summary; `reason` is a stable code."""

    def __init__(self, reason: RejectReason, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason: RejectReason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class StructuredSummary:
    facts: tuple[str, ...] = ()
    decisions: tuple[str, ...] = ()
    open_todos: tuple[str, ...] = ()
    user_prefs: tuple[str, ...] = ()
    timeline: tuple[str, ...] = ()
    pinned: tuple[str, ...] = ()
    carried_anchors: tuple[str, ...] = ()
    # The user's own messages of every compacted range, verbatim (see user_messages.py).
    user_messages: tuple[str, ...] = ()
    # The agent's trail of every compacted range, `kind: text` items (see artifacts.py).
    artifacts: tuple[str, ...] = ()

    def is_empty(self) -> bool:
        return not any(getattr(self, name) for name in SECTIONS)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {f.name: list(getattr(self, f.name)) for f in fields(self)}
        data["schema_version"] = SCHEMA_VERSION
        # Each item's citation apart, for machines: `seqs[section][i]` is the list of
        # `[from, to]` ranges item i of the section stands for (empty: no citation, as in
        # summaries stored before provenance). The items themselves end with it too.
        data["seqs"] = {
            f.name: [[list(r) for r in split_cites(i)[1]] for i in getattr(self, f.name)]
            for f in fields(self)
            if getattr(self, f.name)
        }
        return data

    def model_view(self) -> dict[str, list[str]]:
        """The five sections only: what the model is shown as the previous summary."""
        return {name: list(getattr(self, name)) for name in SECTIONS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StructuredSummary:
        """Lenient load of a stored summary: unknown keys and non-string items are dropped."""
        values: dict[str, tuple[str, ...]] = {}
        for f in fields(cls):
            raw = data.get(f.name)
            if isinstance(raw, list):
                values[f.name] = tuple(str(v) for v in raw if isinstance(v, str) and v.strip())
        return cls(**values)


def summary_token_cap(
    compressible_tokens: int, ratio: float = 0.3, floor: int = 256, ceiling: int | None = None
) -> int:
    """Output cap of a summary: `ratio` of what it replaces, at least `floor` so JSON fits."""
    cap = max(floor, int(compressible_tokens * ratio))
    return min(cap, ceiling) if ceiling else cap


_REFUSAL = re.compile(
    r"^\W*(i'?m sorry|i am sorry|sorry,|i apologi[sz]e|i can(?:no|')t|i cannot|i'?m unable|"
    r"i am unable|i won'?t|as an ai|unfortunately,? i)"
    r"|^\W*(抱歉|对不起|很抱歉|我无法|我不能|作为一个?(?:AI|人工智能))",
    re.IGNORECASE,
)
_ERROR = re.compile(
    r"^\W*(error\b|exception\b|traceback|internal server error|service unavailable|bad gateway|"
    r"rate limit|too many requests|upstream|<!doctype|<html|错误|出错)",
    re.IGNORECASE,
)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


# A reasoning model's thoughts, which vLLM and Ollama leave in the answer: they may quote
# the previous summary's JSON, which is not the answer.
_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)


def _objects(text: str) -> list[dict[str, Any]]:
    """The JSON objects of `text`: its fenced blocks, then the top-level objects of the
    rest in order (an object's inner objects are not candidates of their own)."""
    found: list[dict[str, Any]] = []
    # Not strict: a small model copies multi-line tool output into a string with its raw
    # newlines and tabs, which strict JSON refuses (and the whole answer with them).
    decoder = json.JSONDecoder(strict=False)
    for block in _FENCE.findall(text):
        try:
            value = decoder.decode(block.strip())
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    at = text.find("{")
    while at >= 0:
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        at = text.find("{", end)
    return found


def _find_object(text: str) -> dict[str, Any] | None:
    """The answer's summary: the last object with a summary section, since a model that
    explains first may quote an earlier one ("the previous summary was {...}") or an
    empty one; else the first object, for the reason it is not one."""
    objects = _objects(_THINK.sub(" ", text))
    summaries = [o for o in objects if any(name in o for name in SECTIONS)]
    if summaries:
        return summaries[-1]
    return objects[0] if objects else None


def _scalar(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return storable_text(str(value)).strip() or None


def _item(value: Any) -> list[str]:
    """The statements in one item: itself if a string or number; a flat object's
    `key: value` pairs on one line; a list's own scalars; nothing else."""
    text = _scalar(value)
    if text is not None:
        return [text]
    if isinstance(value, dict):
        pairs = [(k, _scalar(v)) for k, v in value.items()]
        joined = "; ".join(f"{k}: {v}" for k, v in pairs if v is not None)
        return [joined] if joined else []
    if isinstance(value, list):
        return [t for t in map(_scalar, value) if t is not None]
    return []


def _clean_list(value: Any) -> tuple[tuple[str, ...], bool]:
    """(the section's valid statements, whether something in it was not valid)."""
    if value is None:
        return (), False
    raw = value if isinstance(value, list) else [value]
    items: list[str] = []
    invalid = False
    for entry in raw:
        found = _item(entry)
        invalid |= not found and not (isinstance(entry, str) and not entry.strip())
        items.extend(found)
    return tuple(items), invalid


def parse_summary_output(text: str) -> StructuredSummary:
    """The summary in a model's answer, or `SummaryRejected` saying why there is none."""
    stripped = (text or "").strip()
    if not stripped:
        raise SummaryRejected("empty", "the model returned no text")
    obj = _find_object(stripped)
    if obj is None:
        if _REFUSAL.search(stripped):
            raise SummaryRejected("refusal", stripped[:120])
        if _ERROR.search(stripped):
            raise SummaryRejected("error_text", stripped[:120])
        raise SummaryRejected("not_json", "no JSON object in the output")
    if not any(name in obj for name in SECTIONS):
        reason: RejectReason = "error_text" if "error" in obj else "not_a_summary"
        raise SummaryRejected(reason, f"keys {sorted(obj)[:8]} are not the summary's")
    cleaned = {name: _clean_list(obj.get(name)) for name in SECTIONS}
    summary = StructuredSummary(**{name: items for name, (items, _) in cleaned.items()})
    if summary.is_empty():
        if any(invalid for _, invalid in cleaned.values()):
            raise SummaryRejected("wrong_types", "no section holds a string")
        raise SummaryRejected("all_empty", "every section is empty")
    items = [i for name in SECTIONS for i in getattr(summary, name)]
    if all(_REFUSAL.search(i) or _ERROR.search(i) for i in items):
        raise SummaryRejected("refusal", items[0][:120])
    return summary


def dedupe(items: Iterable[str]) -> tuple[str, ...]:
    """Items in first-seen order without repeats (compared case/space-insensitively,
    citations aside: the first one's citation is kept)."""
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = normalise(strip_cites(item))
        if key and key not in seen:
            seen.add(key)
            out.append(item)
    return tuple(out)


def merge_summaries(
    previous: StructuredSummary | None, new: StructuredSummary, *, max_timeline: int = 40
) -> StructuredSummary:
    """Roll `new` onto `previous`: sections deduplicated, the timeline keeps its newest entries.

    Facts, decisions, preferences and todos only grow by what is new, and the
    timeline is bounded, so repeated compactions grow sub-linearly.
    """
    if previous is None:
        return replace(new, timeline=new.timeline[-max_timeline:] if max_timeline else ())
    merged = {
        name: dedupe((*getattr(previous, name), *getattr(new, name)))
        for name in (*SECTIONS, "pinned", "carried_anchors")
    }
    merged["user_messages"] = new.user_messages or previous.user_messages
    merged["artifacts"] = new.artifacts or previous.artifacts
    timeline = merged["timeline"]
    merged["timeline"] = timeline[-max_timeline:] if max_timeline else ()
    return StructuredSummary(**merged)


HEADINGS: dict[str, dict[str, str]] = {
    "en": {
        "title": "Summary of the earlier conversation",
        "through": "messages up to #{seq}",
        "facts": "Facts",
        "decisions": "Decisions",
        "open_todos": "Open TODOs",
        "user_prefs": "User preferences and constraints",
        "timeline": "Timeline",
        "user_messages": "The user's own messages (verbatim, oldest first)",
        "pinned": "Pinned messages (verbatim)",
        "carried_anchors": "Must stay visible (verbatim)",
    },
    "zh": {
        "title": "此前对话摘要",
        "through": "截至第 {seq} 条消息",
        "facts": "事实",
        "decisions": "决定",
        "open_todos": "待办事项",
        "user_prefs": "用户偏好与约束",
        "timeline": "时间线",
        "user_messages": "用户的原话（原文，按时间先后）",
        "pinned": "置顶消息（原文）",
        "carried_anchors": "必须保留的内容（原文）",
    },
}


def headings_for(lang: str) -> dict[str, str]:
    return HEADINGS["zh"] if lang == "zh" else HEADINGS["en"]


# A compaction rewrites the summary near the front of every payload, and a provider's
# prefix cache of tokens (OpenAI's) keeps what a rewrite leaves unchanged at its head.
# So the sections that change least lead (the user's words change only when a user
# message is compacted), those that grow at every compaction follow, and the range
# covered, new at every compaction, is the last line.
RENDER_ORDER = (
    "user_messages", "pinned", "carried_anchors", "user_prefs", "decisions", "open_todos",
    "facts", "timeline", "artifacts",
)  # fmt: skip


def render_summary(summary: StructuredSummary, lang: str, *, through_seq: int | None = None) -> str:
    """The text of the summary-class system message, headed in the conversation's language,
    with the range it covers at its end."""
    h = headings_for(lang)
    title = h["title"]
    colon = "：" if lang == "zh" else ":"
    lines = [f"[{title}]"]
    for name in RENDER_ORDER:
        items: tuple[str, ...] = getattr(summary, name)
        if not items:
            continue
        if name == "artifacts":
            lines.extend(render_artifacts(items, lang))
            continue
        lines.append(f"{h[name]}{colon}")
        lines.extend("- " + item.strip().replace("\n", "\n  ") for item in items)
    if through_seq is not None:
        sep = "（" if lang == "zh" else "("
        end = "）" if lang == "zh" else ")"
        lines.append(sep + h["through"].format(seq=through_seq) + end)
    return "\n".join(lines)
