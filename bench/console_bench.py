"""The console's reads at size: 10,000 sessions and a 100,000-message session.

    python bench/console_bench.py [--database-url URL] [--sessions 10000] [--messages 100000]

Loads, with SQL in a fresh `contextd_console_<random>` database, `--sessions`
sessions of one tenant, one of them with `--messages` messages, 50 compaction
jobs and as many events as messages (what a payload per model call leaves);
then times every call the console's pages make (in-process app, httpx ASGI
transport: the server's own time, no network) and EXPLAINs (ANALYZE) each SQL
statement of the /ui/api endpoints, listing its access paths. `--no-analyze`
leaves the tables without statistics, as a new deployment has them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import httpx

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    Throwaway,
    database_options,
    database_server,
    markdown_table,
    percentile,
    throwaway_database,
)
from bench.plans import literal, scans

TENANT = "default"
BIG = "big-session"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    database_options(p)
    p.add_argument("--sessions", type=int, default=10_000)
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=20, help="timed calls per row")
    p.add_argument("--no-analyze", action="store_true", help="no statistics (a new deployment)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from app.db.migrate import run_migrations

    server = database_server(args)
    with throwaway_database(server, prefix="contextd_console") as db:
        run_migrations(db.url)
        timings, plans = asyncio.run(run(args, db))
    stats = "no statistics" if args.no_analyze else "after ANALYZE"
    print(
        f"{args.sessions:,} sessions, one of {args.messages:,} messages; "
        f"{args.repeat} calls each, in-process (ms; {stats})"
    )
    print(markdown_table(["console call", "p50 ms", "p95 ms", "response KB"], timings))
    print()
    print("SQL of the /ui/api endpoints: EXPLAIN ANALYZE")
    print(markdown_table(["statement", "plan + run ms", "access paths"], plans))
    return 0


async def load(url: str, sessions: int, messages: int, analyze: bool) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            """
            INSERT INTO sessions (tenant_id, id, tokenizer, last_seq, count_user,
                count_assistant, context_tokens, context_limit)
            SELECT $1, 's-' || lpad(g::text, 6, '0'), 'o200k_base', 40, 20, 20,
                   (g * 7919) % 120000, 128000
            FROM generate_series(1, $2) AS g
            """,
            TENANT,
            sessions - 1,
        )
        await conn.execute(
            "INSERT INTO sessions (tenant_id, id, tokenizer, context_limit) "
            "VALUES ($1, $2, $3, $4)",
            TENANT,
            BIG,
            "o200k_base",
            128000,
        )
        # One message per second up to now, 50 tokens each; user and assistant by turns.
        await conn.execute(
            """
            INSERT INTO messages (tenant_id, session_id, seq, message_id, role, body,
                token_count, context_tokens_through, created_at)
            SELECT $1, $2, g, 'm' || g, CASE WHEN g % 2 = 1 THEN 'user' ELSE 'assistant' END,
                   jsonb_build_object('role', CASE WHEN g % 2 = 1 THEN 'user' ELSE 'assistant' END,
                                      'content', 'message ' || g || repeat(' word', 40)),
                   50, 50 * g, now() - make_interval(secs => $3 - g)
            FROM generate_series(1, $3) AS g
            """,
            TENANT,
            BIG,
            messages,
        )
        # 50 compactions, evenly spread; the last leaves 2,000 seqs after the watermark.
        watermark = max(messages - 2000, 0)
        await conn.execute(
            """
            INSERT INTO compaction_jobs (tenant_id, session_id, id, status, trigger, attempts,
                result, watermark_after, created_at, started_at, finished_at)
            SELECT $1, $2, 'job-' || k, 'success', 'auto', 1,
                   jsonb_build_object('range_tokens', 50 * ($3::bigint / 50),
                                      'summary_tokens', 800),
                   ($3::bigint * k) / 50, ts, ts, ts + interval '1 second'
            FROM generate_series(1, 50) AS k,
                 LATERAL (SELECT now() - make_interval(
                     secs => $4::bigint - ($4::bigint * k) / 50 - 1) AS ts) t
            """,
            TENANT,
            BIG,
            watermark,
            messages,
        )
        await conn.execute(
            """
            UPDATE sessions SET last_seq = $3::bigint, count_user = $3::bigint / 2,
                count_assistant = $3::bigint - $3::bigint / 2,
                context_tokens = 50 * $3::bigint, last_compaction_seq = $4::bigint,
                watermark_context_tokens = 50 * $4::bigint, summary_text = 'summary',
                summary_tokens = 800, compaction_count = 50
            WHERE tenant_id = $1 AND id = $2
            """,
            TENANT,
            BIG,
            messages,
            watermark,
        )
        await conn.execute(
            """
            INSERT INTO events (tenant_id, session_id, type, data, created_at)
            SELECT $1, $2, CASE WHEN g % 1000 = 0 THEN 'compaction.success'
                                ELSE 'context.compressed' END,
                   jsonb_build_object('input_tokens', 100000, 'dropped_count', g), now()
            FROM generate_series(1, $3) AS g
            """,
            TENANT,
            BIG,
            messages,
        )
        if analyze:
            await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def run(
    args: argparse.Namespace, db: Throwaway
) -> tuple[list[list[object]], list[list[object]]]:
    from sqlalchemy import event

    from app.core.settings import load_settings
    from app.main import create_app
    from app.observability.logging import configure_logging

    await load(db.url, args.sessions, args.messages, not args.no_analyze)
    configure_logging("json", "WARNING")
    app = create_app(
        load_settings(database_url=db.url, run_compactions_in_process=False), database_url=db.url
    )
    captured: dict[str, tuple[Any, ...]] = {}
    capturing = False
    async with app.router.lifespan_context(app):

        @event.listens_for(app.state.engine.sync_engine, "before_cursor_execute")
        def _seen(conn: Any, cursor: Any, sql: str, params: Any, ctx: Any, many: bool) -> None:
            if capturing and sql.lstrip().upper().startswith(("SELECT", "WITH")):
                captured[sql] = tuple((params[0] if many else params) or ())

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as c:
            # A cursor deep into each order: page 100 of 50.
            deep: dict[str, str] = {}
            for sort in ("id", "tokens", "activity"):
                cursor = None
                for _ in range(min(100, args.sessions // 50 - 1)):
                    params = {"sort": sort, "limit": 50} | ({"cursor": cursor} if cursor else {})
                    cursor = (await c.get("/ui/api/sessions", params=params)).json()["next_cursor"]
                deep[sort] = cursor or ""
            calls = [
                ("sessions page: first 50 by id", "/ui/api/sessions?limit=50&sort=id"),
                (
                    "sessions page: page 100 by id",
                    f"/ui/api/sessions?limit=50&sort=id&cursor={deep['id']}",
                ),
                ("sessions page: first 50 by activity", "/ui/api/sessions?limit=50"),
                (
                    "sessions page: page 100 by activity",
                    f"/ui/api/sessions?limit=50&cursor={deep['activity']}",
                ),
                ("sessions page: first 50 by tokens", "/ui/api/sessions?limit=50&sort=tokens"),
                (
                    "sessions page: page 100 by tokens",
                    f"/ui/api/sessions?limit=50&sort=tokens&cursor={deep['tokens']}",
                ),
                ("sessions page: id prefix s-0099", "/ui/api/sessions?limit=50&prefix=s-0099"),
                ("session page: GET /sessions/{id}", f"/sessions/{BIG}"),
                ("session page: GET .../compaction", f"/sessions/{BIG}/compaction"),
                ("session page: the payload", f"/ui/api/sessions/{BIG}/context"),
                ("session page: series, 500 points", f"/ui/api/sessions/{BIG}/series?points=500"),
                ("session page: one message", f"/sessions/{BIG}/messages/{args.messages // 2}"),
                ("queue page: /ui/api/queue", "/ui/api/queue"),
            ]
            timings: list[list[object]] = []
            for label, path in calls:
                # The payload view assembles as GET /context does: not the console's own SQL.
                capturing = path.startswith("/ui/api/") and not path.endswith("/context")
                r = await c.get(path)
                capturing = False
                assert r.status_code == 200, (path, r.text[:300])
                size = len(r.content)
                times = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    r = await c.get(path)
                    times.append((time.perf_counter() - t0) * 1000)
                    assert r.status_code == 200
                timings.append(
                    [
                        label,
                        f"{percentile(times, 50):.1f}",
                        f"{percentile(times, 95):.1f}",
                        f"{size / 1024:.0f}",
                    ]
                )
    plans = await explain_all(db.url, captured)
    return timings, plans


async def explain_all(url: str, captured: dict[str, tuple[Any, ...]]) -> list[list[object]]:
    conn = await asyncpg.connect(url)
    rows: list[list[object]] = []
    try:
        for sql, params in captured.items():
            # Each $n becomes the literal of this call (a custom plan for these values).
            text = re.sub(r"\$(\d+)", _substitute(params), sql)
            plan = None
            for _ in range(3):  # the last of three runs: warm caches
                plan = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {text}"))[0]
            assert plan is not None
            rows.append(
                [
                    short(sql),
                    f"{plan['Planning Time']:.2f} + {plan['Execution Time']:.2f}",
                    scans(plan["Plan"]),
                ]
            )
    finally:
        await conn.close()
    return rows


def _substitute(params: tuple[Any, ...]) -> Callable[[re.Match[str]], str]:
    return lambda m: literal(params[int(m.group(1)) - 1])


def short(sql: str) -> str:
    text = re.sub(r"\s+", " ", sql).strip()
    text = re.sub(r"^SELECT .*? FROM", "SELECT … FROM", text)
    return text[:110] + ("…" if len(text) > 110 else "")


if __name__ == "__main__":
    sys.exit(main())
