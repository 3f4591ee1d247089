"""The application factory. Nothing connects at import time; tests build their own app."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from app import db as database
from app.api.append_lane import AppendLane
from app.api.compaction import router as compaction_router
from app.api.context import router as context_router
from app.api.context_lane import ContextLane
from app.api.errors import domain_response, error_response, problem_response
from app.api.health import router as health_router
from app.api.lanes import Services
from app.api.leases import router as leases_router
from app.api.messages import router as messages_router
from app.api.openapi import install as install_openapi
from app.api.problems import ERROR_RESPONSES
from app.api.sessions import router as sessions_router
from app.api.tokens import router as tokens_router
from app.auth.keys import Keyring, parse_env_keys
from app.auth.middleware import Authenticate
from app.compaction.client import model_client
from app.compaction.runner import CompactionRunner
from app.console.router import router as console_router
from app.database import Database
from app.errors import ContextdError, problem
from app.events import EventWriter
from app.messages import service as messages
from app.messages.groups import Groups
from app.observability.middleware import BodyLimit, RequestContext
from app.search.mcp import build as build_mcp
from app.search.router import router as search_router
from app.settings import Settings
from app.tokens import get_counter

log = structlog.get_logger("contextd")

DESCRIPTION = """
contextd keeps the conversation log of LLM agents and hands them, on every
model call, a payload that fits the model's context window.

Every error is `application/problem+json` with a stable `code`; validation
errors list each faulty field in `errors: [{loc, msg}]`. Nothing is written by a
request that fails.
"""


def create_app(settings: Settings, database_url: str | None = None) -> FastAPI:
    """Build the app. `database_url` wins over settings (tests and the CLI resolve it first)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        url = database_url or settings.database_url
        if url is None:
            from app.embedded_pg import resolve_database_url

            url = await asyncio.to_thread(resolve_database_url, settings)
        # Load the default model's tokenizer before serving, not in the first append (its
        # BPE ranks take a second or more to build; every `serve --workers` child pays it).
        await asyncio.to_thread(get_counter, settings.default_model)
        engine = database.create_engine(url, settings.db_pool_size, settings.db_pool_timeout_s)
        app.state.engine = engine
        keyring.engine = engine
        # Payload reads on a pool of their own, of the same size: app/db.py says why.
        payloads = database.create_engine(
            url,
            settings.db_pool_size,
            settings.db_pool_timeout_s,
            plan_cache_mode=database.PAYLOAD_PLAN_CACHE_MODE,
        )
        app.state.database = Database(database.session_factory(engine), payloads)
        groups = Groups(
            functools.partial(messages.write_group, app.state.database),
            max_size=settings.append_group_size,
        )
        app.state.append_groups = groups
        app.state.events = EventWriter(app.state.database)
        app.state.events.start()
        async with model_client(settings) as client:
            in_process = settings.run_compactions_in_process
            runner = CompactionRunner(
                app.state.database, settings, client, defer_to_workers=in_process == "auto"
            )
            app.state.compactions = runner
            app.state.services = Services(
                settings, app.state.database, app.state.events, groups, runner
            )
            if in_process:  # True or "auto"
                runner.start()
            await app.state.mcp.start()
            try:
                yield
            finally:
                await app.state.mcp.stop()
                await runner.stop()
                await groups.close()
                await app.state.events.stop()
                await engine.dispose()
                await payloads.dispose()

    app = FastAPI(
        title="contextd",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.settings = settings
    # The append route first: routing tries each route in turn, and appends are the
    # most frequent request (matching it behind the sessions routes was ~250 of an
    # append's ~1,550 Python function calls). No other route's path overlaps these.
    for router in (
        messages_router,
        health_router,
        sessions_router,
        leases_router,
        tokens_router,
        context_router,
        compaction_router,
        search_router,
        console_router,
    ):
        app.include_router(router, responses=ERROR_RESPONSES)
    # /mcp: the recall tools over the Model Context Protocol (its route, its lifespan above).
    app.state.mcp = build_mcp(app)
    _install_error_handlers(app)
    install_openapi(app)
    keyring = Keyring(
        parse_env_keys(settings.api_keys.get_secret_value()) if settings.api_keys else {}
    )
    app.state.keyring = keyring
    # Outermost first: request context, then authentication, then the body limit, then
    # the lanes (innermost: they need the tenant and the body read; app/api/lanes.py).
    app.add_middleware(ContextLane, api=app)
    app.add_middleware(AppendLane, api=app)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(Authenticate, keyring=keyring)
    app.add_middleware(RequestContext)
    return app


def format_loc(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """("body", "messages", 3, "tool_call_id") -> "messages[3].tool_call_id"."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "body"


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ContextdError)
    async def domain_error(request: Request, exc: ContextdError) -> JSONResponse:
        return domain_response(exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"loc": format_loc(e["loc"]), "msg": e["msg"]} for e in exc.errors()]
        detail = f"{errors[0]['loc']}: {errors[0]['msg']}" if errors else "invalid request"
        body = problem(422, "validation_error", "Validation failed", detail, errors=errors)
        return problem_response(body)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # FastAPI answers a body it cannot decode (not UTF-8) with a bare 400; to a
            # client that is the same mistake as malformed JSON, and gets the same 422.
            errors = [{"loc": "body", "msg": "is not valid UTF-8 JSON"}]
            body = problem(
                422,
                "validation_error",
                "Validation failed",
                "body: " + errors[0]["msg"],
                errors=errors,
            )
            return problem_response(body)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        body = problem(exc.status_code, code, str(exc.detail), str(exc.detail))
        return problem_response(body, dict(exc.headers or {}))

    async def driver_error(request: Request, exc: Exception) -> JSONResponse:
        return error_response(exc)

    # Registered per class, not for `Exception`: Starlette runs a catch-all handler in
    # its outermost middleware, which answers and then re-raises, so the 503 would
    # reach the client on a connection uvicorn then drops, logged as a 500.
    for cls in database.UNAVAILABLE_CLASSES:
        app.add_exception_handler(cls, driver_error)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        return await driver_error(request, exc)
