"""A history whose secret an earlier trim took out of the payload, for the recall tests."""

from __future__ import annotations

import json
from typing import Any

TOKEN = "ZK-55012"
SECRET = f"line 200: deploy token {TOKEN} issued for prod"
QUESTION = f"Which deploy printed the token {TOKEN}"
BUDGET = 4000


def history() -> list[dict[str, Any]]:
    """Forty steps; the third one's output holds the secret in the middle of 400 lines,
    so a payload shows it as a preview (head and tail) at most, or drops it."""
    out: list[dict[str, Any]] = []
    for i in range(40):
        lines = [f"line {n}: step {i} building" for n in range(400)]
        if i == 2:
            lines[200] = SECRET
        out += [
            {"role": "user", "content": f"run step {i}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "shell", "arguments": json.dumps({"step": i})},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": f"c{i}", "content": "\n".join(lines)},
            {"role": "assistant", "content": f"step {i} done"},
        ]
    return out
