"""The append's search vector (app/messages/vector.py) holds exactly the lexemes and
positions `lexemes()` makes (app/messages/lexemes.py), in PostgreSQL's binary form."""

from __future__ import annotations

import random

import pytest

from app.db import tsvector_text
from app.messages import lexemes as text
from app.messages import vector
from app.messages.lexemes import MAX_POSITION, lexemes, searchable_text
from tests.unit.compaction_helpers import dataset_sessions

KEY = "~0123456789abcdef"


def decoded(data: bytes) -> dict[str, list[int]]:
    """A binary tsvector as lexeme -> positions, checking the form tsvectorrecv reads:
    lexemes distinct (it sorts them), positions rising, nothing left over."""
    count = int.from_bytes(data[:4], "big")
    at = 4
    out: dict[str, list[int]] = {}
    for _ in range(count):
        end = data.index(b"\0", at)
        lexeme = data[at:end].decode()
        n = int.from_bytes(data[end + 1 : end + 3], "big")
        at = end + 3
        positions = [int.from_bytes(data[i : i + 2], "big") for i in range(at, at + 2 * n, 2)]
        at += 2 * n
        assert positions == sorted(set(positions)), lexeme
        assert all(1 <= p <= MAX_POSITION for p in positions), lexeme
        assert lexeme not in out, lexeme
        out[lexeme] = positions
    assert at == len(data)
    return out


def expected(s: str) -> dict[str, list[int]]:
    """lexemes() as PostgreSQL stores it: positions clamped at MAX_POSITION kept once,
    and the session's key lexeme without positions."""
    out = {lex: sorted(set(positions)) for lex, positions in lexemes(s).items()}
    out[KEY] = []
    return out


def test_the_vector_holds_what_lexemes_makes() -> None:
    s = "see src/app/models.py then getUserName E4711, it's a\\b; 数据库连接 ok Größe"
    assert decoded(vector.text_vector(s, KEY)) == expected(s)
    assert decoded(vector.text_vector("", KEY)) == {KEY: []}


def test_the_same_vector_for_every_message_of_the_dataset() -> None:
    messages = [m for s in dataset_sessions() for m in s["messages"]]
    for m in messages:
        s = searchable_text(m)
        assert decoded(vector.message_vector(m, KEY)) == expected(s), s[:200]


def test_the_same_vector_for_random_text_of_every_kind_of_character() -> None:
    # Word characters, every joiner, quotes and backslashes, CJK, hangul, kana,
    # combining marks (NFC), case that lengthens when lowered, non-ASCII spaces and
    # punctuation, an emoji, a lone surrogate.
    alphabet = [
        *"aZ_0./\\-:@#+~= \t\n'\"()[]é数据库连接ÀİßΣσς",
        *"\u0301\u00a0\u3000—’“한국어ｱ😀\u200b\ud800",
    ]
    rng = random.Random(7)
    for _ in range(5000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        assert decoded(vector.text_vector(s, KEY)) == expected(s), repr(s)


@pytest.mark.parametrize(
    "s",
    [
        # Positions past MAX_POSITION, written once as MAX_POSITION.
        " ".join(["w"] * (MAX_POSITION + 10)) + " last",
        # A lexeme past the 256 positions PostgreSQL keeps.
        "a1b2 " * 9000,
        # Past MAX_INDEXED_CHARS: only the start is indexed.
        "x" * 300_000,
        # Past the vector's byte budget: lexemes() leaves the rest out, in its order.
        " ".join(f"w{i}" for i in range(30_000)),
        "".join(chr(0x4E00 + (i * 7919) % 20_000) for i in range(200_000)),
    ],
)
def test_the_same_vector_past_every_bound(s: str) -> None:
    assert decoded(vector.text_vector(s, KEY)) == expected(s)


def test_a_repeated_token_gets_the_same_lexemes_cached_or_not() -> None:
    first = vector.text_vector("parse_batch failed in parse_batch", KEY)
    assert vector.text_vector("parse_batch failed in parse_batch", KEY) == first
    vector._TOKENS.clear()
    text._SPLITS.clear()
    assert vector.text_vector("parse_batch failed in parse_batch", KEY) == first


def test_a_vector_reads_back_as_postgresqls_text() -> None:
    # app/db.py hands a tsvector PostgreSQL sends (tsvectorsend: lexemes sorted) as
    # tsvectorout writes it: quotes and backslashes doubled, weights after positions.
    sent = (
        (3).to_bytes(4, "big")
        + b"a\\b\0" + (1).to_bytes(2, "big") + (3).to_bytes(2, "big")
        + b"o'k\0" + (2).to_bytes(2, "big") + (0xC000 | 3).to_bytes(2, "big") + (7).to_bytes(2, "big")
        + b"~key\0" + (0).to_bytes(2, "big")
    )  # fmt: skip
    assert tsvector_text(sent) == "'a\\\\b':3 'o''k':3A,7 '~key'"
