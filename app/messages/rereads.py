"""Re-reads (SPEC §3): a tool call whose name and arguments repeat an earlier call whose
result the payload no longer held whole, counted by the append that makes it.

Each tool call is stored with `call_key`, a digest of its tool name and arguments
(the arguments' JSON with its keys sorted, so that the same call written twice is one
key). The append's own statement (`repository.WRITE_BATCH`, `WRITE_GROUP`: the
`_RE_READS` part) finds, for each distinct key of the calls it writes, the newest
earlier call of that key and that call's result, decides, and adds the count to
`sessions.re_reads` in the same UPDATE that allocates the seqs: no round trip more,
and nothing at all for an append that makes no call. A replayed append writes
nothing new, so it counts nothing; appends of one session are serialised by the
session row's lock, so no count is lost.

"The payload" is the stream's last payload as the server can rebuild it without
having recorded it: the session's most recently stored stream layout
(`context_layouts`, app/context/trim_state.py) when it still holds for the session's
generation and watermark, else an untrimmed payload. The earlier result was *not held
whole* when any of these is true:

- it is at or below the watermark: folded into the summary;
- the layout's trim covered it (its seq is at or below the layout's `through_seq`) and
  kept it in no unit, or only in a unit sent in the compact form (masked to a preview
  or cut): left out or masked;
- its tokens exceed the tool-output preview limit (`CONTEXTD_TOOL_PREVIEW_TOKENS`):
  every payload sends it as a preview.

A result appended after the layout's trim (above `through_seq`) was sent whole, as
the stream's next payloads append every message after it until the next trim. An
earlier call still unanswered is not a re-read: nothing of its result was left out.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from app.messages.validation import Incoming


def call_key(name: Any, arguments: Any) -> str:
    """The digest two identical calls share: name and arguments (JSON keys sorted)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    try:
        text = json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except (ValueError, TypeError):
        pass  # not JSON: the text as sent
    raw = f"{name}\x00{text}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=12).hexdigest()


def keys_of(m: Incoming) -> dict[str, str]:
    """call id -> call_key of an assistant message's tool calls."""
    out: dict[str, str] = {}
    if not m.call_ids:
        return out
    for call in m.body.get("tool_calls") or ():
        if isinstance(call, dict) and isinstance(call.get("id"), str):
            fn = call.get("function")
            fn = fn if isinstance(fn, dict) else {}
            out[call["id"]] = call_key(fn.get("name"), fn.get("arguments"))
    return out
