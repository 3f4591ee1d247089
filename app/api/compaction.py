from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from app.api.deps import DatabaseDep, SessionId, SettingsDep, TenantDep, encoded
from app.api.models.compaction import CompactionDryRun, CompactionJob, CompactionState
from app.api.openapi import answers, problem_response
from app.compaction import revert, service
from app.compaction.metrics import COMPACTION_REVERTS
from app.core.limits import COMPACT_WAIT_MAX_S
from app.sessions.schemas import LockToken

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


class CompactionRevert(BaseModel):
    """What `POST /sessions/{id}/compaction/{job_id}/revert` put back."""

    model_config = ConfigDict(extra="allow")

    job_id: str = Field(description="the compaction reverted")
    reverted: Literal[True]
    watermark_restored: int = Field(description="the watermark the session has again")
    watermark_reverted: int = Field(description="the watermark the compaction had set")
    last_compaction_seq: int = Field(description="the session's watermark now (as restored)")
    summary_restored: bool = Field(
        description="a previous summary came back (false: the session has none again)"
    )
    compaction_count: int = Field(description="compactions the restored summary stands for")
    cancelled_jobs: list[str] = Field(
        description="jobs that were pending or running on the replaced state, ended as failed"
    )
    reverted_at: datetime


class RevertIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    lock_token: LockToken | None = None


JobId = Annotated[
    str,
    Path(pattern=r"^[A-Za-z0-9_-]{1,64}$", description="a job id of `GET .../compaction`"),
]


@router.post(
    "/sessions/{session_id}/compaction/{job_id}/revert",
    summary="Undo the latest stored compaction",
    responses={
        **answers({200: (CompactionRevert, "the watermark and summary restored")}),
        404: problem_response("`not_found`: no such session, or no such job in it"),
        409: problem_response(
            "`not_latest_compaction` (a later compaction is stored, or a clear since), "
            "`not_revertable` (the job stored nothing: noop, failed, pending or running), "
            "`already_reverted`, or the lease refuses the write"
        ),
    },
)
async def revert_compaction(
    session_id: SessionId,
    job_id: JobId,
    db: DatabaseDep,
    tenant: TenantDep,
    settings: SettingsDep,
    body: RevertIn | None = None,
) -> dict[str, Any]:
    """Puts back the summary and watermark the job's store replaced, in one update of the
    session fenced like an append (`lock_token` while a lease is live); the log is
    untouched. Only the session's latest stored compaction can be reverted; after a
    revert the one before it is the latest, so reverts walk back one compaction at a
    time. Jobs pending or running on the replaced state are ended as `failed` (they
    would redo what was undone, or store on a basis that is gone), payloads are
    selected afresh (as after a compaction), and automatic compaction leaves the
    session alone until its log has grown past the restored state by the regrowth
    rule (`regrowth_ratio` of its effective history, at least `min_free_ratio` of the
    usable budget); a `POST /compact` is not held back. A `compaction.reverted` event
    records it."""
    body = body or RevertIn()
    async with db.transaction() as s:
        out = await revert.revert(s, tenant, session_id, job_id, body.lock_token, settings)
    COMPACTION_REVERTS.inc()  # committed
    return encoded(out)
