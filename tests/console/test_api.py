"""The console's page and its JSON endpoints (/ui, /ui/api/*), over the in-process app."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.core.settings import load_settings
from app.main import create_app
from tests.support.console_data import turn

ALPHA, BETA = "key-console-alpha-01234", "key-console-beta-56789"


@pytest.fixture(scope="module")
async def keyed_app(database_url: str) -> AsyncIterator[FastAPI]:
    settings = load_settings(
        api_keys=f"{ALPHA}:c-alpha,{BETA}:c-beta", run_compactions_in_process=False
    )
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        yield app


def _client(app: FastAPI, key: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://console.test", headers=headers
    )


async def test_the_page_needs_no_key_but_its_data_does(keyed_app: FastAPI) -> None:
    async with _client(keyed_app) as c:
        page = await c.get("/ui/")
        assert page.status_code == 200
        assert 'src="/ui/static/console.js"' in page.text
        # Nothing but its own files: no inline script, no third-party origin.
        assert "script-src 'self'" in page.headers["content-security-policy"]
        js = await c.get("/ui/static/console.js")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        assert (await c.get("/ui")).status_code == 307
        for path in ("/ui/api/me", "/ui/api/sessions", "/ui/api/queue", "/ui/static/x.js"):
            r = await c.get(path)
            assert r.status_code == 401, path
    async with _client(keyed_app, BETA) as c:
        assert (await c.get("/ui/api/me")).json() == {"tenant": "c-beta", "keys_required": True}


async def test_without_keys_the_console_serves_the_default_tenant(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/ui/api/me")
    assert r.json() == {"tenant": "default", "keys_required": False}


async def test_sessions_page_through_by_id_and_by_tokens(keyed_app: FastAPI) -> None:
    run = uuid.uuid4().hex[:8]
    ids = [f"pg-{run}-{i}" for i in range(5)]
    async with _client(keyed_app, ALPHA) as c:
        for n, sid in enumerate(ids):
            (await c.put(f"/sessions/{sid}", json={})).raise_for_status()
            batch = [m for k in range(n) for m in turn(k)]
            if batch:
                (
                    await c.post(f"/sessions/{sid}/messages", json={"messages": batch})
                ).raise_for_status()

        async def walk(sort: str) -> list[str]:
            seen: list[str] = []
            cursor = None
            while True:
                params: dict[str, str | int] = {"limit": 2, "sort": sort, "prefix": f"pg-{run}-"}
                if cursor:
                    params["cursor"] = cursor
                body = (await c.get("/ui/api/sessions", params=params)).json()
                assert len(body["sessions"]) <= 2
                seen += [s["id"] for s in body["sessions"]]
                cursor = body["next_cursor"]
                if cursor is None:
                    return seen

        assert await walk("id") == ids
        # Largest first: the session with the most turns leads.
        assert await walk("tokens") == list(reversed(ids))

        body = (await c.get("/ui/api/sessions", params={"prefix": ids[2]})).json()
        row = body["sessions"][0]
        assert [s["id"] for s in body["sessions"]] == [ids[2]]
        assert row["messages"] == 8 and row["last_seq"] == 8 and row["watermark"] == 0
        assert row["budget"]["status"] == "ok" and row["last_compaction"] is None

        id_cursor = (await c.get("/ui/api/sessions", params={"limit": 1})).json()["next_cursor"]
        for bad in ("not-a-cursor!", id_cursor):  # an id cursor is no tokens cursor
            r = await c.get("/ui/api/sessions", params={"sort": "tokens", "cursor": bad})
            assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "cursor"
        r = await c.get("/ui/api/sessions", params={"sort": "size"})
        assert r.status_code == 422 and r.json()["errors"][0]["loc"] == "sort"
    # Another tenant's sessions are not listed.
    async with _client(keyed_app, BETA) as c:
        body = (await c.get("/ui/api/sessions", params={"prefix": f"pg-{run}-"})).json()
        assert body["sessions"] == []


async def test_series_is_downsampled_and_tenant_scoped(keyed_app: FastAPI) -> None:
    sid = f"series-{uuid.uuid4().hex[:8]}"
    async with _client(keyed_app, ALPHA) as c:
        (await c.put(f"/sessions/{sid}", json={})).raise_for_status()
        batch = [m for k in range(30) for m in turn(k)]  # 120 messages
        (await c.post(f"/sessions/{sid}/messages", json={"messages": batch})).raise_for_status()
        body = (await c.get(f"/ui/api/sessions/{sid}/series", params={"points": 10})).json()
        seqs = [p["seq"] for p in body["points"]]
        assert len(seqs) <= 10 and seqs[0] == 1 and seqs[-1] == 120
        assert seqs == sorted(seqs)
        tokens = [p["log_tokens"] for p in body["points"]]
        assert tokens == sorted(tokens) and tokens[0] > 0
        full = (await c.get(f"/sessions/{sid}")).json()
        assert body["points"][-1]["tokens"] == full["budget"]["current_tokens"]
        assert body["compactions"] == []
        r = await c.get(f"/ui/api/sessions/{sid}/series", params={"points": 1})
        assert r.status_code == 422
    async with _client(keyed_app, BETA) as c:
        r = await c.get(f"/ui/api/sessions/{sid}/series")
        assert r.status_code == 404 and r.json()["code"] == "not_found"


async def test_queue_counts_pending_jobs_of_the_callers_tenant(keyed_app: FastAPI) -> None:
    sid = f"queue-{uuid.uuid4().hex[:8]}"
    async with _client(keyed_app, BETA) as c:
        before = (await c.get("/ui/api/queue")).json()["tenants"][0]
        (await c.put(f"/sessions/{sid}", json={})).raise_for_status()
        batch = [m for k in range(20) for m in turn(k)]
        (await c.post(f"/sessions/{sid}/messages", json={"messages": batch})).raise_for_status()
        # No runner in this app: the job stays pending.
        r = await c.post(f"/sessions/{sid}/compact", json={"force": True})
        assert r.status_code == 202
        after = (await c.get("/ui/api/queue")).json()
        row = after["tenants"][0]
        assert row["tenant"] == "c-beta"
        assert row["pending"] + row["running"] == before["pending"] + before["running"] + 1
        assert row["oldest_pending_age_s"] is not None and row["oldest_pending_age_s"] >= 0
        # No `contextd worker` runs beside this app; the test settings run none in process.
        assert after["workers"] == 0 and after["compactions_in_process"] is False
    async with _client(keyed_app, ALPHA) as c:
        other = (await c.get("/ui/api/queue")).json()
        assert other["tenants"][0]["tenant"] == "c-alpha"
        assert all(e["session_id"] != sid for e in other["events"])
