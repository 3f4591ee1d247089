"""What an append indexes of a message (app/messages/lexemes.py): words, identifiers and
their parts, CJK pairs, at the positions phrase queries rely on."""

from __future__ import annotations

from app.messages import lexemes as text
from app.messages.lexemes import lexemes, tsvector_literal


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
