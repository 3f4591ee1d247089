"""Which messages best match a query, and their order.

Ranking is by the query's rarer terms, the way a person reads a query: in "what
did the test say about HXDUBJ" the identifier is what matters, and the words are
in every other message. Each term (a word, an identifier, a CJK run:
app/messages/lexemes.py) weighs `log(1 + messages / matches)`, an inverse document
frequency, an identifier's three times. The candidates are the messages matching
any selective term (one matching fewer than COMMON of the session's messages),
each scored by the weights of the terms it matches, newest first among equals; the
best are then checked for the query's literal text. A query whose every term is
common scores the recent messages holding the rarest of them.

What a search costs is what it reads to learn how common each term is, and to
find its candidates. Through the GIN index (app/search/repository.py) a term costs
a read of all its matches in the session: nothing for a code, tens of thousands of
entries for "the" in a long session. A phrase (the parts of an identifier, a run of
Chinese) costs more: the index knows no positions, so every message holding all
its parts is read and checked. Hence:

- the newest SAMPLE messages are read first, by primary key, and each term matched
  against them in memory: a term found often there is common, its count estimated
  from the sample, and it is never looked up in the index;
- a term is looked up by its exact form (`models.py` as one lexeme, `datenbank`
  itself) and only when that matches nothing by its wider form (the phrase of its
  parts, or as a prefix: `datenbank` finds `Datenbanken`);
- a phrase or a prefix is first matched against the newest WINDOW messages; only
  one rare there goes to the index.

A session no longer than the sample is counted exactly by it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.messages.lexemes import Term, in_session, literals
from app.search import repository as repo

# A term matching more of the session's messages than this is "common": it weighs
# in the score but does not pick candidates.
COMMON = 200
# The most candidates one search scores.
CANDIDATES = 2000
# How many of the best-scored are checked for the query's literal text.
RESCORED = 50
# An identifier outweighs plain words: "what did the test say about X" is about X.
IDENTIFIER_BOOST = 3.0
# The newest messages read to tell common terms from rare ones.
SAMPLE = 200
# A term is known common, without a count through the index, when it matches at least
# this many messages of the sample (so the estimate rests on more than a chance hit)
# and the estimate is well past COMMON.
SAMPLE_HITS = 3
SURELY_COMMON = 2 * COMMON
# The newest messages a phrase or a prefix is matched against before the index, and
# that a query of only common terms scores.
WINDOW = 2000


@dataclass(frozen=True, slots=True)
class Ranked:
    rows: list[Any]  # seq, role, body, score; best first
    present: list[tuple[Term, float]]  # the terms some message matches, with their counts


@dataclass(slots=True)
class _Counted:
    form: str  # the tsquery the search uses for the term
    n: float  # its matches in the session, counted or estimated
    indexed: bool  # whether it may pick candidates through the index


def _single(tsquery: str) -> bool:
    """One lexeme, looked up as itself: no phrase to check, no prefix to expand."""
    return "<->" not in tsquery and ":*" not in tsquery


def _scale(first: int, top: int) -> float:
    return top / (top - first + 1)


async def _counts(
    conn: Any,
    tenant: str,
    sid: str,
    terms: Sequence[Term],
    top: int,
    roles: Sequence[str] | None,
) -> list[_Counted]:
    """Each term's form and count among the session's messages with seq <= `top`."""
    first = max(1, top - SAMPLE + 1)
    sample = await repo.matches(conn, tenant, sid, [t.exact for t in terms], first, top, roles)
    scale = _scale(first, top)
    out: list[_Counted] = []
    for i, term in enumerate(terms):
        h = sum(1 for _, bits in sample if bits >> i & 1)
        out.append(_Counted(term.exact, h * scale, True))
    known = {
        i
        for i, c in enumerate(out)
        if first == 1 or (c.n >= SAMPLE_HITS * scale and c.n >= SURELY_COMMON)
    }

    async def count(which: list[int]) -> None:
        ns = await repo.term_counts(
            conn,
            tenant,
            sid,
            [in_session(tenant, sid, out[i].form) for i in which],
            top + 1,
            roles,
            COMMON,
        )
        for i, n in zip(which, ns, strict=True):
            # Counted up to COMMON only: past it, the sample's estimate is the better one.
            out[i].n = float(n) if n < COMMON else max(float(n), out[i].n)
            out[i].indexed = True

    cheap = [i for i, t in enumerate(terms) if i not in known and _single(t.exact)]
    if cheap:
        await count(cheap)
    # Phrases and prefixes: the exact form when it is one, or the wider form of a term
    # whose exact form matches nothing.
    costly = [i for i, t in enumerate(terms) if i not in known and not _single(t.exact)]
    for i, t in enumerate(terms):
        if out[i].n == 0 and t.tsquery != t.exact:
            out[i].form = t.tsquery
            costly.append(i)
    if not costly:
        return out
    start = max(1, top - WINDOW + 1)
    recent = await repo.matches(conn, tenant, sid, [out[i].form for i in costly], start, top, roles)
    wide_scale = _scale(start, top)
    rare: list[int] = []
    for k, i in enumerate(costly):
        h = sum(1 for _, bits in recent if bits >> k & 1)
        out[i].n = h * wide_scale
        # Found often enough lately: estimated, and left out of the index, where it would
        # cost a check of every message holding its parts.
        out[i].indexed = start == 1
        if start > 1 and h < SAMPLE_HITS:
            rare.append(i)
    if rare:
        await count(rare)
    return out


async def rank(
    conn: Any,
    tenant: str,
    sid: str,
    q: str,
    terms: Sequence[Term],
    top: int,
    roles: Sequence[str] | None,
    limit: int,
    total: int,
) -> Ranked:
    """The best `limit` messages of the session with seq <= `top` for the query `q`
    (split into `terms`); `total` messages in the session."""
    counted = await _counts(conn, tenant, sid, terms, top, roles)
    present = [i for i, c in enumerate(counted) if c.n > 0]
    if not present:
        return Ranked([], [])
    total = max(total, 1)
    weight = {
        i: math.log1p(total / counted[i].n) * (IDENTIFIER_BOOST if terms[i].identifier else 1.0)
        for i in present
    }
    weighted = [(counted[i].form, weight[i]) for i in present]
    # Exact text of the query in a message beats any sum of its words.
    literal_weight = 2 * sum(weight.values())
    exact_texts = literals(q)
    found = [(terms[i], counted[i].n) for i in present]
    selective = [i for i in present if counted[i].n < COMMON and counted[i].indexed]
    if selective:
        match = " | ".join(f"({counted[i].form})" for i in selective)
        rows = await repo.ranked(
            conn,
            tenant,
            sid,
            in_session(tenant, sid, match),
            top + 1,
            roles,
            weighted,
            limit,
            CANDIDATES,
            exact_texts,
            literal_weight,
            RESCORED,
        )
        return Ranked(rows, found)
    # Every term is common: through the index, any of them would cost a read of all its
    # matches. The recent messages holding the rarest are scored instead, read by primary
    # key: those holding all the terms come first, newest first among equals.
    rarest = min(present, key=lambda i: counted[i].n)
    start = max(1, top - WINDOW + 1)
    scored = await repo.matches(
        conn,
        tenant,
        sid,
        [counted[i].form for i in present],
        start,
        top,
        roles,
        counted[rarest].form,
    )
    if scored:

        def score(row: tuple[int, int]) -> tuple[float, int]:
            return -sum(weight[i] for k, i in enumerate(present) if row[1] >> k & 1), -row[0]

        seqs = [seq for seq, _ in sorted(scored, key=score)[:RESCORED]]
    else:  # none recent: the newest holding it, through the index
        seqs = await repo.newest_indexed(
            conn,
            tenant,
            sid,
            in_session(tenant, sid, counted[rarest].form),
            top + 1,
            roles,
            RESCORED,
        )
    rows = await repo.finish(conn, tenant, sid, seqs, weighted, exact_texts, literal_weight, limit)
    return Ranked(rows, found)
