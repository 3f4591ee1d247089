"""A system message logged as a summary is sent to the model, so it counts toward the context."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asyncpg
import httpx
from alembic import command

from app.core.settings import load_settings
from app.db.migrate import alembic_config, run_migrations
from tests.support.apps import app_client
from tests.support.databases import plain_url
from tests.support.messages import log_of

SUMMARY = {
    "role": "system",
    "content": "Summary of the earlier work: the user wants Postgres 16, no ORM, and "
    "every migration reversible; the schema has users, orders and invoices. " * 4,
    "metadata": {"kind": "summary"},
}
PLAIN_SYSTEM = {"role": "system", "content": "A historical system note that is never sent."}


def turn(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"step {n}: add the index on orders.created_at"},
        {"role": "assistant", "content": f"done with step {n}, the index is in place"},
    ]


async def stats(client: httpx.AsyncClient, sid: str) -> tuple[int, int]:
    r = await client.get(f"/sessions/{sid}")
    assert r.status_code == 200, r.text
    body = r.json()
    return body["stats"]["context_tokens"], body["budget"]["current_tokens"]


async def test_a_summary_class_system_message_counts_and_a_plain_one_does_not(
    client: httpx.AsyncClient, sid: str
) -> None:
    with_summary, with_note = f"{sid}-summary", f"{sid}-note"
    for one, middle in ((with_summary, SUMMARY), (with_note, PLAIN_SYSTEM)):
        r = await client.post(
            f"/sessions/{one}/messages", json={"messages": [*turn(1), middle, *turn(2)]}
        )
        assert r.status_code == 201, r.text
    summary_msgs = await log_of(client, with_summary)
    note_msgs = await log_of(client, with_note)
    summary_tokens = next(m["token_count"] for m in summary_msgs if m["role"] == "system")
    assert summary_tokens > 50
    history_summary, current_summary = await stats(client, with_summary)
    history_note, current_note = await stats(client, with_note)
    turns_only = sum(m["token_count"] for m in note_msgs if m["role"] != "system")
    assert history_note == turns_only
    assert history_summary == turns_only + summary_tokens
    assert current_summary - current_note == summary_tokens

    # What the budget counts is what the payload sends: the summary message is in it.
    ctx = (await client.get(f"/sessions/{with_summary}/context")).json()
    assert any(m.get("content") == SUMMARY["content"] for m in ctx["messages"])
    ctx_note = (await client.get(f"/sessions/{with_note}/context")).json()
    assert all(m.get("content") != PLAIN_SYSTEM["content"] for m in ctx_note["messages"])

    # A tail delete back past the summary takes its tokens away again.
    r = await client.delete(f"/sessions/{with_summary}/messages", params={"from_seq": 3})
    assert r.status_code == 200, r.text
    history_after, _ = await stats(client, with_summary)
    assert history_after == sum(m["token_count"] for m in summary_msgs[:2])


async def test_migration_0011_counts_summaries_already_logged(
    make_database: Callable[[], str],
) -> None:
    url = make_database()
    sid = "sc-migrated"
    async with app_client(load_settings(run_compactions_in_process=False), url) as c:
        r = await c.post(
            f"/sessions/{sid}/messages",
            json={"messages": [*turn(1), SUMMARY, *turn(2), PLAIN_SYSTEM, *turn(3)]},
        )
        assert r.status_code == 201, r.text
        expected_msgs = await log_of(c, sid)
        expected_stats = await stats(c, sid)

    # Put the database back in the state the older code left: running sums without
    # the summary, at revision 0010, and let the migration bring it forward.
    summary_seq = next(m["seq"] for m in expected_msgs if m["role"] == "system")
    summary_tokens = expected_msgs[summary_seq - 1]["token_count"]
    conn = await asyncpg.connect(plain_url(url))
    try:
        await conn.execute(
            "UPDATE messages SET context_tokens_through = context_tokens_through - $1"
            " WHERE session_id = $2 AND seq >= $3",
            summary_tokens,
            sid,
            summary_seq,
        )
        await conn.execute(
            "UPDATE sessions SET context_tokens = context_tokens - $1 WHERE id = $2",
            summary_tokens,
            sid,
        )
        # Later migrations undone for real first: stamping only rewrites the revision.
        await asyncio.to_thread(command.downgrade, alembic_config(url), "0011_summary_class_tokens")
        await asyncio.to_thread(command.stamp, alembic_config(url), "0010_claim_indexes")
        await asyncio.to_thread(run_migrations, url)
        through = await conn.fetch(
            "SELECT seq, context_tokens_through FROM messages WHERE session_id = $1 ORDER BY seq",
            sid,
        )
    finally:
        await conn.close()

    running, want = 0, []
    for m in expected_msgs:
        if m["role"] != "system" or m is expected_msgs[summary_seq - 1]:
            running += m["token_count"]
        want.append((m["seq"], running))
    assert [(r["seq"], r["context_tokens_through"]) for r in through] == want
    async with app_client(load_settings(run_compactions_in_process=False), url) as c:
        assert await stats(c, sid) == expected_stats
