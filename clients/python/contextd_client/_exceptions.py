"""The errors a contextd call raises, one class per problem `code` the server sends.

    ContextdError                 anything that went wrong talking to contextd
    ├── ClientClosed              the client was used after `close()`
    ├── TransportError            no HTTP answer (connection refused, reset, timeout)
    └── APIError                  an HTTP answer that is an error (problem+json)
        ├── ValidationFailed      422 validation_error: `.fields` names each faulty field
        ├── NotFound              404 not_found
        ├── Unauthorized          401 unauthorized
        ├── PayloadTooLarge       413 payload_too_large
        ├── ServiceUnavailable    503 unavailable, 429: retried first, raised when retries run out
        └── Conflict              409, any code
            ├── LockHeld          lock_held: another owner holds the lease (`.holder`)
            ├── LockRequired      lock_required: a lease is live and the write had no token
            ├── StaleLockToken    stale_lock_token: the write's token is not the live one
            └── IdempotencyConflict  idempotency_conflict: a message id was stored with
                                  other content (`.seq` is where)

Every APIError carries the parsed problem (`.problem`), its `.status`, `.code`
and `.detail`, and the `httpx.Response`. A status with no class of its own
(500, 405, ...) raises `APIError` itself.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx

__all__ = [
    "APIError",
    "ClientClosed",
    "Conflict",
    "ContextdError",
    "FieldError",
    "IdempotencyConflict",
    "LockHeld",
    "LockRequired",
    "NotFound",
    "PayloadTooLarge",
    "ServiceUnavailable",
    "StaleLockToken",
    "TransportError",
    "Unauthorized",
    "ValidationFailed",
    "error_from_response",
]


class ContextdError(Exception):
    """Base of every error this client raises."""


class ClientClosed(ContextdError):
    """The client was closed (`close()`, or its `with` block ended); make a new one."""


class TransportError(ContextdError):
    """The request got no HTTP answer, after every retry it was allowed.

    The original `httpx.TransportError` is the `__cause__`.
    """


class APIError(ContextdError):
    def __init__(self, response: httpx.Response, problem: dict[str, Any]) -> None:
        self.response = response
        self.problem = problem
        self.status: int = response.status_code
        self.code: str = str(problem.get("code") or "http_error")
        self.detail: str = str(problem.get("detail") or problem.get("title") or response.text)
        super().__init__(f"{self.status} {self.code}: {self.detail}")


class FieldError:
    """One faulty field of a rejected request: `loc` like `messages[3].tool_call_id`."""

    __slots__ = ("loc", "msg")

    def __init__(self, loc: str, msg: str) -> None:
        self.loc = loc
        self.msg = msg

    def __repr__(self) -> str:
        return f"FieldError(loc={self.loc!r}, msg={self.msg!r})"


class ValidationFailed(APIError):
    def __init__(self, response: httpx.Response, problem: dict[str, Any]) -> None:
        raw = problem.get("errors")
        self.errors = [
            FieldError(str(e.get("loc", "")), str(e.get("msg", "")))
            for e in (raw if isinstance(raw, list) else [])
            if isinstance(e, dict)
        ]
        super().__init__(response, problem)

    @property
    def fields(self) -> list[str]:
        """The location of each faulty field, in the server's order."""
        return [e.loc for e in self.errors]


class NotFound(APIError):
    pass


class Unauthorized(APIError):
    pass


class PayloadTooLarge(APIError):
    pass


class ServiceUnavailable(APIError):
    """503 (or 429): the server wrote nothing and asked to be tried again later."""

    @property
    def retry_after(self) -> float | None:
        return parse_retry_after(self.response.headers.get("retry-after"))


class Conflict(APIError):
    pass


class LockHeld(Conflict):
    @property
    def holder(self) -> str | None:
        holder = self.problem.get("holder")
        return str(holder) if holder is not None else None


class LockRequired(Conflict):
    pass


class StaleLockToken(Conflict):
    pass


class IdempotencyConflict(Conflict):
    @property
    def seq(self) -> int | None:
        seq = self.problem.get("seq")
        return seq if isinstance(seq, int) else None


# code -> (class, the statuses it may come with): a code on an unexpected status (a
# proxy reusing names) is not trusted, and the status decides.
_BY_CODE: dict[str, tuple[type[APIError], tuple[int, ...]]] = {
    "validation_error": (ValidationFailed, (422,)),
    "not_found": (NotFound, (404,)),
    "unauthorized": (Unauthorized, (401,)),
    "payload_too_large": (PayloadTooLarge, (413,)),
    "unavailable": (ServiceUnavailable, (503,)),
    "lock_held": (LockHeld, (409,)),
    "lock_required": (LockRequired, (409,)),
    "stale_lock_token": (StaleLockToken, (409,)),
    "idempotency_conflict": (IdempotencyConflict, (409,)),
}
_BY_STATUS: dict[int, type[APIError]] = {
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: ValidationFailed,
    429: ServiceUnavailable,
    503: ServiceUnavailable,
}


def error_from_response(response: httpx.Response) -> APIError:
    """The exception for an error answer: by problem `code`, else by status.

    A body that is not problem+json (a proxy's HTML page) still gives an error of
    the status's class, with the text as `detail`.
    """
    try:
        body = response.json()
    except ValueError:
        body = None
    problem: dict[str, Any] = body if isinstance(body, dict) else {}
    cls, statuses = _BY_CODE.get(str(problem.get("code")), (APIError, ()))
    if response.status_code not in statuses:
        cls = _BY_STATUS.get(response.status_code, APIError)
    return cls(response, problem)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a `Retry-After` header: a number of seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
