"""Exceptions to problem+json responses: the app's exception handlers and the one
mapping they share with the lanes (app/api/lanes.py), which answer before the router."""

from __future__ import annotations

import re
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.core.errors import ContextdError, Unavailable, in_words, problem, problem_of
from app.db.driver_errors import UNAVAILABLE_CLASSES, is_rolled_back, is_unavailable

log = structlog.get_logger("contextd")

SESSION_ID_RULE = "must be 1–128 characters of [A-Za-z0-9._:-], and not '.' or '..'"


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
    if is_unavailable(exc):
        log.warning("database unavailable", error=type(exc).__name__)
        return domain_response(Unavailable("the database is unreachable; retry"))
    if is_rolled_back(exc):
        # Lock order is meant to make this impossible; if it still happens the request
        # wrote nothing and may simply be sent again.
        log.warning("transaction rolled back by the database", error=type(exc).__name__)
        return domain_response(Unavailable("a concurrent write conflicted; retry", retry_after_s=1))
    log.exception("unhandled error", exc_info=exc)
    return problem_response(
        problem(500, "internal_error", "Internal error", "an unexpected error occurred")
    )


def validation_response(errors: list[dict[str, str]]) -> JSONResponse:
    detail = f"{errors[0]['loc']}: {errors[0]['msg']}" if errors else "invalid request"
    return problem_response(
        problem(422, "validation_error", "Validation failed", detail, errors=errors)
    )


def format_loc(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """("body", "messages", 3, "tool_call_id") -> "messages[3].tool_call_id"."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "body"


def request_error(request: Request, error: dict[str, Any]) -> dict[str, str]:
    """One of FastAPI's validation errors as {loc, msg}, in words a client can act on."""
    loc = tuple(error["loc"])
    kind = error.get("type", "")
    if kind == "json_invalid":
        # FastAPI puts the character offset of the decode error where a field would be:
        # "[46]" reads as an array index, so the offset goes into the message.
        reason = str(error.get("ctx", {}).get("error", "JSON decode error"))
        offset = loc[1] if len(loc) > 1 else None
        where = f" at character {offset}" if isinstance(offset, int) else ""
        return {"loc": "body", "msg": f"is not valid JSON: {reason}{where}"}
    if kind == "string_unicode":
        # pydantic's own JSON parser meets a lone surrogate escape (a key or a value).
        return {
            "loc": format_loc(loc),
            "msg": "holds a lone UTF-16 surrogate escape (\\ud800-\\udfff), which is not "
            "valid Unicode",
        }
    if kind == "too_long" and isinstance(error.get("input"), str):
        # A bound on a checked string (`StoredStr`) reads "at most N items after
        # validation": pydantic applies it to the validator's result, not to a str.
        limit = error.get("ctx", {}).get("max_length")
        return {"loc": format_loc(loc), "msg": f"at most {limit} characters"}
    if loc == ("path", "session_id"):
        return {"loc": "session_id", "msg": SESSION_ID_RULE}
    if loc == ("body",) and not _json_content_type(request):
        sent = request.headers.get("content-type") or "no content-type"
        return {
            "loc": "body",
            "msg": "must be a JSON object sent with `content-type: application/json` "
            f"(this request has {sent})",
        }
    if kind == "value_error":
        # Our own validators' words (app/core/jsonsafe.py json_number), without pydantic's
        # "Value error, " in front.
        return {"loc": format_loc(loc), "msg": str(error.get("ctx", {}).get("error", error["msg"]))}
    return {"loc": format_loc(loc), "msg": in_words(error)}


_JSON_TYPE = re.compile(r"application/(?:[!#$%&'*.^_`|~0-9a-z-]+\+)?json")


def _json_content_type(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return _JSON_TYPE.fullmatch(kind) is not None


def body_parse_error(exc: StarletteHTTPException) -> dict[str, str]:
    """What FastAPI's bare 400 "There was an error parsing the body" was about."""
    cause = exc.__cause__
    if isinstance(cause, RecursionError):
        return {"loc": "body", "msg": "is nested too deeply to parse as JSON"}
    if isinstance(cause, UnicodeDecodeError):
        return {"loc": "body", "msg": "is not valid UTF-8"}
    return {"loc": "body", "msg": "could not be parsed as JSON"}


def slash_in_session_id(request: Request) -> bool:
    """A path no route matched that a session route would match if its id held a '/'
    (sent encoded as %2F, or as a plain '/' before a route's own suffix)."""
    path = request.url.path
    if not path.startswith("/sessions/"):
        return False
    encoded = b"%2f" in bytes(request.scope.get("raw_path") or b"").lower()
    # The OpenAPI description lists every route (built once, then cached by FastAPI).
    paths: dict[str, dict[str, Any]] = request.app.openapi()["paths"]
    for template, operations in paths.items():
        if "{session_id}" not in template or request.method.lower() not in operations:
            continue
        pattern = re.escape(template).replace(re.escape("{session_id}"), "(?P<sid>.+)")
        pattern = re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", pattern)
        match = re.fullmatch(pattern, path)
        if match is None or "/" not in match["sid"]:
            continue
        # `/sessions/{session_id}` matches any path under /sessions/: only an encoded
        # slash makes that one a session id rather than an unknown route.
        if template != "/sessions/{session_id}" or encoded:
            return True
    return False


def _under_a_session(path: str) -> bool:
    """`/sessions/<one or more segments>/<more>`."""
    return path.startswith("/sessions/") and "/" in path[len("/sessions/") :].strip("/")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ContextdError)
    async def domain_error(request: Request, exc: ContextdError) -> JSONResponse:
        return domain_response(exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_response([request_error(request, e) for e in exc.errors()])

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # FastAPI answers a body it cannot decode with a bare 400; to a client that
            # is the same mistake as malformed JSON, and gets the same 422.
            return validation_response([body_parse_error(exc)])
        if exc.status_code == 404 and slash_in_session_id(request):
            msg = f"{SESSION_ID_RULE} (this one holds a '/')"
            return validation_response([{"loc": "session_id", "msg": msg}])
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        detail = str(exc.detail)
        path = request.url.path
        if exc.status_code == 404 and _under_a_session(path):
            # `/sessions/team/alpha`: an unknown route under session "team", or a session
            # id with a '/'; the answer names both rather than a bare "Not Found".
            detail = (
                "no route matches this path; if a session id was meant, session ids "
                f"{SESSION_ID_RULE}, and hold no '/'"
            )
        body = problem(exc.status_code, code, str(exc.detail), detail)
        return problem_response(body, dict(exc.headers or {}))

    async def driver_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(exc)

    # Registered per class, not for `Exception`: Starlette runs a catch-all handler in
    # its outermost middleware, which answers and then re-raises, so the 503 would
    # reach the client on a connection uvicorn then drops, logged as a 500.
    for cls in UNAVAILABLE_CLASSES:
        app.add_exception_handler(cls, driver_error)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return await driver_error(request, exc)
