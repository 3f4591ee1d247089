"""One agent run in one turn: a user's task, then many tool steps (SPEC §5 turn anchor)."""

from __future__ import annotations

from typing import Any

MODEL = "gpt-4o"
SYSTEM = "You are a careful agent. Report briefly."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
TASK = "Go through every module of pkg/ and report what each one exports. 逐个检查。"
