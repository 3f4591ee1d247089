"""`/mcp`'s server is made on the first request (app/api/mcp.py): concurrent first
requests all get answers from one server, and the app stops it at shutdown."""

from __future__ import annotations

import asyncio

import httpx

from app.core.settings import Settings
from app.main import create_app
from tests.support.mcp_wire import HEADERS, INITIALIZE


async def test_concurrent_first_requests_share_one_server(
    settings: Settings, database_url: str
) -> None:
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        host = app.state.mcp
        assert host._server is None  # nothing made before the first request
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            answers = await asyncio.gather(
                *(c.post("/mcp", json=INITIALIZE, headers=HEADERS) for _ in range(4))
            )
            server = host._server
            assert server is not None
            running = [t for t in asyncio.all_tasks() if t.get_name() == "mcp-session-manager"]
            assert len(running) == 1
            again = await c.post("/mcp", json=INITIALIZE, headers=HEADERS)
        assert [r.status_code for r in answers] == [200] * 4 and again.status_code == 200
        assert {r.json()["result"]["serverInfo"]["name"] for r in answers} == {"contextd"}
        assert host._server is server  # made once
    assert host._task is not None and host._task.done()  # the lifespan stopped it
