"""`serve` and `worker` wait for a database that does not accept connections yet.

Compose starts the services together, and a host that reboots starts them in any
order: a server that exits on its first refused connection comes up only after its
restart policy has tried it again, if it has one. The wait is bounded
(`CONTEXTD_DATABASE_WAIT_S`) and said in the log at every retry, so a database that
never comes is still an exit with the last error, not a silent hang.

Only "not there yet" is waited for: a refused or timed-out connection, a host name
that does not resolve yet (a container not started), a server still starting up.
A wrong password or a missing database is answered at once by the migration step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator

import asyncpg
import structlog
from sqlalchemy.engine import make_url

from app.db.engine import normalise_url

log = structlog.get_logger("contextd")

# Bounds of the pause between two tries: short at first (a database seconds from
# ready), never so long that a database that came up waits long for us.
FIRST_PAUSE_S = 0.5
MAX_PAUSE_S = 8.0
# One try's own limit: a host that drops packets answers nothing at all.
CONNECT_TIMEOUT_S = 10.0

_NOT_YET = (OSError, asyncpg.CannotConnectNowError, asyncpg.TooManyConnectionsError)


class DatabaseUnreachable(Exception):
    """No connection within the wait; the message names how long and the last error."""


def pauses(first: float = FIRST_PAUSE_S, cap: float = MAX_PAUSE_S) -> Iterator[float]:
    """0.5, 1, 2, 4, 8, 8, ... seconds."""
    pause = first
    while True:
        yield pause
        pause = min(pause * 2, cap)


def wait_for_database(
    url: str,
    wait_s: float,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Return once the database takes a connection (or answers with an error that
    waiting will not cure); raise DatabaseUnreachable after `wait_s` seconds."""
    start = clock()
    schedule = pauses()
    tries = 0
    while True:
        tries += 1
        try:
            asyncio.run(_connect(url))
        except _NOT_YET as exc:
            error = f"{type(exc).__name__}: {exc}".rstrip(": ")
        except (asyncpg.PostgresError, asyncpg.InterfaceError):
            return  # reachable: the migration step reports what is wrong, in its words
        else:
            if tries > 1:
                log.info("database reachable", waited_s=round(clock() - start, 1), tries=tries)
            return
        waited = clock() - start
        left = wait_s - waited
        if left <= 0:
            raise DatabaseUnreachable(f"not reachable after {waited:.0f}s ({error})")
        pause = min(next(schedule), left)
        log.warning(
            f"database not reachable yet, retrying in {pause:g}s",
            error=error,
            waited_s=round(waited, 1),
            wait_s=wait_s,
        )
        sleep(pause)


async def _connect(url: str) -> None:
    dsn = make_url(normalise_url(url)).set(drivername="postgresql")
    conn = await asyncpg.connect(
        dsn.render_as_string(hide_password=False), timeout=CONNECT_TIMEOUT_S
    )
    await conn.close()
