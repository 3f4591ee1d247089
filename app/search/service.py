"""Recall: full-text search over every message of a session, ranked.

Ranking is by the query's rarer terms, the way a person reads a query: in
"what did the test say about HXDUBJ" the identifier is what matters, and the
words are in every other message. Each term (a word, an identifier, a CJK run:
app/messages/lexemes.py) is counted among the session's messages up to a cap; the
candidates are the messages matching any term under the cap, each scored by
the sum of its terms' weights (`log(1 + messages / matches)`, an inverse
document frequency), newest first among equals. A query whose every term is
common matches the messages holding all of them, newest first. Both reads are
bounded by the cap, not by the session's length.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.conversation import call_function, content_text
from app.errors import NotFound, invalid
from app.limits import BIGINT_MAX, ROLES, SEARCH_LIMIT_MAX
from app.messages import repository as messages
from app.messages.lexemes import (
    MAX_QUERY_CHARS,
    Term,
    in_session,
    line_of,
    literals,
    match_at,
    query_terms,
    searchable_text,
    snippet,
)
from app.messages.service import message_view, slice_text
from app.search import repository as repo
from app.sessions.service import get_session

if TYPE_CHECKING:
    from app.database import Database

# A term matching more of the session's messages than this is "common": it weighs
# in the score but does not pick candidates.
COMMON = 200
# The most candidates one search scores.
CANDIDATES = 2000
# How many of the best-scored are checked for the query's literal text.
RESCORED = 50
# An identifier outweighs plain words: "what did the test say about X" is about X.
IDENTIFIER_BOOST = 3.0


@dataclass(frozen=True, slots=True)
class Hit:
    seq: int
    role: str
    tool_name: str | None
    snippet: str
    line: int | None
    score: float
    compacted: bool

    def as_dict(self, sid: str) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "role": self.role,
            "tool_name": self.tool_name,
            "snippet": self.snippet,
            "line": self.line,
            "path": f"/sessions/{sid}/messages/{self.seq}",
            "score": round(self.score, 4),
            "compacted": self.compacted,
        }


@dataclass(frozen=True, slots=True)
class Found:
    hits: list[Hit]
    last_seq: int
    last_compaction_seq: int

    def as_dict(self, sid: str, q: str) -> dict[str, Any]:
        return {
            "query": q,
            "hits": [h.as_dict(sid) for h in self.hits],
            "last_seq": self.last_seq,
            "last_compaction_seq": self.last_compaction_seq,
        }


def check_query(q: str | None) -> str:
    """The query, or a 422 naming `q`."""
    if q is None or not q.strip():
        raise invalid("q", "must not be empty")
    if len(q) > MAX_QUERY_CHARS:
        raise invalid("q", f"at most {MAX_QUERY_CHARS} characters")
    return q


def check_roles(raw: Sequence[str] | None) -> list[str] | None:
    """`roles=user,tool` or `roles=user&roles=tool`: the roles, or a 422 naming `roles`."""
    if not raw:
        return None
    roles = [r.strip() for item in raw for r in item.split(",") if r.strip()]
    for r in roles:
        if r not in ROLES:
            raise invalid("roles", f"{r[:40]!r} is not one of {', '.join(ROLES)}")
    return sorted(set(roles)) or None


async def search(
    database: Database,
    tenant: str,
    sid: str,
    q: str,
    *,
    limit: int = 10,
    before_seq: int | None = None,
    roles: Sequence[str] | None = None,
) -> Found:
    """The session's messages best matching `q`. 404 for a session the tenant has not."""
    if not 1 <= limit <= SEARCH_LIMIT_MAX:
        raise invalid("limit", f"between 1 and {SEARCH_LIMIT_MAX}")
    terms = query_terms(check_query(q))
    before = before_seq if before_seq is not None else BIGINT_MAX
    async with database.driver() as conn:
        head = await repo.session(conn, tenant, sid)
        if head is None:
            raise NotFound(f"session {sid!r} does not exist")
        found = Found([], int(head["last_seq"]), int(head["last_compaction_seq"]))
        if not terms:  # only punctuation: nothing a message could match
            return found
        queries = [in_session(tenant, sid, t.tsquery) for t in terms]
        counts = await repo.term_counts(conn, tenant, sid, queries, before, roles, COMMON)
        present = [(t, n) for t, n in zip(terms, counts, strict=True) if n > 0]
        if not present:
            return found
        total = max(found.last_seq, 1)
        weighted = [
            (t.tsquery, math.log1p(total / n) * (IDENTIFIER_BOOST if t.identifier else 1.0))
            for t, n in present
        ]
        # Exact text of the query in a message beats any sum of its words.
        literal_weight = 2 * sum(w for _, w in weighted)
        exact = literals(q)
        selective = [t for t, n in present if n < COMMON]
        if selective:
            match = " | ".join(f"({t.tsquery})" for t in selective)
        else:
            match = " & ".join(f"({t.tsquery})" for t, _ in present)
        rows = await repo.ranked(
            conn,
            tenant,
            sid,
            in_session(tenant, sid, match),
            before,
            roles,
            weighted,
            limit,
            CANDIDATES,
            exact,
            literal_weight,
            RESCORED,
        )
        if not rows and not selective:
            # No message holds every common term: the most recent holding the rarest.
            rarest = min(present, key=lambda p: p[1])[0]
            rows = await repo.ranked(
                conn,
                tenant,
                sid,
                in_session(tenant, sid, rarest.tsquery),
                before,
                roles,
                weighted,
                limit,
                CANDIDATES,
                exact,
                literal_weight,
                RESCORED,
            )
        answered = [
            str(r["body"].get("tool_call_id"))
            for r in rows
            if r["role"] == "tool" and not r["body"].get("name")
        ]
        names = await repo.call_names(conn, tenant, sid, answered)
    # The rarest terms first: the snippet centres on what made the message a hit.
    order = sorted(present, key=lambda p: p[1])
    shown = [t for t, _ in order]
    found.hits.extend(_hit(r, shown, names, found.last_compaction_seq) for r in rows)
    return found


def _hit(row: Any, terms: list[Term], names: dict[str, str], watermark: int) -> Hit:
    body: dict[str, Any] = row["body"]
    content = content_text(body)
    at, _ = match_at(content, terms)
    return Hit(
        seq=int(row["seq"]),
        role=str(row["role"]),
        tool_name=_tool_name(str(row["role"]), body, names),
        snippet=snippet(searchable_text(body), terms),
        # In the content's lines, as GET …/messages/{seq}?line_start= counts them.
        line=line_of(content, at),
        score=float(row["score"]),
        compacted=int(row["seq"]) <= watermark,
    )


def _tool_name(role: str, body: dict[str, Any], names: dict[str, str]) -> str | None:
    """A tool message's tool; the (first) function an assistant message calls."""
    if role == "tool":
        name = body.get("name")
        if isinstance(name, str) and name:
            return name
        return names.get(str(body.get("tool_call_id")))
    for call in body.get("tool_calls") or ():
        fn = call_function(call)
        if fn is not None:
            return fn[0]
    return None


async def read(
    database: Database,
    tenant: str,
    sid: str,
    seq: int,
    *,
    char_start: int | None = None,
    char_end: int | None = None,
    line_start: int | None = None,
    line_end: int | None = None,
) -> dict[str, Any]:
    """One message in full, or a range of its text: `GET /sessions/{id}/messages/{seq}`'s
    answer, for the recall tool over MCP."""
    async with database.transaction() as s:
        await get_session(s, tenant, sid)
        m = await messages.one(s, tenant, sid, seq)
    if m is None:
        raise NotFound(f"session {sid!r} has no message {seq}")
    out = message_view(m)
    chars = char_start is not None or char_end is not None
    lines = line_start is not None or line_end is not None
    if chars and lines:
        raise invalid("line_start", "give a character range or a line range, not both")
    if chars or lines:
        out["content"], out["range"] = slice_text(m, char_start, char_end, line_start, line_end)
    return out
