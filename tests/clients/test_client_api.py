"""contextd-client against a real contextd: typed answers, errors, retries, leases."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from contextd_client import (
    AsyncContextdClient,
    LockHeld,
    LockRequired,
    NotFound,
    StaleLockToken,
    ValidationFailed,
)

from tests.support.clients import LoseAnswers

CALL = {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}


def is_append(request: httpx.Request) -> bool:
    return request.method == "POST" and request.url.path.endswith("/messages")


def is_release(request: httpx.Request) -> bool:
    return request.method == "DELETE" and request.url.path.endswith("/lock")


async def test_an_append_whose_answer_was_lost_is_stored_once(
    ctx: AsyncContextdClient, transport: LoseAnswers, sid: str
) -> None:
    transport.lose_next(2, is_append)
    batch: list[dict[str, Any]] = [
        {"role": "user", "content": "read app.py"},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "def main(): ..."},
    ]
    result = await ctx.append(sid, batch)
    # Three sends; the first stored the batch, the two retries were replays of its ids.
    sends = [r for r in transport.sent if is_append(r)]
    assert len(sends) == 3 and sends[0].content == sends[1].content == sends[2].content
    assert [m.seq for m in result.messages] == [1, 2, 3]
    assert result.created is False  # the answer that arrived was the replay's (200)
    page = await ctx.messages(sid)
    assert [(m.seq, m.role) for m in page.messages] == [(1, "user"), (2, "assistant"), (3, "tool")]
    assert [m.id for m in page.messages] == [m.id for m in result.messages]
    assert page.messages[1].tool_calls == [CALL] and page.last_seq == 3


async def test_bad_input_names_the_field_and_writes_nothing(
    ctx: AsyncContextdClient, sid: str
) -> None:
    await ctx.append(sid, [{"role": "user", "content": "hi"}])
    with pytest.raises(ValidationFailed) as err:
        await ctx.append(
            sid, [{"role": "user", "content": "ok"}, {"role": "tool", "content": "orphan"}]
        )
    assert "messages[1].tool_call_id" in err.value.fields
    assert (await ctx.get_session(sid)).last_seq == 1
    with pytest.raises(NotFound):
        await ctx.message(sid, 2)
    with pytest.raises(NotFound):
        await ctx.get_session(sid + "-missing")


async def test_sessions_context_budget_and_tokens_are_typed(
    ctx: AsyncContextdClient, sid: str
) -> None:
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    created = await ctx.put_session(
        sid, model="gpt-4o-mini", system_prompt="Be brief.", tools=tools, anchors=["use UTC"]
    )
    assert created.id == sid and created.system_prompt == "Be brief." and created.anchors
    await ctx.append(sid, [{"role": "user", "content": "What time is it in Paris?"}])
    session = await ctx.get_session(sid)
    assert session.last_seq == 1 and session.budget is not None and session.stats is not None
    assert session.stats.message_counts["user"] == 1
    assert isinstance(session.stats.token_calibration, dict)

    payload = await ctx.context(sid)
    assert [m["role"] for m in payload.messages] == ["system", "user"]
    assert payload.messages[0]["content"].startswith("Be brief.")
    assert payload.tools == tools and payload.kept_seqs == [1] and not payload.over_budget
    assert payload.usage.input_tokens > 0 and payload.usage.tokenizer_mode == "exact"
    assert [(d.seq, d.action) for d in payload.decisions] == [(1, "kept")]
    per_call = await ctx.context(sid, system="Answer in French.", dynamic_context=["Goal: x"])
    assert per_call.messages[0]["content"].startswith("Answer in French.")
    assert per_call.usage.breakdown["dynamic"] > 0

    responses = await ctx.context(sid, format="responses")
    assert responses.format == "responses" and responses.messages == []
    assert responses.input and responses.input[-1]["role"] == "user"
    anthropic = await ctx.context(sid, format="anthropic", system="Be brief.")
    assert anthropic.format == "anthropic" and anthropic.system
    assert [m["role"] for m in anthropic.messages] == ["user"]

    budget = await ctx.budget(sid)
    assert budget.status == "ok" and budget.current_tokens > 0
    preview = await ctx.preview_budget(sid, [{"role": "user", "content": "more " * 50}])
    assert preview.fits and preview.added_tokens > 40
    assert preview.budget.current_tokens == budget.current_tokens + preview.added_tokens
    count = await ctx.count_tokens(model="gpt-4o-mini", text="hello world")
    assert count.text == count.total == 2 and count.tokenizer_mode == "exact"

    state = await ctx.compaction(sid)
    assert state.last_compaction_seq == 0
    plan = await ctx.compact(sid, dry_run=True)
    assert plan.dry_run and plan.job_id is None and plan.would
    assert (await ctx.health()).status == "ok" and (await ctx.ready()).status == "ready"
    listed = await ctx.list_sessions(limit=500)
    assert sid in {s.id for s in listed.sessions}


async def test_a_lease_fences_writes_while_held(ctx: AsyncContextdClient, sid: str) -> None:
    await ctx.append(sid, [{"role": "user", "content": "start"}])
    async with ctx.lease(sid, "agent-a", ttl_s=30) as held:
        with pytest.raises(LockRequired):
            await ctx.append(sid, [{"role": "user", "content": "no token"}])
        with pytest.raises(LockHeld) as other:
            await ctx.claim_lease(sid, "agent-b")
        assert other.value.holder == "agent-a"
        done = await ctx.append(
            sid, [{"role": "user", "content": "fenced"}], lock_token=held.lock_token
        )
        assert done.messages[0].seq == 2
        old_token = held.lock_token
    # Released on exit: another owner claims it, and the old token is stale.
    newer = await ctx.claim_lease(sid, "agent-b")
    assert newer.fencing_token > held.fencing_token
    with pytest.raises(StaleLockToken):
        await ctx.append(sid, [{"role": "user", "content": "late"}], lock_token=old_token)
    await ctx.release_lease(sid, newer.lock_token)
    assert (await ctx.get_session(sid)).last_seq == 2


async def test_a_lease_whose_release_answer_was_lost_leaves_the_block_as_it_ended(
    ctx: AsyncContextdClient, transport: LoseAnswers, sid: str
) -> None:
    await ctx.put_session(sid)
    transport.lose_next(1, is_release)
    with pytest.raises(ValueError, match="the block's own error"):
        async with ctx.lease(sid, "agent-a"):
            raise ValueError("the block's own error")
    # The first release was applied; its retry met a stale token, which means released.
    assert len([r for r in transport.sent if is_release(r)]) == 2
    transport.lose_next(1, is_release)
    async with ctx.lease(sid, "agent-b") as held:
        pass
    newer = await ctx.claim_lease(sid, "agent-c")
    assert newer.fencing_token > held.fencing_token
    await ctx.release_lease(sid, newer.lock_token)


async def test_report_usage_calibrates_an_estimated_session(
    ctx: AsyncContextdClient, sid: str
) -> None:
    await ctx.put_session(sid, model="claude-sonnet-4", system_prompt="Be careful.")
    await ctx.append(sid, [{"role": "user", "content": "Refactor src/mod.py, please. " * 40}])
    payload = await ctx.context(sid, max_tokens=1200)
    usage = payload.usage
    assert usage.tokenizer_mode == "estimate" and usage.calibration_factor == 1.0
    assert usage.uncalibrated_input_tokens == usage.input_tokens
    assert payload.recall is None
    # The provider billed a half more than the estimate (cache reads reported apart).
    actual = usage.input_tokens * 3 // 2
    report = await ctx.report_usage(
        sid,
        input_tokens=actual - 20,
        cache_read_input_tokens=20,
        uncalibrated_input_tokens=usage.input_tokens,
    )
    assert report.calibration["samples"] == 1 and report.calibration["factor"] > 1.4
    again = (await ctx.context(sid, max_tokens=1200)).usage
    assert again.calibration_factor == report.calibration["factor"]
    assert again.input_tokens > again.uncalibrated_input_tokens  # type: ignore[operator]
