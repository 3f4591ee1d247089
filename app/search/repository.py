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

from app.database import Driver
from app.search.tools import NAME as RECALL

SESSION = """
SELECT last_seq, last_compaction_seq FROM sessions WHERE tenant_id = $1 AND id = $2
"""

_ROLES = "($5::text[] IS NULL OR m.role = ANY($5::text[]))"


# A stored vector is compressed (and past about 2 kB, kept out of line): each match
# against it decompresses it again. Where several terms are matched against one
# message, `setweight(v, 'D')` (D is the weight every lexeme already has: the same
# vector) makes one decompressed copy for all of them.
def _matches_sql(terms: int, spread: bool = False) -> str:
    # One bit per term: which of the query's terms each message of the window [$3, $4]
    # (`spread`: each of the seqs $3) matches, for those matching `$6` (every message when
    # NULL), newest first, at most $7 (all when NULL). By primary key, newest first, so
    # a limit stops the read; each vector matched in memory.
    bits = " | ".join(f"((w.v @@ ${8 + i}::tsquery)::int::bigint << {i})" for i in range(terms))
    messages = (
        "SELECT m.seq, m.search FROM unnest($3::bigint[]) AS s(seq)"
        " JOIN messages m ON m.tenant_id = $1 AND m.session_id = $2 AND m.seq = s.seq"
        f" WHERE $4::bigint IS NULL AND {_ROLES}"
        if spread
        else "SELECT m.seq, m.search FROM messages m"
        " WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.seq BETWEEN $3 AND $4"
        f" AND {_ROLES}"
    )
    # Each OFFSET 0 keeps a level apart: the window read by primary key only (a tsquery
    # beside the key would let the planner take the index), the copy made once per
    # message and the bits once (flattened, each would be computed once per reference).
    # Each level says its order, so the limit stops the read instead of a sort.
    return f"""
SELECT seq, hits FROM (
    SELECT w.seq, {bits} AS hits FROM (
        SELECT k.seq, setweight(k.search, 'D') AS v FROM (
            {messages}
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


def _body_text(literals: str) -> str:
    # The stored message as text, made once per message for all the literal texts, and
    # not at all when there are none (a body can be large).
    return (
        f"CROSS JOIN LATERAL (SELECT CASE WHEN cardinality({literals}::text[]) > 0"
        " THEN m.body::text END AS t OFFSET 0) AS b"
    )


def _literal_bonus(literals: str, weight: str, tokens: str) -> str:
    # Each literal text of the query found in the stored message (`value[-1]`,
    # `xfail(run=False)`: code whose words alone are everywhere) adds `weight` times its
    # length in tokens. JSON-escaped, as the stored body is.
    return f"""coalesce((
        SELECT sum({weight}::float8 * l.n) FROM unnest({literals}::text[], {tokens}::int[])
            AS l(needle, n)
        WHERE strpos(b.t, l.needle) > 0
    ), 0)"""


# The recall tool's own traffic: an assistant message calling the tool named `$11`, or
# the tool message answering such a call (through `tool_calls`, one probe).
_RECALL_TRAFFIC = """(
    (m.role = 'assistant'
     AND m.body -> 'tool_calls' @> jsonb_build_array(jsonb_build_object(
         'function', jsonb_build_object('name', $11::text))))
    OR (m.role = 'tool' AND EXISTS (
        SELECT 1 FROM tool_calls t
        JOIN messages a ON a.tenant_id = $1 AND a.session_id = $2 AND a.seq = t.seq
        WHERE t.tenant_id = $1 AND t.session_id = $2 AND t.call_id = m.body ->> 'tool_call_id'
          AND a.body -> 'tool_calls' @> jsonb_build_array(jsonb_build_object(
              'id', t.call_id, 'function', jsonb_build_object('name', $11::text)))
    ))
)"""

# The final score of a few candidates `$3`, and their rows, the best `$9`: the base
# score `$10` when known (NULL: the weights `$5` of the terms `$4` it matches, matched
# here), plus the literal texts `$6` found (`$7` times their tokens `$8`). The recall
# tool's calls and answers quote what an earlier search found (its query, its
# snippets): the next search for the same thing would find them first, the newest,
# above the messages they quote; they come after every other candidate (`echo`), so
# that when one is among the rows, every other candidate is too.
FINISH = f"""
SELECT m.seq, m.role, m.body, coalesce(c.base, (
    SELECT coalesce(sum(t.w), 0) FROM unnest($4::tsquery[], $5::float8[]) AS t(q, w)
    WHERE v.v @@ t.q
)) + {_literal_bonus("$6", "$7", "$8")} AS score, coalesce({_RECALL_TRAFFIC}, false) AS echo
FROM unnest($3::bigint[], $10::float8[]) AS c(seq, base)
JOIN messages m ON m.tenant_id = $1 AND m.session_id = $2 AND m.seq = c.seq
CROSS JOIN LATERAL (
    SELECT CASE WHEN c.base IS NULL THEN setweight(m.search, 'D') END AS v OFFSET 0
) AS v
{_body_text("$6")}
ORDER BY echo, score DESC, m.seq DESC
LIMIT $9
"""

# The messages each of the tsqueries `$3` matches (the session's key in each) below seq
# `$4`, at most `$6` each, in no order: through the index, the bitmap holds every match
# of a term before the read stops, so only terms not already known to be common are
# looked up so. Fewer than `$6` is all of them; `$6` means common.
TERM_MATCHES = f"""
SELECT g.i, x.seq FROM unnest($3::tsquery[]) WITH ORDINALITY AS g(q, i)
CROSS JOIN LATERAL (
    SELECT m.seq FROM (
        SELECT m.tenant_id, m.session_id, m.seq, m.role FROM messages m
        WHERE m.search @@ g.q OFFSET 0
    ) AS m
    WHERE m.tenant_id = $1 AND m.session_id = $2 AND m.seq < $4 AND {_ROLES}
    LIMIT $6
) AS x
"""
# The same, the newest `$6` of each: every match is read and sorted. For a phrase or a
# prefix, whose matches the index cannot tell without reading each (a phrase) or
# reads whole anyway (a prefix): one found common then comes with its newest holders,
# which a search of common terms would otherwise read again.
TERM_MATCHES_NEWEST = TERM_MATCHES.replace("    LIMIT $6", "    ORDER BY m.seq DESC\n    LIMIT $6")
assert TERM_MATCHES_NEWEST != TERM_MATCHES

# The function name behind each answered call id: the tool name of a tool message.
CALL_NAMES = """
SELECT t.call_id, a.body -> 'tool_calls' AS calls
FROM unnest($3::text[]) AS c(call_id)
JOIN tool_calls t ON t.tenant_id = $1 AND t.session_id = $2 AND t.call_id = c.call_id
JOIN messages a ON a.tenant_id = $1 AND a.session_id = $2 AND a.seq = t.seq
"""


async def session(conn: Driver, tenant: str, sid: str) -> Any:
    return await conn.fetchrow(SESSION, tenant, sid)


async def matches(
    conn: Driver,
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


async def spread(
    conn: Driver,
    tenant: str,
    sid: str,
    tsqueries: Sequence[str],
    seqs: Sequence[int],
    roles: Sequence[str] | None,
) -> list[tuple[int, int]]:
    """As `matches`, for the messages with these seqs: one probe of the primary key each."""
    rows = await conn.fetch(
        _matches_sql(len(tsqueries), spread=True),
        tenant,
        sid,
        list(seqs),
        None,
        roles,
        None,
        None,
        *tsqueries,
    )
    return [(int(r["seq"]), int(r["hits"])) for r in rows]


async def newest_indexed(
    conn: Driver,
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
    conn: Driver,
    tenant: str,
    sid: str,
    scored: Sequence[tuple[int, float | None]],
    weighted: Sequence[tuple[str, float]],
    literals: Sequence[tuple[str, int]],
    literal_weight: float,
    limit: int,
) -> list[Any]:
    """The best `limit` of the candidates (seq, base score or None to score it here)."""
    return list(
        await conn.fetch(
            FINISH,
            tenant,
            sid,
            [seq for seq, _ in scored],
            [q for q, _ in weighted],
            [w for _, w in weighted],
            [text for text, _ in literals],
            literal_weight,
            [n for _, n in literals],
            limit,
            [base for _, base in scored],
            RECALL,
        )
    )


async def term_matches(
    conn: Driver,
    tenant: str,
    sid: str,
    queries: Sequence[str],
    before_seq: int,
    roles: Sequence[str] | None,
    cap: int,
    newest: bool = False,
) -> list[list[int]]:
    """For each query, the seqs of the messages it matches, at most `cap` of them (the
    newest, newest first, when `newest`)."""
    sql = TERM_MATCHES_NEWEST if newest else TERM_MATCHES
    rows = await conn.fetch(sql, tenant, sid, list(queries), before_seq, roles, cap)
    out: list[list[int]] = [[] for _ in queries]
    for r in rows:
        out[int(r["i"]) - 1].append(int(r["seq"]))
    return out


async def call_names(
    conn: Driver, tenant: str, sid: str, call_ids: Sequence[str]
) -> dict[str, str]:
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
