"""A held writer lease: its token for writes, kept alive while the block runs."""

from __future__ import annotations

from datetime import datetime

from contextd_client._exceptions import ContextdError
from contextd_client._models import Lease

__all__ = ["HeldLease", "renew_interval"]


class HeldLease:
    """The lease `client.lease(...)` holds. Pass `lock_token` to every write.

    It is renewed in the background; if a renewal is refused (the lease expired
    and someone else claimed the session), `lost` holds the error and writes
    with this token will fail with `StaleLockToken`.
    """

    def __init__(self, session_id: str, lease: Lease) -> None:
        self.session_id = session_id
        self.lock_token = lease.lock_token
        self.fencing_token = lease.fencing_token
        self.expires_at: datetime = lease.expires_at
        self.owner = lease.owner
        self.renewals = 0
        self.lost: ContextdError | None = None

    def _renewed(self, lease: Lease) -> None:
        self.expires_at = lease.expires_at
        self.renewals += 1

    def __repr__(self) -> str:
        return (
            f"HeldLease(session_id={self.session_id!r}, fencing_token={self.fencing_token}, "
            f"expires_at={self.expires_at.isoformat()}, lost={self.lost is not None})"
        )


def renew_interval(ttl_s: float, renew_every: float | None) -> float:
    """Renew at a third of the lease's life: two renewals may fail before it expires."""
    return renew_every if renew_every is not None else max(ttl_s / 3, 0.05)
