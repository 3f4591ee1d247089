from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request, Response

from app.api.deps import (
    After,
    DatabaseDep,
    PageLimit,
    SessionId,
    SettingsDep,
    TenantDep,
    encoded,
    page_limit,
)
from app.api.models.requests import BudgetPreviewIn
from app.api.models.responses import Budget, BudgetPreview, EventPage, Session, SessionPage
from app.api.openapi import answers, request_body
from app.context.validation import check_session_default
from app.core.budget import budget_of
from app.core.errors import NotFound, invalid
from app.core.jsonsafe import StoredStr, storable_problem
from app.core.limits import CURSOR_MAX, EVENT_TYPE_MAX
from app.messages.service import count_batch_for
from app.observability import events
from app.sessions import repository as repo
from app.sessions import service
from app.sessions.schemas import LockTokenIn, SessionSettingsIn

router = APIRouter(tags=["sessions"])


@router.put(
    "/sessions/{session_id}",
    status_code=200,
    summary="Create or update a session",
    responses=answers(
        {200: (Session, "the session was updated"), 201: (Session, "the session was created")}
    ),
)
async def put_session(
    session_id: SessionId,
    body: SessionSettingsIn,
    response: Response,
    db: DatabaseDep,
    tenant: TenantDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    """201 when it created the session, 200 when it updated it. Omitted fields keep their value."""
    async with db.transaction() as s:
        row, created = await service.put_session(
            s, tenant, session_id, body, settings, check_session_default
        )
        out = service.view(row, settings)
    response.status_code = 201 if created else 200
    return encoded(out)


@router.get(
    "/sessions/{session_id}",
    summary="Settings plus stats, lease and budget",
    responses=answers({200: (Session, "the session")}),
)
async def get_session(
    session_id: SessionId,
    db: DatabaseDep,
    tenant: TenantDep,
    settings: SettingsDep,
    request: Request,
) -> dict[str, Any]:
    # This process's payload calls not yet added to the bill, so a client reads its own.
    await request.app.state.events.flush()
    async with db.transaction() as s:
        row = await service.get_session(s, tenant, session_id)
        return encoded(service.view(row, settings))


@router.get(
    "/sessions",
    summary="List sessions, cursor-paginated by id",
    responses=answers({200: (SessionPage, "one page of sessions")}),
)
async def list_sessions(
    db: DatabaseDep,
    tenant: TenantDep,
    settings: SettingsDep,
    limit: Annotated[int, Depends(page_limit(50))],
    cursor: Annotated[StoredStr | None, Query(max_length=CURSOR_MAX)] = None,
) -> dict[str, Any]:
    after = _decode_cursor(cursor) if cursor else None
    async with db.transaction() as s:
        rows = await repo.page(s, tenant, after, limit + 1)
        items = [service.view(r, settings) for r in rows[:limit]]
    next_cursor = _encode_cursor(rows[limit - 1].id) if len(rows) > limit else None
    return encoded({"sessions": items, "next_cursor": next_cursor})


@router.delete("/sessions/{session_id}", status_code=204, summary="Delete a session and its log")
async def delete_session(
    session_id: SessionId,
    db: DatabaseDep,
    tenant: TenantDep,
    body: Annotated[LockTokenIn | None, Body()] = None,
) -> Response:
    from app.sessions.lease_rule import check_write

    async with db.transaction() as s:
        locked = await repo.get_for_update(s, tenant, session_id)
        if locked is None:
            raise NotFound(f"session {session_id!r} does not exist")
        check_write(*locked, body.lock_token if body else None)
        await repo.remove(s, tenant, session_id)
    return Response(status_code=204)


@router.get(
    "/sessions/{session_id}/budget",
    summary="Budget status (SPEC §4)",
    responses=answers({200: (Budget, "the budget now")}),
)
async def get_budget(
    session_id: SessionId, db: DatabaseDep, tenant: TenantDep, settings: SettingsDep
) -> dict[str, Any]:
    async with db.transaction() as s:
        row = await service.get_session(s, tenant, session_id)
        return budget_of(row, settings).as_dict()


@router.post(
    "/sessions/{session_id}/budget",
    summary="The budget after appending these messages, without writing anything",
    openapi_extra=request_body(BudgetPreviewIn),
    responses=answers({200: (BudgetPreview, "the budget now and after the messages")}),
)
async def preview_budget(
    session_id: SessionId,
    db: DatabaseDep,
    tenant: TenantDep,
    settings: SettingsDep,
    # Validated by hand like an append's messages; the documented schema is BudgetPreviewIn's.
    body: Annotated[dict[str, Any], Body()],
) -> dict[str, Any]:
    unknown = sorted(set(body) - {"messages"})
    if unknown:  # as an append's body: a misspelt field is not silently ignored
        raise invalid(unknown[0], "is not a field of a budget preview (only `messages`)")
    async with db.transaction() as s:
        row = await service.get_session(s, tenant, session_id)
        added = await count_batch_for(row, body.get("messages"), settings)
        now = budget_of(row, settings)
        after = budget_of(row, settings, extra_tokens=added)
    return {
        "budget": after.as_dict(),
        "current": now.as_dict(),
        "added_tokens": added,
        "fits": after.current_tokens <= after.usable_budget,
    }


@router.get(
    "/sessions/{session_id}/events",
    summary="The session's event log",
    responses=answers({200: (EventPage, "one page of events")}),
)
async def list_events(
    session_id: SessionId,
    request: Request,
    db: DatabaseDep,
    tenant: TenantDep,
    limit: PageLimit,
    after_id: After = 0,
    type: Annotated[
        StoredStr | None, Query(max_length=EVENT_TYPE_MAX, description="type prefix")
    ] = None,
) -> dict[str, Any]:
    writer: events.EventWriter = request.app.state.events
    await writer.flush()  # this process's deferred events, so a client reads its own
    async with db.transaction() as s:
        await service.get_session(s, tenant, session_id)
        rows = await events.page(s, tenant, session_id, after_id, limit, type)
    items = [{"id": e.id, "type": e.type, "data": e.data, "created_at": e.created_at} for e in rows]
    return encoded(
        {"events": items, "next_after_id": items[-1]["id"] if len(items) == limit else None}
    )


def _encode_cursor(last_id: str) -> str:
    return base64.urlsafe_b64encode(last_id.encode()).decode()


def _decode_cursor(cursor: str) -> str:
    try:
        after = base64.b64decode(cursor.encode(), altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise invalid("cursor", "is not a cursor returned by this endpoint") from None
    if storable_problem(after, "cursor"):
        raise invalid("cursor", "is not a cursor returned by this endpoint")
    return after
