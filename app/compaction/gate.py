"""The quality gate of every compaction (SPEC §5): probes drawn from the range, checked after.

Before any summary is written, *probes* are drawn from the compacted range by rule,
deterministically (same range, same probes):

- `constraint`: each sentence of a user message the tagger reads as a constraint or
  preference; `question`: each question of the user no assistant text answered before
  the next user message (both checked as anchors are: the words themselves, verbatim
  or nearly, `checks.missing_anchors`);
- `artifact`: the agent's trail (`artifacts.range_artifacts`): files read and changed,
  commands and calls with how they ended, values tools returned (the exact string);
- `decision`, `todo`: sentences of the user or the assistant tagged so;
- `error`: calls whose output says they failed and that no later call of the same
  tool and arguments, in the range or the preserved tail, ran again without failing.

A probe that is not checked verbatim is kept when every identifier it holds (paths,
ids, numbers, codes) is visible verbatim and one line of the final context holds at
least half of its words: a summary may reword a decision, never its numbers.

Each probe is checked in the final context (system texts, the rendered summary, the
preserved history). A probe *fits its share* when it is among the newest that fit the
share of the budget its section has (the user's words: `user_messages_ratio`; the
trail: what `artifacts_ratio` kept; decisions, to-dos and errors: half the summary's
cap): only those make a summary fail the gate. What the gate found is stored on the
job (`Verdict.record`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from app.compaction.artifacts import decode
from app.compaction.artifacts import range_artifacts as trail
from app.compaction.checks import missing_anchors
from app.compaction.provenance import cite_seqs, terms
from app.compaction.shell_commands import failed, outcome
from app.compaction.signals import classify, extract_identifiers, normalise, shorten
from app.compaction.signals import split_sentences as sentences
from app.core.conversation import LoggedMessage, call_function
from app.core.tokens.counter import TextCounter

# Codes (`E4042`, `W123`, `HTTP-503`) and numbers of two digits or more: what a summary
# must not reword, beside the identifiers of `signals.extract_identifiers`.
_CODE = re.compile(r"(?<![\w.])(?:[A-Za-z][\w-]*\d[\w-]*|\d{2,}(?:\.\d+)?)(?![\w])")

KINDS = ("constraint", "question", "artifact", "decision", "todo", "error")
MAX_TEXT = 300
# A probe checked by its words: this share of them on one line of the final context.
WORDS_SHARE = 0.5
ITEM_OVERHEAD_TOKENS = 2


@dataclass(frozen=True, slots=True)
class Probe:
    kind: str
    text: str
    seqs: tuple[int, ...]
    keys: tuple[str, ...] = ()  # identifiers that must be visible verbatim
    exact: bool = False  # the text itself must be visible (the anchor rule)
    fits: bool = True

    def cited(self) -> str:
        return cite_seqs(self.text, self.seqs)

    def view(self) -> dict[str, object]:
        return {"kind": self.kind, "text": self.text, "seqs": list(self.seqs)}


def keys_of(text: str) -> tuple[str, ...]:
    """What of `text` must be visible verbatim: identifiers, codes, numbers."""
    found = dict.fromkeys(extract_identifiers(text))
    for code in _CODE.findall(text):
        if not any(code in k for k in found):
            found[code] = None
    return tuple(found)


def _user_probes(messages: Sequence[LoggedMessage]) -> list[Probe]:
    out: list[Probe] = []
    answered = True
    pending: list[Probe] = []
    for m in messages:
        if not m.counts_in_context:
            continue
        if m.role == "user":
            out.extend(pending)  # questions no assistant text followed
            pending = []
            for s in sentences(m.text):
                if {"constraint", "preference"} & classify(s):
                    out.append(Probe("constraint", s[:MAX_TEXT], (m.seq,), exact=True))
                elif s.endswith(("?", "？")):
                    pending.append(Probe("question", s[:MAX_TEXT], (m.seq,), exact=True))
            answered = False
        elif m.role == "assistant" and m.text.strip() and not answered:
            pending, answered = [], True
    return out + pending


def _said_probes(messages: Sequence[LoggedMessage]) -> list[Probe]:
    out: list[Probe] = []
    for m in messages:
        if m.role == "tool" or not m.counts_in_context:
            continue
        for s in sentences(m.text):
            tags = classify(s)
            for kind in ("decision", "todo"):
                if kind in tags:
                    text = shorten(s, MAX_TEXT)
                    out.append(Probe(kind, text, (m.seq,), keys_of(text)))
    return out


def _error_probes(messages: Sequence[LoggedMessage], later: Sequence[LoggedMessage]) -> list[Probe]:
    """Failed calls not run again successfully afterwards (see the module docstring)."""
    outputs = {str(m.body.get("tool_call_id")): m for m in (*messages, *later) if m.role == "tool"}
    open_errors: dict[str, Probe] = {}
    in_range = {m.seq for m in messages}
    for m in (*messages, *later):
        for c in m.body.get("tool_calls") or ():
            if not isinstance(c, dict):
                continue
            answer = outputs.get(str(c.get("id")))
            if answer is None:
                continue
            name, args = call_function(c) or ("?", "")
            key = f"{name}({args})"
            ended = outcome(answer.text)
            if not failed(ended):
                open_errors.pop(key, None)
            elif m.seq in in_range:
                text = shorten(f"{name}({shorten(args, 80)}) → {ended}", MAX_TEXT)
                keys = keys_of(ended)
                open_errors[key] = Probe("error", text, (m.seq, answer.seq), keys)
    return list(open_errors.values())


def _artifact_probes(items: Iterable[str], kept: Iterable[str]) -> list[Probe]:
    kept_keys = {a.key for a in map(decode, kept) if a is not None}
    out: list[Probe] = []
    for item in items:
        a = decode(item)
        if a is None:
            continue
        seqs = tuple(s for lo, hi in a.cites for s in range(lo, hi + 1))
        keys = tuple(k.strip() for k in a.text.replace(" ← ", " → ").split(" → ") if k.strip())
        text = f"{a.kind}: {a.text}"
        out.append(Probe("artifact", text, seqs, keys[:2], fits=a.key in kept_keys))
    return out


def _dedupe(probes: Iterable[Probe]) -> list[Probe]:
    seen: set[tuple[str, str]] = set()
    out = []
    for p in probes:
        key = (p.kind, normalise(p.text))
        if key[1] and key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _share(probes: list[Probe], kinds: set[str], room: int, counter: TextCounter) -> list[Probe]:
    """The probes of `kinds` marked as fitting while the newest of them fit `room` tokens."""
    fits: set[int] = set()
    for i in sorted(
        (i for i, p in enumerate(probes) if p.kind in kinds), key=lambda i: -probes[i].seqs[0]
    ):
        room -= counter.count_text(probes[i].cited()) + ITEM_OVERHEAD_TOKENS
        if room < 0:
            break
        fits.add(i)
    return [
        Probe(p.kind, p.text, p.seqs, p.keys, p.exact, i in fits) if p.kind in kinds else p
        for i, p in enumerate(probes)
    ]


def draw(
    messages: Sequence[LoggedMessage],
    later: Sequence[LoggedMessage],
    *,
    range_artifacts: Sequence[str] | None = None,
    kept_artifacts: Iterable[str],
    user_share: int,
    summary_share: int,
    counter: TextCounter,
) -> tuple[Probe, ...]:
    """The probes of a compacted range (see the module docstring), in log order.
    `range_artifacts`: the range's trail, when the caller has read it off already."""
    probes = _dedupe(
        [
            *_user_probes(messages),
            *_artifact_probes(
                trail(messages, later) if range_artifacts is None else range_artifacts,
                kept_artifacts,
            ),
            *_said_probes(messages),
            *_error_probes(messages, later),
        ]
    )
    probes.sort(key=lambda p: (p.seqs[0], KINDS.index(p.kind)))
    probes = _share(probes, {"constraint", "question"}, user_share, counter)
    return tuple(_share(probes, {"decision", "todo", "error"}, summary_share, counter))


class Visible:
    """The final context, prepared once for many probes; `plus` adds the summary."""

    def __init__(self, texts: Sequence[str]) -> None:
        self.texts = list(texts)
        self.norm = "\n".join(normalise(t) for t in texts)
        self.lines = [
            frozenset(terms(line)) for t in texts for line in t.splitlines() if line.strip()
        ]

    def plus(self, texts: Sequence[str]) -> Visible:
        more = Visible(texts)
        more.texts = [*self.texts, *more.texts]
        more.norm = self.norm + "\n" + more.norm
        more.lines = [*self.lines, *more.lines]
        return more

    def _keeps(self, probe: Probe) -> bool:
        if any(normalise(k) not in self.norm for k in probe.keys):
            return False
        if probe.kind == "artifact":
            return True
        words = terms(probe.text)
        if not words:
            return True
        need = max(1, int(len(words) * WORDS_SHARE + 0.999))
        return any(len(words & line) >= need for line in self.lines)

    def missing(self, probes: Iterable[Probe]) -> list[Probe]:
        """The probes this context does not keep, in their order."""
        probes = list(probes)
        exact = [p for p in probes if p.exact]
        lost = set(missing_anchors([p.text for p in exact], self.texts)) if exact else set()
        return [p for p in probes if (p.text in lost if p.exact else not self._keeps(p))]


def scores(probes: Sequence[Probe], missing: Sequence[Probe]) -> dict[str, float]:
    """Per kind drawn: the share of its probes the context keeps (0..1)."""
    lost = set(missing)
    out: dict[str, float] = {}
    for kind in KINDS:
        mine = [p for p in probes if p.kind == kind]
        if mine:
            out[kind] = round(sum(1 for p in mine if p not in lost) / len(mine), 4)
    return out


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the gate found for one stored summary (the job's `gate`)."""

    probes: tuple[Probe, ...]
    answer_missing: tuple[Probe, ...]  # missing from the summariser's answer
    missing: tuple[Probe, ...]  # missing from the final context (what it lost)
    action: str  # none | retry | patch | extractive
    restored_by: dict[Probe, str]  # retry | patch | extractive
    citations: dict[str, Any]  # provenance.CiteStats.to_dict

    def record(self) -> dict[str, object]:
        counts: dict[str, int] = {}
        for p in self.probes:
            counts[p.kind] = counts.get(p.kind, 0) + 1
        return {
            "version": 1,
            "probes": counts,
            "scores": scores(self.probes, self.missing),
            "answer_scores": scores(self.probes, self.answer_missing),
            "dropped": [{**p.view(), "over_share": not p.fits} for p in self.missing],
            "caught": [
                {**p.view(), "by": self.restored_by[p]}
                for p in self.answer_missing
                if p in self.restored_by
            ],
            "action": self.action,
            "citations": self.citations,
        }
