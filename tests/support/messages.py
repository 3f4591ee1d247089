"""Messages to append over HTTP, and the log read back."""

from __future__ import annotations

from typing import Any

import httpx


def user(text: Any, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def call(call_id: str, name: str = "read_file", args: str = '{"path": "a.py"}') -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
        ],
    }


def result(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


async def log_of(client: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    r = await client.get(f"/sessions/{sid}/messages", params={"limit": 1000})
    assert r.status_code == 200, r.text
    return list(r.json()["messages"])
