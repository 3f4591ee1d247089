"""The lease rule in SQL, beside its Python form `app.leases.guard.check_write`.

SPEC §6: while a lease is live, a write without its token is refused
(`lock_required`) and a write with another token too (`stale_lock_token`).
A request's write checks it in Python, on the session row it has locked and
`lease_live` read with it; a claim and a compaction job's store state it in
their own conditional UPDATE, so PostgreSQL decides races. All of them read
"live" off the database clock, never the app's.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, func, or_

from app.db.models import SessionRow


def lease_live() -> ColumnElement[bool]:
    """The session's lease is held and unexpired: `check_write`'s `lease_live`."""
    return func.coalesce(SessionRow.lease_expires_at > func.now(), False)


def no_live_lease() -> ColumnElement[bool]:
    """Nobody holds the session's lease, or it has lapsed: a claim may take it."""
    return or_(SessionRow.lease_token.is_(None), SessionRow.lease_expires_at <= func.now())


def store_admits(lock_token: str | None) -> ColumnElement[bool]:
    """The lease part of the compaction store's fence (SPEC §5): no live lease, or its token.

    Looser than `check_write` on purpose. `check_write` already ran on the
    request that queued the job, with the job's token; by the time the store
    lands the holder may have released its lease or let it lapse, and SPEC §5
    fences the store only against a lease that is live then. A job queued
    without a token is refused by any live lease (`== None` is `IS NULL`).
    """
    return or_(no_live_lease(), SessionRow.lease_token == lock_token)
