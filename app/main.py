"""The application factory. Nothing connects at import time; tests build their own app."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import structlog
from fastapi import FastAPI

from app.api import mcp
from app.api.append_lane import AppendLane
from app.api.compaction import router as compaction_router
from app.api.context import router as context_router
from app.api.context_lane import ContextLane
from app.api.docs_ui import install_docs
from app.api.errors import install_error_handlers
from app.api.health import router as health_router
from app.api.lanes import Services
from app.api.leases import router as leases_router
from app.api.messages import router as messages_router
from app.api.openapi import ERROR_RESPONSES
from app.api.openapi import install as install_openapi
from app.api.search import router as search_router
from app.api.sessions import router as sessions_router
from app.api.tokens import router as tokens_router
from app.auth.keys import Keyring, parse_env_keys
from app.auth.middleware import Authenticate
from app.compaction.configured_model import model_client
from app.compaction.runner import CompactionRunner
from app.console.router import router as console_router
from app.context.caches import Caches
from app.core.settings import Settings
from app.core.tokens import get_counter
from app.db import engine as database
from app.db.database import Database
from app.messages.service import append_groups
from app.observability.events import EventWriter
from app.observability.middleware import BodyLimit, RequestContext

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
            from app.db.embedded import resolve_database_url

            url = await asyncio.to_thread(resolve_database_url, settings)
        # Load the default model's tokenizer before serving, not in the first append (its
        # BPE ranks take a second or more to build; every `serve --workers` child pays it).
        await asyncio.to_thread(get_counter, settings.default_model)
        engine = database.create_engine(url, settings.db_pool_size, settings.db_pool_timeout_s)
        app.state.engine = engine
        keyring.engine = engine
        # Payload reads on a pool of their own, of the same size: app/db/engine.py says why.
        payloads = database.create_engine(
            url,
            settings.db_pool_size,
            settings.db_pool_timeout_s,
            plan_cache_mode=database.PAYLOAD_PLAN_CACHE_MODE,
        )
        app.state.database = Database(database.session_factory(engine), payloads)
        groups = append_groups(app.state.database, settings.append_group_size)
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
                settings, app.state.database, app.state.events, groups, runner, Caches()
            )
            if in_process:  # True or "auto"
                runner.start()
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
        docs_url=None,  # served from packaged assets instead of a CDN: app/api/docs_ui.py
        redoc_url=None,
    )
    install_docs(app, "contextd")
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
    # /mcp: the recall tools over the Model Context Protocol (made on its first request;
    # the lifespan above stops it).
    app.state.mcp = mcp.install(app)
    install_error_handlers(app)
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
