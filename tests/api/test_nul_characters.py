"""NUL characters (U+0000), which PostgreSQL text and JSONB cannot hold, wherever text can
hide in a request: every string and every object key of an append, of a session's
settings, of the other bodies and of the query and path parameters. What is stored is
refused with a 422 naming the exact field and writes nothing; nothing is ever a 500.
What is only counted or sent on (a payload's dynamic context, a token count) may carry
one, as JSON does. A seeded loop puts the NUL at the start, the middle and the end of
each string, among other characters."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.support.messages import log_of

Path = tuple[str | int, ...]

# A batch with every kind of place text can hide in: content parts, names, tool calls
# and their arguments, tool outputs, contextd's own fields, nested metadata.
BATCH: list[dict[str, Any]] = [
    {
        "role": "system",
        "content": "historical instructions",
        "name": "setup",
        "metadata": {"kind": "note"},
    },
    {
        "role": "user",
        "id": "u-1",
        "name": "alice",
        "content": [
            {"type": "text", "text": "look at this 图"},
            {
                "type": "image_url",
                "image_url": {"url": "https://example.com/a.png", "detail": "low"},
            },
        ],
        "mode": "agent",
        "run_id": "run-1",
        "metadata": {"source": "cli", "tags": ["a", "b"], "nested": {"deep": ["x", {"k": "v"}]}},
    },
    {
        "role": "assistant",
        "content": "Reading it.",
        "name": "bot",
        "tool_calls": [
            {
                "id": "call-1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "src/a.py"}'},
            }
        ],
    },
    {
        "role": "tool",
        "tool_call_id": "call-1",
        "name": "read_file",
        "content": [{"type": "text", "text": "def a(): pass"}],
        "error": {"type": "timeout", "message": "took too long"},
    },
    {"role": "assistant", "content": "Done.", "refusal": None},
]


def _leaves(value: Any, path: Path = ()) -> Iterator[tuple[Path, bool]]:
    """Every string's path, and every object key's (True: the key itself)."""
    if isinstance(value, str):
        yield path, False
    elif isinstance(value, dict):
        for k, v in value.items():
            yield (*path, k), True
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))


def _loc(path: Path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def _with_nul(s: str, rng: random.Random) -> str:
    noise = "".join(rng.choice("aZ9 é中\u200b\n") for _ in range(rng.randint(0, 3)))
    at = rng.choice([0, len(s) // 2, len(s)])
    return s[:at] + noise + "\x00" + s[at:]


def _poisoned(doc: Any, path: Path, key: bool, rng: random.Random) -> tuple[Any, Path]:
    """`doc` with a NUL in the string (or the key) at `path`, and the path as it now reads."""
    doc = copy.deepcopy(doc)
    parent = doc
    for p in path[:-1]:
        parent = parent[p]
    last = path[-1]
    if key:
        assert isinstance(last, str)
        bad = _with_nul(last, rng)
        parent[bad] = parent.pop(last)
        return doc, (*path[:-1], bad)
    parent[last] = _with_nul(parent[last], rng)
    return doc, path


def _cases(doc: Any, seed: int) -> list[tuple[Any, str]]:
    """Each string and key of `doc` with a NUL, twice, and the loc that names it. A
    top-level key with a NUL is an unknown field, named as such."""
    rng = random.Random(seed)
    out = []
    for path, key in _leaves(doc):
        for _ in range(2):
            bad, where = _poisoned(doc, path, key, rng)
            out.append((bad, _loc(where)))
    return out


def _refused(r: httpx.Response, loc: str) -> None:
    assert r.status_code == 422, (loc, r.status_code, r.text[:400])
    body = r.json()
    assert body["code"] == "validation_error", body
    assert body["errors"][0]["loc"] == loc, (loc, body["errors"])
    if "." in loc or "[" in loc:  # not a top-level key: an unknown field there
        assert "NUL" in body["errors"][0]["msg"], body["errors"]


async def test_every_string_and_key_of_an_append_with_a_nul_is_refused_by_name(
    client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": BATCH})
    assert r.status_code == 201, r.text  # the batch itself is fine
    before = await log_of(client, sid)
    cases = _cases({"messages": BATCH}, seed=1)
    assert len(cases) > 100
    for body, loc in cases:
        # A fresh session too: its first append takes another path (it creates the row).
        for target in (sid, f"{sid}-fresh"):
            r = await client.post(f"/sessions/{target}/messages", json=body)
            _refused(r, loc)
    assert await log_of(client, sid) == before
    assert (await client.get(f"/sessions/{sid}-fresh")).status_code == 404


SETTINGS: dict[str, Any] = {
    "model": "gpt-4o",
    "system_prompt": "You are careful. 小心。",
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string", "description": "where"}},
                    "required": ["path"],
                },
            },
        }
    ],
    "strategy": "sliding_window",
    "anchors": ["never deploy on Fridays"],
    "compaction": {"keep_recent_ratio": 0.3},
    "metadata": {"team": "infra", "labels": ["x"], "owner": {"name": "bo"}},
}


async def test_every_string_and_key_of_session_settings_with_a_nul_is_refused_by_name(
    client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.put(f"/sessions/{sid}", json=SETTINGS)
    assert r.status_code in (200, 201), r.text
    before = (await client.get(f"/sessions/{sid}")).json()
    for body, loc in _cases(SETTINGS, seed=2):
        r = await client.put(f"/sessions/{sid}", json=body)
        assert r.status_code == 422, (loc, r.status_code, r.text[:400])
        assert r.json()["errors"][0]["loc"] == loc, (loc, r.json()["errors"])
        r = await client.put(f"/sessions/{sid}-fresh", json=body)
        assert r.status_code == 422, (loc, r.text[:400])
    after = (await client.get(f"/sessions/{sid}")).json()
    assert {k: after[k] for k in SETTINGS} == {k: before[k] for k in SETTINGS}
    assert (await client.get(f"/sessions/{sid}-fresh")).status_code == 404


async def test_nul_in_the_other_bodies_is_a_4xx_or_passes_through_never_a_500(
    client: httpx.AsyncClient, sid: str
) -> None:
    await client.post(f"/sessions/{sid}/messages", json={"messages": BATCH})
    stored = {
        # The lease's owner is stored; tokens are compared, and a NUL one can match nothing.
        ("POST", "lock"): {"owner": "agent-1", "ttl_s": 30},
        ("POST", "lock/renew"): {"lock_token": "tok", "ttl_s": 30},
        ("DELETE", "lock"): {"lock_token": "tok"},
        ("POST", "usage"): {"input_tokens": 10, "uncalibrated_input_tokens": 9, "lock_token": "t"},
        ("POST", "clear"): {"lock_token": "tok"},
        ("POST", "compact"): {"lock_token": "tok"},
    }
    for (method, tail), doc in stored.items():
        for body, loc in _cases(doc, seed=3):
            r = await client.request(method, f"/sessions/{sid}/{tail}", json=body)
            assert 400 <= r.status_code < 500, (method, tail, loc, r.status_code, r.text[:300])
            if r.status_code == 422:
                locs = [e["loc"] for e in r.json()["errors"]]
                assert loc in locs, (tail, loc, locs)
    # Counted or sent on, never stored: JSON carries a NUL, and so do these.
    sent = {
        "context": {
            "system": "be brief",
            "tools": SETTINGS["tools"],
            "dynamic_context": ["today is Monday", {"role": "user", "content": "note"}],
            "mode": "agent",
            "strategy": "sliding_window",
            "format": "openai",
        },
        "budget": {"messages": BATCH[1:3]},
    }
    for tail, doc in sent.items():
        for body, loc in _cases(doc, seed=4):
            # A NUL in a key the protocol fixes (`type`) makes that key missing: a 422
            # for the shape, not the NUL. Either way a 4xx, not a 500.
            r = await client.post(f"/sessions/{sid}/{tail}", json=body)
            assert r.status_code < 500, (tail, loc, r.status_code, r.text[:300])
    count = {"model": "gpt-4o", "text": "hello", "messages": BATCH, "tools": SETTINGS["tools"]}
    for body, loc in _cases(count, seed=5):
        r = await client.post("/tokens/count", json=body)
        assert r.status_code < 500, (loc, r.status_code, r.text[:300])
    assert [m["id"] for m in await log_of(client, sid)][1] == "u-1"  # nothing else written


QUERIES: dict[str, dict[str, str]] = {
    "": {"cursor": "eyJ4IjogMX0", "prefix": "s-"},
    "/{sid}/messages": {"order": "asc", "lock_token": "t", "before_seq": "3"},
    "/{sid}/messages/2": {"line_start": "1"},
    "/{sid}/search": {"q": "look", "roles": "user,tool"},
    "/{sid}/context": {"strategy": "sliding_window", "mode": "agent", "format": "openai"},
    "/{sid}/events": {"type": "messages.appended"},
    "/{sid}/compaction": {},
    "/{sid}/budget": {},
}


@pytest.mark.parametrize("where", list(QUERIES), ids=[w or "/" for w in QUERIES])
async def test_nul_in_query_and_path_parameters_is_never_a_500(
    client: httpx.AsyncClient, sid: str, where: str
) -> None:
    await client.post(f"/sessions/{sid}/messages", json={"messages": BATCH})
    url = "/sessions" + where.replace("{sid}", sid)
    rng = random.Random(6)
    for name, value in QUERIES[where].items():
        for _ in range(3):
            # The others left out: each may be refused for itself (a made-up cursor).
            params = {name: _with_nul(value, rng)}
            if "search" in where and name != "q":
                params["q"] = "look"
            r = await client.get(url, params=params)
            assert r.status_code < 500, (url, name, r.status_code, r.text[:300])
            if r.status_code == 422:
                locs = [e["loc"] for e in r.json()["errors"]]
                assert name in locs, (url, name, locs)
    if where:
        r = await client.get(url.replace(sid, quote(f"{sid}\x00")))
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "session_id", r.text
