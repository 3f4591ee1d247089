"""Which messages best match a query, and their order.

Ranking is by the query's rarer terms, the way a person reads a query: in "what did the test say
about HXDUBJ" the identifier is what matters, and the words are in every other message. Each
term (a word, an identifier, a CJK run: app/index/lexemes.py) weighs `log(1 + messages /
matches)`, an inverse document frequency, an identifier's three times. The candidates are the
messages matching any selective term (one matching fewer than COMMON of the session's messages),
each scored by the weights of the terms it matches, newest first among equals; the best are then
checked for the query's literal text. A query whose every term is common scores the recent
messages holding the rarest of them.

What a search costs is what it reads to learn how common each term is, and to find its
candidates. Through the GIN index (app/search/repository.py) a term costs a read of all its
matches in the session: nothing for a code, tens of thousands of entries for "the" in a long
session. A phrase (a run of Chinese) costs more: the index knows no positions, so every message
holding all its parts is read and checked. Hence:

- the newest SAMPLE messages are read first, by primary key, and each term matched against them
  in memory: a term found often there is common, its count estimated from the sample, and it is
  never looked up in the index;
- an identifier of several parts by its whole lexeme or the AND of its parts, the messages
  holding the parts but not the whole lexeme each confirmed (`Term.needle`);
- a phrase or a prefix is first matched against the newest WINDOW messages; only one rare there
  goes to the index, which reads its newest holders with the count.
A session no longer than the sample is counted exactly by it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from app.db.database import Driver
from app.index.lexemes import MAX_TERMS, Term, in_session
from app.search import as_written
from app.search import repository as repo
from app.search.forms import (
    Counted,
    Ranked,
    Window,
    aligned,
    checks_of,
    index_reads,
    non_echoes,
    phrase_parts,
    sampled,
    wider,
)
from app.search.hits import literals
from app.search.repository import Check

# A term matching more of the session's messages than this is "common": it weighs
# in the score but does not pick candidates.
COMMON = 200
# How many of the best-scored are checked for the query's literal text.
RESCORED = 50
# An identifier outweighs plain words: "what did the test say about X" is about X.
IDENTIFIER_BOOST = 3.0
# The messages read to tell common terms from rare ones: spread over a longer session.
SAMPLE = 200
# The most tsqueries the sample matches (terms, wider forms, parts of phrases): one bit
# each in a bigint. Every term's two forms fit.
MAX_SAMPLED = 62
assert 2 * MAX_TERMS <= MAX_SAMPLED
# A term is known common, without a count through the index, when it matches at least
# this many messages of the sample (so the estimate rests on more than a chance hit)
# and the estimate is well past COMMON. The same many in the recent window tell a
# phrase or a prefix is not rare.
SAMPLE_HITS = 3
SURELY_COMMON = 2 * COMMON
# An identifier's parts held apart by more messages than this (estimated) are not
# confirmed one by one through the index (each a read of the message's vector).
REST_READ = 2 * COMMON
# The newest messages a phrase or a prefix is matched against before the index, and
# that a query of only common terms scores.
WINDOW = 2000
# How much further back a query of only common terms reads, by primary key, when the
# window holds fewer hits than asked for and its rarest term is a phrase or a prefix.
FURTHER = 8000


async def _counts(
    conn: Driver,
    tenant: str,
    sid: str,
    terms: Sequence[Term],
    top: int,
    roles: Sequence[str] | None,
) -> tuple[list[Counted], list[Window]]:
    """Each term's form and count among the session's messages with seq <= `top`, and
    the recent windows read."""
    forms = sampled(terms, top <= SAMPLE, MAX_SAMPLED)
    checks = checks_of(terms)
    if top <= SAMPLE:  # the sample is the whole session: its counts are exact
        sample = await repo.matches(conn, tenant, sid, forms, aligned(checks, forms), 1, top, roles)
        held = {q: [seq for seq, bits in sample if bits >> k & 1] for k, q in enumerate(forms)}
        out = [Counted(t.exact, len(held[t.exact]), held[t.exact], True) for t in terms]
        for i, t in enumerate(terms):
            wide = wider(t, out[i].n)
            if wide is not None:
                out[i] = Counted(wide, len(held[wide]), held[wide], True, None, out[i].seqs)
        return out, []
    # SAMPLE messages spread evenly over the session, one probe of the primary key each:
    # a word's frequency where it is frequent, recently or long ago.
    step = top / SAMPLE
    probes = sorted({top - int(j * step) for j in range(SAMPLE)})
    sample = await repo.spread(conn, tenant, sid, forms, aligned(checks, forms), probes, roles)
    seen = {q: sum(1 for _, bits in sample if bits >> k & 1) for k, q in enumerate(forms)}
    scale = top / len(probes)

    def surely_common(form: str) -> bool:
        return seen.get(form, 0) >= SAMPLE_HITS and seen[form] * scale >= SURELY_COMMON

    def cheap(form: str) -> bool:
        """Whether the index finds `form` at little cost: one lexeme or an AND of them (an
        identifier's parts: the index reads its rarest part's entries, and no vector), or
        a phrase one of whose parts is in none of the sample's messages (the index then
        reads only the messages holding that part). Not a prefix: the index reads every
        lexeme it starts, in every session."""
        if index_reads(form):
            return True
        return any(seen.get(p, 1) == 0 for p in phrase_parts(form))

    out = [Counted(t.exact, seen.get(t.exact, 0) * scale) for t in terms]
    windows: list[Window] = []

    def scattered(i: int) -> bool:
        """Whether so many messages hold an identifier's parts but not its whole lexeme
        (`13.0`: `13` and `0`) that confirming each through the index would cost more than
        the recent window (the sample met one): when messages hold it whole, they and the
        window's holders are its holders."""
        return bool(terms[i].rest) and seen.get(terms[i].rest, 0) * scale > REST_READ

    def in_window(i: int) -> list[int]:  # term i's holders the recent windows found
        return [seq for w in windows if i in w.complete for seq, bits in w.rows if bits >> i & 1]

    async def lookup(
        lookups: dict[tuple[str, int], tuple[str, Check]], newest: bool
    ) -> dict[tuple[str, int], list[int]]:
        if not lookups:
            return {}
        qs = [in_session(tenant, sid, f) for f, _ in lookups.values()]
        cs = [c for _, c in lookups.values()]
        got = await repo.term_matches(conn, tenant, sid, qs, cs, top + 1, roles, COMMON, newest)
        return dict(zip(lookups, got, strict=True))

    async def count(which: list[int]) -> None:
        """Through the index: the rare terms' counts and messages (and the newest holders
        of a phrase or a prefix found common)."""
        # One lexeme or an AND of them: the index stops at COMMON matches.
        one = [i for i in which if index_reads(out[i].form)]
        several = [i for i in which if i not in one]
        # An identifier's whole lexeme's holders (cheap, they rank first) and apart the
        # others holding its parts, each confirmed (`scattered`: the window's instead).
        best = [i for i in one if terms[i].rest and out[i].form == terms[i].tsquery]
        for part, newest in ((one, False), (several, True)):
            lookups: dict[tuple[str, int], tuple[str, Check]] = {}
            for i in part:
                if i not in best:
                    lookups["form", i] = (out[i].form, checks.get(out[i].form))
                    continue
                t = terms[i]
                lookups["whole", i] = (t.best, None)
                if not scattered(i):
                    lookups["rest", i] = (t.rest, (t.strict, t.needle, t.literal))
            if not lookups:
                continue
            found = await lookup(lookups, newest)
            # Held apart by many and whole by none: read as the phrase of its parts was.
            found |= await lookup({
                ("rest", i): (terms[i].rest, (terms[i].strict, terms[i].needle, terms[i].literal))
                for i in best if scattered(i) and not found["whole", i]
            }, newest)  # fmt: skip
            for i in part:
                seqs = found.get(("form", i), [])
                if i in best:
                    whole = found["whole", i]
                    out[i].exact_seqs = whole if len(whole) < COMMON else None
                    rest = found.get(("rest", i)) or in_window(i)
                    # Common when either is: the COMMON newest are not these then.
                    seqs = list(dict.fromkeys(rest + whole)) if len(whole) < COMMON else whole
                out[i].indexed = True
                if len(seqs) < COMMON:
                    out[i].n, out[i].seqs = len(seqs), seqs
                else:  # common: the sample's estimate says by how much
                    out[i].n = max(float(COMMON), out[i].n)
                    out[i].newest = seqs if newest else None

    async def recent(which: list[int]) -> None:
        """The newest WINDOW messages first, by primary key: a term found there often
        enough is estimated from them and kept out of the index; the others are
        counted through it."""
        if not which:
            return
        start = max(1, top - WINDOW + 1)
        having = " | ".join(f"({out[i].form})" for i in which)
        forms = [c.form for c in out]
        rows = await repo.matches(
            conn, tenant, sid, forms, aligned(checks, forms), start, top, roles, having
        )
        wide_scale = top / (top - start + 1)
        rare: list[int] = []
        for i in which:
            seqs = [seq for seq, bits in rows if bits >> i & 1]
            out[i].n = max(len(seqs) * wide_scale, out[i].n)
            if start == 1:  # the window is the whole session
                out[i].seqs, out[i].indexed = (seqs if len(seqs) < COMMON else None), True
            elif len(seqs) < SAMPLE_HITS:
                rare.append(i)
        windows.append(Window(start, frozenset(which), forms, rows))
        await count(rare)

    unsure = [i for i, t in enumerate(terms) if not surely_common(t.exact)]
    # A term the sample never met is likely rare: through the index, cheaply. One it met
    # once or twice may be in thousands of messages, each a read there; a phrase of
    # common parts costs a check of every message holding them: the window first.
    first_up = [
        i for i in unsure if cheap(out[i].form) and not seen.get(out[i].form) and not scattered(i)
    ]
    await count(first_up)
    await recent([i for i in unsure if i not in first_up])
    # Wider forms, where the exact form is rare.
    wider_up: list[int] = []
    wider_recent: list[int] = []
    for i in unsure:
        wide = wider(terms[i], out[i].n)
        if wide is None:
            continue
        exact_seqs = out[i].seqs
        out[i] = Counted(wide, seen.get(wide, 0) * scale, exact_seqs=exact_seqs)
        if not surely_common(wide):
            # A prefix reads every lexeme it starts, in every session: the window first.
            (wider_up if cheap(wide) else wider_recent).append(i)
    await count(wider_up)
    await recent(wider_recent)
    return out, windows


async def rank(
    conn: Driver,
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
    counted, windows = await _counts(conn, tenant, sid, terms, top, roles)
    present = [i for i, c in enumerate(counted) if c.n > 0]
    if not present:
        return Ranked([], [])
    total = max(total, 1)
    weight = {
        i: math.log1p(total / counted[i].n) * (IDENTIFIER_BOOST if terms[i].identifier else 1.0)
        for i in present
    }
    checks = checks_of(terms)
    weighted = [(counted[i].form, checks.get(counted[i].form), weight[i]) for i in present]
    # A message matching a term's best form (the word itself, not a longer one it starts;
    # the identifier as a token, or its parts in a row) counts the term twice.
    bonus = [i for i in present if terms[i].best and terms[i].best != counted[i].form]
    weighted += [(terms[i].best, None, weight[i]) for i in bonus]
    # Exact text of the query in a message beats any sum of its words.
    literal_weight = 2 * sum(weight.values())
    exact_texts = literals(q)
    found = [(terms[i], counted[i].n) for i in present]

    async def finish(scored: Sequence[tuple[int, float | None]]) -> list[Any]:
        """The best `limit` of these candidates, scored whole (repo.finish)."""
        return await repo.finish(
            conn, tenant, sid, scored, weighted, exact_texts, literal_weight, limit
        )

    # The one identifier queried, as written, above its parts (app/search/as_written.py).
    exact = as_written.Exact(conn, tenant, sid, q, terms, top, roles, limit, finish)
    selective = [i for i in present if counted[i].seqs is not None]
    if selective:
        # The messages holding the selective terms, scored by those terms; the best then
        # by every term, and the literal text. The common terms' weights only order the
        # best: matching them against every candidate would read each one's whole vector.
        by_seq: dict[int, float] = {}
        for i in selective:
            for seq in [*(counted[i].seqs or ()), *(counted[i].exact_seqs or ())]:
                by_seq[seq] = by_seq.get(seq, 0.0) + weight[i]
        ranked = sorted(by_seq.items(), key=lambda kv: (-kv[1], -kv[0]))
        # Every term is selective and every bonus known: the scores are whole.
        whole = len(selective) == len(present) and all(
            counted[i].exact_seqs is not None for i in bonus
        )
        candidates = [(seq, s if whole else None) for seq, s in ranked]
        rows = await finish(candidates[:RESCORED])
        if len(candidates) > RESCORED and non_echoes(rows) is not None:
            # The recall tool's echoes (ranked last), as rare as what they quote and
            # newer, filled the candidates scored: the others are scored too.
            rest = await finish(candidates[RESCORED:])
            real = [r for r in [*rows, *rest] if not r["echo"]]
            real.sort(key=lambda r: (-r["score"], -r["seq"]))
            rows = [*real, *(r for r in rows if r["echo"])][:limit]
        every = len(candidates) <= RESCORED
        return Ranked(await exact.above(rows, candidates[:RESCORED], every=every), found)
    # Every term is common: through the index, any of them would cost a read of all its
    # matches. The recent messages holding the rarest are scored instead, read by primary
    # key: those holding all the terms come first, newest first among equals.
    rarest = min(present, key=lambda i: counted[i].n)
    start = max(1, top - WINDOW + 1)
    forms = [c.form for c in counted]
    # A window read for the counts may already hold every recent message with it.
    window = next(
        (
            w
            for w in windows
            if rarest in w.complete and all(w.forms[i] == forms[i] for i in present)
        ),
        None,
    )
    if window is None and index_reads(forms[rarest]) and counted[rarest].n <= WINDOW:
        # One lexeme (or an identifier's AND of them) in no more messages than the window
        # holds: the newest holding it, through the index, which reads no vector to find
        # them.
        newest = await repo.newest_indexed(
            conn,
            tenant,
            sid,
            in_session(tenant, sid, forms[rarest]),
            checks.get(forms[rarest]),
            top + 1,
            roles,
            RESCORED,
        )
        first: list[tuple[int, float | None]] = [(seq, None) for seq in newest]
        return Ranked(await exact.above(await finish(first), first), found)
    if window is not None:
        scored = [row for row in window.rows if row[1] >> rarest & 1]
    else:
        scored = await repo.matches(
            conn,
            tenant,
            sid,
            forms,
            aligned(checks, forms),
            start,
            top,
            roles,
            counted[rarest].form,
            # One term: all score the same, the newest are the best.
            RESCORED if len(present) == 1 else None,
        )

    def score(bits: int) -> float:
        return sum(weight[i] for i in present if bits >> i & 1)

    best = sorted(scored, key=lambda row: (-score(row[1]), -row[0]))[:RESCORED]
    # A bonus is known only in FINISH, where it is matched.
    chosen: list[tuple[int, float | None]] = [
        (seq, None if bonus else score(bits)) for seq, bits in best
    ]

    async def older(below: int, wanted: int, term: int, indexed: bool) -> list[Any]:
        """Older messages holding `term` (seq, score or None), newest first: through the
        index when it finds them cheaply, else further back by primary key, within bounds."""
        if indexed:
            seqs = await repo.newest_indexed(
                conn, tenant, sid, in_session(tenant, sid, forms[term]),
                checks.get(forms[term]), below, roles, wanted,
            )  # fmt: skip
            return [(seq, None) for seq in seqs]
        further = await repo.matches(
            conn, tenant, sid, forms, aligned(checks, forms), max(1, below - FURTHER),
            below - 1, roles, forms[term], wanted,
        )  # fmt: skip
        return [(seq, None if bonus else score(bits)) for seq, bits in further]

    if len(chosen) < limit and start > 1:  # too few recent ones
        indexed, held = counted[rarest].indexed, counted[rarest].newest
        wanted = RESCORED - len(chosen) if indexed else limit - len(chosen)
        if held is not None:  # read with the count
            chosen += [(seq, None) for seq in held if seq < start][:wanted]
        else:
            chosen += await older(start, wanted, rarest, indexed)
    rows = await finish(chosen)
    others = non_echoes(rows)
    if others is not None and start > 1:
        # The model searched for this before: its recent calls and answers quote the
        # query, make its terms look common in the window and take the places. Without
        # them its weightiest term (an identifier, most often) is rare: older holders.
        term = max(present, key=lambda i: weight[i])
        below = min(seq for seq, _ in chosen)
        more = await older(below, limit - others, term, index_reads(forms[term]))
        if more:
            chosen = chosen + more
            rows = await finish(chosen)
    return Ranked(await exact.above(rows, chosen), found)
