"""`contextd worker` processes: a worker killed mid-job is replaced, nothing lost or doubled."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx

from tests.support.apps import model_env
from tests.support.databases import plain_url
from tests.support.fakellm import FakeLLM
from tests.support.messages import call, result, user
from tests.support.processes import Server

# Start-up (imports, tokenizer, migrations) takes 15-30 s on the shared 2-core machine
# under a load average of 10+: the conftest's 30 s is too tight for two processes.
READY_S = 90


async def _job(c: httpx.AsyncClient, sid: str, job_id: str) -> dict[str, Any]:
    jobs = (await c.get(f"/sessions/{sid}/compaction")).json()["jobs"]
    return dict(next(j for j in jobs if j["job_id"] == job_id))


async def _until(
    c: httpx.AsyncClient, sid: str, job_id: str, ok: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    for _ in range(300):
        job = await _job(c, sid, job_id)
        if ok(job):
            return job
        await asyncio.sleep(0.1)
    raise AssertionError(f"job never reached the state: {job}")


async def test_killed_worker_job_is_taken_over(make_database: Callable[[], str]) -> None:
    # A database of its own: the suite's in-process app would claim the job otherwise.
    url = make_database()
    servers: list[Server] = []

    def start_server(env: dict[str, str], command: str = "serve") -> Server:
        server = Server(url, env, command)
        servers.append(server)
        if command == "serve":
            server.wait_ready(timeout=READY_S)
        return server

    try:
        await _takeover(start_server)
    finally:
        for s in servers:
            s.stop()


async def _takeover(start_server: Callable[..., Server]) -> None:
    async with FakeLLM(behaviour="slow", slow_s=4.0) as llm:
        env = model_env(
            llm.base_url,
            CONTEXTD_RUN_COMPACTIONS_IN_PROCESS="false",
            CONTEXTD_JOB_LEASE_S="3",
            COMPACTION_COMPACT_TIMEOUT_S="10",
        )
        server = start_server(env)
        sid = "worker-takeover"
        async with httpx.AsyncClient(base_url=server.base_url, timeout=10) as c:
            await c.put(
                f"/sessions/{sid}",
                json={"compaction": {"min_preserved_turns": 2, "min_free_ratio": 0.0}},
            )
            msgs: list[dict[str, Any]] = [user("Never drop the audit table.")]
            for i in range(10):
                msgs += [user(f"step {i}"), call(f"k{i}"), result(f"k{i}", "x " * 50)]
            await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
            job_id = (await c.post(f"/sessions/{sid}/compact", json={})).json()["job_id"]

            first = start_server(env, command="worker")
            running = await _until(c, sid, job_id, lambda j: j["status"] == "running")
            assert running["attempts"] == 1
            for _ in range(100):  # until the model call is in flight
                if llm.call_count:
                    break
                await asyncio.sleep(0.05)
            first.proc.send_signal(signal.SIGKILL)
            first.proc.wait(5)

            llm.behaviour = "normal"
            start_server(env, command="worker")
            done = await _until(c, sid, job_id, lambda j: j["status"] not in ("pending", "running"))
            assert done["status"] == "success", done
            assert done["attempts"] == 2
            state = (await c.get(f"/sessions/{sid}/compaction")).json()
            assert state["compaction_count"] == 1
            assert state["last_compaction_seq"] == done["watermark_after"] > 0
            log = (await c.get(f"/sessions/{sid}/messages?limit=1000")).json()["messages"]
            assert [m["seq"] for m in log] == list(range(1, len(msgs) + 1))
            events = (await c.get(f"/sessions/{sid}/events", params={"type": "compaction."})).json()
            assert [e["type"] for e in events["events"]] == ["compaction.success"]


async def test_worker_serves_probes_and_a_server_in_auto_mode_leaves_it_the_jobs(
    make_database: Callable[[], str],
) -> None:
    url = make_database()
    worker = Server(url, {}, "worker")
    server: Server | None = None
    try:
        worker.wait_ready(timeout=READY_S)  # polls the worker's /readyz: database and schema
        async with httpx.AsyncClient(base_url=worker.base_url, timeout=5) as w:
            assert (await w.get("/healthz")).json() == {"status": "ok"}
            ready = (await w.get("/readyz")).json()
            assert ready["status"] == "ready" and ready["database"] is True
            metrics = (await w.get("/metrics")).text
            assert 'contextd_compaction_queue_jobs{status="pending"} 0.0' in metrics
        conn = await asyncpg.connect(plain_url(url))
        try:
            live = await conn.fetch("SELECT id FROM compaction_workers")
            assert [r["id"].split(":")[1] for r in live] == [str(worker.proc.pid)]
            # A server with the default ("auto") runs no job while the worker lives.
            server = Server(url, {"CONTEXTD_RUN_COMPACTIONS_IN_PROCESS": "auto"})
            server.wait_ready(timeout=READY_S)
            async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as c:
                claimed_by = []
                for i in range(2):
                    sid = f"auto-{i}"
                    await c.put(f"/sessions/{sid}", json={})
                    done = await c.post(f"/sessions/{sid}/compact", json={"wait": True})
                    assert done.json()["status"] == "noop", done.text
                    job = await conn.fetchrow(
                        "SELECT worker FROM compaction_jobs WHERE id = $1", done.json()["job_id"]
                    )
                    claimed_by.append(job["worker"].split(":")[1])
                assert claimed_by == [str(worker.proc.pid)] * 2
            worker.stop()
            assert worker.proc.returncode == 0, worker.log_text()[-2000:]
            # It deregistered on the way out: the server takes the queue back at once.
            assert await conn.fetch("SELECT id FROM compaction_workers") == []
            async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as c:
                await c.put("/sessions/after", json={})
                done = await c.post("/sessions/after/compact", json={"wait": True})
                job = await conn.fetchrow(
                    "SELECT worker FROM compaction_jobs WHERE id = $1", done.json()["job_id"]
                )
                assert job["worker"].split(":")[1] == str(server.proc.pid)
        finally:
            await conn.close()
    finally:
        worker.stop()
        if server is not None:
            server.stop()


async def test_with_keys_the_workers_metrics_want_one_too(
    make_database: Callable[[], str],
) -> None:
    """SPEC §8: every endpoint but the health probes needs a key, the worker's too."""
    key = "worker-probe-key-0123456789"
    worker = Server(make_database(), {"CONTEXTD_API_KEYS": f"{key}:ops"}, "worker")
    try:
        worker.wait_ready(timeout=READY_S)
        async with httpx.AsyncClient(base_url=worker.base_url, timeout=5) as w:
            assert (await w.get("/healthz")).status_code == 200
            assert (await w.get("/readyz")).status_code == 200
            refused = await w.get("/metrics")
            assert refused.status_code == 401
            assert refused.headers["content-type"] == "application/problem+json"
            keyed = await w.get("/metrics", headers={"Authorization": f"Bearer {key}"})
            assert keyed.status_code == 200 and "contextd_" in keyed.text
            missing = await w.get("/nope", headers={"Authorization": f"Bearer {key}"})
            assert missing.status_code == 404
            assert missing.headers["content-type"] == "application/problem+json"
    finally:
        worker.stop()


def test_worker_refuses_a_port_in_use(make_database: Callable[[], str]) -> None:
    url = make_database()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "app.cli", "worker", "--port", str(port)],
            env={**os.environ, "CONTEXTD_DATABASE_URL": url, "CONTEXTD_LOG_FORMAT": "json"},
            capture_output=True,
            timeout=60,
        )
    assert proc.returncode == 2
    assert b"cannot listen for probes" in proc.stdout + proc.stderr
