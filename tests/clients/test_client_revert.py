"""`revert_compaction` of contextd-client against a real contextd that runs compactions
(a real HTTP model, tests/support/fakellm.py) on its own database."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
from contextd_client import AsyncContextdClient, Conflict, NotFound, RevertResult, StaleLockToken
from fastapi import FastAPI

from app.main import create_app
from tests.support.apps import model_settings
from tests.support.clients import SMALL
from tests.support.fakellm import FakeLLM

pytestmark = pytest.mark.fake_llm(slow_s=0.3)


@pytest.fixture(scope="module")
async def app(llm: FakeLLM, make_database: Callable[[], str]) -> AsyncIterator[FastAPI]:
    """Overrides the suite's app, which runs no compactions, for this module's `ctx`."""
    application = create_app(model_settings(llm.base_url, 5.0), database_url=make_database())
    async with application.router.lifespan_context(application):
        yield application


async def test_revert_compaction_restores_the_previous_state(
    ctx: AsyncContextdClient, sid: str
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
    before = await ctx.compaction(sid)
    assert before.revertable_job_id is None and before.last_compaction_seq == 0
    lease = await ctx.claim_lease(sid, "agent", ttl_s=60)
    done = await ctx.compact(sid, wait=True, lock_token=lease.lock_token)
    assert done.status == "success" and done.job_id is not None
    compacted = await ctx.compaction(sid)
    assert compacted.revertable_job_id == done.job_id and compacted.last_compaction_seq > 0

    with pytest.raises(StaleLockToken):
        await ctx.revert_compaction(sid, done.job_id, lock_token="old")
    with pytest.raises(NotFound):
        await ctx.revert_compaction(sid, "f" * 32, lock_token=lease.lock_token)
    out = await ctx.revert_compaction(sid, done.job_id, lock_token=lease.lock_token)
    assert isinstance(out, RevertResult)
    assert out.job_id == done.job_id and out.watermark_restored == 0
    assert out.watermark_reverted == compacted.last_compaction_seq
    assert out.summary_restored is False and out.reverted_at is not None
    after = await ctx.compaction(sid)
    assert after.last_compaction_seq == 0 and after.summary == before.summary
    assert after.revertable_job_id is None
    with pytest.raises(Conflict) as err:
        await ctx.revert_compaction(sid, done.job_id, lock_token=lease.lock_token)
    assert err.value.code == "already_reverted"
