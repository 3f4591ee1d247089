"""The recall tool as a model sees it: one definition shared by payloads, MCP and clients.

One tool, not two: its definition counts toward every payload's budget, and a
model tells "search" from "read" by which argument it gives.
"""

from __future__ import annotations

from typing import Any

NAME = "recall"

SEARCH_DESCRIPTION = (
    "Search this conversation's whole history, including messages no longer shown "
    "(trimmed or summarised): words, identifiers, file paths, error codes, any language. "
    "Returns the best matches with their seq, role, tool name and a snippet."
)
READ_DESCRIPTION = (
    "Read one message of this conversation in full by its seq, or a part of it "
    "(lines line_start..line_end, or characters char_start..char_end)."
)
READ_RANGE_DESCRIPTION = (
    "Read the messages from_seq..to_seq of this conversation (at most 50; long texts cut): "
    "what a summary item cites as [#from-to] stands for."
)
DESCRIPTION = (
    "Recall what is no longer shown of this conversation. Give `query` to search its whole "
    "history (words, identifiers, file paths, error codes, any language): the answer lists "
    "matching messages by seq with a snippet. Give `seq` to read that message in full, or "
    "`line_start`/`line_end` of it."
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what to search for"},
        "seq": {"type": "integer", "description": "the message to read in full"},
        "line_start": {"type": "integer", "description": "first line to read (1-based)"},
        "line_end": {"type": "integer", "description": "last line to read (inclusive)"},
    },
    "additionalProperties": False,
}


def chat_tool() -> dict[str, Any]:
    """The Chat Completions shape of the tool, as sessions store tools."""
    return {
        "type": "function",
        "function": {"name": NAME, "description": DESCRIPTION, "parameters": PARAMETERS},
    }
