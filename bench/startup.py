"""How long `contextd serve` takes to start, what it costs, and what its first /mcp call costs.

    python bench/startup.py --database-url postgresql://postgres@127.0.0.1:5432/postgres
    python bench/startup.py --database-url ... --compare ../other-checkout

Each round starts `python -m app.cli serve --workers 1` of each checkout (this one, and
`--compare`'s, alternated) on a migrated throwaway database, and reads:

- *ready*: seconds from the process start to the first `/readyz` 200;
- *CPU at ready*: the process's user + system CPU seconds then (`/proc/<pid>/stat`):
  what every start, and every `--workers` child, pays;
- *RSS*: its resident memory then;
- *first /mcp*: the first MCP `initialize` request's seconds, then a second one's
  (the server is made on the first; see app/api/mcp.py);
- *slowest /healthz*: the slowest of back-to-back `/healthz` requests sent on another
  connection while the first /mcp request is answered: how long the process's
  other requests wait meanwhile.

Medians of `--rounds` rounds; the table is printed on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from app.db.migrate import run_migrations
from bench.common import (
    REPO_ROOT,
    database_options,
    database_server,
    free_port,
    load_average,
    machine_info,
    markdown_table,
    throwaway_database,
)
from tests.support.mcp_wire import HEADERS as MCP_HEADERS
from tests.support.mcp_wire import INITIALIZE

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def slowest(c: httpx.AsyncClient, done: asyncio.Event) -> float:
    worst = 0.0
    while not done.is_set():
        t = time.perf_counter()
        (await c.get("/healthz")).raise_for_status()
        worst = max(worst, time.perf_counter() - t)
    return worst


async def one_start(root: Path, database_url: str) -> dict[str, float]:
    port = free_port()
    env = {**os.environ, "CONTEXTD_DATABASE_URL": database_url, "CONTEXTD_HOST": "127.0.0.1"}
    env.pop("CONTEXTD_API_KEYS", None)
    env.pop("CONTEXTD_LLM_BASE_URL", None)
    env["PYTHONPATH"] = str(root)
    started = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "app.cli", "serve", "--port", str(port), "--workers", "1"),
            env=env,
            cwd=tempfile.gettempdir(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, timeout=30) as c:
                while True:
                    if proc.returncode is not None:
                        log.seek(0)
                        raise RuntimeError(f"serve exited: {log.read()[-2000:]!r}")
                    with contextlib.suppress(httpx.TransportError):
                        if (await c.get("/readyz")).status_code == 200:
                            break
                    await asyncio.sleep(0.02)
                out = {
                    "ready": time.perf_counter() - started,
                    "cpu": cpu_seconds(proc.pid),
                    "rss": rss_mb(proc.pid),
                }
                async with httpx.AsyncClient(base_url=base, timeout=30) as other:
                    await other.get("/healthz")  # its connection open before the /mcp call
                    done = asyncio.Event()
                    probe = asyncio.create_task(slowest(other, done))
                    for name in ("mcp_first", "mcp_next"):
                        t = time.perf_counter()
                        r = await c.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
                        r.raise_for_status()
                        out[name] = time.perf_counter() - t
                        done.set()
                    out["stall"] = await probe
                return out
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 15)


async def run(roots: dict[str, Path], database_url: str, rounds: int) -> list[list[object]]:
    got: dict[str, list[dict[str, float]]] = {name: [] for name in roots}
    for n in range(rounds):
        for name, root in roots.items():
            got[name].append(await one_start(root, database_url))
        print(f"round {n + 1}/{rounds}", file=sys.stderr, flush=True)
    rows: list[list[object]] = []
    for name, runs in got.items():

        def med(key: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[key] for r in runs)

        rows.append(
            [
                name,
                f"{med('ready'):.2f}",
                f"{med('cpu'):.2f}",
                f"{med('rss'):.0f}",
                f"{1000 * med('mcp_first'):.0f}",
                f"{1000 * med('mcp_next'):.1f}",
                f"{1000 * med('stall'):.0f}",
            ]
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    database_options(p)
    p.add_argument("--compare", type=Path, help="another checkout, started alternately")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args(argv)
    roots = {"this checkout": REPO_ROOT}
    if args.compare is not None:
        roots[f"--compare {args.compare.name}"] = args.compare.resolve()
    load = load_average()
    with throwaway_database(database_server(args), prefix="contextd_startup") as db:
        run_migrations(db.url)
        rows = asyncio.run(run(roots, db.url, args.rounds))
    print(f"contextd startup bench: {machine_info()}; {db.server}; {args.rounds} rounds")
    print(f"load average (1/5/15 min) at start {load}, at end {load_average()}")
    print()
    headers = [
        "checkout",
        "ready s",
        "CPU s at ready",
        "RSS MB",
        "first /mcp ms",
        "next /mcp ms",
        "slowest /healthz ms",
    ]
    print(markdown_table(headers, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
