"""Sessions to compact over HTTP, and the jobs read back (SPEC §5–§6)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.support.messages import call, result, user

CONSTRAINT = "You must never deploy on Fridays; always run the migration dry-run first."
ANCHOR = "Budget cap is 4,200 EUR"


# Small numbers so a few dozen messages cross the threshold.
SMALL_COMPACTION: dict[str, Any] = {
    "reserved_output_tokens": 0,
    "safety_margin_tokens": 0,
    "min_preserved_turns": 2,
    # Seconds, not a fraction: the fake model answers "slow" in 0.6 s, and a busy
    # machine must not turn that into a timeout ("timeout" never answers at all).
    "compact_timeout_s": 3.0,
    "min_free_ratio": 0.0,
    "regrowth_ratio": 0.0,
}
SMALL: dict[str, Any] = {
    "context_limit": 4000,
    "auto_compact": False,
    "compaction": SMALL_COMPACTION,
}


async def long_session(
    c: httpx.AsyncClient, sid: str, turns: int = 12, settings: dict[str, Any] | None = None
) -> None:
    await c.put(f"/sessions/{sid}", json={**SMALL, "anchors": [ANCHOR], **(settings or {})})
    msgs: list[dict[str, Any]] = [
        user(CONSTRAINT),
        {"role": "assistant", "content": f"Noted. {ANCHOR}."},
    ]
    for i in range(turns):
        msgs += [
            user(f"Turn {i}: please inspect src/service_{i}.py and report line counts."),
            call(f"t{i}", args=f'{{"path": "src/service_{i}.py"}}'),
            result(f"t{i}", f"{120 + i} lines in src/service_{i}.py\n" + "code line\n" * 20),
            {"role": "assistant", "content": f"src/service_{i}.py has {120 + i} lines."},
        ]
    r = await c.post(f"/sessions/{sid}/messages", json={"messages": msgs})
    assert r.status_code == 201, r.text


async def compact(c: httpx.AsyncClient, sid: str, **body: Any) -> dict[str, Any]:
    r = await c.post(f"/sessions/{sid}/compact", json={"wait": True, **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


async def state(c: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    return dict((await c.get(f"/sessions/{sid}/compaction")).json())


async def compact_result(c: httpx.AsyncClient, sid: str, job_id: str) -> dict[str, Any]:
    for _ in range(100):
        jobs = (await state(c, sid))["jobs"]
        job = next(j for j in jobs if j["job_id"] == job_id)
        if job["status"] not in ("pending", "running"):
            return dict(job)
        await asyncio.sleep(0.1)
    raise AssertionError("job did not finish")


def agent_run(steps: int, *, first: int = 0) -> list[dict[str, Any]]:
    """Tool steps of an agent run: a short text, a call, a result of ~20 lines."""
    out: list[dict[str, Any]] = []
    for i in range(first, first + steps):
        out += [
            {"role": "assistant", "content": f"Checking module m{i}."},
            call(f"s{i}", args=f'{{"path": "pkg/m{i}.py"}}'),
            result(f"s{i}", f"pkg/m{i}.py\n" + f"def f{i}(): pass\n" * 20),
        ]
    return out


async def settle(c: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    """Waits until no job of the session is active; its compaction events, oldest first."""
    for _ in range(200):
        jobs = (await state(c, sid))["jobs"]
        if all(j["status"] not in ("pending", "running") for j in jobs):
            break
        await asyncio.sleep(0.05)
    r = await c.get(f"/sessions/{sid}/events", params={"type": "compaction.", "limit": 1000})
    return list(r.json()["events"])
