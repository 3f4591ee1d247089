"""The forms a query term is looked up by, read from their tsquery text: pure.

A term (app/index/lexemes.py `Term`) is matched by one form at a time: its one
whole lexeme, a prefix, a phrase (a CJK run's pairs), or an identifier's whole lexeme
or the AND of its parts. What a lookup of each costs differs (app/search/ranking.py):
one lexeme is a read of its own matches; a phrase's and an AND's cost follows their
rarest part; a prefix reads every lexeme it starts, in every session.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.index.lexemes import Term
from app.search.repository import Check

# A word matching fewer messages than this also matches as a prefix.
PREFIX_BELOW = 50

_LEXEME = re.compile(r"'(?:[^'\\]|\\.|'')*'")
_JOINS = ("<->", "&")


def index_reads(tsquery: str) -> bool:
    """Whether the index tells the form's matches without reading their vectors: one
    lexeme, or an AND of lexemes (no positions to check, no prefix to expand)."""
    return "<->" not in tsquery and ":*" not in tsquery


def wider(term: Term, exact_count: float) -> str | None:
    """The form to look a term up by when its exact form is rare, or None.

    A word also matches as a prefix (`datenbank` finds `Datenbanken`) when the word
    itself is rare (a common one has matches enough). An identifier of several parts
    has no narrower form: its exact form is already its widest."""
    if term.tsquery == term.exact:
        return None
    if term.tsquery == term.exact + ":*":
        return term.tsquery if exact_count < PREFIX_BELOW else None
    return term.tsquery if exact_count == 0 else None


def phrase_parts(tsquery: str) -> list[str]:
    """The lexemes of `tsquery` joined by `<->` or `&` (a phrase's or an identifier's
    parts), each quoted."""
    found = list(_LEXEME.finditer(tsquery))
    parts: dict[str, None] = {}
    for a, b in itertools.pairwise(found):
        if tsquery[a.end() : b.start()].strip() in _JOINS:
            parts[a.group()] = None
            parts[b.group()] = None
    # Not the marks every vector may carry (`~cut`: a CJK run's pairs found apart where
    # positions were cut): they tell nothing of what a lookup costs.
    return [p for p in parts if not p.startswith("'~")]


def sampled(terms: Sequence[Term], whole: bool, most: int) -> list[str]:
    """What the sample matches: each term's exact form (first, so bit i is term i), its
    full form when the sample is the `whole` session (to count it there), and the parts
    of any phrase or AND, to judge what a lookup would cost; at most `most`."""
    out = {t.exact: None for t in terms}
    if whole:
        out.update((t.tsquery, None) for t in terms)
    for t in terms:
        for form in (t.exact, t.tsquery):
            out.update((part, None) for part in phrase_parts(form))
    # What an identifier's confirmations would read: the messages holding its parts but
    # not its whole lexeme.
    out.update((t.rest, None) for t in terms if t.rest)
    return list(out)[:most]


def checks_of(terms: Sequence[Term]) -> dict[str, Check]:
    """form -> what confirms a match of it, for the forms that need it (an identifier's
    AND of parts: app/index/lexemes.py `Term.needle`)."""
    return {t.tsquery: (t.strict, t.needle, t.literal) for t in terms if t.needle}


def aligned(checks: Mapping[str, Check], forms: Sequence[str]) -> list[Check]:
    return [checks.get(f) for f in forms]


@dataclass(slots=True)
class Counted:
    form: str  # the tsquery the search uses for the term
    n: float  # its matches in the session, counted or estimated
    # Every message it matches, when counted (through the index, or in a sample that is
    # the whole session) and fewer than COMMON: the term may then pick candidates.
    seqs: list[int] | None = None
    # Whether the index was asked for it (so finds it at little cost).
    indexed: bool = False
    # A phrase or a prefix the index found common: its newest COMMON holders.
    newest: list[int] | None = None
    # The messages its exact form matched, when counted and a wider form replaced it.
    exact_seqs: list[int] | None = None


@dataclass(slots=True)
class Window:
    """The newest messages from `start` matched in memory: (seq, bit i for term i), for
    those matching any of the terms `complete` (so it holds every recent match of
    these)."""

    start: int
    complete: frozenset[int]
    forms: list[str]  # what bit i was matched with: term i's form then
    rows: list[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class Ranked:
    rows: list[Any]  # seq, role, body, score; best first
    present: list[tuple[Term, float]]  # the terms some message matches, with their counts


def non_echoes(rows: Sequence[Any]) -> int | None:
    """How many candidates are not the recall tool's own traffic, when some of the best
    rows are (they rank last, app/search/repository.py FINISH: every other candidate is
    then among them)."""
    echoes = sum(1 for r in rows if r["echo"])
    return len(rows) - echoes if echoes else None
