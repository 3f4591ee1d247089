from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from pydantic_core import to_json

from app.api.deps import SessionId, get_tenant
from app.api.openapi import answers, request_body
from app.api.schemas import ContextIn, ContextPayload
from app.context import service, validate_context_params
from app.errors import invalid
from app.limits import (
    DEFAULT_FORMAT,
    FORMATS,
    PREFIX_ID_MAX,
    PREFIX_ID_PATTERN,
    STRATEGY_NAME_MAX,
    TOKENS_MAX,
    Format,
    Mode,
)

router = APIRouter(tags=["context"])
_PREFIX_ID = re.compile(PREFIX_ID_PATTERN)

POST_FIELDS = (
    "system",
    "tools",
    "dynamic_context",
    "mode",
    "max_tokens",
    "strategy",
    "reserve_output_tokens",
    "preview_limit_tokens",
    "format",
    "previous_prefix_id",
)

FORMAT_DOC = (
    "openai (default): Chat Completions `messages`; responses: Responses API `input` items; "
    "anthropic: Messages API `system` + `messages` with a cache_control breakpoint"
)

PREFIX_ID_DOC = (
    "the `prefix_id` of this stream's previous payload: makes `usage.stable_prefix_tokens` "
    "exact (without it the previous call is assumed to lack only the newest step)"
)


@router.get(
    "/sessions/{session_id}/context",
    summary="The assembled payload",
    responses=answers({200: (ContextPayload, "the payload in the asked format")}),
)
async def get_context(
    session_id: SessionId,
    request: Request,
    max_tokens: Annotated[int | None, Query(ge=1, le=TOKENS_MAX)] = None,
    strategy: Annotated[str | None, Query(max_length=STRATEGY_NAME_MAX)] = None,
    mode: Mode | None = None,
    reserve_output_tokens: Annotated[int, Query(ge=0, le=TOKENS_MAX)] = 0,
    format: Annotated[Format, Query(description=FORMAT_DOC)] = DEFAULT_FORMAT,
    previous_prefix_id: Annotated[
        str | None,
        Query(max_length=PREFIX_ID_MAX, pattern=PREFIX_ID_PATTERN, description=PREFIX_ID_DOC),
    ] = None,
) -> Response:
    """From the session's stored system prompt and tools. `messages` goes straight to
    `chat.completions.create(messages=...)`; `decisions` say why each seq is kept,
    previewed, cut, dropped or excluded. `format` picks the provider's shape."""
    # Most calls never get here: app/context/lane.py answers them ahead of the router.
    params = get_params(
        max_tokens, strategy, mode, reserve_output_tokens, format, previous_prefix_id
    )
    return _response(await answer(request.app.state, await get_tenant(request), session_id, params))


def get_params(
    max_tokens: int | None,
    strategy: str | None,
    mode: str | None,
    reserve_output_tokens: int,
    format: str,
    previous_prefix_id: str | None,
) -> service.ContextParams:
    """The GET route's parameters, once FastAPI (or the lane) has parsed the query."""
    validate_context_params(
        strategy=strategy,
        max_tokens=max_tokens,
        reserve_output_tokens=reserve_output_tokens if max_tokens else None,
        mode=mode,
    )
    return service.ContextParams(
        max_tokens=max_tokens,
        strategy=strategy,
        mode=mode,
        reserve_output_tokens=reserve_output_tokens,
        format=format,
        previous_prefix_id=previous_prefix_id,
    )


@router.post(
    "/sessions/{session_id}/context",
    summary="The assembled payload, with per-call parts",
    openapi_extra=request_body(ContextIn),
    responses=answers({200: (ContextPayload, "the payload in the asked format")}),
)
async def post_context(
    session_id: SessionId,
    request: Request,
    # Validated by hand (validate_context_params); the documented schema is ContextIn's.
    body: Annotated[dict[str, Any], Body()],
) -> Response:
    """Per-call `system` (string or system messages) and `tools` replace the session's;
    `dynamic_context` (strings or messages: task goal, retrieved knowledge) comes after
    the system block and before the summary and history."""
    # Most calls never get here: app/context/lane.py answers them ahead of the router.
    params = post_params(body)
    return _response(await answer(request.app.state, await get_tenant(request), session_id, params))


def post_params(body: dict[str, Any]) -> service.ContextParams:
    """The POST route's parameters from its JSON object body, checked field by field."""
    unknown = sorted(set(body) - set(POST_FIELDS))
    if unknown:
        raise invalid(unknown[0], "is not a field of a context request")
    fmt = body.get("format", DEFAULT_FORMAT)
    if fmt not in FORMATS:
        raise invalid("format", f"must be one of {', '.join(FORMATS)}")
    previous = body.get("previous_prefix_id")
    if previous is not None and (
        not isinstance(previous, str)
        or len(previous) > PREFIX_ID_MAX
        or _PREFIX_ID.fullmatch(previous) is None
    ):
        raise invalid(
            "previous_prefix_id",
            f"must be a string of at most {PREFIX_ID_MAX} printable ASCII characters",
        )
    validate_context_params(
        **{k: body.get(k) for k in POST_FIELDS if k not in ("format", "previous_prefix_id")}
    )
    return service.ContextParams(
        max_tokens=body.get("max_tokens"),
        strategy=body.get("strategy"),
        mode=body.get("mode"),
        reserve_output_tokens=body.get("reserve_output_tokens") or 0,
        preview_limit_tokens=body.get("preview_limit_tokens"),
        system=body.get("system"),
        tools=body.get("tools"),
        dynamic_context=list(body.get("dynamic_context") or []),
        format=fmt,
        previous_prefix_id=previous,
    )


async def answer(state: Any, tenant: str, session_id: str, params: service.ContextParams) -> bytes:
    """The payload as JSON, for the routes and the lane alike. Encoded once by pydantic-core
    (the same encoder the dict response model used, without its validation pass)."""
    body = await service.payload(
        state.database, state.events, tenant, session_id, params, state.settings
    )
    return to_json(body)


def _response(content: bytes) -> Response:
    return Response(content, media_type="application/json")
