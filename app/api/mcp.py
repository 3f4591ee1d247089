"""`/mcp`: the route, and the host that runs the MCP server (`app/api/mcp_server.py`).

The server, and the `mcp` SDK with it, is made on the first request to `/mcp`, not
when the app is: importing the SDK builds all of its pydantic models, CPU that every
`contextd serve` process and `--workers` child would pay at start-up for a route
most deployments never call.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

PATH = "/mcp"
_NO_STREAM = JSONResponse(
    {
        "type": "about:blank",
        "title": "Method Not Allowed",
        "status": 405,
        "detail": "GET /mcp: this server offers no event stream; send JSON-RPC requests by POST",
    },
    status_code=405,
    headers={"Allow": "POST, DELETE"},
    media_type="application/problem+json",
)


def install(app: FastAPI) -> Host:
    """The host of `app`'s MCP server, its route added to `app`; the lifespan stops it."""
    host = Host(app)
    app.router.routes.append(Route(PATH, endpoint=host))
    return host


class Host:
    """Makes the MCP server on the first request and runs the SDK's session manager,
    whose task group must be entered and left by one task: a task of its own, stopped
    by the app's lifespan (which the tests, like any ASGI host, may enter and leave
    from different tasks)."""

    def __init__(self, app: FastAPI) -> None:
        self._app = app
        self._server: MCPServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._making = asyncio.Lock()
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()

    async def start(self) -> None:
        if self._task is None:
            async with self._making:
                if self._task is None:
                    # In a thread: on the loop, the import would stall every other
                    # request of this process until it ended.
                    module = await asyncio.to_thread(importlib.import_module, "app.api.mcp_server")
                    self._server = module.build(self._app)
                    self._task = asyncio.create_task(
                        self._run(self._server), name="mcp-session-manager"
                    )
        ready = asyncio.create_task(self._ready.wait())
        await asyncio.wait({ready, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if not self._ready.is_set():
            ready.cancel()
            await self._task  # raises what stopped it

    async def stop(self) -> None:
        if self._task is not None:
            self._stop.set()
            await self._task

    async def _run(self, server: MCPServer) -> None:
        async with server.session_manager.run():
            self._ready.set()
            await self._stop.wait()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") == "GET":
            # Stateless, the server has nothing to push: the SDK answered GET with an event
            # stream of pings that never ended, holding a connection per caller. The MCP
            # spec's other answer for a server without one is a 405.
            await _NO_STREAM(scope, receive, send)
            return
        await self.start()
        assert self._server is not None  # made by start()
        await self._server.session_manager.handle_request(scope, receive, send)
