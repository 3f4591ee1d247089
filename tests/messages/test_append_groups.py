"""Group commit on the real database: appends of several sessions in one transaction
(app/messages/group_transaction.write_group), and what a group leaves to an append alone;
and the queue that makes the groups (app/messages/group_commit.py), with a writer that
records its calls."""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.core.settings import Settings
from app.main import create_app
from app.messages import service
from app.messages.group_commit import GroupCommit
from app.messages.group_transaction import write_group
from tests.support.groups import pending
from tests.support.leases import claim
from tests.support.messages import call, log_of, result, user


async def _session(client: httpx.AsyncClient, messages: list[dict[str, Any]]) -> str:
    sid = f"g-{uuid.uuid4().hex[:10]}"
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": messages})
    assert r.status_code == 201, r.text
    return sid


async def test_a_group_stores_each_sessions_batch_at_its_own_next_seqs(
    app: FastAPI, client: httpx.AsyncClient, settings: Settings
) -> None:
    # Sessions at different lengths, one with a call still open, answered in the group.
    a = await _session(client, [user("a1")])
    b = await _session(client, [user("b1"), user("b2"), call("call_b")])
    c = await _session(client, [user("c1"), user("c2")])
    items = [
        pending(settings, a, [user("a2"), call("call_a"), result("call_a", "done")]),
        pending(settings, b, [result("call_b", "file text")]),
        pending(settings, c, [user("c3", id="c-3")]),
    ]
    results = await write_group(app.state.database, items)

    assert all(r is not None and r.created for r in results)
    seqs = [[ack["seq"] for ack in r.messages] for r in results if r is not None]
    assert seqs == [[2, 3, 4], [4], [3]]
    for sid, item, r in zip((a, b, c), items, results, strict=True):
        assert r is not None
        log = await log_of(client, sid)
        tail = log[-len(item.batch) :]
        assert [m["id"] for m in tail] == [ack["id"] for ack in r.messages] == item.ids
        assert [m["token_count"] for m in tail] == item.counts
        assert [m["seq"] for m in log] == list(range(1, len(log) + 1))
        s = (await client.get(f"/sessions/{sid}")).json()
        assert s["last_seq"] == len(log)
        assert s["stats"]["context_tokens"] == sum(m["token_count"] for m in log)
        assert r.budget.current_tokens == s["budget"]["current_tokens"]
    # call_b is answered now: a second answer is refused, as for any append.
    r2 = await client.post(f"/sessions/{b}/messages", json={"messages": [result("call_b")]})
    assert r2.status_code == 422 and "already answered" in r2.text


async def test_appends_a_group_must_not_take_are_left_out_and_the_rest_stored(
    app: FastAPI, client: httpx.AsyncClient, settings: Settings
) -> None:
    leased = await _session(client, [user("mine")])
    await claim(client, leased)
    replayed = await _session(client, [user("first", id="dup-1")])
    unanswered = await _session(client, [user("x")])
    fine = [await _session(client, [user("y")]) for _ in range(3)]
    new = f"g-{uuid.uuid4().hex[:10]}"  # no such session yet: its first append creates it
    items = [
        pending(settings, fine[0], [user("ok 0")]),
        pending(settings, leased, [user("no token")]),
        pending(settings, fine[1], [user("ok 1")]),
        pending(settings, replayed, [user("first", id="dup-1")]),
        pending(settings, unanswered, [result("call_nobody_made")]),
        pending(settings, new, [user("hello")]),
        pending(settings, fine[2], [user("ok 2")]),
    ]
    results = await write_group(app.state.database, items)

    taken = [r is not None for r in results]
    assert taken == [True, False, True, False, False, False, True]
    for sid, r in zip(fine, (results[0], results[2], results[6]), strict=True):
        assert r is not None and [ack["seq"] for ack in r.messages] == [2]
        assert [m["seq"] for m in await log_of(client, sid)] == [1, 2]
    # Nothing of what was left out is stored: the group rolled back and wrote the rest.
    assert [m["content"] for m in await log_of(client, leased)] == ["mine"]
    assert [m["seq"] for m in await log_of(client, replayed)] == [1]
    assert [m["seq"] for m in await log_of(client, unanswered)] == [1]
    assert (await client.get(f"/sessions/{new}")).status_code == 404

    # Alone, each gets the answer an append always got.
    resp = await client.post(f"/sessions/{leased}/messages", json={"messages": [user("no token")]})
    assert resp.status_code == 409 and resp.json()["code"] == "lock_required"
    resp = await client.post(
        f"/sessions/{replayed}/messages", json={"messages": [user("first", id="dup-1")]}
    )
    assert resp.status_code == 200 and resp.json()["messages"][0]["seq"] == 1
    resp = await client.post(
        f"/sessions/{unanswered}/messages", json={"messages": [result("call_nobody_made")]}
    )
    assert resp.status_code == 422 and resp.json()["errors"][0]["loc"] == "messages[0].tool_call_id"


async def test_concurrent_appends_over_http_are_grouped_and_each_stored_once(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    sids = [await _session(client, [user("start")]) for _ in range(24)]
    groups = app.state.append_groups
    before = (groups.groups, groups.items)
    scraped = await _group_metrics(client)

    async def agent(sid: str) -> list[tuple[str, int]]:
        acked = []
        for i in range(6):
            batch = [call(f"c-{sid}-{i}"), result(f"c-{sid}-{i}", f"out {i}")]
            r = await client.post(f"/sessions/{sid}/messages", json={"messages": batch})
            assert r.status_code == 201, r.text
            acked += [(a["id"], a["seq"]) for a in r.json()["messages"]]
        return acked

    acks = await asyncio.gather(*(agent(sid) for sid in sids))
    for sid, acked in zip(sids, acks, strict=True):
        log = await log_of(client, sid)
        assert [m["seq"] for m in log] == list(range(1, 14))
        assert [(m["id"], m["seq"]) for m in log[1:]] == acked
    written_groups, written = groups.groups - before[0], groups.items - before[1]
    assert written == 24 * 6  # every one of these appends went through a group
    assert written_groups < written  # and some groups held several sessions' appends
    count, total = await _group_metrics(client)
    assert (count - scraped[0], total - scraped[1]) == (written_groups, written)


async def _group_metrics(client: httpx.AsyncClient) -> tuple[float, float]:
    """contextd_append_group_size's count and sum, as a scrape reads them."""
    text = (await client.get("/metrics")).text
    values = dict(
        line.split(" ", 1) for line in text.splitlines() if line.startswith("contextd_append_group")
    )
    return (
        float(values["contextd_append_group_size_count"]),
        float(values["contextd_append_group_size_sum"]),
    )


async def test_a_group_size_of_one_writes_each_append_alone(
    settings: Settings, database_url: str
) -> None:
    app = create_app(settings.model_copy(update={"append_group_size": 1}), database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            sids = [await _session(c, [user("start")]) for _ in range(12)]
            groups = app.state.append_groups
            before = (groups.groups, groups.items)

            async def step(sid: str) -> int:
                r = await c.post(f"/sessions/{sid}/messages", json={"messages": [user("next")]})
                assert r.status_code == 201, r.text
                return int(r.json()["messages"][0]["seq"])

            assert await asyncio.gather(*(step(sid) for sid in sids)) == [2] * 12
            assert (groups.groups - before[0], groups.items - before[1]) == (12, 12)


async def test_one_session_id_under_two_tenants_is_two_sessions_in_a_group(
    app: FastAPI, settings: Settings
) -> None:
    sid = f"g-{uuid.uuid4().hex[:10]}"
    database = app.state.database
    await service.append(database, "tenant-a", sid, [user("a1")], None, settings)
    for text in ("b1", "b2", "b3"):
        await service.append(database, "tenant-b", sid, [user(text)], None, settings)
    items = [
        pending(settings, sid, [user("a2"), call("shared")], tenant="tenant-a"),
        pending(settings, sid, [user("b4"), call("shared")], tenant="tenant-b"),
    ]
    results = await write_group(database, items)

    assert [[a["seq"] for a in r.messages] if r else None for r in results] == [[2, 3], [4, 5]]
    async with database.driver() as conn:
        rows = await conn.fetch(
            "SELECT tenant_id, seq, body->>'content' AS text FROM messages"
            " WHERE session_id = $1 ORDER BY tenant_id, seq",
            sid,
        )
        calls = await conn.fetch(
            "SELECT tenant_id, seq FROM tool_calls WHERE session_id = $1 ORDER BY tenant_id", sid
        )
    assert [(r["tenant_id"], r["seq"], r["text"]) for r in rows] == [
        ("tenant-a", 1, "a1"),
        ("tenant-a", 2, "a2"),
        ("tenant-a", 3, None),
        ("tenant-b", 1, "b1"),
        ("tenant-b", 2, "b2"),
        ("tenant-b", 3, "b3"),
        ("tenant-b", 4, "b4"),
        ("tenant-b", 5, None),
    ]
    assert [(c["tenant_id"], c["seq"]) for c in calls] == [("tenant-a", 3), ("tenant-b", 5)]


# --- the queue, with a writer that records its calls ------------------------------------------


class Recorder:
    """A writer that takes a while, remembers each group, and can be told to fail."""

    def __init__(self, delay: float = 0.01) -> None:
        self.delay = delay
        self.groups: list[list[tuple[str, int]]] = []
        self.writing: set[str] = set()
        self.overlaps: list[str] = []
        self.concurrent = 0
        self.most_concurrent = 0
        self.fail_with: Exception | None = None
        self.fail_group: int | None = None  # the 1-based group that fails with it
        self.refuse: set[tuple[str, int]] = set()

    async def write(self, items: list[tuple[str, int]]) -> list[str | None]:
        self.groups.append(items)
        self.concurrent += 1
        self.most_concurrent = max(self.most_concurrent, self.concurrent)
        for key, _ in items:
            if key in self.writing:
                self.overlaps.append(key)
            self.writing.add(key)
        try:
            await asyncio.sleep(self.delay)
            if self.fail_with is not None and self.fail_group in (None, len(self.groups)):
                raise self.fail_with
            return [None if item in self.refuse else f"{item[0]}#{item[1]}" for item in items]
        finally:
            self.concurrent -= 1
            for key, _ in items:
                self.writing.discard(key)


async def test_a_lone_item_is_written_at_once_in_a_group_of_its_own() -> None:
    rec = Recorder()
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write, lanes=2, max_size=8)
    assert await groups.submit("a", ("a", 1)) == "a#1"
    assert rec.groups == [[("a", 1)]]


async def test_items_that_arrive_together_share_groups_one_per_key_in_arrival_order() -> None:
    rec = Recorder()
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write, lanes=2, max_size=8)
    # 20 keys, 3 items each, all submitted before any group is written.
    items = [(f"k{k}", n) for k in range(20) for n in range(3)]
    results = await asyncio.gather(*(groups.submit(key, (key, n)) for key, n in items))

    assert results == [f"{key}#{n}" for key, n in items]
    assert sum(len(g) for g in rec.groups) == len(items)
    assert all(len(g) <= 8 for g in rec.groups)
    assert len(rec.groups) < len(items) / 4  # they were grouped, not written one by one
    for g in rec.groups:
        keys = [key for key, _ in g]
        assert len(keys) == len(set(keys)), g  # never two items of a key in one group
    assert rec.overlaps == []  # nor one key in two groups being written at once
    assert rec.most_concurrent <= 2
    for k in range(20):  # each key's items written in the order they came
        order = [n for g in rec.groups for key, n in g if key == f"k{k}"]
        assert order == [0, 1, 2]
    assert (groups.groups, groups.items) == (len(rec.groups), len(items))


async def test_an_item_the_writer_did_not_take_comes_back_as_none() -> None:
    rec = Recorder()
    rec.refuse = {("b", 0)}
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write)
    got = await asyncio.gather(*(groups.submit(k, (k, 0)) for k in "abc"))
    assert got == ["a#0", None, "c#0"]


async def test_a_writer_error_reaches_every_caller_of_its_group_and_no_other() -> None:
    rec = Recorder(delay=0.05)
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write, lanes=1, max_size=4)
    rec.fail_with = ConnectionResetError("the commit's connection dropped")
    rec.fail_group = 2
    first = [asyncio.ensure_future(groups.submit(k, (k, 0))) for k in "abcd"]
    await asyncio.sleep(0.01)  # the first group is being written
    second = [asyncio.ensure_future(groups.submit(k, (k, 1))) for k in "abcd"]
    assert await asyncio.gather(*first) == ["a#0", "b#0", "c#0", "d#0"]
    outcomes = await asyncio.gather(*second, return_exceptions=True)
    assert all(isinstance(o, ConnectionResetError) for o in outcomes), outcomes
    # The queue goes on after a failed group.
    rec.fail_with = None
    assert await groups.submit("a", ("a", 2)) == "a#2"


async def test_close_waits_for_the_groups_being_written() -> None:
    rec = Recorder(delay=0.05)
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write)
    pending = asyncio.ensure_future(groups.submit("a", ("a", 0)))
    await asyncio.sleep(0)
    await groups.close()
    assert pending.done() and pending.result() == "a#0"


@pytest.mark.parametrize("lanes", [1, 3])
async def test_the_number_of_groups_written_at_once_is_capped(lanes: int) -> None:
    rec = Recorder(delay=0.005)
    groups: GroupCommit[tuple[str, int], str] = GroupCommit(rec.write, lanes=lanes, max_size=2)
    await asyncio.gather(*(groups.submit(f"k{i}", (f"k{i}", 0)) for i in range(30)))
    assert rec.most_concurrent == lanes


async def test_groups_are_written_outside_the_submitting_requests_context() -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")
    seen: list[str] = []

    async def write(items: list[str]) -> list[str | None]:
        seen.append(request_id.get())
        return list(items)

    groups: GroupCommit[str, str] = GroupCommit(write)
    request_id.set("request-1")
    assert await groups.submit("a", "x") == "x"
    assert seen == ["-"]
