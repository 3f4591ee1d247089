"""Text signals for explainable scoring and for choosing the key lines of a cut.

English and Chinese. Constraint and decision words (the lists of
`app/core/words.py`, shared with compaction) are found with `str.find`
on the lowercased text and a word-boundary check, which runs at memchr speed;
the equivalent case-insensitive regex alternation costs ~60 ns per character
in CPython, too much for logs full of long agent messages. Only the head of a
text is scored (`SCAN_CHARS`): what matters in a message is nearly always
near its start. Assembly scans each message once and keeps the result with the
message (`app/context/memo.py`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from app.core import words

SCAN_CHARS = 1500

# The constraint and decision lists of `app/core/words.py` (shared with compaction).
_WORDS: dict[str, tuple[str, ...]] = {k: words.LATIN[k] for k in ("constraint", "decision")}
# Chinese has no spaces to check: any occurrence counts.
_CJK_WORDS: dict[str, tuple[str, ...]] = {k: words.CJK[k] for k in ("constraint", "decision")}
_EXTENSIONS = re.compile(words.extensions_pattern() + r"(?![\w])")
CODE = re.compile(
    r"```|`[^`\n]{2,}`|^\s*(?:def|class|import|from|return|function|const|let|var)\b|[{};]\s*$",
    re.MULTILINE,
)
NUMBER = re.compile(r"\d")
SIGNALS = ("constraint", "decision", "path", "code", "number")
_KEY_LINE_SIGNALS = ("constraint", "decision", "path")


def _word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _word_hits(low: str, name: str) -> Iterator[int]:
    for word in _WORDS[name]:
        i = low.find(word)
        while i >= 0:
            end = i + len(word)
            if (i == 0 or not _word_char(low[i - 1])) and (
                end == len(low) or not _word_char(low[end])
            ):
                yield i
            i = low.find(word, i + 1)
    for word in _CJK_WORDS[name]:
        i = low.find(word)
        while i >= 0:
            yield i
            i = low.find(word, i + 1)


def _path_hits(text: str) -> Iterator[int]:
    """A slash between name characters, or a file name with a common extension."""
    for sep in ("/", "."):
        i = text.find(sep)
        while i >= 0:
            before = text[i - 1] if i else " "
            after = text[i + 1] if i + 1 < len(text) else " "
            if sep == "/":
                if (_word_char(before) or before in ".~-") and (_word_char(after) or after in ".-"):
                    yield i
            elif _word_char(before) and _EXTENSIONS.match(text, i + 1):
                yield i
            i = text.find(sep, i + 1)


def hits(name: str, text: str, low: str) -> Iterator[int]:
    """Offsets where signal `name` occurs in `text` (`low` is `text.lower()`)."""
    if name in _WORDS:
        return _word_hits(low, name)
    if name == "path":
        return _path_hits(text)
    pattern = CODE if name == "code" else NUMBER
    return (m.start() for m in pattern.finditer(text))


def found(text: str) -> tuple[str, ...]:
    """Names of the signals present in the head of `text`."""
    text = text[:SCAN_CHARS]
    low = text.lower()
    return tuple(name for name in SIGNALS if next(hits(name, text, low), None) is not None)


def key_line_starts(text: str, limit: int = 64) -> list[int]:
    """Offsets of the lines of `text` stating a constraint, a decision or a path, in order."""
    low = text.lower()
    starts: set[int] = set()
    for name in _KEY_LINE_SIGNALS:
        for n, at in enumerate(hits(name, text, low)):
            if n >= limit:
                break
            starts.add(text.rfind("\n", 0, at) + 1)
    return sorted(starts)
