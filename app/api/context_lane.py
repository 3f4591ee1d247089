"""The one entrance of `GET` and `POST /sessions/{id}/context` (app/api/lanes.py says why).

An agent asks for its payload before every model call, and a quarter of such a
request's CPU went to the framework around the handler under load (py-spy over
`bench/load.py`): Starlette's exception middleware and router, FastAPI's request
wrapper, dependency solving and validation of the query or body. The GET query is
read with the model the route documents (`schemas.ContextQuery`), the POST body
field by field (app/context/params.py); the routes in app/api/context.py document
both.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope

from app.api import lanes
from app.api.context import router
from app.api.schemas import ContextQuery
from app.context import params, service
from app.errors import invalid
from app.jsonsafe import sendable_problem

PATH = "/sessions/{session_id}/context"


def query_params(raw: bytes) -> params.ContextParams:
    """The GET parameters from a query string, decoded as Starlette decodes one
    (latin-1, then percent-decoding as UTF-8); the last of a repeated one counts, and
    unknown ones are ignored, as by FastAPI."""
    values = dict(parse_qsl(raw.decode("latin-1"), keep_blank_values=True))
    try:
        query = ContextQuery.model_validate(values)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("query", *e["loc"])} for e in exc.errors()]
        ) from exc
    return params.from_query(
        query.max_tokens,
        query.strategy,
        query.mode,
        query.reserve_output_tokens,
        query.format,
        query.previous_prefix_id,
        query.recall,
    )


def _check_sendable(call: params.ContextParams) -> None:
    """A call's own tools and dynamic context are hashed into the `prefix_id`, counted and
    sent on to the model: a lone surrogate escape (`"\\ud800"`), a non-finite number or
    nesting deeper than stored tools may have is a 422 naming the field, not the 500 (or
    the invalid JSON `NaN` in the payload) it gave. (This belongs with the body's other
    checks in app/context/params.py; it waits here for app/context's part of issue 24.)"""
    found = sendable_problem(call.tools, "tools") or sendable_problem(
        call.dynamic_context, "dynamic_context"
    )
    if found:
        raise invalid(*found)


class ContextLane(lanes.Lane):
    def __init__(self, app: ASGIApp, api: FastAPI) -> None:
        super().__init__(app, api, router, PATH, ("GET", "POST"))

    async def answer(
        self, services: lanes.Services, scope: Scope, receive: Receive, tenant: str, sid: str
    ) -> tuple[int, bytes]:
        if scope["method"] == "GET":
            call = query_params(scope["query_string"])
        else:
            call = params.from_body(lanes.json_object(scope, await lanes.read_body(receive)))
            _check_sendable(call)
        content = await service.payload_json(
            services.database, services.events, tenant, sid, call, services.settings
        )
        return 200, content
