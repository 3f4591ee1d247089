"""After a compaction the payload fills the room the budget leaves with the newest compacted
units just below the watermark (app/context/backfill.py; SPEC §3 "Recency before
stability", §5), over a real PostgreSQL and the fake model."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.context import repository, statements
from app.core.tokens import get_counter
from tests.support.compaction_http import SMALL, compact
from tests.support.messages import user
from tests.support.stability import SYSTEM, append, is_prefix, payload, step, tool_groups_whole

TASK = "Run the whole migration, step by step."


def decided(body: dict[str, Any]) -> dict[int, tuple[str, str]]:
    return {
        s: (d["action"], d["rule"])
        for d in body["decisions"]
        for s in range(d["seq"], (d.get("through") or d["seq"]) + 1)
    }


async def compacted_run(c: httpx.AsyncClient, sid: str, steps: int = 24) -> int:
    """One user message, then `steps` agent steps, compacted inside the turn; the watermark."""
    r = await c.put(f"/sessions/{sid}", json={**SMALL, "system_prompt": SYSTEM, "recall": True})
    assert r.status_code in (200, 201), r.text
    await append(c, sid, [user(TASK)])
    for i in range(steps):
        await append(c, sid, step(i))
    done = await compact(c, sid, force=True)
    assert done["status"] == "success", done
    return int(done["watermark_after"])


async def test_after_a_compaction_the_room_goes_to_the_newest_compacted_steps(
    cclient: httpx.AsyncClient,
    sid: str,
) -> None:
    watermark = await compacted_run(cclient, sid)
    body = await payload(cclient, sid, max_tokens=3000)
    assert body["summary"] == {"included": True, "through_seq": watermark}
    assert not body["over_budget"] and body["usage"]["input_tokens"] <= 3000
    kept = body["kept_seqs"]
    below = [s for s in kept if 1 < s <= watermark]
    assert below, body["decisions"]
    # The latest user message (the turn anchor) first, then the compacted steps: a
    # contiguous run ending at the watermark, whole tool groups, then the effective history.
    assert kept[0] == 1
    assert below == list(range(below[0], watermark + 1)) and below[0] % 2 == 0
    assert kept[len(below) + 1 :] == list(
        range(watermark + 1, watermark + 1 + len(kept) - len(below) - 1)
    )
    assert tool_groups_whole(body["messages"][2:])
    rules = decided(body)
    assert rules[below[0]] == ("kept", "recent:compacted")
    assert all(rules[s] == ("kept", "tool_group") for s in below[1::2])
    # What is not sent below the watermark is the summary's, and the note names it.
    assert all(rules[s] == ("excluded", "summarized") for s in range(2, below[0]) if s in rules)
    assert body["recall"]["left_out"] == [[2, below[0] - 1]]
    assert any(f"seq 2-{below[0] - 1})" in str(m.get("content")) for m in body["messages"])
    # Nothing twice: the user's message once, each step once.
    texts = [str(m.get("content")) for m in body["messages"]]
    assert texts.count(TASK) == 1
    assert len(set(kept)) == len(kept)
    # Up to the low-water mark (0.7 of the budget): the next calls have room to append.
    assert body["usage"]["input_tokens"] <= 0.7 * 3000 + 200
    counter = get_counter("gpt-4o")
    history = body["messages"][len(body["messages"]) - len(kept) :]
    assert body["usage"]["recent_tokens"] == sum(map(counter.count_message, history[1:]))


async def test_the_compacted_steps_stay_put_until_a_trim_drops_them_first(
    cclient: httpx.AsyncClient,
    sid: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    watermark = await compacted_run(cclient, sid)
    first = await payload(cclient, sid, max_tokens=3000)
    below = [s for s in first["kept_seqs"] if 1 < s <= watermark]
    assert below
    # The log reads of each payload: the window, below the watermark too, in one round
    # trip (a layout's compacted units are within it: no read of them one by one).
    reads: list[str] = []
    # The read as statements.py defines it, counted where repository.py calls it.
    fetch = statements.fetch

    async def counted(db: Any, stmt: Any, params: dict[str, Any]) -> list[Any]:
        reads.append(stmt.sql)
        return await fetch(db, stmt, params)

    monkeypatch.setattr(repository, "fetch", counted)
    prev, i, trimmed = first, 100, None
    for _ in range(40):
        await append(cclient, sid, step(i))
        i += 1
        reads.clear()
        body = await payload(cclient, sid, prev["prefix_id"], max_tokens=3000)
        assert len(reads) == 1, reads
        assert body["summary"]["through_seq"] == watermark  # no compaction in between
        assert not body["over_budget"]
        assert tool_groups_whole(body["messages"][2:])
        if is_prefix(prev["messages"], body["messages"]):
            # Byte for byte the previous payload, and the server says so.
            assert body["usage"]["stable_prefix_messages"] == len(prev["messages"])
            prev = body
            continue
        trimmed = body
        break
    assert trimmed is not None, "the budget never filled"
    # A trim leaves out the compacted steps before any step of the effective history.
    kept = trimmed["kept_seqs"]
    newer = [s for s in kept if s > watermark]
    assert newer == list(range(newer[0], newer[-1] + 1))
    if newer[0] > watermark + 1:
        assert not [s for s in kept if 1 < s <= watermark]
    assert kept[0] == 1 and max(kept) == max(prev["kept_seqs"]) + 2


async def test_without_room_nothing_below_the_watermark_is_sent(
    cclient: httpx.AsyncClient,
    sid: str,
) -> None:
    watermark = await compacted_run(cclient, sid)
    budget = (await cclient.get(f"/sessions/{sid}/budget")).json()["current_tokens"]
    tight = await payload(cclient, sid, max_tokens=budget + 30)
    assert [s for s in tight["kept_seqs"] if 1 < s <= watermark] == []
    assert tight["kept_seqs"][0] == 1


async def test_other_strategies_keep_to_the_effective_history(
    cclient: httpx.AsyncClient,
    sid: str,
) -> None:
    watermark = await compacted_run(cclient, sid)
    for strategy in ("summary", "sliding_window"):
        body = await payload(cclient, sid, max_tokens=3000, strategy=strategy)
        assert [s for s in body["kept_seqs"] if 1 < s <= watermark] == [], strategy
