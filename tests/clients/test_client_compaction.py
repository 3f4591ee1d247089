"""`compact(wait=True)` against an app that runs compactions (a real HTTP model,
tests/support/fakellm.py) on its own database: a lost answer reports the job the call ran."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from contextd_client import AsyncContextdClient
from fastapi import FastAPI

from app.main import create_app
from tests.support.apps import model_settings
from tests.support.clients import SMALL, LoseAnswers
from tests.support.fakellm import FakeLLM

pytestmark = pytest.mark.fake_llm(slow_s=0.3)


@pytest.fixture(scope="module")
async def app(llm: FakeLLM, make_database: Callable[[], str]) -> AsyncIterator[FastAPI]:
    """Overrides the suite's app, which runs no compactions, for this module's `ctx`."""
    application = create_app(model_settings(llm.base_url, 5.0), database_url=make_database())
    async with application.router.lifespan_context(application):
        yield application


def is_compact(request: httpx.Request) -> bool:
    return request.method == "POST" and request.url.path.endswith("/compact")


async def test_a_waiting_compact_whose_answer_was_lost_reports_its_own_job(
    ctx: AsyncContextdClient, transport: LoseAnswers, llm: FakeLLM, sid: str
) -> None:
    await ctx.put_session(sid, model="gpt-4o-mini", **SMALL)
    for i in range(12):
        await ctx.append(
            sid,
            [
                {"role": "user", "content": f"Turn {i}: inspect src/service_{i}.py, please."},
                {"role": "assistant", "content": f"src/service_{i}.py has {120 + i} lines."},
            ],
        )
    transport.lose_next(1, is_compact)
    done = await ctx.compact(sid, wait=True)
    state = await ctx.compaction(sid)
    # A second request would have started a second job, a noop, and reported that.
    assert [j["job_id"] for j in state.jobs] == [done.job_id]
    assert done.status == "success" and state.last_compaction_seq > 0
    assert done.gate is not None and done.gate == state.jobs[0]["gate"]
    assert set(done.gate["scores"].values()) <= {1.0} and done.gate["dropped"] == []
    assert len([r for r in transport.sent if is_compact(r)]) == 1 and llm.call_count == 1
