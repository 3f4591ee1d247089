"""`GET` and `POST /sessions/{id}/context`, as the OpenAPI description shows them.

Both are answered by their lane (app/api/context_lane.py), ahead of the router:
these routes only document them and are never called.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response

from app.api.deps import SessionId
from app.api.lanes import AnsweredByLane
from app.api.models.requests import ContextIn, ContextQuery
from app.api.models.responses import ContextPayload
from app.api.openapi import answers, request_body

router = APIRouter(tags=["context"])


@router.get(
    "/sessions/{session_id}/context",
    summary="The assembled payload",
    responses=answers({200: (ContextPayload, "the payload in the asked format")}),
)
async def get_context(session_id: SessionId, query: Annotated[ContextQuery, Query()]) -> Response:
    """From the session's stored system prompt and tools. `messages` goes straight to
    `chat.completions.create(messages=...)`; `decisions` say why each seq is kept,
    previewed, cut, dropped or excluded. `format` picks the provider's shape."""
    raise AnsweredByLane(session_id)


@router.post(
    "/sessions/{session_id}/context",
    summary="The assembled payload, with per-call parts",
    openapi_extra=request_body(ContextIn),
    responses=answers({200: (ContextPayload, "the payload in the asked format")}),
)
async def post_context(session_id: SessionId, body: Annotated[dict[str, Any], Body()]) -> Response:
    """Per-call `system` (string or system messages) and `tools` replace the session's;
    `dynamic_context` (strings or messages: task goal, retrieved knowledge) comes after
    the system block and before the summary and history."""
    raise AnsweredByLane(session_id)
