"""Append and budget-status latency at growing log sizes: the cost must not grow with the log.

    python bench/log_bench.py [--database-url URL] [--sizes 1000,10000,100000]
                              [--appends 300] [--clients 8] [--quick]

For each log size N it seeds one session with N real messages (the shared
dataset, cycled, tool-call ids made unique) through the real append path in
batches, copies it inside the database once per extra concurrent client
(seven by default), then measures over HTTP, against `contextd serve` in a
subprocess (TCP on 127.0.0.1) and against the app in-process
(`httpx.ASGITransport`):

- single-message append latency (user and assistant messages alternately),
- the latency of appending an agent's tool step in one POST: an assistant
  message with its tool call(s) and the tool results (dataset groups, ids made
  unique; this is the append that looks up tool calls),
- append throughput with C clients on one session and on C sessions,
- `GET /sessions/{id}/budget` latency.

It works in a fresh `contextd_bench_<random>` database on the given server
(default `CONTEXTD_DATABASE_URL`, else an embedded PostgreSQL in a temporary
folder) and drops it at the end. Progress goes to stderr, the table to stdout.

Latencies are measured request by request across sizes and transports (the
order rotating), and throughput in rounds, so a background load that comes
and goes hits every size alike. Planner statistics
are refreshed after seeding (`--stats analyze`, the steady state autovacuum
keeps); `--stats none` keeps the tables unanalysed for the whole run, the plans
a freshly loaded database gets before autovacuum wakes up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import signal
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # `python bench/log_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    DATASET,
    Throwaway,
    clone_session,
    contextd_server,
    database_options,
    database_server,
    dataset_warning,
    expect,
    load_average,
    load_messages,
    machine_info,
    markdown_table,
    percentile,
    progress,
    seed_session,
    server_version,
    set_statistics,
    throwaway_database,
    with_unique_ids,
)

MAX_SIZE = 1_000_000
MAX_APPENDS = 10_000
MAX_CLIENTS = 64
WARMUP = 4
TRANSPORTS = ("tcp", "inproc")
TRANSPORT_LABEL = {"tcp": "TCP, `contextd serve`", "inproc": "in-process ASGI"}
STATS_LABEL = {
    "analyze": "ANALYZE after seeding",
    "none": "none (never analysed, autovacuum off)",
}


@dataclass(slots=True)
class Figures:
    """Everything measured for one log size over one transport, accumulated over rounds."""

    size: int
    transport: str
    seed_rate: float | None = None
    append_ms: list[float] = field(default_factory=list)
    tool_ms: list[float] = field(default_factory=list)
    budget_ms: list[float] = field(default_factory=list)
    same_session: list[tuple[int, float]] = field(default_factory=list)  # (requests, seconds)
    many_sessions: list[tuple[int, float]] = field(default_factory=list)
    sent: int = 0  # measured appends so far: picks the next message, same sequence for all
    tool_sent: int = 0

    @property
    def same_session_rate(self) -> float:
        return _rate(self.same_session)

    @property
    def many_sessions_rate(self) -> float:
        return _rate(self.many_sessions)


def _rate(runs: Sequence[tuple[int, float]]) -> float:
    seconds = sum(s for _, s in runs)
    return sum(n for n, _ in runs) / seconds if seconds > 0 else math.nan


@dataclass(frozen=True, slots=True)
class Target:
    size: int
    sid: str
    sessions: list[str]  # sid and its copies, one per concurrent client


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    database_options(p)
    p.add_argument("--sizes", default="1000,10000,100000", help="log sizes, comma-separated")
    p.add_argument("--appends", type=int, default=300, help="measured requests per figure")
    p.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="throughput blocks per size, interleaved with the other sizes",
    )
    p.add_argument("--clients", type=int, default=8, help="concurrent clients for throughput")
    p.add_argument("--seed-batch", type=int, default=500, help="messages per seeding POST")
    p.add_argument("--transports", default="tcp,inproc", help="tcp and/or inproc")
    p.add_argument(
        "--stats",
        choices=("analyze", "none"),
        default="analyze",
        help="ANALYZE after seeding (default), or no statistics and no autovacuum",
    )
    p.add_argument("--max-seconds", type=float, default=3600, help="give up after this long")
    p.add_argument(
        "--quick",
        action="store_true",
        help="sizes 200,1000, 30 requests per figure in 2 rounds (a smoke test)",
    )
    args = p.parse_args(argv)
    if args.quick:
        args.sizes, args.appends, args.seed_batch, args.rounds = "200,1000", 30, 200, 2
    args.sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    args.transports = [t.strip() for t in args.transports.split(",") if t.strip()]
    if not args.sizes or any(not 0 <= n <= MAX_SIZE for n in args.sizes):
        p.error(f"--sizes: each between 0 and {MAX_SIZE:,}")
    if not 1 <= args.appends <= MAX_APPENDS:
        p.error(f"--appends: between 1 and {MAX_APPENDS:,}")
    if not 1 <= args.rounds <= args.appends:
        p.error("--rounds: between 1 and --appends")
    if not 1 <= args.clients <= MAX_CLIENTS:
        p.error(f"--clients: between 1 and {MAX_CLIENTS}")
    if not 1 <= args.seed_batch <= 1000:
        p.error("--seed-batch: between 1 and 1000 (the default per-append limit)")
    if not args.transports or set(args.transports) - set(TRANSPORTS):
        p.error(f"--transports: one or more of {','.join(TRANSPORTS)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    server = database_server(args)
    with _sigterm_unwinds():
        return _main(args, server)


def _main(args: argparse.Namespace, server: str | None) -> int:
    from app.db.migrate import run_migrations

    started = time.perf_counter()
    load_start = load_average()
    with throwaway_database(server) as db:
        progress(f"database {db.url.split('?')[0].rsplit('/', 1)[-1]} on {db.server}; migrating")
        run_migrations(db.url)
        if args.stats == "none":
            asyncio.run(set_statistics(db.url, "none"))
        rows, header = asyncio.run(run_bounded(args, db))
    print(header)
    print()
    print(table(rows, args.clients))
    print()
    print(flatness(rows))
    print(f"load average (1/5/15 min) at start {load_start}, at end {load_average()}")
    progress(f"done in {time.perf_counter() - started:.0f}s; database dropped")
    return 0


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """A plain `kill` (or a CI timeout) unwinds like Ctrl-C: the server process is stopped
    and the database dropped. Only in the main thread; the previous handler comes back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_on_signal(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


async def run_bounded(args: argparse.Namespace, db: Throwaway) -> tuple[list[Figures], str]:
    async with asyncio.timeout(args.max_seconds):
        return await run(args, db)


async def run(args: argparse.Namespace, db: Throwaway) -> tuple[list[Figures], str]:
    messages = load_messages()
    replies = reply_pairs(messages)
    tools = tool_groups(messages)
    source = (
        f"{DATASET.name} ({len(messages):,} messages, cycled)" if DATASET.exists() else "synthetic"
    )
    version = await server_version(db.url)
    header = (
        f"contextd log bench: {machine_info()}; PostgreSQL {version} ({db.server}); "
        f"seed data: {source}; {args.appends} measured requests per figure, sizes "
        f"interleaved, {_count(args.clients, 'client')} at once for throughput; "
        f"planner statistics: {STATS_LABEL[args.stats]}{dataset_warning()}"
    )
    from app.db.models import DEFAULT_TENANT

    figures: dict[tuple[int, str], Figures] = {}
    async with clients(args.transports, db.url) as by_transport:
        seeder_name, seeder = by_transport[0]
        targets: list[Target] = []
        for size in args.sizes:
            sid = f"bench-{size}-{uuid.uuid4().hex[:8]}"
            expect(await seeder.put(f"/sessions/{sid}", json={"auto_compact": False}), 201)
            progress(f"N={size:,}: seeding {sid} via {seeder_name}")
            seconds = await seed_session(seeder, sid, size, messages, args.seed_batch)
            seed_rate = size / seconds if size and seconds > 0 else math.nan
            copies = [f"{sid}-copy{i}" for i in range(1, args.clients)]
            await clone_session(db.url, DEFAULT_TENANT, sid, copies)
            progress(f"N={size:,}: seeded at {seed_rate:,.0f} msgs/s, copied x{len(copies)}")
            targets.append(Target(size, sid, [sid, *copies]))
            for name, _ in by_transport:
                figures[size, name] = Figures(
                    size, name, seed_rate if name == seeder_name else None
                )
        if args.stats == "analyze":
            await set_statistics(db.url, "analyze")
        work = Workload(replies, tools)
        for target in targets:
            for name, client in by_transport:
                await work.warm_up(client, target.sid, figures[target.size, name])
        per_round = math.ceil(args.appends / args.rounds)
        for r in range(args.rounds):
            progress(f"round {r + 1}/{args.rounds}: latencies")
            for i in range(per_round):
                # Request by request across sizes and transports, the order rotating:
                # whatever else the machine does hits every size alike.
                for target in rotated(targets, i):
                    for name, client in by_transport:
                        await work.latencies(client, target.sid, figures[target.size, name])
            progress(f"round {r + 1}/{args.rounds}: throughput")
            for target in rotated(targets, r):
                for name, client in by_transport:
                    out = figures[target.size, name]
                    await work.throughput(client, target, per_round, args.clients, out)
    return list(figures.values()), header


def rotated(items: Sequence[Target], k: int) -> list[Target]:
    k %= len(items)
    return [*items[k:], *items[:k]]


@contextlib.asynccontextmanager
async def clients(
    transports: Sequence[str], url: str
) -> AsyncIterator[list[tuple[str, httpx.AsyncClient]]]:
    """One HTTP client per transport, the first one also seeds."""
    from app.core.settings import load_settings
    from app.main import create_app
    from app.observability.logging import configure_logging

    timeout = httpx.Timeout(120.0)
    limits = httpx.Limits(max_connections=MAX_CLIENTS, max_keepalive_connections=MAX_CLIENTS)
    async with contextlib.AsyncExitStack() as stack:
        out: list[tuple[str, httpx.AsyncClient]] = []
        for t in transports:
            if t == "tcp":
                base = await stack.enter_async_context(contextd_server(url))
                c = httpx.AsyncClient(base_url=base, timeout=timeout, limits=limits)
            else:
                # The server subprocess logs each request (as users run it); in-process we
                # keep the table readable and log warnings only.
                configure_logging("json", "WARNING")
                app = create_app(load_settings(database_url=url), database_url=url)
                await stack.enter_async_context(app.router.lifespan_context(app))
                transport = httpx.ASGITransport(app=app)
                c = httpx.AsyncClient(
                    transport=transport, base_url="http://contextd.bench", timeout=timeout
                )
            out.append((t, await stack.enter_async_context(c)))
        yield out


def reply_pairs(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Plain user and assistant text messages of the dataset, alternating: the measured appends."""
    users = [m for m in messages if m["role"] == "user" and isinstance(m.get("content"), str)]
    bots = [
        m
        for m in messages
        if m["role"] == "assistant"
        and isinstance(m.get("content"), str)
        and not m.get("tool_calls")
    ]
    if not users or not bots:
        users = [{"role": "user", "content": "What changed since the last run?"}]
        bots = [{"role": "assistant", "content": "Two tests were fixed and one was added."}]
    n = max(len(users), len(bots))
    return [m for i in range(n) for m in (users[i % len(users)], bots[i % len(bots)])]


def tool_groups(messages: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each assistant message with tool calls followed by the tool messages answering them."""
    out: list[list[dict[str, Any]]] = []
    for i, m in enumerate(messages):
        ids = {c["id"] for c in m.get("tool_calls") or []}
        answers = []
        for t in messages[i + 1 : i + 1 + len(ids)]:
            if t.get("tool_call_id") not in ids:
                break
            answers.append(t)
        if ids and len(answers) == len(ids):
            out.append([m, *answers])
    if not out:
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "app.py"}'},
                }
            ],
        }
        out.append([call, {"role": "tool", "tool_call_id": "call_1", "content": "def main(): ..."}])
    return out


@dataclass(frozen=True, slots=True)
class Workload:
    """The requests measured; every size and transport gets the same sequence of messages."""

    replies: Sequence[dict[str, Any]]
    tools: Sequence[Sequence[dict[str, Any]]]

    async def append(self, client: httpx.AsyncClient, sid: str, out: Figures) -> float:
        """A user or assistant text message (alternately), alone in its POST."""
        message = self.replies[out.sent % len(self.replies)]
        out.sent += 1
        body = {"messages": [message]}
        return await timed(client.post(f"/sessions/{sid}/messages", json=body), 201)

    async def tool_group(self, client: httpx.AsyncClient, sid: str, out: Figures) -> float:
        """An agent's tool step in one POST: the assistant's tool call(s) and their results.

        Ids are made unique per session (both transports append to the same one)."""
        group = self.tools[out.tool_sent % len(self.tools)]
        suffix = f"{out.transport}{out.tool_sent}"
        out.tool_sent += 1
        body = {"messages": [with_unique_ids(m, suffix) for m in group]}
        return await timed(client.post(f"/sessions/{sid}/messages", json=body), 201)

    async def budget(self, client: httpx.AsyncClient, sid: str) -> float:
        return await timed(client.get(f"/sessions/{sid}/budget"), 200)

    async def warm_up(self, client: httpx.AsyncClient, sid: str, out: Figures) -> None:
        for _ in range(WARMUP):
            await self.append(client, sid, out)
            await self.budget(client, sid)
        out.sent = 0

    async def latencies(self, client: httpx.AsyncClient, sid: str, out: Figures) -> None:
        out.append_ms.append(await self.append(client, sid, out))
        out.tool_ms.append(await self.tool_group(client, sid, out))
        out.budget_ms.append(await self.budget(client, sid))

    async def throughput(
        self, client: httpx.AsyncClient, target: Target, n: int, n_clients: int, out: Figures
    ) -> None:
        async def one_session(i: int) -> None:
            await self.append(client, target.sid, out)

        async def own_session(i: int) -> None:
            await self.append(client, target.sessions[i % len(target.sessions)], out)

        out.same_session.append(await rate(one_session, n, n_clients))
        out.many_sessions.append(await rate(own_session, n, n_clients))


async def timed(request: Awaitable[httpx.Response], status: int) -> float:
    """Milliseconds until the response is in; it must have `status`."""
    start = time.perf_counter()
    response = await request
    elapsed = (time.perf_counter() - start) * 1000
    expect(response, status)
    return elapsed


async def rate(
    call: Callable[[int], Awaitable[None]], total: int, workers: int
) -> tuple[int, float]:
    """`workers` clients sharing about `total` requests (client i passes i): (requests, seconds)."""
    per = max(1, math.ceil(total / workers))

    async def worker(i: int) -> None:
        for _ in range(per):
            await call(i)

    start = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(workers)))
    return per * workers, time.perf_counter() - start


def table(rows: Sequence[Figures], n_clients: int) -> str:
    headers = [
        "log size",
        "via",
        "append p50 ms",
        "append p99 ms",
        "tool group p50 ms",
        "tool group p99 ms",
        f"appends/s (1 session, {_count(n_clients, 'client')})",
        f"appends/s ({_count(n_clients, 'session')})",
        "budget p50 ms",
        "budget p99 ms",
        "seed msgs/s",
    ]
    body = [
        [
            r.size,
            TRANSPORT_LABEL[r.transport],
            percentile(r.append_ms, 50),
            percentile(r.append_ms, 99),
            percentile(r.tool_ms, 50),
            percentile(r.tool_ms, 99),
            round(r.same_session_rate),
            round(r.many_sessions_rate),
            percentile(r.budget_ms, 50),
            percentile(r.budget_ms, 99),
            None if r.seed_rate is None or math.isnan(r.seed_rate) else round(r.seed_rate),
        ]
        for r in rows
    ]
    return markdown_table(headers, body)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def flatness(rows: Sequence[Figures]) -> str:
    """One line per transport: p50 at the largest size over p50 at the smallest."""
    lines = []
    for t in TRANSPORTS:
        mine = sorted((r for r in rows if r.transport == t), key=lambda r: r.size)
        if len(mine) < 2:
            continue
        lo, hi = mine[0], mine[-1]
        a = percentile(hi.append_ms, 50) / percentile(lo.append_ms, 50)
        c = percentile(hi.tool_ms, 50) / percentile(lo.tool_ms, 50)
        b = percentile(hi.budget_ms, 50) / percentile(lo.budget_ms, 50)
        lines.append(
            f"{TRANSPORT_LABEL[t]}: p50 at {hi.size:,} messages / at {lo.size:,}: "
            f"append x{a:.2f}, tool group x{c:.2f}, budget x{b:.2f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
