"""Tail reads, tail deletes and clears over HTTP, against the real migrated database."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.support.messages import call, log_of, result, user


async def append(c: httpx.AsyncClient, sid: str, *msgs: dict[str, Any], **body: Any) -> Any:
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": list(msgs), **body})
    return r


async def session(c: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    r = await c.get(f"/sessions/{sid}")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def cut(c: httpx.AsyncClient, sid: str, from_seq: int, **params: Any) -> httpx.Response:
    return await c.delete(f"/sessions/{sid}/messages", params={"from_seq": from_seq, **params})


async def test_desc_reads_the_tail_first_and_pages_backwards(
    client: httpx.AsyncClient, sid: str
) -> None:
    await append(client, sid, *[user(f"m{i}") for i in range(1, 26)])
    r = await client.get(f"/sessions/{sid}/messages", params={"order": "desc", "limit": 3})
    body = r.json()
    assert [m["seq"] for m in body["messages"]] == [25, 24, 23]
    assert [m["content"] for m in body["messages"]] == ["m25", "m24", "m23"]
    assert body["next_before_seq"] == 23 and body["next_after_seq"] is None
    seen: list[int] = []
    before: int | None = None
    while True:
        params: dict[str, Any] = {"order": "desc", "limit": 10}
        if before is not None:
            params["before_seq"] = before
        body = (await client.get(f"/sessions/{sid}/messages", params=params)).json()
        seen += [m["seq"] for m in body["messages"]]
        before = body["next_before_seq"]
        if before is None:
            break
    assert seen == list(range(25, 0, -1))
    # Both bounds apply in either order.
    r = await client.get(
        f"/sessions/{sid}/messages", params={"after_seq": 20, "before_seq": 23, "order": "asc"}
    )
    assert [m["seq"] for m in r.json()["messages"]] == [21, 22]
    assert r.json()["next_after_seq"] is None
    bad = await client.get(f"/sessions/{sid}/messages", params={"order": "sideways"})
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == "order"


async def test_delete_tail_reuses_seqs_and_restores_totals(
    client: httpx.AsyncClient, sid: str
) -> None:
    await append(client, sid, user("keep me"), {"role": "assistant", "content": "ok"})
    before = await session(client, sid)
    await append(client, sid, user("undo this", id="u-undo"), call("c1"), result("c1", "data"))
    r = await cut(client, sid, 3)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["deleted_count"] == 3 and body["last_seq"] == 2
    assert [m["seq"] for m in body["messages"]] == [3, 4, 5]
    assert body["messages"][0]["content"] == "undo this" and body["messages"][0]["id"] == "u-undo"
    after = await session(client, sid)
    assert after["stats"] == before["stats"]
    assert after["budget"] == before["budget"] == body["budget"]
    assert [m["content"] for m in await log_of(client, sid)] == ["keep me", "ok"]

    # The freed seq and the deleted message id are used again, content and all.
    again = await append(client, sid, user("something else", id="u-undo"))
    assert again.status_code == 201
    assert again.json()["messages"][0]["seq"] == 3
    ctx = (await client.get(f"/sessions/{sid}/context")).json()
    texts = [m["content"] for m in ctx["messages"]]
    assert "something else" in texts and "undo this" not in texts and "data" not in texts
    events = (await client.get(f"/sessions/{sid}/events", params={"type": "messages."})).json()
    assert [e["data"] for e in events["events"]] == [
        {"from_seq": 3, "deleted_count": 3, "last_seq": 2}
    ]


async def test_delete_keeps_tool_call_bookkeeping(client: httpx.AsyncClient, sid: str) -> None:
    await append(client, sid, user("go"), call("c1"), result("c1", "first answer"))
    # Deleting only the result leaves the call open: it may be answered again, and
    # a payload keeps the group whole (here: in flight, so the call is sent).
    assert (await cut(client, sid, 3)).json()["deleted_count"] == 1
    again = await append(client, sid, result("c1", "second answer"))
    assert again.status_code == 201, again.text
    twice = await append(client, sid, result("c1", "third"))
    assert twice.status_code == 422 and "already answered" in twice.json()["errors"][0]["msg"]
    # Deleting the call forgets its id: answering it fails, calling it again works.
    assert (await cut(client, sid, 2)).json()["deleted_count"] == 2
    orphan = await append(client, sid, result("c1"))
    assert orphan.status_code == 422
    assert orphan.json()["errors"][0]["loc"] == "messages[0].tool_call_id"
    reuse = await append(client, sid, call("c1"), result("c1", "fresh"))
    assert reuse.status_code == 201, reuse.text
    assert [a["seq"] for a in reuse.json()["messages"]] == [2, 3]
    ctx = (await client.get(f"/sessions/{sid}/context")).json()
    assert ctx["kept_seqs"] == [1, 2, 3]
    assert "fresh" in [m.get("content") for m in ctx["messages"]]


async def test_delete_past_the_end_or_of_a_missing_session(
    client: httpx.AsyncClient, sid: str
) -> None:
    assert (await cut(client, sid, 1)).status_code == 404
    await append(client, sid, user("a"))
    r = await cut(client, sid, 5)
    assert r.status_code == 200 and r.json()["deleted_count"] == 0 and r.json()["last_seq"] == 1
    bad = await cut(client, sid, 0)
    assert bad.status_code == 422 and bad.json()["errors"][0]["loc"] == "from_seq"
    missing = await client.delete(f"/sessions/{sid}/messages")
    assert missing.status_code == 422 and missing.json()["errors"][0]["loc"] == "from_seq"
    assert len(await log_of(client, sid)) == 1


async def test_delete_and_clear_are_fenced_like_appends(
    client: httpx.AsyncClient, sid: str
) -> None:
    await append(client, sid, user("a"), user("b"))
    lease = (await client.post(f"/sessions/{sid}/lock", json={"owner": "me", "ttl_s": 30})).json()
    token = lease["lock_token"]
    r = await cut(client, sid, 2)
    assert r.status_code == 409 and r.json()["code"] == "lock_required"
    r = await cut(client, sid, 2, lock_token="not-the-token")
    assert r.status_code == 409 and r.json()["code"] == "stale_lock_token"
    r = await client.post(f"/sessions/{sid}/clear", json={})
    assert r.status_code == 409 and r.json()["code"] == "lock_required"
    r = await client.request(
        "DELETE",
        f"/sessions/{sid}/messages",
        params={"from_seq": 2, "lock_token": token},
        json={"lock_token": "other"},
    )
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "lock_token"
    assert len(await log_of(client, sid)) == 2  # nothing written by any refusal
    # The token goes in the query or in the body.
    assert (await cut(client, sid, 2, lock_token=token)).json()["deleted_count"] == 1
    r = await client.request(
        "DELETE", f"/sessions/{sid}/messages", params={"from_seq": 1}, json={"lock_token": token}
    )
    assert r.status_code == 200 and r.json()["deleted_count"] == 1


async def test_clear_empties_the_log_and_keeps_settings(
    client: httpx.AsyncClient, sid: str
) -> None:
    settings = {"system_prompt": "Be brief.", "anchors": ["Budget is 5 EUR"], "metadata": {"k": 1}}
    await client.put(f"/sessions/{sid}", json=settings)
    await append(client, sid, user("hi", id="u1"), call("c1"), result("c1"))
    r = await client.post(f"/sessions/{sid}/clear")
    assert r.status_code == 200, r.text
    assert r.json()["deleted_count"] == 3 and r.json()["last_seq"] == 0
    s = await session(client, sid)
    assert s["system_prompt"] == "Be brief." and s["anchors"] == ["Budget is 5 EUR"]
    assert s["metadata"] == {"k": 1}
    assert s["stats"]["message_counts"]["total"] == 0 and s["stats"]["context_tokens"] == 0
    assert s["last_seq"] == 0 and s["last_compaction_seq"] == 0
    assert await log_of(client, sid) == []
    # Ids and call ids start afresh, from seq 1.
    again = await append(client, sid, user("hi", id="u1"), call("c1"))
    assert again.status_code == 201 and [a["seq"] for a in again.json()["messages"]] == [1, 2]
    events = (await client.get(f"/sessions/{sid}/events", params={"type": "session."})).json()
    assert [e["type"] for e in events["events"]] == ["session.cleared"]
    assert (await client.post(f"/sessions/missing-{sid}/clear")).status_code == 404


async def test_concurrent_deletes_and_appends_keep_seqs_gap_free(
    client: httpx.AsyncClient, sid: str
) -> None:
    await append(client, sid, *[user(f"m{i}") for i in range(10)])

    async def writer(i: int) -> None:
        await append(client, sid, user(f"w{i}"))

    async def popper() -> None:
        last = (await session(client, sid))["last_seq"]
        await cut(client, sid, max(last, 1))

    await asyncio.gather(*(writer(i) for i in range(8)), *(popper() for _ in range(4)))
    log = await log_of(client, sid)
    s = await session(client, sid)
    assert [m["seq"] for m in log] == list(range(1, len(log) + 1))
    assert s["last_seq"] == len(log) == s["stats"]["message_counts"]["total"]
    counted = sum(m["token_count"] for m in log)
    assert s["stats"]["context_tokens"] == counted
