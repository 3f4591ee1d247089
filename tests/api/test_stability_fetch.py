"""The layout's missing units are read back by bounded primary-key runs (app/context/stability.py)."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from app.context import stability
from app.db import session_factory
from app.models import SessionRow
from tests.api.test_messages import user


async def test_fetch_reads_exactly_the_asked_seqs_across_far_apart_runs(
    app: FastAPI, client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.post(
        f"/sessions/{sid}/messages", json={"messages": [user(f"note {i}") for i in range(400)]}
    )
    assert r.status_code == 201, r.text
    wanted = [1, 2, 3, 60, 150, 151, 300, 399, 400]  # four runs, one of a single seq
    assert stability._runs(wanted) == [[1, 2, 3, 60], [150, 151], [300], [399, 400]]
    async with session_factory(app.state.engine)() as db:
        session = (await db.scalars(select(SessionRow).where(SessionRow.id == sid))).one()
        got = await stability.fetch(db, session, wanted)
        assert sorted(m.seq for m in got) == wanted
        assert {m.seq: m.body["content"] for m in got}[150] == "note 149"
        one_run = await stability.fetch(db, session, [5, 6])
        assert sorted(m.seq for m in one_run) == [5, 6]
        assert await stability.fetch(db, session, []) == []
