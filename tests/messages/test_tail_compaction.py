"""Tail deletes and clears against compaction: the watermark bound and real races with a job."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from tests.support.apps import app_client, model_settings
from tests.support.compaction_http import compact, compact_result, long_session, state
from tests.support.fakellm import FakeLLM
from tests.support.messages import log_of, user

pytestmark = pytest.mark.fake_llm(slow_s=0.6)


@pytest.fixture(scope="module")
async def cclient(
    llm: FakeLLM, make_database: Callable[[], str]
) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(model_settings(llm.base_url, 1.0), make_database(), "http://t.test") as c:
        yield c


async def model_called(llm: FakeLLM) -> None:
    """Returns once the job is inside its model call: its history is read, its store is due."""
    for _ in range(200):
        if llm.call_count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the job never called the model")


async def refill(c: httpx.AsyncClient, sid: str) -> None:
    """New messages on the freed seqs, past any watermark the racing job may have planned:
    only the generation tells its range from these."""
    new = [user(f"replacement {i}: the plan changed.") for i in range(60)]
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": new})
    assert r.status_code == 201, r.text


async def test_delete_at_or_below_the_watermark_is_refused(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    await long_session(cclient, sid)
    done = await compact(cclient, sid)
    assert done["status"] == "success", done
    mark = (await state(cclient, sid))["last_compaction_seq"]
    assert mark > 0
    before = await log_of(cclient, sid)
    r = await cclient.delete(f"/sessions/{sid}/messages", params={"from_seq": mark})
    assert r.status_code == 409 and r.json()["code"] == "below_watermark"
    assert r.json()["last_compaction_seq"] == mark
    assert await log_of(cclient, sid) == before
    r = await cclient.delete(f"/sessions/{sid}/messages", params={"from_seq": mark + 1})
    assert r.status_code == 200 and r.json()["last_seq"] == mark


async def test_a_job_racing_a_tail_delete_stores_nothing(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(cclient, sid)
    llm.behaviour = "slow"
    job = (await cclient.post(f"/sessions/{sid}/compact", json={})).json()
    await model_called(llm)
    # Cut deep into the range the job is summarising, and put other messages there.
    r = await cclient.delete(f"/sessions/{sid}/messages", params={"from_seq": 5})
    assert r.status_code == 200 and r.json()["deleted_count"] > 20
    deleted = " ".join(str(m["content"]) for m in r.json()["messages"])
    assert "src/service_3.py" in deleted
    await refill(cclient, sid)
    done = await compact_result(cclient, sid, job["job_id"])
    assert done["status"] == "failed" and "cut or cleared" in done["reason"]
    s = await state(cclient, sid)
    assert s["last_compaction_seq"] == 0 and s["summary"]["text"] is None
    # The next compaction summarises what the log holds now, nothing deleted.
    llm.behaviour = "normal"
    again = await compact(cclient, sid, force=True)
    assert again["status"] in ("success", "noop"), again
    text = (await state(cclient, sid))["summary"]["text"] or ""
    assert "src/service_3.py" not in text


async def test_a_job_racing_a_clear_stores_nothing(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(cclient, sid)
    llm.behaviour = "slow"
    job = (await cclient.post(f"/sessions/{sid}/compact", json={})).json()
    await model_called(llm)
    r = await cclient.post(f"/sessions/{sid}/clear")
    assert r.status_code == 200 and r.json()["deleted_count"] > 40
    await refill(cclient, sid)
    done = await compact_result(cclient, sid, job["job_id"])
    assert done["status"] == "failed" and "cut or cleared" in done["reason"]
    s = await state(cclient, sid)
    assert s["last_compaction_seq"] == 0 and s["summary"]["text"] is None
    assert (await log_of(cclient, sid))[0]["content"] == "replacement 0: the plan changed."


async def test_clear_after_compaction_empties_summary_and_watermark(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    await long_session(cclient, sid)
    assert (await compact(cclient, sid))["status"] == "success"
    assert (await cclient.post(f"/sessions/{sid}/clear")).status_code == 200
    s = await state(cclient, sid)
    assert s["last_compaction_seq"] == 0 and s["summary"]["text"] is None
    assert s["memory_flush_candidates"] == [] and s["compaction_metadata"] is None
    ctx = (await cclient.get(f"/sessions/{sid}/context")).json()
    assert ctx["summary"]["included"] is False and ctx["kept_seqs"] == []
    await long_session(cclient, sid)
    assert (await compact(cclient, sid))["status"] == "success"
