"""Context latency at growing log sizes, against LangChain's `trim_messages` in the same run.

    python bench/context_bench.py [--database-url URL] [--sizes 1000,10000,100000]
                                  [--repeat 100] [--rounds 3] [--quick]

Assembling must cost what is kept, not what is logged. For each log size N
this seeds one session with N agent-like messages (the agent sessions of the
shared dataset, cycled, tool-call ids made unique) through the real append
path (`POST /sessions/{id}/messages` of a `contextd serve` subprocess), then
measures, at a budget of 32,000 tokens in interleaved rounds so that a
background load hits every size alike:

- ours, in-process: `app.context.service.payload()`, what the context
  endpoints run, in an app built by `create_app()` under its lifespan: the
  session and window reads (outside a transaction: they write nothing),
  assembly, and the `context.compressed` event handed to the app's event
  writer, which inserts events in batches in the background (its inserts
  run on the same process and database while the calls are timed). The very
  first call of the process for each session ("first call") and calls made
  after clearing the engine's per-process caches ("cold") are reported apart
  from repeated calls ("warm", what an agent calling on every model turn sees);
- ours, HTTP: `GET /sessions/{id}/context?max_tokens=32000` over TCP against the
  `contextd serve` subprocess on the same database (its own caches warm);
- LangChain: `trim_messages(history, strategy="last", include_system=True,
  start_on="human", max_tokens=32000 - priming, token_counter=exact)` over the
  same N messages held in memory as LangChain messages (converted once,
  outside the timer). `exact` is what a LangChain user writes for an exact
  count: o200k_base (tiktoken) over each message as OpenAI sends it
  (`convert_to_openai_messages`, then the same per-message framing as ours),
  counted on every call: LangChain has no cached counts. Its repeats are
  bounded by 90 s per size (at least 3); the table says how many ran.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import itertools
import json
import math
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if __package__ in (None, ""):  # `python bench/context_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    DATASET,
    Throwaway,
    app_client,
    contextd_server,
    cycled,
    dataset_sessions,
    dataset_warning,
    expect,
    ints,
    load_average,
    load_messages,
    machine_info,
    markdown_table,
    migrated_database,
    parser,
    percentile,
    progress,
    server_version,
    set_statistics,
    with_unique_ids,
)

if TYPE_CHECKING:
    from fastapi import FastAPI
    from langchain_core.messages import BaseMessage

    from app.context.params import ContextParams

MODEL = "gpt-4o"  # o200k_base: the exact counter both sides use
SYSTEM = "You are a careful coding agent. Work in small steps and run the tests."
WARMUP = 3
BUDGET = 32000  # max_tokens of every context call


@dataclass(slots=True)
class Figures:
    size: int
    sid: str
    seed_rate: float = math.nan
    first_ms: float = math.nan
    cold_ms: list[float] = field(default_factory=list)
    warm_ms: list[float] = field(default_factory=list)
    http_ms: list[float] = field(default_factory=list)
    append_ms: list[float] = field(default_factory=list)  # in-process, right after an append
    lc_ms: list[float] = field(default_factory=list)
    ours_sent: int = 0  # history messages in our payload
    ours_tokens: int = 0
    lc_sent: int = 0  # history messages trim_messages kept
    lc_tokens: int = 0
    lc_history: list[BaseMessage] = field(default_factory=list)
    lc_runs: int | None = None  # decided after the untimed warm-up


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = parser(__doc__)
    p.add_argument("--sizes", type=ints, default="1000,10000,100000", help="log sizes")
    p.add_argument("--repeat", type=int, default=100, help="warm calls per size, each way")
    p.add_argument("--rounds", type=int, default=3, help="interleave sizes over this many rounds")
    p.add_argument("--quick", action="store_true", help="sizes 200,1000, fewer calls (smoke test)")
    args = p.parse_args(argv)
    # Cold calls, trim_messages' seconds per size, messages per seeding POST, appends at the end.
    args.cold_repeat, args.lc_seconds, args.seed_batch, args.append_steps = 10, 90, 500, 30
    if args.quick:
        args.sizes, args.repeat, args.cold_repeat, args.rounds = [200, 1000], 20, 3, 2
        args.lc_seconds, args.seed_batch, args.append_steps = 5.0, 200, 5
    if not args.sizes or not 1 <= args.rounds <= args.repeat:
        p.error("--sizes: one or more; --rounds: 1 to --repeat")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    load_start = load_average()
    with migrated_database(args) as db:
        rows, header = asyncio.run(asyncio.wait_for(run(args, db), 3600))
    print(header)
    print(f"load average (1/5/15 min) at start {load_start}, at end {load_average()}")
    print()
    print(table(rows))
    print()
    print(notes(rows, args))
    progress(f"done in {time.perf_counter() - started:.0f}s; database dropped")
    return 0


# One POST of the seed stays well under the default 8 MiB body limit.
SEED_BATCH_BYTES = 4 * 1024 * 1024


async def seed_session(
    client: httpx.AsyncClient, sid: str, count: int, messages: Sequence[dict[str, Any]], size: int
) -> float:
    """Append `count` messages cycling through `messages` through the real API, in POSTs of
    at most `size` messages and about SEED_BATCH_BYTES of JSON; returns seconds taken."""
    start = time.perf_counter()
    batch: list[dict[str, Any]] = []
    nbytes = 0
    for m in itertools.chain(cycled(messages, count, salt=f"{sid}-"), [None]):
        n = 0 if m is None else len(json.dumps(m, ensure_ascii=False).encode())
        if batch and (m is None or len(batch) >= size or nbytes + n > SEED_BATCH_BYTES):
            r = await client.post(f"/sessions/{sid}/messages", json={"messages": batch})
            expect(r, 201)
            batch, nbytes = [], 0
        if m is not None:
            batch.append(m)
            nbytes += n
    return time.perf_counter() - start


def agent_messages() -> list[dict[str, Any]]:
    """Every message of the dataset's agent sessions (no system messages), tool-call ids
    unique across sessions; the whole dataset (or a synthetic dialogue) if it has none."""
    if not DATASET.exists():
        return load_messages()
    out: list[dict[str, Any]] = []
    for k, session in enumerate(dataset_sessions()):
        if session.get("meta", {}).get("kind") == "agent":
            msgs = [m for m in session["messages"] if m.get("role") != "system"]
            out.extend(cycled(msgs, len(msgs), f"a{k}_"))
    return out or load_messages()


async def run(args: argparse.Namespace, db: Throwaway) -> tuple[list[Figures], str]:
    from app.context.params import ContextParams
    from app.core.tokens import get_counter
    from app.db.models import DEFAULT_TENANT

    messages = agent_messages()
    counter = get_counter(MODEL)
    nbytes = sum(len(json.dumps(m, ensure_ascii=False).encode()) for m in messages)
    version = await server_version(db.url)
    header = (
        f"contextd context bench: {machine_info()}; PostgreSQL {version} ({db.server}); "
        f"history: agent sessions of {DATASET.name} ({len(messages):,} messages, "
        f"{nbytes / len(messages) / 1024:.1f} KiB each on average, cycled); model {MODEL} "
        f"(exact o200k_base counts); budget {BUDGET:,} tokens; strategy "
        f"session default (key_messages); {args.repeat} warm calls per "
        f"size in-process and over HTTP, {args.cold_repeat} cold, in {args.rounds} interleaved "
        f"rounds{dataset_warning()}"
    )
    params = ContextParams(max_tokens=BUDGET)
    query = {"max_tokens": BUDGET}

    figures: list[Figures] = []
    async with contextd_server(db.url) as base, app_client(db.url) as (_, app):
        timeout = httpx.Timeout(300.0)
        async with httpx.AsyncClient(base_url=base, timeout=timeout) as http:
            body = {"auto_compact": False, "system_prompt": SYSTEM, "model": MODEL}
            for size in args.sizes:
                sid = f"ctx-{size}-{uuid.uuid4().hex[:8]}"
                expect(await http.put(f"/sessions/{sid}", json=body), 201)
                progress(f"N={size:,}: seeding {sid} over HTTP")
                seconds = await seed_session(http, sid, size, messages, args.seed_batch)
                figures.append(Figures(size, sid, size / seconds if seconds > 0 else math.nan))
                progress(f"N={size:,}: seeded at {figures[-1].seed_rate:,.0f} msgs/s")
            # One-time costs of the process (statement compilation, connections, imports)
            # go to a small session of their own, not to the first size measured.
            spare = f"ctx-warmup-{uuid.uuid4().hex[:8]}"
            expect(await http.put(f"/sessions/{spare}", json=body), 201)
            await seed_session(http, spare, min(200, len(messages)), messages, args.seed_batch)
            await set_statistics(db.url, "analyze")  # as autovacuum eventually does

            async def inproc(sid: str) -> tuple[float, dict[str, Any]]:
                return await build_in_process(app, DEFAULT_TENANT, sid, params)

            await inproc(spare)
            # First calls: the process has never assembled these sessions, and what it
            # computed for the others (same dataset texts) is forgotten.
            for f in figures:
                clear_engine_caches(app)
                f.first_ms, payload = await inproc(f.sid)
                f.ours_sent = sum(1 for m in payload["messages"] if m["role"] != "system")
                f.ours_tokens = payload["usage"]["input_tokens"]
                resp = await http.get(f"/sessions/{f.sid}/context", params=query)
                expect(resp, 200)
                if resp.json()["kept_seqs"] != payload["kept_seqs"]:
                    raise RuntimeError(f"N={f.size}: HTTP and in-process payloads differ")
                progress(f"N={f.size:,}: first in-process call {f.first_ms:.1f} ms")

            for f in figures:
                progress(f"N={f.size:,}: converting the history to LangChain messages")
                f.lc_history = langchain_history(cycled(messages, f.size, f"{f.sid}-"))
            # The LangChain histories (millions of objects) are the bench's, not the
            # service's: keep the collector from walking them during the calls timed.
            gc.collect()
            gc.freeze()

            lc = LangChainTrim(counter, BUDGET)
            warm_per_round = math.ceil(args.repeat / args.rounds)
            cold_per_round = math.ceil(args.cold_repeat / args.rounds)
            for r in range(args.rounds):
                k = r % len(figures)
                for f in figures[k:] + figures[:k]:
                    progress(f"round {r + 1}/{args.rounds}: N={f.size:,}")
                    for _ in range(min(cold_per_round, args.cold_repeat - len(f.cold_ms))):
                        clear_engine_caches(app)
                        f.cold_ms.append((await inproc(f.sid))[0])
                    for _ in range(WARMUP):
                        await inproc(f.sid)
                        expect(await http.get(f"/sessions/{f.sid}/context", params=query), 200)
                    for _ in range(min(warm_per_round, args.repeat - len(f.warm_ms))):
                        f.warm_ms.append((await inproc(f.sid))[0])
                    for _ in range(min(warm_per_round, args.repeat - len(f.http_ms))):
                        start = time.perf_counter()
                        expect(await http.get(f"/sessions/{f.sid}/context", params=query), 200)
                        f.http_ms.append((time.perf_counter() - start) * 1000)
                    lc_round(lc, f, args, r)

            # An agent appends between two calls: the window moves and the new rows'
            # bodies are read for the first time. Measured last, so that every other
            # figure is for exactly N messages. The appends continue the seeded cycle.
            for f in figures:
                progress(f"N={f.size:,}: {args.append_steps} appends, each followed by a build")
                for i in range(f.size, f.size + args.append_steps):
                    m = with_unique_ids(
                        messages[i % len(messages)], f"{f.sid}-{i // len(messages)}"
                    )
                    body = {"messages": [m]}
                    expect(await http.post(f"/sessions/{f.sid}/messages", json=body), 201)
                    f.append_ms.append((await inproc(f.sid))[0])
    for f in figures:
        f.lc_history = []
    return figures, header


async def build_in_process(
    app: FastAPI, tenant: str, sid: str, params: ContextParams
) -> tuple[float, dict[str, Any]]:
    """What the context endpoints run, without HTTP: (milliseconds, payload)."""
    from app.context import service

    state = app.state
    start = time.perf_counter()
    payload = await service.payload(
        state.database, state.events, tenant, sid, params, state.settings, state.services.caches
    )
    return (time.perf_counter() - start) * 1000, payload


def clear_engine_caches(app: FastAPI) -> None:
    """Forget what earlier calls of this process computed (window rows, previews, cuts,
    signal scans): the next build() pays what a first call pays."""
    from app.context.caches import Caches

    app.state.services = dataclasses.replace(app.state.services, caches=Caches())


# --- LangChain -------------------------------------------------------------------------------


def langchain_history(messages: Any) -> list[BaseMessage]:
    from langchain_core.messages import SystemMessage, convert_to_messages

    return [SystemMessage(SYSTEM), *convert_to_messages(list(messages))]


class LangChainTrim:
    """`trim_messages` as a LangChain user runs it with an exact o200k_base counter."""

    def __init__(self, counter: Any, budget: int) -> None:
        from langchain_core.messages import convert_to_openai_messages

        self.budget = budget
        self.priming = int(counter.count_messages([]))
        count_message = counter.count_message

        def exact(message: BaseMessage) -> int:
            return int(count_message(convert_to_openai_messages(message)))

        # What trim_messages itself makes of a per-message counter: the sum over each
        # list it checks (spelled out, as its BaseMessage-annotation test is fragile).
        def exact_list(messages: list[BaseMessage]) -> int:
            return sum(exact(m) for m in messages)

        self.counter: Callable[[BaseMessage], int] = exact
        self.list_counter: Callable[[list[BaseMessage]], int] = exact_list

    def __call__(self, history: list[BaseMessage]) -> list[BaseMessage]:
        from langchain_core.messages import trim_messages

        out: list[BaseMessage] = trim_messages(
            history,
            max_tokens=self.budget - self.priming,
            token_counter=self.list_counter,
            strategy="last",
            include_system=True,
            start_on="human",
        )
        return out


def lc_round(lc: LangChainTrim, f: Figures, args: argparse.Namespace, round_no: int) -> None:
    if f.lc_runs is None:
        start = time.perf_counter()
        kept = lc(f.lc_history)  # untimed warm-up: sizes the number of runs
        once = time.perf_counter() - start
        f.lc_sent = len(kept) - 1
        f.lc_tokens = sum(lc.counter(m) for m in kept) + lc.priming
        f.lc_runs = max(3, min(args.repeat, int(args.lc_seconds / once)))
        progress(f"N={f.size:,}: trim_messages {once * 1000:,.0f} ms once; {f.lc_runs} runs")
    n = math.ceil((f.lc_runs - len(f.lc_ms)) / (args.rounds - round_no))
    for _ in range(n):
        start = time.perf_counter()
        lc(f.lc_history)
        f.lc_ms.append((time.perf_counter() - start) * 1000)


# --- output ----------------------------------------------------------------------------------


def _pair(values: Sequence[float]) -> str:
    return f"{percentile(values, 50):.2f} / {percentile(values, 99):.2f}"


def table(rows: Sequence[Figures]) -> str:
    headers = (
        "log size", "ours in-process p50 / p99 ms (warm)", "first call ms", "cold p50 ms",
        "after an append p50 ms", "ours HTTP p50 / p99 ms", "trim_messages p50 ms (runs)",
        "ratio trim / ours in-process", "ratio trim / ours HTTP", "sent msgs / tokens: ours",
        "sent msgs / tokens: trim",
    )  # fmt: skip
    body = []
    for r in rows:
        lc = percentile(r.lc_ms, 50)
        body.append([
            r.size, _pair(r.warm_ms), r.first_ms, percentile(r.cold_ms, 50),
            percentile(r.append_ms, 50), _pair(r.http_ms), f"{lc:,.1f} ({len(r.lc_ms)})",
            f"{lc / percentile(r.warm_ms, 50):,.0f}x", f"{lc / percentile(r.http_ms, 50):,.0f}x",
            f"{r.ours_sent} / {r.ours_tokens:,}", f"{r.lc_sent} / {r.lc_tokens:,}",
        ])  # fmt: skip
    return markdown_table(headers, body)


def notes(rows: Sequence[Figures], args: argparse.Namespace) -> str:
    lines = []
    if len(rows) >= 2:
        lo, hi = rows[0], rows[-1]
        lines.append(
            f"p50 at {hi.size:,} messages / at {lo.size:,}: in-process warm "
            f"x{percentile(hi.warm_ms, 50) / percentile(lo.warm_ms, 50):.2f}, HTTP "
            f"x{percentile(hi.http_ms, 50) / percentile(lo.http_ms, 50):.2f}, trim_messages "
            f"x{percentile(hi.lc_ms, 50) / percentile(lo.lc_ms, 50):.1f}"
        )
    seed = ", ".join(f"{r.size:,}: {r.seed_rate:,.0f} msgs/s" for r in rows)
    lines.append(f"seeding over HTTP ({args.seed_batch} per POST): {seed}")
    lines.append(
        "first call: the process's first build() of the session (after one build() of another "
        "session, caches cleared); cold: build() after clearing "
        "the engine's per-process caches (database pages warm); warm: repeated calls on the "
        "same log; after an append: a build() right after each of the last appends (the log "
        "grows by a message per call, as in an agent's loop). "
        "Sent tokens are each side's own exact count of its payload, priming included."
    )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
