"""POST /sessions/{id}/usage calibrates an estimate-mode session (SPEC §4), over HTTP on PostgreSQL."""

from __future__ import annotations

import math
from typing import Any

import httpx

from tests.support.messages import call, result, user


async def seeded(client: httpx.AsyncClient, sid: str, model: str) -> None:
    r = await client.put(f"/sessions/{sid}", json={"model": model, "system_prompt": "Be careful."})
    assert r.status_code == 201, r.text
    msgs: list[dict[str, Any]] = []
    for i in range(12):
        msgs += [
            user(f"第{i}步：请检查 src/mod_{i}.py 并报告行数。Then summarise it."),
            call(f"c{i}"),
            result(f"c{i}", f"{100 + i} lines\n" + "def f(x): return x * 2\n" * 10),
            {"role": "assistant", "content": f"src/mod_{i}.py has {100 + i} lines."},
        ]
    msgs.append(user("Now refactor all of them."))
    r = await client.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text


async def context(client: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    r = await client.get(f"/sessions/{sid}/context", params={"max_tokens": 1200})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def report(client: httpx.AsyncClient, sid: str, **body: Any) -> httpx.Response:
    return await client.post(f"/sessions/{sid}/usage", json=body)


async def test_reported_usage_calibrates_counts_budget_and_fit(
    client: httpx.AsyncClient, sid: str
) -> None:
    await seeded(client, sid, "claude-sonnet-4")
    before = await context(client, sid)
    usage = before["usage"]
    assert usage["tokenizer_mode"] == "estimate" and usage["calibration_factor"] == 1.0
    assert usage["uncalibrated_input_tokens"] == usage["input_tokens"] <= 1200
    status0 = (await client.get(f"/sessions/{sid}")).json()
    raw_current = status0["budget"]["current_tokens"]
    assert status0["stats"]["token_calibration"]["samples"] == 0

    # The provider billed half as much again as the estimate said (Anthropic
    # reports cached input apart; contextd adds it up).
    actual = math.ceil(usage["input_tokens"] * 1.5)
    r = await report(
        client,
        sid,
        input_tokens=actual - 300,
        cache_read_input_tokens=300,
        uncalibrated_input_tokens=usage["uncalibrated_input_tokens"],
    )
    assert r.status_code == 200, r.text
    cal = r.json()["calibration"]
    assert cal["applied"] is True and cal["samples"] == 1
    assert math.isclose(cal["factor"], actual / usage["input_tokens"], abs_tol=1e-4)
    assert cal["last"]["error_before"] < -0.3 and abs(cal["last"]["error_after"]) < 1e-3

    after = await context(client, sid)
    u = after["usage"]
    assert u["calibration_factor"] == cal["factor"]
    assert u["input_tokens"] == math.ceil(u["uncalibrated_input_tokens"] * cal["factor"])
    assert u["input_tokens"] <= 1200 == u["budget"] and not after["over_budget"]
    assert sum(u["breakdown"].values()) == u["input_tokens"]
    # The same budget now holds less: what was sent would have cost 1.5x as much.
    assert u["uncalibrated_input_tokens"] < usage["uncalibrated_input_tokens"]
    assert len(after["kept_seqs"]) < len(before["kept_seqs"])
    assert after["kept_seqs"][-1] == before["kept_seqs"][-1]  # the latest user message stays

    session = (await client.get(f"/sessions/{sid}")).json()
    assert session["budget"]["current_tokens"] == math.ceil(raw_current * cal["factor"])
    shown = session["stats"]["token_calibration"]
    assert shown["samples"] == 1 and shown["factor"] == cal["factor"]
    assert shown["mean_abs_error_uncalibrated"] > 0.3


async def test_exact_sessions_record_reports_without_scaling(
    client: httpx.AsyncClient, sid: str
) -> None:
    await seeded(client, sid, "gpt-4o")
    before = await context(client, sid)
    assert before["usage"]["tokenizer_mode"] == "exact"
    raw = before["usage"]["uncalibrated_input_tokens"]
    r = await report(client, sid, input_tokens=raw + 12, uncalibrated_input_tokens=raw)
    assert r.status_code == 200, r.text
    cal = r.json()["calibration"]
    assert cal["applied"] is False and cal["factor"] == 1.0 and cal["samples"] == 1
    assert cal["last"]["error_before"] == cal["last"]["error_after"] < 0
    again = await context(client, sid)
    assert again["messages"] == before["messages"]
    # stable_prefix_* say what a call shares with the previous one: the first call trimmed.
    prefix = ("stable_prefix_tokens", "stable_prefix_messages")
    assert {k: v for k, v in again["usage"].items() if k not in prefix} == {
        k: v for k, v in before["usage"].items() if k not in prefix
    }


async def test_bad_reports_are_4xx_and_write_nothing(client: httpx.AsyncClient, sid: str) -> None:
    await seeded(client, sid, "claude-sonnet-4")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"input_tokens": 10}, "uncalibrated_input_tokens"),
        ({"input_tokens": -1, "uncalibrated_input_tokens": 5}, "input_tokens"),
        ({"input_tokens": 0, "uncalibrated_input_tokens": 5}, "input_tokens"),
        ({"input_tokens": 5, "uncalibrated_input_tokens": 0}, "uncalibrated_input_tokens"),
        ({"input_tokens": 5, "uncalibrated_input_tokens": 5, "output": 1}, "output"),
    ]
    for body, loc in cases:
        r = await report(client, sid, **body)
        assert r.status_code == 422, r.text
        assert r.json()["errors"][0]["loc"] == loc
    r = await report(client, f"{sid}-none", input_tokens=5, uncalibrated_input_tokens=5)
    assert r.status_code == 404
    lease = (await client.post(f"/sessions/{sid}/lock", json={"owner": "a", "ttl_s": 30})).json()
    r = await report(client, sid, input_tokens=5, uncalibrated_input_tokens=5)
    assert r.status_code == 409 and r.json()["code"] == "lock_required"
    stats = (await client.get(f"/sessions/{sid}")).json()["stats"]["token_calibration"]
    assert stats["samples"] == 0 and stats["factor"] == 1.0
    r = await report(
        client, sid, input_tokens=5, uncalibrated_input_tokens=5, lock_token=lease["lock_token"]
    )
    assert r.status_code == 200 and r.json()["calibration"]["samples"] == 1
