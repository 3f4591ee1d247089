"""Counting re-reads at the append that makes them (SPEC §3; the rule is
app/context/rereads.py).

Each tool call is stored with `call_key`, a digest of its tool name and arguments
(the arguments' JSON with its keys sorted, so that the same call written twice is one
key). In the append's transaction, after its statement wrote the batch, one
statement finds for each new call the newest earlier call with the same key
(`ix_tool_calls_key`: one index probe per call) and that call's result; only when
one exists are the session's layouts read and the count raised. The session row is
locked by the append, so appends of one session count one after the other, each
seeing every earlier call; a replayed append writes nothing new and counts nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from app.context.layout import Layout
from app.context.rereads import Earlier, held_whole, payload_layout
from app.database import Driver
from app.messages.validation import Incoming
from app.observability import metrics


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


# For each new call (key, seq): the newest earlier call of the same key that has been
# answered before it, and its result's tokens.
_EARLIER = """
SELECT n.seq, p.answered_seq, r.token_count
FROM unnest($3::text[], $4::bigint[]) AS n(key, seq)
CROSS JOIN LATERAL (
    SELECT t.answered_seq FROM tool_calls t
    WHERE t.tenant_id = $1 AND t.session_id = $2 AND t.call_key = n.key AND t.seq < n.seq
    ORDER BY t.seq DESC LIMIT 1
) AS p
JOIN messages r ON r.tenant_id = $1 AND r.session_id = $2 AND r.seq = p.answered_seq
WHERE p.answered_seq < n.seq
"""

# The session's generation and watermark, and its most recently stored stream layout.
_NEWEST_LAYOUT = """
SELECT s.generation, s.last_compaction_seq, l.generation AS l_generation,
    l.watermark AS l_watermark, l.through_seq, l.kept
FROM sessions s
LEFT JOIN LATERAL (
    SELECT * FROM context_layouts c WHERE c.tenant_id = s.tenant_id AND c.session_id = s.id
    ORDER BY c.updated_at DESC LIMIT 1
) AS l ON true
WHERE s.tenant_id = $1 AND s.id = $2
"""

_ADD = "UPDATE sessions SET re_reads = re_reads + $3 WHERE tenant_id = $1 AND id = $2"


def new_calls(fresh: Sequence[Incoming], acks: Sequence[dict[str, Any]]) -> list[tuple[str, int]]:
    """(call_key, seq) of each call the written messages made; one per key (its first)."""
    out: dict[str, int] = {}
    for m in fresh:
        if m.call_ids:
            seq = int(acks[m.index]["seq"])
            for key in keys_of(m).values():
                out.setdefault(key, seq)
    return list(out.items())


async def count(
    conn: Driver,
    tenant: str,
    sid: str,
    calls: Sequence[tuple[str, int]],
    preview_limit: int,
) -> int:
    """Count the re-reads among `calls` (written, not yet committed) on the session row."""
    if not calls:
        return 0
    rows = await conn.fetch(_EARLIER, tenant, sid, [k for k, _ in calls], [s for _, s in calls])
    if not rows:
        return 0
    head = await conn.fetchrow(_NEWEST_LAYOUT, tenant, sid)
    newest = None
    if head is not None and head["through_seq"] is not None:
        newest = Layout.of_json(
            head["l_generation"], head["l_watermark"], head["through_seq"], head["kept"]
        )
    layout = (
        payload_layout(head["generation"], head["last_compaction_seq"], newest) if head else None
    )
    watermark = int(head["last_compaction_seq"]) if head else 0
    found = sum(
        1
        for r in rows
        if not held_whole(
            Earlier(int(r["answered_seq"]), int(r["token_count"])),
            watermark=watermark,
            layout=layout,
            preview_limit=preview_limit,
        )
    )
    if found:
        await conn.execute(_ADD, tenant, sid, found)
        metrics.RE_READS.inc(found)
    return found
