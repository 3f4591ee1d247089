"""The access log's line: one per request, the most frequent log line by far.

Through structlog and the standard library it cost ~50 µs (a LogRecord, the
handler's lock, the formatter's processor chain, a JSON render), about 7% of an
append's CPU in `serve`. When the output is JSON, `configure_logging` hands this
module the handler's stream and the line is rendered here: the same keys and
values as the processor chain gives (request context, level, logger, UTC ISO
timestamp), at the same level threshold. Elsewhere (tests, a console) the line
goes through structlog as every other line does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import structlog

LOGGER = "contextd.http"
_enabled = logging.getLogger(LOGGER).isEnabledFor
_write: Callable[[str], Any] | None = None


def write_json_to(write: Callable[[str], Any] | None) -> None:
    """Render request lines here and write them with `write` (None: through structlog)."""
    global _write
    _write = write


def request(method: str, route: str, status: int, ms: float) -> None:
    if _write is None:
        # Asked for each time: a logger cached on first use keeps the configuration of then.
        structlog.get_logger(LOGGER).info(
            "request", method=method, route=route, status=status, ms=ms
        )
        return
    if not _enabled(logging.INFO):
        return
    line = {
        "method": method,
        "route": route,
        "status": status,
        "ms": ms,
        "event": "request",
        **structlog.contextvars.get_contextvars(),
        "level": "info",
        "logger": LOGGER,
        "timestamp": datetime.now(tz=UTC).isoformat().replace("+00:00", "Z"),
    }
    _write(json.dumps(line, default=repr) + "\n")
