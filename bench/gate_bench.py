"""The quality gate of compaction (SPEC §5) over the shared dataset's sessions.

    python bench/gate_bench.py [--sessions N] [--times 1,2,3,5] [--summarisers ...]
    python bench/compaction_bench.py --gate [same options]

Each dataset session (English and Chinese, dialogues and agent runs) is cut into
`n + 1` chunks of about equal messages for n in `--times`; the chunks are appended
one by one and the session is compacted after each but the last, n compactions in
all, each rolling onto the previous summary. Every compaction runs the engine
itself (`app.compaction.engine.summarise`: brief, model call over real HTTP,
citations, gate, retry, patch, fallback); the database adds nothing to what the
gate checks, so it is left out. Summarisers: the extractive one (no model) and the
stand-ins of `tests/support/fakellm.py` on a loopback socket (what each loses or invents:
docs/gate.md).

Reported per summariser, language and number of compactions, per probe kind: the
share of probes the summariser's own answer kept (before the gate) and the share the
stored context keeps; then per summariser what the gate caught and restored, and what
must be 0 (the columns, with a run's figures: docs/gate.md).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/gate_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.compaction.checks import conversation_language_of
from app.compaction.engine import summarise
from app.compaction.model_client import ChatModelClient
from app.compaction.provenance import Sources, split_cites
from app.compaction.summary import StructuredSummary
from app.compaction.turns import CompactionPlan, plan_range
from app.core.conversation import LoggedMessage
from app.core.tokens import get_counter
from bench.common import dataset_sessions, ints, parser
from tests.support.fakellm import FakeLLM

SUMMARISERS = ("extractive", "normal", "paraphrase", "drop_oldest", "invent_seq",
               "invent_number", "echo_prompt", "invent_fact")  # fmt: skip
KINDS = ("constraint", "question", "artifact", "decision", "todo", "error")
MODEL_SECTIONS = ("facts", "decisions", "open_todos", "user_prefs", "timeline")
CITED = (*MODEL_SECTIONS, "user_messages", "artifacts", "pinned")


@dataclass(frozen=True)
class Settings:
    summary_temperature: float = 0.1
    compact_timeout_s: float = 30.0
    anchor_retry_enabled: bool = True
    user_messages_ratio: float = 0.15
    artifacts_ratio: float = 0.1
    usable_budget: int = 16_000


def logged(messages: Sequence[dict[str, Any]], counter: Any) -> list[LoggedMessage]:
    out = []
    for i, m in enumerate(messages, start=1):
        body = {k: v for k, v in m.items() if k in ("role", "content", "tool_calls",
                                                    "tool_call_id", "name")}  # fmt: skip
        out.append(
            LoggedMessage(
                seq=i, id=f"m{i}", role=m["role"], body=body,
                token_count=counter.count_message(body),
            )
        )  # fmt: skip
    return [m for m in out if m.role != "system"]


@dataclass
class Tally:
    compactions: int = 0
    caught: int = 0
    lost_fitting: int = 0
    corrected: int = 0
    dropped_items: int = 0
    echoed: int = 0
    invented: int = 0
    restored_made: int = 0
    unborne: int = 0

    def __post_init__(self) -> None:
        self.answer: dict[str, list[float]] = defaultdict(list)
        self.final: dict[str, list[float]] = defaultdict(list)
        self.by: dict[str, int] = defaultdict(int)


# contextd's own marks in the trail: a cut (`…(+3 lines)`), the tool that returned a value
# (`got: 4NQLHD ← get_user`: the value's seq is cited, the call's name is in the one before).
_MARKS = re.compile(r"…\(\+\d+ lines?\)| ← [\w.-]+$")


def unborne(summary: StructuredSummary, log: Sources) -> int:
    """Items whose cited seqs do not support them (their identifiers and numbers with the
    same token boundaries, enough of their words: app/compaction/support.py)."""
    bad = 0
    for name in CITED:
        # The sections contextd writes by rule: their identifiers and numbers held.
        keys_only = name not in MODEL_SECTIONS
        for item in getattr(summary, name):
            body, ranges = split_cites(item)
            if ranges and not log.supports(ranges, _MARKS.sub("", body), keys_only=keys_only):
                bad += 1
    return bad


async def run_session(
    messages: list[LoggedMessage],
    times: int,
    summariser: str,
    llm: FakeLLM | None,
    tally: Tally,
    counter: Any,
) -> None:
    size = max(1, len(messages) // (times + 1))
    cuts = [size * (k + 1) for k in range(times)]
    previous: StructuredSummary | None = None
    watermark = 0
    client = None
    if llm is not None:
        llm.behaviour = summariser
        client = ChatModelClient(base_url=llm.base_url, model="fake", api_key="k", max_retries=0)
    try:
        for cut in cuts:
            history = [m for m in messages if watermark < m.seq <= messages[cut - 1].seq]
            plan = plan_range(history, watermark=watermark, min_preserved_turns=1, force=True)
            if not isinstance(plan, CompactionPlan):
                continue
            outcome = await summarise(
                plan, previous, [], client=client, settings=Settings(), counter=counter
            )
            gate = outcome.gate or {}
            tally.compactions += 1
            for kind, score in gate.get("answer_scores", {}).items():
                tally.answer[kind].append(score)
            for kind, score in gate.get("scores", {}).items():
                tally.final[kind].append(score)
            if gate.get("caught"):
                tally.caught += 1
            for c in gate.get("caught", ()):
                tally.by[c["by"]] += 1
            if any(not d["over_share"] for d in gate.get("dropped", ())):
                tally.lost_fitting += 1
            cites = gate.get("citations", {})
            tally.corrected += cites.get("corrected", 0)
            tally.dropped_items += cites.get("unsupported", 0)
            tally.echoed += cites.get("echo", 0)
            tally.invented += outcome.reason == "invented"
            made = {split_cites(d["text"])[0] for d in cites.get("dropped_items", ())}
            tally.restored_made += sum(
                1 for name in CITED for i in getattr(outcome.summary, name)
                if split_cites(i)[0] in made
            )  # fmt: skip
            # Against the whole log so far: rolled items cite seqs of earlier ranges.
            log = Sources.of([m for m in messages if m.seq <= plan.new_watermark])
            tally.unborne += unborne(outcome.summary, log)
            previous, watermark = outcome.summary, plan.new_watermark
    finally:
        if client is not None:
            await client.aclose()


def mean(values: Sequence[float]) -> str:
    return f"{sum(values) / len(values):.2f}" if values else "–"


def tables(results: dict[tuple[str, str, int], Tally]) -> str:
    lines = ["### Scores per probe kind: the summariser's answer → the stored context", ""]
    head = "| summariser | lang | compactions | " + " | ".join(KINDS) + " |"
    lines += [head, "|" + " --- |" * (3 + len(KINDS))]
    for (summariser, lang, n), t in sorted(results.items()):
        cells = [f"{mean(t.answer[k])} → {mean(t.final[k])}" for k in KINDS]
        lines.append(
            f"| {summariser} | {lang} | {n}× ({t.compactions}) | " + " | ".join(cells) + " |"
        )
    lines += ["", "### What the gate caught, per summariser (all languages and counts)", ""]
    lines += [
        "| summariser | compactions | answer missed a fitting probe | restored by retry / "
        "patch / extractive | stored missing a fitting probe | citations corrected | items "
        "dropped: unsupported / echo | stored extractive (`invented`) | stored items that "
        "were dropped | items their citation does not support |",
        "|" + " --- |" * 10,
    ]
    for summariser in SUMMARISERS:
        ts = [t for (s, _, _), t in results.items() if s == summariser]
        if not ts:
            continue
        total = Tally()
        for t in ts:
            for f in fields(Tally):
                setattr(total, f.name, getattr(total, f.name) + getattr(t, f.name))
            for k, v in t.by.items():
                total.by[k] += v
        by = " / ".join(str(total.by.get(k, 0)) for k in ("retry", "patch", "extractive"))
        lines.append(
            f"| {summariser} | {total.compactions} | {total.caught} | {by} | "
            f"{total.lost_fitting} | {total.corrected} | {total.dropped_items} / {total.echoed} | "
            f"{total.invented} | {total.restored_made} | {total.unborne} |"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace, sessions: list[dict[str, Any]]) -> int:
    counter = get_counter("gpt-4o-mini")
    cases: list[tuple[str, list[LoggedMessage]]] = []
    for s in sessions:
        messages = logged(s["messages"], counter)
        if len(messages) < 12:
            continue
        lang = "zh" if conversation_language_of(messages) == "zh" else "en"
        cases.append((lang, messages))
    if args.sessions:
        by_lang: dict[str, list[list[LoggedMessage]]] = defaultdict(list)
        for lang, m in cases:
            by_lang[lang].append(m)
        cases = [(lang, m) for lang, ms in by_lang.items() for m in ms[: args.sessions]]
    summarisers = args.summarisers.split(",")
    results: dict[tuple[str, str, int], Tally] = {}
    async with FakeLLM() as llm:
        for summariser in summarisers:
            for n in args.times:
                for i, (lang, messages) in enumerate(cases):
                    tally = results.setdefault((summariser, lang, n), Tally())
                    print(f"{summariser} ×{n} {lang} session {i + 1}/{len(cases)}", file=sys.stderr)
                    model = None if summariser == "extractive" else llm
                    await run_session(messages, n, summariser, model, tally, counter)
    print(f"{len(cases)} sessions ({sum(1 for c in cases if c[0] == 'zh')} Chinese)\n")
    print(tables(results))
    return 0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = parser(__doc__, database=False)
    p.add_argument("--sessions", type=int, help="at most N sessions per language")
    p.add_argument("--times", type=ints, default="1,2,3,5", help="compactions per session")
    p.add_argument("--summarisers", default=",".join(SUMMARISERS))
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    return asyncio.run(main_async(parse_args(argv), dataset_sessions()))


if __name__ == "__main__":
    raise SystemExit(main())
