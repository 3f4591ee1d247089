"""`contextd worker` processes: a worker killed mid-job is replaced, nothing lost or doubled."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any

import httpx

from tests.api.test_messages import call, result, user
from tests.fakellm import FakeLLM
from tests.process.conftest import Server


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
            server.wait_ready()
        return server

    try:
        await _takeover(start_server)
    finally:
        for s in servers:
            s.stop()


async def _takeover(start_server: Callable[..., Server]) -> None:
    async with FakeLLM(behaviour="slow", slow_s=4.0) as llm:
        env = {
            "CONTEXTD_LLM_BASE_URL": llm.base_url,
            "CONTEXTD_LLM_MODEL": "fake",
            "CONTEXTD_RUN_COMPACTIONS_IN_PROCESS": "false",
            "CONTEXTD_JOB_LEASE_S": "3",
            "COMPACTION_COMPACT_TIMEOUT_S": "10",
        }
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
