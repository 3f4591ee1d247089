from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from app.api.deps import DatabaseDep, SessionId, TenantDep, encoded
from app.api.models.responses import Lease
from app.api.openapi import answers
from app.leases import service
from app.leases.schemas import ClaimIn, ReleaseIn, RenewIn

router = APIRouter(tags=["leases"])


def _out(lease: service.Lease) -> dict[str, Any]:
    return encoded(
        {
            "lock_token": lease.lock_token,
            "fencing_token": lease.fencing_token,
            "expires_at": lease.expires_at,
            "owner": lease.owner,
        }
    )


@router.post(
    "/sessions/{session_id}/lock",
    status_code=201,
    summary="Claim the writer lease",
    responses=answers({201: (Lease, "the lease; send its lock_token with every write")}),
)
async def claim(
    session_id: SessionId, body: ClaimIn, db: DatabaseDep, tenant: TenantDep
) -> dict[str, Any]:
    """409 `lock_held` naming the holder while another live lease exists."""
    async with db.transaction() as s:
        lease = await service.claim(s, tenant, session_id, body.owner, body.ttl_s)
    return _out(lease)


@router.post(
    "/sessions/{session_id}/lock/renew",
    summary="Extend the lease",
    responses=answers({200: (Lease, "the lease with its new expiry")}),
)
async def renew(
    session_id: SessionId, body: RenewIn, db: DatabaseDep, tenant: TenantDep
) -> dict[str, Any]:
    async with db.transaction() as s:
        lease = await service.renew(s, tenant, session_id, body.lock_token, body.ttl_s)
    return _out(lease)


@router.delete("/sessions/{session_id}/lock", status_code=204, summary="Release the lease")
async def release(
    session_id: SessionId, body: ReleaseIn, db: DatabaseDep, tenant: TenantDep
) -> Response:
    async with db.transaction() as s:
        await service.release(s, tenant, session_id, body.lock_token)
    return Response(status_code=204)
