"""The session's bill (SPEC §4 "The bill") through HTTP and real PostgreSQL: each payload
call's figures in `usage`, their sums in `stats.bill`, the providers' caching rules on
the calls of a stream, the summariser's tokens after a compaction through the fake
model server, and the provider's own cached figure replacing the estimate."""

from __future__ import annotations

from typing import Any

import httpx
from fastapi import FastAPI

from app.core import bill
from tests.support.compaction_http import compact, long_session
from tests.support.fakellm import FakeLLM
from tests.support.messages import user
from tests.support.rereads import output, read

# A system prompt long enough that the shared prefix passes the providers' minimums.
SYSTEM = " ".join(
    f"Rule {k}: keep file src/rule_{k}.py unchanged unless asked." for k in range(120)
)


async def session_bill(client: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    r = await client.get(f"/sessions/{sid}")
    assert r.status_code == 200, r.text
    return dict(r.json()["stats"]["bill"])


async def loop(
    client: httpx.AsyncClient, sid: str, steps: int, **params: Any
) -> list[dict[str, Any]]:
    """An agent loop; the `usage` of every payload call."""
    usages = []
    for i in range(steps):
        r = await client.post(f"/sessions/{sid}/messages", json={"messages": [read(i), output(i)]})
        assert r.status_code == 201, r.text
        ctx = await client.get(f"/sessions/{sid}/context", params=params)
        assert ctx.status_code == 200, ctx.text
        usages.append(ctx.json()["usage"])
    return usages


def bill_metric(body: str, part: str) -> float:
    prefix = f'contextd_bill_tokens_total{{part="{part}"}} '
    return sum(float(line.split()[-1]) for line in body.splitlines() if line.startswith(prefix))


async def test_the_bill_is_the_sum_of_the_calls(client: httpx.AsyncClient, sid: str) -> None:
    before = (await client.get("/metrics")).text
    await client.put(f"/sessions/{sid}", json={"model": "gpt-4o", "system_prompt": SYSTEM})
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("Audit the repo.")]})
    usages = await loop(client, sid, 14, max_tokens=3500)
    got = await session_bill(client, sid)
    after = (await client.get("/metrics")).text
    for part, key in (("input", "input_tokens"), ("cached_input", "cached_input_tokens")):
        grew = bill_metric(after, part) - bill_metric(before, part)
        assert grew == sum(u[key] for u in usages), part
    assert got["calls"] == len(usages)
    for key in ("input_tokens", "cached_input_tokens", "full_history_input_tokens"):
        assert got[key] == sum(u[key] for u in usages), key
    # The first call has no earlier one whose prefix a provider could have cached.
    assert usages[0]["cached_input_tokens"] == 0
    for u in usages[1:]:
        assert u["cache_provider"] == "openai"
        assert u["cached_input_tokens"] == bill.openai_cached(u["stable_prefix_tokens"])
        assert u["full_history_input_tokens"] >= u["input_tokens"] - u["breakdown"]["summary"]
    # The loop trimmed: the whole history costs more than what was sent, and caching
    # made part of what was sent cheaper.
    assert got["full_history_input_tokens"] > got["input_tokens"]
    assert 0 < got["cached_input_tokens"] < got["input_tokens"]
    assert got["saved_tokens"] > 0


async def test_anthropic_reads_the_prefix_only_within_five_minutes(
    client: httpx.AsyncClient, app: FastAPI, sid: str
) -> None:
    await client.put(f"/sessions/{sid}", json={"model": "gpt-4o", "system_prompt": SYSTEM})
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("Audit the repo.")]})
    first, second = await loop(client, sid, 2, format="anthropic")
    assert first["cache_provider"] == "anthropic"
    assert first["cached_input_tokens"] == 0  # no previous call wrote the cache
    assert second["stable_prefix_tokens"] >= 1024
    assert second["cached_input_tokens"] == second["stable_prefix_tokens"]
    # Six minutes pass between two calls of the stream: the cache entry has expired.
    app.state.events.clock_offset_s += 360
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": [read(9), output(9)]})
    assert r.status_code == 201, r.text
    late = (await client.get(f"/sessions/{sid}/context", params={"format": "anthropic"})).json()
    assert late["usage"]["stable_prefix_tokens"] >= 1024
    assert late["usage"]["cached_input_tokens"] == 0
    # OpenAI's rule has no such lifetime here: the same stream in its format caches.
    again = (await client.get(f"/sessions/{sid}/context")).json()["usage"]
    assert again["cached_input_tokens"] == bill.openai_cached(again["stable_prefix_tokens"]) > 0


async def test_the_providers_cached_figure_replaces_the_estimate(
    client: httpx.AsyncClient, sid: str
) -> None:
    await client.put(f"/sessions/{sid}", json={"model": "gpt-4o", "system_prompt": SYSTEM})
    await client.post(f"/sessions/{sid}/messages", json={"messages": [user("Audit the repo.")]})
    usages = await loop(client, sid, 3)
    estimate = usages[-1]["cached_input_tokens"]
    assert estimate > 0
    before = await session_bill(client, sid)
    report = {
        "input_tokens": usages[-1]["input_tokens"],
        "uncalibrated_input_tokens": usages[-1]["uncalibrated_input_tokens"],
        "cached_input_tokens": estimate - 128,  # the provider cached one step less
        "estimated_cached_input_tokens": estimate,
    }
    r = await client.post(f"/sessions/{sid}/usage", json=report)
    assert r.status_code == 200, r.text
    assert r.json()["bill_replaced"] is True
    after = await session_bill(client, sid)
    assert after["cached_input_tokens"] == before["cached_input_tokens"] - 128
    assert after["reported_calls"] == before["reported_calls"] + 1
    # Without the estimate it replaced, a report only calibrates.
    del report["estimated_cached_input_tokens"]
    r = await client.post(f"/sessions/{sid}/usage", json=report)
    assert r.json()["bill_replaced"] is False
    assert (await session_bill(client, sid))["cached_input_tokens"] == after["cached_input_tokens"]


async def test_bad_bill_fields_of_a_usage_report_are_named(
    client: httpx.AsyncClient, sid: str
) -> None:
    await client.put(f"/sessions/{sid}", json={"model": "gpt-4o"})
    body = {"input_tokens": 10, "uncalibrated_input_tokens": 10, "cached_input_tokens": -1}
    r = await client.post(f"/sessions/{sid}/usage", json=body)
    assert r.status_code == 422, r.text
    assert "cached_input_tokens" in r.text


async def test_the_summarisers_tokens_are_billed_after_a_compaction(
    cclient: httpx.AsyncClient,
    llm: FakeLLM,
    sid: str,
) -> None:
    await long_session(cclient, sid)
    assert (await session_bill(cclient, sid))["summariser_input_tokens"] == 0
    done = await compact(cclient, sid)
    meta = done["compaction_metadata"]
    # What the model server reported for the calls it answered (tests/support/fakellm.py: a
    # quarter of the prompt's characters, and of the reply's).
    prompt = sum(
        sum(len(str(m.get("content") or "")) for m in c.body["messages"]) // 4
        for c in llm.calls
        if c.behaviour == "normal"
    )
    assert prompt > 0
    assert meta["model_prompt_tokens"] == prompt
    got = await session_bill(cclient, sid)
    assert got["summariser_input_tokens"] == prompt
    assert got["summariser_output_tokens"] == meta["model_completion_tokens"] > 0
    # The next payload call reports them once; the one after, nothing new.
    first = (await cclient.get(f"/sessions/{sid}/context")).json()["usage"]
    assert first["summariser_input_tokens"] == prompt
    assert first["summariser_output_tokens"] == meta["model_completion_tokens"]
    second = (await cclient.get(f"/sessions/{sid}/context")).json()["usage"]
    assert second["summariser_input_tokens"] == second["summariser_output_tokens"] == 0
    # The whole history includes what the summary now stands for.
    assert first["full_history_input_tokens"] > first["input_tokens"]
