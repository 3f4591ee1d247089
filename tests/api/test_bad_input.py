"""Every bad input gets a 4xx problem naming the field, and writes nothing: the append's
messages, its body, the session ids and the query and path parameters; values of the
wrong type or out of range that a fuzzer got past the checks; base64 data that is not
base64. Nothing stored before a check existed can turn into a 500 later (a base64 data
URL did for `format=anthropic`, which decodes the head of an image to learn its type)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import httpx
import pytest

from tests.support.messages import call, log_of, result, user

GOOD = [user("hello", id="seed-1"), call("c1"), result("c1")]

BAD_BATCHES: list[tuple[str, Any, str]] = [
    ("unknown role", [{"role": "wizard", "content": "x"}], "messages[0].role"),
    ("developer role", [{"role": "developer", "content": "x"}], "messages[0].role"),
    ("missing role", [{"content": "x"}], "messages[0].role"),
    ("not an object", ["hello"], "messages[0]"),
    ("tool without tool_call_id", [{"role": "tool", "content": "x"}], "messages[0].tool_call_id"),
    ("tool answering no call", [result("nobody")], "messages[0].tool_call_id"),
    ("tool answering an answered call", [result("c1")], "messages[0].tool_call_id"),
    (
        "tool_calls not a list",
        [{"role": "assistant", "tool_calls": {"id": "x"}}],
        "messages[0].tool_calls",
    ),
    (
        "empty tool_calls",
        [{"role": "assistant", "content": None, "tool_calls": []}],
        "messages[0].tool_calls",
    ),
    (
        "tool call without id",
        [
            {
                "role": "assistant",
                "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
            }
        ],
        "messages[0].tool_calls[0].id",
    ),
    (
        "arguments not a string",
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "z", "type": "function", "function": {"name": "f", "arguments": {}}}
                ],
            }
        ],
        "messages[0].tool_calls[0].function.arguments",
    ),
    (
        "tool call of wrong type",
        [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "z", "type": "code", "function": {"name": "f", "arguments": "{}"}}
                ],
            }
        ],
        "messages[0].tool_calls[0].type",
    ),
    (
        "tool_calls on a user",
        [{"role": "user", "content": "x", "tool_calls": []}],
        "messages[0].tool_calls",
    ),
    ("content a number", [{"role": "user", "content": 42}], "messages[0].content"),
    ("content missing", [{"role": "user"}], "messages[0].content"),
    ("null content without calls", [{"role": "assistant", "content": None}], "messages[0].content"),
    (
        "bad part type",
        [{"role": "user", "content": [{"type": "video", "video": {}}]}],
        "messages[0].content[0].type",
    ),
    (
        "text part without text",
        [{"role": "user", "content": [{"type": "text"}]}],
        "messages[0].content[0].text",
    ),
    (
        "image in a tool result",
        [
            {
                "role": "tool",
                "tool_call_id": "c1",
                "content": [{"type": "image_url", "image_url": {"url": "u"}}],
            }
        ],
        "messages[0].content[0].type",
    ),
    ("pinned not bool", [user("x", pinned="yes")], "messages[0].pinned"),
    ("bad mode", [user("x", mode="turbo")], "messages[0].mode"),
    ("metadata not object", [user("x", metadata=[1])], "messages[0].metadata"),
    ("error on a user", [user("x", error={"type": "t", "message": "m"})], "messages[0].error"),
    (
        "error without message",
        [{"role": "assistant", "content": "p", "error": {"type": "t"}}],
        "messages[0].error.message",
    ),
    ("reserved seq", [user("x", seq=5)], "messages[0].seq"),
    ("empty id", [user("x", id="")], "messages[0].id"),
    ("duplicate ids in batch", [user("x", id="d"), user("y", id="d")], "messages[1].id"),
    ("NUL character", [user("a\u0000b")], "messages[0].content"),
    ("lone surrogate", [user("a\ud800b")], "messages[0].content"),
    (
        "second message bad",
        [user("fine"), {"role": "user", "content": None}],
        "messages[1].content",
    ),
    ("empty batch", [], "messages"),
    ("not a list", {"role": "user"}, "messages"),
]


async def _seeded(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": GOOD})
    assert r.status_code == 201
    return await log_of(client, sid)


@pytest.mark.parametrize(("case", "messages", "loc"), BAD_BATCHES, ids=[c[0] for c in BAD_BATCHES])
async def test_bad_messages_are_refused_naming_the_field(
    client: httpx.AsyncClient, sid: str, case: str, messages: Any, loc: str
) -> None:
    before = await _seeded(client, sid)
    r = await client.post(
        f"/sessions/{sid}/messages",
        content=_dump({"messages": messages}),
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["code"] == "validation_error" and body["status"] == 422
    assert loc in [e["loc"] for e in body["errors"]], body
    assert await log_of(client, sid) == before


def _dump(value: Any) -> bytes:
    import json

    # ensure_ascii keeps lone surrogates as \ud800 escapes, as a client's JSON would.
    return json.dumps(value, ensure_ascii=True).encode()


async def test_a_bad_append_to_a_new_session_creates_nothing(
    client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [{"role": "nobody"}]})
    assert r.status_code == 422
    assert (await client.get(f"/sessions/{sid}")).status_code == 404


async def test_oversized_message_is_413_naming_it(
    client: httpx.AsyncClient, sid: str, settings: Any
) -> None:
    before = await _seeded(client, sid)
    big = "x" * (settings.max_message_bytes + 10)
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [user("ok"), user(big)]})
    assert r.status_code == 413
    assert r.json()["code"] == "payload_too_large"
    assert r.json()["errors"][0]["loc"] == "messages[1]"
    assert await log_of(client, sid) == before


async def test_oversized_body_is_413(client: httpx.AsyncClient, sid: str, settings: Any) -> None:
    before = await _seeded(client, sid)
    payload = (
        b'{"messages": [{"role": "user", "content": "' + b"y" * settings.max_body_bytes + b'"}]}'
    )
    r = await client.post(
        f"/sessions/{sid}/messages", content=payload, headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    assert r.json()["code"] == "payload_too_large"
    assert await log_of(client, sid) == before


async def test_too_many_messages_per_append(
    client: httpx.AsyncClient, sid: str, settings: Any
) -> None:
    before = await _seeded(client, sid)
    batch = [user("m")] * (settings.max_messages_per_append + 1)
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": batch})
    assert r.status_code == 422
    assert r.json()["errors"][0]["loc"] == "messages"
    assert await log_of(client, sid) == before


@pytest.mark.parametrize(
    "payload",
    [b"{not json", b'{"messages": [', b"\xff\xfe{}", b"[]", b"null", b'"text"'],
    ids=["broken", "truncated", "bad utf-8", "array", "null", "string"],
)
async def test_malformed_json_is_422(client: httpx.AsyncClient, sid: str, payload: bytes) -> None:
    before = await _seeded(client, sid)
    r = await client.post(
        f"/sessions/{sid}/messages", content=payload, headers={"content-type": "application/json"}
    )
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "validation_error"
    assert await log_of(client, sid) == before


async def test_unknown_top_level_field_and_bad_lock_token(
    client: httpx.AsyncClient, sid: str
) -> None:
    before = await _seeded(client, sid)
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [user("x")], "extra": 1})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "extra"
    r = await client.post(
        f"/sessions/{sid}/messages", json={"messages": [user("x")], "lock_token": 5}
    )
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "lock_token"
    assert await log_of(client, sid) == before


@pytest.mark.parametrize(
    "bad_id",
    ["has space", "a" * 129, "slash%2Fin", "slash/in", "ümlaut", "semi;colon", "%2E", "%2E%2E"],
    ids=str,
)
@pytest.mark.parametrize(
    ("method", "suffix"),
    [("POST", "/messages"), ("PUT", ""), ("GET", ""), ("GET", "/context"), ("GET", "/budget")],
)
async def test_invalid_session_ids_are_422(
    client: httpx.AsyncClient, bad_id: str, method: str, suffix: str
) -> None:
    body = {"messages": [user("x")]} if suffix == "/messages" else {}
    r = await client.request(
        method, f"/sessions/{bad_id}{suffix}", json=body if method != "GET" else None
    )
    if bad_id == "slash/in" and suffix == "":
        # /sessions/slash/in could as well be a mistyped route under session "slash": a
        # 404, which says what a session id may hold.
        assert r.status_code == 404, r.text
        assert r.json()["code"] == "not_found"
        assert "session ids must be 1–128 characters" in r.json()["detail"]
        assert "hold no '/'" in r.json()["detail"]
        return
    assert r.status_code == 422, r.text
    error = r.json()["errors"][0]
    assert error["loc"] == "session_id"
    assert "[A-Za-z0-9._:-]" in error["msg"] and "'..'" in error["msg"]
    if "/" in bad_id or "%2F" in bad_id:
        assert "'/'" in error["msg"]


async def test_an_unknown_route_under_a_session_is_still_404(
    client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.get(f"/sessions/{sid}/nothing-here")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    # Anywhere else a 404 says no more than that.
    r = await client.get("/nothing/here")
    assert r.status_code == 404 and r.json()["detail"] == "Not Found"


async def test_dots_in_session_ids_are_fine_elsewhere(client: httpx.AsyncClient, sid: str) -> None:
    for good in (f"{sid}.", f".{sid}", f"{sid}...", "...", f"a.{sid[-6:]}", ".a", "a."):
        r = await client.put(f"/sessions/{good}", json={})
        assert r.status_code in (200, 201), (good, r.text)
        assert r.json()["id"] == good


@pytest.mark.parametrize(
    ("path", "loc"),
    [
        ("/sessions/{sid}/messages?limit=0", "limit"),
        ("/sessions/{sid}/messages?limit=100000", "limit"),
        ("/sessions/{sid}/messages?after_seq=-1", "after_seq"),
        ("/sessions/{sid}/messages?after_seq=99999999999999999999999", "after_seq"),
        ("/sessions/{sid}/messages/0", "seq"),
        ("/sessions/{sid}/messages/abc", "seq"),
        ("/sessions/{sid}/messages/99999999999999999999999", "seq"),
        ("/sessions?limit=abc", "limit"),
        ("/sessions?cursor=!!!!", "cursor"),
    ],
)
async def test_bad_query_and_path_parameters(
    client: httpx.AsyncClient, sid: str, path: str, loc: str
) -> None:
    await _seeded(client, sid)
    r = await client.get(path.format(sid=sid))
    assert r.status_code == 422, r.text
    assert r.json()["errors"][0]["loc"] == loc


HOSTILE_BODIES = {
    "deeply nested": b'{"messages": [{"role": "user", "content": "x", "metadata": '
    + b'{"a": ' * 100_000
    + b"1"
    + b"}" * 100_001
    + b"]}",
    "nested array": b'{"messages": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    "huge integer": b'{"messages": [{"role": "user", "content": "x", "metadata": {"n": '
    + b"9" * 5000
    + b"}}]}",
    "float overflow": b'{"messages": [{"role": "user", "content": "x", "metadata": {"n": 1e400}}]}',
    "NaN literal": b'{"messages": [{"role": "user", "content": "x", "metadata": {"n": NaN}}]}',
    "invalid utf-8 inside a string": b'{"messages": [{"role": "user", "content": "\xc3\x28"}]}',
    "escaped NUL in a key": b'{"messages": [{"role": "user", "content": "x", "metadata": {"\\u0000": 1}}]}',
    "lone surrogate escape": b'{"messages": [{"role": "user", "content": "\\udc00"}]}',
}


@pytest.mark.parametrize("payload", list(HOSTILE_BODIES.values()), ids=list(HOSTILE_BODIES))
async def test_hostile_bodies_are_clean_4xx(
    client: httpx.AsyncClient, sid: str, payload: bytes
) -> None:
    before = await _seeded(client, sid)
    r = await client.post(
        f"/sessions/{sid}/messages", content=payload, headers={"content-type": "application/json"}
    )
    assert 400 <= r.status_code < 500, r.text[:500]
    assert r.headers["content-type"] == "application/problem+json"
    assert await log_of(client, sid) == before


async def test_tool_arguments_that_are_not_json_are_stored_verbatim(
    client: httpx.AsyncClient, sid: str
) -> None:
    """A model may emit broken JSON arguments; the log keeps them as they were."""
    broken = '{"path": "a.py", oops'
    r = await client.post(
        f"/sessions/{sid}/messages",
        json={"messages": [user("go"), call("b1", args=broken), result("b1", "error: bad args")]},
    )
    assert r.status_code == 201
    log = await log_of(client, sid)
    assert log[1]["tool_calls"][0]["function"]["arguments"] == broken
    ctx = (await client.get(f"/sessions/{sid}/context")).json()
    assert any(m.get("tool_calls") for m in ctx["messages"])


def _tool(parameters: bytes, description: bytes = b'"d"') -> bytes:
    return (
        b'{"type": "function", "function": {"name": "f", "description": '
        + description
        + b', "parameters": '
        + parameters
        + b"}}"
    )


# A context call's own tools and dynamic context are not stored, but are hashed into the
# prefix_id and sent on: each of these gave a 500 (or the invalid JSON `NaN` in a payload).
CONTEXT_BODIES: dict[str, tuple[bytes, str]] = {
    "lone surrogate in a tool's parameters key": (
        b'{"tools": [' + _tool(b'{"k\\ud800": 1}') + b"]}",
        "tools[0].function.parameters.k",
    ),
    "lone surrogate in a tool's description": (
        b'{"tools": [' + _tool(b"{}", b'"\\udc00"') + b"]}",
        "tools[0].function.description",
    ),
    "lone surrogate in a tool, responses format": (
        b'{"format": "responses", "tools": [' + _tool(b'{"k\\ud800": 1}') + b"]}",
        "tools[0].function.parameters.k",
    ),
    "lone surrogate in a dynamic string": (
        b'{"dynamic_context": ["\\ud800"]}',
        "dynamic_context[0]",
    ),
    "lone surrogate in a dynamic message, anthropic format": (
        b'{"format": "anthropic", "dynamic_context": [{"role": "system", "content": "\\ud800"}]}',
        "dynamic_context[0].content",
    ),
    "lone surrogate in a dynamic message's content part key": (
        b'{"dynamic_context": [{"role": "system", "content": [{"type": "text", "text": "x", '
        b'"k\\udc00": 1}]}]}',
        "dynamic_context[0].content[0].k",
    ),
    "tool parameters nested 500 deep": (
        b'{"tools": [' + _tool(b'{"a": ' * 500 + b"1" + b"}" * 500) + b"]}",
        "tools[0].function.parameters.a.a",
    ),
    "NaN in a tool's parameters": (
        b'{"tools": [' + _tool(b'{"x": NaN}') + b"]}",
        "tools[0].function.parameters.x",
    ),
    "Infinity in a dynamic message": (
        b'{"dynamic_context": [{"role": "system", "content": "x", "n": Infinity}]}',
        "dynamic_context[0].n",
    ),
}


@pytest.mark.parametrize(
    ("payload", "loc"), list(CONTEXT_BODIES.values()), ids=list(CONTEXT_BODIES)
)
async def test_a_context_calls_own_tools_and_dynamic_context_are_checked(
    client: httpx.AsyncClient, sid: str, payload: bytes, loc: str
) -> None:
    await _seeded(client, sid)
    r = await client.post(
        f"/sessions/{sid}/context", content=payload, headers={"content-type": "application/json"}
    )
    assert r.status_code == 422, r.text[:500]
    assert r.json()["errors"][0]["loc"].startswith(loc)
    # What JSON carries and stored tools may hold still goes through.
    fine = (
        b'{"dynamic_context": ["a\\u0000b"], "tools": ['
        + _tool(b'{"n": ' + b"9" * 60 + b"}")
        + b"]}"
    )
    r = await client.post(
        f"/sessions/{sid}/context", content=fine, headers={"content-type": "application/json"}
    )
    assert r.status_code == 200, r.text[:500]


async def test_a_checked_string_over_its_bound_is_named_in_characters(
    client: httpx.AsyncClient, sid: str
) -> None:
    """Strings checked for NUL and lone surrogates (`StoredStr`) are bounded too: the
    refusal says characters, not pydantic's "items after validation"."""
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        ("GET", f"/sessions/{sid}/events", {"params": {"type": "x" * 101}}, "type"),
        ("GET", "/ui/api/sessions", {"params": {"prefix": "x" * 129}}, "prefix"),
        ("PUT", f"/sessions/{sid}", {"json": {"strategy": "x" * 200}}, "strategy"),
    ]
    for method, path, kwargs, field in cases:
        r = await client.request(method, path, **kwargs)
        assert r.status_code == 422, (path, r.text)
        errors = r.json()["errors"]
        assert any(e["loc"].endswith(field) for e in errors), errors
        assert all("items" not in e["msg"] for e in errors), errors
        assert any(e["msg"].startswith("at most ") and "characters" in e["msg"] for e in errors)


# --- values a fuzzer got past the checks ------------------------------------------------------


async def _state(c: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    session = await c.get(f"/sessions/{sid}")
    if session.status_code == 404:
        return {"missing": True}
    body = session.json()
    body.pop("updated_at", None)
    events = (await c.get(f"/sessions/{sid}/events")).json()["events"]
    messages = (await c.get(f"/sessions/{sid}/messages")).json()["messages"]
    return {"session": body, "events": len(events), "messages": messages}


def _names(r: httpx.Response, field: str) -> None:
    assert r.status_code == 422, r.text
    assert r.headers["content-type"] == "application/problem+json"
    assert any(e["loc"].endswith(field) for e in r.json()["errors"]), r.json()


@pytest.mark.parametrize(
    "override,field",
    [
        ({"min_preserved_turns": "3"}, "compaction.min_preserved_turns"),
        ({"fail_open": "false"}, "compaction.fail_open"),
        ({"keep_recent_ratio": "0.5"}, "compaction.keep_recent_ratio"),
        ({"max_flush_candidates": True}, "compaction.max_flush_candidates"),
        ({"context_limit": "5000"}, "compaction.context_limit"),
        ({"warn_ratio": "0.5", "compact_ratio": "0.6"}, "compaction.warn_ratio"),
        ({"context_limit": 10**30}, "compaction.context_limit"),
    ],
)
async def test_a_compaction_override_of_the_wrong_type_is_refused(
    client: httpx.AsyncClient, sid: str, override: dict[str, Any], field: str
) -> None:
    # An unknown model: no window caps the limit but the bound itself.
    (await client.put(f"/sessions/{sid}", json={"model": "my-local-model"})).raise_for_status()
    before = await _state(client, sid)
    _names(await client.put(f"/sessions/{sid}", json={"compaction": override}), field)
    assert await _state(client, sid) == before


async def test_a_compaction_override_is_stored_as_validated(
    client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.put(f"/sessions/{sid}", json={"compaction": {"keep_recent_ratio": 1e-1}})
    assert r.status_code in (200, 201), r.text
    assert (await client.get(f"/sessions/{sid}")).json()["compaction"]["keep_recent_ratio"] == 0.1


async def test_an_override_stored_unchecked_no_longer_breaks_the_session(
    client: httpx.AsyncClient, sid: str, database_url: str
) -> None:
    """Overrides stored before they were checked strictly may be strings: the session
    still answers its budget, payloads and compaction plans (the override is left out)."""
    msgs = [user("go"), *[m for i in range(6) for m in (call(f"c{i}"), result(f"c{i}"))]]
    (await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})).raise_for_status()
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        bad = json.dumps({"min_preserved_turns": "3", "keep_recent_ratio": "0.5"})
        await conn.execute("UPDATE sessions SET compaction = $1::jsonb WHERE id = $2", bad, sid)
    finally:
        await conn.close()
    for method, path, body in [
        ("GET", f"/sessions/{sid}/budget", None),
        ("GET", f"/sessions/{sid}/context", None),
        ("POST", f"/sessions/{sid}/compact", {"dry_run": True}),
        ("POST", f"/sessions/{sid}/messages", {"messages": [user("more")]}),
    ]:
        r = await client.request(method, path, json=body)
        assert r.status_code in (200, 201), (path, r.text)


PART_BAD: list[tuple[str, Any, str]] = [
    ("a null part", [None], ""),
    ("an image that is a number", [{"type": "image_url", "image_url": 123}], ".image_url"),
    ("a text that is a number", [{"type": "text", "text": 5}], ".text"),
    ("a type that is a list", [{"type": ["text"]}], ".type"),
]


@pytest.mark.parametrize("fmt", ["openai", "responses", "anthropic"])
@pytest.mark.parametrize("label,content,loc", PART_BAD, ids=[p[0] for p in PART_BAD])
async def test_a_context_calls_own_messages_are_checked_part_by_part(
    client: httpx.AsyncClient, sid: str, fmt: str, label: str, content: Any, loc: str
) -> None:
    (
        await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    ).raise_for_status()
    for key, message in (
        ("dynamic_context", {"role": "user", "content": content}),
        ("system", {"role": "system", "content": content}),
    ):
        body = {"format": fmt, key: [message]}
        r = await client.post(f"/sessions/{sid}/context", json=body)
        assert r.status_code == 422, (key, r.text)
        locs = [e["loc"] for e in r.json()["errors"]]
        # A system message takes text parts only: an image there is refused by its type.
        where = ".type" if key == "system" and loc == ".image_url" else loc
        assert f"{key}[0].content[0]{where}" in locs, locs


@pytest.mark.parametrize("kind", [{"x": 1}, [["object"]], ["string", {"a": 1}]])
async def test_a_tool_schema_whose_type_is_not_a_name_is_refused(
    client: httpx.AsyncClient, sid: str, kind: Any
) -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"a": {"type": kind}}},
        },
    }
    _names(await client.put(f"/sessions/{sid}", json={"tools": [tool]}), ".type")
    assert (await client.get(f"/sessions/{sid}")).status_code == 404  # nothing written
    _names(
        await client.post("/tokens/count", json={"messages": [user("x")], "tools": [tool]}), ".type"
    )
    (
        await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    ).raise_for_status()
    _names(await client.post(f"/sessions/{sid}/context", json={"tools": [tool]}), ".type")


@pytest.mark.parametrize("kind", [["text"], {"t": 1}])
async def test_a_part_type_that_is_not_a_name_is_refused_everywhere(
    client: httpx.AsyncClient, sid: str, kind: Any
) -> None:
    bad = [{"role": "user", "content": [{"type": kind}]}]
    (
        await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    ).raise_for_status()
    before = await _state(client, sid)
    field = "messages[0].content[0].type"
    _names(await client.post(f"/sessions/{sid}/messages", json={"messages": bad}), field)
    _names(await client.post(f"/sessions/{sid}/budget", json={"messages": bad}), field)
    _names(await client.post("/tokens/count", json={"messages": bad}), field)
    assert await _state(client, sid) == before


@pytest.mark.parametrize(
    "method,path,body,field",
    [
        ("PUT", "", {"auto_compact": 0.0}, "auto_compact"),
        ("PUT", "", {"recall": "yes"}, "recall"),
        ("PUT", "", {"context_limit": "9000"}, "context_limit"),
        ("POST", "/lock", {"owner": "a", "ttl_s": True}, "ttl_s"),
        ("POST", "/lock", {"owner": "a", "ttl_s": "10"}, "ttl_s"),
        ("POST", "/usage", {"input_tokens": True, "uncalibrated_input_tokens": 10}, "input_tokens"),
    ],
)
async def test_flags_and_numbers_are_json_flags_and_numbers(
    client: httpx.AsyncClient, sid: str, method: str, path: str, body: Any, field: str
) -> None:
    (
        await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    ).raise_for_status()
    before = await _state(client, sid)
    r = await client.request(method, f"/sessions/{sid}{path}", json=body)
    _names(r, field)
    assert all(not e["msg"].startswith("Value error") for e in r.json()["errors"]), r.text
    assert await _state(client, sid) == before


async def test_get_on_mcp_is_405_not_an_endless_stream(client: httpx.AsyncClient) -> None:
    for accept in ("text/event-stream", "*/*"):
        r = await client.get("/mcp", headers={"accept": accept})
        assert r.status_code == 405 and "POST" in r.headers["allow"], r.text
        assert r.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize(
    "message,field",
    [
        (
            {
                "role": "assistant",
                "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
            },
            "messages[0].content[0].type",
        ),
        (
            {"role": "user", "content": [{"type": "refusal", "refusal": "no"}]},
            "messages[0].content[0].type",
        ),
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"detail": "low"}}]},
            ".image_url.url",
        ),
        (
            {"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]},
            ".input_audio.data",
        ),
        ({"role": "user", "content": [{"type": "file", "file": {}}]}, ".file.file_data"),
    ],
)
async def test_a_part_the_provider_refuses_is_refused_when_appended(
    client: httpx.AsyncClient, sid: str, message: dict[str, Any], field: str
) -> None:
    """Stored, a part a provider refuses made every later payload keeping its message fail
    there (pinned, forever): refused at the append instead, naming it."""
    (
        await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    ).raise_for_status()
    before = await _state(client, sid)
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [message]})
    _names(r, field)
    assert await _state(client, sid) == before
    # Images by URL or by file id, files by data, id or URL still go in.
    fine = [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "image_url", "image_url": {"file_id": "file-1"}},
        {"type": "file", "file": {"file_id": "file-2", "filename": "a.pdf"}},
    ]
    ok = await client.post(
        f"/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": fine}]}
    )
    assert ok.status_code == 201, ok.text


async def test_an_empty_part_list_in_a_context_calls_messages_is_refused(
    client: httpx.AsyncClient, sid: str
) -> None:
    (
        await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    ).raise_for_status()
    for key, role in (("system", "system"), ("dynamic_context", "user")):
        r = await client.post(
            f"/sessions/{sid}/context", json={key: [{"role": role, "content": []}]}
        )
        _names(r, f"{key}[0].content")


# --- base64 data URLs whose data is not base64 ------------------------------------------------


def _image(url: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}


@pytest.mark.parametrize(
    "message,field",
    [
        (_image("data:image/png;base64,x"), "messages[0].content[0].image_url.url"),
        (_image("data:image/png;base64,"), "messages[0].content[0].image_url.url"),
        (_image("data:image/png;base64,iVBOR w0KGgo="), "messages[0].content[0].image_url.url"),
        (_image("data:image/png;base64,iVBORw0KGgo=é"), "messages[0].content[0].image_url.url"),
        (
            {
                "role": "user",
                "content": [
                    {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBER"}}
                ],
            },
            "messages[0].content[0].file.file_data",
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "input_audio", "input_audio": {"data": "UklGR!", "format": "wav"}}
                ],
            },
            "messages[0].content[0].input_audio.data",
        ),
    ],
)
async def test_malformed_base64_is_refused_at_the_append(
    client: httpx.AsyncClient, sid: str, message: dict[str, Any], field: str
) -> None:
    (
        await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    ).raise_for_status()
    before = await _state(client, sid)
    _names(await client.post(f"/sessions/{sid}/messages", json={"messages": [message]}), field)
    assert await _state(client, sid) == before


async def test_the_new_users_request_is_a_422_and_writes_nothing(
    client: httpx.AsyncClient, sid: str
) -> None:
    body = {"messages": [_image("data:image/png;base64,x")]}
    r = await client.post(f"/sessions/{sid}/messages", json=body)
    _names(r, "messages[0].content[0].image_url.url")
    assert "base64" in r.text
    assert (await client.get(f"/sessions/{sid}")).status_code == 404


async def test_a_malformed_image_stored_earlier_is_left_out_of_every_format(
    client: httpx.AsyncClient, sid: str, database_url: str
) -> None:
    good = _image("data:image/png;base64,iVBORw0KGgo=")
    pdf = {
        "role": "user",
        "content": [
            {"type": "text", "text": "read these"},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQK"}},
        ],
    }
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [good, pdf]})
    assert r.status_code == 201, r.text
    # As an append before the check could store them (no payload read yet, so no cache).
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        bad_image = _image("data:image/png;base64,x")
        bad_pdf = json.loads(json.dumps(pdf))
        bad_pdf["content"][1]["file"]["file_data"] = "data:application/pdf;base64,JVBER"
        for seq, body in ((1, bad_image), (2, bad_pdf)):
            await conn.execute(
                "UPDATE messages SET body = $1::jsonb WHERE session_id = $2 AND seq = $3",
                json.dumps(body),
                sid,
                seq,
            )
    finally:
        await conn.close()
    for fmt in ("openai", "anthropic", "responses"):
        r = await client.get(f"/sessions/{sid}/context", params={"format": fmt})
        assert r.status_code == 200, (fmt, r.text)
    payload = (await client.get(f"/sessions/{sid}/context?format=anthropic")).json()
    blocks = [b for m in payload["messages"] for b in m["content"]]
    assert not [b for b in blocks if b["type"] in ("image", "document")], blocks
    assert any("does not hold base64" in b.get("text", "") for b in blocks), blocks
