"""The search index's cost to appends: with it (A) against without (B), alternated in one run.

    python bench/search_append.py [--via process,http] [--clients 1,20,50] [--rounds 3]
        [--round-s 6] [--warmup-s 1] [--messages dataset|plain] [--variants A,B]
        [--workers 1] [--compare CHECKOUT] [--clean-s 1] [--database-url URL]

In a throwaway database (on `--database-url`, else `CONTEXTD_DATABASE_URL`, else an
embedded PostgreSQL), migrated to head. For each `--via` and each `--clients` count C,
C clients append one message per call, each to a session of its own, back to back,
`--rounds` times per variant, the variants alternated (A B A B …), each round
`--warmup-s` unmeasured seconds then `--round-s` measured ones, on fresh sessions.

- `--via process`: `app.messages.service.append` with its group commit, on the app
  built in this process (`create_app`), no HTTP: the append's own work only, which
  gives the lexemes their largest share.
- `--via http`: `contextd serve --workers W` (bench/serve_variant.py, one server per
  variant) and clients on keep-alive HTTP/1.1 connections, as bench/throughput.py's.

Both run no compaction jobs (a session of dataset messages reaches compact_needed
within a round at one client; that work is not the append's).

Variants: A, as shipped (lexemes made and stored, GIN index `ix_messages_search`);
B, no lexemes made, the column left NULL, no GIN index; L, lexemes stored without the
GIN index; T, lexemes made and not stored (no index); Az and Bz, A and B with the large
values of messages and events compressed with pglz, as before migration 0013 (lz4 where
the server has it; A/Az is then lz4's gain); G, A with a 64 MB GIN pending list, which a
round never fills (no append merges it: what the merge costs appends, not a setting to
ship, since the merge is only put off); C, G with the bench's own connection merging the
list every `--clean-s` seconds (`gin_clean_pending_list`, its CPU counted), so that no
append's statement does it. The index is dropped or created
between rounds as the variant needs. `--compare CHECKOUT` (http only) adds A and B of
another checkout's server (its bench/serve_variant.py, e.g. a `git archive` of main
with this bench copied in) as A0 and B0, alternated with the others in the same run.

`--messages dataset`: the shared dataset's messages in their order (user, assistant,
tool calls and tool outputs; client c starts at the c-th of C evenly spaced user
messages and wraps around). `--messages plain`: its user and assistant messages
without tool calls only, client c taking every C-th.

Reported per round and as medians: appends/s per variant and A/B; CPU ms per append
of the app (`process`: this whole process, the clients included, and of it the
vectors' making, timed around the function the write calls; `http`: the server's
processes) and of the PostgreSQL backends of the database, over the measured seconds.
The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

if __package__ in (None, ""):  # `python bench/search_append.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import asyncpg

from bench.common import (
    REPO_ROOT,
    RawHttp,
    contextd_server,
    dataset_warning,
    load_average,
    load_messages,
    machine_info,
    markdown_table,
    plain_url,
    throwaway_database,
    use_uvloop,
    with_unique_ids,
)
from bench.serve_variant import VECTOR_CPU, switch_search
from bench.throughput import server_cpu_s

TENANT = "default"
CREATE_INDEX = "CREATE INDEX IF NOT EXISTS ix_messages_search ON messages USING gin (search)"
DROP_INDEX = "DROP INDEX IF EXISTS ix_messages_search"
# The GIN index's storage parameters per variant with an index (A as shipped; F and P
# are A with other settings, for comparison).
INDEX_WITH = {
    "A": "",
    "F": "fastupdate = off",
    "P": "gin_pending_list_limit = 256",
    "G": "gin_pending_list_limit = 65536",
    "C": "gin_pending_list_limit = 65536",
}
CLEAN = "SELECT gin_clean_pending_list('ix_messages_search')"


def letter(variant: str) -> str:
    """The variant's kind of index and vector: `Az0` is A's."""
    return variant.rstrip("0").rstrip("z")


# The columns an append writes that TOAST may compress, and their method as migrated
# (lz4 where the server has it: migration 0013); a variant ending in `z` (Az, Bz) has
# them compress with pglz, as before that migration.
COMPRESSIBLE = (
    "SELECT c.relname, a.attname, a.attcompression::text FROM pg_attribute a"
    " JOIN pg_class c ON c.oid = a.attrelid"
    " WHERE c.relname IN ('messages', 'events') AND a.attnum > 0"
    " AND NOT a.attisdropped AND a.attstorage IN ('x', 'm')"
)
MIGRATED: dict[tuple[str, str], str] = {}


async def set_compression(admin: asyncpg.Connection, variant: str) -> None:
    rows = await admin.fetch(COMPRESSIBLE)
    if not MIGRATED:
        MIGRATED.update({(r[0], r[1]): r[2] for r in rows})
    methods = {"l": "lz4", "p": "pglz", "": "default"}
    for table, column, have in rows:
        want = "p" if variant.rstrip("0").endswith("z") else MIGRATED[(table, column)]
        if have != want:
            await admin.execute(
                f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION {methods[want]}'
            )


async def set_index(admin: asyncpg.Connection, variant: str) -> None:
    """The GIN index as `variant` has it: as shipped, with other settings, or none."""
    await set_compression(admin, variant)
    variant = letter(variant)
    if variant not in INDEX_WITH:
        await admin.execute(DROP_INDEX)
        return
    wanted = INDEX_WITH[variant]
    have = await admin.fetchval(
        "SELECT coalesce(array_to_string(reloptions, ', '), '') FROM pg_class"
        " WHERE relname = 'ix_messages_search'"
    )
    if have is None or have.replace(" ", "") != wanted.replace(" ", ""):
        await admin.execute(DROP_INDEX)
        await admin.execute(CREATE_INDEX + (f" WITH ({wanted})" if wanted else ""))


async def clean_pending(admin: asyncpg.Connection, every_s: float) -> None:
    """Variant C: the GIN pending list merged by a connection of its own every `every_s`
    seconds, so that no append's statement does it (its limit is set past reach)."""
    while True:
        await asyncio.sleep(every_s)
        await admin.execute(CLEAN)


_CALLS = itertools.count()


def progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def backend_cpu(database: str) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving `database` (/proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    needle = f" {database} ".encode()
    out: dict[int, float] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            cmd = (proc / "cmdline").read_bytes()
            if cmd.startswith(b"postgres: ") and needle in cmd:
                fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                out[int(proc.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def backend_seconds(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds the backends used between two `backend_cpu` samples (one that started
    in between counts whole)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


Message = dict[str, Any]
# Per variant, per round: appends/s, app CPU ms, PostgreSQL CPU ms, failures, and (in
# process) the CPU ms of making vectors, per append.
Results = dict[str, list[tuple[float, float, float, int, float]]]


def streams(messages: list[Message], clients: int, kind: str) -> list[Iterator[Message]]:
    """One endless message stream per client."""
    if kind == "plain":
        plain = [m for m in messages if not m.get("tool_calls") and m["role"] != "tool"]

        def strided(c: int) -> Iterator[dict[str, Any]]:
            i = c
            while True:
                yield plain[i % len(plain)]
                i += clients

        return [strided(c) for c in range(clients)]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]

    def ordered(start: int) -> Iterator[dict[str, Any]]:
        # Tool-call ids are unique within a session only: qualified again on each lap.
        lap = 0
        i = start
        while True:
            yield with_unique_ids(messages[i], f"lap{lap}") if lap else messages[i]
            i += 1
            if i == len(messages):
                i, lap = 0, lap + 1

    return [ordered(users[c * len(users) // clients]) for c in range(clients)]


class Round:
    """One round's clients: appends acknowledged in the measured window, CPU around it."""

    def __init__(self, args: argparse.Namespace, clients: int) -> None:
        self.args = args
        self.clients = clients
        self.done = 0
        self.failures = 0
        self.measuring = False

    async def run(
        self, append: Any, sids: list[str], feeds: list[Iterator[Any]], sample: Any
    ) -> tuple[float, tuple[float, ...]]:
        """(appends/s, CPU samples' differences) of `append(c, sid, message)` by each client."""
        stop = asyncio.Event()

        async def client(c: int) -> None:
            while not stop.is_set():
                ok = await append(c, sids[c], next(feeds[c]))
                if self.measuring and not stop.is_set():
                    self.done += ok
                    self.failures += not ok

        tasks = [asyncio.ensure_future(client(c)) for c in range(self.clients)]
        await asyncio.sleep(self.args.warmup_s)
        before = sample()
        start = time.perf_counter()
        self.measuring = True
        await asyncio.sleep(self.args.round_s)
        stop.set()
        elapsed = time.perf_counter() - start
        after = sample()
        await asyncio.gather(*tasks)
        return self.done / elapsed, tuple(a - b for a, b in zip(after, before, strict=True))


@contextlib.asynccontextmanager
async def in_process(url: str) -> AsyncIterator[Any]:
    from app.core.settings import load_settings
    from app.main import create_app

    settings = load_settings(database_url=None, run_compactions_in_process=False)
    app = create_app(settings, database_url=url)
    async with app.router.lifespan_context(app):
        yield app


async def measure(
    url: str, via: str, clients: int, args: argparse.Namespace, admin: asyncpg.Connection
) -> Results:
    """Per variant, per round, its figures (`Results`)."""
    messages = load_messages()
    database = url.rsplit("/", 1)[-1]
    call = next(_CALLS)  # sessions of their own, however often this runs on one database
    results: Results = {v: [] for v in args.variants}
    async with contextlib.AsyncExitStack() as stack:
        appenders: dict[str, Any] = {}
        samplers: dict[str, Any] = {}
        connections: dict[str, list[RawHttp]] = {}
        if via == "process":
            app = await stack.enter_async_context(in_process(url))
            from app.messages import service

            state = app.state

            async def direct(c: int, sid: str, m: dict[str, Any]) -> bool:
                try:
                    await service.append(
                        state.database, TENANT, sid, [m], None, state.settings, state.append_groups
                    )
                except Exception as exc:  # a refused message counts as a failure
                    progress(f"    append failed: {type(exc).__name__}: {exc}"[:300])
                    return False
                return True

            def own() -> tuple[float, ...]:
                cpu = backend_seconds({}, backend_cpu(database))
                return time.process_time(), cpu, VECTOR_CPU[0]

            for v in args.variants:
                appenders[v], samplers[v] = direct, own
        else:
            for v in args.variants:
                other = v.endswith("0")
                base = await stack.enter_async_context(
                    contextd_server(
                        url,
                        workers=args.workers,
                        module="bench.serve_variant",
                        # No compaction jobs, as in process: their work is not the append's
                        # (a session of dataset messages reaches compact_needed in a round).
                        env_extra={
                            "CONTEXTD_BENCH_SEARCH": letter(v),
                            "CONTEXTD_RUN_COMPACTIONS_IN_PROCESS": "false",
                        },
                        root=Path(args.compare) if other else REPO_ROOT,
                    )
                )
                parts = urlsplit(base)
                host, port = parts.hostname or "127.0.0.1", parts.port or 80
                http = connections[v] = [RawHttp(timeout_s=60) for _ in range(clients)]

                async def over_http(
                    c: int,
                    sid: str,
                    m: Message,
                    host: str = host,
                    port: int = port,
                    http: list[RawHttp] = http,
                ) -> bool:
                    body = json.dumps({"messages": [m]}, ensure_ascii=False).encode()
                    status, _, answer = await http[c].request(
                        "POST", host, port, f"/sessions/{sid}/messages", body
                    )
                    if status not in (200, 201):
                        progress(f"    {status}: {answer[:200]!r}")
                    return status in (200, 201)

                def server(port: int = port) -> tuple[float, ...]:
                    return server_cpu_s(port), backend_seconds({}, backend_cpu(database)), 0.0

                appenders[v], samplers[v] = over_http, server
        for r in range(args.rounds):
            for v in args.variants:
                if via == "process":
                    switch_search(letter(v), timed=True)
                await set_index(admin, v)
                sids = [f"ab-{via}-{clients}-{v}-{r}-{c}-{call}" for c in range(clients)]
                feeds = streams(messages, clients, args.messages)
                rnd = Round(args, clients)
                cleaner = (
                    asyncio.ensure_future(clean_pending(admin, args.clean_s))
                    if letter(v) == "C"
                    else None
                )
                rate, (app_s, pg_s, vector_s) = await rnd.run(
                    appenders[v], sids, feeds, samplers[v]
                )
                if cleaner is not None:
                    cleaner.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await cleaner
                # The next round of this server starts on new connections: uvicorn closes
                # keep-alive connections idle for 5 s, and the other variants' rounds last longer.
                for conn in connections.get(v, ()):
                    conn.close()
                n = max(1, rnd.done)
                results[v].append(
                    (rate, 1000 * app_s / n, 1000 * pg_s / n, rnd.failures, 1000 * vector_s / n)
                )
                progress(
                    f"  {via} {clients} clients round {r + 1} {v}: {rate:.0f} appends/s, "
                    f"app {1000 * app_s / n:.2f} ms, PostgreSQL {1000 * pg_s / n:.2f} ms per append"
                )
        if via == "process":
            switch_search("A")
    return results


def tables(via: str, clients: int, results: Results, args: argparse.Namespace) -> str:
    variants = args.variants
    pairs = [
        (a, b)
        for a, b in (("A", "B"), ("A0", "B0"), ("Az", "Bz"), ("A", "Az"), ("B", "Bz"))
        if a in variants and b in variants
    ]
    app_cpu = "this process" if via == "process" else "server"
    headers = ["round", *(f"{v} appends/s" for v in variants), *(f"{a}/{b}" for a, b in pairs)]
    rows: list[list[object]] = []
    for r in range(args.rounds):
        rate = {v: results[v][r][0] for v in variants}
        rows.append(
            [r + 1, *(round(rate[v]) for v in variants)]
            + [f"{rate[a] / rate[b]:.0%}" for a, b in pairs]
        )
    med = {v: [statistics.median(x[i] for x in results[v]) for i in (0, 1, 2, 4)] for v in variants}
    rows.append(
        ["median", *(round(med[v][0]) for v in variants)]
        + [f"{med[a][0] / med[b][0]:.0%}" for a, b in pairs]
    )
    cpu_rows = [
        [
            v,
            round(med[v][1], 3),
            *([round(med[v][3], 3)] if via == "process" else []),
            round(med[v][2], 3),
            round(med[v][1] + med[v][2], 3),
            sum(x[3] for x in results[v]),
        ]
        for v in variants
    ]
    title = f"\n## {via}, {clients} client{'s' if clients > 1 else ''}\n\n"
    vectors = ["of which making vectors"] if via == "process" else []
    cpu = markdown_table(
        [
            "variant",
            f"{app_cpu} CPU ms/append",
            *vectors,
            "PostgreSQL CPU ms/append",
            "sum",
            "failed",
        ],
        cpu_rows,
    )
    return title + markdown_table(headers, rows) + "\n\nCPU, medians of the rounds:\n\n" + cpu


async def run(url: str, args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    admin = await asyncpg.connect(plain_url(url))
    try:
        for via in args.via:
            for clients in args.clients:
                results = await measure(url, via, clients, args, admin)
                out.append(tables(via, clients, results, args))
                print(out[-1], flush=True)
    finally:
        await admin.execute(CREATE_INDEX)
        await admin.close()
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--database-url", help="PostgreSQL server for the throwaway database")
    p.add_argument("--via", default="process,http")
    p.add_argument("--clients", default="1,20,50")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--round-s", type=float, default=6.0)
    p.add_argument("--warmup-s", type=float, default=1.0)
    p.add_argument("--messages", choices=("dataset", "plain"), default="dataset")
    p.add_argument("--variants", default="A,B")
    p.add_argument("--clean-s", type=float, default=1.0, help="variant C's cleaning period")
    p.add_argument("--workers", type=int, default=1, help="`serve --workers` (http)")
    p.add_argument("--compare", help="another checkout: its A and B too, as A0 and B0 (http)")
    args = p.parse_args()
    args.via = [v for v in args.via.split(",") if v]
    args.clients = [int(c) for c in args.clients.split(",") if c]
    args.variants = [v for v in args.variants.split(",") if v]
    if args.compare:
        args.variants += ["A0", "B0"]
        args.via = [v for v in args.via if v == "http"]
    server = args.database_url or os.environ.get("CONTEXTD_DATABASE_URL")
    print(f"{machine_info()}{dataset_warning()}")
    print(f"load average before: {load_average()}")
    print(
        f"messages: {args.messages}; {args.rounds} rounds per variant, alternated, "
        f"{args.warmup_s:g} s warm-up + {args.round_s:g} s measured each"
    )
    use_uvloop()
    with throwaway_database(server, prefix="contextd_search_append") as db:
        from app.db.engine import run_migrations

        run_migrations(db.url)
        asyncio.run(run(db.url, args))
    print(f"\nload average after: {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
