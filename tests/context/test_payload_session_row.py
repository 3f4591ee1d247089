"""The payload reads its session row with the driver, not the ORM (app/context/repository.py,
`payload_session`): the row it builds must hold what the ORM would load, and the
columns a payload never reads must still raise rather than read as None."""

from __future__ import annotations

import uuid

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import inspect as sa_inspect
from sqlalchemy import select, text
from sqlalchemy.exc import InvalidRequestError

from app.context import session_read
from app.core.errors import NotFound
from app.db.models import SessionRow


async def test_the_payload_row_is_the_orm_row_less_what_payloads_never_read(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    sid = f"row-{uuid.uuid4().hex[:8]}"
    r = await client.put(
        f"/sessions/{sid}",
        json={
            "system_prompt": "Be brief.",
            "tools": [{"type": "function", "function": {"name": "ls", "parameters": {}}}],
            "anchors": ["Never touch the migrations."],
            "context_limit": 4000,
            "metadata": {"team": "infra"},
        },
    )
    assert r.status_code in (200, 201), r.text
    turns = [
        {"role": role, "content": f"Step {i}: " + "the build log says nothing new. " * 12}
        for i in range(6)
        for role in ("user", "assistant")
    ]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": turns})
    assert r.status_code == 201, r.text
    r = await client.post(f"/sessions/{sid}/context", json={"max_tokens": 300})
    assert r.status_code == 200, r.text
    assert r.json()["dropped_count"] > 0  # a trim: the stream's layout is stored
    database = app.state.database
    async with database.transaction() as db:
        # What a compaction leaves: JSON a payload must never decode.
        await db.execute(
            text(
                'UPDATE sessions SET summary = \'{"timeline": ["x"]}\', '
                'memory_flush_candidates = \'[{"text": "y"}]\' WHERE id = :sid'
            ),
            {"sid": sid},
        )

    async with database.payloads() as db:
        row, streams = await session_read.payload_session(db, "default", sid)
    async with database.reading() as db:
        orm = (await db.execute(select(SessionRow).where(SessionRow.id == sid))).scalar_one()
        assert orm.summary == {"timeline": ["x"]}

    not_read = {"summary", "compaction_metadata", "memory_flush_candidates", "metadata_"}
    every = {a.key for a in sa_inspect(SessionRow).column_attrs}
    assert set(session_read._SESSION_KEYS) == every - not_read
    for key in session_read._SESSION_KEYS:
        assert getattr(row, key) == getattr(orm, key), key
    assert row.tools == orm.tools and row.tools  # JSON decoded as the ORM decodes it
    assert row.last_seq == 12 and row.system_prompt == "Be brief."
    for key in sorted(not_read):
        with pytest.raises(InvalidRequestError, match=key):
            getattr(row, key)
    assert len(streams) == 1  # the trim above stored one stream


async def test_no_such_session_is_not_found(app: FastAPI) -> None:
    async with app.state.database.payloads() as db:
        with pytest.raises(NotFound):
            await session_read.payload_session(db, "default", f"none-{uuid.uuid4().hex[:8]}")
