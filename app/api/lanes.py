"""Lanes: the one HTTP entrance of each hot route, pure ASGI code ahead of the router.

Appends (app/api/append_lane.py) and payloads (app/api/context_lane.py) are most
of a busy server's requests, and Starlette's router and FastAPI's request
handling around them cost more CPU than the work (bench/throughput.py: the
server's CPU per request with and without lanes, docs/architecture.md). So a
lane answers *every* request of its route, good or bad, and calls the domain's
one service function for it (`messages.service.append_request`,
`context.service.payload_json`); the FastAPI route of the same path only
documents it in the OpenAPI description and is never called.

A lane sits innermost among the app's own middleware: request context,
authentication and the body limit have run, so the tenant is known. It reads
what FastAPI would read, as FastAPI reads it (the body's JSON, the session id
against the route's own `SessionId` type, a query through a pydantic model),
and raises the very exceptions FastAPI would raise for what it refuses; they are
rendered by the app's own exception handlers, so a client sees one wording on
every route. The scope's route is set to the route's, so the access log and the
latency histogram label the request as before.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute, APIRouter
from pydantic import TypeAdapter, ValidationError
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.deps import SessionId
from app.api.errors import error_response
from app.db.models import DEFAULT_TENANT

if TYPE_CHECKING:
    from app.compaction.runner import CompactionRunner
    from app.context.caches import Caches
    from app.core.settings import Settings
    from app.db.database import Database
    from app.messages.service import AppendGroups
    from app.observability.events import EventWriter

_JSON = re.compile(rb"application/(?:[!#$%&'*.^_`|~0-9a-z-]+\+)?json")
_HEADERS = [(b"content-type", b"application/json")]
_SESSION_ID: TypeAdapter[str] = TypeAdapter(SessionId)
_OBJECT: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])


@dataclass(frozen=True, slots=True)
class Services:
    """What the lanes use of the app's state, typed; the lifespan (app/main.py) sets it
    as `app.state.services`."""

    settings: Settings
    database: Database
    events: EventWriter
    append_groups: AppendGroups | None
    compactions: CompactionRunner | None
    # Assembly's results kept between payloads (app/context/caches.py), one per process.
    caches: Caches


class ClientGone(Exception):
    """The client disconnected before its body was read: nothing to answer."""


class Lane:
    """One route's entrance: requests whose path matches `pattern` (one group: the
    session id) and whose method is in `methods`; anything else goes on to `app`."""

    def __init__(
        self,
        app: ASGIApp,
        api: FastAPI,
        router: APIRouter,
        path: str,
        methods: Sequence[str],
    ) -> None:
        self.app = app
        self.api = api  # its state (Services) and its exception handlers
        self.pattern = re.compile(re.escape(path).replace(r"\{session_id\}", "([^/]+)"))
        self.routes = {m: find_route(router, path, m) for m in methods}

    async def answer(
        self, services: Services, scope: Scope, receive: Receive, tenant: str, sid: str
    ) -> tuple[int, bytes]:
        raise NotImplementedError

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = self.pattern.fullmatch(scope["path"]) if scope["type"] == "http" else None
        route = None if match is None else self.routes.get(scope["method"])
        if match is None or route is None:
            await self.app(scope, receive, send)
            return
        scope["route"] = route
        services: Services = self.api.state.services
        try:
            sid = session_id(match[1])
            status, content = await self.answer(services, scope, receive, tenant_of(scope), sid)
        except ClientGone:
            return
        except Exception as exc:
            await (await self.problem(scope, exc))(scope, receive, send)
            return
        await send_json(send, status, content)

    async def problem(self, scope: Scope, exc: Exception) -> Any:
        """The response the app's own exception handler gives for `exc`."""
        handlers = self.api.exception_handlers
        for cls in type(exc).__mro__:
            handler = handlers.get(cls)
            if handler is not None:
                response = handler(Request(scope), exc)
                return await response if inspect.isawaitable(response) else response
        return error_response(exc)


def session_id(raw: str) -> str:
    """The path's session id, checked by the routes' own `SessionId` type."""
    try:
        return _SESSION_ID.validate_python(raw)
    except ValidationError as exc:
        raise RequestValidationError(_located(exc, "path", "session_id")) from exc


async def read_body(receive: Receive) -> bytes:
    """The whole body; ClientGone when the client went away."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def json_object(scope: Scope, body: bytes) -> dict[str, Any]:
    """The body as a route's `Body()` dict parameter receives it, or what FastAPI raises
    for it: parsed only under a JSON content type, as on every other route, so a body
    without one gets the 422 that says so (app/api/errors.py)."""
    value: Any = body or None
    if body and _is_json(scope):
        try:
            value = json.loads(body)
        except json.JSONDecodeError as exc:
            error = {
                "type": "json_invalid",
                "loc": ("body", exc.pos),
                "msg": "JSON decode error",
                "input": {},
                "ctx": {"error": exc.msg},
            }
            raise RequestValidationError([error], body=exc.doc) from exc
        except Exception as exc:  # not UTF-8, nested too deep: FastAPI's bare 400
            raise HTTPException(400, "There was an error parsing the body") from exc
    if isinstance(value, dict):
        return value
    if value is None:
        missing = {"type": "missing", "loc": ("body",), "msg": "Field required", "input": None}
        raise RequestValidationError([missing])
    try:
        _OBJECT.validate_python(value)
    except ValidationError as exc:
        raise RequestValidationError(_located(exc, "body")) from exc
    raise AssertionError("only a dict validates as a JSON object")


def _is_json(scope: Scope) -> bool:
    for name, value in scope["headers"]:
        if name == b"content-type":
            kind = bytes(value).split(b";", 1)[0].strip().lower()
            return _JSON.fullmatch(kind) is not None
    return False


def _located(exc: ValidationError, *where: str) -> list[dict[str, Any]]:
    return [{**e, "loc": (*where, *e["loc"])} for e in exc.errors()]


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


class AnsweredByLane(RuntimeError):
    """A route whose lane answers every request was called: the app was built
    without its lanes (app/main.py installs them)."""
