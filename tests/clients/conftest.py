"""The client against the real app (in-process, over ASGI) and the real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from contextd_client import AsyncContextdClient, Retry
from fastapi import FastAPI

from tests.support.clients import LoseAnswers
from tests.support.responses_model import ResponsesModel


@pytest.fixture
async def transport(app: FastAPI) -> LoseAnswers:
    return LoseAnswers(httpx.ASGITransport(app=app))


@pytest.fixture
async def ctx(transport: LoseAnswers) -> AsyncIterator[AsyncContextdClient]:
    retry = Retry(backoff=0.01, max_backoff=0.05)
    async with AsyncContextdClient(
        "http://contextd.test", transport=transport, retry=retry
    ) as client:
        yield client


@pytest.fixture
def responses_model() -> ResponsesModel:
    """A scripted model on OpenAI's Responses API (tests/support/responses_model.py)."""
    return ResponsesModel()


@pytest.fixture
def no_tracing() -> Iterator[None]:
    """For the modules that run the Agents SDK: nothing may try to export traces (no network)."""
    from agents import set_tracing_disabled  # the SDK only where it runs

    set_tracing_disabled(True)
    yield
