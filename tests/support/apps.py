"""An app on its own database, started with its lifespan, and an HTTP client to it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from app.core.settings import CompactionSettings, Settings, load_settings
from app.main import create_app


def model_settings(base_url: str, compact_timeout_s: float, **overrides: Any) -> Settings:
    """Settings of an app whose compactions go to the fake model at `base_url`."""
    return load_settings(
        llm_base_url=base_url,
        llm_model="fake-summariser",
        job_lease_s=3.0,
        compaction=CompactionSettings(compact_timeout_s=compact_timeout_s),
        **overrides,
    )


def model_env(base_url: str, **env: str) -> dict[str, str]:
    """The environment of a `contextd` process whose compactions go to the fake model at
    `base_url`, with `env` added."""
    return {"CONTEXTD_LLM_BASE_URL": base_url, "CONTEXTD_LLM_MODEL": "fake", **env}


@asynccontextmanager
async def app_client(
    settings: Settings, database_url: str, base_url: str = "http://contextd.test"
) -> AsyncIterator[httpx.AsyncClient]:
    # A database of its own when the app runs compactions: any runner on a database
    # may claim any of its jobs, and the suite's shared app has none.
    app = create_app(settings, database_url=database_url)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=base_url, timeout=30) as c:
            yield c
