"""What the lanes share: the hot routes answered by pure ASGI code ahead of the router.

A lane (app/messages/lane.py for appends, app/context/lane.py for payloads) sits
innermost among the app's own middleware: request context, authentication and the
body limit have run, so the tenant is known and the body read. It takes only
requests its route would have parsed the same way and hands everything else to the
router unchanged, so a client sees one behaviour whichever answered. Errors become
the problems the app's exception handlers give (app/api/errors.py), and the scope's
route is set to the route's, so the access log and the latency histogram label the
request as before.
"""

from __future__ import annotations

import json
import re
from typing import Any

from fastapi.routing import APIRoute, APIRouter
from starlette.types import ASGIApp, Receive, Scope, Send

from app.models import DEFAULT_TENANT
from app.observability.middleware import replay_body

_JSON = re.compile(rb"application/(?:[!#$%&'*.^_`|~0-9a-z-]+\+)?json")
_HEADERS = [(b"content-type", b"application/json")]


async def json_request(
    app: ASGIApp, scope: Scope, receive: Receive, send: Send
) -> dict[str, Any] | None:
    """The request's body when it is a JSON object the route would parse the same way.
    Otherwise None: the request went on to `app` (the router) with its body, or the
    client went away."""
    body = await read_body(receive)
    if body is None:
        return None
    parsed = json_object(scope, body)
    if parsed is None:
        await app(scope, replay_body(body, receive), send)
    return parsed


async def read_body(receive: Receive) -> bytes | None:
    """The whole body, or None when the client went away."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def json_object(scope: Scope, body: bytes) -> dict[str, Any] | None:
    """The body as FastAPI would hand it to the route, when that is a JSON object."""
    if not body:
        return None
    # FastAPI (strict content type) parses a body as JSON only under a JSON content
    # type; without one the route answers the 422 that says so.
    kinds = [
        bytes(v).split(b";", 1)[0].strip().lower()
        for n, v in scope["headers"]
        if n == b"content-type"
    ]
    if not kinds or _JSON.fullmatch(kinds[0]) is None:
        return None
    try:
        parsed = json.loads(body)
    except Exception:  # malformed, or nested too deep: the route's 422 says which
        return None
    return parsed if isinstance(parsed, dict) else None


def tenant_of(scope: Scope) -> str:
    """The tenant authentication put in the scope's state (app/auth/middleware.py)."""
    tenant: str | None = scope.get("state", {}).get("tenant")
    return tenant or DEFAULT_TENANT


async def send_json(send: Send, status: int, content: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*_HEADERS, (b"content-length", b"%d" % len(content))],
        }
    )
    await send({"type": "http.response.body", "body": content})


def find_route(router: APIRouter, path: str, method: str) -> APIRoute:
    for route in router.routes:
        if isinstance(route, APIRoute) and route.path == path and method in (route.methods or ()):
            return route
    raise LookupError(f"the router has no {method} {path} route")
