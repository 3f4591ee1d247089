"""A transaction PostgreSQL rolls back to break a conflict wrote nothing: the
client gets a retryable 503, never a 500."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.exc import DBAPIError

from app.core.settings import load_settings
from app.main import create_app


@pytest.fixture(scope="module")
async def failing(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    app: FastAPI = create_app(load_settings(run_compactions_in_process=False), database_url)

    @app.get("/_test/deadlock")
    async def deadlock() -> None:
        raise asyncpg.DeadlockDetectedError("deadlock detected")

    @app.get("/_test/serialization")
    async def serialization() -> None:
        cause = asyncpg.SerializationError("could not serialize access")
        raise DBAPIError("UPDATE sessions ...", {}, cause)

    @app.get("/_test/other")
    async def other() -> None:
        raise asyncpg.UniqueViolationError("duplicate key")

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            yield c


@pytest.mark.parametrize("path", ["/_test/deadlock", "/_test/serialization"])
async def test_rolled_back_transactions_are_retryable_503s(
    failing: httpx.AsyncClient, path: str
) -> None:
    r = await failing.get(path)
    assert r.status_code == 503, r.text
    assert r.headers["Retry-After"] == "1"
    assert r.json()["code"] == "unavailable" and "retry" in r.json()["detail"]


async def test_other_driver_errors_stay_internal_errors(failing: httpx.AsyncClient) -> None:
    # Not retryable by nature: a bug to fix, reported as such (and logged).
    r = await failing.get("/_test/other")
    assert r.status_code == 500 and r.json()["code"] == "internal_error"
