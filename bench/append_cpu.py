"""CPU per append in-process: the server's own cost, without HTTP or a load generator.

    python bench/append_cpu.py [--clients 50] [--appends 3000] [--profile OUT.prof]
                               [--database-url URL] [--statements]

`--clients` tasks (one session each) send one-message appends, the request shape of
`bench/throughput.py`, straight into the ASGI app of `create_app` on a throwaway
database (no sockets, no HTTP parsing, no client library), until `--appends` were
acknowledged. Also reported: the CPU of the database's PostgreSQL backends per
append. The app logs as `contextd serve` does (a JSON line per request, to
stderr: send it to /dev/null). Reported: CPU milliseconds of this process per append
(`time.process_time`: the app, SQLAlchemy, asyncpg and the event loop; PostgreSQL's
own work is in its backends, not here) and the wall rate. On a shared machine the
CPU per append is the stable figure; the rate is not.

`--profile` runs the measured part under cProfile and prints the Python function
calls per append (the same count however busy the machine: compare changes with it)
and the top functions by own time and by cumulative time. `--statements`, after the
measured run, prints how the statements of one pooled connection were run: on a
cached generic plan or planned for the call (`pg_prepared_statements`), then logs
every statement of the throwaway database (`log_statement = all`; PostgreSQL's log
must be readable, under /var/log/postgresql) and prints those of one append: its
round trips.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import glob
import json
import os
import pstats
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/append_cpu.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import event

from bench.common import admin, load_average, plain_url, throwaway_database
from bench.throughput import BackendCpu


class Asgi:
    """Calls the app the way uvicorn does, one request at a time per caller."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (b"host", b"bench"),
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
            "client": ("127.0.0.1", 40000),
            "server": ("127.0.0.1", 8080),
        }
        sent = False
        status = 0
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # a client that stays connected
            raise AssertionError("unreachable")

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(scope, receive, send)
        return status, b"".join(chunks)


def step_message(sid: str, n: int) -> dict[str, Any]:
    """`--steps`: an agent's appends, a tool call then its result, the calls cycling over
    five files so that most repeat an earlier one (the re-read check's whole path)."""
    call_id = f"{sid}-c{(n + 1) // 2}"
    if n % 2:
        args = json.dumps({"path": f"src/mod_{(n // 2) % 5}.py"})
        call = {"id": call_id, "type": "function", "function": {"name": "read", "arguments": args}}
        return {"role": "assistant", "content": None, "tool_calls": [call], "id": f"{sid}-{n}"}
    return {"role": "tool", "tool_call_id": call_id, "content": f"out {n}", "id": f"{sid}-{n}"}


async def drive(
    app: Any, clients: int, appends: int, tag: str, steps: bool = False
) -> tuple[float, int]:
    """Appends until `appends` were acknowledged (with `steps`, each call's result too);
    the wall seconds it took and the appends made."""
    asgi = Asgi(app)
    left = [appends]
    made = [0]

    async def one(i: int) -> None:
        sid = f"cpu-{tag}-{i}"
        n = 0
        while left[0] > 0 or (steps and n % 2):  # a step's result follows its call
            left[0] -= 1
            n += 1
            message = (
                step_message(sid, n)
                if steps
                else {"role": "user", "content": f"step {n}", "id": f"{sid}-{n}"}
            )
            body = json.dumps({"messages": [message]}).encode()
            status, raw = await asgi.request("POST", f"/sessions/{sid}/messages", body)
            assert status in (200, 201), raw[:300]
            made[0] += 1

    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(clients)))
    return time.perf_counter() - start, made[0]


async def run(url: str, args: argparse.Namespace) -> None:
    from app.core.settings import load_settings
    from app.main import create_app
    from app.observability.logging import configure_logging

    settings = load_settings()
    # As `contextd serve` logs: one JSON line per request, to stderr.
    configure_logging("json", settings.log_level)
    app = create_app(settings, database_url=url)
    async with app.router.lifespan_context(app):
        await drive(app, args.clients, max(args.clients * 4, 200), "warm", args.steps)
        connects = [0]

        def connected(*_: Any) -> None:
            connects[0] += 1

        event.listen(app.state.engine.sync_engine, "connect", connected)
        profiler = cProfile.Profile() if args.profile else None
        cpu0 = time.process_time()
        with BackendCpu(url.rsplit("/", 1)[-1]) as backends:
            if profiler:
                profiler.enable()
            wall, appends = await drive(app, args.clients, args.appends, "run", args.steps)
            if profiler:
                profiler.disable()
        cpu = time.process_time() - cpu0
        if args.statements:
            await plans_of_one_connection(app)
            await statements_of_one_append(app, url)
    print(f"load average: {load_average()}")
    print(
        f"{appends} appends from {args.clients} tasks"
        + (" (agent steps)" if args.steps else "")
        + f": {1000 * cpu / appends:.3f} ms CPU per append in this process, "
        f"{1000 * backends.seconds / appends:.3f} ms in PostgreSQL's backends, "
        f"{appends / wall:.0f}/s wall, {connects[0]} connections opened"
        + (" (under cProfile)" if profiler else "")
    )
    if profiler:
        profiler.dump_stats(args.profile)
        stats = pstats.Stats(profiler)
        # Deterministic where CPU time is not: Python function calls per append.
        print(f"{stats.total_calls / appends:.0f} Python function calls per append")  # type: ignore[attr-defined]
        stats.sort_stats("tottime").print_stats(35)
        stats.sort_stats("cumulative").print_stats(60)


async def statements_of_one_append(app: Any, url: str) -> None:
    """Print what PostgreSQL ran for one append (the server log, by database name)."""
    name = url.rsplit("/", 1)[-1]
    server = plain_url(url).rsplit("/", 1)[0] + "/postgres"
    logs = sorted(glob.glob("/var/log/postgresql/*.log"), key=os.path.getmtime)
    if not logs:
        print("no PostgreSQL log under /var/log/postgresql: --statements skipped")
        return
    await admin(server, f"ALTER DATABASE \"{name}\" SET log_statement = 'all'")
    # The setting applies to new connections: make the pool open fresh ones.
    await app.state.engine.dispose()
    asgi = Asgi(app)
    await drive(app, 1, 1, "stmt-warm")  # first use of a connection prepares statements
    log = Path(logs[-1])
    offset = (await asyncio.to_thread(log.stat)).st_size
    body = json.dumps({"messages": [{"role": "user", "content": "x", "id": "stmt-1"}]}).encode()
    status, _ = await asgi.request("POST", "/sessions/cpu-stmt-warm-0/messages", body)
    assert status == 201
    await asyncio.sleep(0.2)
    await admin(server, f'ALTER DATABASE "{name}" RESET log_statement')
    await app.state.engine.dispose()
    tail = (await asyncio.to_thread(log.read_bytes))[offset:]
    lines = tail.decode("utf-8", "replace").splitlines()
    mine = [ln for ln in lines if f"@{name} " in ln and ("statement:" in ln or "execute" in ln)]
    print(f"statements of one append ({len(mine)}):")
    for ln in mine:
        print("   ", ln.split(f"@{name} ", 1)[1][:200])


async def plans_of_one_connection(app: Any) -> None:
    """How each prepared statement of one pooled connection was run
    (`pg_prepared_statements`): on its one cached generic plan, or on a plan made for
    that execution (planning every time)."""
    async with app.state.database.driver() as conn:
        rows = await conn.fetch(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE NOT from_sql"
        )
    print("executions on one pooled connection: cached generic plan / planned for the call")
    for r in rows:
        text = " ".join(r["statement"].split())[:90]
        print(f"    {r['generic_plans']:>5} / {r['custom_plans']:<5} {text}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--database-url", default=os.environ.get("CONTEXTD_DATABASE_URL"))
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--appends", type=int, default=3000)
    p.add_argument("--profile", type=Path)
    p.add_argument("--statements", action="store_true")
    p.add_argument(
        "--steps",
        action="store_true",
        help="append agent steps (a tool call, then its result) instead of user messages",
    )
    args = p.parse_args()
    from app.db.engine import run_migrations

    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    with throwaway_database(args.database_url, "contextd_append_cpu") as db:
        run_migrations(db.url)
        asyncio.run(run(db.url, args))


if __name__ == "__main__":
    main()
