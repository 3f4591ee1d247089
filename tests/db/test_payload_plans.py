"""Payload reads run on generic plans (app/db/engine.py, PAYLOAD_PLAN_CACHE_MODE): a plan is made
once per pooled connection, when the log may be nearly empty, and kept while it grows.
Every statement a payload sends must still walk an index once the log is large: the
trap of the long-lived server, where a window read cached on a small table took 118 ms
at 100k messages (issue 11)."""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import asyncpg
import httpx
from sqlalchemy import event, text

from app.core.settings import Settings
from app.db.engine import PAYLOAD_PLAN_CACHE_MODE
from app.main import create_app
from tests.support.databases import plain_url

Captured = dict[str, tuple[Any, ...]]
LARGE_TABLES = {"messages", "tool_calls", "sessions", "context_layouts", "compaction_jobs"}
GROWN_BY = 60_000
# A payload reads a window of a few thousand tokens and up to 64 older user messages:
# tens of pages. Walking the session (60k rows) touches thousands.
MAX_BLOCKS = 1_000


@asynccontextmanager
async def app_capturing(
    settings: Settings, url: str
) -> AsyncIterator[tuple[httpx.AsyncClient, Captured]]:
    """An app on `url`, and every statement its payload pool runs (SQL -> parameters)."""
    app = create_app(settings, database_url=url)
    captured: Captured = {}
    async with app.router.lifespan_context(app):
        payloads = app.state.database.payload_engine.sync_engine

        @event.listens_for(payloads, "before_cursor_execute")
        def _seen(conn: Any, cursor: Any, sql: str, params: Any, ctx: Any, many: bool) -> None:
            captured[sql] = tuple((params[0] if many else params) or ())

        transport = httpx.ASGITransport(app=app)
        with driver_statements(captured, only=_payload_pool):
            async with httpx.AsyncClient(transport=transport, base_url="http://plans.test") as c:
                yield c, captured


@contextmanager
def driver_statements(
    captured: Captured, only: Callable[[asyncpg.Connection], bool]
) -> Iterator[None]:
    """Also record the statements run on the asyncpg connection itself (the payload's
    message reads), which SQLAlchemy's cursor hook never sees, of the connections `only`
    accepts. Only statements with parameters: BEGIN, COMMIT, PREPARE and EXPLAIN have none."""
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


def literal(v: Any) -> str:
    """A parameter as an SQL literal, for EXECUTE of a prepared statement."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, dt.datetime):
        return _quote(v.isoformat())
    if isinstance(v, list | tuple):
        return _quote("{" + ",".join(_element(x) for x in v) + "}")
    if isinstance(v, dict):
        return _quote(json.dumps(v))
    return _quote(str(v))


def _element(x: Any) -> str:
    if x is None:
        return "NULL"
    if isinstance(x, int):
        return str(x)
    return '"' + str(x).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _quote(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _payload_pool(conn: asyncpg.Connection) -> bool:
    # The append path's writes run on the other pool, planned for their parameters.
    settings = conn._params.server_settings or {}
    return bool(settings.get("plan_cache_mode") == PAYLOAD_PLAN_CACHE_MODE)


def seq_scans(plan: dict[str, Any]) -> list[str]:
    found = []
    if plan["Node Type"] == "Seq Scan" and plan.get("Relation Name") in LARGE_TABLES:
        found.append(plan["Relation Name"])
    for child in plan.get("Plans", []):
        found += seq_scans(child)
    return found


async def step(c: httpx.AsyncClient, sid: str, n: int, pinned: bool = False) -> None:
    call = f"call-{n}"
    messages = [
        {"role": "user", "content": f"Step {n}: keep the migrations untouched.", "pinned": pinned},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call, "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": call, "content": f"file-{n}.py " * 120},
        {"role": "assistant", "content": f"Listed the files of step {n}."},
    ]
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": messages})
    assert r.status_code == 201, r.text


async def payloads(c: httpx.AsyncClient, sid: str) -> None:
    """Every kind of payload read: trims (a layout stored), replays, the strategies, a
    pinned message before the window, both methods, every format."""
    queries: list[dict[str, str | int]] = [
        {"max_tokens": 600},
        {"max_tokens": 600},
        {"max_tokens": 600, "strategy": "sliding_window"},
        {"max_tokens": 600, "strategy": "summary"},
        {"max_tokens": 5000, "format": "anthropic"},
        {"max_tokens": 600, "format": "responses"},
    ]
    for query in queries:
        r = await c.get(f"/sessions/{sid}/context", params=query)
        assert r.status_code == 200, r.text
    r = await c.post(
        f"/sessions/{sid}/context",
        json={"max_tokens": 800, "dynamic_context": ["Today: Tuesday."]},
    )
    assert r.status_code == 200, r.text


async def test_payload_plans_made_on_a_small_log_stay_cheap_on_a_large_one(
    settings: Settings, make_database: Callable[[], str]
) -> None:
    url = make_database()  # empty tables: where a sequential scan is cheapest
    sid = f"plans-{uuid.uuid4().hex[:8]}"
    generic = await asyncpg.connect(plain_url(url))
    try:
        await generic.execute(f"SET plan_cache_mode = {PAYLOAD_PLAN_CACHE_MODE}")
        async with app_capturing(settings, url) as (c, captured):
            for n in range(12):
                await step(c, sid, n, pinned=n == 1)
                await payloads(c, sid)
            small = dict(captured)
            assert any("window_start" in sql for sql in small), list(small)
            assert any("INSERT INTO context_layouts" in sql for sql in small), list(small)
            names = {sql: f"p{i}" for i, sql in enumerate(small)}
            for sql, params in small.items():
                await generic.execute(f"PREPARE {names[sql]} AS {sql}")
                await _plan(generic, names[sql], params)  # the generic plan, made now

            # The session grows by tens of thousands of messages, as in a long-lived server.
            await _grow(generic, sid, GROWN_BY)
            for n in range(12, 20):
                await step(c, sid, n)
            captured.clear()
            await payloads(c, sid)
            large = dict(captured)

        costly = {}
        for sql, params in large.items():
            if sql not in names:  # a shape first seen now: its generic plan is made now
                names[sql] = f"p{len(names)}"
                await generic.execute(f"PREPARE {names[sql]} AS {sql}")
            plan = await _plan(generic, names[sql], params)
            blocks = plan.get("Shared Hit Blocks", 0) + plan.get("Shared Read Blocks", 0)
            if seq_scans(plan) or blocks > MAX_BLOCKS:
                costly[sql[:100]] = (seq_scans(plan), blocks)
        assert not costly, costly
        assert any("window_start" in sql for sql in large), list(large)
    finally:
        await generic.close()


async def test_only_the_payload_pool_runs_generic_plans(
    settings: Settings, database_url: str
) -> None:
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        database = app.state.database
        async with database.payloads() as conn:
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
        async with database.reading() as s:
            assert (await s.execute(text("SHOW plan_cache_mode"))).scalar() == "force_custom_plan"
        async with database.transaction() as s:
            assert (await s.execute(text("SHOW plan_cache_mode"))).scalar() == "force_custom_plan"


async def _plan(conn: asyncpg.Connection, name: str, params: tuple[Any, ...]) -> dict[str, Any]:
    """The plan of a prepared statement, run (EXPLAIN ANALYZE, rolled back) if it only reads."""
    args = ", ".join(literal(p) for p in params)
    call = f"EXECUTE {name}({args})" if params else f"EXECUTE {name}"
    sql = await conn.fetchval("SELECT statement FROM pg_prepared_statements WHERE name = $1", name)
    options = (
        "FORMAT JSON"
        if re.search(r"\b(INSERT|UPDATE|DELETE)\b", sql)
        else "ANALYZE, BUFFERS, FORMAT JSON"
    )
    tx = conn.transaction()
    await tx.start()
    try:
        plan = json.loads(await conn.fetchval(f"EXPLAIN ({options}) {call}"))[0]
    finally:
        await tx.rollback()
    node: dict[str, Any] = plan["Plan"]
    return node


async def _grow(conn: asyncpg.Connection, sid: str, rows: int) -> None:
    """`rows` more messages at the end of the session, written straight into the tables
    (an agent run: a user message every 2,000), its row updated to match."""
    last, through = await conn.fetchrow(
        "SELECT last_seq, context_tokens FROM sessions WHERE tenant_id = 'default' AND id = $1",
        sid,
    )
    await conn.execute(
        "INSERT INTO messages (tenant_id, session_id, seq, message_id, role, body,"
        " token_count, context_tokens_through)"
        " SELECT 'default', $1, $2 + g, 'grown-' || g,"
        " CASE WHEN g % 2000 = 0 THEN 'user' ELSE 'assistant' END,"
        " jsonb_build_object('role', CASE WHEN g % 2000 = 0 THEN 'user' ELSE 'assistant' END,"
        " 'content', 'grown ' || g), 10, $3 + 10 * g"
        " FROM generate_series(1, $4) AS g",
        sid,
        last,
        through,
        rows,
    )
    await conn.execute(
        "UPDATE sessions SET last_seq = last_seq + $2, context_tokens = context_tokens + 10 * $2,"
        " count_user = count_user + $2 / 2000, count_assistant = count_assistant + $2 - $2 / 2000"
        " WHERE tenant_id = 'default' AND id = $1",
        sid,
        rows,
    )
