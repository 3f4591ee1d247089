"""Compaction job claims: fairness across tenants, and what one claim costs as the queue grows.

    python bench/claim_bench.py [--database-url URL] [--sizes 1000,10000,100000]
                                [--tenants 100] [--claims 200] [--burst 500] [--runners 2]

Two tables, both through `app.compaction.repository.claim_next` (what every
runner calls) on a fresh `contextd_bench_<random>` database (default
`CONTEXTD_DATABASE_URL`, else an embedded PostgreSQL), dropped at the end.

1. Fairness, in job-times. `--runners` runners share one queue; every job takes
   one unit of (simulated) time. Tenant `burst` queues `--burst` jobs at t=0;
   tenants `t1..t4` queue one job each at t=10.5, 20.5, ... . For each small
   tenant: how long its job waited for a runner, with the fair claim and with
   the old global FIFO (`ORDER BY created_at`, replayed here as the reference).
2. Claim cost. `--sizes` pending jobs spread over `--tenants` tenants (as many
   finished jobs as history); the time of one claim transaction (claim + commit,
   p50/p99 over `--claims` claims, each job finished right away) with no
   statistics (a fresh deployment: autovacuum off) and after ANALYZE.

Progress goes to stderr, the tables to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import sys
import time
from pathlib import Path

import asyncpg

if __package__ in (None, ""):  # `python bench/claim_bench.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    database_options,
    database_server,
    load_average,
    machine_info,
    markdown_table,
    percentile,
    plain_url,
    server_version,
    set_statistics,
    throwaway_database,
)

LEASE_S = 60.0

_FIFO = """
UPDATE compaction_jobs SET status = 'running', worker = $1, started_at = clock_timestamp(),
       attempts = attempts + 1, lease_expires_at = now() + interval '60 seconds'
WHERE (tenant_id, session_id, id) = (
    SELECT tenant_id, session_id, id FROM compaction_jobs WHERE status = 'pending'
    ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING tenant_id, id
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def queue(conn: asyncpg.Connection, tenant: str, n: int, tag: str) -> None:
    await conn.execute(
        "INSERT INTO sessions (tenant_id, id, tokenizer)"
        " SELECT $1, $2 || '-' || g, 'o200k_base' FROM generate_series(1, $3) g",
        tenant,
        tag,
        n,
    )
    await conn.execute(
        "INSERT INTO compaction_jobs (tenant_id, session_id, id, trigger, created_at)"
        " SELECT $1, $2 || '-' || g, 'job-' || $2 || '-' || g, 'auto',"
        "  clock_timestamp() FROM generate_series(1, $3) g",
        tenant,
        tag,
        n,
    )


async def reset(conn: asyncpg.Connection) -> None:
    await conn.execute("TRUNCATE sessions, compaction_jobs, compaction_workers CASCADE")


class Claimer:
    def __init__(self, url: str) -> None:
        from app.db import engine as database
        from app.db.database import Database

        self.engine = database.create_engine(url, pool_size=2)
        self.db = Database(database.session_factory(self.engine))

    async def fair(self, worker: str, cap: int | None = None) -> tuple[str, str] | None:
        from app.compaction import repository as repo

        async with self.db.transaction() as s:
            job = await repo.claim_next(s, worker, LEASE_S, tenant_cap=cap)
            return None if job is None else (job.tenant_id, job.id)

    async def close(self) -> None:
        await self.engine.dispose()


async def fairness(url: str, claimer: Claimer, burst: int, runners: int) -> list[list[object]]:
    conn = await asyncpg.connect(plain_url(url))
    rows: list[list[object]] = []
    try:
        waits: dict[str, dict[str, float]] = {}
        for mode in ("fair", "fifo"):
            await reset(conn)
            await queue(conn, "burst", burst, "burst")
            arrivals = [(10.5 * (i + 1), f"t{i + 1}") for i in range(4)]
            arrived: dict[str, float] = {}
            free = [(0.0, r) for r in range(runners)]  # (time the runner is free, runner)
            heapq.heapify(free)
            waits[mode] = {}
            while len(waits[mode]) < len(arrivals):
                now, runner = heapq.heappop(free)
                for at, tenant in arrivals:
                    if at <= now and tenant not in arrived:
                        await queue(conn, tenant, 1, tenant)
                        arrived[tenant] = at
                if mode == "fair":
                    got = await claimer.fair(f"r{runner}")
                else:
                    rec = await conn.fetchrow(_FIFO, f"r{runner}")
                    got = None if rec is None else (rec["tenant_id"], rec["id"])
                if got is None:
                    heapq.heappush(free, (now + 0.5, runner))
                    continue
                tenant, job_id = got
                await conn.execute(
                    "UPDATE compaction_jobs SET status = 'success' WHERE id = $1", job_id
                )
                if tenant != "burst":
                    waits[mode][tenant] = now - arrived[tenant]
                heapq.heappush(free, (now + 1.0, runner))
        for _at, tenant in arrivals:
            rows.append(
                [
                    tenant,
                    f"{_at:g}",
                    waits["fair"][tenant],
                    waits["fifo"][tenant],
                ]
            )
    finally:
        await conn.close()
    return rows


async def claim_cost(
    url: str, claimer: Claimer, sizes: list[int], tenants: int, claims: int
) -> list[list[object]]:
    conn = await asyncpg.connect(plain_url(url))
    rows: list[list[object]] = []
    try:
        for size in sizes:
            for stats in ("none", "analyze"):
                await reset(conn)
                per = max(size // tenants, 1)
                for t in range(tenants):
                    await queue(conn, f"tenant{t}", per, f"tenant{t}-p")
                    await queue(conn, f"tenant{t}", per, f"tenant{t}-h")
                # Half of it is history: finished jobs with a start time.
                await conn.execute(
                    "UPDATE compaction_jobs SET status = 'success', started_at = created_at,"
                    " finished_at = created_at WHERE session_id LIKE '%-h-%'"
                )
                await set_statistics(url, stats)
                log(f"claim cost: {size} pending over {tenants} tenants, statistics {stats}")
                times = []
                for i in range(claims):
                    start = time.perf_counter()
                    got = await claimer.fair(f"c{i}", cap=4)
                    times.append((time.perf_counter() - start) * 1000)
                    assert got is not None
                    await conn.execute(
                        "UPDATE compaction_jobs SET status = 'success' WHERE id = $1", got[1]
                    )
                rows.append(
                    [
                        size,
                        tenants,
                        stats,
                        percentile(times, 50),
                        percentile(times, 99),
                    ]
                )
    finally:
        await conn.close()
    return rows


async def run(args: argparse.Namespace, url: str) -> tuple[list[list[object]], list[list[object]]]:
    claimer = Claimer(url)
    try:
        log("fairness")
        fair = await fairness(url, claimer, args.burst, args.runners)
        cost = await claim_cost(url, claimer, args.sizes, args.tenants, args.claims)
    finally:
        await claimer.close()
    return fair, cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    database_options(parser)
    parser.add_argument(
        "--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[1000, 10000, 100000]
    )
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--claims", type=int, default=200)
    parser.add_argument("--burst", type=int, default=500)
    parser.add_argument("--runners", type=int, default=2)
    args = parser.parse_args()

    from app.db.migrate import run_migrations

    with throwaway_database(database_server(args)) as db:
        run_migrations(db.url)
        fair, cost = asyncio.run(run(args, db.url))
        version = asyncio.run(server_version(db.url))
    print(f"Machine: {machine_info()}; load {load_average()}; PostgreSQL {version}")
    print()
    print(
        f"Fairness: {args.runners} runners, 1 job-time per job; tenant `burst` queues "
        f"{args.burst} jobs at t=0, t1..t4 one job each later. Wait of each one job, "
        "in job-times:"
    )
    print()
    print(markdown_table(["tenant", "arrives at", "wait (fair claim)", "wait (FIFO)"], fair))
    print()
    print("Claim cost: one claim transaction (claim + commit), tenant cap 4:")
    print()
    print(markdown_table(["pending jobs", "tenants", "statistics", "p50 ms", "p99 ms"], cost))


if __name__ == "__main__":
    main()
