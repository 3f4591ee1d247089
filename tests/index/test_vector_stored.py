"""What an append stores in `messages.search` (and app/index/unindexed.py gives the
messages stored before search): the vector of `lexemes()`, sent in PostgreSQL's binary
form (app/index/vector.py), the same as its text form (`message_tsvector`)."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from app.index.lexemes import message_tsvector, session_lexeme
from tests.support.messages import call, result, user

BODIES: list[dict[str, Any]] = [
    user("Please fix src/app/models.py: it's a\\b, getUserName E4711"),
    call("c1", "read_file", '{"path": "src/app/models.py", "q": "it\'s"}'),
    result("c1", "FAILED tests/test_orders.py::test_total - code HXDUBJ\n" * 300),
    {"role": "assistant", "content": "数据库连接失败了，请检查配置文件。Größe ＡＢＣ"},
    {"role": "assistant", "content": " ".join(f"w{i}" for i in range(17_000))},
    {"role": "user", "content": "!!! ... ---"},
]


async def test_an_append_stores_the_vector_of_the_text_form(
    app: FastAPI, client: httpx.AsyncClient, sid: str
) -> None:
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": BODIES})
    assert r.status_code == 201, r.text
    key = session_lexeme("default", sid)
    async with app.state.database.driver() as conn:
        rows = await conn.fetch(
            "SELECT body, search, search::text AS text FROM messages"
            " WHERE tenant_id = 'default' AND session_id = $1 ORDER BY seq",
            sid,
        )
        assert len(rows) == len(BODIES)
        for row in rows:
            written = await conn.fetchval(
                "SELECT $1::text::tsvector::text", message_tsvector(row["body"], key)
            )
            assert row["text"] == written
            # Read back through the binary codec: PostgreSQL's own text.
            assert row["search"] == written


async def test_a_search_finds_what_an_append_just_acknowledged(
    client: httpx.AsyncClient, sid: str
) -> None:
    for n in range(5):
        r = await client.post(
            f"/sessions/{sid}/messages", json={"messages": [user(f"step {n}: code QX{n}Z")]}
        )
        assert r.status_code in (200, 201), r.text
        found = await client.get(f"/sessions/{sid}/search", params={"q": f"QX{n}Z"})
        assert found.status_code == 200, found.text
        assert [h["seq"] for h in found.json()["hits"]] == [n + 1]
