"""Search's queries, on the pooled asyncpg connection (`Database.driver`).

Every query filters on (tenant_id, session_id). Two ways to a session's messages:

- the GIN index `ix_messages_search`, whose every entry also holds the session's key
  lexeme (app/index/lexemes.py `session_lexeme`): a query for `key & term` reads
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

import functools
from collections.abc import Sequence
from typing import Any

from app.core.recall_tool import NAME as RECALL
from app.db.database import Driver
from app.db.scope import session_row_sql, session_sql
from app.index.lexemes import POSITIONS_CUT

SESSION = f"""
SELECT last_seq, last_compaction_seq FROM sessions WHERE {session_row_sql()}
"""

_ROLES = "($5::text[] IS NULL OR m.role = ANY($5::text[]))"


# A stored vector is compressed (and past about 2 kB, kept out of line): each match
# against it decompresses it again. Where several terms are matched against one
# message, `setweight(v, 'D')` (D is the weight every lexeme already has: the same
# vector) makes one decompressed copy for all of them.
def _text(body: str) -> str:
    # What search sees of a stored message (app/index/searchable.py `searchable_text`),
    # without writing the whole JSON out as text: its string fields as they are, the tool
    # calls as JSON.
    return (
        f"concat_ws(E'\\n', {body} ->> 'content', {body} ->> 'name',"
        f" ({body} -> 'tool_calls')::text, {body} ->> 'refusal')"
    )


def _confirmed(literal: str, needle: str, body: str) -> str:
    # The identifier in the text, on part edges; a plain search for its characters first,
    # which rules most texts out at a fraction of the expression's cost (lower-cased
    # only when it has letters: lower() costs more than the search).
    text = _text(body)
    return (
        f"((CASE WHEN lower({literal}) = upper({literal}) THEN strpos({text}, {literal})"
        f" ELSE strpos(lower({text}), lower({literal})) END) > 0 AND {text} ~ {needle})"
    )


# The vectors whose positions PostgreSQL did not all keep (app/index/lexemes.py).
_CUT = "'''" + POSITIONS_CUT + "'''::tsquery"


def _checked(v: str, q: str, strict: str, literal: str, needle: str, body: str) -> str:
    # A message matching `q` (an identifier's parts, wherever they are) that the stored
    # text must confirm: the vector first (the whole lexeme, or the parts as a phrase),
    # the text only where positions cannot tell (app/index/lexemes.py `Term.needle`).
    return (
        f"(CASE WHEN NOT {v} @@ {q} THEN false WHEN {needle} IS NULL THEN true"
        f" WHEN {v} @@ {strict} THEN true WHEN NOT {v} @@ {_CUT} THEN false"
        f" ELSE {_confirmed(literal, needle, body)} END)"
    )


@functools.cache
def _matches_sql(terms: int, spread: bool = False, checked: frozenset[int] = frozenset()) -> str:
    # One bit per term: which of the query's terms each message of the window [$3, $4]
    # (`spread`: each of the seqs $3) matches, for those matching `$6` (every message when
    # NULL), newest first, at most $7 (all when NULL). By primary key, newest first, so
    # a limit stops the read; each vector matched in memory. The terms `checked` have
    # their strict forms, needles and literals in the three arrays after the terms.
    s, n, lit = (f"${8 + terms + k}::{t}[]" for k, t in enumerate(("tsquery", "text", "text")))

    def match(i: int) -> str:
        q = f"${8 + i}::tsquery"
        if i in checked:
            j = f"[{i + 1}]"
            return _checked("w.v", q, f"({s}){j}", f"({lit}){j}", f"({n}){j}", "w.body")
        return f"(w.v @@ {q})"

    bits = " | ".join(f"({match(i)}::int::bigint << {i})" for i in range(terms))
    messages = (
        "SELECT m.seq, m.search, m.body FROM unnest($3::bigint[]) AS s(seq)"
        f" JOIN messages m ON {session_sql('m')} AND m.seq = s.seq"
        f" WHERE $4::bigint IS NULL AND {_ROLES}"
        if spread
        else "SELECT m.seq, m.search, m.body FROM messages m"
        f" WHERE {session_sql('m')} AND m.seq BETWEEN $3 AND $4"
        f" AND {_ROLES}"
    )
    # Each OFFSET 0 keeps a level apart: the window read by primary key only (a tsquery
    # beside the key would let the planner take the index), the copy made once per
    # message and the bits once (flattened, each would be computed once per reference).
    # Each level says its order, so the limit stops the read instead of a sort.
    return f"""
SELECT seq, hits FROM (
    SELECT w.seq, {bits} AS hits FROM (
        SELECT k.seq, setweight(k.search, 'D') AS v, k.body FROM (
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
# through the index; with `$8` (the needle of strict form `$7`, literal `$9`), newest
# first until `$6` of them are confirmed.
NEWEST_INDEXED = f"""
SELECT seq FROM (
    SELECT m.seq, m.search, m.body FROM (
        SELECT m.tenant_id, m.session_id, m.seq, m.role, m.search, m.body FROM messages m
        WHERE m.search @@ $3::tsquery OFFSET 0
    ) AS m
    WHERE {session_sql("m")} AND m.seq < $4 AND {_ROLES}
    ORDER BY seq DESC
    OFFSET 0
) AS k
WHERE $8::text IS NULL OR k.search @@ $7::tsquery
    OR (k.search @@ {_CUT} AND {_confirmed("$9::text", "$8::text", "k.body")})
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
_RECALL_TRAFFIC = f"""(
    (m.role = 'assistant'
     AND m.body -> 'tool_calls' @> jsonb_build_array(jsonb_build_object(
         'function', jsonb_build_object('name', $11::text))))
    OR (m.role = 'tool' AND EXISTS (
        SELECT 1 FROM tool_calls t
        JOIN messages a ON {session_sql("a")} AND a.seq = t.seq
        WHERE {session_sql("t")} AND t.call_id = m.body ->> 'tool_call_id'
          AND a.body -> 'tool_calls' @> jsonb_build_array(jsonb_build_object(
              'id', t.call_id, 'function', jsonb_build_object('name', $11::text)))
    ))
)"""

# The final score of a few candidates `$3`, and their rows, the best `$9`: the base
# score `$10` when known (NULL: the weights `$5` of the terms `$4` it matches, matched
# here, confirmed by the strict forms `$12`, needles `$13` and literals `$14`), plus the
# literal texts `$6` found (`$7` times their tokens `$8`). The recall tool's calls and
# answers quote what an earlier search found (its query, its snippets): the next
# search for the same thing would find them first, the newest, above the messages
# they quote; they come after every other candidate (`echo`), so that when one is
# among the rows, every other candidate is too.
FINISH = f"""
SELECT m.seq, m.role, m.body, coalesce(c.base, (
    SELECT coalesce(sum(t.w), 0)
    FROM unnest($4::tsquery[], $5::float8[], $12::tsquery[], $13::text[], $14::text[])
        AS t(q, w, s, n, l)
    WHERE {_checked("v.v", "t.q", "t.s", "t.l", "t.n", "m.body")}
)) + {_literal_bonus("$6", "$7", "$8")} AS score, coalesce({_RECALL_TRAFFIC}, false) AS echo
FROM unnest($3::bigint[], $10::float8[]) AS c(seq, base)
JOIN messages m ON {session_sql("m")} AND m.seq = c.seq
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
# A query with a needle (`$8`, its strict form `$7`, literal `$9`) counts the messages its text
# confirms (app/index/lexemes.py `Term.needle`), reading each text only as far as
# the limit needs.
TERM_MATCHES = f"""
SELECT g.i, x.seq
FROM unnest($3::tsquery[], $7::tsquery[], $8::text[], $9::text[])
    WITH ORDINALITY AS g(q, s, n, l, i)
CROSS JOIN LATERAL (
    SELECT k.seq FROM (
        SELECT m.seq, m.v, m.body FROM (
            SELECT m.tenant_id, m.session_id, m.seq, m.role, m.body,
                CASE WHEN g.n IS NOT NULL THEN setweight(m.search, 'D') END AS v
            FROM messages m
            WHERE m.search @@ g.q OFFSET 0
        ) AS m
        WHERE {session_sql("m")} AND m.seq < $4 AND {_ROLES}
        OFFSET 0
    ) AS k
    WHERE g.n IS NULL OR k.v @@ g.s OR (k.v @@ {_CUT} AND {_confirmed("g.l", "g.n", "k.body")})
    LIMIT $6
) AS x
"""
# The same, the newest `$6` of each: every match is read and sorted (and confirmed
# newest first). For a phrase or a prefix, whose matches the index cannot tell without
# reading each (a phrase) or reads whole anyway (a prefix): one found common then comes
# with its newest holders, which a search of common terms would otherwise read again.
TERM_MATCHES_NEWEST = TERM_MATCHES.replace(
    "        OFFSET 0\n    ) AS k", "        ORDER BY m.seq DESC\n        OFFSET 0\n    ) AS k"
).replace("    LIMIT $6", "    ORDER BY k.seq DESC\n    LIMIT $6")
assert TERM_MATCHES_NEWEST.count("ORDER BY") == 2

# The function name behind each answered call id: the tool name of a tool message.
CALL_NAMES = f"""
SELECT t.call_id, a.body -> 'tool_calls' AS calls
FROM unnest($3::text[]) AS c(call_id)
JOIN tool_calls t ON {session_sql("t")} AND t.call_id = c.call_id
JOIN messages a ON {session_sql("a")} AND a.seq = t.seq
"""


async def session(conn: Driver, tenant: str, sid: str) -> Any:
    return await conn.fetchrow(SESSION, tenant, sid)


# What confirms a match of a tsquery (app/index/lexemes.py `Term`): its strict form,
# needle and literal, or None when matching the tsquery is a hit.
Check = tuple[str, str, str] | None


def _split_checks(checks: Sequence[Check]) -> list[list[str | None]]:
    return [[c[k] if c else None for c in checks] for k in range(3)]


async def matches(
    conn: Driver,
    tenant: str,
    sid: str,
    tsqueries: Sequence[str],
    checks: Sequence[Check],
    first: int,
    last: int,
    roles: Sequence[str] | None,
    having: str | None = None,
    limit: int | None = None,
) -> list[tuple[int, int]]:
    """(seq, bit i set when term i matches), newest first, for the messages with seq in
    [first, last] that match `having` (when given) and any term; the newest `limit`."""
    checked = frozenset(i for i, c in enumerate(checks) if c)
    extra = _split_checks(checks) if checked else []
    rows = await conn.fetch(
        _matches_sql(len(tsqueries), False, checked),
        *(tenant, sid, first, last, roles, having, limit),
        *tsqueries,
        *extra,
    )
    return [(int(r["seq"]), int(r["hits"])) for r in rows]


async def spread(
    conn: Driver,
    tenant: str,
    sid: str,
    tsqueries: Sequence[str],
    checks: Sequence[Check],
    seqs: Sequence[int],
    roles: Sequence[str] | None,
) -> list[tuple[int, int]]:
    """As `matches`, for the messages with these seqs: one probe of the primary key each."""
    checked = frozenset(i for i, c in enumerate(checks) if c)
    extra = _split_checks(checks) if checked else []
    rows = await conn.fetch(
        _matches_sql(len(tsqueries), True, checked),
        *(tenant, sid, list(seqs), None, roles, None, None),
        *tsqueries,
        *extra,
    )
    return [(int(r["seq"]), int(r["hits"])) for r in rows]


async def newest_indexed(
    conn: Driver,
    tenant: str,
    sid: str,
    tsquery: str,
    check: Check,
    before_seq: int,
    roles: Sequence[str] | None,
    limit: int,
) -> list[int]:
    strict, needle, literal = check or (None, None, None)
    rows = await conn.fetch(
        NEWEST_INDEXED, tenant, sid, tsquery, before_seq, roles, limit, strict, needle, literal
    )
    return [int(r["seq"]) for r in rows]


async def finish(
    conn: Driver,
    tenant: str,
    sid: str,
    scored: Sequence[tuple[int, float | None]],
    weighted: Sequence[tuple[str, Check, float]],
    literals: Sequence[tuple[str, int]],
    literal_weight: float,
    limit: int,
) -> list[Any]:
    """The best `limit` of the candidates (seq, base score or None to score it here)."""
    stricts, needles, literals_ = _split_checks([c for _, c, _ in weighted])
    return list(
        await conn.fetch(
            FINISH,
            tenant,
            sid,
            [seq for seq, _ in scored],
            [q for q, _, _ in weighted],
            [w for _, _, w in weighted],
            [text for text, _ in literals],
            literal_weight,
            [n for _, n in literals],
            limit,
            [base for _, base in scored],
            RECALL,
            stricts,
            needles,
            literals_,
        )
    )


async def term_matches(
    conn: Driver,
    tenant: str,
    sid: str,
    queries: Sequence[str],
    checks: Sequence[Check],
    before_seq: int,
    roles: Sequence[str] | None,
    cap: int,
    newest: bool = False,
) -> list[list[int]]:
    """For each query, the seqs of the messages it matches, at most `cap` of them (the
    newest, newest first, when `newest`)."""
    sql = TERM_MATCHES_NEWEST if newest else TERM_MATCHES
    rows = await conn.fetch(
        sql, tenant, sid, list(queries), before_seq, roles, cap, *_split_checks(checks)
    )
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
