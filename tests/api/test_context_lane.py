"""The payload lane (app/api/context_lane.py) is the one entrance of `GET`/`POST
/context`: it answers every request ahead of the router, what FastAPI would refuse it
refuses in FastAPI's words, and what FastAPI would let through it answers itself."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.api.append_lane import AppendLane
from app.api.context_lane import ContextLane
from app.api.lanes import AnsweredByLane
from app.core.settings import Settings
from app.main import create_app
from tests.support.lanes import Downstream, lane_alone
from tests.support.messages import call, result, user

HISTORY = [
    user("Fix the failing test in parser.py; never touch the public API."),
    call("c1"),
    result("c1", "def parse(x):\n    return x\n" * 40),
    {"role": "assistant", "content": "The parser drops the last token."},
    user("Then patch it and run the suite."),
]


@pytest.fixture
async def lane(app: FastAPI) -> AsyncIterator[tuple[httpx.AsyncClient, Downstream]]:
    async with lane_alone(ContextLane, app) as both:
        yield both


@pytest.fixture(scope="module")
async def routed(settings: Settings, database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """The same app without the lanes: FastAPI judges each request, and the routes
    (which only document payloads) raise when one gets past FastAPI."""
    app = create_app(settings, database_url=database_url)
    app.user_middleware = [
        m
        for m in app.user_middleware
        if m.cls not in (AppendLane, ContextLane)  # type: ignore[comparison-overlap]
    ]
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://contextd.test") as c:
            yield c


async def test_the_lane_answers_payloads_without_the_router(
    lane: tuple[httpx.AsyncClient, Downstream], client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": HISTORY})
    assert r.status_code == 201, r.text
    c, downstream = lane
    got = await c.get(f"/sessions/{sid}/context", params={"max_tokens": 300})
    assert got.status_code == 200, got.text
    assert got.headers["content-type"] == "application/json"
    payload = got.json()
    assert payload["usage"]["input_tokens"] <= payload["usage"]["budget"] == 300
    assert 5 in payload["kept_seqs"]  # the latest user message
    posted = await c.post(
        f"/sessions/{sid}/context", json={"max_tokens": 300, "format": "anthropic"}
    )
    assert posted.status_code == 200, posted.text
    assert posted.json()["format"] == "anthropic"
    assert downstream.seen == []


@pytest.mark.parametrize(
    ("method", "query", "headers", "body"),
    [
        ("GET", "max_tokens=5.0", {}, b""),
        ("GET", "max_tokens=%205", {}, b""),
        ("GET", "max_tokens=0", {}, b""),
        ("GET", "max_tokens=", {}, b""),
        ("GET", "max_tokens=1000000000", {}, b""),
        ("GET", "reserve_output_tokens=-1", {}, b""),
        ("GET", "strategy=recent&strategy=key_messages", {}, b""),
        ("GET", "mode=" + "x" * 21, {}, b""),
        ("GET", "format=xml", {}, b""),
        ("GET", "unknown=1", {}, b""),
        ("GET", "previous_prefix_id=%C3%A9", {}, b""),
        ("POST", "", {"content-type": "text/plain"}, b"{}"),
        ("POST", "", {"content-type": "application/json"}, b"{"),
        ("POST", "", {"content-type": "application/json"}, b"[]"),
        ("POST", "", {"content-type": "application/json"}, b""),
    ],
)
async def test_the_lane_judges_as_fastapi_would(
    lane: tuple[httpx.AsyncClient, Downstream],
    client: httpx.AsyncClient,
    routed: httpx.AsyncClient,
    sid: str,
    method: str,
    query: str,
    headers: dict[str, str],
    body: bytes,
) -> None:
    c, downstream = lane
    path = f"/sessions/{sid}/context"
    url = f"{path}?{query}" if query else path
    r = await c.request(method, url, content=body, headers=headers)
    assert r.status_code < 500, r.text
    assert downstream.seen == []
    await client.post(f"/sessions/{sid}/messages", json={"messages": HISTORY})
    ours = await client.request(method, url, content=body, headers=headers)
    try:
        theirs = await routed.request(method, url, content=body, headers=headers)
    except AnsweredByLane:  # FastAPI let it through: the lane answered it itself
        assert ours.status_code < 500, ours.text
    else:
        assert theirs.status_code == 422, theirs.text
        assert _comparable(ours, sid) == _comparable(theirs, sid)


async def test_other_methods_and_paths_pass_through(
    lane: tuple[httpx.AsyncClient, Downstream], sid: str
) -> None:
    c, downstream = lane
    assert (await c.delete(f"/sessions/{sid}/context")).status_code == 418
    assert (await c.get(f"/sessions/{sid}/context/")).status_code == 418
    assert (await c.get(f"/sessions/{sid}")).status_code == 418
    assert (await c.get("/sessions/a/b/context")).status_code == 418
    assert len(downstream.seen) == 4


GET_CASES = [
    {},
    {"max_tokens": "400"},
    {"max_tokens": "400", "reserve_output_tokens": "100", "strategy": "recent"},
    {"max_tokens": "250", "format": "responses"},
    {"max_tokens": "250", "format": "anthropic", "mode": "debug"},
    {"strategy": "no_such_strategy"},
    {"max_tokens": "300", "reserve_output_tokens": "300"},
    {"max_tokens": "0"},
    {"max_tokens": "5.0"},
    {"previous_prefix_id": "p" * 20, "max_tokens": "400"},
    {"strategy": "", "mode": ""},
    {"max_tokens": "400", "previous_prefix_id": ""},
    {"max_tokens": "400", "previous_prefix_id": "0f78e9986c5c.1.4f53cda1.\u00e9"},
]
POST_CASES: list[dict[str, Any]] = [
    {},
    {"max_tokens": 400, "dynamic_context": ["Task: keep the build green."]},
    {"max_tokens": 400, "system": "You are terse.", "tools": []},
    {"max_tokens": 250, "format": "anthropic", "preview_limit_tokens": 50},
    {"max_tokens": "many"},
    {"max_tokens": 400, "note": 1},
    {"format": "xml"},
    {"previous_prefix_id": 5},
    {"strategy": "no_such_strategy"},
]


def _comparable(response: httpx.Response, sid: str) -> tuple[int, str, Any]:
    text = re.sub(r"msg_[0-9a-f]{32}", "msg_*", response.text.replace(sid, "SID"))
    return response.status_code, response.headers["content-type"], json.loads(text)


@pytest.mark.parametrize("case", range(len(GET_CASES) + len(POST_CASES)))
async def test_the_lane_answers_what_fastapi_would_let_through(
    client: httpx.AsyncClient, routed: httpx.AsyncClient, case: int, sid: str
) -> None:
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": HISTORY})
    assert r.status_code == 201, r.text
    answers = []
    for _ in range(2):  # the second call replays the first one's layout
        if case < len(GET_CASES):
            request = routed.build_request(
                "GET", f"/sessions/{sid}/context", params=GET_CASES[case]
            )
        else:
            body = POST_CASES[case - len(GET_CASES)]
            request = routed.build_request("POST", f"/sessions/{sid}/context", json=body)
        ours = await client.send(request)
        assert ours.status_code < 500, ours.text
        answers.append(_comparable(ours, sid))
        try:
            theirs = await routed.send(request)
        except AnsweredByLane:
            continue
        assert _comparable(ours, sid) == _comparable(theirs, sid)
    assert answers[0][:2] == answers[1][:2]


async def test_a_lane_payload_is_labelled_with_the_route_in_metrics(
    client: httpx.AsyncClient, sid: str
) -> None:
    def count(text: str, method: str) -> float:
        pattern = (
            rf'contextd_request_duration_seconds_count\{{method="{method}",'
            r'route="/sessions/\{session_id\}/context",status="200"\} (\S+)'
        )
        found = re.search(pattern, text)
        return float(found[1]) if found else 0.0

    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("x")]})
    text = (await client.get("/metrics")).text
    before = count(text, "GET"), count(text, "POST")
    assert (await client.get(f"/sessions/{sid}/context")).status_code == 200
    assert (await client.post(f"/sessions/{sid}/context", json={})).status_code == 200
    text = (await client.get("/metrics")).text
    assert (count(text, "GET"), count(text, "POST")) == (before[0] + 1, before[1] + 1)
