"""The console lists the latest active sessions first by default (by id, 50 at a time,
an operator with hundreds of sessions did not see the active ones); id and tokens on
request."""

from __future__ import annotations

import base64
import json
import uuid

import httpx

from tests.support.messages import user


async def _walk(c: httpx.AsyncClient, prefix: str, **params: str) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        query: dict[str, str | int] = {"limit": 2, "prefix": prefix, **params}
        if cursor:
            query["cursor"] = cursor
        r = await c.get("/ui/api/sessions", params=query)
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["sessions"]) <= 2
        seen += [s["id"] for s in body["sessions"]]
        cursor = body["next_cursor"]
        if cursor is None:
            return seen


async def test_latest_activity_first_by_default(client: httpx.AsyncClient) -> None:
    prefix = f"act-{uuid.uuid4().hex[:8]}-"
    ids = [f"{prefix}{i}" for i in range(5)]
    for sid in ids:
        (await client.put(f"/sessions/{sid}", json={})).raise_for_status()
    # An append is activity: the oldest session becomes the latest active, then the third.
    for sid in (ids[0], ids[2]):
        body = {"messages": [user("still working")]}
        (await client.post(f"/sessions/{sid}/messages", json=body)).raise_for_status()
    expected = [ids[2], ids[0], ids[4], ids[3], ids[1]]
    assert (await client.get("/ui/api/sessions", params={"prefix": prefix})).json()[
        "sort"
    ] == "activity"
    assert await _walk(client, prefix) == expected
    assert await _walk(client, prefix, sort="activity") == expected
    assert await _walk(client, prefix, sort="id") == ids
    listed = (await client.get("/ui/api/sessions", params={"prefix": prefix})).json()
    times = [s["updated_at"] for s in listed["sessions"]]
    assert times == sorted(times, reverse=True)


async def test_a_bad_activity_cursor_is_a_422_naming_it(client: httpx.AsyncClient) -> None:
    def cursor(values: object) -> str:
        return base64.urlsafe_b64encode(json.dumps(values).encode()).decode()

    id_cursor = cursor(["s-1"])
    naive = cursor(["2026-12-01T10:00:00", "s-1"])
    for bad in ("x!", id_cursor, naive, cursor([5, "s-1"]), cursor(["yesterday", "s-1"])):
        r = await client.get("/ui/api/sessions", params={"sort": "activity", "cursor": bad})
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "cursor", (bad, r.text)
