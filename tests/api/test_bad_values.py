"""Values of the wrong type or out of range that a fuzzer got past the checks: each is
now a 4xx naming the field, writes nothing, and nothing already stored can turn into
a 500 later."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import httpx
import pytest

from tests.support.messages import call, result, user


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
