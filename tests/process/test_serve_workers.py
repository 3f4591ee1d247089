"""`contextd serve --workers N`: N processes on one port acting as one server (SPEC §7)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
from prometheus_client import CollectorRegistry, generate_latest, multiprocess

from tests.process.conftest import Server


def children(pid: int) -> set[int]:
    """The server processes `pid` spawned (multiprocessing's helpers left out), from /proc."""
    out = set()
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
        if fields.get("PPid", "").strip() != str(pid) or fields["State"].startswith("Z"):
            continue
        with contextlib.suppress(OSError):
            if b"spawn_main" in (status.parent / "cmdline").read_bytes():
                out.add(int(status.parent.name))
    return out


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in state


def metrics_dirs(tmp: Path) -> list[Path]:
    return list(tmp.glob("contextd-metrics-*"))


def appended_by_process(metrics_dir: Path) -> dict[int, float]:
    """contextd_messages_appended_total of each process, read from its own value file."""
    out: dict[int, float] = {}
    for db in metrics_dir.glob("counter_*.db"):
        pid = int(db.stem.split("_")[1])
        with tempfile.TemporaryDirectory() as one:
            shutil.copy(db, one)
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, one)  # type: ignore[no-untyped-call]
            out[pid] = scraped_total(generate_latest(registry).decode())
    return out


def scraped_total(text: str) -> float:
    match = re.search(r"^contextd_messages_appended_total ([0-9.e+]+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


async def test_two_workers_serve_one_port_and_metrics_sum_both(
    start_server: Callable[..., Server], tmp_path: Path
) -> None:
    # Spawned children import the whole app before they answer: slow on a loaded machine.
    server = start_server(env={"TMPDIR": str(tmp_path)}, args=["--workers", "2"], ready_timeout=120)
    workers = children(server.proc.pid)
    assert len(workers) == 2, workers
    [metrics_dir] = metrics_dirs(tmp_path)

    # Fresh connections, many at once, until the kernel has handed some to each process.
    sent = 0
    per_process: dict[int, float] = {}
    deadline = time.monotonic() + 60
    while len([n for n in per_process.values() if n > 0]) < 2:
        assert time.monotonic() < deadline, per_process

        async def append(i: int) -> None:
            async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as c:
                r = await c.post(
                    "/sessions/workers-1/messages",
                    json={"messages": [{"role": "user", "content": f"m{i}", "id": f"m{i}"}]},
                )
                assert r.status_code == 201, r.text

        await asyncio.gather(*(append(sent + i) for i in range(20)))
        sent += 20
        per_process = appended_by_process(metrics_dir)
    assert sum(per_process.values()) == sent

    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as c:
        log = (await c.get("/sessions/workers-1/messages?limit=1000")).json()["messages"]
        assert [m["seq"] for m in log] == list(range(1, sent + 1))
        # Whichever process answers the scrape, it reports both processes' appends.
        for _ in range(6):
            async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as fresh:
                scraped = (await fresh.get("/metrics")).text
            assert scraped_total(scraped) == sent
            assert 'contextd_request_duration_seconds_count{method="POST"' in scraped

    # SIGTERM to the parent stops every child, then the parent; its metrics folder goes.
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(30) == 0
    assert not [pid for pid in workers if alive(pid)]
    assert not metrics_dirs(tmp_path)
    lines = [json.loads(x) for x in server.log_text().splitlines() if x.startswith("{")]
    assert sum(line.get("event") == "schema at head" for line in lines) == 1


def test_embedded_postgres_starts_once_for_all_workers(tmp_path: Path) -> None:
    env = {"CONTEXTD_DATA_DIR": str(tmp_path / "data"), "TMPDIR": str(tmp_path)}
    server = Server(None, env, args=["--workers", "2"])
    try:
        server.wait_ready(timeout=150)
        r = httpx.post(
            server.base_url + "/sessions/emb/messages",
            json={"messages": [{"role": "user", "content": "hi"}]},
            timeout=30,
        )
        assert r.status_code == 201, r.text
    finally:
        server.stop()
        _stop_embedded(tmp_path / "data" / "pgdata")
    lines = [json.loads(x) for x in server.log_text().splitlines() if x.startswith("{")]
    started = [line for line in lines if "embedded PostgreSQL" in line.get("event", "")]
    assert len(started) == 1, started
    assert sum(line.get("event") == "schema at head" for line in lines) == 1


def _stop_embedded(pgdata: Path) -> None:
    pid_file = pgdata / "postmaster.pid"
    if pid_file.exists():
        pid = int(pid_file.read_text().split()[0])
        os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
        for _ in range(100):
            if not alive(pid):
                return
            time.sleep(0.1)
