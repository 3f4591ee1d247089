"""API keys and tenants (SPEC §8): nobody let in without a key, no tenant sees another's data."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.auth import keys as keys_module
from app.core.settings import load_settings
from app.main import create_app
from tests.support.messages import call, result, user

ALPHA, BETA = "key-alpha-0123456789", "key-beta-9876543210"


async def _client(app: FastAPI, key: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://auth.test", headers=headers
    )


@pytest.fixture(scope="module")
async def keyed_app(database_url: str) -> AsyncIterator[FastAPI]:
    settings = load_settings(api_keys=f"{ALPHA}:alpha,{BETA}:beta")
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        yield app


@pytest.fixture
async def alpha(keyed_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with await _client(keyed_app, ALPHA) as c:
        yield c


@pytest.fixture
async def beta(keyed_app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with await _client(keyed_app, BETA) as c:
        yield c


ENDPOINTS = [
    ("GET", "/sessions"),
    ("PUT", "/sessions/x"),
    ("GET", "/sessions/x"),
    ("DELETE", "/sessions/x"),
    ("POST", "/sessions/x/messages"),
    ("GET", "/sessions/x/messages"),
    ("GET", "/sessions/x/messages/1"),
    ("GET", "/sessions/x/search?q=a"),
    ("GET", "/sessions/x/context"),
    ("POST", "/sessions/x/context"),
    ("GET", "/sessions/x/budget"),
    ("POST", "/sessions/x/budget"),
    ("POST", "/sessions/x/compact"),
    ("GET", "/sessions/x/compaction"),
    ("GET", "/sessions/x/events"),
    ("POST", "/sessions/x/lock"),
    ("POST", "/sessions/x/lock/renew"),
    ("DELETE", "/sessions/x/lock"),
    ("POST", "/tokens/count"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
    ("GET", "/no/such/path"),
]


@pytest.mark.parametrize(("method", "path"), ENDPOINTS)
@pytest.mark.parametrize("key", [None, "wrong-key", ""], ids=["missing", "wrong", "empty"])
async def test_every_endpoint_needs_a_key(
    keyed_app: FastAPI, method: str, path: str, key: str | None
) -> None:
    async with await _client(keyed_app, key) as c:
        r = await c.request(method, path, json={"messages": [user("x")]})
    assert r.status_code == 401, r.text
    assert r.json()["code"] == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"


async def test_unauthenticated_learns_nothing_even_about_huge_bodies(keyed_app: FastAPI) -> None:
    async with await _client(keyed_app, None) as c:
        r = await c.post("/sessions/x/messages", content=b"x" * (9 * 1024 * 1024))
        assert r.status_code == 401
        r = await c.post("/sessions/bad id!/messages", content=b"{not json")
        assert r.status_code == 401


async def test_health_and_readiness_stay_open(keyed_app: FastAPI) -> None:
    async with await _client(keyed_app, None) as c:
        assert (await c.get("/healthz")).status_code == 200
        assert (await c.get("/readyz")).status_code == 200


async def test_tenants_are_isolated_everywhere(
    alpha: httpx.AsyncClient, beta: httpx.AsyncClient, sid: str
) -> None:
    await alpha.put(f"/sessions/{sid}", json={"system_prompt": "alpha's secret prompt"})
    big = "secret output " * 8000  # over a sixteenth of the default budget: a preview
    r = await alpha.post(
        f"/sessions/{sid}/messages",
        json={
            "messages": [
                user("alpha's secret", id="a1"),
                call("c1"),
                result("c1", big),
                user("more"),
            ]
        },
    )
    assert r.status_code == 201
    preview = (await alpha.get(f"/sessions/{sid}/context")).json()
    assert any(f"/sessions/{sid}/messages/3" in str(m["content"]) for m in preview["messages"])

    probes: list[tuple[str, str, Any]] = [
        ("GET", f"/sessions/{sid}", None),
        ("GET", f"/sessions/{sid}/messages", None),
        ("GET", f"/sessions/{sid}/messages/1", None),
        ("GET", f"/sessions/{sid}/messages/3?line_start=1&line_end=2", None),
        ("GET", f"/sessions/{sid}/search?q=secret", None),
        ("GET", f"/sessions/{sid}/context", None),
        ("POST", f"/sessions/{sid}/context", {}),
        ("GET", f"/sessions/{sid}/budget", None),
        ("POST", f"/sessions/{sid}/budget", {"messages": [user("x")]}),
        ("GET", f"/sessions/{sid}/events", None),
        ("GET", f"/sessions/{sid}/compaction", None),
        ("POST", f"/sessions/{sid}/compact", {}),
        ("POST", f"/sessions/{sid}/lock", {"owner": "beta", "ttl_s": 5}),
        ("POST", f"/sessions/{sid}/lock/renew", {"lock_token": "t", "ttl_s": 5}),
        ("DELETE", f"/sessions/{sid}/lock", {"lock_token": "t"}),
        ("DELETE", f"/sessions/{sid}", None),
    ]
    missing = f"{sid}-never-created"
    for method, path, body in probes:
        r = await beta.request(method, path, json=body)
        ghost = await beta.request(method, path.replace(sid, missing), json=body)
        assert r.status_code == 404, (method, path, r.text)
        # Exactly as if it did not exist: same status, same code, same shape.
        assert r.json()["code"] == ghost.json()["code"] == "not_found"
        assert r.json()["detail"].replace(sid, "S") == ghost.json()["detail"].replace(missing, "S")
        assert "secret" not in r.text

    # The same id under beta is beta's own session.
    r = await beta.post(
        f"/sessions/{sid}/messages", json={"messages": [user("beta's own", id="a1")]}
    )
    assert r.status_code == 201 and r.json()["messages"][0]["seq"] == 1
    alpha_log = (await alpha.get(f"/sessions/{sid}/messages")).json()["messages"]
    beta_log = (await beta.get(f"/sessions/{sid}/messages")).json()["messages"]
    assert [m["content"] for m in beta_log] == ["beta's own"]
    assert alpha_log[0]["content"] == "alpha's secret" and len(alpha_log) == 4
    listed = {
        s["id"] for s in (await beta.get("/sessions", params={"limit": 1000})).json()["sessions"]
    }
    assert sid in listed
    alpha_view = (await alpha.get(f"/sessions/{sid}")).json()
    assert alpha_view["system_prompt"] == "alpha's secret prompt"


@pytest.fixture
async def db_keyed_app(
    make_database: Callable[[], str], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[FastAPI, str]]:
    """An app on a database of its own: keys stored there switch authentication on."""
    monkeypatch.setattr(keys_module, "CACHE_TTL_S", 0.0)
    url = make_database()
    app = create_app(load_settings(), database_url=url)
    async with app.router.lifespan_context(app):
        yield app, url


async def test_database_keys_switch_auth_on_and_revocation_works(
    db_keyed_app: tuple[FastAPI, str],
) -> None:
    app, _ = db_keyed_app
    async with await _client(app, None) as anon:
        assert (await anon.get("/sessions")).status_code == 200  # no keys yet: open (loopback)
        async with app.state.database.transaction() as db:
            created = await keys_module.create_key(db, "gamma", "ci")
        assert (await anon.get("/sessions")).status_code == 401
    async with await _client(app, created.key) as c:
        r = await c.post("/sessions/g1/messages", json={"messages": [user("hi")]})
        assert r.status_code == 201
        async with app.state.database.transaction() as db:
            rows = await keys_module.list_keys(db, "gamma")
            assert [k.id for k in rows] == [created.id]
            assert all(created.key not in (k.key_hash, k.id) for k in rows)  # only the hash is kept
            assert await keys_module.revoke_key(db, created.id)
        assert (await c.get("/sessions/g1")).status_code == 401
    async with await _client(app, None) as anon:
        # Revoking the last key locks everyone out; it never reopens the server.
        assert (await anon.get("/sessions")).status_code == 401
