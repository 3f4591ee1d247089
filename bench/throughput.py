"""Append throughput with many clients, next to PostgreSQL's own ceiling measured the same run.

    python bench/throughput.py [--op append|context] [--workers 1,2] [--clients 50]
                   [--sessions N] [--duration 15] [--pgbench-clients 10,50] [--database-url URL]

In a throwaway database, migrated to head:

1. For each `--workers` count W: `contextd serve --workers W` on 127.0.0.1, and
   C clients (one keep-alive connection each, one session each) appending one
   message per request, back to back, for `--duration` seconds after 3 s of warm-up.
   With `--sessions N` the clients share N sessions instead (appends of one
   session serialise on its row, and group commit cannot batch them).
   Reported: acknowledged appends/s, latency p50/p99/max, non-2xx answers. Then
   the checker reads every session back: each acknowledged id is stored once at
   its acknowledged seq, seqs are gap-free, nothing unacknowledged is stored.
   `--op context`: each client's session gets 300 short messages, then the
   clients ask for its payload (8,000 tokens) back to back instead.
2. pgbench (the one on PATH) on the same database, with a
   script of an append's shape: one transaction that updates the session row
   (seq, counters) and inserts one message, `synchronous_commit` on, prepared
   statements, from each `--pgbench-clients` count. That is the ceiling the
   database itself sets on this machine.

Every row also gives the CPU milliseconds per request (or per pgbench transaction)
of the server's processes, of the database's PostgreSQL backends and of the load
generator (this process, or pgbench): where a core's time goes, whatever else the
machine runs. Their sum bounds the rate two cores can reach.

The load generator (bench/common.py's RawHttp, on uvloop when installed) shares the
cores with the server and PostgreSQL, as the issue's figures do.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx

if __package__ in (None, ""):  # `python bench/throughput.py` from anywhere
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import (
    RawHttp,
    contextd_server,
    ints,
    load_average,
    machine_info,
    markdown_table,
    migrated_database,
    parser,
    percentile,
    plain_url,
    progress,
    read_log,
    use_uvloop,
)

WARMUP_S = 3  # unmeasured seconds before each row
PGBENCH = shutil.which("pgbench") or "pgbench"


def processes() -> Iterator[tuple[int, bytes, int, float]]:
    """(pid, command line, parent pid, user + system CPU seconds) of each process (/proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    for proc in Path("/proc").iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (proc / "cmdline").read_bytes()
            yield int(proc.name), cmd, int(fields[1]), (int(fields[11]) + int(fields[12])) / tick


def server_cpu_s(port: int) -> float:
    """CPU seconds used so far by `contextd serve --port PORT` and its children.

    Per request, this is what the server costs whatever else the machine runs; the
    latencies and rates, on a shared machine, are not.
    """
    needle = f"--port\0{port}\0".encode()
    stats = {pid: (ppid, cpu, needle in cmd + b"\0") for pid, cmd, ppid, cpu in processes()}
    roots = {pid for pid, (_, _, root) in stats.items() if root}
    return sum(cpu for pid, (ppid, cpu, _) in stats.items() if pid in roots or ppid in roots)


class BackendCpu:
    """CPU seconds of the PostgreSQL backends serving one database, while it runs.

    Sampled from /proc every 0.2 s in a thread, per process: a backend already there
    at the start counts from then, one that starts later counts whole (pgbench
    connects its clients after the first sample). The WAL writer and the other
    shared processes are not counted: they serve every database on the server.
    """

    def __init__(self, database: str) -> None:
        self.needle = f" {database} ".encode()
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self, first: bool) -> None:
        for pid, cmd, _, cpu in processes():
            if cmd.startswith(b"postgres: ") and self.needle in cmd:
                self.first.setdefault(pid, cpu if first else 0.0)
                self.last[pid] = cpu

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample(first=False)

    def __enter__(self) -> BackendCpu:
        self._sample(first=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample(first=False)

    @property
    def seconds(self) -> float:
        return sum(self.last[pid] - self.first[pid] for pid in self.last)


def cpu_probe_s() -> float:
    """CPU seconds of a fixed pure-Python loop: how fast a core is right now (about 0.3 s
    on an idle modern x86 core; shared or throttled cores take longer)."""
    start = time.process_time()
    total = 0
    for i in range(5_000_000):
        total += i
    return time.process_time() - start


class Http(RawHttp):
    """One keep-alive connection to one server."""

    def __init__(self, base: str) -> None:
        super().__init__(timeout_s=60)
        url = urlsplit(base)
        self.host, self.port = url.hostname or "127.0.0.1", url.port or 80

    async def send(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        r = await self.request(method, self.host, self.port, path, body)
        return r.status_code, r.content


@dataclass
class Client:
    sid: str
    acked: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    sent: int = 0


async def run_clients(
    base: str,
    workers: int,
    clients: int,
    warmup_s: float,
    duration_s: float,
    op: str = "append",
    on_ready: Callable[[], None] | None = None,
    sessions: int | None = None,
) -> tuple[list[Client], float]:
    # One session per client, or `sessions` shared round-robin (appends only).
    shared = sessions or clients
    group = [Client(f"tp-{op}-w{workers}-s{i % shared}") for i in range(clients)]
    conns = [Http(base) for _ in group]
    if op == "context":  # a history of a few hundred messages to fit into 8k tokens
        history = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i} " * 40}
            for i in range(300)
        ]
        for c, conn in zip(group, conns, strict=True):
            body = json.dumps({"messages": history}).encode()
            status, raw = await conn.send("POST", f"/sessions/{c.sid}/messages", body)
            assert status == 201, raw[:300]
    if on_ready is not None:
        on_ready()
    start = time.perf_counter()
    measure_from = start + warmup_s
    stop_at = measure_from + duration_s

    async def loop(client: Client, conn: Http) -> None:
        while True:
            now = time.perf_counter()
            if now >= stop_at:
                return
            if op == "context":
                client.sent += 1
                status, answer = await conn.send(
                    "GET", f"/sessions/{client.sid}/context?max_tokens=8000"
                )
                done = time.perf_counter()
                if status == 200 and now >= measure_from:
                    client.latencies.append(done - now)
                client.failures += status != 200
                continue
            mid = f"{client.sid}-{id(client)}-{client.sent}"
            client.sent += 1
            body = json.dumps(
                {"messages": [{"role": "user", "content": f"step {client.sent}", "id": mid}]}
            ).encode()
            status, answer = await conn.send("POST", f"/sessions/{client.sid}/messages", body)
            done = time.perf_counter()
            if status in (200, 201):
                client.acked[mid] = json.loads(answer)["messages"][0]["seq"]
                if now >= measure_from:
                    client.latencies.append(done - now)
            else:
                client.failures += 1

    await asyncio.gather(*(loop(c, conn) for c, conn in zip(group, conns, strict=True)))
    for conn in conns:
        conn.close()
    return group, duration_s


async def check(base: str, group: list[Client]) -> tuple[int, int, int]:
    """(lost, duplicated or misplaced, unacknowledged stored) over every session."""
    lost = dup = extra = 0
    acked: dict[str, dict[str, int]] = {}  # clients sharing a session: their acks together
    for client in group:
        acked.setdefault(client.sid, {}).update(client.acked)
    async with httpx.AsyncClient(timeout=60) as http:
        for sid, session_acked in acked.items():
            try:
                stored = [(m["id"], m["seq"]) for m in await read_log(http, base, sid)]
            except httpx.HTTPStatusError as e:  # 404: no append of the session was stored
                if e.response.status_code != 404:
                    raise
                stored = []
            by_id: dict[str, int] = {}
            for mid, seq in stored:
                if mid in by_id:
                    dup += 1
                by_id[mid] = seq
            if [seq for _, seq in stored] != list(range(1, len(stored) + 1)):
                dup += 1  # a gap or a repeated seq
            lost += sum(1 for mid, seq in session_acked.items() if by_id.get(mid) != seq)
            extra += sum(1 for mid in by_id if mid not in session_acked)
    return lost, dup, extra


# One append's shape: bump the session row's seq and counters, insert the message.
PGBENCH_SCRIPT = """\
BEGIN;
WITH s AS (
  UPDATE sessions SET last_seq = last_seq + 1, count_user = count_user + 1,
         context_tokens = context_tokens + 7
   WHERE tenant_id = 'default' AND id = 'pgb-' || :client_id
  RETURNING tenant_id, id, last_seq, context_tokens
)
INSERT INTO messages (tenant_id, session_id, seq, message_id, role, body, token_count,
                      context_tokens_through)
SELECT tenant_id, id, last_seq, 'pgb-' || :client_id || '-' || last_seq, 'user',
       '{"role": "user", "content": "a step of the agent"}'::jsonb, 7, context_tokens
  FROM s;
COMMIT;
"""


def pgbench(
    binary: str, url: str, clients: int, duration_s: float, folder: Path
) -> tuple[float, float, float, float, float]:
    """(transactions/s, latency p50 ms, p99 ms, PostgreSQL and pgbench CPU ms per
    transaction) of PGBENCH_SCRIPT from `clients` connections."""
    script = folder / "append.sql"
    script.write_text(PGBENCH_SCRIPT)
    logs = folder / f"log-{clients}"
    logs.mkdir()
    cmd = [
        binary,
        *("-n", "-M", "prepared", "-f", str(script)),
        *("-c", str(clients), "-j", str(min(clients, 2)), "-T", str(int(duration_s))),
        *("-l", "--log-prefix", str(logs / "pgbench")),
        plain_url(url),
    ]
    own = resource.getrusage(resource.RUSAGE_CHILDREN)
    with BackendCpu(url.rsplit("/", 1)[-1]) as backends:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    client_s = after.ru_utime + after.ru_stime - own.ru_utime - own.ru_stime
    if done.returncode != 0:
        raise RuntimeError(f"pgbench failed: {done.stderr[-2000:]}")
    tps = float(re.search(r"tps = ([0-9.]+)", done.stdout).group(1))  # type: ignore[union-attr]
    lat = [
        int(line.split()[2]) / 1000
        for f in logs.iterdir()
        for line in f.read_text().splitlines()
        if line.strip()
    ]
    done_txns = max(1.0, tps * duration_s)
    return (
        tps,
        percentile(lat, 50),
        percentile(lat, 99),
        1000 * backends.seconds / done_txns,
        1000 * client_s / done_txns,
    )


async def seed_pgbench_sessions(base: str, clients: int) -> None:
    conn = Http(base)
    try:
        for i in range(clients):
            body = json.dumps({"messages": [{"role": "user", "content": "seed"}]}).encode()
            status, raw = await conn.send("POST", f"/sessions/pgb-{i}/messages", body)
            assert status == 201, raw[:300]
    finally:
        conn.close()


async def measure(url: str, workers: int, args: argparse.Namespace) -> tuple[list[object], int]:
    """The row of `serve --workers W`: appends, or payloads with `--op context` (no
    PostgreSQL or generator CPU, no integrity check: nothing is written)."""
    context = args.op == "context"
    async with contextd_server(url, workers=workers) as base:
        progress(f"contextd serve --workers {workers}: {args.clients} clients, {args.op}")
        port = urlsplit(base).port or 80
        before: list[float] = []

        def ready() -> None:  # after the seeding of --op context: the calls measured only
            before[:] = [server_cpu_s(port), time.process_time()]

        with BackendCpu(url.rsplit("/", 1)[-1]) as backends:
            group, seconds = await run_clients(
                base, workers, args.clients, WARMUP_S, args.duration, args.op, ready,
                None if context else args.sessions,
            )  # fmt: skip
        sent = max(1, sum(c.sent for c in group))
        cpu_ms = 1000 * (server_cpu_s(port) - before[0]) / sent
        others = (1000 * backends.seconds / sent, 1000 * (time.process_time() - before[1]) / sent)
        lost, dup, extra = (0, 0, 0) if context else await check(base, group)
        if not context and workers == max(args.workers):
            await seed_pgbench_sessions(base, max(args.pgbench_clients, default=0))
    latencies = [x * 1000 for c in group for x in c.latencies]
    failures = sum(c.failures for c in group)
    label = f"contextd `serve --workers {workers}`"
    if context:
        label += ": GET /context (300 messages, 8k tokens)"
    elif args.sessions:
        label += f", {args.sessions} sessions shared"
    row = [
        label, args.clients, round(len(latencies) / seconds), round(percentile(latencies, 50), 1),
        round(percentile(latencies, 99), 1), round(max(latencies, default=0), 1), round(cpu_ms, 2),
        *(("", "") if context else (round(others[0], 2), round(others[1], 2))), failures,
        "" if context else f"{lost} / {dup} / {extra}",
    ]  # fmt: skip
    return row, failures if context else lost + dup + extra


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--workers", type=ints, default="1,2", help="`serve --workers` counts")
    p.add_argument("--clients", type=int, default=50, help="concurrent appending clients")
    p.add_argument(
        "--sessions",
        type=int,
        default=None,
        help="appends: the clients share this many sessions (default one each)",
    )
    p.add_argument("--duration", type=float, default=15, help="measured seconds per row")
    p.add_argument("--pgbench-clients", type=ints, default="10,50", help="pgbench connections")
    p.add_argument("--op", choices=("append", "context"), default="append", help="what to time")
    args = p.parse_args()
    rows: list[list[object]] = []
    bad = 0
    load_before = load_average()
    probe = cpu_probe_s()
    with migrated_database(args, prefix="contextd_tp") as db:
        use_uvloop()
        for w in args.workers:
            row, errors = asyncio.run(measure(db.url, w, args))
            rows.append(row)
            bad += errors
        with tempfile.TemporaryDirectory(prefix="contextd-pgbench-") as tmp:
            for c in args.pgbench_clients:
                progress(f"pgbench: {c} connections, {args.duration}s")
                tps, p50, p99, pg_ms, bench_ms = pgbench(
                    PGBENCH, db.url, c, args.duration, Path(tmp)
                )
                label = "PostgreSQL alone (pgbench, same transaction)"
                rows.append([label, c, round(tps), round(p50, 1), round(p99, 1), "", "",
                             round(pg_ms, 2), round(bench_ms, 2), "", ""])  # fmt: skip
        where = db.server
    print(f"{machine_info()}; database: {where}")
    print(f"load average before: {load_before}; after: {load_average()}")
    print(f"CPU probe (5M-step Python loop): {probe:.2f} s of CPU (~0.3 s on an idle core)")
    print(f"{args.duration:.0f} s measured per row after {WARMUP_S:.0f} s of warm-up\n")
    headers = (
        "server", "clients", "appends/s", "p50 ms", "p99 ms", "max ms", "server CPU ms/request",
        "PostgreSQL CPU ms/request", "load generator CPU ms/request", "non-2xx",
        "lost / dup / unacked stored",
    )  # fmt: skip
    print(markdown_table(headers, rows))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
