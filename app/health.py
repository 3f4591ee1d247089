from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from app.db import head_revision, schema_is_current

router = APIRouter(tags=["operations"])


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: database reachable and schema at the latest migration")
async def readyz(request: Request) -> Response:
    engine = request.app.state.engine
    checks: dict[str, Any] = {"database": False, "schema": False, "head": head_revision()}
    try:
        async with engine.connect() as conn:
            await conn.execute(text("SELECT 1"))
        checks["database"] = True
        checks["schema"] = await schema_is_current(engine)
    except Exception as exc:  # any failure means not ready; the reason goes to the prober
        checks["error"] = type(exc).__name__
    ready = checks["database"] and checks["schema"]
    return JSONResponse(
        {"status": "ready" if ready else "not_ready", **checks}, status_code=200 if ready else 503
    )


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
