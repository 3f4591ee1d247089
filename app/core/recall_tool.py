"""The recall tool as a model sees it: one definition shared by payloads, MCP and clients.

One tool, not two: its definition counts toward every payload's budget, and a
model tells "search" from "read" by which argument it gives. A summary item's
citation (`[#412-431]`, `[#3,7-9]`) is read back by `seqs`, a string taken as the
summary writes it: a model copies text more reliably than it splits it into
numbers, and one call reads a citation of several ranges.
"""

from __future__ import annotations

from typing import Any

from app.core.limits import RANGE_READ_CHARS, RANGE_READ_MESSAGES

NAME = "recall"

_BOUND = (
    f"At most {RANGE_READ_MESSAGES} messages and {RANGE_READ_CHARS:,} characters a read; "
    "the answer says how to read on"
)

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
    "Read the messages a summary item cites: give `seqs` as written after the item "
    f'(`[#412-431]`: "412-431"; `[#3,7-9]`: "3,7-9"), or from_seq..to_seq. {_BOUND}; '
    "long messages are cut to their share."
)
DESCRIPTION = (
    "Recall what is no longer shown of this conversation. Give `query` to search its whole "
    "history (words, identifiers, file paths, error codes, any language): the answer lists "
    "matching messages by seq with a snippet. Give `seq` to read that message in full, or "
    "`line_start`/`line_end` of it; `seqs` to read what a summary item cites, as written "
    f'(`[#412-431]`: "412-431"). {_BOUND}.'
)

PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what to search for"},
        "seq": {"type": "integer", "description": "the message to read in full"},
        "seqs": {"type": "string", "description": 'as cited: "412-431" or "3,7-9"'},
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
