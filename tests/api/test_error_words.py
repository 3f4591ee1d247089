"""What a client reads when its request is refused: the words of each problem, for
the mistakes newcomers make (issue 24), and no 500 for anything a client can send.
Errors say in words what is wrong with the field they name: no raw pydantic text
("Unable to parse input string as an integer, exceeded maximum size" answered a JSON
1e30, which is no string)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from app.core.errors import in_words
from tests.support.messages import log_of, user

JSON = {"content-type": "application/json"}


async def _seeded(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [user("seed")]})
    assert r.status_code == 201, r.text
    return await log_of(client, sid)


async def test_truncated_json_names_the_body_and_the_character(
    client: httpx.AsyncClient, sid: str
) -> None:
    before = await _seeded(client, sid)
    body = b'{"messages": [{"role": "user", "content": "x"'
    r = await client.post(f"/sessions/{sid}/messages", content=body, headers=JSON)
    assert r.status_code == 422
    [error] = r.json()["errors"]
    # Not "[45]", which reads as an index into an array of the body.
    assert error["loc"] == "body"
    assert error["msg"].startswith("is not valid JSON") and f"character {len(body)}" in error["msg"]
    assert await log_of(client, sid) == before


async def test_deep_json_is_called_deep_not_bad_utf8(client: httpx.AsyncClient, sid: str) -> None:
    before = await _seeded(client, sid)
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    for path in (f"/sessions/{sid}/messages", f"/sessions/{sid}", "/tokens/count"):
        method = "PUT" if path == f"/sessions/{sid}" else "POST"
        r = await client.request(method, path, content=deep, headers=JSON)
        assert r.status_code == 422, (path, r.text)
        [error] = r.json()["errors"]
        assert error == {"loc": "body", "msg": "is nested too deeply to parse as JSON"}
    assert await log_of(client, sid) == before


async def test_bad_utf8_is_still_called_bad_utf8(client: httpx.AsyncClient, sid: str) -> None:
    r = await client.put(f"/sessions/{sid}", content=b'{"model": "\xff"}', headers=JSON)
    assert r.status_code == 422
    assert r.json()["errors"] == [{"loc": "body", "msg": "is not valid UTF-8"}]


@pytest.mark.parametrize(
    "content_type", [None, "application/x-www-form-urlencoded", "text/plain"], ids=str
)
@pytest.mark.parametrize("route", ["append", "put", "context", "budget", "count"])
async def test_a_body_without_the_json_content_type_says_so(
    client: httpx.AsyncClient, sid: str, content_type: str | None, route: str
) -> None:
    before = await _seeded(client, sid)
    method, path, body = {
        "append": ("POST", f"/sessions/{sid}/messages", {"messages": [user("x")]}),
        "put": ("PUT", f"/sessions/{sid}", {"model": "gpt-4o"}),
        "context": ("POST", f"/sessions/{sid}/context", {"max_tokens": 1000}),
        "budget": ("POST", f"/sessions/{sid}/budget", {"messages": [user("x")]}),
        "count": ("POST", "/tokens/count", {"text": "x"}),
    }[route]
    headers = {} if content_type is None else {"content-type": content_type}
    r = await client.request(method, path, content=json.dumps(body).encode(), headers=headers)
    assert r.status_code == 422, r.text
    [error] = r.json()["errors"]
    assert error["loc"] == "body"
    assert "content-type: application/json" in error["msg"]
    assert (content_type or "no content-type") in error["msg"]
    assert await log_of(client, sid) == before


# A lone UTF-16 surrogate is legal JSON (`"\ud800"`) but not Unicode. In a key, the
# 422 naming the field used to repeat it, fail to render, and answer a 500.
SURROGATE_KEY = "k\ud800"
SURROGATE_CASES: list[tuple[str, str, str, Any]] = [
    ("put metadata", "PUT", "", {"metadata": {SURROGATE_KEY: 1}}),
    ("put compaction", "PUT", "", {"compaction": {SURROGATE_KEY: 1}}),
    ("put unknown field", "PUT", "", {SURROGATE_KEY: 1}),
    ("put tools", "PUT", "", {"tools": [{SURROGATE_KEY: 1}]}),
    (
        "append metadata",
        "POST",
        "/messages",
        {"messages": [user("x", metadata={SURROGATE_KEY: 1})]},
    ),
    ("append message field", "POST", "/messages", {"messages": [user("x", **{SURROGATE_KEY: 1})]}),
    ("append unknown field", "POST", "/messages", {"messages": [user("x")], SURROGATE_KEY: 1}),
    (
        "append content part",
        "POST",
        "/messages",
        {"messages": [user([{"type": "text", "text": "x", SURROGATE_KEY: 1}])]},
    ),
    ("context unknown field", "POST", "/context", {SURROGATE_KEY: 1}),
    ("context tools", "POST", "/context", {"tools": [{SURROGATE_KEY: 1}]}),
    ("budget metadata", "POST", "/budget", {"messages": [user("x", metadata={SURROGATE_KEY: 1})]}),
    ("budget unknown field", "POST", "/budget", {SURROGATE_KEY: 1}),
    ("count unknown field", "POST", "/tokens/count", {SURROGATE_KEY: 1}),
    (
        "count tools",
        "POST",
        "/tokens/count",
        {
            "tools": [
                {"type": "function", "function": {"name": "f", "parameters": {SURROGATE_KEY: 1}}}
            ]
        },
    ),
]


@pytest.mark.parametrize(
    ("case", "method", "suffix", "body"), SURROGATE_CASES, ids=[c[0] for c in SURROGATE_CASES]
)
async def test_a_lone_surrogate_in_a_key_is_a_4xx_naming_it(
    client: httpx.AsyncClient, sid: str, case: str, method: str, suffix: str, body: Any
) -> None:
    before = await _seeded(client, sid)
    path = suffix if suffix.startswith("/tokens") else f"/sessions/{sid}{suffix}"
    content = json.dumps(body, ensure_ascii=True).encode()  # the key goes as "k\ud800"
    r = await client.request(method, path, content=content, headers=JSON)
    assert 400 <= r.status_code < 500, r.text
    assert r.headers["content-type"] == "application/problem+json"
    problem = r.json()
    assert problem["code"] == "validation_error"
    assert all(e["loc"] and e["msg"] for e in problem["errors"])
    # Named as what it is, wherever it was found (two cases fail on another field first).
    if case not in ("context tools", "budget unknown field"):
        text = problem["errors"][0]["msg"] + problem["errors"][0]["loc"]
        assert "surrogate" in text or "\\ud800" in text, problem
    assert await log_of(client, sid) == before


async def test_a_budget_preview_names_a_field_it_does_not_read(
    client: httpx.AsyncClient, sid: str
) -> None:
    """`tools` (or a misspelt `messages`) is not silently ignored."""
    before = await _seeded(client, sid)
    for field in ("tools", "mesages"):
        body = {"messages": [user("x")], field: []}
        r = await client.post(f"/sessions/{sid}/budget", json=body)
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["loc"] == field
    assert await log_of(client, sid) == before


# --- errors in words, never pydantic's --------------------------------------------------------


RAW = ("Input should", "Unable to parse", "Field required", "Extra inputs", "input string")


@pytest.mark.parametrize(
    "method,path,body,loc,words",
    [
        ("PUT", "/sessions/{sid}", '{"context_limit": 1e30}', "context_limit", "far too large"),
        ("PUT", "/sessions/{sid}", '{"context_limit": 1.5}', "context_limit", "not a fraction"),
        ("PUT", "/sessions/{sid}", '{"context_limit": 1e12}', "context_limit", "at most"),
        ("PUT", "/sessions/{sid}", '{"auto_compact": "maybe"}', "auto_compact", "true or false"),
        ("PUT", "/sessions/{sid}", '{"anchors": "x"}', "anchors", "must be an array"),
        ("PUT", "/sessions/{sid}", '{"metadata": [1]}', "metadata", "must be an object"),
        ("PUT", "/sessions/{sid}", '{"model": 5}', "model", "must be a string"),
        ("PUT", "/sessions/{sid}", '{"colour": 5}', "colour", "not a field"),
        ("GET", "/sessions/{sid}/context?max_tokens=1e30", None, "max_tokens", "in digits"),
        ("GET", "/sessions/{sid}/messages?limit=abc", None, "limit", "in digits"),
        ("POST", "/sessions/{sid}/compact", '{"timeout_s": "x"}', "timeout_s", "a number"),
        ("POST", "/sessions/{sid}/lock", '{"ttl_s": 5}', "owner", "is required"),
        (
            "POST",
            "/sessions/{sid}/usage",
            '{"input_tokens": 1e30, "uncalibrated_input_tokens": 5}',
            "input_tokens",
            "far too large",
        ),
        ("GET", "/ui/api/sessions?limit=1e30", None, "limit", "in digits"),
    ],
)
async def test_each_error_is_in_words_naming_its_field(
    client: httpx.AsyncClient, sid: str, method: str, path: str, body: str | None, loc: str,
    words: str,
) -> None:  # fmt: skip
    headers = {"content-type": "application/json"}
    r = await client.request(method, path.format(sid=sid), content=body, headers=headers)
    assert r.status_code == 422, r.text
    errors: list[dict[str, Any]] = r.json()["errors"]
    assert any(e["loc"] == loc and words in e["msg"] for e in errors), errors
    assert not any(raw in r.text for raw in RAW), r.text


def test_an_error_type_without_words_keeps_its_own_message() -> None:
    assert in_words({"type": "something_new", "msg": "as pydantic said"}) == "as pydantic said"
    assert (
        in_words({"type": "less_than_equal", "ctx": {"le": 5}, "msg": "x"}) == "must be at most 5"
    )
    # A template whose context is missing falls back rather than failing the 422.
    assert in_words({"type": "less_than_equal", "msg": "raw"}) == "raw"
