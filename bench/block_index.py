"""What a block index would save PostgreSQL: one GIN row per block of a session's messages.

    python bench/block_index.py [--database-url URL] [--sessions 48] [--per-session 160]
        [--clients 4] [--rounds 4] [--block 16]

A design study for issue 22's append target (docs/recall.md, "The append's cost"), not
the shipped schema. In a throwaway database (on `--database-url`, else
`CONTEXTD_DATABASE_URL`, else an embedded PostgreSQL), four tables shaped like
`messages` (key, role, body, search vector) take the same rows, alternated round by
round, `--clients` connections each appending its own sessions one row per
statement (the dataset's messages in turn, each session from its own point of the
dataset, its vector made by `app.index.vector.message_vector` and sent in
binary, as the append sends it):

- none: no vector (the column NULL, no search index);
- stored: the vector stored, no index;
- rows: the vector stored and a GIN index over it (as shipped);
- blocks: the vector stored, no index on it; the statement that appends a block's
  last message also writes one row of a second table, the block's lexemes (the
  stored vectors of its other messages and its own, positions stripped,
  concatenated in PostgreSQL), which carries the GIN index.

Reported: PostgreSQL's CPU per row (the backends of the database, /proc), medians of
the rounds, and how many GIN entries (lexemes) each row costs either way. The
search side of blocks (matching a block's messages from their stored vectors) is not
built and not measured. The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/block_index.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg

from app.db.engine import tsvector_text
from app.index.lexemes import session_lexeme
from app.index.vector import message_vector
from bench.common import (
    dataset_warning,
    load_average,
    load_messages,
    machine_info,
    markdown_table,
    plain_url,
    throwaway_database,
)
from bench.search_append import backend_cpu, backend_seconds

TENANT = "t"
VARIANTS = ("none", "stored", "rows", "blocks")
TABLE = {"none": "m_none", "stored": "m_stored", "rows": "m_rows", "blocks": "m_blocks"}

Row = tuple[str, int, str, str, bytes]


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def connect(url: str) -> asyncpg.Connection:
    conn = await asyncpg.connect(plain_url(url))
    await conn.set_type_codec(
        "tsvector",
        schema="pg_catalog",
        encoder=lambda data: data,
        decoder=tsvector_text,
        format="binary",
    )
    return conn


async def schema(conn: asyncpg.Connection) -> None:
    lz4 = await conn.fetchval(
        "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
    )
    for table in TABLE.values():
        await conn.execute(
            f"CREATE TABLE {table} (tenant_id text, session_id text, seq bigint, role text,"
            " body jsonb, search tsvector, PRIMARY KEY (tenant_id, session_id, seq))"
        )
        if lz4:  # as migration 0013 sets the messages table
            await conn.execute(
                f"ALTER TABLE {table} ALTER body SET COMPRESSION lz4,"
                " ALTER search SET COMPRESSION lz4"
            )
    await conn.execute(f"CREATE INDEX ON {TABLE['rows']} USING gin (search)")
    await conn.execute(
        "CREATE TABLE blocks (tenant_id text, session_id text, block bigint, search tsvector,"
        " PRIMARY KEY (tenant_id, session_id, block))"
    )
    await conn.execute("CREATE INDEX ON blocks USING gin (search)")
    await conn.execute(
        "CREATE AGGREGATE lexemes_of(tsvector)"
        " (SFUNC = tsvector_concat, STYPE = tsvector, INITCOND = '')"
    )


def streams(args: argparse.Namespace) -> list[list[Row]]:
    """Each client's rows: its sessions interleaved, a step of each in turn."""
    messages = load_messages()
    out: list[list[Row]] = [[] for _ in range(args.clients)]
    for s in range(args.sessions):
        sid = f"s{s}"
        key = session_lexeme(TENANT, sid)
        for k in range(args.per_session):
            m = messages[(s * 41 + k) % len(messages)]
            out[s % args.clients].append(
                (sid, k + 1, str(m["role"]), json.dumps(m), message_vector(m, key))
            )
    for rows in out:
        rows.sort(key=lambda r: (r[1], r[0]))
    return out


async def append(conn: asyncpg.Connection, variant: str, rows: list[Row], block: int) -> None:
    table = TABLE[variant]
    plain = f"INSERT INTO {table} VALUES ('{TENANT}', $1, $2, $3, $4::jsonb, $5)"
    blocked = (
        f"WITH ins AS (INSERT INTO {table} VALUES ('{TENANT}', $1, $2, $3, $4::jsonb, $5))"
        f" INSERT INTO blocks SELECT '{TENANT}', $1, $2 / {block},"
        " coalesce(lexemes_of(strip(search)), '') || strip($5)"
        f" FROM {table} WHERE tenant_id = '{TENANT}' AND session_id = $1"
        f" AND seq BETWEEN $2 - {block - 1} AND $2 - 1"
    )
    for sid, seq, role, body, vec in rows:
        if variant == "none":
            await conn.execute(plain, sid, seq, role, body, None)
        elif variant == "blocks" and seq % block == 0:
            await conn.execute(blocked, sid, seq, role, body, vec)
        else:
            await conn.execute(plain, sid, seq, role, body, vec)


async def measure(url: str, args: argparse.Namespace) -> list[list[Any]]:
    database = url.rsplit("/", 1)[1].split("?")[0]
    admin = await connect(url)
    await schema(admin)
    work = streams(args)
    total = sum(len(w) for w in work)
    conns = [await connect(url) for _ in work]
    cpu: dict[str, list[float]] = {v: [] for v in VARIANTS}
    rate: dict[str, list[float]] = {v: [] for v in VARIANTS}
    try:
        for r in range(args.rounds):
            for variant in VARIANTS:
                extra = ", blocks" if variant == "blocks" else ""
                await admin.execute(f"TRUNCATE {TABLE[variant]}{extra}")
                before = backend_cpu(database)
                start = time.perf_counter()
                await asyncio.gather(
                    *(append(c, variant, w, args.block) for c, w in zip(conns, work, strict=True))
                )
                wall = time.perf_counter() - start
                us = backend_seconds(before, backend_cpu(database)) / total * 1e6
                cpu[variant].append(us)
                rate[variant].append(total / wall)
                progress(f"round {r + 1} {variant}: {us:.0f} µs of PostgreSQL CPU per row")
        rows_lexemes = await admin.fetchval(
            f"SELECT sum(length(search))::float8 / count(*) FROM {TABLE['rows']}"
        )
        block_lexemes = await admin.fetchval("SELECT sum(length(search))::float8 FROM blocks")
    finally:
        for c in conns:
            await c.close()
        await admin.close()
    base = statistics.median(cpu["none"])
    entries = {"rows": rows_lexemes, "blocks": block_lexemes / total}
    return [
        [
            v,
            round(statistics.median(cpu[v]), 1),
            round(statistics.median(cpu[v]) - base, 1),
            round(statistics.median(rate[v])),
            round(entries[v], 1) if v in entries else "",
        ]
        for v in VARIANTS
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--database-url", help="PostgreSQL server for the throwaway database")
    p.add_argument("--sessions", type=int, default=48)
    p.add_argument("--per-session", type=int, default=160)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--block", type=int, default=16)
    args = p.parse_args()
    server = args.database_url or os.environ.get("CONTEXTD_DATABASE_URL")
    print(f"# block_index {' '.join(sys.argv[1:])}\n\n{machine_info()}{dataset_warning()}")
    print(f"load average before: {load_average()}\n")
    with throwaway_database(server, prefix="contextd_blocks") as db:
        rows = asyncio.run(measure(db.url, args))
    print(
        f"## {args.sessions * args.per_session:,} rows per variant, {args.clients} clients,"
        f" blocks of {args.block}, medians of {args.rounds} rounds\n"
    )
    headers = [
        "variant",
        "PostgreSQL µs/row",
        "over none",
        "rows/s",
        "GIN entries per row",
    ]
    print(markdown_table(headers, rows))
    print(f"\nload average after: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
