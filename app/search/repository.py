"""Search's queries, on the pooled asyncpg connection (`Database.driver`).

Every query filters on (tenant_id, session_id), the leading columns of the GIN
index `ix_messages_search` (btree_gin): a term is looked up among this session's
messages only, whatever the other sessions hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SESSION = """
SELECT last_seq, last_compaction_seq FROM sessions WHERE tenant_id = $1 AND id = $2
"""

# How many of the session's messages each term matches, counted up to $6 only: past
# that a term is common, and its exact count would cost a walk of all its matches.
# The subquery is a bitmap scan of the GIN index per term, stopped at the cap.
TERM_COUNTS = """
SELECT g.i, (
    SELECT count(*) FROM (
        SELECT 1 FROM messages m
        WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.search @@ g.q
          AND m.seq < $4 AND ($5::text[] IS NULL OR m.role = ANY($5::text[]))
        LIMIT $6
    ) AS x
) AS n
FROM unnest($3::tsquery[]) WITH ORDINALITY AS g(q, i)
"""

# The best `$7` messages among those matching `$3` (the selective terms' OR, or all
# terms' AND when every term is common): each scored by the weights of the terms it
# matches, newest first among equals. At most `$8` candidates are scored, newest
# first, so a query of only common words costs a bounded read. The best `$12` of
# them are then checked for the query's literal texts (`$10`, e.g. `value[-1]` or
# `xfail(run=False)`, whose words alone are everywhere): each found in the stored
# message adds `$11` times its length in tokens (`$13`). Bodies are read for those
# few only.
RANKED = """
WITH c AS MATERIALIZED (
    SELECT m.seq, m.search FROM messages m
    WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.search @@ $3::tsquery
      AND m.seq < $4 AND ($5::text[] IS NULL OR m.role = ANY($5::text[]))
    ORDER BY m.seq DESC
    LIMIT $8
), scored AS (
    SELECT c.seq, (
        SELECT coalesce(sum(t.w), 0) FROM unnest($6::tsquery[], $9::float8[]) AS t(q, w)
        WHERE c.search @@ t.q
    ) AS score
    FROM c
    ORDER BY score DESC, c.seq DESC
    LIMIT $12
), best AS (
    SELECT s.seq, m.role, m.body, s.score + coalesce((
        SELECT sum($11::float8 * l.n) FROM unnest($10::text[], $13::int[]) AS l(needle, n)
        WHERE strpos(m.body::text, l.needle) > 0
    ), 0) AS score
    FROM scored s JOIN messages m
      ON m.tenant_id = $1 AND m.session_id = $2 AND m.seq = s.seq
)
SELECT seq, score, role, body FROM best
ORDER BY score DESC, seq DESC
LIMIT $7
"""

# The function name behind each answered call id: the tool name of a tool message.
CALL_NAMES = """
SELECT t.call_id, a.body -> 'tool_calls' AS calls
FROM unnest($3::text[]) AS c(call_id)
JOIN tool_calls t ON t.tenant_id = $1 AND t.session_id = $2 AND t.call_id = c.call_id
JOIN messages a ON a.tenant_id = $1 AND a.session_id = $2 AND a.seq = t.seq
"""


async def session(conn: Any, tenant: str, sid: str) -> Any:
    return await conn.fetchrow(SESSION, tenant, sid)


async def term_counts(
    conn: Any,
    tenant: str,
    sid: str,
    queries: Sequence[str],
    before_seq: int,
    roles: Sequence[str] | None,
    cap: int,
) -> list[int]:
    rows = await conn.fetch(TERM_COUNTS, tenant, sid, list(queries), before_seq, roles, cap)
    by_i = {int(r["i"]): int(r["n"]) for r in rows}
    return [by_i.get(i, 0) for i in range(1, len(queries) + 1)]


async def ranked(
    conn: Any,
    tenant: str,
    sid: str,
    match: str,
    before_seq: int,
    roles: Sequence[str] | None,
    weighted: Sequence[tuple[str, float]],
    limit: int,
    candidates: int,
    literals: Sequence[tuple[str, int]],
    literal_weight: float,
    rescored: int,
) -> list[Any]:
    return list(
        await conn.fetch(
            RANKED,
            tenant,
            sid,
            match,
            before_seq,
            roles,
            [q for q, _ in weighted],
            limit,
            candidates,
            [w for _, w in weighted],
            [text for text, _ in literals],
            literal_weight,
            rescored,
            [n for _, n in literals],
        )
    )


async def call_names(conn: Any, tenant: str, sid: str, call_ids: Sequence[str]) -> dict[str, str]:
    """call id -> function name, for the calls answered by these ids."""
    if not call_ids:
        return {}
    rows = await conn.fetch(CALL_NAMES, tenant, sid, sorted(set(call_ids)))
    names: dict[str, str] = {}
    for r in rows:
        for call in r["calls"] or ():
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and call.get("id") == r["call_id"]:
                names[r["call_id"]] = str(fn.get("name", ""))
    return names
