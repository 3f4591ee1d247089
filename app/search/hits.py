"""What a search hit shows and what it is checked for: the query's literal texts, where
a term occurs in a message (its snippet and line). Pure, no database; the lexemes and
query terms are app/index/lexemes.py's."""

from __future__ import annotations

import json
import re

from app.index.lexemes import Term, parts_of

SNIPPET_CHARS = 160
_EDGE = "\"'`.,;:!?()[]{}<>"
_IDENTISH = re.compile(r"[\d_./\\:=\-\[\](){}#@]|[a-z][A-Z]")


MAX_LITERALS = 24


def _cased(q: str) -> bool:
    """A code whose case is part of it (`STDOUT`, `XFAIL`, `getItem`): one word with a
    capital after its first letter. Searched for as written, it ranks the messages that
    hold it so above those holding the word in other cases (`stdout`)."""
    return q.isalpha() and q[1:] != q[1:].lower()


def literals(q: str) -> list[tuple[str, int]]:
    """Exact texts of the query to look for in the stored JSON of the best candidates,
    each with its length in tokens: every run of up to five tokens that holds code
    (a path, a call, an operator), so "what did the test say about pytest -rsx a.py"
    finds the message with that very command first. JSON-escaped as the stored body is
    (`"` as `\\"`), case kept; the whole query first when it is short code."""
    q = q.strip()
    tokens = [t for t in q.split() if t]
    out: dict[str, int] = {}
    if len(q) >= 3 and (_IDENTISH.search(q) or _cased(q)) and len(tokens) <= 4:
        out[q] = len(tokens)
    for n in range(min(5, len(tokens)), 0, -1):
        for i in range(len(tokens) - n + 1):
            run = tokens[i : i + n]
            if not any(_IDENTISH.search(t) for t in run):
                continue
            text = " ".join(run)
            # A run's ends may carry the question's own punctuation ("…about x.py?").
            text = text.rstrip("?!,;") if i + n == len(tokens) else text
            # One token also without the quotes or brackets around it (`"x.py",`), and
            # as written, since they may be its code (`['CVS']`, `input()`).
            for t in (text, text.strip(_EDGE)) if n == 1 else (text,):
                if len(t) >= 3:
                    out.setdefault(t, n)
    escaped: dict[str, int] = {}
    for text, n in out.items():
        e = json.dumps(text, ensure_ascii=False)[1:-1]
        if 3 <= len(e) <= 500:
            escaped.setdefault(e, n)
    return list(escaped.items())[:MAX_LITERALS]


def match_at(text: str, terms: list[Term]) -> tuple[int, str]:
    """Where the first of `terms` (the most selective first) occurs in `text`, as
    written or by its first part: (index, what was found), or (-1, "")."""
    lower = text.lower()
    for term in terms:
        needle = term.text.lower()
        at = lower.find(needle)
        if at < 0:
            parts = parts_of(term.text)
            if parts:
                needle = parts[0]
                at = lower.find(needle)
        if at >= 0:
            return at, needle
    return -1, ""


def line_of(text: str, at: int) -> int | None:
    """The 1-based line of index `at` (None when nothing was found)."""
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def snippet(text: str, terms: list[Term], width: int = SNIPPET_CHARS) -> str:
    """About `width` characters of `text` around the first place one of `terms` (the
    most selective first) occurs; the text's start when none is found literally."""
    at, found = match_at(text, terms)
    if at < 0:
        head = text[:width]
        return _flat(head) + ("…" if len(text) > width else "")
    start = max(0, at - (width - len(found)) // 2)
    end = min(len(text), start + width)
    start = max(0, min(start, end - width))
    piece = text[start:end]
    return ("…" if start > 0 else "") + _flat(piece) + ("…" if end < len(text) else "")


def _flat(s: str) -> str:
    return " ".join(s.split())
