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

import functools
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from app.api import lanes
from app.api.errors import error_response
from app.context import router as routes
from app.context.service import ContextParams
from app.limits import (
    DEFAULT_FORMAT,
    FORMATS,
    MODES,
    PREFIX_ID_MAX,
    PREFIX_ID_PATTERN,
    SESSION_ID_PATTERN,
    STRATEGY_NAME_MAX,
    TOKENS_MAX,
)

PATH = "/sessions/{session_id}/context"
_PATH = re.compile("/sessions/(" + SESSION_ID_PATTERN.strip("^$") + ")/context")
# Plain decimal digits only: the route's parsing also reads forms such as " 5" or
# "5.0", which go to it.
_DIGITS = re.compile(r"[0-9]{1,9}")
_PREFIX_ID = re.compile(PREFIX_ID_PATTERN)
_STRINGS = {"strategy": STRATEGY_NAME_MAX, "mode": None, "previous_prefix_id": PREFIX_ID_MAX}


def query_args(raw: bytes) -> dict[str, Any] | None:
    """The GET route's arguments from its query string (for `router.get_params`), or
    None: the route judges it. Decoded as Starlette decodes a query (latin-1, then
    percent-decoding as UTF-8)."""
    values: dict[str, str] = {}
    for name, value in parse_qsl(raw.decode("latin-1"), keep_blank_values=True):
        if name in values:
            return None
        values[name] = value
    fits, max_tokens = _number(values.pop("max_tokens", None), 1)
    fits_too, reserve = _number(values.pop("reserve_output_tokens", None), 0)
    if not (fits and fits_too):
        return None
    args: dict[str, Any] = {"max_tokens": max_tokens, "reserve_output_tokens": reserve or 0}
    for name, limit in _STRINGS.items():
        text = values.pop(name, None)
        if text is not None and (text not in MODES if limit is None else len(text) > limit):
            return None
        args[name] = text
    prefix_id = args["previous_prefix_id"]
    if prefix_id is not None and _PREFIX_ID.fullmatch(prefix_id) is None:
        return None
    args["format"] = values.pop("format", DEFAULT_FORMAT)
    if values or args["format"] not in FORMATS:
        return None
    return args


def _number(text: str | None, least: int) -> tuple[bool, int | None]:
    """(False, None) when the route must judge it, else (True, the value or None)."""
    if text is None:
        return True, None
    if _DIGITS.fullmatch(text) is None:
        return False, None
    value = int(text)
    return (True, value) if least <= value <= TOKENS_MAX else (False, None)


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
        params: Callable[[], ContextParams]
        if method == "GET":
            args = query_args(scope["query_string"])
            if args is None:
                await self.app(scope, receive, send)
                return
            params = functools.partial(routes.get_params, **args)
        else:
            body = await lanes.json_request(self.app, scope, receive, send)
            if body is None:
                return
            params = functools.partial(routes.post_params, body)
        scope["route"] = self._route(method)
        try:  # the parameters' own checks raise the problems the route's raise
            content = await routes.answer(
                self.api.state, lanes.tenant_of(scope), match[1], params()
            )
        except Exception as exc:
            await error_response(exc)(scope, receive, send)
            return
        await lanes.send_json(send, 200, content)

    def _route(self, method: str) -> APIRoute:
        route = self.routes.get(method)
        if route is None:
            route = self.routes[method] = lanes.find_route(routes.router, PATH, method)
        return route
