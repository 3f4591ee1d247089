"""`usage.stable_prefix_tokens` across compactions (SPEC §3 "Payload stability", §4 "The
bill"), through HTTP and real PostgreSQL, with the extractive summariser (an app with no
model: deterministic, whatever the machine's load).

An agent loop echoes each payload's `prefix_id`; on every call the figure must equal
the prefix the two payloads share, measured by comparing them message for message
(the figure the bill applies each provider's caching rule to). A compaction inside one
long turn moves the watermark past the turn anchor (the run's user message), which
stays in front of the history: the earlier payload rebuilt from its layout must hold
it too, and must not once a new user message took its place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from app.core.settings import load_settings
from tests.support.apps import app_client
from tests.support.compaction_http import SMALL, compact
from tests.support.messages import user
from tests.support.stability import SYSTEM, TOOLS, append, is_prefix, payload, shared_prefix, step

MAX_TOKENS = 3000  # under SMALL's context limit: the stream's budget on every call


@pytest.fixture(scope="module")
async def xclient(make_database: Callable[[], str]) -> AsyncIterator[httpx.AsyncClient]:
    """An app with no model (extractive summaries) whose compactions run in the request."""
    async with app_client(load_settings(), make_database(), "http://extractive.test") as c:
        yield c


class Loop:
    """The agent's side: each payload asked for with the previous one's `prefix_id`, and
    checked against it."""

    def __init__(self, c: httpx.AsyncClient, sid: str) -> None:
        self.c, self.sid = c, sid
        self.last: dict[str, Any] | None = None

    async def call(self) -> dict[str, Any]:
        before = self.last
        now = await payload(
            self.c, self.sid, before["prefix_id"] if before else None, max_tokens=MAX_TOKENS
        )
        if before is not None:
            messages, tokens = shared_prefix(before, now)
            usage = now["usage"]
            assert (usage["stable_prefix_messages"], usage["stable_prefix_tokens"]) == (
                messages,
                tokens,
            ), (now["kept_seqs"], before["kept_seqs"], now["summary"])
        self.last = now
        return now


async def test_the_stable_prefix_is_what_payloads_share_across_compactions(
    xclient: httpx.AsyncClient, sid: str
) -> None:
    r = await xclient.put(
        f"/sessions/{sid}", json={**SMALL, "system_prompt": SYSTEM, "tools": TOOLS}
    )
    assert r.status_code in (200, 201), r.text
    await append(xclient, sid, [user("Run the whole migration, step by step.")])
    loop = Loop(xclient, sid)
    for i in range(8):
        await append(xclient, sid, step(i))
        first = await loop.call()
    assert first["dropped_count"] == 0 and not first["summary"]["included"]

    # A compaction inside the turn: the summary follows the system prompt, so the
    # system message and the tools are shared (the untrimmed layout the echo names
    # is retired with the old watermark; it used to claim nothing).
    done = await compact(xclient, sid, force=True)
    assert done["status"] == "success", done
    watermark = int(done["watermark_after"])
    assert watermark > 1, done
    after = await loop.call()
    assert after["summary"]["through_seq"] == watermark
    assert after["kept_seqs"][0] == 1  # the turn anchor, below the watermark
    assert after["usage"]["stable_prefix_messages"] == 1

    # The log grows: each payload is the previous one plus the new step, the anchor in
    # front (it used to count the head alone), until a trim cuts to the low-water mark
    # (it used to count the head alone there too, though the anchor was still shared).
    trimmed = False
    for i in range(8, 30):
        await append(xclient, sid, step(i))
        before = loop.last
        now = await loop.call()
        assert before is not None and now["kept_seqs"][0] == 1
        if is_prefix(before["messages"], now["messages"]):
            assert now["usage"]["stable_prefix_messages"] == len(before["messages"])
        elif now["prefix_id"].split(".")[0] != before["prefix_id"].split(".")[0]:
            trimmed = True
            break
    assert trimmed, "the budget never forced a trim"

    # Another compaction, then a new user message: the anchor the earlier payloads
    # opened their history with is now covered by the summary and leaves the payload;
    # only the head is shared (it used to claim the whole earlier payload).
    second = await compact(xclient, sid, force=True)
    assert second["status"] == "success", second
    await loop.call()
    await append(xclient, sid, step(30))
    grown = await loop.call()
    assert grown["kept_seqs"][0] == 1 and grown["usage"]["stable_prefix_messages"] > 2
    await append(xclient, sid, [user("Now verify the migrated tables."), *step(31)])
    new_turn = await loop.call()
    assert 1 not in new_turn["kept_seqs"]
    head = len(new_turn["messages"]) - len(new_turn["kept_seqs"])
    assert new_turn["usage"]["stable_prefix_messages"] == head

    # A revert brings the first summary back (and bumps the session's generation): the
    # earlier payload's layout is retired, its head differs after the system message.
    r = await xclient.post(f"/sessions/{sid}/compaction/{second['job_id']}/revert")
    assert r.status_code == 200, r.text
    reverted = await loop.call()
    assert reverted["summary"]["through_seq"] == watermark
    assert reverted["usage"]["stable_prefix_messages"] == 1
    await append(xclient, sid, step(32))
    await loop.call()


async def test_a_first_user_message_after_agent_steps_appends_to_the_prefix(
    xclient: httpx.AsyncClient, sid: str
) -> None:
    """No compaction, no user message before: the one that arrives is the payload's
    newest unit, the earlier payload all shared (no anchor was summarized), with the
    echo or without it."""
    r = await xclient.put(f"/sessions/{sid}", json={"system_prompt": SYSTEM, "tools": TOOLS})
    assert r.status_code in (200, 201), r.text
    await append(xclient, sid, [{"role": "assistant", "content": "Starting the audit."}])
    await append(xclient, sid, step(0))
    loop = Loop(xclient, sid)
    first = await loop.call()
    await append(xclient, sid, [user("Please also check src/mod_3.py.")])
    echoed = await loop.call()
    assert is_prefix(first["messages"], echoed["messages"])
    assert echoed["usage"]["stable_prefix_messages"] == len(first["messages"])
    plain = await payload(xclient, sid, max_tokens=MAX_TOKENS)
    assert plain["usage"]["stable_prefix_tokens"] == shared_prefix(first, plain)[1]
