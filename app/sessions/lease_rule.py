"""The lease rule (SPEC §6), in its two forms: `check_write`, the fencing check every
write makes in Python against the session row it has locked, and its SQL forms for the
statements that decide it in PostgreSQL (`lease_live`, a claim's `no_live_lease`, the
compaction store's `store_admits`).

While a lease is live, a write without its token is refused (`lock_required`) and a
write with another token too (`stale_lock_token`). A claim and a compaction job's store
state the rule in their own conditional UPDATE, so PostgreSQL decides races. All of
them read "live" off the database clock, never the app's. It lives with the session row
it guards: every domain that writes a session (the append, compaction, settings, the
lease routes) checks it here.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import ColumnElement, func, or_

from app.core.errors import Conflict
from app.db.models import SessionRow


class Leased(Protocol):
    """A session row's lease columns (the ORM row, or the append path's SessionHead)."""

    @property
    def lease_token(self) -> str | None: ...

    @property
    def lease_owner(self) -> str | None: ...


def check_write(session: Leased, lease_live: bool, lock_token: str | None) -> None:
    """Refuse a write that does not carry the live lease's token (SPEC §6).

    A token that is still the session's latest is accepted even after expiry:
    nobody else has claimed since, so no newer writer can be overtaken. Any
    other token belongs to a lease someone has since replaced, or never existed.
    The SQL forms of the rule (`lease_live`, a claim's `no_live_lease`, the
    compaction store's `store_admits`) are below.
    """
    if lock_token is None:
        if lease_live:
            raise Conflict(
                "lock_required",
                f"session is leased by {session.lease_owner!r}; send its lock_token",
                holder=session.lease_owner,
            )
        return
    if lock_token != session.lease_token:
        raise Conflict(
            "stale_lock_token",
            "lock_token is not the session's current lease; claim the lease again",
            holder=session.lease_owner if lease_live else None,
        )


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
