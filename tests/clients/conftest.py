"""The client against the real app (in-process, over ASGI) and the real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from contextd_client import AsyncContextdClient, Retry
from fastapi import FastAPI

from tests.clients.responses_model import ResponsesModel


class LoseAnswers(httpx.AsyncBaseTransport):
    """Sends each request on, then loses the answer of the first `n` matching ones:
    the server has stored what the request asked, the client sees a broken connection."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.lose: Callable[[httpx.Request], bool] = lambda r: False
        self.budget = 0
        self.sent: list[httpx.Request] = []

    def lose_next(self, n: int, when: Callable[[httpx.Request], bool]) -> None:
        self.budget, self.lose = n, when

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        response = await self.inner.handle_async_request(request)
        if self.budget > 0 and self.lose(request):
            self.budget -= 1
            await response.aread()
            raise httpx.ReadError("connection reset after the request was sent", request=request)
        return response


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
    """A scripted model on OpenAI's Responses API (tests/clients/responses_model.py)."""
    return ResponsesModel()
