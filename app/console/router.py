"""The operator console at /ui: static pages plus a few read-only JSON endpoints.

The page itself is public (it holds no data); everything it shows comes from
the JSON API through `fetch` with the operator's key in the Authorization
header, so the tenant rules of the API apply unchanged. The /ui/api endpoints
answer what the public API has no single call for: a compact session table
with each session's last compaction, a downsampled token series, the queue.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from importlib import resources
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from app.api.deps import DatabaseDep, SessionId, SettingsDep, TenantDep, encoded
from app.api.lanes import Services
from app.console import queries
from app.console.assets import ASSETS
from app.context import service as context_service
from app.context.params import ContextParams
from app.core.budget import budget_of, effective_model
from app.core.errors import NotFound, invalid
from app.core.jsonsafe import StoredStr, storable_problem
from app.sessions import service as sessions

router = APIRouter(include_in_schema=False)

STATIC = resources.files("app.console") / "static"
# The page loads nothing but its own files and talks to nothing but this server.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


@router.api_route("/ui", methods=["GET", "HEAD"])
async def index_redirect() -> Response:
    return RedirectResponse("/ui/", status_code=307)


@router.api_route("/ui/", methods=["GET", "HEAD"])
async def index() -> Response:
    return FileResponse(
        str(STATIC / "index.html"), media_type="text/html; charset=utf-8", headers=SECURITY_HEADERS
    )


@router.api_route("/ui/static/{name}", methods=["GET", "HEAD"])
async def asset(name: str) -> Response:
    media = ASSETS.get(name)
    if media is None:
        raise NotFound(f"no console asset {name!r}")
    return FileResponse(str(STATIC / name), media_type=media, headers=SECURITY_HEADERS)


@router.get("/ui/api/me")
async def me(request: Request, tenant: TenantDep) -> dict[str, Any]:
    """Which tenant the key belongs to; the page calls it to check a key."""
    keys = await request.app.state.keyring.enabled()
    return {"tenant": tenant, "keys_required": keys}


SortKey = Literal["activity", "id", "tokens"]


@router.get("/ui/api/sessions")
async def list_sessions(
    db: DatabaseDep,
    tenant: TenantDep,
    settings: SettingsDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: Annotated[StoredStr | None, Query(max_length=600)] = None,
    sort: SortKey = "activity",
    prefix: Annotated[StoredStr | None, Query(max_length=128)] = None,
) -> dict[str, Any]:
    """One page of the tenant's sessions: the latest active first (`activity`, the
    default), by id, or by tokens (largest first)."""
    after = _decode_cursor(cursor, sort) if cursor else None
    async with db.reading() as s:
        rows = await queries.session_page(s, tenant, sort, after, prefix or None, limit + 1)
        page = rows[:limit]
        last_jobs = await queries.last_jobs(s, tenant, [r.id for r in page])
    now = datetime.now(UTC)
    items = []
    for r in page:
        budget = budget_of(r, settings)
        job = last_jobs.get(r.id)
        lease_live = r.lease_expires_at is not None and r.lease_expires_at > now
        items.append(
            {
                "id": r.id,
                "model": effective_model(r, settings),
                "budget": budget.as_dict(),
                "messages": r.count_system + r.count_user + r.count_assistant + r.count_tool,
                "last_seq": r.last_seq,
                "watermark": r.last_compaction_seq,
                "compactions": r.compaction_count,
                "lease_owner": r.lease_owner if lease_live else None,
                "last_compaction": job,
                "updated_at": r.updated_at,
            }
        )
    next_cursor = None
    if len(rows) > limit:
        last = page[-1]
        keys: dict[str, list[Any]] = {
            "tokens": [queries.raw_tokens_of(last)],
            "activity": [last.updated_at.isoformat()],
        }
        next_cursor = _encode_cursor([*keys.get(sort, []), last.id])
    return encoded({"sessions": items, "next_cursor": next_cursor, "sort": sort})


@router.get("/ui/api/sessions/{session_id}/series")
async def series(
    session_id: SessionId,
    db: DatabaseDep,
    tenant: TenantDep,
    settings: SettingsDep,
    points: Annotated[int, Query(ge=2, le=2000)] = 500,
) -> dict[str, Any]:
    """Tokens over seq, at most `points` samples, with each compaction marked."""
    async with db.reading() as s:
        row = await sessions.get_session(s, tenant, session_id)
        out = await queries.token_series(s, row, points, settings)
    return encoded(out)


@router.get("/ui/api/sessions/{session_id}/context")
async def current_payload(session_id: SessionId, request: Request, tenant: TenantDep) -> Response:
    """The payload the session's default stream would send now, as `GET /context` answers
    it, but only looked at: a trim it makes is not stored as the stream's layout and no
    `context.compressed` event or metric is recorded, so watching a session changes
    neither what its agent is sent next nor the trim figures an operator watches."""
    services: Services = request.app.state.services
    content = await context_service.payload_json(
        services.database,
        services.events,
        tenant,
        session_id,
        ContextParams(observe=True),
        services.settings,
        services.caches,
    )
    return Response(content, media_type="application/json")


@router.get("/ui/api/queue")
async def queue(db: DatabaseDep, tenant: TenantDep, settings: SettingsDep) -> dict[str, Any]:
    """Pending and running jobs, the last hour's outcomes, recent events: the caller's tenant."""
    async with db.reading() as s:
        out = await queries.queue_summary(s, tenant)
    out["compactions_in_process"] = settings.run_compactions_in_process
    return encoded(out)


def _encode_cursor(values: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(values).encode()).decode()


def _decode_cursor(cursor: str, sort: SortKey) -> tuple[Any, str]:
    bad = invalid("cursor", "is not a cursor returned by this endpoint for this sort")
    try:
        values = json.loads(base64.b64decode(cursor.encode(), altchars=b"-_", validate=True))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise bad from None
    if sort == "tokens":
        ok = (
            isinstance(values, list)
            and len(values) == 2
            and type(values[0]) is int
            and abs(values[0]) < 2**62
            and isinstance(values[1], str)
        )
    elif sort == "activity":
        ok = isinstance(values, list) and len(values) == 2 and isinstance(values[1], str)
        when = _instant(values[0]) if ok else None
        if when is None:
            raise bad
        values[0] = when
    else:
        ok = isinstance(values, list) and len(values) == 1 and isinstance(values[0], str)
    if not ok or storable_problem(values[-1], "cursor"):
        raise bad
    return (values[0] if sort != "id" else None), values[-1]


def _instant(value: object) -> datetime | None:
    """The activity cursor's time, as `_encode_cursor` wrote it (ISO 8601 with its zone)."""
    if not isinstance(value, str):
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None
