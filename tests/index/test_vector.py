"""The append's search vector (app/index/vector.py) holds exactly the lexemes and
positions `lexemes()` makes (app/index/lexemes.py), in PostgreSQL's binary form,
made by its loops in C (app/index/_vector.c) and, where that is not built, in
Python: the tests of the vector run both ways, and the two give the same bytes."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

import pytest

from app.db.tsvector import tsvector_text
from app.index import lexemes as text
from app.index import vector
from app.index.lexemes import (
    MAX_POSITION,
    POSITIONS_CUT,
    lexemes_and_cut,
)
from app.index.searchable import searchable_text
from tests.support.compaction_builders import dataset_sessions

KEY = "~0123456789abcdef"
COMPILED = vector._compiled


@pytest.fixture(params=["C", "Python"])
def made_in(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Each test of the vector runs with the C loops and with their Python twins."""
    if request.param == "Python":
        monkeypatch.setattr(vector, "_compiled", None)
    yield request.param


def test_the_c_loops_are_built() -> None:
    # setup.py builds them where a C compiler is found; the machines this is made and
    # tested on have one, so a missing module means a broken build, not a choice.
    assert COMPILED is not None, "app.index._vector was not built: see setup.py"


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
    found, cut = lexemes_and_cut(s)
    out = {lex: sorted(set(positions)) for lex, positions in found.items()}
    out[KEY] = []
    if cut:  # positions not all kept: search confirms some matches by the text
        out[POSITIONS_CUT] = []
    return out


def test_the_vector_holds_what_lexemes_makes(made_in: str) -> None:
    s = "see src/app/models.py then getUserName E4711, it's a\\b; 数据库连接 ok Größe"
    assert decoded(vector.text_vector(s, KEY)) == expected(s)
    assert decoded(vector.text_vector("", KEY)) == {KEY: []}


def test_the_same_vector_for_every_message_of_the_dataset(made_in: str) -> None:
    messages = [m for s in dataset_sessions() for m in s["messages"]]
    for m in messages:
        s = searchable_text(m)
        assert decoded(vector.message_vector(m, KEY)) == expected(s), s[:200]


def test_the_same_vector_for_random_text_of_every_kind_of_character(made_in: str) -> None:
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
        # Past 200,000 characters (the cut there was): the whole text is indexed.
        "x" * 300_000,
        # Past the vector's byte budget: lexemes() leaves the rest out, in its order.
        " ".join(f"w{i}" for i in range(30_000)),
        "".join(chr(0x4E00 + (i * 7919) % 20_000) for i in range(200_000)),
    ],
)
def test_the_same_vector_past_every_bound(s: str, made_in: str) -> None:
    assert decoded(vector.text_vector(s, KEY)) == expected(s)


def test_a_text_past_200000_characters_is_indexed_to_its_end(made_in: str) -> None:
    # SPEC §3 "Recall": anywhere in a tool output of any length. Until the cut went, text
    # past a message's first 200,000 characters was in no vector.
    s = "src/pkg/mod.py:1:1: W0001 unused import\n" * 8_000 + "src/app/special_handler.py:12:4"
    assert len(s) > 300_000
    got = decoded(vector.text_vector(s, KEY))
    assert got == expected(s)
    assert {"src/app/special_handler.py:12:4", "handler", POSITIONS_CUT} <= got.keys()


def _word(i: int) -> str:
    return "".join(chr(97 + i // 26**k % 26) for k in range(6))


def test_past_the_byte_budget_positions_go_before_lexemes(made_in: str) -> None:
    # 45,000 distinct words, each three times: every lexeme with one position fits the
    # budget, all their positions do not. Each word is kept, some positions are not.
    words = [_word(i) for i in range(45_000)]
    s = " ".join(words * 3)
    got = decoded(vector.text_vector(s, KEY))
    assert got == expected(s)
    assert set(words) <= got.keys() and POSITIONS_CUT in got
    assert any(len(got[w]) < 3 for w in words) and all(got[w] for w in words)


def test_past_the_byte_budget_words_go_before_the_identifiers_they_make(made_in: str) -> None:
    # A megabyte of lint output: one new `src/pkg/modN.py:N:1:` lexeme per line passes
    # the budget; the words of the last line (its identifier's parts) are kept, and the
    # search confirms the identifier against the text (POSITIONS_CUT).
    lines = [f"src/pkg/mod{i}.py:{i}:1: W0001 unused import os" for i in range(20_000)]
    s = "\n".join([*lines, "src/app/special_handler.py:12:4: E1101 no member"])
    got = decoded(vector.text_vector(s, KEY))
    assert got == expected(s)
    assert {"special", "handler", "1101", POSITIONS_CUT} <= got.keys()
    assert "src/pkg/mod19999.py:19999:1" not in got


def test_a_repeated_token_gets_the_same_lexemes_cached_or_not(made_in: str) -> None:
    first = vector.text_vector("parse_batch failed in parse_batch", KEY)
    assert vector.text_vector("parse_batch failed in parse_batch", KEY) == first
    vector._TOKENS.clear()
    text._SPLITS.clear()
    assert vector.text_vector("parse_batch failed in parse_batch", KEY) == first


def test_a_vector_reads_back_as_postgresqls_text() -> None:
    # app/db/tsvector.py hands a tsvector PostgreSQL sends (tsvectorsend: lexemes sorted) as
    # tsvectorout writes it: quotes and backslashes doubled, weights after positions.
    sent = (
        (3).to_bytes(4, "big")
        + b"a\\b\0" + (1).to_bytes(2, "big") + (3).to_bytes(2, "big")
        + b"o'k\0" + (2).to_bytes(2, "big") + (0xC000 | 3).to_bytes(2, "big") + (7).to_bytes(2, "big")
        + b"~key\0" + (0).to_bytes(2, "big")
    )  # fmt: skip
    assert tsvector_text(sent) == "'a\\\\b':3 'o''k':3A,7 '~key'"


def both_ways(s: str, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, bytes]:
    compiled = vector.text_vector(s, KEY)
    with monkeypatch.context() as m:
        m.setattr(vector, "_compiled", None)
        return compiled, vector.text_vector(s, KEY)


def test_c_and_python_give_the_same_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Byte for byte, lexemes in the same order: not only the same vector once sorted.
    texts = [searchable_text(m) for s in dataset_sessions() for m in s["messages"]]
    rng = random.Random(11)
    alphabet = [*"aZ_0./-:= \n数据库连接é한국어", "ABC", "getUser", "x" * 70, "数" * 40]
    texts += [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200))) for _ in range(2000)
    ]
    texts += [" ".join(["w"] * (MAX_POSITION + 10)), "a1b2 " * 9000, "e\u0301" * 100_000]
    for s in texts:
        compiled, python = both_ways(s, monkeypatch)
        assert compiled == python, s[:200]


def grouped(
    data: bytes,
    max_tokens: int = vector._TOKENS_MAX,
    split: Callable[[bytes], object] = vector._split_token,
) -> tuple[dict[bytes, bytes | bytearray], int, int] | None:
    assert COMPILED is not None
    return COMPILED.grouped(
        data,
        vector._SPACES,
        split,
        len(vector._AT),
        MAX_POSITION,
        vector._TOKEN_CACHED_BYTES,
        max_tokens,
    )


def test_the_c_cache_emptied_between_calls_gives_the_same_lexemes() -> None:
    # A cache of 3 tokens is emptied at the start of nearly every call, and the
    # tokens of one call outnumber it: what a call gives does not depend on it.
    texts = [
        b"alpha beta gamma delta alpha",
        b"getUserName x.y.z 12345 alpha",
        "数据库连接 ok".encode(),
    ]
    want = [grouped(t) for t in texts]
    for _ in range(3):
        assert [grouped(t, max_tokens=3) for t in texts] == want
    assert want[0] is not None and want[0][0][b"alpha\0"] == b"\0\1\0\5"


def test_a_c_call_entered_during_another_leaves_it_to_python() -> None:
    inner: list[object] = []

    def split(token: bytes) -> object:
        inner.append(grouped(b"inner words"))  # another thread's call, as it were
        return vector._split_token(token)

    outer = grouped(b"one_new_token_" + str(random.random()).encode(), split=split)
    assert inner and all(found is None for found in inner)
    assert outer is not None and outer[1] > 1
    assert grouped(b"inner words") is not None  # the module is free again


def test_a_failing_or_malformed_split_raises_and_leaves_the_c_loops_usable() -> None:
    assert COMPILED is not None

    def giving(split: object) -> Callable[[bytes], object]:
        def made(token: bytes) -> object:
            if isinstance(split, Exception):
                raise split
            return split

        return made

    with pytest.raises(ValueError, match="no split"):
        grouped(
            b"never_seen_" + str(random.random()).encode(), split=giving(ValueError("no split"))
        )
    for bad in ["text", (("a\0", 0), 1), ((("a\0",),), 1), (((1, 0),), 1), ((), "1")]:
        with pytest.raises(TypeError):
            grouped(b"never_seen_" + str(random.random()).encode(), split=giving(bad))
    found = grouped(b"still works")
    assert found is not None and found[0] == {b"still\0": b"\0\1", b"works\0": b"\0\2"}
    with pytest.raises(TypeError):
        COMPILED.grouped(b"x", b"short", vector._split_token, 1, 1, 1, 1)
    with pytest.raises(TypeError):
        COMPILED.binary({b"a\0": "not bytes"}, MAX_POSITION)  # type: ignore[dict-item]
