"""Search's queries, on the pooled asyncpg connection (`Database.driver`).

Every query filters on (tenant_id, session_id). Two ways to a session's messages:

- the GIN index `ix_messages_search`, whose every entry also holds the session's key
  lexeme (app/messages/lexemes.py `session_lexeme`): a query for `key & term` reads
  this session's matches of the term only. Its cost grows with those matches: a rare
  term is cheap, a word in every other message is not;
- the primary key, newest first: a window of the latest messages, each checked in
  memory. Its cost grows with the window, whatever the terms.

The GIN reads sit behind `OFFSET 0`, with the key checked outside it: the index
already keeps to the session, and without the fence the planner may intersect it
with a bitmap of the whole session from the primary key (every message of the
session, on every search).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SESSION = """
SELECT last_seq, last_compaction_seq FROM sessions WHERE tenant_id = $1 AND id = $2
"""

_ROLES = "($5::text[] IS NULL OR m.role = ANY($5::text[]))"


# A stored vector is compressed (and past about 2 kB, kept out of line): each match
# against it decompresses it again. Where several terms are matched against one
# message, `setweight(v, 'D')` (D is the weight every lexeme already has: the same
# vector) makes one decompressed copy for all of them.
def _matches_sql(terms: int) -> str:
    # One bit per term: which of the query's terms each message of the window [$3, $4]
    # matches, for those matching `$6` (every message when NULL), newest first, at most
    # $7 (all when NULL). By primary key, newest first, so a limit stops the read; each
    # vector matched in memory.
    bits = " | ".join(f"((w.v @@ ${8 + i}::tsquery)::int::bigint << {i})" for i in range(terms))
    # Each OFFSET 0 keeps a level apart: the window read by primary key only (a tsquery
    # beside the key would let the planner take the index), the copy made once per
    # message and the bits once (flattened, each would be computed once per reference).
    # Each level says its order, so the limit stops the read instead of a sort.
    return f"""
SELECT seq, hits FROM (
    SELECT w.seq, {bits} AS hits FROM (
        SELECT k.seq, setweight(k.search, 'D') AS v FROM (
            SELECT m.seq, m.search FROM messages m
            WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.seq BETWEEN $3 AND $4
              AND {_ROLES}
            ORDER BY m.seq DESC
            OFFSET 0
        ) AS k
        WHERE $6::tsquery IS NULL OR k.search @@ $6::tsquery
        ORDER BY k.seq DESC
        OFFSET 0
    ) AS w
    ORDER BY w.seq DESC
    OFFSET 0
) AS x
WHERE hits <> 0
ORDER BY seq DESC
LIMIT $7
"""


# How many of the session's messages each tsquery matches, counted up to $6 only: past
# that a term is common. Through the index: the bitmap holds every match before the
# count stops, so only terms not already known to be common are counted here.
TERM_COUNTS = f"""
SELECT g.i, (
    SELECT count(*) FROM (
        SELECT 1 FROM (
            SELECT m.tenant_id, m.session_id, m.seq, m.role FROM messages m
            WHERE m.search @@ g.q OFFSET 0
        ) AS m
        WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.seq < $4 AND {_ROLES}
        LIMIT $6
    ) AS x
) AS n
FROM unnest($3::tsquery[]) WITH ORDINALITY AS g(q, i)
"""

# The newest `$6` messages matching `$3` (the session's key in it) below seq `$4`,
# through the index.
NEWEST_INDEXED = f"""
SELECT seq FROM (
    SELECT m.tenant_id, m.session_id, m.seq, m.role FROM messages m
    WHERE m.search @@ $3::tsquery OFFSET 0
) AS m
WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.seq < $4 AND {_ROLES}
ORDER BY seq DESC
LIMIT $6
"""

# The final score of a few candidates, and their rows: the weights `$5` of the terms
# `$4` each matches, plus, for each of the query's literal texts (`$6`, e.g.
# `value[-1]` or `xfail(run=False)`, whose words alone are everywhere) found in the
# stored message, `$7` times its length in tokens (`$8`). The best `$9`.
FINISH = """
SELECT m.seq, m.role, m.body, (
    SELECT coalesce(sum(t.w), 0) FROM unnest($4::tsquery[], $5::float8[]) AS t(q, w)
    WHERE v.v @@ t.q
) + coalesce((
    SELECT sum($7::float8 * l.n) FROM unnest($6::text[], $8::int[]) AS l(needle, n)
    WHERE strpos(m.body::text, l.needle) > 0
), 0) AS score
FROM unnest($3::bigint[]) AS c(seq)
JOIN messages m ON m.tenant_id = $1 AND m.session_id = $2 AND m.seq = c.seq
CROSS JOIN LATERAL (SELECT setweight(m.search, 'D') AS v OFFSET 0) AS v
ORDER BY score DESC, m.seq DESC
LIMIT $9
"""

# The best `$7` messages among those matching `$3` (the selective terms' OR, or the
# rarest term), through the index: each scored by the weights of the terms it matches,
# newest first among equals. At most `$8` candidates are scored, newest first. The
# best `$12` of them are then checked for the query's literal texts (`$10`), as FINISH
# does.
RANKED = f"""
WITH c AS MATERIALIZED (
    SELECT m.seq, setweight(m.search, 'D') AS search FROM (
        SELECT m.tenant_id, m.session_id, m.seq, m.role, m.search FROM messages m
        WHERE m.search @@ $3::tsquery OFFSET 0
    ) AS m
    WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.seq < $4 AND {_ROLES}
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


async def matches(
    conn: Any,
    tenant: str,
    sid: str,
    tsqueries: Sequence[str],
    first: int,
    last: int,
    roles: Sequence[str] | None,
    having: str | None = None,
    limit: int | None = None,
) -> list[tuple[int, int]]:
    """(seq, bit i set when term i matches), newest first, for the messages with seq in
    [first, last] that match `having` (when given) and any term; the newest `limit`."""
    rows = await conn.fetch(
        _matches_sql(len(tsqueries)), tenant, sid, first, last, roles, having, limit, *tsqueries
    )
    return [(int(r["seq"]), int(r["hits"])) for r in rows]


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


async def newest_indexed(
    conn: Any,
    tenant: str,
    sid: str,
    tsquery: str,
    before_seq: int,
    roles: Sequence[str] | None,
    limit: int,
) -> list[int]:
    rows = await conn.fetch(NEWEST_INDEXED, tenant, sid, tsquery, before_seq, roles, limit)
    return [int(r["seq"]) for r in rows]


async def finish(
    conn: Any,
    tenant: str,
    sid: str,
    seqs: Sequence[int],
    weighted: Sequence[tuple[str, float]],
    literals: Sequence[tuple[str, int]],
    literal_weight: float,
    limit: int,
) -> list[Any]:
    return list(
        await conn.fetch(
            FINISH,
            tenant,
            sid,
            list(seqs),
            [q for q, _ in weighted],
            [w for _, w in weighted],
            [text for text, _ in literals],
            literal_weight,
            [n for _, n in literals],
            limit,
        )
    )


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
