"""A lane (app/api/lanes.py) alone, with a stand-in for the router behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send


class Downstream:
    """Stands in for the router: records what reaches it and answers 418."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, bytes]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        self.seen.append((scope["path"], body))
        await send({"type": "http.response.start", "status": 418, "headers": []})
        await send({"type": "http.response.body", "body": b""})


@asynccontextmanager
async def lane_alone(
    lane_class: Callable[..., ASGIApp], app: FastAPI
) -> AsyncIterator[tuple[httpx.AsyncClient, Downstream]]:
    """A client of the lane alone, with `Downstream` in the router's place."""
    downstream = Downstream()
    transport = httpx.ASGITransport(app=lane_class(downstream, api=app))
    async with httpx.AsyncClient(transport=transport, base_url="http://contextd.test") as c:
        yield c, downstream
