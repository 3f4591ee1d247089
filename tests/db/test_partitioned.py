"""Past one database (SPEC §7): the per-session tables hash-partitioned by the session
key, as Citus would distribute them, and every statement of the append, payload,
search and compaction paths touching one partition.

A migrated database has its per-session tables recreated `PARTITION BY HASH` on
(tenant, session): `sessions` on (tenant_id, id), the others on (tenant_id,
session_id), four partitions each, with the same types, so one session's rows are in
the partitions of one remainder (colocated). The real paths then run over HTTP
against it, every statement they send is captured (SQLAlchemy's cursor events, and
asyncpg's query logger on the connections the hot paths use raw), and:

- each captured statement is EXPLAINed with its own parameters: the partitions its
  plan scans, updates or deletes from are at most one per table, all of one remainder;
- every row written (a row trigger on each partitioned table logs the statement and
  the partition) went to one partition per table and statement.

Statements across sessions by nature are named in `ACROSS` with the reason (the job
queue's fair claim, the console's tenant-wide lists); docs/deployment-citus.md says
what they mean on Citus.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.pool import Pool

from app.core.settings import CompactionSettings, load_settings
from tests.support.apps import app_client
from tests.support.messages import call, result, user

PARTITIONS = 4
# The per-session tables, parents first.
KEYED = ("sessions", "messages", "tool_calls", "events", "compaction_jobs", "context_layouts")
CHILDREN = KEYED[1:]
# The partition key: the session id alone, as Citus distributes (one column), or the
# whole key (tenant, session).
KEYS = {
    "session": ("id", "session_id"),
    "tenant_session": ("tenant_id, id", "tenant_id, session_id"),
}

# Statements that read or write across sessions on purpose, each with why. A statement
# matches when its text contains the fragment.
ACROSS = {
    # The job queue is one, whatever the sessions (docs/deployment-citus.md, "What is
    # not distributed yet"): the fair claim reads every tenant's pending jobs, and the
    # sweep finds any job whose runner's lease ran out.
    "FROM compaction_jobs WHERE status = 'pending'": "the job queue's fair claim",
    "WHERE status = 'running' AND lease_expires_at < now()": "the sweep of expired job leases",
    # `GET /sessions`: every session of a tenant, by definition (not a hot path).
    "WHERE sessions.tenant_id = $1::VARCHAR ORDER BY sessions.id": "a tenant's session list",
}


async def _partition(conn: asyncpg.Connection, keys: tuple[str, str]) -> None:
    """Recreate the per-session tables hash-partitioned by the session key."""
    for table in KEYED:
        key = keys[0] if table == "sessions" else keys[1]
        await conn.execute(f"ALTER TABLE {table} RENAME TO {table}_plain")
        # Without IDENTITY: PostgreSQL before 17 has none on a partitioned table, so
        # events.id takes a sequence instead (Citus distributes bigint sequences).
        await conn.execute(
            f"CREATE TABLE {table} (LIKE {table}_plain INCLUDING DEFAULTS INCLUDING "
            "CONSTRAINTS INCLUDING INDEXES INCLUDING STORAGE INCLUDING COMPRESSION) "
            f"PARTITION BY HASH ({key})"
        )
        for r in range(PARTITIONS):
            await conn.execute(
                f"CREATE TABLE {table}_p{r} PARTITION OF {table} "
                f"FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {r})"
            )
    await conn.execute("CREATE SEQUENCE events_id_partitioned")
    await conn.execute(
        "ALTER TABLE events ALTER COLUMN id SET DEFAULT nextval('events_id_partitioned')"
    )
    for table in reversed(KEYED):
        await conn.execute(f"DROP TABLE {table}_plain CASCADE")
    for table in CHILDREN:
        await conn.execute(
            f"ALTER TABLE {table} ADD FOREIGN KEY (tenant_id, session_id) "
            "REFERENCES sessions (tenant_id, id) ON DELETE CASCADE"
        )
    # Every row written, with the statement that wrote it and the partition it went to.
    await conn.execute(
        "CREATE TABLE touch_log (query text, part text, op text, xact text, at timestamptz)"
    )
    await conn.execute(
        "CREATE FUNCTION log_touch() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "INSERT INTO touch_log VALUES (current_query(), TG_TABLE_NAME, TG_OP, "
        "pg_current_xact_id()::text, statement_timestamp()); "
        "RETURN NULL; END $$"
    )
    for table in KEYED:
        await conn.execute(
            f"CREATE TRIGGER touch AFTER INSERT OR UPDATE OR DELETE ON {table} "
            "FOR EACH ROW EXECUTE FUNCTION log_touch()"
        )


@contextmanager
def _captured() -> Iterator[list[tuple[str, tuple[Any, ...]]]]:
    """Every statement this process sends, with its parameters, while inside."""
    seen: list[tuple[str, tuple[Any, ...]]] = []

    def orm(_c: Any, _cur: Any, statement: str, parameters: Any, _ctx: Any, many: bool) -> None:
        if not many:
            seen.append((statement, tuple(parameters or ())))

    def raw(record: Any) -> None:
        args = tuple(record.args or ())
        if args and all(isinstance(a, tuple) for a in args):
            # executemany (the event writer's batch): each row is its own execution.
            seen.extend((record.query, row) for row in args)
        else:
            seen.append((record.query, args))

    def connected(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.driver_connection.add_query_logger(raw)

    event.listen(Engine, "before_cursor_execute", orm)
    event.listen(Pool, "connect", connected)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", orm)
        event.remove(Pool, "connect", connected)


async def _run_paths(c: httpx.AsyncClient, sid: str) -> None:
    """The append, payload, search and compaction paths of one session, for real."""
    put = {"model": "gpt-4o-mini", "compaction": {"min_preserved_turns": 0}}
    (await c.put(f"/sessions/{sid}", json=put)).raise_for_status()
    for i in range(6):
        step = [
            user(f"question {i}: what does notes{i}.txt say? " + "context " * 60),
            call(f"c{i}", "read_file"),
        ]
        (await c.post(f"/sessions/{sid}/messages", json={"messages": step})).raise_for_status()
        # A tool group split over two appends: the answer lands on the open call.
        answer = [result(f"c{i}", f"line {i}: the code is K{i}X " * 40)]
        (await c.post(f"/sessions/{sid}/messages", json={"messages": answer})).raise_for_status()
    # A replay (ids already stored) takes the careful way.
    again = [{**user("replayed"), "id": f"{sid}-u"}]
    for _ in range(2):
        (await c.post(f"/sessions/{sid}/messages", json={"messages": again})).raise_for_status()
    # A lease, and an append under it.
    lease = (await c.post(f"/sessions/{sid}/lock", json={"owner": "a", "ttl_s": 30})).json()
    body = {"messages": [user("under the lease")], "lock_token": lease["lock_token"]}
    (await c.post(f"/sessions/{sid}/messages", json=body)).raise_for_status()
    release = {"lock_token": lease["lock_token"]}
    (await c.request("DELETE", f"/sessions/{sid}/lock", json=release)).raise_for_status()
    # Payloads: every format, one small enough to trim (a layout is written), repeated.
    payloads: list[dict[str, str | int]] = [
        {},
        {"format": "anthropic"},
        {"format": "responses"},
        {"max_tokens": 1500},
        {"max_tokens": 1500},
        {"max_tokens": 1500, "recall": "true"},
    ]
    for params in payloads:
        (await c.get(f"/sessions/{sid}/context", params=params)).raise_for_status()
    (await c.get(f"/sessions/{sid}/budget")).raise_for_status()
    # Search and reads.
    for q in ("K3X", "notes", "the code", "question 2"):
        (await c.get(f"/sessions/{sid}/search", params={"q": q})).raise_for_status()
    (await c.get(f"/sessions/{sid}/messages/3")).raise_for_status()
    (
        await c.get(f"/sessions/{sid}/messages", params={"order": "desc", "limit": 5})
    ).raise_for_status()
    # Compaction, run by the app's own runner, then read back.
    done = await c.post(f"/sessions/{sid}/compact", json={"force": True, "wait": True})
    assert done.status_code == 200 and done.json()["status"] in ("success", "degraded"), done.text
    (await c.post(f"/sessions/{sid}/compact", json={"dry_run": True})).raise_for_status()
    (await c.get(f"/sessions/{sid}/compaction")).raise_for_status()
    (await c.get(f"/sessions/{sid}/context", params={"max_tokens": 1500})).raise_for_status()
    # Undo and start over.
    last = (await c.get(f"/sessions/{sid}")).json()["stats"]["last_seq"]
    cut = await c.request("DELETE", f"/sessions/{sid}/messages", params={"from_seq": last})
    cut.raise_for_status()
    (await c.get(f"/sessions/{sid}/events")).raise_for_status()


_DML = re.compile(r"^\s*(?:WITH|SELECT|INSERT|UPDATE|DELETE)\b", re.IGNORECASE)


def _relations(plan: Any, scans_only: bool = False) -> Iterator[str]:
    """The tables a plan reads or writes (`scans_only`: that it reads rows of)."""
    if isinstance(plan, dict):
        scan = "Scan" in str(plan.get("Node Type", ""))
        if "Relation Name" in plan and (scan or not scans_only):
            yield plan["Relation Name"]
        for value in plan.values():
            yield from _relations(value, scans_only)
    elif isinstance(plan, list):
        for value in plan:
            yield from _relations(value, scans_only)


def _spread(parts: set[str], parent_of: dict[str, str]) -> dict[str, set[str]]:
    """Parent table -> the partitions of it among `parts`."""
    out: dict[str, set[str]] = defaultdict(set)
    for part in parts:
        if part in parent_of:
            out[parent_of[part]].add(part)
    return out


def _one_partition(parts: set[str], parent_of: dict[str, str]) -> str | None:
    """Why `parts` is not one partition per table, all of one remainder, or None."""
    spread = _spread(parts, parent_of)
    wide = {t: sorted(p) for t, p in spread.items() if len(p) > 1}
    if wide:
        return f"several partitions of one table: {wide}"
    remainders = {p.rsplit("_p", 1)[1] for ps in spread.values() for p in ps}
    if len(remainders) > 1:
        return f"partitions of different remainders: {sorted(parts)}"
    return None


def _across(query: str) -> bool:
    return any(fragment in query for fragment in ACROSS)


async def _explain(
    conn: asyncpg.Connection, query: str, args: tuple[Any, ...], *, generic: bool
) -> str:
    """The plan of `query` for `args`. A generic one is the plan of a prepared
    statement, as EXPLAIN EXECUTE shows it (an EXPLAIN of the text is planned for the
    values whatever plan_cache_mode says)."""
    if not generic:
        return str(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {query}", *args))
    await conn.execute(f"PREPARE generic AS {query}")
    try:
        # EXECUTE takes no parameters: each value goes as a literal of its own type.
        types = await conn.fetchval(
            "SELECT parameter_types::text[] FROM pg_prepared_statements WHERE name = 'generic'"
        )
        literals = [
            f"{await conn.fetchval(f'SELECT quote_nullable(($1::{t})::text)', a)}::{t}"
            for a, t in zip(args, types, strict=True)
        ]
        execute = f"EXECUTE generic({', '.join(literals)})" if args else "EXECUTE generic"
        return str(await conn.fetchval(f"EXPLAIN (FORMAT JSON) {execute}"))
    finally:
        await conn.execute("DEALLOCATE generic")


@pytest.mark.parametrize("key", list(KEYS))
async def test_every_hot_statement_touches_one_partition(
    make_database: Callable[[], str], key: str
) -> None:
    url = make_database()
    plain = url.replace("postgresql+asyncpg://", "postgresql://")
    conn = await asyncpg.connect(plain)
    try:
        await _partition(conn, KEYS[key])
        parent_of = {
            r["part"]: r["parent"]
            for r in await conn.fetch(
                "SELECT c.relname AS part, p.relname AS parent FROM pg_inherits i "
                "JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent "
                "WHERE c.relkind = 'r'"
            )
        }
        assert set(parent_of.values()) == set(KEYED)
    finally:
        await conn.close()

    settings = load_settings(
        run_compactions_in_process=True,
        # Group commit writes the appends of several sessions in one statement; on
        # Citus a group is one append (docs/deployment-citus.md), as here.
        append_group_size=1,
        compaction=CompactionSettings(min_preserved_steps=1),
    )
    sids = [f"part-{n}" for n in range(4)]
    with _captured() as seen:
        async with app_client(settings, url) as c:
            for sid in sids:  # sessions of different partitions, and a tenant's list
                await _run_paths(c, sid)
            # Appends of every session at once: each still its own statement.
            burst = [
                c.post(f"/sessions/{sid}/messages", json={"messages": [user(f"burst {i}")]})
                for i in range(5)
                for sid in sids
            ]
            for r in await asyncio.gather(*burst):
                r.raise_for_status()
            (await c.get("/sessions")).raise_for_status()
    statements: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for query, args in seen:
        if _DML.match(query) and "touch_log" not in query:
            statements[query].append(args)
    assert len(statements) > 20, list(statements)

    conn = await asyncpg.connect(plain)
    problems: list[str] = []
    excused: set[str] = set()  # each fragment of ACROSS must still be met
    one_partition: dict[str, int] = defaultdict(int)  # plans reading one partition
    explained = 0
    try:
        await conn.set_type_codec(
            "tsvector", schema="pg_catalog", encoder=bytes, decoder=bytes, format="binary"
        )
        # Each plan as made for its own parameters (partitions pruned at planning: the
        # server's pool plans every statement so), and as a generic plan (the payload
        # reads' pool runs those: partitions pruned as the executor starts, which
        # EXPLAIN shows as "Subplans Removed"). A generic UPDATE or DELETE still names
        # every partition as a target (PostgreSQL opens them all), so there only the
        # partitions read count; Citus routes by the values either way.
        for mode in ("force_custom_plan", "force_generic_plan"):
            await conn.execute(f"SET plan_cache_mode = {mode}")
            for query, runs in statements.items():
                for args in runs[:3]:
                    try:
                        plan = await _explain(
                            conn, query, args, generic=mode != "force_custom_plan"
                        )
                    except Exception as exc:
                        raise AssertionError(f"{query!r} {args!r}") from exc
                    explained += 1
                    found = _relations(json.loads(plan), scans_only=mode != "force_custom_plan")
                    parts = {r for r in found if r in parent_of}
                    one_partition[mode] += len(parts) == 1
                    why = _one_partition(parts, parent_of)
                    if why and _across(query):
                        excused.add(query)
                    if why and not _across(query):
                        problems.append(f"{mode}: {why}\n  in {query}")
        written = await conn.fetch(
            # One execution: its statement, in its transaction, at its start.
            "SELECT query, array_agg(DISTINCT part) AS parts FROM touch_log "
            "GROUP BY query, xact, at"
        )
        for row in written:
            why = _one_partition(set(row["parts"]), parent_of)
            if why and not _across(row["query"]):
                problems.append(f"rows written to {why}\n  by {row['query']}")
        assert written, "the trigger logged no write"
    finally:
        await conn.close()
    assert explained >= len(statements)
    # Not vacuous: in both kinds of plan, statements read exactly one partition.
    assert min(one_partition.values()) > 20, dict(one_partition)
    # The excuses are live: each names a statement these paths send across partitions.
    assert {f for f in ACROSS if any(f in q for q in excused)} == set(ACROSS), excused
    assert not problems, "\n\n".join(problems)
