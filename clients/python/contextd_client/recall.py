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
reads one message in full, or `line_start`..`line_end` of it; `{"seqs": "412-431"}`
reads the messages a summary item cites (`[#412-431]`, `[#3,7-9]`), at most
`RANGE_MAX_MESSAGES` messages and `RANGE_MAX_CHARS` characters a read: long messages
are cut to their share, and the answer says how to read on. `from_seq`/`to_seq`, or a
`seq` written as a range, read a range too. The answer is text for the model: hits as
`seq N (role, tool): snippet` lines, or the messages. A call the server refuses (a bad
query, a seq past the end) answers with the reason, so the model can try again
instead of the run failing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from contextd_client._async_client import AsyncContextdClient
from contextd_client._client import ContextdClient
from contextd_client._exceptions import ContextdError
from contextd_client._models import Message, MessagePage, SearchResult

__all__ = [
    "NO_ARGUMENTS",
    "RANGE_MAX_CHARS",
    "RANGE_MAX_MESSAGES",
    "RECALL_DESCRIPTION",
    "RECALL_PARAMETERS",
    "RECALL_TOOL_NAME",
    "arun_recall",
    "format_message",
    "format_range",
    "format_search",
    "recall_tool",
    "run_recall",
    "share",
]

RECALL_TOOL_NAME = "recall"
# The server's own definition (app/core/recall_tool.py); a payload with recall carries it.
RECALL_DESCRIPTION = (
    "Recall what is no longer shown of this conversation. Give `query` to search its whole "
    "history (words, identifiers, file paths, error codes, any language): the answer lists "
    "matching messages by seq with a snippet. Give `seq` to read that message in full, or "
    "`line_start`/`line_end` of it; `seqs` to read what a summary item cites, as written "
    '(`[#412-431]`: "412-431"). At most 50 messages and 20,000 characters a read; the '
    "answer says how to read on."
)
RECALL_PARAMETERS: dict[str, Any] = {
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
SEARCH_LIMIT = 5
NO_ARGUMENTS = (
    "Give `query` (what to search for), `seq` (the message to read) or `seqs` "
    '(the messages a summary cites: "412-431").'
)
# A message read in full is cut here (the model can read on by lines).
MAX_READ_CHARS = 20_000
# A range read (`seqs`): at most this many messages and characters of text, as the
# tool's description says; the server cuts the page's texts to their share.
RANGE_MAX_MESSAGES = 50
RANGE_MAX_CHARS = 20_000


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


def _text(message: Message) -> str:
    """A message's text for a model: its content, then its tool calls as JSON."""
    content = message.content
    if isinstance(content, list):
        text = "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    elif content is None:
        text = ""
    else:
        text = str(content)
    if message.tool_calls:
        text += ("\n" if text else "") + json.dumps(message.tool_calls, ensure_ascii=False)
    return text


def _who(message: Message) -> str:
    return message.role + (f" {message.name}" if message.name else "")


def format_message(message: Message) -> str:
    """One message for a model: a header line, then its text (or its tool calls)."""
    head = f"seq {message.seq} ({_who(message)})"
    if message.range:
        r = message.range
        head += f", {r.get('unit')}s {r.get('start')}-{r.get('end')} of {r.get('total')}"
    text = _text(message)
    if len(text) > MAX_READ_CHARS:
        text = text[:MAX_READ_CHARS] + "\n[cut: read on with line_start/line_end]"
    return f"{head}:\n{text}"


def share(lengths: list[int], budget: int) -> int | None:
    """The length every text is cut to so that all of them hold at most `budget`
    characters, the short ones whole; None when all fit (the server's rule)."""
    if sum(lengths) <= budget:
        return None
    left, count = budget, len(lengths)
    for n in sorted(lengths):
        if n * count > left:
            return left // count
        left -= n
        count -= 1
    return None


def _cut_off(message: Message) -> int:
    """How many characters of its content the server cut off (its `range`), else 0."""
    r = message.range
    if isinstance(r, dict) and r.get("unit") == "char":
        end, total = r.get("end"), r.get("total")
        if isinstance(end, int) and isinstance(total, int) and total > end:
            return total - end
    return 0


def format_range(page: MessagePage, seqs: str) -> str:
    """The messages of a range read for a model: each under a `seq N (role)` line, the
    long ones cut to their share with a note, then how to read on if the read stopped."""
    if not page.messages:
        return (
            f"No message of this conversation is in seqs {seqs} (its last seq is {page.last_seq})."
        )
    texts = [_text(m) for m in page.messages]
    level = share([len(t) for t in texts], RANGE_MAX_CHARS)
    parts = []
    for m, text in zip(page.messages, texts, strict=True):
        total = len(text) + _cut_off(m)
        shown = text if level is None else text[:level]
        head = f"seq {m.seq} ({_who(m)})"
        if len(shown) < total:
            head += f", first {len(shown)} of {total} characters"
            shown += f"\n[cut: read it whole with seq {m.seq}, or line_start/line_end]"
        parts.append(f"{head}:\n{shown}")
    if page.next_seqs:
        parts.append(
            f"[more: this read stopped at {RANGE_MAX_MESSAGES} messages; "
            f'read on with seqs "{page.next_seqs}"]'
        )
    return "\n".join(parts)


def _seqs(args: Mapping[str, Any]) -> str | None:
    """The range a call asks for, as a citation: `seqs` (or `range`) as given, a list
    of seqs, `from_seq`/`to_seq`, `seq` with `to_seq`, or a `seq` written as a range."""
    for key in ("seqs", "range"):
        value = args.get(key)
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        if isinstance(value, int | str) and not isinstance(value, bool) and str(value).strip():
            return str(value)
    first = _int(args.get("from_seq"))
    if first is None and args.get("to_seq") is not None:
        first = _int(args.get("seq"))
    if first is not None:
        last = _int(args.get("to_seq"))
        return f"{first}-{last if last is not None else first}"
    seq = args.get("seq")
    if isinstance(seq, str) and _int(seq) is None and any(c.isdigit() for c in seq):
        return seq
    return None


def _plan(arguments: str | Mapping[str, Any] | None) -> tuple[str, dict[str, Any]] | str:
    args = _arguments(arguments)
    seqs = _seqs(args)
    if seqs is not None:
        span = {"seqs": seqs, "limit": RANGE_MAX_MESSAGES, "max_chars": RANGE_MAX_CHARS}
        return "range", span
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
    return NO_ARGUMENTS


def run_recall(
    client: ContextdClient, session_id: str, arguments: str | Mapping[str, Any] | None
) -> str:
    """Run one recall call (its arguments as JSON text or a dict); the tool's output."""
    plan = _plan(arguments)
    if isinstance(plan, str):
        return plan
    kind, args = plan
    try:
        if kind == "range":
            return format_range(client.messages(session_id, **args), args["seqs"])
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
        if kind == "range":
            return format_range(await client.messages(session_id, **args), args["seqs"])
        if kind == "read":
            seq = args.pop("seq")
            return format_message(await client.message(session_id, seq, **args))
        return format_search(await client.search(session_id, args["q"], limit=args["limit"]))
    except ContextdError as exc:
        return f"recall failed: {exc}"
