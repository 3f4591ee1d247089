"""EXPLAIN every statement of the two hot paths: generic plans against custom plans.

    python bench/plans.py [--database-url URL] [--small 1000] [--large 100000]

Records, with a SQLAlchemy cursor hook, every statement two agent steps send
(append a tool step, then `GET /context` key_messages 8,000 tokens), in an app
built by `create_app()`: the first payload trims (a new layout is stored), the
second replays it and reads the layout's units that lie beyond the window (it
prints which of these happened). Then, for each statement:

- the generic plan PostgreSQL caches after five executions, made while the
  session holds `--small` messages, and run (EXPLAIN ANALYZE EXECUTE of that
  cached plan) once the session holds `--large`: what a long-lived server runs
  with `plan_cache_mode = auto`;
- a custom plan for the same parameters at `--large` (`force_custom_plan`):
  its planning and execution times (the only figure for a statement text seen
  at `--large` only, such as a read of a different number of seq runs).

Statements run on the asyncpg connection itself (the append's write, the
payload's message reads) are recorded too. Writes (a data-modifying CTE
included) are EXPLAINed without running them; every EXPLAIN ANALYZE runs in a
transaction that is rolled back all the same. No statistics are gathered
(the tables have autovacuum off): plans come from the tables' physical size
and default selectivities, what a new deployment sees.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import re
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
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
    plain_url,
    throwaway_database,
)
from bench.growth_bench import agent_stream

QUERY: dict[str, str | int] = {"max_tokens": 8000, "strategy": "key_messages"}
Captured = dict[str, tuple[Any, ...]]  # SQL text -> the parameters of its last execution


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    database_options(p)
    p.add_argument("--small", type=int, default=1000, help="messages when plans are cached")
    p.add_argument("--large", type=int, default=100_000, help="messages when plans are run")
    p.add_argument("--show", default="", help="print the full plans of statements containing this")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from app.db.migrate import run_migrations

    server = database_server(args)
    with throwaway_database(server, prefix="contextd_plans") as db:
        run_migrations(db.url)
        rows = asyncio.run(run(args, db))
    print(
        f"generic plan cached at {args.small:,} messages, run at {args.large:,}; "
        "custom plan at the same size (ms; no statistics)"
    )
    print(
        markdown_table(
            ["statement", "generic cached small: plan + run ms", "custom: plan + run ms", "plans"],
            rows,
        )
    )
    return 0


@asynccontextmanager
async def app_client(url: str) -> AsyncIterator[tuple[httpx.AsyncClient, Captured]]:
    from sqlalchemy import event

    from app.core.settings import load_settings
    from app.main import create_app
    from app.observability.logging import configure_logging

    configure_logging("json", "WARNING")
    app = create_app(load_settings(database_url=url), database_url=url)
    captured: Captured = {}
    async with app.router.lifespan_context(app):

        def _seen(conn: Any, cursor: Any, sql: str, params: Any, ctx: Any, many: bool) -> None:
            if not sql.lstrip().upper().startswith(("BEGIN", "COMMIT", "SELECT 1")):
                captured[sql] = tuple((params[0] if many else params) or ())

        # Both pools: the payload reads have their own (app/db/engine.py).
        for engine in {app.state.engine, app.state.database.payload_engine}:
            event.listen(engine.sync_engine, "before_cursor_execute", _seen)

        transport = httpx.ASGITransport(app=app)
        with driver_statements(captured):
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
                yield client, captured


@contextmanager
def driver_statements(
    captured: Captured, only: Callable[[asyncpg.Connection], bool] = lambda conn: True
) -> Iterator[None]:
    """Also record the statements the hot paths run on the asyncpg connection itself
    (the append's write, the payload's message reads), which SQLAlchemy's cursor hook
    never sees; with `only`, those of the connections it accepts. Only statements with
    parameters: BEGIN, COMMIT and this script's own PREPARE and EXPLAIN have none."""
    cls = asyncpg.connection.Connection
    originals = {name: getattr(cls, name) for name in ("execute", "fetch", "fetchrow", "fetchval")}

    def recording(method: Any) -> Any:
        async def run(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
            if args and only(self):
                captured[query] = tuple(args)
            return await method(self, query, *args, **kwargs)

        return run

    for name, method in originals.items():
        setattr(cls, name, recording(method))
    try:
        yield
    finally:
        for name, method in originals.items():
            setattr(cls, name, method)


async def grow(client: httpx.AsyncClient, sid: str, stream: Any, to: int, have: int) -> int:
    while have < to:
        n = min(1000, to - have)
        r = await client.post(
            f"/sessions/{sid}/messages", json={"messages": [next(stream) for _ in range(n)]}
        )
        assert r.status_code == 201, r.text
        have += n
    return have


async def hot_calls(
    client: httpx.AsyncClient, sid: str, stream: Any, captured: Captured
) -> list[str]:
    """Agent steps, each an append and a payload request: the first trims (the stream's
    layout is missing or stale after the growth), the next ones replay the layout it
    stored, until one reads the layout's units that lie beyond the window (as an agent's
    window moves on between two trims). Returns what the payload requests did."""
    captured.clear()
    await agent_step(client, sid)
    done = ["trim" if _stored(captured) else "no trim"]
    for n in range(1, MAX_REPLAY_STEPS + 1):
        before = dict(captured)
        captured.clear()
        await append(client, sid, [next(stream) for _ in range(2)])
        await context(client, sid)
        replayed, beyond = not _stored(captured), _beyond(captured)
        captured.update({**before, **captured})
        if replayed and beyond:
            done.append(f"replay reading layout units beyond the window (step {n})")
            return done
    done.append(f"no replay read beyond the window in {MAX_REPLAY_STEPS} steps")
    return done


MAX_REPLAY_STEPS = 60


def _stored(captured: Captured) -> bool:
    return any("INSERT INTO context_layouts" in sql for sql in captured)


def _beyond(captured: Captured) -> bool:
    # The read of listed seqs (app/context/repository.py `LogRead.seqs`).
    return any("THEN messages.body ELSE NULL" in sql for sql in captured)


async def append(client: httpx.AsyncClient, sid: str, messages: list[dict[str, Any]]) -> None:
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": messages})
    assert r.status_code == 201, r.text


async def context(client: httpx.AsyncClient, sid: str) -> None:
    r = await client.get(f"/sessions/{sid}/context", params=QUERY)
    assert r.status_code == 200, r.text


async def agent_step(client: httpx.AsyncClient, sid: str) -> None:
    call = f"call_{uuid.uuid4().hex[:12]}"
    step: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": None,
            "id": f"m_{uuid.uuid4().hex}",
            "tool_calls": [
                {"id": call, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": call,
            "content": "README.md",
            "id": f"m_{uuid.uuid4().hex}",
        },
    ]
    await append(client, sid, step)
    await context(client, sid)


async def run(args: argparse.Namespace, db: Throwaway) -> list[list[object]]:
    stream = agent_stream()
    sid = f"plans-{uuid.uuid4().hex[:8]}"
    generic = await asyncpg.connect(plain_url(db.url))
    await generic.execute("SET plan_cache_mode = force_generic_plan")
    custom = await asyncpg.connect(plain_url(db.url))
    await custom.execute("SET plan_cache_mode = force_custom_plan")
    out: list[list[object]] = []
    try:
        async with app_client(db.url) as (client, captured):
            r = await client.put(f"/sessions/{sid}", json={"auto_compact": False})
            assert r.status_code == 201, r.text
            have = await grow(client, sid, stream, args.small, 0)
            done = await hot_calls(client, sid, stream, captured)
            print(f"at {args.small:,}: {', '.join(done)}")
            small = dict(captured)
            names = {sql: f"s{i}" for i, sql in enumerate(small)}
            for sql, params in small.items():
                try:
                    await generic.execute(f"PREPARE {names[sql]} AS {sql}")
                    await custom.execute(f"PREPARE {names[sql]} AS {sql}")
                    await explain(generic, names[sql], params, analyze=False)  # caches it
                except asyncpg.PostgresError as e:
                    # An executemany's statement is captured with one row's parameters.
                    out.append([short(sql), "–", "–", f"not explained: {e}"])
                    names.pop(sql)
            have = (await client.get(f"/sessions/{sid}")).json()["last_seq"]
            await grow(client, sid, stream, args.large, have)
            done = await hot_calls(client, sid, stream, captured)
            print(f"at {args.large:,}: {', '.join(done)}")
            for sql, params in dict(captured).items():
                # EXPLAIN only, never run: a data-modifying CTE counts too.
                write = bool(re.search(r"\b(INSERT|UPDATE|DELETE)\b", _without_locking(sql)))
                if sql not in names:
                    # A shape seen only at the large size (a batch, a read of a number of
                    # seq runs the small session did not need): its custom plan still counts.
                    names[sql] = f"s{len(names) + len(small)}"
                    try:
                        await custom.execute(f"PREPARE {names[sql]} AS {sql}")
                        c_ms, c_plan = await explain(custom, names[sql], params, not write)
                    except asyncpg.PostgresError as e:
                        out.append([short(sql), "–", "–", f"not explained: {e}"])
                        continue
                    out.append([short(sql), "(not run small)", c_ms, f"custom {c_plan}"])
                    continue
                g_ms, g_plan = await explain(generic, names[sql], params, analyze=not write)
                c_ms, c_plan = await explain(custom, names[sql], params, analyze=not write)
                plans = g_plan if g_plan == c_plan else f"generic {g_plan}; custom {c_plan}"
                out.append([short(sql), g_ms, c_ms, plans])
                if args.show and args.show in sql:
                    for conn in (generic, custom):
                        print(await plan_text(conn, names[sql], params, not write))
    finally:
        await generic.close()
        await custom.close()
    return out


async def explain(
    conn: asyncpg.Connection, name: str, params: tuple[Any, ...], analyze: bool
) -> tuple[str, str]:
    """`planning + execution` ms of the third run (the first ones warm the caches), and
    the plan's access paths."""
    args = ", ".join(literal(p) for p in params)
    call = f"EXECUTE {name}({args})" if params else f"EXECUTE {name}"
    if not analyze:
        raw = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {call}")
        return "–", scans(json.loads(raw)[0]["Plan"])
    # Rolled back: should a write ever slip past the caller's check, ANALYZE runs it
    # for real and it must not store anything.
    for _ in range(3):
        tx = conn.transaction()
        await tx.start()
        try:
            plan = json.loads(await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {call}"))[0]
        finally:
            await tx.rollback()
    return f"{plan['Planning Time']:.2f} + {plan['Execution Time']:.2f}", scans(plan["Plan"])


async def plan_text(
    conn: asyncpg.Connection, name: str, params: tuple[Any, ...], analyze: bool
) -> str:
    args = ", ".join(literal(p) for p in params)
    options = "ANALYZE, " if analyze else ""
    tx = conn.transaction()
    await tx.start()
    try:
        rows = await conn.fetch(f"EXPLAIN ({options}COSTS) EXECUTE {name}({args})")
    finally:
        await tx.rollback()
    return "\n".join(r[0] for r in rows)


def scans(node: dict[str, Any]) -> str:
    """The access paths of a plan, e.g. `Index Scan messages_pkey, Seq Scan messages`."""
    found: list[str] = []

    def walk(n: dict[str, Any]) -> None:
        if "Scan" in n["Node Type"] and "Relation Name" in n:
            found.append(f"{n['Node Type']} {n.get('Index Name') or n['Relation Name']}")
        for child in n.get("Plans", []):
            walk(child)

    walk(node)
    return ", ".join(sorted(set(found))) or node["Node Type"]


def _without_locking(sql: str) -> str:
    return re.sub(r"FOR (NO KEY )?UPDATE", "", sql, flags=re.IGNORECASE)


def literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, dt.datetime):
        return quote(v.isoformat())
    if isinstance(v, list | tuple):
        return quote("{" + ",".join(_element(x) for x in v) + "}")
    if isinstance(v, dict):
        return quote(json.dumps(v))
    return quote(str(v))


def _element(x: Any) -> str:
    if x is None:
        return "NULL"
    return (
        str(x)
        if isinstance(x, int)
        else '"' + str(x).replace("\\", "\\\\").replace('"', '\\"') + '"'
    )


def quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def short(sql: str) -> str:
    text = re.sub(r"\s+", " ", sql).strip()
    return text[:70] + ("…" if len(text) > 70 else "")


if __name__ == "__main__":
    sys.exit(main())
