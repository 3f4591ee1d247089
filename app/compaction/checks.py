"""Checks a summary must pass before it replaces history.

- Anchors (session anchors: statements that must stay visible) are looked up
  in the final context: system prompt, summary and effective history.
  Matching ignores case, width and whitespace; an anchor of eight or more
  tokens also counts as visible when one passage of a text shares at least
  80% of its tokens (words, or characters for CJK), so a model re-flowing a
  long sentence is not punished for it.
- Identifiers of the compacted range that later turns still mention must be
  named in the summary, or the later mention loses its referent.
- The summary must be in the conversation's language.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from app.compaction.signals import cjk_counts, extract_identifiers, language_of, normalise
from app.core.conversation import LoggedMessage, call_function
from app.core.tokens.counter import TextCounter

FUZZY_MIN_TOKENS = 8
FUZZY_THRESHOLD = 0.8

_TOKEN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\W_]+", re.UNICODE)


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold())


def _window_overlap(anchor: list[str], text: list[str]) -> float:
    """Best share of the anchor's tokens found in one passage of `text` about its length."""
    need = Counter(anchor)
    size = max(len(anchor) * 3 // 2, 1)
    step = max(len(anchor) // 2, 1)
    best = 0.0
    for start in range(0, max(len(text) - size, 0) + 1, step):
        window = Counter(text[start : start + size])
        hit = sum(min(n, window[t]) for t, n in need.items())
        best = max(best, hit / len(anchor))
        if best >= 1.0:
            break
    return best


def is_visible(anchor: str, visible_texts: Sequence[str]) -> bool:
    return not missing_anchors([anchor], visible_texts)


def missing_anchors(anchors: Iterable[str], visible_texts: Sequence[str]) -> list[str]:
    """Anchors not visible in any of `visible_texts`, in their given order."""
    normalised = [normalise(t) for t in visible_texts]
    tokenised: list[list[str]] | None = None
    missing: list[str] = []
    for anchor in anchors:
        key = normalise(anchor)
        if not key or any(key in t for t in normalised):
            continue
        tokens = _tokens(anchor)
        if len(tokens) >= FUZZY_MIN_TOKENS:
            if tokenised is None:
                tokenised = [_tokens(t) for t in visible_texts]
            if any(_window_overlap(tokens, t) >= FUZZY_THRESHOLD for t in tokenised):
                continue
        missing.append(anchor)
    return missing


def identifiers_to_keep(
    range_texts: Iterable[str], later_texts: Iterable[str], *, limit: int = 40
) -> list[str]:
    """Identifiers of the compacted range that later (preserved) turns mention again."""
    later = normalise("\n".join(later_texts))
    seen: dict[str, None] = {}
    # Each identifier is looked for in `later` once, not once per text that names it.
    checked: set[str] = set()
    for text in range_texts:
        for ident in extract_identifiers(text):
            if ident in checked:
                continue
            checked.add(ident)
            if normalise(ident) in later:
                seen[ident] = None
    return list(seen)[:limit]


def constraints_to_keep(
    range_messages: Iterable[LoggedMessage],
    previous_prefs: Iterable[str] = (),
    folded: Iterable[str] = (),
    *,
    limit: int = 40,
    max_chars: int = 300,
    max_tokens: int | None = None,
    counter: TextCounter | None = None,
) -> list[str]:
    """The user's constraints and preferences a summary of this range must keep.

    The previous summary's `user_prefs`, then every sentence the rule-based classifier
    tags as a constraint or preference in the user messages this compaction folds out
    of the `user_messages` section (`folded`: there they were kept verbatim, so no
    earlier check asked for them elsewhere, and a model's summary that never restated
    one lost it here for good), then in the user messages of the range. Checking for them,
    instead of only asking for them in the prompt, is what keeps a model that
    drops them from having its summary stored as a success. With `max_tokens`
    (and its `counter`) the newest that fit are kept: the summary must fit the
    window it is for, and the user's words themselves are carried verbatim by
    the `user_messages` section, under the same share of the window.
    """
    from app.compaction.provenance import strip_cites
    from app.compaction.signals import classify, split_sentences

    # Citations aside: a constraint is the user's words, cited where it is kept.
    found: list[str] = [strip_cites(p) for p in previous_prefs if strip_cites(p)]
    texts = [
        *map(strip_cites, folded),
        *(m.text for m in range_messages if m.role == "user" and m.counts_in_context),
    ]
    for text in texts:
        for sentence in split_sentences(text):
            if {"constraint", "preference"} & classify(sentence):
                found.append(sentence[:max_chars])
    seen: set[str] = set()
    out = []
    for item in found:
        key = " ".join(item.lower().split())
        if key not in seen:
            seen.add(key)
            out.append(item)
    out = out[-limit:]
    if max_tokens is None or counter is None:
        return out
    kept: list[str] = []
    used = 0
    for item in reversed(out):
        used += counter.count_text(item)
        if used > max_tokens:
            break
        kept.append(item)
    return kept[::-1]


def missing_identifiers(identifiers: Iterable[str], summary_text: str) -> list[str]:
    text = normalise(summary_text)
    return [i for i in identifiers if normalise(i) not in text]


def message_texts(messages: Iterable[LoggedMessage]) -> list[str]:
    """What a message shows the model: its text and its tool calls' names and arguments."""
    out: list[str] = []
    for m in messages:
        if not m.counts_in_context:
            continue
        parts = [m.text]
        for call in m.body.get("tool_calls") or ():
            function = call_function(call)
            if function is not None:
                name, args = function
                parts.append(f"{name}({args})")
        out.append("\n".join(p for p in parts if p))
    return out


def conversation_language(texts: Iterable[str]) -> str:
    """ "zh", "ja", "ko", "en" or "und"; pass user/assistant texts, tool output would skew it."""
    return language_of(texts)


def conversation_language_of(messages: Iterable[LoggedMessage]) -> str:
    return conversation_language(
        m.text for m in messages if m.role in ("user", "assistant") and m.counts_in_context
    )


def language_matches(summary_text: str, lang: str) -> bool:
    """A CJK conversation needs CJK prose in its summary, a Latin one must not be CJK-dominant.

    Lenient on purpose: a Chinese summary of a coding session is full of Latin
    paths and names, an English one may quote Chinese place names.
    """
    han, kana, hangul, latin = cjk_counts(summary_text)
    cjk = han + kana + hangul
    if lang in ("zh", "ja", "ko"):
        return cjk > 0 and cjk * 4 >= latin
    if lang == "en":
        return cjk <= 2 * latin
    return True
