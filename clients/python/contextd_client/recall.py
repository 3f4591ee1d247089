"""The recall tool, run by the client: what trimming and compaction took out of a
payload, fetched back by the model itself.

A payload asked with `recall=True` (or from a session whose `recall` setting is on)
offers the model a tool named `recall`. When the model calls it, pass the call's
arguments to `run_recall` (or `arun_recall`) and append the answer as the tool
message, like any tool result:

    payload = client.context(sid, recall=True)
    reply = model(payload.messages, tools=payload.tools)
    for call in reply.tool_calls:
        if call.function.name == RECALL_TOOL_NAME:
            output = run_recall(client, sid, call.function.arguments)

`{"query": ...}` searches the whole log (`GET /sessions/{id}/search`); `{"seq": N}`
reads one message in full, or `line_start`..`line_end` of it. The answer is text
for the model: hits as `seq N (role, tool): snippet` lines, or the message. A call
the server refuses (a bad query, a seq past the end) answers with the reason, so
the model can try again instead of the run failing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from contextd_client._async_client import AsyncContextdClient
from contextd_client._client import ContextdClient
from contextd_client._exceptions import ContextdError
from contextd_client._models import Message, SearchResult

__all__ = [
    "RECALL_DESCRIPTION",
    "RECALL_PARAMETERS",
    "RECALL_TOOL_NAME",
    "arun_recall",
    "format_message",
    "format_search",
    "recall_tool",
    "run_recall",
]

RECALL_TOOL_NAME = "recall"
# The server's own definition (app/search/tools.py); a payload with recall carries it.
RECALL_DESCRIPTION = (
    "Recall what is no longer shown of this conversation. Give `query` to search its whole "
    "history (words, identifiers, file paths, error codes, any language): the answer lists "
    "matching messages by seq with a snippet. Give `seq` to read that message in full, or "
    "`line_start`/`line_end` of it."
)
RECALL_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what to search for"},
        "seq": {"type": "integer", "description": "the message to read in full"},
        "line_start": {"type": "integer", "description": "first line to read (1-based)"},
        "line_end": {"type": "integer", "description": "last line to read (inclusive)"},
    },
    "additionalProperties": False,
}
SEARCH_LIMIT = 5
# A message read in full is cut here (the model can read on by lines).
MAX_READ_CHARS = 20_000


def recall_tool() -> dict[str, Any]:
    """The Chat Completions definition of the recall tool."""
    return {
        "type": "function",
        "function": {
            "name": RECALL_TOOL_NAME,
            "description": RECALL_DESCRIPTION,
            "parameters": RECALL_PARAMETERS,
        },
    }


def _arguments(arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return {"query": arguments}  # a model that sent the query bare
        return dict(parsed) if isinstance(parsed, dict) else {"query": str(parsed)}
    return dict(arguments)


def _int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def format_search(result: SearchResult) -> str:
    """Search hits as lines for a model."""
    if not result.hits:
        return f"No message of this conversation matches {result.query!r}."
    lines = [
        f"{len(result.hits)} messages match {result.query!r} "
        "(read one with seq, and line_start/line_end around the line):"
    ]
    for h in result.hits:
        who = h.role + (f" {h.tool_name}" if h.tool_name else "")
        where = f" line {h.line}" if h.line is not None else ""
        lines.append(f"seq {h.seq} ({who}){where}: {h.snippet}")
    return "\n".join(lines)


def format_message(message: Message) -> str:
    """One message for a model: a header line, then its text (or its tool calls)."""
    who = message.role + (f" {message.name}" if message.name else "")
    head = f"seq {message.seq} ({who})"
    if message.range:
        r = message.range
        head += f", {r.get('unit')}s {r.get('start')}-{r.get('end')} of {r.get('total')}"
    content = message.content
    if isinstance(content, list):
        text = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    elif content is None:
        text = ""
    else:
        text = str(content)
    if message.tool_calls:
        text += ("\n" if text else "") + json.dumps(message.tool_calls, ensure_ascii=False)
    if len(text) > MAX_READ_CHARS:
        text = text[:MAX_READ_CHARS] + "\n[cut: read on with line_start/line_end]"
    return f"{head}:\n{text}"


def _plan(arguments: str | Mapping[str, Any] | None) -> tuple[str, dict[str, Any]] | str:
    args = _arguments(arguments)
    seq = _int(args.get("seq"))
    if seq is not None:
        ranges = {
            "line_start": _int(args.get("line_start")),
            "line_end": _int(args.get("line_end")),
        }
        return "read", {"seq": seq, **ranges}
    query = args.get("query")
    if isinstance(query, str) and query.strip():
        return "search", {"q": query, "limit": _int(args.get("limit")) or SEARCH_LIMIT}
    return "Give `query` (what to search for) or `seq` (the message to read)."


def run_recall(
    client: ContextdClient, session_id: str, arguments: str | Mapping[str, Any] | None
) -> str:
    """Run one recall call (its arguments as JSON text or a dict); the tool's output."""
    plan = _plan(arguments)
    if isinstance(plan, str):
        return plan
    kind, args = plan
    try:
        if kind == "read":
            seq = args.pop("seq")
            return format_message(client.message(session_id, seq, **args))
        return format_search(client.search(session_id, args["q"], limit=args["limit"]))
    except ContextdError as exc:
        return f"recall failed: {exc}"


async def arun_recall(
    client: AsyncContextdClient, session_id: str, arguments: str | Mapping[str, Any] | None
) -> str:
    """`run_recall` on the async client."""
    plan = _plan(arguments)
    if isinstance(plan, str):
        return plan
    kind, args = plan
    try:
        if kind == "read":
            seq = args.pop("seq")
            return format_message(await client.message(session_id, seq, **args))
        return format_search(await client.search(session_id, args["q"], limit=args["limit"]))
    except ContextdError as exc:
        return f"recall failed: {exc}"
