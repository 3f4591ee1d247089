"""Reading a message's text in pieces: the offsets every other reader of the text uses."""

from __future__ import annotations

import httpx

from app.core.conversation import content_text

IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


async def test_a_non_text_part_adds_no_line_to_the_text_read_in_pieces(
    client: httpx.AsyncClient, sid: str
) -> None:
    # A context preview or cut names char counts and offsets of content_text; the
    # piece endpoint must count the same text, not an empty line for the image.
    body = {
        "role": "user",
        "content": [
            {"type": "text", "text": "look at this"},
            IMAGE,
            {"type": "text", "text": "ok?"},
        ],
    }
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [body]})
    assert r.status_code == 201, r.text
    text = content_text(body)
    lines = (await client.get(f"/sessions/{sid}/messages/1", params={"line_start": 2})).json()
    assert lines["content"] == "ok?"
    assert lines["range"] == {"unit": "line", "start": 2, "end": 2, "total": 2}
    past = await client.get(f"/sessions/{sid}/messages/1", params={"line_start": 50})
    assert past.status_code == 422 and "last line (2)" in past.text, past.text
    assert past.json()["errors"][0]["loc"].endswith("line_start"), past.text
    far = await client.get(f"/sessions/{sid}/messages/1", params={"char_start": 10**9})
    assert far.status_code == 422 and far.json()["errors"][0]["loc"].endswith("char_start")
    chars = (await client.get(f"/sessions/{sid}/messages/1", params={"char_start": 0})).json()
    assert chars["content"] == text and chars["range"]["total"] == len(text)
