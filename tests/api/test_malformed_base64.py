"""A base64 data URL whose data is not base64: refused at the append, naming the field,
and one stored before that check never turns a payload into a 500 (it did for
`format=anthropic`, which decodes the head of an image to learn its type)."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import httpx
import pytest

from tests.api.test_bad_values import _names, _state
from tests.support.messages import user


def _image(url: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}}]}


@pytest.mark.parametrize(
    "message,field",
    [
        (_image("data:image/png;base64,x"), "messages[0].content[0].image_url.url"),
        (_image("data:image/png;base64,"), "messages[0].content[0].image_url.url"),
        (_image("data:image/png;base64,iVBOR w0KGgo="), "messages[0].content[0].image_url.url"),
        (_image("data:image/png;base64,iVBORw0KGgo=é"), "messages[0].content[0].image_url.url"),
        (
            {
                "role": "user",
                "content": [
                    {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBER"}}
                ],
            },
            "messages[0].content[0].file.file_data",
        ),
        (
            {
                "role": "user",
                "content": [
                    {"type": "input_audio", "input_audio": {"data": "UklGR!", "format": "wav"}}
                ],
            },
            "messages[0].content[0].input_audio.data",
        ),
    ],
)
async def test_malformed_base64_is_refused_at_the_append(
    client: httpx.AsyncClient, sid: str, message: dict[str, Any], field: str
) -> None:
    (
        await client.post(f"/sessions/{sid}/messages", json={"messages": [user("hi")]})
    ).raise_for_status()
    before = await _state(client, sid)
    _names(await client.post(f"/sessions/{sid}/messages", json={"messages": [message]}), field)
    assert await _state(client, sid) == before


async def test_the_new_users_request_is_a_422_and_writes_nothing(
    client: httpx.AsyncClient, sid: str
) -> None:
    body = {"messages": [_image("data:image/png;base64,x")]}
    r = await client.post(f"/sessions/{sid}/messages", json=body)
    _names(r, "messages[0].content[0].image_url.url")
    assert "base64" in r.text
    assert (await client.get(f"/sessions/{sid}")).status_code == 404


async def test_a_malformed_image_stored_earlier_is_left_out_of_every_format(
    client: httpx.AsyncClient, sid: str, database_url: str
) -> None:
    good = _image("data:image/png;base64,iVBORw0KGgo=")
    pdf = {
        "role": "user",
        "content": [
            {"type": "text", "text": "read these"},
            {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBERi0xLjQK"}},
        ],
    }
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [good, pdf]})
    assert r.status_code == 201, r.text
    # As an append before the check could store them (no payload read yet, so no cache).
    conn = await asyncpg.connect(database_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        bad_image = _image("data:image/png;base64,x")
        bad_pdf = json.loads(json.dumps(pdf))
        bad_pdf["content"][1]["file"]["file_data"] = "data:application/pdf;base64,JVBER"
        for seq, body in ((1, bad_image), (2, bad_pdf)):
            await conn.execute(
                "UPDATE messages SET body = $1::jsonb WHERE session_id = $2 AND seq = $3",
                json.dumps(body),
                sid,
                seq,
            )
    finally:
        await conn.close()
    for fmt in ("openai", "anthropic", "responses"):
        r = await client.get(f"/sessions/{sid}/context", params={"format": fmt})
        assert r.status_code == 200, (fmt, r.text)
    payload = (await client.get(f"/sessions/{sid}/context?format=anthropic")).json()
    blocks = [b for m in payload["messages"] for b in m["content"]]
    assert not [b for b in blocks if b["type"] in ("image", "document")], blocks
    assert any("does not hold base64" in b.get("text", "") for b in blocks), blocks
