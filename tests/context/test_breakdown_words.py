"""`usage.breakdown` names what each token is for: a session without a system prompt
has no system tokens, whatever the request's reply priming costs."""

from __future__ import annotations

import httpx

from app.core.tokens import REPLY_PRIMING


async def test_no_system_prompt_means_no_system_tokens(client: httpx.AsyncClient, sid: str) -> None:
    r = await client.post(
        f"/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert r.status_code == 201
    for body in (None, {"max_tokens": 4000}):
        method = "GET" if body is None else "POST"
        r = await client.request(method, f"/sessions/{sid}/context", json=body)
        usage = r.json()["usage"]
        breakdown = usage["breakdown"]
        assert breakdown["system"] == 0, breakdown
        assert breakdown["reply_priming"] == REPLY_PRIMING
        assert sum(breakdown.values()) == usage["input_tokens"]


async def test_a_system_prompt_is_counted_as_system(client: httpx.AsyncClient, sid: str) -> None:
    await client.put(f"/sessions/{sid}", json={"system_prompt": "You are terse."})
    await client.post(
        f"/sessions/{sid}/messages", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    body = (await client.get(f"/sessions/{sid}/context")).json()
    breakdown = body["usage"]["breakdown"]
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    # The system message's own tokens (content and framing), the priming apart.
    assert breakdown["system"] > 3 and breakdown["reply_priming"] == REPLY_PRIMING
    assert sum(breakdown.values()) == body["usage"]["input_tokens"]
