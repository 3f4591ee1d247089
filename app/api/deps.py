"""Request-scoped dependencies: settings, the database, the caller's tenant."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Path, Request
from fastapi.encoders import jsonable_encoder

from app.database import Database
from app.limits import SESSION_ID_PATTERN
from app.models import DEFAULT_TENANT
from app.settings import Settings


# `async def`, though they do no I/O: FastAPI runs a plain `def` dependency in the
# thread pool, three thread hand-offs per request that were ~7% of a context
# request's CPU under 20 concurrent clients (bench/profile.sh).
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


def encoded(obj: Any) -> dict[str, Any]:
    """JSON-ready dict (datetimes to ISO strings) for a handler's response."""
    out: dict[str, Any] = jsonable_encoder(obj)
    return out
