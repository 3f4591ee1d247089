"""A query that is one identifier, as written: its exact holders above the rest, however old.

Ranking reads the holders of a common term newest first (app/search/ranking.py), and the
index confirms an identifier of several parts by the phrase of its parts and a code by
its word in any case. So an old message holding `src/agent/session.ts` could rank below
three hundred newer ones holding `agent-session.ts` (the parts `agent`, `session` in a
row), and an old `BENCHMARKS` below three hundred newer `benchmarks`: the old one never
became a candidate, and only a candidate can be found to hold the query as written. When
none of the best holds it, the term's holders are read further back, newest first, for
the text as written (SPEC §3 "Recall": an exact match above a prefix match).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from app.db.database import Driver
from app.db.scope import session_sql
from app.index.lexemes import Term, in_session

# How many of the term's holders, newest first, are read for the query as written: each
# is a read of its stored text; an exact holder older than these is left to the parts.
SCAN = 2000

# The newest `$7` messages below seq `$4` among the newest `$6` matching `$3` (the
# session's key in it) whose stored JSON holds `$8` as written (JSON-escaped, case kept).
HOLDING = f"""
SELECT seq FROM (
    SELECT m.seq, m.body FROM (
        SELECT m.tenant_id, m.session_id, m.seq, m.role, m.body FROM messages m
        WHERE m.search @@ $3::tsquery OFFSET 0
    ) AS m
    WHERE {session_sql("m")} AND m.seq < $4
      AND ($5::text[] IS NULL OR m.role = ANY($5::text[]))
    ORDER BY m.seq DESC
    LIMIT $6
) AS k
WHERE strpos(k.body::text, $8) > 0
ORDER BY seq DESC
LIMIT $7
"""


def written(q: str, terms: Sequence[Term]) -> str | None:
    """The query as its stored JSON would hold it, when it is one identifier (one token
    with its code: a path, a dotted name, a code in capitals); else None."""
    q = q.strip()
    if len(terms) != 1 or not terms[0].identifier or len(q) < 3 or any(c.isspace() for c in q):
        return None
    return json.dumps(q, ensure_ascii=False)[1:-1]


def held(rows: Sequence[Any], text: str) -> bool:
    """Whether a row of the answer (not the recall tool's own traffic) holds `text`."""
    return any(not r["echo"] and text in json.dumps(r["body"], ensure_ascii=False) for r in rows)


async def further_back(
    conn: Driver,
    tenant: str,
    sid: str,
    term: Term,
    text: str,
    top: int,
    roles: Sequence[str] | None,
    limit: int,
) -> list[int]:
    """The newest holders of `text` as written among the term's newest SCAN holders."""
    # An identifier of several parts: the messages holding its parts (its whole lexeme
    # is in none of those holding it inside a longer path); a word: the word, not every
    # word it starts.
    form = term.exact if term.rest else (term.best or term.exact)
    rows = await conn.fetch(
        HOLDING, tenant, sid, in_session(tenant, sid, form), top + 1, roles, SCAN, limit, text
    )
    return [int(r["seq"]) for r in rows]


Scored = Sequence[tuple[int, float | None]]


@dataclass(frozen=True, slots=True)
class Exact:
    """One search's query and where it looks, to put its exact holders above the rest."""

    conn: Driver
    tenant: str
    sid: str
    q: str
    terms: Sequence[Term]
    top: int
    roles: Sequence[str] | None
    limit: int
    finish: Callable[[Scored], Awaitable[list[Any]]]

    async def above(self, rows: list[Any], chosen: Scored, *, every: bool = False) -> list[Any]:
        """`rows` (the best of the candidates `chosen`), or when the query is one
        identifier and none of them holds it as written, the best of `chosen` and its
        holders further back, scored again. `every`: `chosen` held every holder of the
        query's terms, so there is none further back."""
        text = None if every else written(self.q, self.terms)
        if text is None or held(rows, text):
            return rows
        had = {seq for seq, _ in chosen}
        older = await further_back(
            self.conn, self.tenant, self.sid, self.terms[0], text, self.top, self.roles,
            self.limit,
        )  # fmt: skip
        more = [(seq, None) for seq in older if seq not in had]
        return await self.finish([*chosen, *more]) if more else rows
