"""A layout's units beyond the window are read back by bounded primary-key runs
(app/context/repository.py `LogRead.seqs`), reusing the bodies of the previous read."""

from __future__ import annotations

import httpx
from fastapi import FastAPI
from sqlalchemy import select

from app.context import repository
from app.context.caches import Caches
from app.db.engine import session_factory
from app.db.models import SessionRow
from tests.support.messages import user


async def test_seqs_reads_exactly_the_asked_seqs_across_far_apart_runs(
    app: FastAPI, client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.post(
        f"/sessions/{sid}/messages", json={"messages": [user(f"note {i}") for i in range(400)]}
    )
    assert r.status_code == 201, r.text
    wanted = [1, 2, 3, 60, 150, 151, 300, 399, 400]  # four runs, one of a single seq
    assert repository._runs(wanted) == [[1, 2, 3, 60], [150, 151], [300], [399, 400]]
    windows = Caches().windows
    async with session_factory(app.state.engine)() as orm:
        session = (await orm.scalars(select(SessionRow).where(SessionRow.id == sid))).one()
    async with app.state.database.payloads() as db:
        read = repository.LogRead(session, windows)
        await read.seqs(db, wanted)
        got = read.messages()
        assert [m.seq for m in got] == wanted
        assert {m.seq: m.body["content"] for m in got}[150] == "note 149"
        read.keep()

        # The next read finds the bodies it kept: the very same objects, however the
        # seqs are grouped, and the new ones read in full.
        again = repository.LogRead(session, windows)
        await again.seqs(db, [5, 6, 150, 151])
        by_seq = {m.seq: m for m in again.messages()}
        assert sorted(by_seq) == [5, 6, 150, 151]
        assert by_seq[150] is {m.seq: m for m in got}[150]
        assert by_seq[5].body["content"] == "note 4"
        empty = repository.LogRead(session, windows)
        await empty.seqs(db, [])
        assert empty.messages() == []
