"""A writer lease claimed over HTTP (SPEC §2, §6)."""

from __future__ import annotations

from typing import Any

import httpx


async def claim(
    client: httpx.AsyncClient, sid: str, owner: str = "agent-a", ttl: float = 30
) -> dict[str, Any]:
    r = await client.post(f"/sessions/{sid}/lock", json={"owner": owner, "ttl_s": ttl})
    assert r.status_code == 201, r.text
    return dict(r.json())
