"""Sessions for the console's browser tests and README screenshots, made through the API.

`seed` leaves one session in each budget status, one with a stored compaction
(and the history that followed it), and one under a lease.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

LOREM = (
    "The build failed in tests/test_app.py because the fixture opens the database before "
    "the migrations ran; moving the migration into the session fixture fixes it. "
)


@dataclass(frozen=True)
class Seeded:
    quiet: str  # ok, never compacted
    warn: str  # warn, under a lease
    full: str  # compact_needed, auto-compaction off
    compacted: str  # a successful compaction, then more history


def turn(i: int, size: int = 3) -> list[dict[str, object]]:
    call = f"call_{i}"
    return [
        {"role": "user", "content": f"Step {i}: please look at module_{i}.py. " + LOREM},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": f'{{"path": "module_{i}.py"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call, "content": f"# module_{i}.py\n" + LOREM * size},
        {"role": "assistant", "content": f"Module {i} reads the settings once; " + LOREM},
    ]


def _fill(c: httpx.Client, sid: str, status: str, start: int = 0) -> int:
    """Append turns until the session's budget reaches `status`; returns the next turn number."""
    # Twelve turns stay under any threshold of the small budget: one request for them.
    batch = [m for k in range(start, start + 12) for m in turn(k)]
    c.post(f"/sessions/{sid}/messages", json={"messages": batch}).raise_for_status()
    i = start + 12
    while True:
        r = c.post(f"/sessions/{sid}/messages", json={"messages": turn(i)})
        r.raise_for_status()
        i += 1
        if r.json()["budget"]["status"] == status:
            return i
        assert i < start + 200, f"{sid} never reached {status}"


def seed(c: httpx.Client, prefix: str = "") -> Seeded:
    small = {
        "context_limit": 6000,
        "compaction": {"reserved_output_tokens": 500, "safety_margin_tokens": 100},
    }
    s = Seeded(
        prefix + "quiet-agent",
        prefix + "warn-agent",
        prefix + "full-agent",
        prefix + "compacted-agent",
    )
    c.put(
        f"/sessions/{s.quiet}", json={"system_prompt": "You are a careful coding agent."}
    ).raise_for_status()
    c.post(f"/sessions/{s.quiet}/messages", json={"messages": turn(0)}).raise_for_status()

    c.put(f"/sessions/{s.warn}", json={**small, "auto_compact": False}).raise_for_status()
    _fill(c, s.warn, "warn")
    c.post(f"/sessions/{s.warn}/lock", json={"owner": "worker-7", "ttl_s": 600}).raise_for_status()

    c.put(f"/sessions/{s.full}", json={**small, "auto_compact": False}).raise_for_status()
    _fill(c, s.full, "compact_needed")

    c.put(
        f"/sessions/{s.compacted}",
        json={**small, "auto_compact": False, "system_prompt": "You are a careful coding agent."},
    ).raise_for_status()
    nxt = _fill(c, s.compacted, "compact_needed")
    r = c.post(f"/sessions/{s.compacted}/compact", json={"wait": True, "timeout_s": 60}, timeout=70)
    r.raise_for_status()
    assert r.json()["status"] in ("success", "degraded"), r.json()
    for i in range(nxt, nxt + 3):
        c.post(f"/sessions/{s.compacted}/messages", json={"messages": turn(i)}).raise_for_status()
    # A payload that had to drop history: a context.compressed event.
    c.get(f"/sessions/{s.full}/context", params={"max_tokens": 2000}).raise_for_status()
    return s
