"""A file read by an agent's tool call, and its output: what a re-read repeats (SPEC §3)."""

from __future__ import annotations

import json
from typing import Any

from tests.support.messages import call, result


def read(i: int, call_id: str | None = None) -> dict[str, Any]:
    return call(call_id or f"r{i}", args=json.dumps({"path": f"src/mod_{i}.py"}))


def output(i: int) -> dict[str, Any]:
    body = "\n".join(f"line {k}: total_{i}_{k} = {i * 97 + k}  # src/mod_{i}.py" for k in range(20))
    return result(f"r{i}", body)
