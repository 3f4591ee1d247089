"""The LangChain recall tool invoked async with only the blocking client: the call runs
in a thread, so the agent's other tasks go on while contextd answers."""

from __future__ import annotations

import asyncio
import time

import httpx
from contextd_client import ContextdClient
from contextd_client.langchain import recall_tool


def _slow_not_found(request: httpx.Request) -> httpx.Response:
    time.sleep(0.3)  # contextd taking its time (blocking, as the sync client's I/O is)
    problem = {"status": 404, "code": "not_found", "title": "Not found", "detail": "no such"}
    return httpx.Response(404, json=problem, headers={"content-type": "application/problem+json"})


async def test_an_async_invoke_with_the_sync_client_leaves_the_loop_free() -> None:
    client = ContextdClient("http://contextd.test", transport=httpx.MockTransport(_slow_not_found))
    tool = recall_tool("s1", client)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.02)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        out = await tool.ainvoke({"query": "RUN-ID-770"})
    finally:
        ticker.cancel()
    assert "recall failed" in out
    assert ticks >= 5, ticks  # on the loop, the 0.3 s call let it tick once at most
