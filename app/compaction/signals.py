"""Text signals shared by candidates, summaries and checks.

Everything here is a regex or a count: deterministic, language-aware (English
and Chinese), and cheap enough to run over a whole compaction range.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from app.core import words

Tag = str  # one of TAGS

TAGS = ("constraint", "preference", "decision", "todo", "identifier")


def _pattern(name: str) -> re.Pattern[str]:
    """Whole Latin phrases (longest first) or Chinese terms anywhere, from `app/core/words.py`."""
    latin = "|".join(re.escape(w) for w in sorted(words.LATIN[name], key=len, reverse=True))
    return re.compile(rf"\b(?:{latin})\b|" + "|".join(words.CJK[name]), re.IGNORECASE)


# The word lists live in `app/core/words.py`, shared with context scoring.
_CONSTRAINT = _pattern("constraint")
_PREFERENCE = _pattern("preference")
_DECISION = _pattern("decision")
_TODO = _pattern("todo")

# \d as the patterns' \d: any Unicode digit.
_DIGIT = re.compile(r"\d")


def _having(*needles: str) -> Callable[[str], bool]:
    return lambda text: any(n in text for n in needles)


def _digit(text: str) -> bool:
    return _DIGIT.search(text) is not None


def _upper(text: str) -> bool:
    return not text.islower()  # True for any text with an upper-case letter


_EXTENSIONS = words.extensions_pattern()
_UNITS = r"(?:ms|s|sec|min|h|kb|mb|gb|tb|%|px|usd|eur|元|块|小时|分钟|天|个|人|岁|公里|米)"


class _Kind(NamedTuple):
    """One kind of identifier: its pattern, what a whole text must contain for it to
    match at all, and a needle that every match holds on the lines it spans."""

    present: Callable[[str], bool]
    pattern: re.Pattern[str]
    needle: re.Pattern[str] | None = None
    crosses_lines: bool = False


# Python's `re` tries a pattern that opens with `\b` or a lookbehind at every position
# of the text (~20 ns a character each, 17 patterns: 0.25 ms per 1,000 characters and
# two thirds of a compaction's CPU before needles). A substring test (`present`) runs
# at memory speed and spares most patterns most sentences. A needle opens with a literal or a rare
# character class, which `re` skips to without trying the rest: the pattern then runs
# only over the lines that hold one (`_lines_with`), with the text's own positions, so
# lookbehinds see what precedes a line. Every match must hold a needle on its own
# lines; a pattern whose match may cross a line break (units: `5\nms`) has a needle that
# crosses it too. tests/compaction/test_checks.py holds them to every pattern run
# over every text.
_KINDS: tuple[_Kind, ...] = (
    _Kind(_having("://"), re.compile(r"https?://[^\s<>\"'`)\]]+")),
    # Paths: anything with a slash between word characters, or a file name with an extension.
    _Kind(
        _having("/"),
        re.compile(r"(?<![\w/])(?:~|\.{1,2})?/?(?:[\w.@-]+/)+[\w.@-]+"),
        re.compile("/"),
    ),
    _Kind(
        _having("."),
        re.compile(rf"\b[\w-]+\.{_EXTENSIONS}\b"),
        re.compile(rf"\.{_EXTENSIONS}\b"),
    ),
    _Kind(
        _having("-"),
        re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I),
        re.compile(r"-[0-9a-f]{4}-", re.I),
    ),
    _Kind(
        _digit,
        re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b"),
        # Digits and letters in one run: somewhere a digit stands next to a letter.
        re.compile(r"[0-9](?:(?<=[a-f][0-9])|(?=[a-f]))"),
    ),
    _Kind(  # ids of dashed parts with a letter and a digit: ABC-123, RUN-ID-770, ORD-2024-00017
        _having("-"),
        re.compile(
            r"(?<![\w-])(?=[\w-]*[A-Za-z])(?=[\w-]*\d)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+(?![\w-])"
        ),
        re.compile(r"-[A-Za-z0-9]"),
    ),
    _Kind(  # phones, dates
        _having("-"),
        # Not the middle of times (`12:00-19:00`): a `:` on either side goes on.
        re.compile(r"(?<![A-Za-z0-9_.:])\d{2,}(?:-\d{2,})+(?![A-Za-z0-9_:])"),
        re.compile(r"-\d"),
    ),
    _Kind(  # versions
        _having("."), re.compile(r"\bv?\d+\.\d+(?:\.\d+)+\b"), re.compile(r"\.\d")
    ),
    _Kind(
        _digit,
        re.compile(
            rf"(?<![A-Za-z0-9_.])\d+(?:\.\d+)?\s?{_UNITS}(?![A-Za-z])",
            re.IGNORECASE,
        ),
        # `\s?` may be a line break: so may the needle's.
        re.compile(rf"\d\s?{_UNITS}(?![A-Za-z])", re.IGNORECASE),
        crosses_lines=True,
    ),
    _Kind(  # money
        _having("$", "€", "£", "¥"),
        re.compile(r"[$€£¥]\s?\d{1,3}(?:,\d{3})+(?:\.\d+)?|[$€£¥]\s?\d+(?:\.\d+)?"),
    ),
    _Kind(  # 12,500
        _having(","),
        re.compile(r"(?<![A-Za-z0-9_.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d])"),
        re.compile(r",\d"),
    ),
    _Kind(
        _digit,
        # A sentence's full stop ends a number (`ending in 9734.`), a version's dot does not.
        re.compile(r"(?<![A-Za-z0-9_.,])\d{3,}(?:\.\d+)?(?![A-Za-z0-9_]|\.\w)"),
        re.compile(r"\d\d\d"),
    ),
    _Kind(  # CamelCase
        _upper,
        re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b"),
        re.compile(r"[A-Z][a-z0-9]+[A-Z]"),
    ),
    _Kind(  # snake_case
        _having("_"),
        re.compile(r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b"),
        re.compile(r"_[A-Za-z0-9]"),
    ),
    _Kind(_having("`"), re.compile(r"`([^`\n]{2,80})`")),
    _Kind(_having("“", "「", "《"), re.compile(r"[“「《]([^”」》\n]{1,40})[”」》]")),
    # Not a JSON key, and not the gap between two strings: a quote followed by space or by
    # JSON structure (`": {"`, `"}], "`) closes a string rather than opening one, and taking
    # it for an opening quote also swallowed the quote of the value after it.
    _Kind(_having('"'), re.compile(r"\"(?![\s:,\]}])([^\"\n]{2,40})(?<!\s)\"(?!\s*:)")),
)


def _lines_with(text: str, kind: _Kind) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of whole lines that holds a match of the kind's needle.

    A run ends on a line break (or the text's end): nothing a pattern takes or looks
    at lies past it. With a needle that cannot cross a line break the search goes on
    at the next line; with one that can, at the needle's end, so that a needle that
    starts on a line already taken and crosses into the next takes that line too.
    """
    assert kind.needle is not None
    span: tuple[int, int] | None = None
    pos = 0
    while (m := kind.needle.search(text, pos)) is not None:
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        end = len(text) if end < 0 else end
        if span is not None and start <= span[1] + 1:
            span = (span[0], max(span[1], end))
        else:
            if span is not None:
                yield span
            span = (start, end)
        pos = max(m.end(), m.start() + 1) if kind.crosses_lines else end + 1
    if span is not None:
        yield span


def _matches(kind: _Kind, text: str) -> Iterator[re.Match[str]]:
    if kind.needle is None:
        yield from kind.pattern.finditer(text)
        return
    for start, end in _lines_with(text, kind):
        yield from kind.pattern.finditer(text, start, end)


# An identifier has at least one letter or digit (any script); punctuation alone is
# structure, never a name.
_WORDISH = re.compile(r"[^\W_]")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(`\[])|(?<=[。！？；])|\n+")
_WS = re.compile(r"\s+")
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA = re.compile(r"[\u3040-\u30ff]")
_HANGUL = re.compile(r"[\uac00-\ud7af]")
_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")


def split_sentences(text: str) -> list[str]:
    """Sentences or lines, stripped and non-empty; Chinese full stops end a sentence too."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def classify(sentence: str) -> set[Tag]:
    """Which kinds of durable information a sentence carries (may be empty)."""
    tags: set[Tag] = set()
    if _CONSTRAINT.search(sentence):
        tags.add("constraint")
    if _PREFERENCE.search(sentence):
        tags.add("preference")
    if _DECISION.search(sentence):
        tags.add("decision")
    if _TODO.search(sentence):
        tags.add("todo")
    if extract_identifiers(sentence):
        tags.add("identifier")
    return tags


def extract_identifiers(text: str) -> list[str]:
    """Paths, URLs, ids, numbers with units, code names and quoted names, in first-seen order."""
    found: dict[str, int] = {}
    for kind in _KINDS:
        if not kind.present(text):
            continue
        for m in _matches(kind, text):
            value = (m.group(1) if m.groups() else m.group(0)).strip().rstrip(".,;:")
            if len(value) >= 2 and value not in found and _WORDISH.search(value):
                found[value] = m.start()
    # Drop values contained in a longer identifier (a file name inside its path).
    values = sorted(found, key=lambda v: found[v])
    joined = "\0".join(values)
    if joined.count("\0") == len(values) - 1:
        # No value holds the separator, so each holds itself once and a second
        # occurrence lies in another value: one search in C instead of n² in Python.
        return [v for v in values if joined.count(v) == 1]
    return [v for v in values if not any(v != o and v in o for o in values)]


def normalise(text: str) -> str:
    """Case-, width- and whitespace-insensitive form used for visibility matching."""
    return _WS.sub("", unicodedata.normalize("NFKC", text).casefold())


def cjk_counts(text: str) -> tuple[int, int, int, int]:
    """(Han characters, kana, hangul, Latin words)."""
    return (
        len(_CJK.findall(text)),
        len(_KANA.findall(text)),
        len(_HANGUL.findall(text)),
        len(_LATIN_WORD.findall(text)),
    )


def language_of(texts: Iterable[str]) -> str:
    """ "zh", "ja", "ko", "en" (any Latin script) or "und" when there is nothing to judge.

    A Han character carries roughly a word, so characters are weighed against
    Latin words; paths and code inside a Chinese conversation do not flip it.
    """
    han = kana = hangul = latin = 0
    for text in texts:
        h, k, g, w = cjk_counts(text)
        han, kana, hangul, latin = han + h, kana + k, hangul + g, latin + w
    if kana and kana + han >= latin:
        return "ja"
    if hangul and hangul >= latin:
        return "ko"
    if han and han >= latin:
        return "zh"
    if latin:
        return "en"
    return "und"


def truncate_utf8(text: str, max_bytes: int) -> str:
    """At most `max_bytes` of UTF-8 without cutting a character in half."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    return data[:max_bytes].decode("utf-8", errors="ignore")


def shorten(text: str, max_chars: int, *, tail_chars: int = 0) -> str:
    """One-line head (and optional tail) of `text`, with an ellipsis where it was cut."""
    flat = _WS.sub(" ", text).strip()
    if len(flat) <= max_chars:
        return flat
    if tail_chars <= 0 or tail_chars >= max_chars:
        return flat[: max_chars - 1].rstrip() + "…"
    head = max_chars - tail_chars - 1
    return flat[:head].rstrip() + "…" + flat[-tail_chars:].lstrip()
