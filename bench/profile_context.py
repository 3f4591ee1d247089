"""cProfile of `GET /context` in one long-lived in-process app, on a grown session.

    python bench/profile_context.py [--database-url URL] [--size 100000] [--steps 200]
                                    [--budget 8000] [--reuse NAME] [--top 40]

Grows one session to `--size` messages through the API (appends of 200, each
followed by a context call, as `bench/growth_bench.py` does), then runs
`--steps` agent steps (append two messages, `GET /context` key_messages
`--budget` tokens) through the whole ASGI stack in this process, and profiles
only the context calls: a table of the top functions by cumulative time, the
wall-clock p50 of a call, and how many SQL statements one call sends.

`--reuse NAME` keeps the database `NAME` (created and grown on first use) so
that later runs skip the growth; without it a throwaway database is dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import os
import pstats
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    admin,
    load_average,
    percentile,
    plain_url,
    throwaway_database,
    with_database,
)
from bench.growth_bench import MODEL, STEP, SYSTEM, agent_stream

SID = "profile-context"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--database-url", help="PostgreSQL server (default CONTEXTD_DATABASE_URL)")
    p.add_argument("--size", type=int, default=100_000, help="messages in the session")
    p.add_argument("--steps", type=int, default=200, help="profiled steps")
    p.add_argument("--budget", type=int, default=8000, help="max_tokens of the context calls")
    p.add_argument("--reuse", help="keep and reuse this database (grown once)")
    p.add_argument("--top", type=int, default=40, help="functions listed")
    p.add_argument("--sort", default="cumulative", help="pstats sort key")
    p.add_argument("--dump", help="write the raw profile here (for snakeviz, pstats)")
    p.add_argument("--no-profile", action="store_true", help="only time the calls")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from app.db.engine import run_migrations

    server = args.database_url or os.environ.get("CONTEXTD_DATABASE_URL")
    if not server:
        print("--database-url or CONTEXTD_DATABASE_URL is needed", file=sys.stderr)
        return 2
    if args.reuse:
        url = with_database(plain_url(server), args.reuse)
        asyncio.run(_create_if_missing(plain_url(server), args.reuse))
        run_migrations(url)
        asyncio.run(run(args, url))
        return 0
    with throwaway_database(server, prefix="contextd_profile") as db:
        run_migrations(db.url)
        asyncio.run(run(args, db.url))
    return 0


async def _create_if_missing(server: str, name: str) -> None:
    conn = await asyncpg.connect(server)
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await admin(server, f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


@asynccontextmanager
async def _app(url: str) -> AsyncIterator[Any]:
    from app.core.settings import load_settings
    from app.main import create_app
    from app.observability.logging import configure_logging

    configure_logging("json", "WARNING")
    app = create_app(load_settings(database_url=url), database_url=url)
    async with app.router.lifespan_context(app):
        yield app


async def run(args: argparse.Namespace, url: str) -> None:
    from sqlalchemy import event

    query = {"max_tokens": args.budget, "strategy": "key_messages"}
    sid = f"{SID}-{args.size}"
    stream = agent_stream()
    async with (
        _app(url) as app,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://app", timeout=120
        ) as http,
    ):
        r = await http.get(f"/sessions/{sid}")
        have = r.json()["last_seq"] if r.status_code == 200 else 0
        if r.status_code != 200:
            body = {"auto_compact": False, "system_prompt": SYSTEM, "model": MODEL}
            _check(await http.put(f"/sessions/{sid}", json=body), 201)
        # The stream restarts with every run: skip what the session holds already.
        for _ in range(have):
            next(stream)
        began = time.perf_counter()
        while have < args.size:
            batch = [next(stream) for _ in range(min(200, args.size - have))]
            _check(await http.post(f"/sessions/{sid}/messages", json={"messages": batch}), 201)
            have += len(batch)
            _check(await http.get(f"/sessions/{sid}/context", params=query), 200)
        print(f"session {sid}: {have:,} messages (grown in {time.perf_counter() - began:.0f}s)")
        # Warm-up: the process's caches as a long-lived server has them.
        for _ in range(5):
            step = [next(stream) for _ in range(STEP)]
            _check(await http.post(f"/sessions/{sid}/messages", json={"messages": step}), 201)
            _check(await http.get(f"/sessions/{sid}/context", params=query), 200)

        statements: list[str] = []
        engine = app.state.database.factory.kw["bind"].sync_engine
        counting = False

        def count(_c: Any, _cur: Any, stmt: str, *_: Any) -> None:
            if counting:
                statements.append(stmt)

        event.listen(engine, "before_cursor_execute", count)
        prof = cProfile.Profile()
        times: list[float] = []
        for _ in range(args.steps):
            step = [next(stream) for _ in range(STEP)]
            _check(await http.post(f"/sessions/{sid}/messages", json={"messages": step}), 201)
            counting = True
            t0 = time.perf_counter()
            if not args.no_profile:
                prof.enable()
            r = await http.get(f"/sessions/{sid}/context", params=query)
            if not args.no_profile:
                prof.disable()
            times.append((time.perf_counter() - t0) * 1000)
            counting = False
            _check(r, 200)
        event.remove(engine, "before_cursor_execute", count)
    print(
        f"{args.steps} context calls at {have:,} messages, budget {args.budget}: "
        f"p50 {percentile(times, 50):.2f} ms, p99 {percentile(times, 99):.2f} ms "
        f"({'not ' if args.no_profile else ''}profiled); SQL statements per call "
        f"{len(statements) / args.steps:.2f}; load average {load_average()}"
    )
    kinds: dict[str, int] = {}
    for s in statements:
        head = " ".join(s.split())[:90]
        kinds[head] = kinds.get(head, 0) + 1
    for head, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {n / args.steps:5.2f}/call  {head}")
    if args.no_profile:
        return
    if args.dump:
        prof.dump_stats(args.dump)
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats(args.sort).print_stats(args.top)
    print(out.getvalue())


def _check(r: httpx.Response, status: int) -> None:
    if r.status_code != status:
        raise RuntimeError(f"{r.request.method} {r.request.url}: HTTP {r.status_code}: {r.text}")


if __name__ == "__main__":
    sys.exit(main())
