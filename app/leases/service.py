"""Writer leases with fencing tokens: claim, renew, release.

Each is a single conditional UPDATE, so two processes racing for one session
are decided by PostgreSQL, and `fencing_token` only ever grows.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict, NotFound
from app.db.models import SessionRow
from app.db.scope import of_session
from app.sessions.lease_rule import no_live_lease


@dataclass(frozen=True, slots=True)
class Lease:
    lock_token: str
    fencing_token: int
    expires_at: datetime | None
    owner: str


async def claim(db: AsyncSession, tenant: str, sid: str, owner: str, ttl_s: float) -> Lease:
    token = secrets.token_urlsafe(24)
    stmt = (
        update(SessionRow)
        .where(
            of_session(SessionRow, tenant, sid),
            no_live_lease(),
        )
        .values(
            lease_token=token,
            lease_owner=owner,
            lease_expires_at=func.now() + timedelta(seconds=ttl_s),
            fencing_token=SessionRow.fencing_token + 1,
        )
        .returning(SessionRow.fencing_token, SessionRow.lease_expires_at)
        .execution_options(synchronize_session=False)
    )
    row = (await db.execute(stmt)).first()
    if row is None:
        await _raise_held(db, tenant, sid)
    assert row is not None
    return Lease(token, row[0], row[1], owner)


async def renew(db: AsyncSession, tenant: str, sid: str, token: str, ttl_s: float) -> Lease:
    # Renewing a lapsed lease is allowed while nobody has claimed since: the
    # token is still the latest, so no other writer can be overtaken.
    stmt = (
        update(SessionRow)
        .where(of_session(SessionRow, tenant, sid), SessionRow.lease_token == token)
        .values(lease_expires_at=func.now() + timedelta(seconds=ttl_s))
        .returning(SessionRow.fencing_token, SessionRow.lease_expires_at, SessionRow.lease_owner)
        .execution_options(synchronize_session=False)
    )
    row = (await db.execute(stmt)).first()
    if row is None:
        await _raise_stale(db, tenant, sid)
    assert row is not None
    return Lease(token, row[0], row[1], row[2] or "")


async def release(db: AsyncSession, tenant: str, sid: str, token: str) -> None:
    stmt = (
        update(SessionRow)
        .where(of_session(SessionRow, tenant, sid), SessionRow.lease_token == token)
        .values(lease_token=None, lease_owner=None, lease_expires_at=None)
        .returning(SessionRow.id)
        .execution_options(synchronize_session=False)
    )
    if (await db.execute(stmt)).first() is None:
        await _raise_stale(db, tenant, sid)


async def _raise_held(db: AsyncSession, tenant: str, sid: str) -> None:
    row = await db.get(SessionRow, (tenant, sid))
    if row is None:
        raise NotFound(f"session {sid!r} does not exist")
    until = row.lease_expires_at.isoformat() if row.lease_expires_at else None
    raise Conflict(
        "lock_held",
        f"session is leased by {row.lease_owner!r} until {until}",
        holder=row.lease_owner,
        expires_at=until,
    )


async def _raise_stale(db: AsyncSession, tenant: str, sid: str) -> None:
    if await db.get(SessionRow, (tenant, sid)) is None:
        raise NotFound(f"session {sid!r} does not exist")
    raise Conflict("stale_lock_token", "lock_token is not the session's current lease")
