from __future__ import annotations

from typing import Any

import structlog
from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text

from app.compaction.metrics import QUEUE_JOBS, QUEUE_OLDEST_PENDING, WORKERS_LIVE
from app.compaction.repository import WORKER_STALE_S
from app.db.migrate import head_revision, schema_is_current
from app.observability.metrics import exposition

log = structlog.get_logger("contextd")

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


# One row per active status: the partial unique index on active jobs serves it.
_QUEUE = text(
    "SELECT status, count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)"
    " FROM compaction_jobs WHERE status IN ('pending', 'running') GROUP BY status"
)


# The same freshness rule as the servers' deferral (repository.live_worker).
_WORKERS = text(
    "SELECT count(*) FROM compaction_workers"
    " WHERE heartbeat_at > now() - make_interval(secs => :stale)"
)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
async def metrics(request: Request) -> Response:
    try:
        async with request.app.state.engine.connect() as conn:
            rows = {r[0]: (int(r[1]), float(r[2])) for r in await conn.execute(_QUEUE)}
            workers = int(await conn.scalar(_WORKERS, {"stale": WORKER_STALE_S}) or 0)
    except Exception as exc:  # the queue gauges keep their last values; metrics still answer
        log.warning("could not read the compaction queue", error=type(exc).__name__)
    else:
        for status in ("pending", "running"):
            QUEUE_JOBS.labels(status).set(rows.get(status, (0, 0.0))[0])
        QUEUE_OLDEST_PENDING.set(rows.get("pending", (0, 0.0))[1])
        WORKERS_LIVE.set(workers)
    return Response(exposition(), media_type=CONTENT_TYPE_LATEST)
