"""For the client tests: a transport that loses answers, and a session that compacts after
a few turns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx


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


SMALL: dict[str, Any] = {
    "context_limit": 4000,
    "auto_compact": False,
    "compaction": {
        "reserved_output_tokens": 0,
        "safety_margin_tokens": 0,
        "min_preserved_turns": 2,
        "min_free_ratio": 0.0,
        "regrowth_ratio": 0.0,
    },
}
