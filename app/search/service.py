"""Recall: full-text search over every message of a session, ranked.

This module is the entrance: it checks the query, finds the session, has
app/search/ranking.py choose and order the messages (by the query's rarer terms,
reading as little of the session as it can), and makes the
hits: role, tool name, a snippet and the line of the match.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.core.conversation import call_function, content_text
from app.core.errors import NotFound, invalid
from app.core.limits import BIGINT_MAX, ROLES, SEARCH_LIMIT_MAX
from app.index.lexemes import MAX_QUERY_CHARS, Term, query_terms
from app.index.searchable import searchable_text
from app.search import repository as repo
from app.search.hits import line_of, match_at, snippet
from app.search.ranking import rank

if TYPE_CHECKING:
    from app.db.database import Database


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


def check_query(q: str | None, field: str = "q") -> str:
    """The query, or a 422 naming `field` (`q` over HTTP, `query` over MCP)."""
    if q is None or not q.strip():
        raise invalid(field, "must not be empty")
    if len(q) > MAX_QUERY_CHARS:
        raise invalid(field, f"at most {MAX_QUERY_CHARS} characters")
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
        top = min(before - 1, found.last_seq)
        if not terms or top < 1:  # only punctuation, or nothing before `before_seq`
            return found
        ranked = await rank(conn, tenant, sid, q, terms, top, roles, limit, found.last_seq)
        rows = ranked.rows
        answered = [
            str(r["body"].get("tool_call_id"))
            for r in rows
            if r["role"] == "tool" and not r["body"].get("name")
        ]
        names = await repo.call_names(conn, tenant, sid, answered)
    # The rarest terms first: the snippet centres on what made the message a hit.
    order = sorted(ranked.present, key=lambda p: p[1])
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
