"""Undoing a compaction (SPEC §2 `POST /sessions/{id}/compaction/{job_id}/revert`): real
database, real HTTP model server, over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from app.compaction import repository as repo
from app.core.conversation import summary_message
from app.core.settings import Settings, load_settings
from app.core.tokens import get_counter
from app.db import engine as database
from app.db.database import Database
from app.db.models import CompactionJobRow
from app.db.models.session import DEFAULT_TENANT
from tests.support.apps import app_client, model_settings
from tests.support.compaction_http import (
    SMALL,
    SMALL_COMPACTION,
    agent_run,
    compact,
    long_session,
    settle,
    state,
)
from tests.support.fakellm import FakeLLM
from tests.support.messages import log_of, user

pytestmark = pytest.mark.fake_llm(slow_s=1.5)

# What a revert must put back, field for field (GET /sessions/{id}/compaction).
STATE_FIELDS = (
    "compacted_context",
    "summary",
    "last_compaction_seq",
    "compaction_count",
    "compaction_metadata",
    "memory_flush_candidates",
)


@pytest.fixture(scope="module")
def llm_settings(llm: FakeLLM) -> Settings:
    return model_settings(llm.base_url, 5.0)


@pytest.fixture(scope="module")
def revert_db(make_database: Callable[[], str]) -> str:
    return make_database()


@pytest.fixture(scope="module")
async def rc(llm_settings: Settings, revert_db: str) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(llm_settings, revert_db, "http://revert.test") as c:
        yield c


def kept(s: dict[str, Any]) -> dict[str, Any]:
    return {k: s[k] for k in STATE_FIELDS}


async def revert(c: httpx.AsyncClient, sid: str, job_id: str, **body: Any) -> httpx.Response:
    return await c.post(f"/sessions/{sid}/compaction/{job_id}/revert", json=body or None)


async def reverts_counted(c: httpx.AsyncClient) -> float:
    text = (await c.get("/metrics")).text
    lines = [x for x in text.splitlines() if x.startswith("contextd_compaction_reverts_total ")]
    return float(lines[0].split()[1]) if lines else 0.0


async def more(c: httpx.AsyncClient, sid: str, first: int, steps: int = 6) -> None:
    msgs = [user(f"Next: look at pkg/m{first}.py"), *agent_run(steps, first=first)]
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text


async def test_reverts_walk_back_one_compaction_at_a_time(rc: httpx.AsyncClient, sid: str) -> None:
    await long_session(rc, sid)
    empty = await state(rc, sid)
    budget0 = (await rc.get(f"/sessions/{sid}/budget")).json()
    first = await compact(rc, sid)
    assert first["status"] == "success", first
    await more(rc, sid, 100, steps=12)
    s1 = await state(rc, sid)
    budget1 = (await rc.get(f"/sessions/{sid}/budget")).json()
    log = await log_of(rc, sid)
    assert s1["revertable_job_id"] == first["job_id"]
    second = await compact(rc, sid, force=True)
    assert second["status"] == "success", second
    s2 = await state(rc, sid)
    assert s2["last_compaction_seq"] > s1["last_compaction_seq"] > 0
    assert s2["summary"]["text"] != s1["summary"]["text"]
    assert s2["revertable_job_id"] == second["job_id"]

    # Not the latest: the first one cannot go while the second stands.
    r = await revert(rc, sid, first["job_id"])
    assert r.status_code == 409 and r.json()["code"] == "not_latest_compaction", r.text
    assert r.json()["latest_job_id"] == second["job_id"]
    assert kept(await state(rc, sid)) == kept(s2)

    counted = await reverts_counted(rc)
    r = await revert(rc, sid, second["job_id"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["watermark_restored"] == s1["last_compaction_seq"] == body["last_compaction_seq"]
    assert body["watermark_reverted"] == s2["last_compaction_seq"]
    assert body["summary_restored"] is True and body["compaction_count"] == 1
    after = await state(rc, sid)
    assert kept(after) == kept(s1)  # exactly the previous summary, structure and watermark
    assert (await rc.get(f"/sessions/{sid}/budget")).json() == budget1
    assert await log_of(rc, sid) == log  # the log is untouched
    job2 = next(j for j in after["jobs"] if j["job_id"] == second["job_id"])
    assert job2["reverted_at"] is not None and job2["status"] == "success"
    assert job2["watermark_before"] == s1["last_compaction_seq"]
    assert after["revertable_job_id"] == first["job_id"]

    r = await revert(rc, sid, second["job_id"])
    assert r.status_code == 409 and r.json()["code"] == "already_reverted", r.text

    # The one before it is the latest stored now.
    r = await revert(rc, sid, first["job_id"])
    assert r.status_code == 200, r.text
    assert r.json()["watermark_restored"] == 0 and r.json()["summary_restored"] is False
    none = await state(rc, sid)
    assert kept(none) == kept(empty) | {"memory_flush_candidates": []}
    assert none["summary"]["text"] is None and none["revertable_job_id"] is None
    b = (await rc.get(f"/sessions/{sid}/budget")).json()
    assert b["current_tokens"] > budget0["current_tokens"]  # the messages appended since
    events = (await rc.get(f"/sessions/{sid}/events", params={"type": "compaction."})).json()
    reverted = [e["data"] for e in events["events"] if e["type"] == "compaction.reverted"]
    assert [(e["job_id"], e["watermark_restored"]) for e in reverted] == [
        (second["job_id"], s1["last_compaction_seq"]),
        (first["job_id"], 0),
    ]
    assert await log_of(rc, sid) == log
    assert await reverts_counted(rc) >= counted + 2


def _messages(ctx: httpx.Response) -> list[dict[str, Any]]:
    assert ctx.status_code == 200, ctx.text
    return list(ctx.json()["messages"])


async def test_the_payload_after_a_revert_is_the_one_before_the_compaction(
    rc: httpx.AsyncClient, revert_db: str, sid: str
) -> None:
    await long_session(rc, sid, settings={"system_prompt": "You are a careful engineer."})
    # A budget that trims both before and after the compaction (the summary, with its
    # citations, does not fit beside the preserved tail at 800 and was left out whole).
    streams: list[dict[str, Any]] = [{}, {"max_tokens": 1000}, {"strategy": "sliding_window"}]
    before = [_messages(await rc.get(f"/sessions/{sid}/context", params=p)) for p in streams]
    assert len(before[1]) < len(before[0])  # the small budget trims: that stream has a layout
    done = await compact(rc, sid)
    assert done["status"] == "success"
    compacted = [_messages(await rc.get(f"/sessions/{sid}/context", params=p)) for p in streams]
    trimmed = (await rc.get(f"/sessions/{sid}/context", params=streams[1])).json()
    assert trimmed["dropped_count"] > 0  # that stream's layout is one of the compacted state
    assert compacted[0] != before[0]  # the summary stands in for the range
    r = await revert(rc, sid, done["job_id"])
    assert r.status_code == 200, r.text
    after = [_messages(await rc.get(f"/sessions/{sid}/context", params=p)) for p in streams]
    assert after == before
    # The streams go on from the restored state: a trimmed stream keeps what its trim after
    # the revert kept (its layout is stored again), so the next payload starts with it.
    await rc.post(f"/sessions/{sid}/messages", json={"messages": [user("and one more thing")]})
    for p, previous in zip(streams, after, strict=True):
        nxt = await rc.get(f"/sessions/{sid}/context", params=p)
        assert _messages(nxt)[: len(previous)] == previous, p
        assert nxt.json()["usage"]["stable_prefix_tokens"] > 0
    # And the trimmed stream's layout is stored for the restored state (a layout of the
    # compacted one must not keep a newer-looking key that refuses every later trim).
    engine = database.create_engine(revert_db, pool_size=1)
    try:
        async with engine.begin() as conn:
            rows = await conn.execute(
                text(
                    "SELECT l.watermark, l.generation = s.generation FROM context_layouts l"
                    " JOIN sessions s ON s.tenant_id = l.tenant_id AND s.id = l.session_id"
                    " WHERE l.session_id = :s"
                ),
                {"s": sid},
            )
            assert (0, True) in [tuple(r) for r in rows]
    finally:
        await engine.dispose()


async def test_a_job_that_read_the_state_before_a_revert_cannot_store(
    rc: httpx.AsyncClient, revert_db: str, sid: str
) -> None:
    """The store's fence on its own (the revert also ends such a job): a revert bumps
    the generation, so a summary made from the history read before it never lands."""
    await long_session(rc, sid)
    done = await compact(rc, sid)
    await more(rc, sid, 300, steps=12)
    engine = database.create_engine(revert_db, pool_size=1)
    try:
        key = {"t": DEFAULT_TENANT, "s": sid}
        read = text("SELECT generation, summary_text FROM sessions WHERE tenant_id=:t AND id=:s")
        async with engine.begin() as conn:
            generation = (await conn.execute(read, key)).one()[0]
        r = await revert(rc, sid, done["job_id"])
        assert r.status_code == 200, r.text
        db = Database(database.session_factory(engine))
        job = CompactionJobRow(tenant_id=DEFAULT_TENANT, session_id=sid, id="late", lock_token=None)
        store = {"new_watermark": done["watermark_after"] + 4, "values": {"summary_text": "late"}}
        async with db.transaction() as s:
            assert not await repo.store_summary(s, job, generation=generation, **store)
        async with engine.begin() as conn:
            assert (await conn.execute(read, key)).one() == (generation + 1, None)
        async with db.transaction() as s:  # the same store on the current basis lands
            assert await repo.store_summary(s, job, generation=generation + 1, **store)
            await s.rollback()
    finally:
        await engine.dispose()


async def test_a_revert_is_fenced_by_the_lease_and_keeps_concurrent_appends(
    rc: httpx.AsyncClient, sid: str
) -> None:
    await long_session(rc, sid)
    lease = (await rc.post(f"/sessions/{sid}/lock", json={"owner": "agent-1", "ttl_s": 60})).json()
    token = lease["lock_token"]
    done = await compact(rc, sid, lock_token=token)
    assert done["status"] == "success", done
    compacted = await state(rc, sid)

    r = await revert(rc, sid, done["job_id"])
    assert r.status_code == 409 and r.json()["code"] == "lock_required", r.text
    r = await revert(rc, sid, done["job_id"], lock_token="not-the-token")
    assert r.status_code == 409 and r.json()["code"] == "stale_lock_token", r.text
    assert kept(await state(rc, sid)) == kept(compacted)  # nothing written

    last = (await rc.get(f"/sessions/{sid}")).json()["stats"]["last_seq"]

    async def append(i: int) -> list[int]:
        r = await rc.post(
            f"/sessions/{sid}/messages",
            json={"messages": [user(f"concurrent {i}", id=f"c{i}")], "lock_token": token},
        )
        assert r.status_code == 201, r.text
        return [m["seq"] for m in r.json()["messages"]]

    tasks = [append(i) for i in range(8)]
    results = await asyncio.gather(
        *tasks[:4], revert(rc, sid, done["job_id"], lock_token=token), *tasks[4:]
    )
    rev = results[4]
    assert isinstance(rev, httpx.Response) and rev.status_code == 200, rev
    seqs = sorted(s for res in results if isinstance(res, list) for s in res)
    assert seqs == list(range(last + 1, last + 9))  # every append, once, gap-free
    log = await log_of(rc, sid)
    assert [m["seq"] for m in log] == list(range(1, last + 9))
    by_id = {m["id"]: m["seq"] for m in log}
    assert all(by_id[f"c{i}"] in seqs for i in range(8))
    s = await state(rc, sid)
    assert s["last_compaction_seq"] == 0 and s["summary"]["text"] is None
    # The restored session compacts again on request, over the appended messages too.
    again = await compact(rc, sid, lock_token=token)
    assert again["status"] == "success" and again["watermark_after"] > 0


async def _model_called(llm: FakeLLM, calls: int) -> None:
    """Waits until the model got one more request than `calls` (a job is in its call)."""
    for _ in range(600):
        if llm.call_count > calls:
            break
        await asyncio.sleep(0.05)
    assert llm.call_count == calls + 1


async def test_a_revert_ends_a_running_job_that_would_store_on_the_old_basis(
    rc: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(rc, sid)
    first = await compact(rc, sid)
    assert first["status"] == "success", first
    before_first = (await state(rc, sid))["jobs"][0]
    assert before_first["watermark_before"] == 0
    await more(rc, sid, 200, steps=12)
    llm.behaviour = "slow"  # the next job sits in its model call for a while
    calls = llm.call_count
    r = await rc.post(f"/sessions/{sid}/compact", json={"force": True})
    running = r.json()["job_id"]
    await _model_called(llm, calls)  # it read its history on the compacted state, and waits
    r = await revert(rc, sid, running)
    assert r.status_code == 409 and r.json()["code"] == "not_revertable", r.text
    assert r.json()["job_status"] == "running"
    r = await revert(rc, sid, first["job_id"])
    assert r.status_code == 200, r.text
    assert r.json()["cancelled_jobs"] == [running]
    await asyncio.sleep(2.0)  # past the model's answer: the job tried to store
    await settle(rc, sid)
    s = await state(rc, sid)
    assert s["last_compaction_seq"] == 0 and s["summary"]["text"] is None
    job = next(j for j in s["jobs"] if j["job_id"] == running)
    assert job["status"] == "failed" and "reverted" in job["reason"]


async def test_what_cannot_be_reverted(rc: httpx.AsyncClient, llm: FakeLLM, sid: str) -> None:
    r = await revert(rc, sid, "abc")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    await rc.put(f"/sessions/{sid}", json=SMALL)
    await rc.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    noop = await compact(rc, sid)
    assert noop["status"] == "noop"
    r = await revert(rc, sid, noop["job_id"])
    assert r.status_code == 409 and r.json()["code"] == "not_revertable", r.text
    r = await revert(rc, sid, "0" * 32)
    assert r.status_code == 404 and r.json()["code"] == "not_found", r.text
    # A job whose store was fenced (the tail was cut while it ran) stored nothing.
    await long_session(rc, sid)
    llm.behaviour = "slow"
    calls = llm.call_count
    job = (await rc.post(f"/sessions/{sid}/compact", json={})).json()["job_id"]
    await _model_called(llm, calls)
    last = (await rc.get(f"/sessions/{sid}")).json()["stats"]["last_seq"]
    cut = await rc.delete(f"/sessions/{sid}/messages", params={"from_seq": last})
    assert cut.status_code == 200, cut.text
    await settle(rc, sid)
    failed = next(j for j in (await state(rc, sid))["jobs"] if j["job_id"] == job)
    assert failed["status"] == "failed", failed
    r = await revert(rc, sid, job)
    assert r.status_code == 409 and r.json()["code"] == "not_revertable", r.text


async def test_bad_revert_requests_name_the_field(rc: httpx.AsyncClient, sid: str) -> None:
    await long_session(rc, sid)
    done = await compact(rc, sid)
    url = f"/sessions/{sid}/compaction/{done['job_id']}/revert"
    for body, field in [
        ({"lock_token": 7}, "lock_token"),
        ({"lock_tokn": "x"}, "lock_tokn"),
        ({"lock_token": "x" * 10_000}, "lock_token"),
        ({"lock_token": "a\u0000b"}, "lock_token"),
    ]:
        r = await rc.post(url, json=body)
        assert r.status_code == 422, r.text
        assert any(field in e["loc"] for e in r.json()["errors"]), r.text
    r = await rc.post(f"/sessions/{sid}/compaction/{'x' * 65}/revert")
    assert r.status_code == 422 and "job_id" in r.text, r.text
    r = await rc.post(f"/sessions/{sid}/compaction/a%20b/revert")
    assert r.status_code == 422 and "job_id" in r.text, r.text
    r = await rc.post(f"/sessions/{'!' * 3}/compaction/{done['job_id']}/revert")
    assert r.status_code == 422, r.text
    assert (await state(rc, sid))["last_compaction_seq"] == done["watermark_after"]


async def test_a_clear_leaves_nothing_to_revert_and_a_tail_delete_does_not_matter(
    rc: httpx.AsyncClient, sid: str
) -> None:
    await long_session(rc, sid)
    done = await compact(rc, sid)
    restored = await state(rc, sid)
    last = (await rc.get(f"/sessions/{sid}")).json()["stats"]["last_seq"]
    cut = await rc.delete(f"/sessions/{sid}/messages", params={"from_seq": last - 1})
    assert cut.status_code == 200, cut.text
    assert (await state(rc, sid))["revertable_job_id"] == done["job_id"]
    r = await revert(rc, sid, done["job_id"])
    assert r.status_code == 200, r.text
    assert r.json()["watermark_restored"] == 0
    assert len(await log_of(rc, sid)) == last - 2
    # Compacted again, then cleared: the job stood for a log that is gone.
    again = await compact(rc, sid)
    assert again["status"] == "success" and restored["last_compaction_seq"] > 0
    assert (await rc.post(f"/sessions/{sid}/clear", json={})).status_code == 200
    r = await revert(rc, sid, again["job_id"])
    assert r.status_code == 409 and r.json()["code"] == "not_latest_compaction", r.text
    assert (await state(rc, sid))["revertable_job_id"] is None


async def test_automatic_compaction_does_not_redo_a_reverted_one_until_the_log_grows(
    rc: httpx.AsyncClient, sid: str
) -> None:
    guards = {**SMALL_COMPACTION, "min_free_ratio": 0.05, "regrowth_ratio": 0.25}
    await rc.put(f"/sessions/{sid}", json={**SMALL, "auto_compact": True, "compaction": guards})
    await rc.post(f"/sessions/{sid}/messages", json={"messages": [user("Fix the build.")]})
    i = 0
    while not (await state(rc, sid))["last_compaction_seq"]:
        r = await rc.post(f"/sessions/{sid}/messages", json={"messages": agent_run(1, first=i)})
        assert r.status_code == 201, r.text
        i += 1
        await settle(rc, sid)
        assert i < 200
    auto = (await state(rc, sid))["jobs"][0]
    assert auto["trigger"] == "auto" and auto["status"] == "success"
    r = await revert(rc, sid, auto["job_id"])
    assert r.status_code == 200, r.text
    at_revert = (await rc.get(f"/sessions/{sid}")).json()
    assert at_revert["budget"]["status"] == "compact_needed"
    tokens0 = at_revert["budget"]["current_tokens"]
    usable = at_revert["budget"]["usable_budget"]
    # The rule: at least regrowth_ratio of the effective history, and min_free_ratio of the
    # usable budget, appended since the revert.
    growth = max(int(0.25 * tokens0), int(0.05 * usable))
    grown = 0
    while True:
        r = await rc.post(f"/sessions/{sid}/messages", json={"messages": agent_run(1, first=i)})
        i += 1
        grown = r.json()["budget"]["current_tokens"] - tokens0
        await settle(rc, sid)
        jobs = (await state(rc, sid))["jobs"]
        if jobs[0]["job_id"] != auto["job_id"]:
            break
        assert grown < growth + 400, "the guard held past the regrowth rule"
    assert grown >= growth * 0.9, (grown, growth)  # not redone before the log grew
    assert jobs[0]["trigger"] == "auto" and jobs[0]["status"] == "success"
    assert jobs[0]["watermark_after"] > 0


async def test_another_tenant_gets_a_404(make_database: Callable[[], str]) -> None:
    settings = load_settings(api_keys="key-a:alpha,key-b:beta")
    async with app_client(settings, make_database(), "http://tenants.test") as c:
        a = {"Authorization": "Bearer key-a"}
        b = {"Authorization": "Bearer key-b"}
        sid = "shared-id"
        await c.put(f"/sessions/{sid}", json=SMALL, headers=a)
        await c.post(
            f"/sessions/{sid}/messages",
            json={"messages": [user("go"), *agent_run(40)]},
            headers=a,
        )
        done = (await c.post(f"/sessions/{sid}/compact", json={"wait": True}, headers=a)).json()
        assert done["status"] in ("success", "degraded"), done
        url = f"/sessions/{sid}/compaction/{done['job_id']}/revert"
        r = await c.post(url, headers=b)
        assert r.status_code == 404 and r.json()["code"] == "not_found", r.text
        await c.put(f"/sessions/{sid}", json=SMALL, headers=b)  # the same id under beta
        r = await c.post(url, headers=b)
        assert r.status_code == 404, r.text
        state_a = (await c.get(f"/sessions/{sid}/compaction", headers=a)).json()
        assert state_a["last_compaction_seq"] == done["watermark_after"]
        r = await c.post(url, headers=a)
        assert r.status_code == 200, r.text


async def test_a_revert_after_a_model_switch_counts_the_restored_state_in_the_new_tokenizer(
    rc: httpx.AsyncClient, sid: str
) -> None:
    await long_session(rc, sid, settings={"model": "gpt-4o-mini"})
    first = await compact(rc, sid)
    await more(rc, sid, 400, steps=12)
    second = await compact(rc, sid, force=True)
    assert first["status"] == second["status"] == "success"
    old = await state(rc, sid)
    r = await rc.put(f"/sessions/{sid}", json={"model": "gpt-4"})  # o200k -> cl100k: a recount
    assert r.status_code == 200 and r.json()["tokenizer"] != "o200k_base", r.text
    r = await revert(rc, sid, second["job_id"])
    assert r.status_code == 200, r.text
    s = await state(rc, sid)
    watermark = first["watermark_after"]
    assert s["last_compaction_seq"] == watermark and s["summary"]["text"]
    counter = get_counter("gpt-4")
    assert s["summary"]["tokens"] == counter.count_message(summary_message(s["summary"]["text"]))
    before_switch = get_counter("gpt-4o-mini").count_message(summary_message(s["summary"]["text"]))
    assert s["summary"]["tokens"] != before_switch  # the snapshot's count was not kept
    assert old["summary"]["tokens"] > 0
    history = sum(m["token_count"] for m in await log_of(rc, sid) if m["seq"] > watermark)
    stats = (await rc.get(f"/sessions/{sid}")).json()["stats"]
    assert stats["context_tokens"] == history
