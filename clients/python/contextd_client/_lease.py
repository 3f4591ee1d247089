"""A held writer lease: its token for writes, kept alive while the block runs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime

from contextd_client._api import Call
from contextd_client._exceptions import Conflict, ContextdError, NotFound, TransportError
from contextd_client._models import Lease

__all__ = ["HeldLease", "Renewal", "releasing", "renew_interval", "renew_until_cancelled"]

log = logging.getLogger("contextd_client")

# How long leaving a sync block waits for a renewal already sent. Longer ones finish
# on their own: one landing after the release meets a stale token and changes nothing.
RENEWAL_JOIN_S = 0.5


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


@contextlib.contextmanager
def releasing(held: HeldLease) -> Iterator[None]:
    """Around the release on leaving a `lease(...)` block. A release that fails is
    logged, not raised: raising would replace the block's own exception, or fail a
    block whose work is done, and the lease expires by its TTL anyway."""
    try:
        yield
    except (Conflict, NotFound):
        pass  # someone else's lease, or none left: nothing of ours to release
    except ContextdError as exc:
        log.warning(
            "could not release the lease on session %r (%s: %s); it expires by its TTL, at %s",
            held.session_id,
            type(exc).__name__,
            exc,
            held.expires_at.isoformat(),
        )


class Renewal:
    """The thread that renews a sync block's lease: `send(call, stop)` sends one
    renewal and gives up its retries once `stop` is set, so that leaving the block
    never waits out a renewal's whole retry schedule (minutes with the default policy)."""

    def __init__(
        self,
        held: HeldLease,
        call: Call[Lease],
        send: Callable[[Call[Lease], threading.Event], Lease],
        interval: float,
    ) -> None:
        self.held = held
        self.call = call
        self.send = send
        self.interval = interval
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self._run, name=f"contextd-lease-{held.session_id}", daemon=True
        )
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                lease = self.send(self.call, self.stop)
            except TransportError:
                continue  # the next tick tries again, while the lease lives
            except ContextdError as exc:
                if not self.stop.is_set():  # after the block, a refusal is our own release
                    self.held.lost = exc
                return
            self.held._renewed(lease)

    def end(self) -> None:
        self.stop.set()
        self.thread.join(RENEWAL_JOIN_S)


async def renew_until_cancelled(
    held: HeldLease, renew: Callable[[], Awaitable[Lease]], interval: float
) -> None:
    """The task that renews an async block's lease; leaving the block cancels it."""
    while True:
        await asyncio.sleep(interval)
        try:
            lease = await renew()
        except TransportError:
            continue  # the next tick tries again, while the lease lives
        except ContextdError as exc:
            held.lost = exc
            return
        held._renewed(lease)
