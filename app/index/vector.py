"""An append's search vector, made fast, in the binary form PostgreSQL reads without parsing.

`app/index/lexemes.py` says what a message is indexed by; `lexemes()` there is
the reference. This makes the same vector on the append's hot path, where making
lexemes was the largest part of what the index cost an append, and PostgreSQL
parsing the vector's text form (`'a':1 'b':2,5`) the next:

- the text's UTF-8 is split in C (`bytes.translate`, `bytes.split`) at the ASCII
  characters no chunk can hold; each token (whole chunks and CJK runs, punctuation
  of other scripts included) is split the way `lexemes()` splits text, once per
  distinct token: a bounded cache keeps what it gave;
- positions are gathered per lexeme as the two bytes each takes in the binary form,
  and the vector is handed to asyncpg as PostgreSQL's binary tsvector (`tsvectorrecv`:
  each lexeme with its positions; PostgreSQL sorts them), registered as tsvector's
  codec in `app/db/tsvector.py`.

A text whose vector would pass `lexemes()`'s byte budget is cut here as `lexemes()`
cuts it (`tsvector_budget.within_budget`: positions go before lexemes), from the same lexemes in the
same order. tests/index/test_vector.py checks
both ways give the same vector, over the dataset and random text.

The two loops (`_grouped` over tokens, `_binary` over lexemes) run in C where the
package was built with a compiler (`app/index/_vector.c`, see setup.py): in
Python they were most of what the index cost an append. The Python twins below stay
the reference the C is tested against, and what runs where the module is missing.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from typing import Any, Protocol, cast

from app.index.lexemes import (
    CHUNK,
    MAX_LEXEME_CHARS,
    MAX_POSITION,
    POSITIONS_CUT,
    segments,
    split_chunk,
    split_cjk,
)
from app.index.searchable import searchable_text
from app.index.tsvector_budget import within_budget

# ASCII characters that no chunk can hold (neither word characters nor the joiners of
# `CHUNK`) become spaces; every other byte stays, those of multi-byte characters too.
_SPACES = bytes(b if b >= 0x80 or CHUNK.fullmatch("a" + chr(b) + "a") else 0x20 for b in range(256))
# PostgreSQL keeps this many positions per lexeme (MAXNUMPOS), as lexemes() does.
MAX_POSITIONS = 256
# Up to this many bytes of text, lexemes()'s byte budget cannot bind (its worst case,
# one-character parts such as `a1b2c3`, costs ~18 bytes of budget per byte of text);
# past it the vector's cost is added up, and a text over budget is cut to it.
_WITHIN_BUDGET_BYTES = 40_000
# A position as the binary form writes it (big-endian, weight bits 0); positions past
# MAX_POSITION are written as MAX_POSITION, as lexemes() writes them.
_MAX_AT = MAX_POSITION.to_bytes(2, "big")
_AT = [p.to_bytes(2, "big") for p in range(MAX_POSITION)] + [_MAX_AT]
# What the C loop may count positions up to: it writes any past MAX_POSITION as it.
_NO_LIMIT = 2**62

# A token's lexemes, each spelled as the binary form does (UTF-8 and a NUL), with its
# position after the token's first, and how many positions the token takes; a plain
# word (one lexeme, one position) as that lexeme alone. Bounded, cleared when full.
_Terms = tuple[tuple[tuple[bytes, int], ...], int]
_Split = bytes | _Terms
_TOKENS: dict[bytes, _Split] = {}
_TOKENS_MAX = 50_000
_TOKEN_CACHED_BYTES = 64


class _Loops(Protocol):
    """app/index/_vector.c (its stub: _vector.pyi)."""

    def grouped(
        self,
        data: bytes,
        spaces: bytes,
        split_token: Callable[[bytes], object],
        limit: int,
        max_position: int,
        cached_bytes: int,
        max_tokens: int,
    ) -> tuple[dict[bytes, bytes | bytearray], int, int] | None: ...

    def binary(self, vector: dict[bytes, bytes | bytearray], max_position: int) -> bytes: ...


def _built() -> _Loops | None:
    try:
        from app.index import _vector
    except ImportError:  # installed where no C compiler was found: the loops in Python
        return None
    return _vector


_compiled = _built()


def _token(token: bytes) -> _Split:
    found = _split_token(token)
    if len(token) <= _TOKEN_CACHED_BYTES:
        if len(_TOKENS) >= _TOKENS_MAX:
            _TOKENS.clear()
        _TOKENS[token] = found
    return found


def _split_token(token: bytes) -> _Split:
    if token.isalnum() and len(token) <= MAX_LEXEME_CHARS and _one_word(token):
        found: _Split = token.lower() + b"\0"  # most new tokens: a word, a number
    else:
        terms: list[tuple[bytes, int]] = []
        width = 0
        if token.isascii():  # no CJK run to look for
            pieces = [("word", chunk) for chunk in CHUNK.findall(token.decode())]
        else:
            pieces = segments(token.decode("utf-8", "surrogatepass"))
        for kind, piece in pieces:
            split, n = split_cjk(piece) if kind == "cjk" else split_chunk(piece)
            terms.extend((lexeme.encode() + b"\0", width + at) for lexeme, at, _ in split)
            width += n
        found = terms[0][0] if width == 1 and len(terms) == 1 else (tuple(terms), width)
    return found


def _one_word(token: bytes) -> bool:
    """Whether an ASCII token of letters and digits is one part (`_parts`): a number, or
    letters in one case (`word`, `WORD`, `Word`), which camelCase does not split."""
    return token.isdigit() or (
        token.isalpha() and (token.islower() or token.isupper() or token.istitle())
    )


def _grouped(data: bytes) -> tuple[dict[bytes, bytes | bytearray], int]:
    """Each lexeme of the text's UTF-8 with its positions (two bytes each, in text
    order), and the position after the last. A lexeme seen once (most) keeps the
    shared bytes of its one position; a second makes them a bytearray of its own."""
    out: dict[bytes, bytes | bytearray] = {}
    get = out.get
    cached = _TOKENS.get
    at = _AT
    last = MAX_POSITION
    pos = 1
    for token in data.translate(_SPACES).split():
        split = cached(token)
        if split is None:
            split = _token(token)
        if type(split) is bytes:
            where = get(split)
            here = at[pos if pos < last else last]
            if where is None:
                out[split] = here
            elif type(where) is bytearray:
                where += here
            else:
                out[split] = bytearray(where + here)
            pos += 1
        else:
            terms, width = cast(_Terms, split)
            for lexeme, offset in terms:
                where = get(lexeme)
                p = pos + offset
                here = at[p if p < last else last]
                if where is None:
                    out[lexeme] = here
                elif type(where) is bytearray:
                    where += here
                else:
                    out[lexeme] = bytearray(where + here)
            pos += width
    return out, pos


def _lexemes_of(data: bytes) -> tuple[dict[bytes, bytes | bytearray], int, int]:
    """`_grouped`, in C where it was built, and the most positions a lexeme has."""
    if _compiled is not None:
        found = _compiled.grouped(
            data, _SPACES, _split_token, _NO_LIMIT, MAX_POSITION, _TOKEN_CACHED_BYTES, _TOKENS_MAX
        )
        if found is not None:  # None: another thread's call runs (it waits on Python)
            return found
    vector, end = _grouped(data)
    return vector, end, max(map(len, vector.values()), default=0) >> 1


def _binary(vector: dict[bytes, bytes | bytearray], bound: bool) -> bytes:
    """The binary tsvector of the lexemes and positions; `bound`: some are past what
    PostgreSQL keeps, and each keeps its first MAX_POSITIONS, MAX_POSITION once."""
    if bound:
        vector = {lexeme: _bounded(where) for lexeme, where in vector.items()}
    if _compiled is None:
        return _joined(vector)
    return _compiled.binary(vector, MAX_POSITION)


def _joined(vector: dict[bytes, bytes | bytearray]) -> bytes:
    """The binary tsvector: the lexeme count, then each lexeme with its NUL, its position
    count and its positions (already bounded: the first MAX_POSITIONS of them,
    MAX_POSITION once where the text reached it). In text order: PostgreSQL sorts the
    lexemes itself (tsvectorrecv), in C, for less than sorting them here costs."""
    at = _AT
    parts: list[bytes | bytearray] = [len(vector).to_bytes(4, "big")]
    append = parts.append
    for lexeme, where in vector.items():
        append(lexeme)
        append(at[len(where) >> 1])
        append(where)
    return b"".join(parts)


def _bounded(where: bytes | bytearray) -> bytes | bytearray:
    """The first MAX_POSITIONS positions, MAX_POSITION (which clamped ones repeat) once."""
    where = where[: 2 * MAX_POSITIONS]
    if where[-2:] == _MAX_AT:
        # Big-endian positions up to MAX_POSITION: 0x3FFF never straddles two.
        where = where[: where.find(_MAX_AT) + 2]
    return where


_CUT = POSITIONS_CUT.encode() + b"\0"


def text_vector(text: str, session_key: str) -> bytes:
    """The binary tsvector of `text`'s lexemes (as `lexemes()` makes them) and the
    session's key lexeme (positionless)."""
    # A lone surrogate (refused in stored messages) separates chunks, as lexemes() reads it.
    data = unicodedata.normalize("NFC", text).encode("utf-8", "surrogatepass")
    vector, end, most = _lexemes_of(data)
    bound = end - 1 >= MAX_POSITION or most > MAX_POSITIONS
    cut = bound
    if len(data) > _WITHIN_BUDGET_BYTES:
        # A lexeme's cost as lexemes() counts it: its UTF-8 and NUL, and 7.
        kept = within_budget(
            [
                (
                    lex[:-1].decode("utf-8", "surrogatepass"),
                    len(lex) + 7,
                    min(len(where) >> 1, MAX_POSITIONS),
                )
                for lex, where in vector.items()
            ]
        )
        if kept is not None:
            pairs = zip(vector.items(), kept, strict=True)
            vector = {lex: where[: 2 * k] for (lex, where), k in pairs if k}
            cut = True
    vector[session_key.encode() + b"\0"] = b""
    if cut:
        vector[_CUT] = b""
    return _binary(vector, bound)


def message_vector(body: Mapping[str, Any], session_key: str) -> bytes:
    """What the append stores in `messages.search` for this body (binary tsvector), and
    what app/index/unindexed.py gives older rows: `lexemes.message_tsvector`'s vector."""
    return text_vector(searchable_text(body), session_key)
