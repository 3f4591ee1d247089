"""A tsvector's byte budget: which lexemes and positions a long text's vector keeps."""

from __future__ import annotations

# PostgreSQL's tsvector holds under 1 MB: each lexeme costs its UTF-8 bytes and a few
# more, each position 2 bytes. A message's whole text is indexed, however long (a
# search finds what a tool output says in its last line); past this budget positions
# are left out before lexemes (`within_budget`), since a lexeme without the position
# is still found (the text confirms where positions were cut), one left out is not.
MAX_TSVECTOR_BYTES = 800_000


def within_budget(lexemes: list[tuple[str, int, int]]) -> list[int] | None:
    """How many positions each lexeme keeps (0: left out) when the vector would pass
    MAX_TSVECTOR_BYTES, or None when it fits. `lexemes`: in the order the text first
    holds them, each (the lexeme, its cost, its positions up to 256); each position
    costs 2 more.

    Lexemes before positions, and words before the identifiers they make up: every
    word (letters or digits only: `special`, `handler`, a CJK pair) with its first
    position while room lasts (in text order: a later one too large for what is left is
    passed over), then every longer lexeme (`special_handler.py:12:4`, one per line of a
    log, each new) likewise, then each one's further positions, lexeme by lexeme, with
    what remains. An identifier whose whole lexeme is left out is still found by its
    parts, confirmed against the text (the vector is marked POSITIONS_CUT)."""
    if sum(cost + 2 * n for _, cost, n in lexemes) <= MAX_TSVECTOR_BYTES:
        return None
    room = MAX_TSVECTOR_BYTES
    kept = [0] * len(lexemes)
    for words in (True, False):
        for i, (lexeme, cost, _) in enumerate(lexemes):
            if (lexeme.isalpha() or lexeme.isdigit()) == words and cost + 2 <= room:
                room -= cost + 2
                kept[i] = 1
    for i, (_, _, n) in enumerate(lexemes):
        if kept[i] and n > 1 and room >= 2:
            more = min(n - 1, room // 2)
            kept[i] += more
            room -= 2 * more
    return kept
