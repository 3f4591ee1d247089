"""Compaction end to end: real database, real HTTP model server (tests/support/fakellm.py),
SPEC §5–§6."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import httpx
import pytest

from app.compaction.prompt import PREVIOUS_HEADER
from app.compaction.provenance import strip_cites
from tests.support.compaction_http import (
    ANCHOR,
    CONSTRAINT,
    SMALL,
    SMALL_COMPACTION,
    agent_run,
    compact,
    compact_result,
    long_session,
    settle,
    state,
)
from tests.support.fakellm import FakeLLM
from tests.support.messages import call, log_of, result, user

pytestmark = pytest.mark.fake_llm(slow_s=0.6)


def payload_text(ctx: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in ctx["messages"])


async def test_short_session_is_a_noop_that_writes_nothing(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await cclient.put(f"/sessions/{sid}", json=SMALL)
    await cclient.post(f"/sessions/{sid}/messages", json={"messages": [user("hi"), user("again")]})
    done = await compact(cclient, sid)
    assert done["status"] == "noop"
    assert done["compaction_metadata"]["schema_version"] == 1
    s = await state(cclient, sid)
    assert s["last_compaction_seq"] == 0 and s["summary"]["text"] is None
    assert llm.call_count == 0


async def test_warn_band_only_logs(cclient: httpx.AsyncClient, sid: str) -> None:
    await cclient.put(f"/sessions/{sid}", json={**SMALL, "auto_compact": True})
    status = "ok"
    while status == "ok":
        r = await cclient.post(
            f"/sessions/{sid}/messages", json={"messages": [user("filler " * 40)]}
        )
        status = r.json()["budget"]["status"]
    assert status == "warn"
    await asyncio.sleep(0.2)
    types = [e["type"] for e in (await cclient.get(f"/sessions/{sid}/events")).json()["events"]]
    assert types == ["budget.warn"]
    assert (await state(cclient, sid))["jobs"] == []


async def test_long_session_compacts_and_continues_with_constraints(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(cclient, sid)
    before = (await cclient.get(f"/sessions/{sid}/budget")).json()["current_tokens"]
    done = await compact(cclient, sid)
    assert done["status"] == "success", (done["reason"], done["compaction_metadata"].get("gate"))
    meta = done["compaction_metadata"]
    assert meta["summarized_count"] > 0 and meta["preserved_count"] > 0
    assert meta["anchor_validation_passed"] is True and llm.call_count == 1
    req = llm.calls[0].body
    assert req["temperature"] == 0.1 and req["max_tokens"] <= max(
        256, int(meta["range_tokens"] * 0.3) + 1
    )
    s = await state(cclient, sid)
    watermark = s["last_compaction_seq"]
    assert watermark == done["watermark_after"] > 0
    after = (await cclient.get(f"/sessions/{sid}/budget")).json()["current_tokens"]
    assert after < before
    # The raw log is never deleted.
    assert len(await log_of(cclient, sid)) == 2 + 12 * 4

    for i in range(5):
        await cclient.post(
            f"/sessions/{sid}/messages",
            json={
                "messages": [user(f"follow-up {i}"), {"role": "assistant", "content": f"ok {i}"}]
            },
        )
        ctx = (await cclient.get(f"/sessions/{sid}/context")).json()
        assert ctx["summary"] == {"included": True, "through_seq": watermark}
        assert ctx["messages"][0]["role"] == "system" and "Summary" in ctx["messages"][0]["content"]
        text = payload_text(ctx)
        assert "never deploy on Fridays" in text and ANCHOR in text
        # Below the watermark only the newest compacted steps, in the room left, as
        # recent context (app/context/backfill.py): never a user message again.
        rules = {
            s: d["rule"]
            for d in ctx["decisions"]
            for s in range(d["seq"], (d.get("through") or d["seq"]) + 1)
        }
        below = [seq for seq in ctx["kept_seqs"] if seq <= watermark]
        assert all(rules[seq] in ("recent:compacted", "tool_group") for seq in below), rules
        assert ctx["messages"][-2]["content"] == f"follow-up {i}"


async def test_second_compaction_rolls_the_summary(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(cclient, sid)
    first = await compact(cclient, sid)
    s1 = await state(cclient, sid)
    w1 = s1["last_compaction_seq"]
    await long_session(cclient, sid, turns=0)  # keeps settings; adds the constraint again
    for i in range(8):
        await cclient.post(
            f"/sessions/{sid}/messages",
            json={
                "messages": [
                    user(f"more work {i} on lib/x{i}.py"),
                    {"role": "assistant", "content": "done"},
                ]
            },
        )
    second = await compact(cclient, sid)
    s = await state(cclient, sid)
    assert first["status"] == second["status"] == "success"
    assert s["last_compaction_seq"] > w1 and s["compaction_count"] == 2
    # The second prompt carried the first summary: rolling, not restarting.
    prompt = "\n".join(m["content"] for m in llm.calls[-1].body["messages"])
    first_items = [
        i for items in s1["summary"]["structure"].values() if isinstance(items, list) for i in items
    ]
    assert PREVIOUS_HEADER in prompt and first_items
    # The previous summary travels as JSON: compare in that encoding.
    missing = [i for i in first_items[:5] if json.dumps(i, ensure_ascii=False)[1:40] not in prompt]
    assert not missing, (missing, prompt[:3000])
    assert "never deploy on Fridays" in s["summary"]["text"]


async def test_current_turn_is_never_compacted(cclient: httpx.AsyncClient, sid: str) -> None:
    await long_session(cclient, sid)
    # An agent run in progress: the latest user message and its tool calls.
    await cclient.post(
        f"/sessions/{sid}/messages",
        json={"messages": [user("Final task: fix it"), call("cur"), result("cur", "partial")]},
    )
    current_user = (await cclient.get(f"/sessions/{sid}")).json()["last_seq"] - 2
    await compact(cclient, sid, force=True)
    s = await state(cclient, sid)
    assert 0 < s["last_compaction_seq"] < current_user
    ctx = (await cclient.get(f"/sessions/{sid}/context")).json()
    assert current_user in ctx["kept_seqs"]


@pytest.mark.parametrize(
    "behaviour", ["timeout", "500", "garbage", "refuse_text", "drop_connection", "wrong_types"]
)
async def test_model_failures_degrade_to_an_extractive_summary(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str, behaviour: str
) -> None:
    await long_session(cclient, sid)
    llm.behaviour = behaviour
    done = await compact(cclient, sid)
    assert done["status"] == "degraded", done
    # Why, on the job itself as a failed job says it (the console reads it there).
    assert done["reason"] and done["reason"] == done["compaction_metadata"]["reason"], done
    s = await state(cclient, sid)
    assert s["last_compaction_seq"] > 0  # the watermark still advances
    assert "never deploy on Fridays" in s["summary"]["text"]  # nothing the user said is gone
    assert s["summary"]["text"] and "sorry" not in s["summary"]["text"].lower()


async def test_anchor_retry_success_and_failure(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(cclient, sid)
    llm.script("omit_anchors", "normal")
    done = await compact(cclient, sid)
    assert done["status"] == "success" and llm.call_count == 2
    assert done["compaction_metadata"]["anchor_retry_used"] is True
    retry_prompt = str(llm.calls[1].body["messages"])
    assert ANCHOR in retry_prompt

    other = sid + "-b"
    await long_session(cclient, other)
    llm.calls.clear()
    llm.behaviour = "omit_anchors"
    done = await compact(cclient, other)
    assert done["status"] == "degraded" and llm.call_count == 2
    assert done["compaction_metadata"]["anchor_validation_passed"] is False
    assert ANCHOR in (await state(cclient, other))["summary"]["text"]  # carried verbatim


async def test_repeated_compaction_is_idempotent(cclient: httpx.AsyncClient, sid: str) -> None:
    await long_session(
        cclient, sid, settings={"compaction": {**SMALL_COMPACTION, "regrowth_ratio": 0.5}}
    )
    first = await compact(cclient, sid)
    s1 = await state(cclient, sid)
    second = await compact(cclient, sid)
    s2 = await state(cclient, sid)
    assert first["status"] == "success" and second["status"] == "noop"
    assert second["compaction_metadata"]["reason"] in ("not_regrown", "nothing_compressible")
    assert s2["last_compaction_seq"] == s1["last_compaction_seq"]
    assert s2["summary"] == s1["summary"] and s2["compaction_count"] == 1


async def test_watermark_monotonic_below_current_turn_one_store_each(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    await long_session(cclient, sid, turns=4)
    marks = []
    for round_ in range(6):
        for i in range(4):
            await cclient.post(
                f"/sessions/{sid}/messages",
                json={
                    "messages": [
                        user(f"r{round_} step {i}"),
                        {"role": "assistant", "content": "k " * 30},
                    ]
                },
            )
        done = await compact(cclient, sid)
        s = await state(cclient, sid)
        last_user = max(m["seq"] for m in await log_of(cclient, sid) if m["role"] == "user")
        assert s["last_compaction_seq"] < last_user
        if done["status"] in ("success", "degraded"):
            assert s["last_compaction_seq"] == done["watermark_after"]
        marks.append((s["last_compaction_seq"], s["compaction_count"]))
    seqs = [m[0] for m in marks]
    assert seqs == sorted(seqs) and seqs[-1] > seqs[0]
    events = (await cclient.get(f"/sessions/{sid}/events", params={"type": "compaction."})).json()[
        "events"
    ]
    stored = [e for e in events if e["type"] in ("compaction.success", "compaction.degraded")]
    assert len(stored) == marks[-1][1]


async def test_concurrent_requests_share_one_job(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(cclient, sid)
    llm.behaviour = "slow"
    responses = await asyncio.gather(
        *(cclient.post(f"/sessions/{sid}/compact", json={}) for _ in range(6))
    )
    assert {r.status_code for r in responses} == {202}
    assert len({r.json()["job_id"] for r in responses}) == 1
    done = await compact(cclient, sid)  # joins the same job or finds it finished
    assert llm.call_count == 1 and done["status"] in ("success", "noop")


async def test_append_during_compaction_is_neither_lost_nor_summarised(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(cclient, sid)
    llm.behaviour = "slow"
    job = (await cclient.post(f"/sessions/{sid}/compact", json={})).json()
    await asyncio.sleep(0.2)
    r = await cclient.post(
        f"/sessions/{sid}/messages", json={"messages": [user("late news", id="late")]}
    )
    late_seq = r.json()["messages"][0]["seq"]
    done = await compact(cclient, sid)
    assert done["job_id"] == job["job_id"] or done["status"] == "noop"
    s = await state(cclient, sid)
    assert s["last_compaction_seq"] < late_seq
    assert "late news" not in (s["summary"]["text"] or "")
    ctx = (await cclient.get(f"/sessions/{sid}/context")).json()
    assert late_seq in ctx["kept_seqs"]


async def test_store_is_fenced_by_the_lease(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(cclient, sid)
    a = (await cclient.post(f"/sessions/{sid}/lock", json={"owner": "a", "ttl_s": 30})).json()
    llm.behaviour = "slow"
    r = await cclient.post(f"/sessions/{sid}/compact", json={"lock_token": a["lock_token"]})
    assert r.status_code == 202
    await asyncio.sleep(0.2)
    await cclient.request("DELETE", f"/sessions/{sid}/lock", json={"lock_token": a["lock_token"]})
    await cclient.post(f"/sessions/{sid}/lock", json={"owner": "b", "ttl_s": 30})
    done = await compact_result(cclient, sid, r.json()["job_id"])
    assert done["status"] == "failed" and "fenced" in done["reason"]
    s = await state(cclient, sid)
    assert s["last_compaction_seq"] == 0 and s["summary"]["text"] is None


async def test_store_lands_after_its_holder_released_the_lease(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    # SPEC §5 fences the store only against a lease live at store time
    # (app.sessions.lease_rule.store_admits): a holder that asked for the job and
    # then released its lease does not lose the summary.
    await long_session(cclient, sid)
    a = (await cclient.post(f"/sessions/{sid}/lock", json={"owner": "a", "ttl_s": 30})).json()
    llm.behaviour = "slow"
    r = await cclient.post(f"/sessions/{sid}/compact", json={"lock_token": a["lock_token"]})
    assert r.status_code == 202
    await asyncio.sleep(0.2)
    await cclient.request("DELETE", f"/sessions/{sid}/lock", json={"lock_token": a["lock_token"]})
    done = await compact_result(cclient, sid, r.json()["job_id"])
    assert done["status"] == "success", (done["reason"], done["compaction_metadata"].get("gate"))
    assert (await state(cclient, sid))["last_compaction_seq"] > 0


async def test_compact_without_the_live_token_is_refused(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    await long_session(cclient, sid)
    await cclient.post(f"/sessions/{sid}/lock", json={"owner": "a", "ttl_s": 30})
    r = await cclient.post(f"/sessions/{sid}/compact", json={})
    assert r.status_code == 409 and r.json()["code"] == "lock_required"
    assert (await state(cclient, sid))["jobs"] == []
    # A flag is JSON's true or false: "yes" is refused by name before anything else.
    r = await cclient.post(f"/sessions/{sid}/compact", json={"wait": "yes"})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"].endswith("wait"), r.text


async def test_dry_run_answers_without_writing(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await long_session(cclient, sid)
    r = await cclient.post(f"/sessions/{sid}/compact", json={"dry_run": True})
    assert r.status_code == 200
    body = r.json()
    assert body["dry_run"] is True and body["would"] == "compact"
    assert body["range_tokens"] > 0 and body["new_watermark"] > 0
    s = await state(cclient, sid)
    assert s["jobs"] == [] and s["last_compaction_seq"] == 0 and llm.call_count == 0


async def test_dry_run_of_a_leased_session_needs_no_token(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    """A dry run writes nothing: it answers under another's lease (the console asks it of
    sessions an agent holds) while the real request still wants the token."""
    await long_session(cclient, sid)
    await cclient.post(f"/sessions/{sid}/lock", json={"owner": "agent-1", "ttl_s": 30})
    r = await cclient.post(f"/sessions/{sid}/compact", json={"dry_run": True})
    assert r.status_code == 200 and r.json()["would"] == "compact", r.text
    r = await cclient.post(f"/sessions/{sid}/compact", json={})
    assert r.status_code == 409 and r.json()["code"] == "lock_required", r.text
    s = await state(cclient, sid)
    assert s["jobs"] == [] and s["last_compaction_seq"] == 0 and llm.call_count == 0
    missing = await cclient.post("/sessions/nobody-here/compact", json={"dry_run": True})
    assert missing.status_code == 404, missing.text


async def test_auto_compaction_runs_in_the_background(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await cclient.put(f"/sessions/{sid}", json={**SMALL, "auto_compact": True, "anchors": [ANCHOR]})
    await cclient.post(f"/sessions/{sid}/messages", json={"messages": [user(CONSTRAINT)]})
    status = "ok"
    i = 0
    while status != "compact_needed":
        r = await cclient.post(
            f"/sessions/{sid}/messages",
            json={
                "messages": [
                    user(f"step {i} in src/a{i}.py"),
                    {"role": "assistant", "content": "done " * 30},
                ]
            },
        )
        status = r.json()["budget"]["status"]
        i += 1
    for _ in range(100):
        s = await state(cclient, sid)
        if s["last_compaction_seq"] > 0:
            break
        await asyncio.sleep(0.1)
    assert s["last_compaction_seq"] > 0
    assert s["jobs"][0]["trigger"] == "auto"
    assert (await cclient.get(f"/sessions/{sid}/budget")).json()["status"] != "compact_needed"


async def test_chinese_conversation_gets_a_chinese_summary(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    await cclient.put(f"/sessions/{sid}", json=SMALL)
    msgs = [user("我们必须在周五之前完成报告，不要使用外部数据。")]
    for i in range(10):
        msgs += [
            user(f"第{i}步：请检查文件 data/表{i}.csv 的行数。"),
            {"role": "assistant", "content": f"表{i}有{100 + i}行。"},
        ]
    await cclient.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    done = await compact(cclient, sid)
    assert done["status"] in ("success", "degraded")
    text = (await state(cclient, sid))["summary"]["text"]
    cjk = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    assert cjk > len(text) * 0.2
    assert "必须在周五之前完成报告" in text


async def test_a_model_that_drops_constraints_cannot_lose_them(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    """Found by the compaction bench: constraints were only asked for in the prompt, never checked."""
    await long_session(cclient, sid)
    llm.behaviour = "minimal"  # a valid summary with one vague line: no constraints, no anchors
    done = await compact(cclient, sid)
    meta = done["compaction_metadata"]
    assert llm.call_count == 2  # the retry named what was missing (the anchor)
    assert ANCHOR in str(llm.calls[1].body["messages"][-1]["content"])
    # The user's constraint needs no retry since user_messages: it is carried verbatim.
    assert not meta["patched_constraints"]
    s = await state(cclient, sid)
    assert CONSTRAINT + " [#1]" in s["summary"]["structure"]["user_messages"]  # with its seq
    text = s["summary"]["text"]
    assert "never deploy on Fridays" in text and ANCHOR in text


async def test_a_slow_memory_flush_is_skipped_and_the_compaction_goes_on(
    cclient: httpx.AsyncClient, sid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from app.compaction import candidates

    await long_session(cclient, sid, turns=6)
    first = await compact(cclient, sid, force=True)
    assert first["compaction_metadata"]["flush_skipped"] is False
    kept = (await state(cclient, sid))["memory_flush_candidates"]
    assert kept  # the constraint message is a candidate

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(1.0)
        return []  # had it been waited for: no skip, and the candidates emptied

    monkeypatch.setattr(candidates, "extract_candidates", slow)
    settings = {**SMALL_COMPACTION, "flush_timeout_s": 0.2}
    await cclient.put(f"/sessions/{sid}", json={"compaction": settings})
    await cclient.post(
        f"/sessions/{sid}/messages",
        json={"messages": [m for i in range(4) for m in turn_of(f"more {i}")]},
    )
    second = await compact(cclient, sid, force=True)
    assert second["status"] == "success", second
    assert second["compaction_metadata"]["flush_skipped"] is True
    s = await state(cclient, sid)
    assert s["last_compaction_seq"] > first["watermark_after"]
    assert s["memory_flush_candidates"] == kept  # the previous ones stay


def turn_of(text: str) -> list[dict[str, Any]]:
    return [user(text), {"role": "assistant", "content": f"done: {text}"}]


@pytest.mark.parametrize("fail_open", [True, False])
async def test_after_a_failed_compaction_payloads_follow_fail_open(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str, fail_open: bool
) -> None:
    settings = {"compaction": {**SMALL_COMPACTION, "fail_open": fail_open}}
    await long_session(cclient, sid, turns=40, settings=settings)
    budget = (await cclient.get(f"/sessions/{sid}/budget")).json()
    assert budget["status"] == "compact_needed", budget
    # A compaction whose store is fenced out fails (see the test above).
    a = (await cclient.post(f"/sessions/{sid}/lock", json={"owner": "a", "ttl_s": 30})).json()
    llm.behaviour = "slow"
    r = await cclient.post(f"/sessions/{sid}/compact", json={"lock_token": a["lock_token"]})
    await asyncio.sleep(0.2)
    await cclient.request("DELETE", f"/sessions/{sid}/lock", json={"lock_token": a["lock_token"]})
    b = (await cclient.post(f"/sessions/{sid}/lock", json={"owner": "b", "ttl_s": 30})).json()
    assert (await compact_result(cclient, sid, r.json()["job_id"]))["status"] == "failed"

    ctx = await cclient.get(f"/sessions/{sid}/context")
    if fail_open:
        assert ctx.status_code == 200 and ctx.json()["dropped_count"] > 0  # served by trimming
    else:
        assert ctx.status_code == 409 and ctx.json()["code"] == "compaction_failed", ctx.text
        assert "fenced" in ctx.json()["detail"]
    # A compaction that succeeds ends it either way.
    llm.behaviour = "normal"
    done = await compact(cclient, sid, lock_token=b["lock_token"])
    assert done["status"] == "success", (done["reason"], done["compaction_metadata"].get("gate"))
    ctx = await cclient.get(f"/sessions/{sid}/context")
    assert ctx.status_code == 200 and ctx.json()["summary"]["included"] is True


async def test_single_turn_agent_run_is_compacted_inside_the_turn(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    task = "Fix the failing build; keep the public API of pkg unchanged."
    await cclient.put(f"/sessions/{sid}", json={**SMALL, "anchors": [ANCHOR]})
    r = await cclient.post(
        f"/sessions/{sid}/messages", json={"messages": [user(task), *agent_run(30)]}
    )
    assert r.status_code == 201, r.text
    dry = (await cclient.post(f"/sessions/{sid}/compact", json={"dry_run": True})).json()
    assert dry["would"] == "compact" and dry["turn_anchor_seq"] == 1, dry
    assert dry["tail"]["limited_by"] in ("keep_recent_ratio", "min_preserved_steps")
    before = (await cclient.get(f"/sessions/{sid}/budget")).json()["current_tokens"]
    done = await compact(cclient, sid)
    assert done["status"] == "success", (done["reason"], done["compaction_metadata"].get("gate"))
    watermark = done["watermark_after"]
    assert watermark > 1  # past the turn's opening user message, inside the turn
    after = (await cclient.get(f"/sessions/{sid}/budget")).json()["current_tokens"]
    assert after < before * 0.6, (before, after)
    for extra in range(2):
        ctx = (await cclient.get(f"/sessions/{sid}/context")).json()
        # The turn anchor: below the watermark, still sent verbatim, before the steps.
        assert 1 in ctx["kept_seqs"]
        users = [m for m in ctx["messages"] if m["role"] == "user"]
        assert users[0]["content"] == task
        # Tool groups whole, and the last four steps are there.
        called = {c["id"] for m in ctx["messages"] for c in m.get("tool_calls") or ()}
        answered = {m["tool_call_id"] for m in ctx["messages"] if m["role"] == "tool"}
        assert called == answered
        assert {f"s{i}" for i in range(26 + extra, 30 + extra)} <= called
        assert not any(f"Checking module m{i}." in str(m) for i in range(3) for m in users)
        await cclient.post(f"/sessions/{sid}/messages", json={"messages": agent_run(1, first=30)})
    # A new user message ends the turn: it is the anchor now, the old one is summarised.
    await cclient.post(f"/sessions/{sid}/messages", json={"messages": [user("Now the docs.")]})
    ctx = (await cclient.get(f"/sessions/{sid}/context")).json()
    assert 1 not in ctx["kept_seqs"]
    assert [m["content"] for m in ctx["messages"] if m["role"] == "user"][-1] == "Now the docs."


async def test_dry_run_explains_an_empty_plan(cclient: httpx.AsyncClient, sid: str) -> None:
    await cclient.put(f"/sessions/{sid}", json=SMALL)
    await cclient.post(f"/sessions/{sid}/messages", json={"messages": [user("go"), *agent_run(3)]})
    dry = (await cclient.post(f"/sessions/{sid}/compact", json={"dry_run": True})).json()
    assert dry["would"] == "noop" and dry["reason"] == "nothing_compressible"
    assert "keep_recent_ratio" in dry["detail"] and dry["tail"]["limited_by"] == "history"
    assert dry["tail"]["kept_steps"] == 3 and dry["tail"]["from_seq"] == 1
    # A smaller share: still nothing, the current turn's last steps are kept whatever it is.
    tiny = {**SMALL_COMPACTION, "keep_recent_ratio": 0.01}
    r = await cclient.put(f"/sessions/{sid}", json={**SMALL, "compaction": tiny})
    assert r.status_code in (200, 201), r.text
    dry = (await cclient.post(f"/sessions/{sid}/compact", json={"dry_run": True})).json()
    assert dry["would"] == "noop" and "min_preserved_steps" in dry["detail"], dry


@pytest.mark.parametrize(
    "field,value",
    [("keep_recent_ratio", 1.5), ("min_preserved_steps", 0), ("user_messages_ratio", 0)],
)
async def test_new_planning_settings_are_validated(
    cclient: httpx.AsyncClient, sid: str, field: str, value: float
) -> None:
    r = await cclient.put(f"/sessions/{sid}", json={"compaction": {field: value}})
    assert r.status_code == 422 and field in r.text, r.text
    assert (await cclient.get(f"/sessions/{sid}")).status_code == 404


async def test_auto_compaction_of_a_single_turn_agent_run_without_noops(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    guards = {**SMALL_COMPACTION, "min_free_ratio": 0.05, "regrowth_ratio": 0.25}
    await cclient.put(
        f"/sessions/{sid}", json={**SMALL, "auto_compact": True, "compaction": guards}
    )
    await cclient.post(f"/sessions/{sid}/messages", json={"messages": [user("Fix the build.")]})
    appends = 100
    for i in range(appends):
        r = await cclient.post(
            f"/sessions/{sid}/messages", json={"messages": agent_run(1, first=i)}
        )
        assert r.status_code == 201, r.text
        if i % 10 == 9:
            await settle(cclient, sid)
    events = await settle(cclient, sid)
    kinds = [e["type"] for e in events]
    assert kinds.count("compaction.success") >= 3, kinds
    noops = [
        (e["data"].get("reason"), e["data"].get("detail"), e["data"].get("state"))
        for e in events
        if e["type"] == "compaction.noop"
    ]
    assert len(noops) <= 1, noops  # at most 1 per 100 appends
    s = await state(cclient, sid)
    ctx = (await cclient.get(f"/sessions/{sid}/context")).json()
    assert ctx["messages"][1]["content"] == "Fix the build."  # the turn anchor, after the summary
    assert s["last_compaction_seq"] > 200


async def test_an_automatic_noop_is_not_repeated_for_the_same_state(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    # Four huge steps in the current turn: over the threshold, and all of them preserved.
    await cclient.put(f"/sessions/{sid}", json={**SMALL, "auto_compact": True})
    big = [
        m
        for i in range(4)
        for m in (
            call(f"b{i}", args=f'{{"path": "big{i}.log"}}'),
            result(f"b{i}", f"line {i} of a long log\n" * 120),
        )
    ]
    r = await cclient.post(f"/sessions/{sid}/messages", json={"messages": [user("go"), *big]})
    assert r.json()["budget"]["status"] == "compact_needed"
    # The first append at compact_needed may try once; the same state never again.
    for i in range(20):
        await cclient.post(
            f"/sessions/{sid}/messages",
            json={"messages": [{"role": "assistant", "content": f"still reading ({i})"}]},
        )
        await settle(cclient, sid)
    events = await settle(cclient, sid)
    noops = [e for e in events if e["type"] == "compaction.noop"]
    assert len(noops) <= 1, noops
    if noops:
        assert noops[0]["data"]["reason"] == "nothing_compressible"
        assert noops[0]["data"]["state"]["watermark"] == 0


@pytest.mark.parametrize("behaviour", ["normal", "500"])  # the model, then the extractive path
async def test_planted_instructions_survive_five_compactions_verbatim(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str, behaviour: str
) -> None:
    from tests.support.planted import choose

    llm.behaviour = behaviour
    planted = choose(8)  # two each in English, Chinese, Spanish and German
    await cclient.put(f"/sessions/{sid}", json={**SMALL, "context_limit": 8000})
    msgs: list[dict[str, Any]] = [user("Migrate the service to the new queue.")]
    for k, instruction in enumerate(planted):
        msgs += [*agent_run(3, first=10 * k), instruction.message()]
    await cclient.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    step = 100
    for round_ in range(5):
        await cclient.post(f"/sessions/{sid}/messages", json={"messages": agent_run(8, first=step)})
        step += 8
        done = await compact(cclient, sid)
        assert done["status"] == ("success" if behaviour == "normal" else "degraded"), done
        ctx = (await cclient.get(f"/sessions/{sid}/context")).json()
        lost = [i.key for i in planted if not i.visible_in(ctx["messages"])]
        assert not lost, (round_, lost)
        s = await state(cclient, sid)
        carried = [strip_cites(u) for u in s["summary"]["structure"]["user_messages"]]
        assert all(i.text in carried for i in planted[:4]), carried  # verbatim, not paraphrased
    assert s["compaction_count"] == 5


async def test_open_groups_are_never_compacted_even_racing_their_results(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    await cclient.put(f"/sessions/{sid}", json=SMALL)
    # A turn whose every group is open: nothing to compact.
    opens = [call(f"o{i}", args=f'{{"path": "big{i}.log"}}') for i in range(6)]
    await cclient.post(f"/sessions/{sid}/messages", json={"messages": [user("go"), *opens]})
    done = await compact(cclient, sid, force=True)
    assert done["status"] == "noop" and done["compaction_metadata"]["reason"] == (
        "nothing_compressible"
    )
    # Results arrive, then a long run of steps and one last open group; its result is
    # appended while the (slow) model summarises.
    results = [result(f"o{i}", "ok") for i in range(6)]
    await cclient.post(
        f"/sessions/{sid}/messages",
        json={"messages": [*results, *agent_run(25), call("last", args='{"p": 1}')]},
    )
    last_call = (await cclient.get(f"/sessions/{sid}")).json()["last_seq"]
    llm.behaviour = "slow"
    job = (await cclient.post(f"/sessions/{sid}/compact", json={"force": True})).json()
    await asyncio.sleep(0.2)
    r = await cclient.post(f"/sessions/{sid}/messages", json={"messages": [result("last", "42")]})
    assert r.status_code == 201, r.text
    done = await compact(cclient, sid)
    assert done["job_id"] == job["job_id"] or done["status"] == "noop"
    s = await state(cclient, sid)
    assert 0 < s["last_compaction_seq"] < last_call
    ctx = (await cclient.get(f"/sessions/{sid}/context")).json()
    called = {c["id"] for m in ctx["messages"] for c in m.get("tool_calls") or ()}
    answered = {m["tool_call_id"] for m in ctx["messages"] if m["role"] == "tool"}
    assert called == answered and "last" in called
    assert ctx["messages"][-1]["content"] == "42"


async def test_a_lease_taken_mid_job_fences_a_single_turn_compaction(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    # SPEC §6 with the planning of §5: the job plans inside the one turn, a client
    # takes the lease while the model is busy, and the store must write nothing.
    task = "Port the parser to the new AST; the CLI flags stay as they are."
    await cclient.put(f"/sessions/{sid}", json={**SMALL, "anchors": [ANCHOR]})
    await cclient.post(f"/sessions/{sid}/messages", json={"messages": [user(task), *agent_run(30)]})
    log_before = await log_of(cclient, sid)
    llm.behaviour = "slow"
    r = await cclient.post(f"/sessions/{sid}/compact", json={})
    assert r.status_code == 202, r.text
    await asyncio.sleep(0.2)  # the job has planned and waits on the slow model
    lease = await cclient.post(f"/sessions/{sid}/lock", json={"owner": "b", "ttl_s": 30})
    assert lease.status_code in (200, 201), lease.text
    done = await compact_result(cclient, sid, r.json()["job_id"])
    assert done["status"] == "failed" and "fenced" in done["reason"], done
    s = await state(cclient, sid)
    assert s["last_compaction_seq"] == 0 and s["summary"]["text"] is None
    assert await log_of(cclient, sid) == log_before  # nothing lost, nothing rewritten
    # The lease holder's own compaction goes through, inside the turn, anchor kept.
    llm.behaviour = "normal"
    token = lease.json()["lock_token"]
    r = await cclient.post(f"/sessions/{sid}/compact", json={"lock_token": token})
    done = await compact_result(cclient, sid, r.json()["job_id"])
    assert done["status"] == "success", (done["reason"], done["compaction_metadata"].get("gate"))
    ctx = (await cclient.get(f"/sessions/{sid}/context")).json()
    assert 1 in ctx["kept_seqs"]
    assert next(m["content"] for m in ctx["messages"] if m["role"] == "user") == task


async def test_a_summary_of_a_range_larger_than_the_window_still_fits_the_window(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    # Forty turns of "must" sentences and tool output folded at once into a
    # 2,000-token window: the model's cap followed the range (0.3 of ~5,000 tokens)
    # and the summary (1,878 tokens) outgrew the window, so every payload left it out.
    await cclient.put(f"/sessions/{sid}", json={**SMALL, "context_limit": 2000})
    msgs: list[dict[str, Any]] = []
    for i in range(40):
        tag = f"{sid}/w{i}"
        msgs += [
            user(f"{tag}: the build must stay green."),
            call(f"c{i}", args='{"path": "app.py"}'),
            result(f"c{i}", "x " * 40),
            {"role": "assistant", "content": f"{tag}: done, tests pass."},
        ]
    r = await cclient.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    done = await compact(cclient, sid)
    assert done["status"] == "success", (done["reason"], done["compaction_metadata"].get("gate"))
    ctx = (await cclient.post(f"/sessions/{sid}/context", json={})).json()
    assert ctx["summary"] == {"included": True, "through_seq": done["watermark_after"]}
    usage = ctx["usage"]
    # At most the cap's share of the window plus the user's words under theirs.
    assert usage["breakdown"]["summary"] <= 0.5 * usage["budget"], usage
    assert "must stay green" in payload_text(ctx)


async def test_a_summary_carrying_a_pinned_message_is_sent_whatever_the_budget(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    """A pinned message compacted into the summary lives there verbatim: a budget too
    small for the summary sends it over budget rather than leave the pinned words out
    (SPEC §3: pinned messages are present in every payload)."""
    pinned = "PINNED RULE: never touch prod"
    await cclient.put(f"/sessions/{sid}", json=SMALL)
    msgs: list[dict[str, Any]] = [user(pinned, pinned=True)]
    for i in range(12):
        msgs += [
            user(f"Turn {i}: please inspect src/service_{i}.py and report line counts."),
            call(f"t{i}", args=f'{{"path": "src/service_{i}.py"}}'),
            result(f"t{i}", f"{120 + i} lines in src/service_{i}.py\n" + "code line\n" * 20),
            {"role": "assistant", "content": f"src/service_{i}.py has {120 + i} lines."},
        ]
    r = await cclient.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    job = await compact(cclient, sid, force=True)
    assert job["status"] in ("success", "degraded"), job
    assert (await state(cclient, sid))["last_compaction_seq"] > 1
    for strategy in ("key_messages", "sliding_window", "summary"):
        r = await cclient.get(
            f"/sessions/{sid}/context", params={"max_tokens": 300, "strategy": strategy}
        )
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["summary"]["included"], (strategy, body["warnings"])
        assert pinned in payload_text(body), strategy
        assert body["over_budget"] == (body["usage"]["input_tokens"] > 300)
    # A roomy budget sends it as before, within budget.
    roomy = (await cclient.get(f"/sessions/{sid}/context", params={"max_tokens": 3000})).json()
    assert pinned in payload_text(roomy) and not roomy["over_budget"]
    # Clearing the log forgets what the summary carried.
    assert (await cclient.post(f"/sessions/{sid}/clear")).status_code in (200, 204)
    r = await cclient.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    assert r.status_code == 201, r.text
    small = (await cclient.get(f"/sessions/{sid}/context", params={"max_tokens": 300})).json()
    assert not small["summary"]["included"] and not small["over_budget"]


async def test_each_job_carries_its_gate_and_metrics_count_the_probes(
    cclient: httpx.AsyncClient, llm: FakeLLM, sid: str
) -> None:
    """SPEC §2/§5: a model that drops the oldest half of the range is caught, the job says
    what it caught and lost, and /metrics counts the probes by kind and outcome."""

    def probes(text: str, kind: str, outcome: str) -> float:
        pattern = (
            rf'contextd_compaction_gate_probes_total\{{kind="{kind}",outcome="{outcome}"\}} (\S+)'
        )
        found = re.search(pattern, text)
        return float(found[1]) if found else 0.0

    before = (await cclient.get("/metrics")).text
    await cclient.put(f"/sessions/{sid}", json=SMALL)
    msgs: list[dict[str, Any]] = [
        user(CONSTRAINT),
        {"role": "assistant", "content": "We decided to keep port 8443 for the API."},
    ]
    for i in range(12):
        msgs += [
            user(f"Turn {i}: please inspect src/service_{i}.py and report line counts."),
            call(f"t{i}", args=f'{{"path": "src/service_{i}.py"}}'),
            result(f"t{i}", f"{120 + i} lines\n" + "code line\n" * 20),
            {"role": "assistant", "content": f"It has {120 + i} lines."},
        ]
    r = await cclient.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    llm.behaviour = "drop_oldest"
    done = await compact(cclient, sid, force=True)
    gate = done["gate"]
    assert gate == done["compaction_metadata"]["gate"]
    assert gate["answer_scores"]["decision"] == 0.0 and gate["scores"]["decision"] == 1.0
    assert [c["seqs"] for c in gate["caught"] if c["kind"] == "decision"] == [[2]]
    assert [d for d in gate["dropped"] if not d["over_share"]] == []
    s = await state(cclient, sid)
    assert s["jobs"][0]["gate"] == gate
    assert "8443" in s["summary"]["text"]
    # Every item of the stored structure lists its seqs apart, as the text shows them.
    structure = s["summary"]["structure"]
    for name, seqs in structure["seqs"].items():
        assert len(seqs) == len(structure[name]), name
    assert structure["seqs"]["user_messages"][0] == [[1, 1]]
    after = (await cclient.get("/metrics")).text
    assert probes(after, "decision", "patched") == probes(before, "decision", "patched") + 1
    assert probes(after, "artifact", "kept") > probes(before, "artifact", "kept")
