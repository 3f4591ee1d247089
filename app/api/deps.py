"""Request-scoped dependencies: settings, the database, the caller's tenant."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request
from fastapi.encoders import jsonable_encoder

from app.core.errors import invalid
from app.core.limits import BIGINT_MAX, SESSION_ID_PATTERN
from app.core.settings import Settings
from app.db.database import Database
from app.db.models import DEFAULT_TENANT


# `async def`, though they do no I/O: FastAPI runs a plain `def` dependency in the
# thread pool, three thread hand-offs per request that were ~7% of a context
# request's CPU under 20 concurrent clients (py-spy, at c93ae6f).
async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_database(request: Request) -> Database:
    db: Database = request.app.state.database
    return db


async def get_tenant(request: Request) -> str:
    tenant: str | None = getattr(request.state, "tenant", None)
    return tenant or DEFAULT_TENANT


SettingsDep = Annotated[Settings, Depends(get_settings)]
DatabaseDep = Annotated[Database, Depends(get_database)]
TenantDep = Annotated[str, Depends(get_tenant)]
SessionId = Annotated[
    str,
    Path(
        pattern=SESSION_ID_PATTERN,
        description="1–128 characters of [A-Za-z0-9._:-], not `.` or `..`, chosen by the client",
    ),
]

# Where a page of the log or of the events starts: after this seq or event id (bigints).
After = Annotated[int, Query(ge=0, le=BIGINT_MAX)]
# The log read and its search: only messages below this seq.
BeforeSeq = Annotated[
    int | None, Query(ge=1, le=BIGINT_MAX, description="only messages with seq below this")
]


def page_limit(default: int) -> Callable[..., Awaitable[int]]:
    """A list route's `limit`: at least 1, at most `CONTEXTD_MAX_PAGE_SIZE` (a setting, so
    checked here rather than declared in the description)."""

    async def limit_of(
        settings: SettingsDep,
        limit: Annotated[int, Query(ge=1, description="at most CONTEXTD_MAX_PAGE_SIZE")] = default,
    ) -> int:
        if limit > settings.max_page_size:
            raise invalid("limit", f"at most {settings.max_page_size}")
        return limit

    return limit_of


PageLimit = Annotated[int, Depends(page_limit(100))]


def encoded(obj: Any) -> dict[str, Any]:
    """JSON-ready dict (datetimes to ISO strings) for a handler's response."""
    out: dict[str, Any] = jsonable_encoder(obj)
    return out
