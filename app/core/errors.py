"""Domain errors and their single rendering as RFC 9457 problem+json.

    ContextdError (status, code)
    ├── ValidationFailed        422 validation_error   errors: [{loc, msg}]
    ├── NotFound                404 not_found
    ├── PayloadTooLarge         413 payload_too_large
    ├── Unauthorized            401 unauthorized
    ├── Conflict                409 lock_held, lock_required, stale_lock_token, idempotency_conflict
    └── Unavailable             503 unavailable (database away; carries Retry-After)

Only these map to 4xx/503. Driver errors and ValueError are bugs and stay 500s
in the log, rendered as a bland problem so nothing internal leaks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class ContextdError(Exception):
    status: int = 500
    code: str = "internal_error"
    title: str = "Internal error"

    def __init__(self, detail: str, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra

    def headers(self) -> dict[str, str]:
        return {}


class ValidationFailed(ContextdError):
    status = 422
    code = "validation_error"
    title = "Validation failed"

    def __init__(self, errors: Sequence[dict[str, str]], detail: str | None = None) -> None:
        errs = list(errors)
        first = errs[0] if errs else {"loc": "body", "msg": "invalid"}
        super().__init__(detail or f"{first['loc']}: {first['msg']}", errors=errs)


def invalid(loc: str, msg: str) -> ValidationFailed:
    return ValidationFailed([{"loc": loc, "msg": msg}])


class NotFound(ContextdError):
    status = 404
    code = "not_found"
    title = "Not found"


class PayloadTooLarge(ContextdError):
    status = 413
    code = "payload_too_large"
    title = "Payload too large"


class Unauthorized(ContextdError):
    status = 401
    code = "unauthorized"
    title = "Unauthorized"

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": "Bearer"}


class Conflict(ContextdError):
    status = 409
    title = "Conflict"

    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        super().__init__(detail, **extra)
        self.code = code


class Unavailable(ContextdError):
    status = 503
    code = "unavailable"
    title = "Service unavailable"

    def __init__(self, detail: str, retry_after_s: int = 2) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after_s)}


def problem(status: int, code: str, title: str, detail: str, **extra: Any) -> dict[str, Any]:
    body = {
        "type": f"https://contextd.dev/problems/{code}",
        "title": title,
        "status": status,
        "detail": detail,
        "code": code,
        **extra,
    }
    return printable(body)  # type: ignore[no-any-return]


def printable(value: Any) -> Any:
    """`value` with every string encodable as UTF-8. A problem repeats what the client
    sent (a field's name, a value): a lone surrogate there (`{"k\\ud800": 1}`) made
    rendering the 422 itself fail, as a 500. It is shown escaped instead: `k\\ud800`."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable(v) for v in value]
    return value


def problem_of(exc: ContextdError) -> dict[str, Any]:
    return problem(exc.status, exc.code, exc.title, exc.detail, **exc.extra)


# pydantic's error types, in contextd's words: the field is named by `loc`, so each
# says what the value must be. Its own texts were raw ("Unable to parse input string as
# an integer, exceeded maximum size" for a JSON 1e30, which is no string).
_WORDS = {
    "int_parsing": "must be an integer, written in digits (like 4000)",
    "int_parsing_size": "must be an integer, and this number is far too large for one",
    "int_from_float": "must be a whole number (an integer), not a fraction",
    "int_type": "must be an integer",
    "float_parsing": "must be a number (like 2.5)",
    "float_type": "must be a number",
    "finite_number": "must be a finite number",
    "bool_parsing": "must be true or false",
    "bool_type": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be an array",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "missing": "is required",
    "extra_forbidden": "is not a field this accepts",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "string_too_short": "must be at least {min_length} character(s) long",
    "string_too_long": "must be at most {max_length} characters long",
    "too_short": "must hold at least {min_length} item(s)",
    "too_long": "must hold at most {max_length} items",
    "literal_error": "must be one of {expected}",
    "enum": "must be one of {expected}",
    "string_pattern_mismatch": "must match the pattern {pattern}",
}


def in_words(error: Mapping[str, Any]) -> str:
    """One pydantic error's message in contextd's words (its own when it has none)."""
    words = _WORDS.get(str(error.get("type", "")))
    ctx = error.get("ctx") or {}
    if words is None:
        return str(error.get("msg", "is invalid"))
    try:
        return words.format(**ctx)
    except (KeyError, IndexError, ValueError):
        return str(error.get("msg", "is invalid"))
