"""The payload's own lane: `GET` and `POST /sessions/{id}/context` ahead of the router.

An agent asks for its payload before every model call, and a quarter of such a
request's CPU went to the framework around the handler under load (py-spy over
`bench/load.py`): Starlette's exception middleware and router, FastAPI's request
wrapper, dependency solving and validation of the query or body. The rules every
lane keeps are in app/api/lanes.py. This one answers a POST whose body decodes to
a JSON object, and a GET whose query holds each known parameter at most once, in
the form and within the bounds the route's own parsing accepts; anything else (an
unknown or repeated parameter, a number the route would refuse or read otherwise)
goes to the route, which answers it as it always has.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api import lanes
from app.api.errors import error_response
from app.context import router as routes
from app.context.formats import DEFAULT_FORMAT, FORMATS
from app.context.service import ContextParams
from app.sessions.schemas import SESSION_ID_PATTERN

PATH = "/sessions/{session_id}/context"
_PATH = re.compile("/sessions/(" + SESSION_ID_PATTERN.strip("^$") + ")/context")
# Plain decimal digits only: the route's parsing also reads forms such as " 5" or
# "5.0", which go to it.
_DIGITS = re.compile(r"[0-9]{1,9}")
_PREFIX_ID = re.compile(routes.PREFIX_ID_PATTERN)
_STRINGS = {
    "strategy": routes.STRATEGY_MAX,
    "mode": routes.MODE_MAX,
    "previous_prefix_id": routes.PREFIX_ID_MAX,
}


def query_params(raw: bytes) -> ContextParams | None:
    """The GET route's parameters from its query string, or None: the route judges it.

    Decoded as Starlette decodes a query (latin-1, then percent-decoding as UTF-8)."""
    values: dict[str, str] = {}
    for name, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
        if name in values:
            return None
        values[name] = value
    fits, max_tokens = _number(values.pop("max_tokens", None), 1)
    fits_too, reserve = _number(values.pop("reserve_output_tokens", None), 0)
    if not (fits and fits_too):
        return None
    strings: dict[str, Any] = {}
    for name, limit in _STRINGS.items():
        text = values.pop(name, None)
        if text is not None and len(text) > limit:
            return None
        strings[name] = text
    prefix_id = strings["previous_prefix_id"]
    if prefix_id is not None and _PREFIX_ID.fullmatch(prefix_id) is None:
        return None
    fmt = values.pop("format", DEFAULT_FORMAT)
    if values or fmt not in FORMATS:
        return None
    return routes.get_params(
        max_tokens,
        strings["strategy"],
        strings["mode"],
        reserve or 0,
        fmt,
        strings["previous_prefix_id"],
    )


def _number(text: str | None, least: int) -> tuple[bool, int | None]:
    """(False, None) when the route must judge it, else (True, the value or None)."""
    if text is None:
        return True, None
    if _DIGITS.fullmatch(text) is None:
        return False, None
    value = int(text)
    return (True, value) if least <= value <= routes.TOKENS_MAX else (False, None)


class ContextLane:
    def __init__(self, app: ASGIApp, api: FastAPI) -> None:
        self.app = app
        self.api = api  # its state: settings, database, events
        self.routes: dict[str, APIRoute] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _PATH.fullmatch(scope["path"]) if scope["type"] == "http" else None
        method = scope.get("method")
        if match is None or method not in ("GET", "POST"):
            await self.app(scope, receive, send)
            return
        if method == "GET":
            await self._get(scope, receive, send, match[1])
        else:
            await self._post(scope, receive, send, match[1])

    async def _get(self, scope: Scope, receive: Receive, send: Send, sid: str) -> None:
        try:
            params = query_params(scope["query_string"])
        except Exception as exc:  # the parameters' own checks: the same problem as the route's
            await self._answer(scope, receive, send, sid, exc)
            return
        if params is None:
            await self.app(scope, receive, send)
            return
        await self._answer(scope, receive, send, sid, params)

    async def _post(self, scope: Scope, receive: Receive, send: Send, sid: str) -> None:
        parsed = await lanes.json_request(self.app, scope, receive, send)
        if parsed is None:
            return
        try:
            params = routes.post_params(parsed)
        except Exception as exc:
            await self._answer(scope, receive, send, sid, exc)
            return
        await self._answer(scope, receive, send, sid, params)

    async def _answer(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        sid: str,
        params: ContextParams | Exception,
    ) -> None:
        method = scope["method"]
        route = self.routes.get(method)
        if route is None:
            route = self.routes[method] = lanes.find_route(routes.router, PATH, method)
        scope["route"] = route
        try:
            if isinstance(params, Exception):
                raise params
            content = await routes.answer(self.api.state, lanes.tenant_of(scope), sid, params)
        except Exception as exc:
            await error_response(exc)(scope, receive, send)
            return
        await lanes.send_json(send, 200, content)
