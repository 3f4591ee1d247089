"""What an append indexes of a message (app/index/lexemes.py): words, identifiers and
their parts, CJK pairs, at the positions phrase queries rely on."""

from __future__ import annotations

from app.index import lexemes as text
from app.index.lexemes import lexemes, tsvector_literal
from app.search import hits


def test_words_are_lower_cased_one_position_each() -> None:
    assert lexemes("Hello hello HXDUBJ Größe 42") == {
        "hello": [1, 2],
        "hxdubj": [3],
        "größe": [4],
        "42": [5],
    }


def test_identifiers_are_whole_and_parts_at_consecutive_positions() -> None:
    assert lexemes("see src/app/models.py then getUserName E4711") == {
        "see": [1],
        "src/app/models.py": [2],
        "src": [2],
        "app": [3],
        "models": [4],
        "py": [5],
        "then": [6],
        "getusername": [7],
        "get": [7],
        "user": [8],
        "name": [9],
        "e4711": [10],
        "e": [10],
        "4711": [11],
    }


def test_cjk_runs_are_overlapping_pairs() -> None:
    assert lexemes("数据库连接 ok") == {
        "数据": [1],
        "据库": [2],
        "库连": [3],
        "连接": [4],
        "ok": [5],
    }


def test_a_repeated_chunk_gets_the_same_lexemes_cached_or_not() -> None:
    # The second message's chunks come from the cache the first one filled; a cache
    # cleared when full must give the same again.
    first = lexemes("parse_batch failed in parse_batch")
    assert first == {
        "parse_batch": [1, 5],
        "parse": [1, 5],
        "batch": [2, 6],
        "failed": [3],
        "in": [4],
    }
    assert lexemes("parse_batch failed in parse_batch") == first
    text._SPLITS.clear()
    assert lexemes("parse_batch failed in parse_batch") == first


def test_positions_past_the_bound_are_clamped_and_written_once() -> None:
    many = " ".join(["w"] * (text.MAX_POSITION + 10)) + " last"
    assert lexemes(many)["last"] == [text.MAX_POSITION]
    assert tsvector_literal(many).endswith(f"'last':{text.MAX_POSITION}")
    # Quotes and backslashes are escaped for PostgreSQL's tsvector input.
    assert tsvector_literal("it's a\\b") == "'it':1 's':2 'a\\\\b':3 'a':3 'b':4"


def test_a_query_term_has_an_exact_form_beside_its_wider_one() -> None:
    word, ident, short = text.query_terms("datenbank app/models.py ab")
    assert (word.tsquery, word.exact) == ("'datenbank':*", "'datenbank'")
    # An identifier of several parts is looked up whole or by the AND of its parts
    # (no positions: PostgreSQL keeps 256 per lexeme), confirmed by its phrase or text.
    assert ident.tsquery == ident.exact == "'app/models.py' | ('app' & 'models' & 'py')"
    assert ident.strict == "'app/models.py' | ('app' <-> 'models' <-> 'py')"
    assert ident.best == "'app/models.py'"  # a token of its own ranks first
    assert r"[aA][pP][pP]\/[mM][oO][dD][eE][lL][sS]\.[pP][yY]" in ident.needle
    assert short.tsquery == short.exact == "'ab'"
    assert (word.best, short.best) == ("'datenbank'", "")


def test_a_long_cjk_run_is_matched_pair_by_pair() -> None:
    # A word or a name alone: one phrase.
    [name] = text.query_terms("连接失败")
    assert name.strict == "'连接' <-> '接失' <-> '失败'"
    # Or its pairs anywhere in a vector whose positions were cut, confirmed by the text.
    assert (
        name.tsquery
        == name.exact
        == ("('连接' <-> '接失' <-> '失败') | ('连接' & '接失' & '失败' & '~cut')")
    )
    assert (name.needle, name.literal) == ("连接失败", "连接失败")
    # A sentence naming something: each pair a term, so the name's rare pairs decide.
    terms = text.query_terms("之前提到的故宫是什么？")
    assert [t.text for t in terms] == [
        "之前",
        "前提",
        "提到",
        "到的",
        "的故",
        "故宫",
        "宫是",
        "是什",
        "什么",
    ]
    assert all(t.tsquery == t.exact == f"'{t.text}'" for t in terms)


def test_a_literal_keeps_the_brackets_of_code() -> None:
    found = dict(hits.literals("what did the output say about ['CVS']?"))
    assert found["['CVS']"] == 1 and found["CVS"] == 1
    assert "input()" in dict(hits.literals("what about input()?"))
    # Quotes around a path are not part of it.
    assert "x.py" in dict(hits.literals('see "x.py", then'))
