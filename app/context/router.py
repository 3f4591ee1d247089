from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from pydantic_core import to_json

from app.api.deps import SessionId, get_tenant
from app.api.openapi import answers, request_body
from app.api.schemas import ContextIn, ContextPayload
from app.context import service, validate_context_params
from app.context.formats import DEFAULT_FORMAT, FORMATS, Format
from app.errors import invalid

router = APIRouter(tags=["context"])

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

# A prefix_id grows by 9 characters per head message (system, dynamic items, summary).
PREFIX_ID_MAX = 16384
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
    max_tokens: Annotated[int | None, Query(ge=1, le=100_000_000)] = None,
    strategy: Annotated[str | None, Query(max_length=100)] = None,
    mode: Annotated[str | None, Query(max_length=20)] = None,
    reserve_output_tokens: Annotated[int, Query(ge=0, le=100_000_000)] = 0,
    format: Annotated[Format, Query(description=FORMAT_DOC)] = DEFAULT_FORMAT,
    previous_prefix_id: Annotated[
        str | None, Query(max_length=PREFIX_ID_MAX, description=PREFIX_ID_DOC)
    ] = None,
) -> Response:
    """From the session's stored system prompt and tools. `messages` goes straight to
    `chat.completions.create(messages=...)`; `decisions` say why each seq is kept,
    previewed, cut, dropped or excluded. `format` picks the provider's shape."""
    validate_context_params(
        strategy=strategy,
        max_tokens=max_tokens,
        reserve_output_tokens=reserve_output_tokens if max_tokens else None,
        mode=mode,
    )
    params = service.ContextParams(
        max_tokens=max_tokens,
        strategy=strategy,
        mode=mode,
        reserve_output_tokens=reserve_output_tokens,
        format=format,
        previous_prefix_id=previous_prefix_id,
    )
    return await _answer(request, session_id, params)


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
    unknown = sorted(set(body) - set(POST_FIELDS))
    if unknown:
        raise invalid(unknown[0], "is not a field of a context request")
    fmt = body.get("format", DEFAULT_FORMAT)
    if fmt not in FORMATS:
        raise invalid("format", f"must be one of {', '.join(FORMATS)}")
    previous = body.get("previous_prefix_id")
    if previous is not None and (not isinstance(previous, str) or len(previous) > PREFIX_ID_MAX):
        raise invalid("previous_prefix_id", f"must be a string of at most {PREFIX_ID_MAX} chars")
    validate_context_params(
        **{k: body.get(k) for k in POST_FIELDS if k not in ("format", "previous_prefix_id")}
    )
    params = service.ContextParams(
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
    return await _answer(request, session_id, params)


async def _answer(request: Request, session_id: str, params: service.ContextParams) -> Response:
    # What DatabaseDep, TenantDep and SettingsDep give, read directly (FastAPI's
    # dependency solving is per request), and the payload encoded once by pydantic-core
    # (the same encoder the dict response model used, without its validation pass).
    state = request.app.state
    tenant = await get_tenant(request)
    body = await service.payload(
        state.database, state.events, tenant, session_id, params, state.settings
    )
    return Response(to_json(body), media_type="application/json")
