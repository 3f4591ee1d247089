"""An automatic compaction's summary is taken up by a payload stream at its next trim, not at
once (app/context/summary_switch.py; SPEC §3 "Payload stability"), over a real PostgreSQL
and the fake model."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.compaction_http import SMALL, compact, settle, state
from tests.support.messages import user
from tests.support.stability import SYSTEM, append, is_prefix, step, tool_groups_whole

TASK = "Port every module to the new API, one at a time."
LIMIT = SMALL["context_limit"]


async def context(
    c: httpx.AsyncClient, sid: str, previous: dict[str, Any] | None
) -> dict[str, Any]:
    # No max_tokens: the session's own budget, the one its automatic compaction keeps to.
    query = {"previous_prefix_id": previous["prefix_id"]} if previous else {}
    r = await c.get(f"/sessions/{sid}/context", params=query)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert not body["over_budget"] and body["usage"]["input_tokens"] <= LIMIT
    assert tool_groups_whole([m for m in body["messages"] if m["role"] != "system"])
    return body


async def run_until_waiting(
    c: httpx.AsyncClient, sid: str
) -> tuple[list[dict[str, Any]], int, int]:
    """An agent run under automatic compaction, a payload before every step, until a
    payload is served under an older summary than the session's; the payloads, the next
    step's number and the session's watermark then."""
    r = await c.put(
        f"/sessions/{sid}",
        json={**SMALL, "auto_compact": True, "system_prompt": SYSTEM},
    )
    assert r.status_code in (200, 201), r.text
    await append(c, sid, [user(TASK)])
    bodies: list[dict[str, Any]] = []
    for i in range(200):
        await append(c, sid, step(i))
        await settle(c, sid)
        body = await context(c, sid, bodies[-1] if bodies else None)
        bodies.append(body)
        watermark = int((await state(c, sid))["last_compaction_seq"])
        through = (body["summary"] or {}).get("through_seq") or 0
        if 0 < through < watermark:
            return bodies, i + 1, watermark
    raise AssertionError("no payload ever waited for a trim to take up a new summary")


async def test_a_new_automatic_summary_waits_for_the_next_trim(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    bodies, i, watermark = await run_until_waiting(cclient, sid)
    waiting, before = bodies[-1], bodies[-2]
    jobs = (await state(cclient, sid))["jobs"]
    assert jobs[0]["trigger"] == "auto" and jobs[0]["watermark_after"] == watermark
    # The compaction changed nothing the previous payload sent: the same messages, byte
    # for byte, and the step appended since; the server says the prefix is stable.
    assert is_prefix(before["messages"], waiting["messages"])
    assert waiting["usage"]["stable_prefix_messages"] == len(before["messages"])
    older = waiting["summary"]["through_seq"]
    assert older == before["summary"]["through_seq"] < watermark
    # Nothing lost meanwhile: what the newer summary covers past the older one's watermark
    # is in the payload as the layout sent it, the newest steps whole, in log order.
    kept = waiting["kept_seqs"]
    assert kept == sorted(kept) and kept[-2:] == [2 * i, 2 * i + 1]
    assert any(older < s <= watermark for s in kept)
    # Until the budget forces a trim: then the newer summary, once.
    prev, switched = waiting, None
    for j in range(i, i + 200):
        await append(cclient, sid, step(j))
        await settle(cclient, sid)
        body = await context(cclient, sid, prev)
        if is_prefix(prev["messages"], body["messages"]):
            prev = body
            continue
        switched = body
        break
    assert switched is not None, "the budget never forced a trim"
    now = int((await state(cclient, sid))["last_compaction_seq"])
    assert switched["summary"]["through_seq"] == now > older
    # It waited only while the older payload still fitted with the next step.
    assert prev["usage"]["input_tokens"] > 0.8 * LIMIT, prev["usage"]


async def test_a_requested_compaction_is_taken_up_at_once(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    bodies, i, watermark = await run_until_waiting(cclient, sid)
    assert bodies[-1]["summary"]["through_seq"] < watermark
    await append(cclient, sid, step(i))
    done = await compact(cclient, sid, force=True)
    assert done["status"] == "success", done
    body = await context(cclient, sid, bodies[-1])
    assert body["summary"]["through_seq"] == int(done["watermark_after"]) > watermark


async def test_a_revert_while_waiting_serves_the_restored_summary(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    bodies, i, watermark = await run_until_waiting(cclient, sid)
    older = bodies[-1]["summary"]["through_seq"]
    job = (await state(cclient, sid))["jobs"][0]
    r = await cclient.post(f"/sessions/{sid}/compaction/{job['job_id']}/revert", json={})
    assert r.status_code == 200, r.text
    assert int((await state(cclient, sid))["last_compaction_seq"]) == older < watermark
    # A revert drops every stream's layout (a new generation): the payload is made again,
    # under the summary the revert restored, with the newest steps whole.
    await append(cclient, sid, step(i))
    body = await context(cclient, sid, bodies[-1])
    assert body["summary"]["through_seq"] == older
    assert body["kept_seqs"][-2:] == [2 * i + 2, 2 * i + 3]
    decided = {d["seq"]: d["action"] for d in body["decisions"]}
    assert decided[2 * i + 3] == "kept"


async def test_strategies_that_do_not_backfill_take_up_the_summary_at_once(
    cclient: httpx.AsyncClient, sid: str
) -> None:
    _, _, watermark = await run_until_waiting(cclient, sid)
    for strategy in ("summary", "sliding_window"):
        r = await cclient.get(f"/sessions/{sid}/context", params={"strategy": strategy})
        assert r.status_code == 200, r.text
        assert r.json()["summary"]["through_seq"] == watermark, strategy
