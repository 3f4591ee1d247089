"""The fencing check every write makes against the session row it has locked."""

from __future__ import annotations

from typing import Protocol

from app.core.errors import Conflict


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
    compaction store's `store_admits`) are in `app.leases.fencing`.
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
