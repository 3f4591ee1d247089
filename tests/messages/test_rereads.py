"""Re-reads (SPEC §3) through HTTP and real PostgreSQL: a tool call repeating an earlier
call whose result the payload no longer held whole is counted once, by the append that
makes it, in `stats.re_reads`, the context call's `usage.re_reads` and `/metrics`."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.support.compaction_http import compact, long_session
from tests.support.messages import call, user
from tests.support.rereads import output, read

BUDGET = 1500


async def grow(client: httpx.AsyncClient, sid: str, steps: range) -> None:
    """An agent loop: one step appended, then a payload asked for, per step."""
    for i in steps:
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": [read(i), output(i)]})
        assert r.status_code == 201, r.text
        ctx = await client.get(f"/sessions/{sid}/context", params={"max_tokens": BUDGET})
        assert ctx.status_code == 200, ctx.text


async def re_reads(client: httpx.AsyncClient, sid: str) -> int:
    r = await client.get(f"/sessions/{sid}")
    assert r.status_code == 200, r.text
    return int(r.json()["stats"]["re_reads"])


def action_of(ctx: dict[str, Any], seq: int) -> str:
    for d in ctx["decisions"]:
        if d["seq"] <= seq <= d.get("through", d["seq"]):
            return str(d["action"])
    raise AssertionError(f"no decision names seq {seq}")


def seq_of_result(log: list[dict[str, Any]], call_id: str) -> int:
    return next(int(m["seq"]) for m in log if m.get("tool_call_id") == call_id)


async def the_log(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    r = await client.get(f"/sessions/{sid}/messages", params={"limit": 1000})
    return list(r.json()["messages"])


async def test_repeat_of_a_result_left_out_or_masked_is_a_re_read(
    client: httpx.AsyncClient, sid: str
) -> None:
    await client.put(f"/sessions/{sid}", json={"model": "gpt-4o"})
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("Audit the repo.")]})
    await grow(client, sid, range(12))
    ctx = (await client.get(f"/sessions/{sid}/context", params={"max_tokens": BUDGET})).json()
    log = await the_log(client, sid)
    first = seq_of_result(log, "r0")
    assert action_of(ctx, first) != "kept"  # the oldest step no longer fits whole
    assert await re_reads(client, sid) == 0
    # The agent reads the same file again: name and arguments repeat (keys reordered
    # and spaced differently are the same arguments).
    again = call("again0", args='{ "path" : "src/mod_0.py" }')
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [again]})
    assert r.status_code == 201, r.text
    assert await re_reads(client, sid) == 1
    ctx = (await client.get(f"/sessions/{sid}/context", params={"max_tokens": BUDGET})).json()
    assert ctx["usage"]["re_reads"] == 1


async def test_repeat_of_a_result_held_whole_is_not_a_re_read(
    client: httpx.AsyncClient, sid: str
) -> None:
    await client.put(f"/sessions/{sid}", json={"model": "gpt-4o"})
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("Audit the repo.")]})
    await grow(client, sid, range(12))
    ctx = (await client.get(f"/sessions/{sid}/context", params={"max_tokens": BUDGET})).json()
    log = await the_log(client, sid)
    newest = seq_of_result(log, "r11")
    assert action_of(ctx, newest) == "kept"
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [read(11, "again11")]})
    assert r.status_code == 201, r.text
    # A repeated call of a result the payload held whole, and a call never made before.
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [read(50)]})
    assert r.status_code == 201, r.text
    assert await re_reads(client, sid) == 0


async def test_without_a_trim_nothing_is_a_re_read(client: httpx.AsyncClient, sid: str) -> None:
    await client.put(f"/sessions/{sid}", json={"model": "gpt-4o"})
    msgs: list[dict[str, Any]] = [user("Look at mod_0 twice.")]
    msgs += [read(0), output(0), call("dup", args='{"path": "src/mod_0.py"}')]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text
    assert await re_reads(client, sid) == 0


async def test_a_replayed_append_counts_once(client: httpx.AsyncClient, sid: str) -> None:
    await client.put(f"/sessions/{sid}", json={"model": "gpt-4o"})
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("Audit the repo.")]})
    await grow(client, sid, range(12))
    again = {**call("again0", args='{"path": "src/mod_0.py"}'), "id": "msg-again-0"}
    for _ in range(3):  # the client retries the same append
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": [again]})
        assert r.status_code in (200, 201), r.text
    assert await re_reads(client, sid) == 1


async def test_folded_into_the_summary_is_a_re_read_under_concurrent_appends(
    cclient: httpx.AsyncClient,
    sid: str,
) -> None:
    await long_session(cclient, sid)
    done = await compact(cclient, sid)
    watermark = int(done["watermark_after"])
    log = await the_log(cclient, sid)
    folded = [
        m["tool_call_id"] for m in log if m.get("tool_call_id") and int(m["seq"]) <= watermark
    ]
    assert len(folded) >= 3, (watermark, folded)
    # Each repeat of a folded call, by concurrent appends of its own (the client's runs
    # of parallel tool calls), is counted exactly once.
    args = {
        m["tool_calls"][0]["id"]: m["tool_calls"][0]["function"]["arguments"]
        for m in log
        if m.get("tool_calls")
    }

    async def repeat(k: int, call_id: str) -> None:
        r = await cclient.post(
            f"/sessions/{sid}/messages",
            json={"messages": [call(f"rep{k}", args=args[call_id])]},
        )
        assert r.status_code == 201, r.text

    await asyncio.gather(*(repeat(k, c) for k, c in enumerate(folded[:3])))
    assert await re_reads(cclient, sid) == 3


async def test_re_reads_are_a_metric(client: httpx.AsyncClient, sid: str) -> None:
    def total(body: str) -> float:
        for line in body.splitlines():
            if line.startswith("contextd_re_reads_total "):
                return float(line.split()[1])
        raise AssertionError("no contextd_re_reads_total")

    before = total((await client.get("/metrics")).text)
    await client.put(f"/sessions/{sid}", json={"model": "gpt-4o"})
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("Audit the repo.")]})
    await grow(client, sid, range(12))
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [read(0, "again0")]})
    assert r.status_code == 201, r.text
    assert total((await client.get("/metrics")).text) == before + 1


async def test_re_reads_of_many_sessions_appended_at_once_count_each(
    client: httpx.AsyncClient, sid: str
) -> None:
    sids = [f"{sid}-{n}" for n in range(4)]
    for s in sids:
        await client.put(f"/sessions/{s}", json={"model": "gpt-4o"})
        await client.post(f"/sessions/{s}/messages", json={"messages": [user("Audit.")]})
        await grow(client, s, range(12))

    async def repeat(s: str) -> None:
        # The oldest read again, and a read of a result the payload holds whole.
        both = [read(0, "again0"), output(0)]
        both[1] = {**both[1], "tool_call_id": "again0"}
        r = await client.post(f"/sessions/{s}/messages", json={"messages": [*both, read(11, "x")]})
        assert r.status_code == 201, r.text

    # Appends of different sessions arriving together are written in groups
    # (app/messages/group_commit.py): each session's count is its own.
    await asyncio.gather(*(repeat(s) for s in sids))
    assert [await re_reads(client, s) for s in sids] == [1, 1, 1, 1]
