"""Errors say in words what is wrong with the field they name: no raw pydantic text
("Unable to parse input string as an integer, exceeded maximum size" answered a JSON
1e30, which is no string)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.core.errors import in_words

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
