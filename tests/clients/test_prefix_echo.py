"""The clients echo each payload stream's `prefix_id`, so `usage.stable_prefix_tokens`
is exact without the caller carrying ids (real app over ASGI, real PostgreSQL)."""

from __future__ import annotations

from typing import Any

import httpx
from contextd_client import AsyncContextdClient, Context

from tests.support.clients import LoseAnswers
from tests.support.prefix_echo import MODEL, NARROW, WIDE, measured, say


def echoed(transport: LoseAnswers) -> list[str | None]:
    """The `previous_prefix_id` of every context request sent, in order."""
    return [
        r.url.params.get("previous_prefix_id")
        for r in transport.sent
        if r.url.path.endswith("/context")
    ]


async def test_each_stream_echoes_its_last_prefix_id_and_the_stable_prefix_is_exact(
    ctx: AsyncContextdClient, transport: LoseAnswers, sid: str
) -> None:
    await ctx.put_session(sid, model=MODEL, system_prompt="Be terse.", auto_compact=False)
    await ctx.append(sid, [say("user", 0)])
    wide1 = await ctx.context(sid, max_tokens=WIDE)
    narrow1 = await ctx.context(sid, max_tokens=NARROW)
    # Several steps between two model calls: the server's own guess (only the newest
    # step is new) would count the earlier new messages as shared.
    steps = [say("assistant", 0), say("user", 1), say("assistant", 1), say("user", 2)]
    await ctx.append(sid, steps)
    wide2 = await ctx.context(sid, max_tokens=WIDE)
    narrow2 = await ctx.context(sid, max_tokens=NARROW)
    other_format = await ctx.context(sid, max_tokens=WIDE, format="responses")

    assert echoed(transport) == [None, None, wide1.prefix_id, narrow1.prefix_id, None]
    assert wide1.prefix_id and narrow1.prefix_id and other_format.prefix_id
    # The server sends it beside `usage`; the client's usage names it too.
    for payload in (wide1, narrow1, wide2, narrow2, other_format):
        assert payload.usage.prefix_id == payload.prefix_id
    assert wide2.usage.stable_prefix_messages
    assert narrow2.dropped_count > 0  # the narrow stream trimmed between its two calls
    for before, after in ((wide1, wide2), (narrow1, narrow2)):
        assert after.usage.stable_prefix_tokens == measured(before.messages, after.messages)
    assert (wide2.usage.stable_prefix_tokens or 0) > 0


async def test_an_explicit_prefix_id_or_none_overrides_the_remembered_one(
    ctx: AsyncContextdClient, transport: LoseAnswers, sid: str
) -> None:
    await ctx.put_session(sid, model=MODEL, auto_compact=False)
    await ctx.append(sid, [say("user", 0)])
    first = await ctx.context(sid, max_tokens=WIDE)
    await ctx.append(sid, [say("assistant", 0), say("user", 1)])
    second = await ctx.context(sid, max_tokens=WIDE)
    await ctx.append(sid, [say("assistant", 1), say("user", 2)])

    guessed = await ctx.context(sid, max_tokens=WIDE, previous_prefix_id=None)
    # Without the echo the server assumes the previous call lacked only the newest
    # message, so it claims the assistant reply as shared: more than was.
    assert guessed.usage.stable_prefix_tokens == measured(
        [*second.messages, say("assistant", 1)], guessed.messages
    )
    assert guessed.usage.stable_prefix_tokens > measured(second.messages, guessed.messages)
    explicit = await ctx.context(sid, max_tokens=WIDE, previous_prefix_id=first.prefix_id)
    assert explicit.usage.stable_prefix_tokens == measured(first.messages, explicit.messages)
    assert echoed(transport)[-2:] == [None, first.prefix_id]
    # The remembered id is the last one received, whatever the caller sent before it.
    again = await ctx.context(sid, max_tokens=WIDE)
    assert echoed(transport)[-1] == explicit.prefix_id
    assert again.usage.stable_prefix_tokens == measured(explicit.messages, again.messages)


async def test_echoing_can_be_turned_off_per_client(app: Any, sid: str) -> None:
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with AsyncContextdClient(
        "http://contextd.test",
        transport=httpx.ASGITransport(app=app),
        echo_prefix_ids=False,
    ) as client:
        client._http.event_hooks["request"].append(record)
        await client.put_session(sid, model=MODEL)
        await client.append(sid, [say("user", 0)])
        for _ in range(2):
            payload: Context = await client.context(sid, max_tokens=WIDE)
            assert payload.prefix_id
    assert [
        r.url.params.get("previous_prefix_id") for r in sent if r.url.path.endswith("/context")
    ] == [None, None]
