"""The problem+json shape, declared so the OpenAPI description matches what errors look like."""

from __future__ import annotations

from typing import Any

from app.api.openapi import problem_response

PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "RFC 9457 problem details with contextd's stable `code`.",
    "type": "object",
    "required": ["type", "title", "status", "detail", "code"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["loc", "msg"],
                "properties": {"loc": {"type": "string"}, "msg": {"type": "string"}},
            },
        },
    },
}


def _problem(description: str) -> dict[str, Any]:
    # The `Problem` model of app.api.models.responses (PROBLEM_SCHEMA is the same shape, kept
    # for code that checks bodies against it).
    return problem_response(description)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: _problem("missing or wrong API key (when keys are configured)"),
    404: _problem("no such session or message in the caller's tenant"),
    409: _problem(
        "lock_held, lock_required, stale_lock_token, idempotency_conflict, or "
        "compaction_failed (payloads, with COMPACTION_FAIL_OPEN false)"
    ),
    413: _problem("body or message larger than the configured limit"),
    422: _problem("validation_error: `errors` names each faulty field"),
    503: _problem("the database is unreachable; retry after `Retry-After` seconds"),
}
