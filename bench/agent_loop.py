"""The agent loop: does each payload hold what the agent's next step needs, and at what cost?

    python bench/agent_loop.py [--quick] [--budgets 8000,32000,128000] [--strategies a,b]
                               [--compaction off,on] [--database-url URL | --embedded]

Before each model call of every dataset session (with planted mid-run user instructions),
the payload at each budget and strategy, beside `trim_messages` and a naive window, on
the same calls. The loop, the baselines, every option and column: docs/agent-loop.md.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import hashlib
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/agent_loop.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from langchain_core.messages import BaseMessage, SystemMessage, convert_to_messages, trim_messages

from app.compaction.runner import CompactionRunner
from app.context import available_strategies
from app.context.types import DEFAULT_STRATEGY
from app.core.conversation import content_text
from app.core.tokens import get_counter
from app.db.models.job import ACTIVE
from bench.common import (
    DATASET,
    app_client,
    check,
    dataset_sessions,
    ints,
    load_average,
    machine_info,
    markdown_table,
    migrated_database,
    parser,
    progress,
)
from tests.support.planted import Instruction
from tests.support.planted import plant as plant_instructions

TRIM_MESSAGES = "trim_messages"
NAIVE = "naive window"
BASELINES = (TRIM_MESSAGES, NAIVE)

# --- replaying a trace: its model calls, LangChain's payload of one ---------------------------

MODEL = "gpt-4o"
COUNTER = get_counter(MODEL)
PRIMING = COUNTER.count_messages([])
# Cache reads bill at a tenth of the input price (Anthropic; OpenAI bills 0.25-0.5x and
# caches from 1,024 tokens in 128-token steps, which the bench ignores).
CACHED_PRICE = 0.1


@dataclass
class Case:
    """A dataset session with its planted instructions, and each message's token count."""

    id: str
    system: str | None
    messages: list[dict[str, Any]]
    planted: dict[int, Instruction]  # index of the planted message -> its instruction
    users: set[int]  # indexes of every user message, planted ones included
    latest_user: int
    counts: list[int] = field(default_factory=list)


def plant(session: Mapping[str, Any], k: int = 4, offset: int = 0) -> Case:
    """`session` with `k` mid-run user instructions of tests/support/planted.py (English,
    Chinese, Spanish, German in turn, sharing no word with the signal detectors) at step
    boundaries spread over the run, never inside a tool group."""
    msgs, planted = plant_instructions(session["messages"], k, offset=offset)
    users = {i for i, m in enumerate(msgs) if m["role"] == "user"}
    case = Case(
        session["id"],
        session.get("system"),
        msgs,
        {p.index: p.instruction for p in planted},
        users,
        max(users),
    )
    case.counts = [COUNTER.count_message(m) for m in msgs]
    return case


def violations(payload: Sequence[Mapping[str, Any]]) -> int:
    """Tool results without their call before them, and calls without their results."""
    bad = 0
    waiting: set[str] = set()
    for m in payload:
        if m["role"] == "tool":
            if m.get("tool_call_id") not in waiting:
                bad += 1
            waiting.discard(str(m.get("tool_call_id")))
            continue
        bad += bool(waiting)
        waiting = {str(c["id"]) for c in m.get("tool_calls") or ()}
    return bad + bool(waiting)


def call_points(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Indexes i where the agent calls its model with messages[:i]: before each assistant."""
    return [i for i, m in enumerate(messages) if m["role"] == "assistant" and i > 0]


def full_tokens(case: Case, upto: int) -> int:
    """The whole history before call `upto` with the system prompt: what a call sends untrimmed."""
    system = [{"role": "system", "content": case.system}] if case.system else []
    return sum(case.counts[:upto]) + COUNTER.count_messages(system)


def mid_run(case: Case, upto: int) -> list[Any]:
    """Planted instructions already in messages[:upto], except the latest user message."""
    users = [i for i in case.users if i < upto]
    latest = max(users) if users else -1
    return [ins for i, ins in case.planted.items() if i < upto and i != latest]


@dataclass(frozen=True, slots=True)
class Trimmed:
    payload: list[dict[str, Any]]
    input_tokens: int
    kept: list[int]  # indexes into the case's messages, in order


def run_langchain(case: Case, upto: int, budget: int) -> Trimmed:
    """LangChain's `trim_messages(strategy="last", include_system=True, start_on="human")` of
    messages[:upto], same counter, given `budget - PRIMING` (it does not count the reply
    priming we count)."""
    msgs: list[BaseMessage] = convert_to_messages(case.messages[:upto])
    counts = {str(i): c for i, c in enumerate(case.counts[:upto])}
    for i, m in enumerate(msgs):
        m.id = str(i)
    if case.system:
        msgs = [SystemMessage(case.system, id="system"), *msgs]
        counts["system"] = COUNTER.count_message({"role": "system", "content": case.system})

    def counter(batch: list[BaseMessage]) -> int:
        return sum(counts[str(m.id)] for m in batch)

    out = trim_messages(
        msgs,
        max_tokens=budget - PRIMING,
        token_counter=counter,
        strategy="last",
        include_system=True,
        start_on="human",
    )
    kept = [int(str(m.id)) for m in out if m.id != "system"]
    payload = [{"role": "system", "content": case.system}] if case.system else []
    payload += [case.messages[i] for i in kept]
    return Trimmed(payload, counter(out) + PRIMING, kept)


# --- identifiers of a step -------------------------------------------------------------------

_EXTENSIONS = (
    r"(?:py|pyi|pyx|ipynb|js|mjs|ts|tsx|jsx|json|ya?ml|toml|ini|cfg|conf|md|rst|txt|csv|log|"
    r"c|h|cc|cpp|hpp|go|rs|java|kt|rb|php|sh|bash|sql|html|css|xml|lock|pony|patch|diff)"
)
_IDENTIFIER = re.compile(
    "|".join(
        (
            # file paths: a/b, /a/b.py, ./a, ~/a (URLs give their host/path part)
            r"(?:~|\.{1,2})?/?(?:[\w.@-]+/)+[\w.@-]+",
            # file names with a known extension
            rf"\b[\w-]+\.{_EXTENSIONS}\b",
            # dotted names: os.path.join, self.assertEqual, np.array
            r"\b[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\b",
            # snake_case names: user_id, test_parse_args, __init__
            r"\b_*[A-Za-z][A-Za-z0-9]*(?:_+[A-Za-z0-9]+)+_*",
            # codes and ids of letters and digits: HXDUBJ, W2378156, a1b2c3d, 4WQ150
            r"\b(?=[A-Z0-9]*[A-Z])[A-Z0-9]{5,}\b",
            r"\b(?=[A-Za-z]*\d)(?=\d*[A-Za-z])[A-Za-z0-9]{4,}\b",
            # numbers of 3+ digits (not the fraction of a decimal)
            r"(?<![\w.])\d{3,}(?!\w)",
        )
    )
)
_DOTTED_PART = re.compile(r"\.")


def identifiers(text: str) -> set[str]:
    """The identifiers in `text`: file paths and names, dotted and snake_case names,
    ids and codes, numbers of 3+ digits (at least 3 characters; trailing dots off)."""
    out: set[str] = set()
    for m in _IDENTIFIER.finditer(text):
        value = m.group(0).rstrip(".-@")
        if len(value) < 3:
            continue
        if "/" not in value and "." in value and value[0].isalpha():
            # "e.g", "i.e": a dotted name has parts of 2+ characters
            if min(len(p) for p in _DOTTED_PART.split(value)) < 2:
                continue
        out.add(value)
    return out


def _leaves(value: Any) -> Iterable[str]:
    if isinstance(value, Mapping):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif value is not None and not isinstance(value, bool):
        yield str(value)


def step_text(message: Mapping[str, Any]) -> str:
    """What a step says: its text and its tool calls' argument values (not the JSON keys)."""
    parts = [content_text(message)]
    for call in message.get("tool_calls") or ():
        raw = (call.get("function") or {}).get("arguments") or ""
        try:
            parts.extend(_leaves(json.loads(raw)))
        except (TypeError, ValueError):
            parts.append(str(raw))
    return "\n".join(parts)


def message_text(message: Mapping[str, Any]) -> str:
    """Everything a message shows the model: text, tool names and raw arguments."""
    parts = [content_text(message)]
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        parts += [str(fn.get("name") or ""), str(fn.get("arguments") or "")]
    return "\n".join(parts)


def payload_text(payload: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(message_text(m) for m in payload)


class History:
    """The case's messages as one text, to ask "did the history before call i say X?"."""

    def __init__(self, case: Case) -> None:
        texts = [message_text(m) for m in case.messages]
        self.text = "\n".join(texts)
        self.ends: list[int] = []
        end = -1
        for t in texts:
            end += len(t) + 1
            self.ends.append(end)
        self.system = case.system or ""

    def last_said(self, value: str, upto: int) -> int | None:
        """The index of the newest message before `upto` whose text holds `value` on
        identifier boundaries."""
        if upto <= 0:
            return None
        end = self.ends[upto - 1]
        at = self.text.rfind(value, 0, end)
        while at != -1:
            i = bisect.bisect_left(self.ends, at)
            # Not across two messages' texts, and not inside a longer token.
            if at + len(value) <= self.ends[i] and on_edges(value, self.text, at):
                return i
            at = self.text.rfind(value, 0, at + len(value) - 1)
        return None

    def said_before(self, value: str, upto: int) -> bool:
        """Whether a message before call `upto` says `value` on identifier boundaries
        (`as_identifier`): `240` inside `1240,1260p` was not told by the history."""
        if upto <= 0:
            return False
        return as_identifier(value, self.text, self.ends[upto - 1])


# Runs of Chinese characters (Han), where a Chinese dialogue's names are.
_HAN_RUN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]{4,}")


def chinese_names(text: str, history: History, upto: int) -> set[str]:
    """The Chinese names and phrases `text` takes from the history before call `upto`: in
    each run of Chinese characters, the longest piece of 4 to 8 characters the history
    holds and the system prompt does not (a hotel, a dish, a line of a song: what the
    tool outputs and the user named). Chinese has no spaces to tell a name's edges, so
    this is what `bench/recall_bench.py --parts recall` takes as one."""
    out: set[str] = set()
    for run in _HAN_RUN.findall(text):
        for size in range(min(8, len(run)), 3, -1):
            pieces = (run[i : i + size] for i in range(len(run) - size + 1))
            hit = next(
                (p for p in pieces if p not in history.system and history.said_before(p, upto)),
                None,
            )
            if hit is not None:
                out.add(hit)
                break
    return out


def needed(
    history: History, upto: int, next_step: Mapping[str, Any], *, chinese: bool = False
) -> list[str]:
    """The identifiers of `next_step` only the history before call `upto` could have told:
    said before the call, not in the system prompt; one contained in another counts once.
    With `chinese` (a Chinese case), its Chinese names and phrases too."""
    text = step_text(next_step)
    found = {
        v for v in identifiers(text) if v not in history.system and history.said_before(v, upto)
    }
    if chinese:
        found |= chinese_names(text, history, upto)
    return sorted(v for v in found if not any(v != o and v in o for o in found))


def grounded(ids: Sequence[str], payload: Sequence[Mapping[str, Any]]) -> int:
    """How many of `ids` the payload's text holds on identifier boundaries."""
    if not ids:
        return 0
    text = payload_text(payload)
    return sum(as_identifier(v, text) for v in ids)


def recent_tokens(upto: int, held: Mapping[int, int]) -> int:
    """Tokens of the newest contiguous run of messages[:upto] the payload holds.

    `held`: index of a history message -> its tokens as the payload sends it.
    """
    tokens = 0
    i = upto - 1
    while i >= 0 and i in held:
        tokens += held[i]
        i -= 1
    return tokens


def call_signature(call: Mapping[str, Any]) -> tuple[str, str]:
    """A tool call's name and arguments (JSON re-serialised with sorted keys where it parses)."""
    fn = call.get("function") or {}
    raw = fn.get("arguments") or ""
    try:
        args = json.dumps(json.loads(raw), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        args = str(raw)
    return str(fn.get("name") or ""), args


def call_results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[tuple[str, str], int]]:
    """(signature, index of its result) of every answered tool call, in log order."""
    pending: dict[str, tuple[str, str]] = {}
    out: list[tuple[tuple[str, str], int]] = []
    for i, m in enumerate(messages):
        for call in m.get("tool_calls") or ():
            pending[str(call.get("id"))] = call_signature(call)
        if m["role"] == "tool":
            sig = pending.pop(str(m.get("tool_call_id")), None)
            if sig is not None:
                out.append((sig, i))
    return out


def repeats_of(
    results: Sequence[tuple[tuple[str, str], int]], upto: int, next_step: Mapping[str, Any]
) -> list[list[int]]:
    """Per tool call of `next_step` that repeats one answered before index `upto` (same
    name and arguments): the indexes of the earlier results."""
    before: dict[tuple[str, str], list[int]] = {}
    for sig, i in results:
        if i < upto:
            before.setdefault(sig, []).append(i)
    out = []
    for call in next_step.get("tool_calls") or ():
        earlier = before.get(call_signature(call))
        if earlier:
            out.append(earlier)
    return out


# --- the naive recent-first window --------------------------------------------------------------


def units(messages: Sequence[Mapping[str, Any]], start: int, upto: int) -> list[list[int]]:
    """messages[start:upto] as units: an assistant message with its tool results, or one message."""
    out: list[list[int]] = []
    for i in range(start, upto):
        role = messages[i]["role"]
        if role == "tool" and out and messages[out[-1][0]].get("tool_calls"):
            out[-1].append(i)
        else:
            out.append([i])
    return out


def naive_window(case: Case, upto: int, budget: int) -> Trimmed:
    """System prompt, the first user message, then the newest whole units that fit, newest
    first; a unit too large for the room left is skipped and older ones are still tried."""
    system = [{"role": "system", "content": case.system}] if case.system else []
    used = COUNTER.count_messages(system)  # priming included
    first = next((i for i in range(upto) if case.messages[i]["role"] == "user"), None)
    kept: list[int] = []
    if first is not None and used + case.counts[first] <= budget:
        kept.append(first)
        used += case.counts[first]
    start = first + 1 if kept and first is not None else 0
    for unit in reversed(units(case.messages, start, upto)):
        cost = sum(case.counts[i] for i in unit)
        if used + cost <= budget:
            used += cost
            kept += unit
    kept.sort()
    return Trimmed(system + [case.messages[i] for i in kept], used, kept)


# --- contextd's payload, read back -------------------------------------------------------------


class Tokens:
    """Token counts of payload messages, memoised by content (payloads repeat messages)."""

    def __init__(self) -> None:
        self._memo: dict[str, int] = {}

    def __call__(self, message: Mapping[str, Any]) -> int:
        key = json.dumps(message, sort_keys=True, ensure_ascii=False)
        n = self._memo.get(key)
        if n is None:
            n = self._memo[key] = COUNTER.count_message(dict(message))
        return n


def held_by_seq(
    case: Case, got: Mapping[str, Any], tokens: Tokens, first_seq: int = 1
) -> dict[int, int]:
    """{index into case.messages: tokens as sent} of a GET /context answer.

    The payload's history messages are its last `len(kept_seqs)` messages, in seq
    order; message i of the case was appended with seq `first_seq + i`.
    """
    seqs = got["kept_seqs"]
    messages = got["messages"]
    if len(seqs) > len(messages):
        raise RuntimeError(f"{case.id}: {len(seqs)} kept seqs, {len(messages)} messages")
    out: dict[int, int] = {}
    for seq, m in zip(seqs, messages[len(messages) - len(seqs) :], strict=True):
        i = seq - first_seq
        if not 0 <= i < len(case.messages) or case.messages[i]["role"] != m["role"]:
            raise RuntimeError(f"{case.id}: seq {seq} is not the {m['role']} message sent")
        out[i] = tokens(m)
    return out


def whole_by_seq(case: Case, got: Mapping[str, Any], first_seq: int = 1) -> set[int]:
    """The indexes into case.messages a GET /context answer sends with their text whole
    (not as a preview or a cut)."""
    seqs = got["kept_seqs"]
    messages = got["messages"]
    out = set()
    for seq, m in zip(seqs, messages[len(messages) - len(seqs) :], strict=True):
        i = seq - first_seq
        if content_text(m) == content_text(case.messages[i]):
            out.add(i)
    return out


def locate_misses(
    t: Tally,
    call: Call,
    history: History,
    payload: Sequence[Mapping[str, Any]],
    held: Mapping[int, int],
) -> list[str]:
    """The identifiers of `call` the payload lacks (trimming calls), each counted where the
    history last said it: in a message the payload holds (so it was masked: a preview or
    a cut) or in one it left out."""
    if not call.trimming or not call.ids:
        return []
    text = payload_text(payload)
    missing = [v for v in call.ids if not as_identifier(v, text)]
    for value in missing:
        at = history.last_said(value, call.upto)
        if at is not None and at in held:
            t.missed_masked += 1
        else:
            t.missed_left_out += 1
    return missing


_ESCAPES = ("\\n", "\\t", "\\r", "\\b", "\\f")


def _edge(before: str, after: str) -> bool:
    """Whether two adjacent characters are on an identifier boundary, as search splits
    parts (app/index/lexemes.py `needle_pattern`): not both letters or digits, or a
    camelCase step, or letters against digits."""
    if not (before.isalnum() and after.isalnum()):
        return True
    return (
        (before.islower() and after.isupper())
        or (before.isalpha() and after.isdigit())
        or (before.isdigit() and after.isalpha())
    )


def as_identifier(value: str, text: str, stop: int | None = None) -> bool:
    """Whether `text` (up to `stop`) holds `value` on identifier boundaries (not `240`
    inside `1240`, nor `x/s` inside `sandbox/sunpy`): what the search is to find (SPEC §3
    "Recall"), and what a history or a payload tells the next step. A JSON escape (`\\n`)
    before it is an edge, as in tool-call arguments. Chinese has no edges inside a run: a
    piece of one is found wherever it is (SPEC §3, any language)."""
    stop = len(text) if stop is None else stop
    if _HAN_RUN.fullmatch(value):
        return text.find(value, 0, stop) != -1
    at = text.find(value, 0, stop)
    while at != -1:
        if on_edges(value, text, at):
            return True
        at = text.find(value, at + 1, stop)
    return False


def on_edges(value: str, text: str, at: int) -> bool:
    """Whether `value`, found in `text` at `at`, is on identifier boundaries there."""
    if _HAN_RUN.fullmatch(value):
        return True
    end = at + len(value)
    starts = at == 0 or _edge(text[at - 1], value[0]) or text[at - 2 : at] in _ESCAPES
    return starts and (end == len(text) or _edge(value[-1], text[end]))


class Recall:
    """Whether the search endpoint finds a message holding an identifier among its top 3
    hits, asked once per (case, call, identifier): the log is the same for every method.
    The hits are kept for `--misses`."""

    TOP = 3

    def __init__(self) -> None:
        self._memo: dict[tuple[str, int, str], bool] = {}
        self.hits: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
        self._held: dict[tuple[str, int, str], bool] = {}

    def held(self, case: Case, upto: int, value: str) -> bool:
        """Whether a message before call `upto` holds `value` on identifier boundaries
        (else the history holds it only inside longer tokens, which search does not find
        by design: a miss of the bench's substring test, reported apart)."""
        key = (case.id, upto, value)
        got = self._held.get(key)
        if got is None:
            got = self._held[key] = any(
                as_identifier(value, message_text(case.messages[i])) for i in range(upto)
            )
        return got

    async def found(
        self, c: httpx.AsyncClient, sid: str, case: Case, upto: int, value: str
    ) -> bool:
        key = (case.id, upto, value)
        hit = self._memo.get(key)
        if hit is None:
            r = await c.get(f"/sessions/{sid}/search", params={"q": value, "limit": self.TOP})
            hit = False
            top: list[dict[str, Any]] = []
            if r.status_code == 200:
                for h in r.json()["hits"][: self.TOP]:
                    i = int(h["seq"]) - 1
                    holds = 0 <= i < upto and value in message_text(case.messages[i])
                    hit = hit or holds
                    top.append(
                        {"seq": h["seq"], "role": h["role"], "score": h["score"],
                         "holds": holds, "snippet": h["snippet"][:200]}
                    )  # fmt: skip
            else:
                top.append({"status": r.status_code, "error": r.text[:200]})
            self._memo[key] = hit
            self.hits[key] = top
        return hit


# --- tallies ------------------------------------------------------------------------------------


@dataclass
class Tally:
    calls: int = 0
    input_tokens: int = 0
    stable_tokens: int = 0
    trim_calls: int = 0
    trim_input: int = 0
    trim_stable: int = 0
    # The input of trimming calls not served from the previous payload's prefix, by why:
    # the payload only grew (what the log appended), a trim changed it, or it took up a
    # summary a compaction stored since (a trim then too, in one re-send).
    resent_grown: int = 0
    resent_trim: int = 0
    resent_summary: int = 0
    ids_needed: int = 0
    ids_held: int = 0
    # Of the identifiers missed: found by the search endpoint among the top 3 hits, and
    # where the history last said them: in a message the payload sent masked (a preview
    # or a cut) or in one it left out.
    ids_recalled: int = 0
    missed_masked: int = 0
    missed_left_out: int = 0
    # Tool calls of the next step that repeat an earlier call (same name and arguments),
    # and of those, the re-reads: no earlier result of that call held whole (all calls).
    repeats: int = 0
    rereads: int = 0
    recent: int = 0
    budget: int = 0
    instructions: int = 0
    instructions_kept: int = 0
    violations: int = 0
    latest_user: int = 0
    with_user: int = 0
    over_budget: int = 0

    def merge(self, other: Tally) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Call:
    """One model call of one case at one budget: what every method is measured against."""

    case: Case
    upto: int
    budget: int
    trimming: bool
    ids: list[str]
    latest_user: int | None
    # Per tool call of the next step that repeats an earlier one: the earlier results.
    repeats: list[list[int]] = field(default_factory=list)


@dataclass
class Stream:
    """One method's previous payload (with its token counts) at one budget."""

    payload: list[dict[str, Any]] | None = None
    counts: list[int] = field(default_factory=list)
    prefix_id: str | None = None
    summary_through: int | None = None


def shared(
    previous: Sequence[Mapping[str, Any]] | None,
    payload: Sequence[Mapping[str, Any]],
    counts: Sequence[int],
) -> tuple[int, int | None]:
    """Tokens of the leading messages `payload` shares with `previous`, and the index of
    the first it does not (None: no previous payload, or `payload` only grew)."""
    if previous is None:
        return 0, None
    stable = 0
    for i, (a, b, n) in enumerate(zip(previous, payload, counts, strict=False)):
        if a != b:
            return stable, i
        stable += n
    return stable, None if len(payload) >= len(previous) else len(payload)


def measure(
    t: Tally,
    call: Call,
    payload: list[dict[str, Any]],
    counts: list[int],
    held: Mapping[int, int],
    stream: Stream,
    whole: Set[int] | None = None,
    new_summary: bool = False,
) -> tuple[int, int | None]:
    """Add one payload (`counts`: tokens of each of its messages) to `t`; update `stream`.
    `whole`: the history messages it sends as logged (default: every one it holds);
    `new_summary`: it holds a summary other than the previous payload's.
    Returns what the payload shares with the previous one (`shared`)."""
    tokens = sum(counts) + PRIMING
    previous = stream.payload
    stable, first_changed = shared(previous, payload, counts)
    stream.payload, stream.counts = payload, counts
    t.calls += 1
    t.input_tokens += tokens
    t.stable_tokens += stable
    t.violations += violations(payload) > 0
    t.over_budget += tokens > call.budget
    if call.latest_user is not None:
        t.with_user += 1
        t.latest_user += call.latest_user in held
    sent_whole = held.keys() if whole is None else whole
    t.repeats += len(call.repeats)
    t.rereads += sum(not any(i in sent_whole for i in earlier) for earlier in call.repeats)
    if not call.trimming:
        return stable, first_changed
    t.trim_calls += 1
    t.trim_input += tokens
    t.trim_stable += stable
    if new_summary:
        t.resent_summary += tokens - stable
    elif first_changed is None:
        t.resent_grown += tokens - stable
    else:
        t.resent_trim += tokens - stable
    t.ids_needed += len(call.ids)
    t.ids_held += grounded(call.ids, payload)
    t.recent += recent_tokens(call.upto, held)
    t.budget += call.budget
    present = mid_run(call.case, call.upto)
    t.instructions += len(present)
    t.instructions_kept += sum(ins.visible_in(payload) for ins in present)
    return stable, first_changed


def write_call(
    out: Any,
    key: Key,
    call: Call,
    counts: Sequence[int],
    compared: tuple[int, int | None],
    got: Mapping[str, Any],
    new_summary: bool,
) -> None:
    """One JSON line per contextd payload: its input tokens, what it shared with the
    previous payload of its stream and the index of the first message that differed,
    and its summary (tokens as the server counts them; `summary_changed`: a compaction
    stored a new one since the previous payload)."""
    summary = got["summary"]["through_seq"] if got["summary"]["included"] else None
    record = {
        "mode": key[0], "half": key[1], "group": key[2], "budget": key[3], "strategy": key[4],
        "case": call.case.id, "upto": call.upto, "trimming": call.trimming,
        "input": sum(counts) + PRIMING, "stable": compared[0], "first_changed": compared[1],
        "messages": len(counts), "summary_tokens": got["usage"]["breakdown"]["summary"],
        "summary_through": summary,
        "summary_changed": new_summary,
    }  # fmt: skip
    out.write(json.dumps(record) + "\n")


def write_misses(
    out: Any,
    key: Key,
    call: Call,
    history: History,
    payload: Sequence[Mapping[str, Any]],
    got: Mapping[str, Any],
    recall: Recall | None = None,
    lang: str = "",
) -> None:
    """One JSON line per identifier the payload lacks: where the history last said it, and
    how that message was sent (whole, as a preview or cut, or left out); with `recall`
    (after it searched each), whether the search found a holder among its top 3, its top
    hits, and the seqs of every message before the call holding the identifier."""
    text = payload_text(payload)
    kept = dict(zip(got["kept_seqs"], payload[len(payload) - len(got["kept_seqs"]) :], strict=True))
    for value in call.ids:
        if as_identifier(value, text):
            continue
        at = history.last_said(value, call.upto)
        assert at is not None  # `needed` took only what the history said
        sent = kept.get(at + 1)
        how = "dropped" if sent is None else "whole" if sent == call.case.messages[at] else "shrunk"
        record = {
            "mode": key[0], "half": key[1], "group": key[2], "budget": key[3], "strategy": key[4],
            "case": call.case.id, "upto": call.upto, "id": value, "at": at,
            "back": call.upto - at, "role": call.case.messages[at]["role"], "sent": how,
            "held": sum(1 for s in got["kept_seqs"] if s - 1 < call.upto),
        }  # fmt: skip
        if lang:
            record["lang"] = lang
        searched = recall.hits.get((call.case.id, call.upto, value)) if recall else None
        if searched is not None and recall is not None:
            record["found"] = any(h.get("holds") for h in searched)
            record["as_identifier"] = recall.held(call.case, call.upto, value)
            record["hits"] = searched
            record["holders"] = [
                i + 1 for i in range(call.upto) if value in message_text(call.case.messages[i])
            ]
        out.write(json.dumps(record, ensure_ascii=False) + "\n")


# --- cases --------------------------------------------------------------------------------------


HALVES = ("tuning", "checking")
WHOLE = "whole"


def half_of(session_id: str) -> str:
    """The half a session belongs to, from a hash of its id: every default is chosen on the
    tuning half and checked on the other (the parity of the id's SHA-256)."""
    return HALVES[int(hashlib.sha256(session_id.encode()).hexdigest(), 16) % 2]


_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_LETTER = re.compile(r"[^\W\d_]")


def language_of(case: Case) -> str:
    """ "zh" when CJK characters are at least a fifth of the letters of the case's messages
    (Chinese dialogues are most of theirs; an English trace quoting some Chinese, a few),
    else "en": the language its recall is reported under."""
    text = "\n".join(message_text(m) for m in case.messages)
    letters = len(_LETTER.findall(text))
    return "zh" if letters and 5 * len(_CJK.findall(text)) >= letters else "en"


@dataclass
class Entry:
    case: Case
    group: str  # "agent traces", "dialogues (en)", "dialogues (zh)", "long agent runs"
    half: str = ""
    lang: str = ""  # "en" or "zh": language_of(case)

    def __post_init__(self) -> None:
        self.half = self.half or half_of(self.case.id)
        self.lang = self.lang or language_of(self.case)


def long_runs(
    sessions: Sequence[Mapping[str, Any]], n: int, max_tokens: int
) -> list[dict[str, Any]]:
    """Up to `n` runs of `long-agent-runs.jsonl`, taken from the two halves in turn (file
    order within a half) so that a sample holds both; each cut before the first assistant
    message past `max_tokens` tokens (0: whole)."""
    by_half: dict[str, list[Mapping[str, Any]]] = {h: [] for h in HALVES}
    for s in sessions:
        by_half[half_of(s["id"])].append(s)
    order: list[Mapping[str, Any]] = []
    for pair in zip_longest(*by_half.values()):
        order += [s for s in pair if s is not None]
    runs = []
    for s in order[:n]:
        messages = list(s["messages"])
        if max_tokens:
            tokens = 0
            for i, m in enumerate(messages):
                tokens += COUNTER.count_message(m)
                if tokens > max_tokens and m["role"] == "assistant" and i > 0:
                    messages = messages[:i]
                    break
        runs.append({**s, "messages": messages})
    return runs


def without_nul(value: Any) -> Any:
    """`value` with every NUL character in its strings made U+FFFD: the log refuses NUL
    (PostgreSQL text cannot hold it; the append answers 422), and one long run's tool
    outputs hold some."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {k: without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    return value


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [without_nul(s) for s in dataset_sessions(path)]


def load_entries(args: argparse.Namespace) -> list[Entry]:
    sessions = read_jsonl(args.dataset)
    entries = []
    for n, s in enumerate(sessions[: args.limit or None]):
        agent = s["meta"]["kind"] == "agent"
        group = "agent traces" if agent else f"dialogues ({s['meta']['lang']})"
        entries.append(Entry(plant(s, args.k, offset=n), group))
    if args.long:
        runs = long_runs(read_jsonl(args.long_dataset), args.long, args.long_max_tokens)
        for n, s in enumerate(runs):
            entries.append(Entry(plant(s, args.k, offset=n), "long agent runs"))
    return entries


# --- the loop -----------------------------------------------------------------------------------

# (compaction "off" | "on" | "-" for the baselines, half, group, budget, method) -> tally
Key = tuple[str, str, str, int, str]


async def settle(c: httpx.AsyncClient, sid: str, runner: CompactionRunner) -> None:
    """Run the compaction jobs the appends queued until the session has none left.

    The server runs no compaction on its own here: a job it ran in the background could
    finish between two methods' payloads for one call, which made the compaction-on
    figures differ from run to run by up to three points. Run here, a job ends in the
    agent's model call, after every method took its payload, as a real model's would.
    """
    for _ in range(6000):
        while await runner.run_once():
            pass
        jobs = check(await c.get(f"/sessions/{sid}/compaction"), 200)["jobs"]
        if not any(j["status"] in ACTIVE for j in jobs):
            return
        await asyncio.sleep(0.02)  # a job given back to the queue: claimed again next
    raise RuntimeError(f"{sid}: compaction still running after two minutes")


# (compaction mode, half, "dataset" | "long runs", language, budget, method)
RecallKey = tuple[str, str, str, str, int, str]


@dataclass
class Totals:
    tallies: dict[Key, Tally] = field(default_factory=dict)
    compactions: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    # Recall@3 of the misses by language: [identifiers searched, found among the top 3].
    recalls: dict[RecallKey, list[int]] = field(default_factory=dict)

    def tally(self, key: Key) -> Tally:
        return self.tallies.setdefault(key, Tally())

    def recalled(self, key: Key, lang: str, searched: int, found: int, inside: int) -> None:
        """`inside`: of those not found, the ones the log holds only inside longer tokens."""
        mode, half, group, budget, method = key
        where = "long runs" if group == "long agent runs" else "dataset"
        got = self.recalls.setdefault((mode, half, where, lang, budget, method), [0, 0, 0])
        got[0] += searched
        got[1] += found
        got[2] += inside


async def run_entry(
    c: httpx.AsyncClient,
    entry: Entry,
    args: argparse.Namespace,
    totals: Totals,
    runner: CompactionRunner,
    recall: Recall | None = None,
) -> None:
    case = entry.case
    recall = recall or Recall()
    results = call_results(case.messages)
    long = entry.group == "long agent runs"
    if long:
        budgets = args.long_budgets
    elif entry.group.startswith("dialogues"):
        budgets = sorted({*args.dialogue_budgets, *args.budgets})
    else:
        budgets = args.budgets
    history = History(case)
    tokens = Tokens()
    # One session for every budget without compaction; with it, one per budget (its
    # context_limit is the budget).
    sessions: dict[tuple[str, int], str] = {}
    for mode in args.compaction:
        for budget in budgets if mode == "on" else budgets[:1]:
            # Named after the case, not at random: the id is in every preview's path, so
            # a random one changes previews' token counts, and with them the figures.
            digest = hashlib.sha256(case.id.encode()).hexdigest()[:8]
            sid = f"loop-{mode}-{budget}-{digest}"
            body: dict[str, Any] = {"model": MODEL, "auto_compact": mode == "on"}
            if mode == "on":
                body["context_limit"] = budget
                body["compaction"] = {"reserved_output_tokens": 0, "safety_margin_tokens": 0}
            if case.system:
                body["system_prompt"] = case.system
            check(await c.put(f"/sessions/{sid}", json=body), 200, 201)
            sessions[(mode, budget)] = sid
    streams: dict[Key, Stream] = {}

    async def search_misses(t: Tally, key: Key, upto: int, missing: list[str]) -> None:
        """recall@3 of the identifiers a payload lacks; the log any session holds is the
        one searched (messages[:upto])."""
        found = inside = 0
        for value in missing:
            hit = await recall.found(c, next(iter(sessions.values())), case, upto, value)
            found += hit
            inside += not hit and not recall.held(case, upto, value)
        t.ids_recalled += found
        totals.recalled(key, entry.lang, len(missing), found, inside)

    done = 0
    for upto in call_points(case.messages):
        if upto > done:
            for sid in sessions.values():
                batch = case.messages[done:upto]
                check(await c.post(f"/sessions/{sid}/messages", json={"messages": batch}), 201)
            done = upto
        users = [i for i in case.users if i < upto]
        ids = needed(history, upto, case.messages[upto], chinese=entry.lang == "zh")
        repeats = repeats_of(results, upto, case.messages[upto])
        whole = full_tokens(case, upto)
        for budget in budgets:
            latest = max(users) if users else None
            call = Call(case, upto, budget, whole > budget, ids, latest, repeats)
            for mode in args.compaction:
                sid = sessions[(mode, budget if mode == "on" else budgets[0])]
                for strategy in args.strategies:
                    key: Key = (mode, entry.half, entry.group, budget, strategy)
                    stream = streams.setdefault(key, Stream())
                    query: dict[str, Any] = {"max_tokens": budget, "strategy": strategy}
                    if stream.prefix_id is not None:
                        query["previous_prefix_id"] = stream.prefix_id
                    got = check(await c.get(f"/sessions/{sid}/context", params=query), 200)
                    stream.prefix_id = got["prefix_id"]
                    payload = got["messages"]
                    held = held_by_seq(case, got, tokens)
                    counts = [tokens(m) for m in payload]
                    t = totals.tally(key)
                    sent = whole_by_seq(case, got)
                    through = got["summary"]["through_seq"] if got["summary"]["included"] else None
                    new_summary = through is not None and through != stream.summary_through
                    compared = measure(t, call, payload, counts, held, stream, sent, new_summary)
                    missing = locate_misses(t, call, history, payload, held)
                    await search_misses(t, key, upto, missing)
                    if args.calls is not None:
                        write_call(args.calls, key, call, counts, compared, got, new_summary)
                    if got["summary"]["included"]:
                        stream.summary_through = got["summary"]["through_seq"]
                    if args.misses is not None and call.trimming:
                        write_misses(
                            args.misses, key, call, history, payload, got, recall, entry.lang
                        )
            for method in BASELINES:
                trimmed = (
                    run_langchain(case, upto, budget)
                    if method == TRIM_MESSAGES
                    else naive_window(case, upto, budget)
                )
                key = ("-", entry.half, entry.group, budget, method)
                stream = streams.setdefault(key, Stream())
                system = [
                    tokens(m) for m in trimmed.payload[: len(trimmed.payload) - len(trimmed.kept)]
                ]
                counts = system + [case.counts[i] for i in trimmed.kept]
                held = {i: case.counts[i] for i in trimmed.kept}
                t = totals.tally(key)
                measure(t, call, trimmed.payload, counts, held, stream)
                missing = locate_misses(t, call, history, trimmed.payload, held)
                await search_misses(t, key, upto, missing)
        totals.calls[entry.group] = totals.calls.get(entry.group, 0) + 1
        # The agent's model call runs now: a compaction the appends triggered ends before
        # the next step is appended.
        for (mode, _), sid in sessions.items():
            if mode == "on":
                await settle(c, sid, runner)
    for (mode, _), sid in sessions.items():
        if mode == "on":
            state = check(await c.get(f"/sessions/{sid}/compaction"), 200)
            totals.compactions += int(state["compaction_count"])


async def run(args: argparse.Namespace, database_url: str, entries: list[Entry]) -> Totals:
    totals = Totals()
    started = time.perf_counter()
    # No model: a compaction stores the extractive summary. settle() runs the jobs.
    settings = {"compaction_workers": 1, "run_compactions_in_process": False}
    async with app_client(database_url, **settings) as (c, app):
        for n, entry in enumerate(entries):
            await run_entry(c, entry, args, totals, app.state.compactions)
            elapsed = time.perf_counter() - started
            progress(f"[{elapsed:.0f}s] {n + 1}/{len(entries)} {entry.case.id}")
    return totals


# --- output -------------------------------------------------------------------------------------

GROUPS = ("agent traces", "dialogues (en)", "dialogues (zh)", "dataset (all)", "long agent runs")


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "–"


def cost(total: int, stable: int) -> str:
    return f"{(total - stable + CACHED_PRICE * stable) / total:.2f}" if total else "–"


def with_all(tallies: Mapping[Key, Tally], budgets: Sequence[int]) -> dict[Key, Tally]:
    """The tallies plus a `dataset (all)` group at `budgets` (every dataset session, long
    runs apart) and the `whole` half (both halves together)."""
    out = dict(tallies)
    for (mode, half, group, budget, method), t in tallies.items():
        if group == "long agent runs" or budget not in budgets:
            continue
        out.setdefault((mode, half, "dataset (all)", budget, method), Tally()).merge(t)
    for (mode, half, group, budget, method), t in list(out.items()):
        if half != WHOLE:
            out.setdefault((mode, WHOLE, group, budget, method), Tally()).merge(t)
    return out


def method_label(name: str) -> str:
    return f"{name} (default)" if name == DEFAULT_STRATEGY else name


def row_of(t: Tally) -> list[object]:
    missed = t.ids_needed - t.ids_held
    return [
        f"{t.calls:,} ({t.trim_calls:,})", f"{pct(t.ids_held, t.ids_needed)} of {t.ids_needed:,}",
        pct(t.ids_held + t.ids_recalled, t.ids_needed),
        f"{pct(t.ids_recalled, missed)} of {missed:,}" if missed else "–",
        f"{t.missed_masked:,} / {t.missed_left_out:,}" if missed else "0 / 0",
        pct(t.recent, t.budget), pct(t.trim_stable, t.trim_input),
        pct(t.stable_tokens, t.input_tokens), cost(t.trim_input, t.trim_stable),
        f"{t.rereads:,} of {t.repeats:,}",
        f"{pct(t.instructions_kept, t.instructions)} of {t.instructions}", t.violations,
        pct(t.latest_user, t.with_user),
    ]  # fmt: skip


def table(tallies: Mapping[Key, Tally], mode: str, strategies: Sequence[str]) -> str:
    headers = (
        "sessions", "half", "budget", "method", "calls (trimming)", "grounding", "+ recall@3",
        "recall@3 of misses", "misses masked / left out", "recent / budget", "stable, trimming",
        "stable, all", "cost, trimming", "re-reads (all)", "instructions kept",
        "tool-group violations", "latest user",
    )  # fmt: skip
    rows = []
    budgets = sorted({k[3] for k in tallies})
    for group in GROUPS:
        for budget in budgets:
            for half in (*HALVES, WHOLE):
                for method in [*strategies, *BASELINES]:
                    mode_of = "-" if method in BASELINES else mode
                    t = tallies.get((mode_of, half, group, budget, method))
                    if t is None or not t.trim_calls:
                        continue
                    rows.append([group, half, f"{budget:,}", method_label(method), *row_of(t)])
    return markdown_table(headers, rows)


def recall_table(
    recalls: Mapping[RecallKey, Sequence[int]], mode: str, strategies: Sequence[str]
) -> str:
    """Recall@3 of the misses by language, per half and both (columns: docs/agent-loop.md)."""
    out: dict[RecallKey, list[int]] = {}
    for (m, half, where, lang, budget, method), counts in recalls.items():
        for h in (half, WHOLE):
            got = out.setdefault((m, h, where, lang, budget, method), [0, 0, 0])
            for k, n in enumerate(counts):
                got[k] += n
    rows = []
    for where in ("dataset", "long runs"):
        for lang in sorted({k[3] for k in out}):
            for budget in sorted({k[4] for k in out}):
                for half in (*HALVES, WHOLE):
                    for method in [*strategies, *BASELINES]:
                        mode_of = "-" if method in BASELINES else mode
                        key = (mode_of, half, where, lang, budget, method)
                        n, found, inside = out.get(key, (0, 0, 0))
                        if n:
                            rows.append(
                                (where, lang, f"{budget:,}", half, method_label(method),
                                 f"{n:,}", f"{found:,}", pct(found, n), f"{inside:,}",
                                 pct(found, n - inside))
                            )  # fmt: skip
    headers = (
        "sessions", "language", "budget", "half", "method", "searched", "found@3", "%",
        "inside longer tokens", "% of the rest",
    )  # fmt: skip
    return markdown_table(headers, rows)


def resent(t: Tally) -> str:
    """Where the input not served from the previous prefix went, as shares of the input of
    trimming calls: what the stable prefix misses of 100%, split by why."""
    parts = (t.resent_grown, t.resent_trim, t.resent_summary)
    return " / ".join(f"{100 * n / t.trim_input:.1f}%" for n in parts)


def targets(tallies: Mapping[Key, Tally], mode: str) -> str:
    """The default strategy against issue 37's targets, per half (docs/agent-loop.md)."""
    headers = ("sessions", "budget", "half", "grounding (naive)", "stable, trimming",
               "re-sent: grown / trims / new summary", "cost (naive)", "re-reads (naive)",
               "targets met")  # fmt: skip
    rows = []
    for group in ("dataset (all)", "long agent runs"):
        for budget in sorted({k[3] for k in tallies if k[2] == group}):
            for half in (*HALVES, WHOLE):
                ours = tallies.get((mode, half, group, budget, DEFAULT_STRATEGY))
                naive = tallies.get(("-", half, group, budget, NAIVE))
                if ours is None or naive is None or not ours.trim_calls:
                    continue
                g = ours.ids_held / ours.ids_needed if ours.ids_needed else 1.0
                gn = naive.ids_held / naive.ids_needed if naive.ids_needed else 1.0
                st = ours.trim_stable / ours.trim_input
                c = (ours.trim_input - (1 - CACHED_PRICE) * ours.trim_stable) / ours.trim_input
                cn = (naive.trim_input - (1 - CACHED_PRICE) * naive.trim_stable) / naive.trim_input
                failed = []
                if g < gn:
                    failed.append("grounding")
                if st < (0.80 if budget < 32_000 else 0.95):
                    failed.append("stable")
                if c > cn / 2:
                    failed.append("cost")
                rows.append(
                    (group, f"{budget:,}", half, f"{100 * g:.1f}% ({100 * gn:.1f}%)",
                     f"{100 * st:.1f}%", resent(ours), f"{c:.2f} ({cn:.2f})",
                     f"{ours.rereads} ({naive.rereads})",
                     "yes" if not failed else "no: " + ", ".join(failed))
                )  # fmt: skip
    return markdown_table(headers, rows)


# --- command line -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = parser(__doc__)  # each option: docs/agent-loop.md
    p.add_argument("--budgets", type=ints, default="8000,32000,128000")
    p.add_argument("--strategies", default="", help="comma-separated; default every strategy")
    p.add_argument("--compaction", default=None, help="off, on, or off,on (default off,on)")
    p.add_argument("--limit", type=int, default=0, help="first N dataset sessions only")
    p.add_argument("--dialogue-budgets", type=ints, default="1000,2000", help="and the dialogues")
    p.add_argument("--long", type=int, default=15, help="runs of long-agent-runs.jsonl (0: none)")
    p.add_argument("--long-max-tokens", type=int, default=0, help="long runs cut past this")
    p.add_argument("--long-budgets", type=ints, default="32000,128000")
    p.add_argument("--k", type=int, default=4, help="planted instructions per session")
    p.add_argument("--quick", action="store_true", help="the subset to iterate with")
    p.add_argument("--dataset", type=Path, default=DATASET)
    p.add_argument("--long-dataset", type=Path, default=None, help="beside --dataset by default")
    p.add_argument("--misses", type=argparse.FileType("w"), help="each miss (JSON lines)")
    p.add_argument("--calls", type=argparse.FileType("w"), help="each payload (JSON lines)")
    args = p.parse_args(argv)
    if args.quick:
        args.budgets, args.long_budgets, args.dialogue_budgets = [8000, 32000], [32000], [2000]
        args.strategies, args.long, args.limit = DEFAULT_STRATEGY, 2, 0
        args.compaction = args.compaction or "off"
        args.long_max_tokens = 80_000
    args.compaction = [m for m in (args.compaction or "off,on").split(",") if m.strip()]
    if args.long_dataset is None:
        args.long_dataset = args.dataset.parent / "long-agent-runs.jsonl"
    args.strategies = [s for s in args.strategies.split(",") if s.strip()] or available_strategies()
    unknown = set(args.strategies) - set(available_strategies())
    if unknown or not args.budgets or not set(args.compaction) <= {"off", "on"}:
        p.error(f"bad --strategies {sorted(unknown)} or --budgets or --compaction")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    entries = load_entries(args)
    load_start = load_average()
    started = time.perf_counter()
    with migrated_database(args, prefix="contextd_agentloop") as db:
        totals = asyncio.run(run(args, db.url, entries))
    tallies = with_all(totals.tallies, args.budgets)
    counts = Counter(e.group for e in entries)
    halves = {h: sum(e.half == h for e in entries) for h in HALVES}
    long = [e for e in entries if e.group == "long agent runs"]
    print(
        f"contextd agent-loop bench: {machine_info()}; {args.dataset.name}: "
        + ", ".join(f"{n} {g}" for g, n in counts.items())
        + f" ({', '.join(f'{g} {n:,}' for g, n in totals.calls.items())} model calls); "
        f"{args.k} planted instructions each; model {MODEL} (exact o200k_base counts); "
        f"budgets {', '.join(f'{b:,}' for b in args.budgets)}"
        + (f", long runs at {', '.join(f'{b:,}' for b in args.long_budgets)}" if long else "")
        + f"; halves by sha256(id) parity: {halves['tuning']} tuning, "
        f"{halves['checking']} checking"
    )
    for e in long:
        tokens = sum(e.case.counts)
        print(f"- {e.case.id} ({e.half}): {len(e.case.messages)} messages, {tokens:,} tokens")
    print(f"load average (1/5/15 min) at start {load_start}, at end {load_average()}")
    for mode in args.compaction:
        what = "auto-compaction off"
        if mode == "on":
            what = f"auto-compaction on (extractive, no model; {totals.compactions} compactions)"
        print(f"\n### {what}; trimming calls unless the column says all\n")
        print(table(tallies, mode, args.strategies))
        print(f"\nRecall@3 of the identifiers each payload misses, by language, {what}:\n")
        print(recall_table(totals.recalls, mode, args.strategies))
        print(f"\nTargets, {method_label(DEFAULT_STRATEGY)}, {what}:\n")
        print(targets(tallies, mode))
    print(f"\n{time.perf_counter() - started:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
