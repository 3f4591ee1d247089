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
from app.api.models.requests import ContextQuery
from app.context import params, service
from app.core.errors import invalid

PATH = "/sessions/{session_id}/context"


def query_params(raw: bytes) -> params.ContextParams:
    """The GET parameters from a query string, decoded as Starlette decodes one
    (latin-1, then percent-decoding as UTF-8); the last of a repeated one counts, and an
    unknown one is a 422 naming it."""
    values = dict(parse_qsl(raw.decode("latin-1"), keep_blank_values=True))
    unknown = sorted(set(values) - set(ContextQuery.model_fields))
    if unknown:
        raise invalid(unknown[0][:64], "is not a parameter of a context request")
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
        query.preview_limit_tokens,
    )


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
        content = await service.payload_json(
            services.database,
            services.events,
            tenant,
            sid,
            call,
            services.settings,
            services.caches,
        )
        return 200, content
