"""Large values are compressed with lz4 where the server has it (migration 0013):
an append's row past the TOAST threshold costs PostgreSQL far less CPU with lz4
than with pglz, and reads back the same."""

from __future__ import annotations

import httpx
from fastapi import FastAPI

from tests.support.messages import call, result, user


async def test_large_values_are_written_with_lz4_and_read_back_whole(
    app: FastAPI, client: httpx.AsyncClient, sid: str
) -> None:
    log = "FAILED tests/test_orders.py::test_total - code HXDUBJ\n" * 400
    bodies = [user("run the tests"), call("c1", "bash", '{"cmd": "pytest"}'), result("c1", log)]
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": bodies})
    assert r.status_code == 201, r.text
    async with app.state.database.driver() as conn:
        has_lz4 = await conn.fetchval(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
        methods = dict(
            await conn.fetch(
                "SELECT a.attname, a.attcompression::text FROM pg_attribute a"
                " WHERE a.attrelid = 'messages'::regclass AND a.attname IN ('body', 'search')"
            )
        )
        row = await conn.fetchrow(
            "SELECT body, pg_column_compression(body) AS body_method,"
            " pg_column_compression(search) AS search_method FROM messages"
            " WHERE tenant_id = 'default' AND session_id = $1 AND seq = 3",
            sid,
        )
    assert row is not None
    if has_lz4:
        assert methods == {"body": "l", "search": "l"}
        assert row["body_method"] == "lz4"
    else:
        assert methods == {"body": "", "search": ""}
        assert row["body_method"] == "pglz"
    got = await client.get(f"/sessions/{sid}/messages/3")
    assert got.status_code == 200, got.text
    assert got.json()["content"] == log
