"""Whether texts of the log support what a summary item says (SPEC §5, provenance).

A citation is only worth its holder: "every summary item cites seqs that hold its
words or identifiers". A set of texts *supports* an item (`Claim`) when:

- every identifier the item names (paths, ids, names, codes: see
  `signals.extract_identifiers`, and codes of letters and digits) is in one of them
  with the same token boundaries: `Omar_rossi1241` is not held by `omar_rossi_1241`,
  nor `rossi_1241` by it (a letter, digit or `_` on either side is no boundary, but
  for a letter after a number: `185,250p`, `5ms`);
- every number the item states is in one of them, whole: `10.0` is not held by `10`,
  nor `10` by `10.0`, `110`, `1.10` or `10:30` (a number runs on over `.` and `:`
  between digits, and over `,` before them: `1,000`; `-`, `/` and a `,` after it part
  numbers: `50` is held by `20-50`, `2024` by `2024-05-23`, `3590` by `3590,3620p`);
- an item with no identifier and fewer than two words of its own (`10.0`,
  `1, 2, 3, …, 17`, `yes`) is in one of them whole, unless it is a list of numbers
  of three characters or more (`2009, 984`, versions): then each is held;
- and enough of its content words are in them: half of its Latin words (compared
  by their first five letters, so `changed` holds `change`) and 40% of its CJK
  character pairs (Chinese has no word boundaries; a rewording keeps fewer pairs
  than an English one keeps words).

Case, width and runs of whitespace do not count. This checks that what an item says
comes from the texts, not that it says it truly (a real path in an invented claim
passes): what it stops is a number, an id or a sentence made up.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from app.compaction.signals import extract_identifiers

_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")
_LATIN = re.compile(r"[^\W\d_]{3,}")
# A number whole: digits, and digits again after `.`, `,`, `:`, `/` or `-`; no Latin
# letter, digit or `_` on either side (a CJK character is a boundary).
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:[.,:/-]\d+)*(?![A-Za-z0-9_])")
_ONLY_NUMBER = re.compile(r"[\d.,:/-]+")
# Codes (`E4042`, `4NQLHD`, `HAT190`): letters and digits in one token.
_CODE = re.compile(r"(?<![\w.])(?:[A-Za-z][\w-]*\d[\w-]*|\d[\w-]*[A-Za-z][\w-]*)(?![\w])")
_WS = re.compile(r"\s+")
# A shortened text's cut (`…`, `…(+3 lines)`) and the pieces of words it touches.
_CUT = re.compile(r"\S*…(?:\(\+\d+ lines?\))?\S*")
# A line's label (`User: `, `ran: `, `用户：`): not part of what is held whole.
_LABEL = re.compile(r"^\w+(?:: |：)")
# Words that hold nothing: function words and the labels of summary lines.
STOP = frozenset(
    """the and for with that this from into was were are has have had not but you your
    our its they them then than there their what when which who will would could should
    user assistant called tool result results identifiers summary said asked about also
    all any can did does done get got how just might more most now one only out own
    per same some such too use used very want wants way well yes please like need needs
    用户 助手 调用 工具 结果 标识""".split()
)
LATIN_SHARE = 0.5
CJK_SHARE = 0.4
STEM = 5


def flat(text: str) -> str:
    """Case-, width-insensitive, whitespace collapsed to one space (not removed: the token
    boundaries of identifiers and numbers are what is compared)."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _is_word(ch: str) -> bool:
    return ch == "_" or (ch.isascii() and ch.isalnum())


def held(key: str, text: str) -> bool:
    """`key` (flat) is in `text` (flat) with the same token boundaries (module docstring)."""
    if not key:
        return False
    start = text.find(key)
    while start >= 0:
        end = start + len(key)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        ok = not (_is_word(key[0]) and _is_word(before))
        # A unit or a command's letter may follow a number (`185,250p`, `5ms`); a digit or
        # `_` may not, and a letter may not follow a name (`rossi` of `rossi1241`).
        if key[-1].isdigit():
            ok = ok and not (after.isdigit() or after == "_")
        else:
            ok = ok and not (_is_word(key[-1]) and _is_word(after))
        # `1.10` does not hold `10`, nor `v1.2.3` hold `v1.2`: a digit run goes on.
        if ok and _ONLY_NUMBER.fullmatch(key) and before in ".,:" and start >= 2:
            ok = not text[start - 2].isdigit()
        if ok and key[-1].isdigit() and after in ".:" and end + 1 < len(text):
            ok = not text[end + 1].isdigit()
        if ok:
            return True
        start = text.find(key, start + 1)
    return False


def numbers(text: str) -> frozenset[str]:
    """The numbers a flat text states, whole."""
    return frozenset(_NUMBER.findall(text))


def stems(text: str, singles: bool = False) -> tuple[frozenset[str], frozenset[str]]:
    """(Latin word stems, CJK character pairs) of a flat text, function words left out; a
    lone CJK character (`3天`) is its own pair, and a holder (`singles`) has every
    character besides its pairs, so that it holds one."""
    cjk: set[str] = set()
    for run in _CJK_RUN.findall(text):
        if len(run) == 1 or singles:
            cjk.update(run)
        cjk.update(run[i : i + 2] for i in range(len(run) - 1))
    latin = {w[:STEM] for w in _LATIN.findall(_CJK_RUN.sub(" ", text)) if w not in STOP}
    return frozenset(latin), frozenset(cjk - STOP)


@dataclass(frozen=True, slots=True)
class Text:
    """One text that may hold items, prepared once."""

    flat: str
    latin: frozenset[str]
    cjk: frozenset[str]
    # For another summary's item: its own identifiers and numbers, the only ones it holds
    # (those its citation was checked for; a name merely inside its words was not).
    keys: tuple[str, ...] | None = None

    @classmethod
    def of(cls, text: str) -> Text:
        f = flat(text)
        latin, cjk = stems(f, singles=True)
        return cls(f, latin, cjk)

    @classmethod
    def item(cls, body: str) -> Text:
        return replace(cls.of(body), keys=Claim.of(body).keys())

    def holds(self, key: str) -> bool:
        if self.keys is not None and not any(held(key, k) for k in self.keys):
            return False
        return held(key, self.flat)


@dataclass(frozen=True, slots=True)
class Claim:
    """What texts must hold to support one item (see the module docstring)."""

    ids: tuple[str, ...]
    numbers: tuple[str, ...]
    latin: frozenset[str]
    cjk: frozenset[str]
    need: int  # content words (stems, pairs) that suffice
    whole: str | None  # the item itself, when it has too few words to be judged by them

    @classmethod
    def of(cls, body: str) -> Claim:
        # What a cut mark touches is a piece of a token (`…hone_number`), not one.
        body = _CUT.sub("\n", body)  # a line break: no quoted name spans it
        f = flat(body)
        # Part by part: in a list (`Identifiers: is_path(""), path.expanduser("")`) a quote
        # of one part and one of the next enclose no name.
        parts = body.split(", ")
        found = [flat(i) for p in parts for i in (*extract_identifiers(p), *_CODE.findall(p))]
        # Not a name cut by a shortened item's mark (`"12小时…`: its quote never closes), nor
        # one the item itself does not hold whole (`200 EUR` out of `4,200 EUR`).
        ids = tuple(
            dict.fromkeys(
                i for i in found
                if len(i) >= 2 and not _ONLY_NUMBER.fullmatch(i) and "..." not in i
                and held(i, f)
            )
        )  # fmt: skip
        latin, cjk = stems(flat(_LABEL.sub("", body.strip())))
        need = math.ceil(LATIN_SHARE * len(latin) + CJK_SHARE * len(cjk))
        # Numbers the item states whole (`400` of `'400,450p'` is none).
        nums = tuple(sorted(n for n in numbers(f) if held(n, f)))
        # A list of long numbers (`Identifiers: 2009, 984`, versions) is judged by them; one
        # of short ones (`1, 2, 3, …, 17`: any code listing has each) must be held whole.
        long_numbers = bool(nums) and not latin and not cjk and min(map(len, nums)) >= 3
        few_words = not ids and len(latin) + len(cjk) < 2 and not long_numbers
        whole = flat(_LABEL.sub("", body.strip())) if few_words else None
        return cls(ids, nums, latin, cjk, need, whole)

    def keys(self) -> tuple[str, ...]:
        return (*self.ids, *self.numbers)

    def holds_key(self, key: str, text: Text) -> bool:
        return text.holds(key)

    def shared(self, texts: Iterable[Text]) -> int:
        latin: set[str] = set()
        cjk: set[str] = set()
        for t in texts:
            latin |= self.latin & t.latin
            cjk |= self.cjk & t.cjk
        return len(latin) + len(cjk)

    def missing(self, texts: Sequence[Text]) -> list[str]:
        """The identifiers and numbers none of `texts` holds (the whole item first, when it
        must be held whole)."""
        out = [k for k in self.keys() if not any(self.holds_key(k, t) for t in texts)]
        # Another summary's item holds a short item whole only as all of itself: a few
        # words inside it (`a few`) were never checked against the log as such.
        whole = self.whole
        if whole is not None and not any(
            held(whole, t.flat) if t.keys is None else whole == t.flat for t in texts
        ):
            out.insert(0, whole)
        return list(dict.fromkeys(out))

    def touches(self, text: Text) -> bool:
        """`text` holds something of the item: worth citing with others."""
        if any(self.holds_key(k, text) for k in self.keys()):
            return True
        if self.whole is not None:
            return held(self.whole, text.flat)
        return bool(self.latin & text.latin or self.cjk & text.cjk)

    def supported(self, texts: Sequence[Text]) -> bool:
        return not self.missing(texts) and self.shared(texts) >= self.need


def echo_of(body: str, instructions: str, n: int = 6, share: float = 0.75) -> bool:
    """Whether `body` repeats the summariser's own instructions (`instructions`: their
    `normalise`d text): the item whole, or most of its character n-grams (any script)."""
    key = "".join(flat(body).split())
    if len(key) < 3:
        return False
    if key in instructions:
        return True
    if len(key) < n * 2:
        return False
    grams = {key[i : i + n] for i in range(len(key) - n + 1)}
    return sum(1 for g in grams if g in instructions) >= share * len(grams)
