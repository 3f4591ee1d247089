"""What search indexes of a message and how a query matches it: pure, no database.

PostgreSQL's own parsers do not fit a conversation log: `to_tsvector('simple', …)`
keeps a run of Chinese characters as one lexeme (a word inside it is never
found), and pg_trgm cannot look up a word shorter than three characters, which
is most Chinese words. So contextd splits text itself, once, on append, and
hands PostgreSQL a ready `tsvector`:

- a word is lower-cased (`Größe` -> `größe`), no stemming, no stop words: a
  conversation mixes languages, and a stemmer of one language mangles the rest;
- an identifier (`src/app/models.py`, `snake_case_name`, `getUserName`,
  `HXDUBJ`) is indexed whole and as its parts at consecutive positions, so it
  is found whole, and by any run of its parts (`app/models.py`, `case_name`,
  `UserName`): through the index by the AND of the parts, wherever the message
  holds them, then checked against the message's text (`Term.needle`);
- a run of CJK characters (no spaces between words) is indexed as overlapping
  bigrams at consecutive positions, and a query's run is the phrase of its
  bigrams: any substring of two or more characters is found.

A query is split the same way into groups (one per word, identifier or CJK
run); `app/search/service.py` ranks messages by the rarer groups they match.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.index.searchable import searchable_text
from app.index.tsvector_budget import within_budget

# A chunk: word characters, joined by single punctuation marks that are part of
# identifiers and paths when a word character follows (`a.b`, `x/y`, `k-v`, `a:b`).
CHUNK = re.compile(r"\w+(?:[./\\\-:@#+~=]\w+)*")
# Parts of an identifier: letters-and-digits runs, split at camelCase boundaries.
_PART = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_CJK = re.compile(
    "["
    "\u2e80-\u2fdf"  # radicals
    "\u3040-\u30ff"  # hiragana, katakana
    "\u3100-\u312f\u31a0-\u31bf"  # bopomofo
    "\u3400-\u4dbf\u4e00-\u9fff"  # CJK unified ideographs (+ extension A)
    "\uac00-\ud7af"  # hangul syllables
    "\uf900-\ufaff"  # compatibility ideographs
    "\U00020000-\U0002fa1f"  # extensions B and later
    "]+"
)

# PostgreSQL limits: a lexeme under 2 KB, positions up to 16383, a tsvector under
# 1 MB. Longer "words" are blobs (base64, minified code): their parts still count.
MAX_LEXEME_CHARS = 100
MAX_POSITION = 16383


def _parts(chunk: str) -> list[str]:
    if chunk.isascii():
        # Every run is split at camelCase boundaries, and no match of _CAMEL crosses a
        # run's edge (it matches letters and digits only): one pass over the chunk.
        return [p.lower() for p in _CAMEL.findall(chunk)]
    out: list[str] = []
    for run in _PART.findall(chunk):
        # camelCase is an ASCII habit: other scripts' words stay whole.
        pieces = (_CAMEL.findall(run) or [run]) if run.isascii() else [run]
        out.extend(p.lower() for p in pieces)
    return out


def parts_of(chunk: str) -> list[str]:
    """The lower-cased parts of a word or identifier chunk, as search indexes them."""
    return _parts(chunk)


def _bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]


@dataclass(frozen=True, slots=True)
class Term:
    """One group of a query: an identifier, a word or a CJK run, matched as a unit."""

    text: str  # as the user wrote it (for snippets)
    tsquery: str  # PostgreSQL tsquery text, every lexeme quoted
    # The term's one whole lexeme, without the prefix `tsquery` also allows (the same
    # as `tsquery` when it allows none): a search tries it first, as it costs no scan
    # of other lexemes. An identifier of several parts has no narrower form to try:
    # its `tsquery` is what it is looked up by.
    exact: str = ""
    # An identifier of several parts (`web.chal.csaw.io`) is looked up by its whole
    # lexeme or the AND of its parts, wherever they are (a phrase needs positions, which
    # PostgreSQL cuts in long texts). A message matching the AND but not `strict` (the
    # whole lexeme, or the parts as a phrase) is a hit only where its vector's positions
    # were cut (POSITIONS_CUT) and its text holds `needle` (after a plain search for
    # `literal`, the longest run without a backslash). `rest`: the AND without the whole
    # lexeme, the messages to confirm. All empty for any other term.
    strict: str = ""
    needle: str = ""
    literal: str = ""
    rest: str = ""
    # A message matching this ranks above one matching only `tsquery`: the word
    # itself above a longer word it starts (`00017` above `000170`), the identifier
    # as a token of its own above one inside a longer token.
    best: str = ""

    @property
    def identifier(self) -> bool:
        """A path, a code, a snake_case or camelCase name, a number: what a recall asks
        for by name, and what plain words around it (in "what did the test say about
        X") must not outweigh."""
        return not self.text.isalpha() or (
            self.text.isascii() and self.text[1:] != self.text[1:].lower()
        )


def segments(text: str) -> list[tuple[str, str]]:
    """(kind, piece) in text order: "cjk" runs and "word" chunks."""
    out: list[tuple[str, str]] = []
    for chunk in CHUNK.finditer(text):
        s = chunk.group()
        pos = 0
        for cjk in _CJK.finditer(s):
            if cjk.start() > pos:
                out.extend(("word", m.group()) for m in CHUNK.finditer(s[pos : cjk.start()]))
            out.append(("cjk", cjk.group()))
            pos = cjk.end()
        if pos == 0:
            out.append(("word", s))
        elif pos < len(s):
            out.extend(("word", m.group()) for m in CHUNK.finditer(s[pos:]))
    return out


# A chunk's lexemes, each with its position after the chunk's first and its cost in
# the tsvector's bytes, and how many positions the chunk takes. Made once per distinct
# chunk: a conversation repeats its words, and splitting them is most of what making
# lexemes costs an append. Bounded: cleared when full, only short chunks kept.
_Split = tuple[tuple[tuple[str, int, int], ...], int]
_SPLITS: dict[str, _Split] = {}
_SPLITS_MAX = 50_000
_SPLIT_CACHED_CHARS = 64


def split_chunk(chunk: str) -> _Split:
    """A word or identifier chunk's lexemes, as above, without the cache."""
    parts = _parts(chunk)
    if not parts:
        return (), 0
    whole = chunk.lower()
    terms = [(whole, 0)] if len(parts) > 1 or parts[0] != whole else []
    terms.extend((part, i) for i, part in enumerate(parts))
    return tuple(
        [(lex, at, len(lex.encode()) + 8) for lex, at in terms if len(lex) <= MAX_LEXEME_CHARS]
    ), len(parts)


def _split_of(chunk: str) -> _Split:
    split = _SPLITS.get(chunk)
    if split is None:
        split = split_chunk(chunk)
        if len(chunk) <= _SPLIT_CACHED_CHARS:
            if len(_SPLITS) >= _SPLITS_MAX:
                _SPLITS.clear()
            _SPLITS[chunk] = split
    return split


def split_cjk(run: str) -> _Split:
    """A CJK run's lexemes (its bigrams, or the one character), as `split_chunk` gives them."""
    grams = _bigrams(run)
    return tuple((g, i, len(g.encode()) + 8) for i, g in enumerate(grams)), len(grams)


def lexemes(text: str) -> dict[str, list[int]]:
    """Lexeme -> positions (1-based, as PostgreSQL counts) of the text's words."""
    return lexemes_and_cut(text)[0]


# The lexeme a vector carries when PostgreSQL does not keep all of its positions (a
# lexeme past 256 of them, a text past position 16,383): there, the parts of an
# identifier found apart may still be in a row, and only the text can tell
# (app/search/repository.py). Like the session's key, it starts with `~`.
POSITIONS_CUT = "~cut"


def lexemes_and_cut(text: str) -> tuple[dict[str, list[int]], bool]:
    """`lexemes(text)`, and whether some positions are not kept (POSITIONS_CUT)."""
    text = unicodedata.normalize("NFC", text)
    many = False
    out: dict[str, list[int]] = {}
    costs: dict[str, int] = {}
    pos = 1
    if _CJK.search(text):
        splits = [
            split_cjk(piece) if kind == "cjk" else _split_of(piece)
            for kind, piece in segments(text)
        ]
    else:  # every chunk is a word: no need to look for runs inside each
        cached = _SPLITS.get
        splits = [cached(chunk) or _split_of(chunk) for chunk in CHUNK.findall(text)]
    for terms, width in splits:
        for lexeme, offset, cost in terms:
            where = out.get(lexeme)
            if where is None:
                out[lexeme] = where = []
                costs[lexeme] = cost
            # PostgreSQL keeps 256 positions per lexeme; more only cost the append.
            if len(where) < 256:
                at = pos + offset
                where.append(at if at < MAX_POSITION else MAX_POSITION)
            else:
                many = True
        pos += width
    kept = within_budget([(lex, costs[lex], len(where)) for lex, where in out.items()])
    if kept is not None:
        out = {lex: where[:k] for (lex, where), k in zip(out.items(), kept, strict=True) if k}
    return out, many or pos - 1 >= MAX_POSITION or kept is not None


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


_NUMBERS = [str(n) for n in range(MAX_POSITION + 1)]


def tsvector_literal(text: str) -> str:
    """The text's lexemes as a tsvector literal (`'a':1 'b':2,5`), for `::tsvector`."""
    return _literal(text, lexemes(text))


def _literal(text: str, found: dict[str, list[int]]) -> str:
    # A lexeme is a piece of the text, lower-cased: without quotes or backslashes in
    # the text, none needs escaping.
    plain = "'" not in text and "\\" not in text
    numbers = _NUMBERS
    out: list[str] = []
    for lex, pos in found.items():
        quoted = "'" + lex + "'" if plain else _quote(lex)
        if not pos:
            out.append(quoted)
        elif len(pos) == 1:
            out.append(quoted + ":" + numbers[pos[0]])
        else:
            # Positions grow along the text; only the clamp at MAX_POSITION repeats one.
            ordered = pos if pos[-1] < MAX_POSITION else sorted(set(pos))
            out.append(quoted + ":" + ",".join([numbers[p] for p in ordered]))
    return " ".join(out)


def session_lexeme(tenant: str, sid: str) -> str:
    """The lexeme every message of a session carries: a search asks for it with its
    terms, so the GIN index intersects them with the session's messages itself. It
    starts with `~`, which no word lexeme does. A hash, not the ids: bounded length;
    a collision only costs a recheck, since every query also filters on the key."""
    digest = hashlib.blake2b(f"{tenant}\0{sid}".encode(), digest_size=8).hexdigest()
    return "~" + digest


def in_session(tenant: str, sid: str, tsquery: str) -> str:
    """`tsquery` restricted to the session's messages, inside the index."""
    return f"{_quote(session_lexeme(tenant, sid))} & ({tsquery})"


def message_tsvector(body: Mapping[str, Any], session_key: str) -> str:
    """What the append stores in `messages.search` for this body: its lexemes, the
    session's key lexeme, and POSITIONS_CUT where positions are not all kept."""
    text = searchable_text(body)
    found, cut = lexemes_and_cut(text)
    words = _literal(text, found)
    key = _quote(session_key) + (" " + _quote(POSITIONS_CUT) if cut else "")
    return f"{key} {words}" if words else key


# A query's bounds: groups past these add nothing a user meant to ask.
MAX_QUERY_CHARS = 1000
MAX_TERMS = 24
# A run of CJK characters up to this long is matched as a phrase (a word, a name);
# a longer one pair by pair.
CJK_PHRASE_CHARS = 4
# A single word this short matches as itself only; longer ones also as a prefix
# (`datenbank` finds `Datenbanken`, `HXDU` finds `HXDUBJ`) when the word itself is
# rare (app/search/ranking.py).
PREFIX_MIN_CHARS = 3


def query_terms(q: str) -> list[Term]:
    """The query's groups, in order, without repeats; at most MAX_TERMS."""
    q = unicodedata.normalize("NFC", q)
    terms: list[Term] = []
    seen: set[str] = set()
    for kind, piece in segments(q):
        groups: list[Term] = []
        if kind == "cjk":
            grams = _bigrams(piece)
            if len(piece) > CJK_PHRASE_CHARS:
                # A sentence, or a name inside one: no spaces tell its words apart, so
                # each pair is a term of its own, and the rare ones (a name's) decide.
                groups.extend(Term(g, _quote(g), _quote(g)) for g in grams)
            elif len(grams) == 1 and len(piece) == 1:
                groups.append(Term(piece, _quote(piece) + ":*", _quote(piece) + ":*"))
            elif len(grams) == 1:
                groups.append(Term(piece, _quote(grams[0]), _quote(grams[0])))
            else:
                groups.append(_cjk_term(piece, grams))
        else:
            term = _word_term(piece)
            if term is None:
                continue
            groups.append(term)
        for term in groups:
            if term.tsquery in seen:
                continue
            seen.add(term.tsquery)
            terms.append(term)
            if len(terms) >= MAX_TERMS:
                return terms
    return terms


def _cjk_term(piece: str, grams: list[str]) -> Term:
    """A short CJK run (a word, a name): the phrase of its pairs. Where a vector's
    positions were cut (a long text: past position 16,383 every pair has the same one),
    the phrase cannot hold, so the pairs found anywhere in it are confirmed against the
    text (`Term.needle`), as an identifier's parts are."""
    quoted = [_quote(g) for g in grams]
    phrase = " <-> ".join(quoted)
    every = " & ".join(dict.fromkeys(quoted))
    tsq = f"({phrase}) | ({every} & {_quote(POSITIONS_CUT)})"
    needle = "".join(c if c.isalnum() else "\\" + c for c in piece)
    return Term(piece, tsq, tsq, phrase, needle, piece)


def _word_term(piece: str) -> Term | None:
    """The term of a word or identifier chunk of a query (None: no letters or digits)."""
    parts = [p for p in _parts(piece) if len(p) <= MAX_LEXEME_CHARS]
    if not parts:
        return None
    whole = piece.lower()
    fits = len(whole) <= MAX_LEXEME_CHARS
    if len(parts) == 1:
        one = _quote(parts[0])
        tsq = one + ":*" if len(parts[0]) >= PREFIX_MIN_CHARS else one
        exact = one
        if whole != parts[0] and fits:
            tsq = f"{_quote(whole)} | {tsq}"
            exact = _quote(whole)
        return Term(piece, tsq, exact, best=exact if tsq != exact else "")
    quoted = [_quote(p) for p in parts]
    every = "(" + " & ".join(dict.fromkeys(quoted)) + ")"
    phrase = "(" + " <-> ".join(quoted) + ")"
    tsq = f"{_quote(whole)} | {every}" if fits else every
    strict = f"{_quote(whole)} | {phrase}" if fits else phrase
    literal = max(piece.split("\\"), key=len)
    best = _quote(whole) if fits else ""
    rest = f"{every} & !{_quote(whole)}" if fits else every
    return Term(piece, tsq, tsq, strict, needle_pattern(piece), literal, rest, best)


# Where an identifier may start in the stored JSON text: its start, a character that is
# no letter or digit (`/`, `.`, `_`, a quote, a space), a JSON escape (`\n`: a new line
# in the text), or a part's edge inside a token (`getItem`, `mod12`); and where it may
# end: the same edges, seen from its last character.
_STARTS = (
    "(?:^|[^[:alnum:]]|\\\\[nrtbf]|[[:lower:]](?=[[:upper:]])"
    "|[[:alpha:]](?=[[:digit:]])|[[:digit:]](?=[[:alpha:]]))"
)
_ENDS = (
    "(?:$|(?=[^[:alnum:]])|(?<=[[:lower:]])(?=[[:upper:]])"
    "|(?<=[[:alpha:]])(?=[[:digit:]])|(?<=[[:digit:]])(?=[[:alpha:]]))"
)


def needle_pattern(piece: str) -> str:
    """A PostgreSQL regular expression (case aside) for `piece` as a run of whole parts of
    a message's text (`web.chal.csaw.io` in `http://web.chal.csaw.io:8000`, `getItem` in
    `localStorage.getItem(`, not `RX-12` in `RX-1200`): its string fields as they are,
    its tool calls as JSON (a backslash doubled, a new line written `\\n`)."""
    out: list[str] = []
    for c in piece:
        if c == "\\":  # as written, as JSON writes it (`\\\\`), or inside a JSON string
            out.append("\\\\+")
        elif c.lower() != c.upper():
            out.append(f"[{c.lower()}{c.upper()}]" if len(c.upper()) == 1 else c)
        elif c.isalnum():
            out.append(c)
        else:
            out.append("\\" + c)
    return _STARTS + "".join(out) + _ENDS
