"""The append lane (app/api/append_lane.py) is the one entrance of appends: it answers
every append ahead of the router, and what FastAPI would refuse it refuses in FastAPI's
own words; the route only documents it."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.append_lane import AppendLane
from app.api.lanes import AnsweredByLane
from app.core.settings import Settings
from app.main import create_app
from tests.support.lanes import Downstream, lane_alone
from tests.support.messages import call, log_of, result, user


@pytest.fixture
async def lane(app: FastAPI) -> AsyncIterator[tuple[httpx.AsyncClient, Downstream]]:
    async with lane_alone(AppendLane, app) as both:
        yield both


async def test_the_lane_stores_appends_without_the_router(
    lane: tuple[httpx.AsyncClient, Downstream], client: httpx.AsyncClient, sid: str
) -> None:
    c, downstream = lane
    batch = [user("hi", id="u1"), call("c1"), result("c1", "done")]
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": batch})
    assert r.status_code == 201, r.text
    assert r.headers["content-type"] == "application/json"
    assert [a["seq"] for a in r.json()["messages"]] == [1, 2, 3]
    # A replay of a stored id: its seq again, nothing stored twice.
    again = await c.post(f"/sessions/{sid}/messages", json={"messages": [batch[0]]})
    assert again.status_code == 200, again.text
    assert again.json()["messages"][0]["seq"] == 1
    assert downstream.seen == []
    stored = await log_of(client, sid)
    assert [(m["seq"], m["role"]) for m in stored] == [(1, "user"), (2, "assistant"), (3, "tool")]


@pytest.mark.parametrize(
    ("path", "headers", "body"),
    [
        ("/sessions/{sid}/messages", {"content-type": "text/plain"}, b'{"messages": []}'),
        ("/sessions/{sid}/messages", {}, b'{"messages": []}'),
        ("/sessions/{sid}/messages", {"content-type": "application/x-www-form-urlencoded"}, b"a=1"),
        ("/sessions/{sid}/messages", {"content-type": "application/json"}, b'{"messages": ['),
        ("/sessions/{sid}/messages", {"content-type": "application/json"}, b"[]"),
        ("/sessions/{sid}/messages", {"content-type": "application/json"}, b""),
        ("/sessions/{sid}/messages", {"content-type": "application/json"}, b"\xff\xfe{"),
        # With a JSON content type, so that the session id is what is refused.
        ("/sessions/" + "x" * 129 + "/messages", {"content-type": "application/json"}, b"{}"),
        ("/sessions/a b/messages", {"content-type": "application/json"}, b'{"messages": []}'),
    ],
)
async def test_what_fastapi_refuses_the_lane_refuses_in_its_words(
    lane: tuple[httpx.AsyncClient, Downstream],
    client: httpx.AsyncClient,
    routed: httpx.AsyncClient,
    sid: str,
    path: str,
    headers: dict[str, str],
    body: bytes,
) -> None:
    c, downstream = lane
    r = await c.post(path.format(sid=sid), content=body, headers=headers)
    assert r.status_code == 422, r.text
    assert downstream.seen == []
    # The whole app answers as FastAPI answers the route without the lane.
    ours = await client.post(path.format(sid=sid), content=body, headers=headers)
    theirs = await routed.post(path.format(sid=sid), content=body, headers=headers)
    assert _comparable(ours, sid) == _comparable(theirs, sid)


async def test_other_methods_and_paths_pass_through(
    lane: tuple[httpx.AsyncClient, Downstream], sid: str
) -> None:
    c, downstream = lane
    assert (await c.get(f"/sessions/{sid}/messages")).status_code == 418
    assert (await c.post(f"/sessions/{sid}/context", json={})).status_code == 418
    assert (await c.post(f"/sessions/{sid}/messages/", json={})).status_code == 418
    assert [p for p, _ in downstream.seen] == [
        f"/sessions/{sid}/messages",
        f"/sessions/{sid}/context",
        f"/sessions/{sid}/messages/",
    ]


@pytest.fixture(scope="module")
async def routed(settings: Settings, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The same app without the lane: FastAPI judges each append, and the route (which
    only documents appends) raises when one gets past FastAPI."""
    app = create_app(settings, database_url=database_url)
    app.user_middleware = [m for m in app.user_middleware if m.cls is not AppendLane]  # type: ignore[comparison-overlap]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://contextd.test") as c:
            yield c


CASES: list[tuple[str, list[dict[str, Any]]]] = [
    ("a user message", [{"messages": [user("hello", id="m1")]}]),
    ("a tool step", [{"messages": [user("go"), call("k1"), result("k1", "ok")]}]),
    ("a replay", [{"messages": [user("once", id="r1")]}, {"messages": [user("once", id="r1")]}]),
    (
        "a replay with other content",
        [{"messages": [user("once", id="r1")]}, {"messages": [user("twice", id="r1")]}],
    ),
    ("an unknown field", [{"messages": [user("x")], "note": 1}]),
    ("a lock token that is not a string", [{"messages": [user("x")], "lock_token": 5}]),
    ("a message without a role", [{"messages": [{"content": "x"}]}]),
    ("no messages", [{}]),
    ("an answer to no call", [{"messages": [result("nobody")]}]),
    (
        "an answered call answered again",
        [{"messages": [call("d1"), result("d1")]}, {"messages": [result("d1")]}],
    ),
    (
        "a lease's write without its token",
        [{"messages": [user("a")]}, {"lease": True}, {"messages": [user("x")]}],
    ),
]


def _comparable(response: httpx.Response, sid: str) -> tuple[int, str, Any]:
    # Message ids contextd generates and request ids differ from run to run.
    text = re.sub(r"msg_[0-9a-f]{32}", "msg_*", response.text.replace(sid, "SID"))
    return response.status_code, response.headers["content-type"], json.loads(text)


@pytest.mark.parametrize(("name", "steps"), CASES, ids=[c[0] for c in CASES])
async def test_the_lane_answers_what_gets_past_fastapi(
    client: httpx.AsyncClient,
    routed: httpx.AsyncClient,
    name: str,
    steps: list[dict[str, Any]],
    sid: str,
) -> None:
    got = []
    for step in steps:
        if step.get("lease"):
            r = await client.post(f"/sessions/{sid}/lock", json={"owner": "a", "ttl_s": 60})
            assert r.status_code < 300, r.text
            continue
        r = await client.post(f"/sessions/{sid}/messages", json=step)
        assert r.status_code < 500, r.text
        got.append(_comparable(r, sid))
        # Without the lane, the request reaches the route, which never answers.
        with pytest.raises(AnsweredByLane):
            await routed.post(f"/sessions/routed-{sid}/messages", json=step)
    assert any(status >= 400 for status, _, _ in got) == (
        name not in ("a user message", "a tool step", "a replay")
    )


async def test_a_lane_append_is_labelled_with_the_route_in_metrics(
    client: httpx.AsyncClient, sid: str
) -> None:
    def count(text: str) -> float:
        pattern = (
            r'contextd_request_duration_seconds_count\{method="POST",'
            r'route="/sessions/\{session_id\}/messages",status="201"\} (\S+)'
        )
        found = re.search(pattern, text)
        return float(found[1]) if found else 0.0

    before = count((await client.get("/metrics")).text)
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [user("x")]})
    assert r.status_code == 201
    assert count((await client.get("/metrics")).text) == before + 1
