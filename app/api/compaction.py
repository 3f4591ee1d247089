from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.api.answers import CompactionDryRun, CompactionJob, CompactionState
from app.api.deps import DatabaseDep, SessionId, SettingsDep, TenantDep, encoded
from app.api.openapi import answers
from app.compaction import service
from app.leases.schemas import LockToken
from app.limits import COMPACT_WAIT_MAX_S

router = APIRouter(tags=["compaction"])


class CompactIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lock_token: LockToken | None = None
    # Strict: JSON's true or false, as every other flag of the API (`"yes"` is a 422).
    wait: StrictBool = False
    force: StrictBool = Field(
        False,
        description="skip the no-thrash guards (too little to free, not regrown); the "
        "preserved tail stays: lower the session's min_preserved_turns to fold more",
    )
    dry_run: StrictBool = Field(False, description="answer what would be compacted; write nothing")
    timeout_s: float | None = Field(
        None, gt=0, le=COMPACT_WAIT_MAX_S, description="how long `wait` waits"
    )


@router.post(
    "/sessions/{session_id}/compact",
    status_code=202,
    summary="Request a compaction",
    responses=answers(
        {
            202: (CompactionJob, "the job, queued or running"),
            200: (CompactionJob | CompactionDryRun, "the finished job (wait) or the dry-run plan"),
        }
    ),
)
async def compact(
    session_id: SessionId,
    request: Request,
    response: Response,
    db: DatabaseDep,
    tenant: TenantDep,
    settings: SettingsDep,
    body: CompactIn | None = None,
) -> dict[str, Any]:
    """202 `{job_id, status}`; concurrent requests for one session share one job.
    With `wait`, 200 with the finished job `{job_id, status, compaction_metadata}`
    (202 if it is still running when the wait ends)."""
    body = body or CompactIn()
    out, _ = await service.request(
        db,
        tenant,
        session_id,
        lock_token=body.lock_token,
        force=body.force,
        dry_run=body.dry_run,
        settings=settings,
    )
    if body.dry_run:
        response.status_code = 200
        return encoded(out)
    runner = getattr(request.app.state, "compactions", None)
    if runner is not None:
        runner.wake()
    if body.wait:
        timeout = body.timeout_s or settings.compaction.compact_timeout_s * 2 + 10
        done = await service.wait_for(db, tenant, session_id, out["job_id"], timeout)
        if done is not None:
            response.status_code = 200
            return encoded(done)
    return encoded(out)


@router.get(
    "/sessions/{session_id}/compaction",
    summary="Compaction state",
    responses=answers({200: (CompactionState, "summary, watermark, candidates, recent jobs")}),
)
async def compaction_state(
    session_id: SessionId, db: DatabaseDep, tenant: TenantDep
) -> dict[str, Any]:
    """Summary text and structure, watermark, metadata, memory-flush candidates, recent jobs."""
    async with db.transaction() as s:
        return encoded(await service.state(s, tenant, session_id))
