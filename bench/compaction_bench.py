"""Compaction over the long multi-turn sessions of the shared dataset, with and without a model.

    python bench/compaction_bench.py [--database-url URL] [--sessions N] [--quick] [--control]
    python bench/compaction_bench.py --gate ...  # the quality gate: bench/gate_bench.py

Each dataset session gets three planted constraint turns early on (a user
message "Constraint C<n>: never ..., and always ..." (Chinese for Chinese
sessions) with a code found nowhere in the dataset, and an acknowledgement
that does not repeat the code), placed after its first, second and third
original turns. Its turns are then split into three chunks at turn
boundaries, about a third of its tokens each, the first one holding every
planted turn. For k = 1, 2, 3 the bench appends chunk k over HTTP, reads
`GET /budget`, runs `POST /compact {wait, force}`, and reads `GET /budget`,
`GET /context` and `GET /compaction` again. `context_limit` leaves room for
the whole session, so the payload is never trimmed: a constraint that is not
in it was lost by compaction.

A session qualifies when the planner finds a range at each of the three
compactions: `select_cases` runs the app's own `session_compaction` and
`plan_session` (what the job and `dry_run` call) over the chunks with the
session's settings, moving the watermark as the job would, so a session whose
tail the planner keeps whole (it fits `keep_recent_ratio` of the window) is
left out rather than counted as an error; each run then checks that the job
moved the watermark where the selection said. Agent traces that are one long
user turn never qualify (the current turn is never compacted).

Configurations, on the app in-process (`create_app` + `httpx.ASGITransport`,
one compaction worker), each for `min_preserved_turns` 2 and 4:

- model: `tests.support.fakellm.FakeLLM` ("normal": deterministic, follows the prompt)
  on a real loopback socket;
- extractive only: no model configured (SPEC §7), the extractive summary;
- with `--control`, also a model that ignores the prompt (FakeLLM "minimal"):
  a negative control showing that the measurement does see constraints lost.

They share one app and database (`Harness.use`) and alternate session by session.

Measured:

- constraints visible: share of planted codes found anywhere in the text of the
  `GET /context` payload after compaction k (and, stricter, the whole planted
  sentence verbatim; and the share found in the summary message itself);
- tokens before → after: `current_tokens` of `GET /budget` around the compaction;
- summary input tokens: `compaction_metadata.rolling_summary_input_tokens`
  (compacted range + previous summary), next to the compacted history so far
  (what a summariser that re-reads everything would take);
- latency excluding the model: wall time of the runner's `run_once` for the
  job (claim, load, plan, summarise, store, commit) minus the wall time of
  every `ChatModelClient.complete` call it made (HTTP round trip to the fake
  server included). With no model nothing is subtracted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, cast

import httpx

if __package__ in (None, ""):  # `python bench/compaction_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.compaction import runner as runner_module
from app.compaction.engine import summarise as engine_summarise
from app.compaction.model_client import ChatModelClient
from app.compaction.outcome import SummaryOutcome
from app.compaction.runner import CompactionRunner
from app.compaction.service import plan_session
from app.compaction.turns import NoopReason
from app.core.budget import session_compaction
from app.core.conversation import LoggedMessage, content_text
from app.core.settings import CompactionSettings, Settings, load_settings
from app.core.tokens import get_counter
from app.db.models import SessionRow
from bench.common import (
    DATASET,
    Recorder,
    app_client,
    check,
    dataset_sessions,
    load_average,
    machine_info,
    markdown_table,
    migrated_database,
    parser,
    percentile,
    progress,
    server_version,
    squash,
)
from tests.support.fakellm import FakeLLM

COMPACTIONS = 3
QUICK_SESSIONS = 4
COUNTER = get_counter(None)
CONSTRAINTS = {
    "en": [
        "Constraint {code}: never use the staging database, and always answer in metric units.",
        "Constraint {code}: you must not share my phone number with anyone and must always "
        "confirm with me before paying.",
        "Constraint {code}: never schedule anything before 9 am, and always prefer the cheapest "
        "refundable option.",
    ],
    "zh": [
        "约束 {code}：不要使用测试数据库，回答时必须使用公制单位。",
        "约束 {code}：不要把我的电话号码告诉任何人，付款之前必须先跟我确认。",
        "约束 {code}：不要安排早上九点之前的活动，一定优先选择最便宜且可退款的方案。",
    ],
}
ACK = {"en": "Understood, I will follow that from now on.", "zh": "好的，我以后会遵守。"}
SUMMARY_PREFIX = "Summary of the conversation so far"


# --- sessions, planted constraints, chunks ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Source:
    id: str
    source: str
    kind: str
    lang: str
    system: str | None
    messages: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Planted:
    code: str
    text: str


@dataclass(frozen=True, slots=True)
class Case:
    source: Source
    planted: list[Planted]
    chunks: list[list[dict[str, Any]]]  # COMPACTIONS chunks of whole turns
    turns: int
    tokens: int  # messages only, planted included
    watermarks: tuple[int, ...] = ()  # after each compaction, as the planner places them

    @property
    def context_limit(self) -> int:
        """Room for the whole session: the payload is never trimmed, only compacted."""
        system = COUNTER.count_text(self.source.system or "")
        return max(8192, self.tokens + system + 4096)


def load_sources(path: Path = DATASET) -> list[Source]:
    out = []
    for row in dataset_sessions(path):
        meta = row.get("meta") or {}
        lang = "zh" if meta.get("lang") == "zh" else "en"
        messages = [m for m in row["messages"] if m.get("role") != "system"]
        out.append(Source(str(row["id"]), str(row.get("source", "?")), str(meta.get("kind", "?")),
                          lang, row.get("system") or None, messages))  # fmt: skip
    return out


def split_turns(messages: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A user message and everything up to the next one; a leading non-user run is a turn."""
    turns: list[list[dict[str, Any]]] = []
    for m in messages:
        if m.get("role") == "user" or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    return turns


def unique_codes(corpus: str, count: int, start: int = 101) -> list[str]:
    """`C<n>` codes that occur nowhere in the dataset, so a hit can only be a planted one."""
    codes: list[str] = []
    n = start
    while len(codes) < count:
        code = f"C{n}"
        if not code_pattern(code).search(corpus):
            codes.append(code)
        n += 1
    return codes


def code_pattern(code: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(code)}(?![0-9])")


def prepare(source: Source, codes: Sequence[str], preserved_turns: int) -> Case | None:
    """Plant the constraints and cut the session into chunks; None if it cannot compact 3 times."""
    original = split_turns(source.messages)
    if len(original) < len(codes) or sum(1 for t in original if t[0].get("role") == "user") < 2:
        return None
    planted = [
        Planted(code, CONSTRAINTS[source.lang][j].format(code=code)) for j, code in enumerate(codes)
    ]
    turns: list[list[dict[str, Any]]] = []
    last_planted = -1
    for i, turn in enumerate(original):
        turns.append(turn)
        if i < len(planted):
            turns.append(
                [
                    {"role": "user", "content": planted[i].text},
                    {"role": "assistant", "content": ACK[source.lang]},
                ]
            )
            last_planted = len(turns) - 1
    costs = [sum(COUNTER.count_message(m) for m in t) for t in turns]
    total = sum(costs)
    n = len(turns)
    # Chunk 1: every planted turn, plus the current turn, the preserved turns and one to compact.
    low1 = max(last_planted + 1, preserved_turns + 2)
    cuts: list[int] = []
    lowest = low1
    for k in range(1, COMPACTIONS):
        target = total * k / COMPACTIONS
        running, at = 0, n
        for i, c in enumerate(costs):
            running += c
            if running >= target:
                at = i + 1
                break
        cut = min(max(at, lowest), n - (COMPACTIONS - k))
        if cut < lowest:
            return None
        cuts.append(cut)
        lowest = cut + 1
    bounds = [0, *cuts, n]
    chunks = [[m for t in turns[bounds[i] : bounds[i + 1]] for m in t] for i in range(COMPACTIONS)]
    if any(not c for c in chunks):
        return None
    return Case(source, planted, chunks, n, total)


def bench_settings(model_url: str | None = None) -> dict[str, Any]:
    """The app's settings in this bench: one compaction worker, the model if any."""
    return {
        "llm_base_url": model_url,
        "llm_model": "fake" if model_url else None,
        "compaction_workers": 1,
        "job_lease_s": 30.0,
        "compaction": CompactionSettings(compact_timeout_s=30.0),
    }


def session_body(case: Case, preserved_turns: int) -> dict[str, Any]:
    """The PUT /sessions body of a run: no automatic compaction, the whole window usable."""
    return {
        "context_limit": case.context_limit,
        "system_prompt": case.source.system,
        "auto_compact": False,
        "compaction": {
            "min_preserved_turns": preserved_turns,
            "reserved_output_tokens": 0,
            "safety_margin_tokens": 0,
        },
    }


@dataclass(frozen=True, slots=True)
class PlannerNoop:
    k: int  # which compaction, from 1
    reason: NoopReason


def planned_watermarks(
    case: Case, preserved_turns: int, settings: Settings
) -> tuple[int, ...] | PlannerNoop:
    """Where the watermark lands after each `POST /compact {force}`, or the planner's noop.

    The app's own planning (`session_compaction`, `plan_session`) over the chunks as
    they are appended: the plan does not depend on the summary, so no summariser runs.
    """
    body = session_body(case, preserved_turns)
    row = SessionRow(
        model=None,
        context_limit=body["context_limit"],
        compaction=body["compaction"],
        last_compaction_seq=0,
        compacted_history_tokens=0,
        compaction_count=0,
    )
    counter = get_counter(settings.default_model)
    log: list[LoggedMessage] = []
    watermarks: list[int] = []
    for chunk in case.chunks:
        for m in chunk:
            seq = len(log) + 1
            log.append(
                LoggedMessage(
                    seq=seq,
                    id=f"m{seq}",
                    role=m["role"],
                    body=m,
                    token_count=counter.count_message(m),
                )
            )
        watermark = row.last_compaction_seq
        history = [m for m in log if m.seq > watermark]
        plan = plan_session(history, row, session_compaction(row, settings), force=True)
        if isinstance(plan, NoopReason):
            return PlannerNoop(len(watermarks) + 1, plan)
        row.last_compaction_seq = plan.new_watermark
        row.compaction_count += 1
        watermarks.append(plan.new_watermark)
    return tuple(watermarks)


@dataclass(frozen=True, slots=True)
class Selection:
    cases: list[Case]  # the longest qualifying sessions, at most `limit`
    qualified: int
    too_few_turns: int
    # (session id, compaction k, the planner's noop reason) of sessions left out
    planner_noops: list[tuple[str, int, str]]


def select_cases(
    sources: Sequence[Source],
    limit: int | None,
    preserved_turns: int,
    settings: Settings | None = None,
) -> Selection:
    """Sessions that compact three times by the planner's own rule (see the module docstring)."""
    settings = settings or load_settings(database_url=None, **bench_settings())
    corpus = "\n".join(
        f"{s.system or ''}\n{json.dumps(s.messages, ensure_ascii=False)}" for s in sources
    )
    codes = unique_codes(corpus, 3 * len(sources))
    cases = []
    few = 0
    noops: list[tuple[str, int, str]] = []
    for i, s in enumerate(sources):
        case = prepare(s, codes[3 * i : 3 * i + 3], preserved_turns)
        if case is None:
            few += 1
            continue
        planned = planned_watermarks(case, preserved_turns, settings)
        if isinstance(planned, PlannerNoop):
            noops.append((s.id, planned.k, planned.reason.code))
            continue
        cases.append(replace(case, watermarks=planned))
    cases.sort(key=lambda c: c.tokens, reverse=True)
    return Selection(cases[:limit] if limit else cases, len(cases), few, noops)


# --- instrumentation ----------------------------------------------------------------------------


class Clocks:
    """Wall times of the runner's jobs (`run_once` that ran one: claim to commit), of the
    engine (`summarise`, the model call inside it) and of the model calls."""

    def __init__(self, runner: CompactionRunner, client: Recorder) -> None:
        self.jobs: list[float] = []
        self.engine: list[float] = []
        self.model = client.seconds
        original_run_once: Callable[[], Awaitable[bool]] = runner.run_once
        self.job_done = asyncio.Event()

        async def run_once() -> bool:
            start = time.perf_counter()
            worked = await original_run_once()
            if worked:
                self.jobs.append(time.perf_counter() - start)
                self.job_done.set()
            return worked

        async def summarise(*args: Any, **kwargs: Any) -> SummaryOutcome:
            start = time.perf_counter()
            try:
                return await engine_summarise(*args, **kwargs)
            finally:
                self.engine.append(time.perf_counter() - start)

        # The worker loop looks `run_once` up on every iteration, `_run` looks `summarise` up
        # in its module on every job.
        setattr(runner, "run_once", run_once)  # noqa: B010
        setattr(runner_module, "summarise", summarise)  # noqa: B010

    def close(self) -> None:
        setattr(runner_module, "summarise", engine_summarise)  # noqa: B010

    def mark(self) -> tuple[int, int, int]:
        self.job_done.clear()
        return len(self.jobs), len(self.engine), len(self.model)

    async def wait_job(self, timeout_s: float = 10) -> None:
        """The job is committed (and answered) before its `run_once` returns: wait for that."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.job_done.wait(), timeout_s)


# --- one configuration --------------------------------------------------------------------------


@dataclass(slots=True)
class Step:
    """One compaction k of one session."""

    k: int
    status: str
    summarizer: str | None
    tokens_before: int
    tokens_after: int
    range_tokens: int
    input_tokens: int
    compacted_so_far: int  # sum of the compacted ranges up to k
    summary_tokens: int
    visible: int  # planted codes anywhere in the payload
    verbatim: int  # whole planted sentences in the payload
    in_summary: int  # planted codes in the summary message
    job_s: float  # the runner's whole job
    engine_s: float  # `summarise`, model call included
    model_s: float  # the model calls
    model_calls: int
    missed: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Run:
    case: Case
    steps: list[Step] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Config:
    key: str
    label: str
    behaviour: str | None  # the FakeLLM behaviour, None: no model configured

    @property
    def use_model(self) -> bool:
        return self.behaviour is not None


CONFIGS = (
    Config("model", "model (FakeLLM normal)", "normal"),
    Config("extractive", "extractive only (no model)", None),
)
# A model that ignores the prompt: shows the measurement does see constraints go missing.
CONTROL = Config("control", "control: model ignoring the prompt (FakeLLM minimal)", "minimal")


@dataclass(frozen=True, slots=True)
class Variant:
    config: Config
    preserved_turns: int

    @property
    def label(self) -> str:
        return f"{self.config.label}, preserve {self.preserved_turns}"


Results = dict[Variant, list[Run]]


def payload_text(ctx: dict[str, Any]) -> tuple[str, str]:
    """(all text of the payload, text of the summary message)."""
    parts: list[str] = []
    summary = ""
    for m in ctx["messages"]:
        text = content_text(m)
        if m.get("role") == "system" and text.startswith(SUMMARY_PREFIX):
            summary += text
        parts.append(text)
    return "\n".join(parts), summary


@dataclass(slots=True)
class Harness:
    client: httpx.AsyncClient
    runner: CompactionRunner
    model: Recorder
    clocks: Clocks
    llm: FakeLLM

    def use(self, config: Config) -> None:
        """The model client, or none: exactly what an unset CONTEXTD_LLM_BASE_URL gives the
        runner (`model_client` yields None; nothing else in the app reads the model client).
        Safe between sessions: jobs run one at a time and the runner reads it per job."""
        self.runner.client = cast("ChatModelClient", self.model) if config.use_model else None
        self.llm.behaviour = config.behaviour or "normal"


@contextlib.asynccontextmanager
async def harness(url: str) -> AsyncIterator[Harness]:
    async with FakeLLM() as llm, app_client(url, **bench_settings(llm.base_url)) as (client, app):
        runner: CompactionRunner = app.state.compactions
        if runner.client is None:
            raise RuntimeError("the app has no model client")
        model = Recorder(runner.client)
        clocks = Clocks(runner, model)
        try:
            yield Harness(client, runner, model, clocks, llm)
        finally:
            clocks.close()


async def run_all(url: str, plans: dict[int, Selection], configs: Sequence[Config]) -> Results:
    """Every session under every variant; the two configurations alternate session by session
    (first one, then the other, swapping each time) so background load hits both alike."""
    results: Results = {}
    async with harness(url) as h:
        for preserved, selection in plans.items():
            cases = selection.cases
            for config in configs:
                results[Variant(config, preserved)] = []
            for i, case in enumerate(cases):
                order = configs if i % 2 == 0 else configs[::-1]
                for config in order:
                    variant = Variant(config, preserved)
                    progress(f"{variant.label}: {i + 1}/{len(cases)} {case.source.id}")
                    run = Run(case)
                    h.use(config)
                    try:
                        await run_session(h, case, variant, run)
                    except Exception as exc:  # one broken session must not hide the others
                        run.error = f"{type(exc).__name__}: {exc}"
                        progress(f"  error: {run.error}")
                    results[variant].append(run)
    return results


async def run_session(h: Harness, case: Case, variant: Variant, run: Run) -> None:
    c = h.client
    sid = f"cbench-{variant.config.key}-{variant.preserved_turns}-{uuid.uuid4().hex[:10]}"
    check(
        await c.put(f"/sessions/{sid}", json=session_body(case, variant.preserved_turns)), 200, 201
    )
    compacted = 0
    patterns = [code_pattern(p.code) for p in case.planted]
    for k, chunk in enumerate(case.chunks, start=1):
        check(await c.post(f"/sessions/{sid}/messages", json={"messages": chunk}), 201)
        before = check(await c.get(f"/sessions/{sid}/budget"), 200)["current_tokens"]
        jobs, engines, calls = h.clocks.mark()
        done = check(
            await c.post(
                f"/sessions/{sid}/compact", json={"wait": True, "force": True, "timeout_s": 120}
            ),
            200,
        )
        after = check(await c.get(f"/sessions/{sid}/budget"), 200)["current_tokens"]
        ctx = check(await c.get(f"/sessions/{sid}/context"), 200)
        state = check(await c.get(f"/sessions/{sid}/compaction"), 200)
        meta = done.get("compaction_metadata") or {}
        if done.get("watermark_after") != case.watermarks[k - 1]:
            # The selection planned this session with the app's planner: a different
            # watermark means the bench's copy of the session's settings has drifted.
            raise RuntimeError(
                f"compaction {k}: {done['status']} to watermark {done.get('watermark_after')}, "
                f"the selection planned {case.watermarks[k - 1]}"
            )
        await h.clocks.wait_job()
        if len(h.clocks.jobs) != jobs + 1 or len(h.clocks.engine) != engines + 1:
            raise RuntimeError(
                f"compaction {k}: expected one job and one summarise, saw "
                f"{len(h.clocks.jobs) - jobs} and {len(h.clocks.engine) - engines}"
            )
        model = h.clocks.model[calls:]
        if not variant.config.use_model and model:
            raise RuntimeError(f"compaction {k}: the extractive configuration called the model")
        compacted += int(meta.get("range_tokens") or 0)
        text, summary = payload_text(ctx)
        flat = squash(text)
        run.steps.append(
            Step(
                k=k,
                status=str(done["status"]),
                summarizer=meta.get("summarizer"),
                tokens_before=int(before),
                tokens_after=int(after),
                range_tokens=int(meta.get("range_tokens") or 0),
                input_tokens=int(meta.get("rolling_summary_input_tokens") or 0),
                compacted_so_far=compacted,
                summary_tokens=int(state["summary"]["tokens"] or 0),
                visible=sum(1 for p in patterns if p.search(text)),
                verbatim=sum(1 for p in case.planted if squash(p.text) in flat),
                in_summary=sum(1 for p in patterns if p.search(summary)),
                job_s=h.clocks.jobs[-1],
                engine_s=h.clocks.engine[-1],
                model_s=sum(model),
                model_calls=len(model),
                missed=[
                    p.code
                    for p, pat in zip(case.planted, patterns, strict=True)
                    if not pat.search(text)
                ],
            )
        )


# --- tables -------------------------------------------------------------------------------------


def pct(num: int, den: int) -> float | None:
    return 100 * num / den if den else None


def mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def steps_at(runs: Sequence[Run], k: int) -> list[tuple[Run, Step]]:
    return [(r, s) for r in runs for s in r.steps if s.k == k and r.error is None]


def retention_table(results: Results) -> str:
    after = [f"visible after {k} (%)" for k in range(1, COMPACTIONS + 1)]
    headers = ["configuration", "sessions", *after, f"verbatim after {COMPACTIONS} (%)",
               f"in summary after {COMPACTIONS} (%)"]  # fmt: skip
    rows: list[list[object]] = []
    for variant, runs in results.items():
        groups: list[tuple[str, Sequence[Run]]] = [("all", runs)]
        for lang in ("en", "zh"):
            mine = [r for r in runs if r.case.source.lang == lang]
            if mine and len(mine) != len(runs):
                groups.append((lang, mine))
        for name, group in groups:
            ok = [r for r in group if r.error is None]
            row: list[object] = [f"{variant.label}, {name}", len(ok)]
            for k in range(1, COMPACTIONS + 1):
                at = steps_at(ok, k)
                row.append(pct(sum(s.visible for _, s in at), 3 * len(at)))
            last = steps_at(ok, COMPACTIONS)
            row.append(pct(sum(s.verbatim for _, s in last), 3 * len(last)))
            row.append(pct(sum(s.in_summary for _, s in last), 3 * len(last)))
            rows.append(row)
    return markdown_table(headers, rows)


def growth_table(results: Results) -> str:
    headers = (
        "configuration", "k", "tokens before (mean)", "tokens after (mean)",
        "range tokens (mean)", "summary input tokens (mean)", "of which previous summary",
        "compacted history so far (mean)", "input / history so far",
        "summary tokens after (mean)", "statuses",
    )  # fmt: skip
    rows: list[list[object]] = []
    for variant, runs in results.items():
        for k in range(1, COMPACTIONS + 1):
            at = [s for _, s in steps_at(runs, k)]
            inputs = sum(s.input_tokens for s in at)
            history = sum(s.compacted_so_far for s in at)
            statuses: dict[str, int] = {}
            for s in at:
                key = s.status if s.summarizer is None else f"{s.status}/{s.summarizer}"
                statuses[key] = statuses.get(key, 0) + 1
            rows.append([
                variant.label, k, mean([s.tokens_before for s in at]),
                mean([s.tokens_after for s in at]), mean([s.range_tokens for s in at]),
                mean([s.input_tokens for s in at]),
                mean([s.input_tokens - s.range_tokens for s in at]),
                mean([s.compacted_so_far for s in at]), inputs / history if history else None,
                mean([s.summary_tokens for s in at]),
                ", ".join(f"{n} {v}" for v, n in sorted(statuses.items())),
            ])  # fmt: skip
    return markdown_table(headers, rows)


def growth_verdict(results: Results) -> str:
    lines = []
    for variant, runs in results.items():
        first = [s for _, s in steps_at(runs, 1)]
        last = [s for _, s in steps_at(runs, COMPACTIONS)]
        if not first or not last:
            continue
        inputs = sum(s.input_tokens for s in last) / max(1, sum(s.input_tokens for s in first))
        history = sum(s.compacted_so_far for s in last) / max(
            1, sum(s.compacted_so_far for s in first)
        )
        # What the summariser re-reads of the past: the previous summary, against the whole
        # earlier compacted history a concatenating summariser would re-read.
        carried = sum(s.input_tokens - s.range_tokens for s in last)
        earlier = sum(s.compacted_so_far - s.range_tokens for s in last)
        word = (
            "sub-linear (rolling)" if inputs < history and carried < earlier else "NOT sub-linear"
        )
        lines.append(
            f"- {variant.label}: from compaction 1 to {COMPACTIONS} the summary input grew "
            f"x{inputs:.2f} while the compacted history grew x{history:.2f}; at compaction "
            f"{COMPACTIONS} the past is carried as {carried / len(last):,.0f} tokens of previous "
            f"summary instead of {earlier / len(last):,.0f} of earlier history "
            f"(x{carried / max(1, earlier):.2f}): {word}"
        )
    return "\n".join(lines)


def latency_table(results: Results) -> str:
    headers = (
        "configuration", "jobs", "latency excl. model p50 ms", "p95 ms", "max ms",
        "of which summarise p50 ms", "of which the rest p50 ms", "model calls / job",
        "model call p50 ms", "job wall p50 ms",
    )  # fmt: skip
    rows: list[list[object]] = []
    for variant, runs in results.items():
        steps = [s for r in runs if r.error is None for s in r.steps]
        per_call = [s.model_s / s.model_calls * 1000 for s in steps if s.model_calls]
        latency = [(s.job_s - s.model_s) * 1000 for s in steps]
        engine = [(s.engine_s - s.model_s) * 1000 for s in steps]
        rows.append([
            variant.label, len(steps), percentile(latency, 50), percentile(latency, 95),
            max(latency, default=None), percentile(engine, 50),
            percentile([(s.job_s - s.engine_s) * 1000 for s in steps], 50),
            mean([s.model_calls for s in steps]), percentile(per_call, 50) if per_call else None,
            percentile([s.job_s * 1000 for s in steps], 50),
        ])  # fmt: skip
    return markdown_table(headers, rows)


def misses(results: Results, per_variant: int = 10) -> str:
    lines = []
    for variant, runs in results.items():
        mine = []
        for r in runs:
            if r.error:
                mine.append(f"- {variant.label}: {r.case.source.id}: ERROR {r.error}")
            for s in r.steps:
                if s.missed:
                    mine.append(
                        f"- {variant.label}: {r.case.source.id} after compaction {s.k} "
                        f"({s.status}): missing {', '.join(s.missed)}"
                    )
        lines += mine[:per_variant]
        if len(mine) > per_variant:
            lines.append(f"- {variant.label}: … and {len(mine) - per_variant} more")
    return "\n".join(lines) if lines else "- none"


# --- main ---------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = parser(__doc__)
    p.add_argument("--sessions", type=int, help="the N longest qualifying sessions (default: all)")
    p.add_argument(
        "--control",
        action="store_true",
        help="also run a model that ignores the prompt (FakeLLM minimal): a negative control",
    )
    p.add_argument("--quick", action="store_true", help=f"{QUICK_SESSIONS} sessions (smoke)")
    args = p.parse_args(argv)
    if args.quick and not args.sessions:
        args.sessions = QUICK_SESSIONS
    if args.sessions is not None and args.sessions < 1:
        p.error("--sessions: at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    rest = list(sys.argv[1:] if argv is None else argv)
    if "--gate" in rest:  # its own options: see bench/gate_bench.py
        from bench import gate_bench

        rest.remove("--gate")
        return gate_bench.main(rest)
    args = parse_args(argv)
    if not DATASET.exists():
        # No synthetic fallback here: the planted constraints need the real sessions.
        print(f"dataset {DATASET} not found (in a worktree, set CONTEXTD_DATASET)", file=sys.stderr)
        return 2
    sources = load_sources()
    plans = {p: select_cases(sources, args.sessions, p) for p in (2, 4)}
    if not any(selection.cases for selection in plans.values()):
        print("no session qualifies", file=sys.stderr)
        return 2
    started = time.perf_counter()
    load_start = load_average()
    configs = [*CONFIGS, CONTROL] if args.control else list(CONFIGS)
    with migrated_database(args) as db:
        version = asyncio.run(server_version(db.url))
        results = asyncio.run(asyncio.wait_for(run_all(db.url, plans, configs), 900))
    print(
        f"contextd compaction bench: {machine_info()}; PostgreSQL {version} ({db.server}); "
        f"dataset {DATASET.name}: {len(sources)} sessions"
    )
    for p, selection in plans.items():
        cases = selection.cases
        kinds = sorted({c.source.source for c in cases})
        noops = "; ".join(
            f"{sid} at compaction {k}: {code}" for sid, k, code in selection.planner_noops
        )
        print(
            f"- min_preserved_turns={p}: {selection.qualified} sessions qualify for "
            f"{COMPACTIONS} compactions ({selection.too_few_turns} have too few user turns, "
            f"{len(selection.planner_noops)} the planner would not compact "
            f"{COMPACTIONS} times{': ' + noops if noops else ''}), {len(cases)} used "
            f"({sum(c.source.lang == 'zh' for c in cases)} Chinese; {', '.join(kinds)}), "
            f"{sum(c.turns for c in cases)} turns, {sum(c.tokens for c in cases):,} tokens "
            "with the planted ones"
        )
    print(
        "- per session: 3 planted constraint turns after original turns 1-3, the session "
        "appended in 3 chunks of about a third of its tokens at turn boundaries, "
        "POST /compact {wait, force} after each; context_limit leaves room for the whole "
        "session, so GET /context never trims: what is missing is missing from compaction"
    )
    for title, body in (
        ("Planted constraints visible in GET /context after each compaction",
         retention_table(results)),
        ("Tokens around each compaction (GET /budget current_tokens) and summary input growth",
         growth_table(results)),
        ("Summary input growth:", growth_verdict(results)),
        ("Compaction latency excluding the model: the runner's job (claim to commit) less its "
         "model calls; summarise = the engine less its model calls; the rest = database and "
         "bookkeeping (the module docstring)", latency_table(results)),
        ("Constraints not visible:", misses(results)),
    ):  # fmt: skip
        print(f"\n{title}\n\n{body}")
    print()
    print(f"load average (1/5/15 min) at start {load_start}, at end {load_average()}")
    progress(f"done in {time.perf_counter() - started:.0f}s; database dropped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
