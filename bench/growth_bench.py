"""One session growing in one long-lived server: context and append latency per size.

    python bench/growth_bench.py [--database-url URL] [--sizes 1000,10000,100000]
                                 [--stats none,analyze] [--quick]

What an agent does to a server that runs for weeks: one `contextd serve`
process (started once per statistics mode) serves ONE session while it grows
from the first size to the last. Growth is appends of 200 messages,
each followed by a context call (key_messages, 8,000 tokens), so every
hot statement runs many times on the server's pooled connections while the
session is small. At each size the bench then times 200 rounds of an
agent's step: append the next two messages, then `GET /context`. A cost that
follows the log instead of the window shows up as p50s that grow with the size,
as a generic plan cached while the session was small did (app/db/engine.py); a
bench that measures each size on fresh state cannot see it.

Statistics modes, each on a fresh database and a fresh server process:
- `none`: the bench never ANALYZEs (autovacuum does what it does on a new
  deployment);
- `analyze`: ANALYZE after reaching each size, before measuring, as autovacuum
  eventually would (it also invalidates cached plans, so it hides less).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # `python bench/growth_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    Throwaway,
    contextd_server,
    cycled,
    database_server,
    expect,
    ints,
    load_average,
    machine_info,
    markdown_table,
    parser,
    percentile,
    progress,
    server_version,
    set_statistics,
    throwaway_database,
)
from bench.context_bench import agent_messages

MODEL = "gpt-4o"
SYSTEM = "You are a careful coding agent. Work in small steps and run the tests."
STEP = 2  # messages per measured append: an assistant step and its result, roughly
BUDGET = 8000  # max_tokens of every context call
GROW_BATCH = 200  # messages per growth append


@dataclass(slots=True)
class Size:
    stats: str
    size: int
    context_ms: list[float] = field(default_factory=list)
    append_ms: list[float] = field(default_factory=list)
    kept: int = 0
    grow_s: float = 0.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = parser(__doc__)
    p.add_argument("--sizes", type=ints, default="1000,10000,100000", help="sizes reached")
    p.add_argument("--stats", default="none,analyze", help="statistics modes: none, analyze")
    p.add_argument("--quick", action="store_true", help="sizes 200,2000, 30 steps (smoke test)")
    args = p.parse_args(argv)
    args.measure = 200  # timed steps (append + context) per size
    if args.quick:
        args.sizes, args.measure = [200, 2000], 30
    args.stats = [s.strip() for s in args.stats.split(",") if s.strip()]
    if not args.sizes or args.sizes != sorted(set(args.sizes)) or args.sizes[0] < 1:
        p.error("--sizes: positive and increasing")
    if not args.stats or set(args.stats) - {"none", "analyze"}:
        p.error("--stats: none and/or analyze")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    load_start = load_average()
    rows: list[Size] = []
    for stats in args.stats:
        with throwaway_database(database_server(args), prefix="contextd_growth") as db:
            progress(f"stats={stats}: database {db.url.rsplit('/', 1)[-1]} on {db.server}")
            version = asyncio.run(server_version(db.url))
            rows += asyncio.run(asyncio.wait_for(grow(args, db, stats), 3600))
    print(
        f"contextd growth bench: {machine_info()}; PostgreSQL {version} ({db.server}); one "
        f"session grown in one `contextd serve` process to "
        f"{', '.join(f'{n:,}' for n in args.sizes)} messages in appends of {GROW_BATCH}, "
        f"each followed by a context call; at each size {args.measure} steps of "
        f"(append {STEP} messages, GET /context key_messages max_tokens={BUDGET})"
    )
    print(f"load average (1/5/15 min) at start {load_start}, at end {load_average()}\n")
    print(table(rows))
    progress(f"done in {time.perf_counter() - started:.0f}s; databases dropped")
    return 0


async def grow(args: argparse.Namespace, db: Throwaway, stats: str) -> list[Size]:
    stream = cycled(agent_messages(), 10**9, salt="g")  # tool-call ids unique per cycle
    sid = f"growth-{uuid.uuid4().hex[:8]}"
    query: dict[str, Any] = {"max_tokens": BUDGET, "strategy": "key_messages"}
    out: list[Size] = []
    # The server migrates the fresh database itself, as `contextd serve` always does.
    async with (
        contextd_server(db.url) as base,
        httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(120.0)) as http,
    ):
        body = {"auto_compact": False, "system_prompt": SYSTEM, "model": MODEL}
        expect(await http.put(f"/sessions/{sid}", json=body), 201)
        have = 0
        for size in args.sizes:
            figures = Size(stats, size)
            began = time.perf_counter()
            while have < size:
                n = min(GROW_BATCH, size - have)
                batch = [next(stream) for _ in range(n)]
                expect(await http.post(f"/sessions/{sid}/messages", json={"messages": batch}), 201)
                have += n
                expect(await http.get(f"/sessions/{sid}/context", params=query), 200)
            figures.grow_s = time.perf_counter() - began
            if stats == "analyze":
                await set_statistics(db.url, "analyze")
            progress(f"stats={stats} N={size:,}: grown in {figures.grow_s:.0f}s; measuring")
            for _ in range(args.measure):
                step = [next(stream) for _ in range(STEP)]
                t0 = time.perf_counter()
                expect(await http.post(f"/sessions/{sid}/messages", json={"messages": step}), 201)
                t1 = time.perf_counter()
                r = await http.get(f"/sessions/{sid}/context", params=query)
                t2 = time.perf_counter()
                expect(r, 200)
                figures.append_ms.append((t1 - t0) * 1000)
                figures.context_ms.append((t2 - t1) * 1000)
                figures.kept = len(r.json()["kept_seqs"])
            have += STEP * args.measure
            out.append(figures)
            progress(
                f"stats={stats} N={size:,}: context p50 {percentile(figures.context_ms, 50):.1f} ms"
            )
    return out


def table(rows: Sequence[Size]) -> str:
    first = {r.stats: percentile(r.context_ms, 50) for r in reversed(rows)}
    headers = ("statistics", "messages", "context p50 ms", "context p99 ms", "p50 / first size",
               "append p50 ms", "append p99 ms", "kept", "grown in s")  # fmt: skip
    body = [
        [r.stats, r.size, percentile(r.context_ms, 50), percentile(r.context_ms, 99),
         f"×{percentile(r.context_ms, 50) / first[r.stats]:.2f}", percentile(r.append_ms, 50),
         percentile(r.append_ms, 99), r.kept, r.grow_s]
        for r in rows
    ]  # fmt: skip
    return markdown_table(headers, body)


if __name__ == "__main__":
    sys.exit(main())
