"""Exceptions to problem+json responses: one mapping for the app's exception handlers
and for the lanes (app/api/lanes.py), which answer before the router."""

from __future__ import annotations

from typing import Any

import structlog
from fastapi.responses import JSONResponse

from app import db as database
from app.errors import ContextdError, Unavailable, problem, problem_of

log = structlog.get_logger("contextd")


def problem_response(body: dict[str, Any], headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        body, status_code=body["status"], media_type="application/problem+json", headers=headers
    )


def domain_response(exc: ContextdError) -> JSONResponse:
    return problem_response(problem_of(exc), exc.headers())


def error_response(exc: Exception) -> JSONResponse:
    """A domain error as its problem; the database away or a rolled-back transaction as
    503 (nothing was written: send it again); anything else logged, and a bare 500."""
    if isinstance(exc, ContextdError):
        return domain_response(exc)
    if database.is_unavailable(exc):
        log.warning("database unavailable", error=type(exc).__name__)
        return domain_response(Unavailable("the database is unreachable; retry"))
    if database.is_rolled_back(exc):
        # Lock order is meant to make this impossible; if it still happens the request
        # wrote nothing and may simply be sent again.
        log.warning("transaction rolled back by the database", error=type(exc).__name__)
        return domain_response(Unavailable("a concurrent write conflicted; retry", retry_after_s=1))
    log.exception("unhandled error", exc_info=exc)
    return problem_response(
        problem(500, "internal_error", "Internal error", "an unexpected error occurred")
    )
