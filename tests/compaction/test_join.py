"""Appends at compact_needed while the session's compaction job runs: they join it on
their own connection, queue nothing more, and the job's store and chain see them."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy import event

from app.main import create_app
from tests.support.apps import model_settings
from tests.support.compaction_http import SMALL, SMALL_COMPACTION, state
from tests.support.fakellm import FakeLLM
from tests.support.messages import user

# The model answers in 2 s, within the session's compaction timeout: the job is running
# while the test appends, and ends in a stored summary.
PATIENT = {"compaction": {**SMALL_COMPACTION, "compact_timeout_s": 6.0}}


async def test_an_append_joining_a_running_job_takes_one_pooled_connection(
    make_database: Callable[[], str], sid: str
) -> None:
    async with FakeLLM(behaviour="slow", slow_s=2.0) as llm:
        settings = model_settings(llm.base_url, 6.0).model_copy(update={"compaction_workers": 1})
        app = create_app(settings, database_url=make_database())
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
                r = await c.put(f"/sessions/{sid}", json={**SMALL, **PATIENT, "auto_compact": True})
                assert r.status_code == 201, r.text
                status, i = "ok", 0
                while status != "compact_needed":
                    r = await c.post(f"/sessions/{sid}/messages", json=_step(i))
                    status, i = r.json()["budget"]["status"], i + 1
                deadline = time.monotonic() + 10
                while llm.call_count == 0:  # the job is in its model call
                    assert time.monotonic() < deadline, "the job never called the model"
                    await asyncio.sleep(0.02)

                # Checkouts made by this task (the request runs in it) or by the task
                # writing its append's group, not the runner's.
                me = asyncio.current_task()
                checkouts: list[object] = []

                def count(*_: Any) -> None:
                    task = asyncio.current_task()
                    if task is me or task in app.state.append_groups.writers:
                        checkouts.append(task)

                pool = app.state.engine.sync_engine.pool
                event.listen(pool, "checkout", count)
                try:
                    r = await c.post(f"/sessions/{sid}/messages", json=_step(i))
                finally:
                    event.remove(pool, "checkout", count)
                assert r.status_code == 201, r.text
                assert r.json()["budget"]["status"] == "compact_needed"
                last_seq = r.json()["messages"][-1]["seq"]
                assert len(checkouts) == 1  # the append's; it asked the runner nothing
                s = await state(c, sid)
                assert [j["status"] for j in s["jobs"]] == ["running"]
                job_id = s["jobs"][0]["job_id"]

                while True:
                    s = await state(c, sid)
                    if all(j["status"] not in ("pending", "running") for j in s["jobs"]):
                        break
                    assert time.monotonic() < deadline + 20, s
                    await asyncio.sleep(0.1)
                job = next(j for j in s["jobs"] if j["job_id"] == job_id)
                assert job["status"] == "success", job
                # The joined append is in the log the store kept, past the watermark.
                log = (await c.get(f"/sessions/{sid}/messages", params={"limit": 1000})).json()
                assert [m["seq"] for m in log["messages"]][-1] == last_seq
                assert 0 < s["last_compaction_seq"] < last_seq


def _step(i: int) -> dict[str, Any]:
    return {
        "messages": [
            user(f"step {i} in src/a{i}.py"),
            {"role": "assistant", "content": "done " * 30},
        ]
    }
