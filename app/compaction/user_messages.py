"""The summary's `user_messages` section: the user's own words, verbatim (SPEC §5).

Every compaction carries the user messages of its range into the summary
word for word, behind those the previous summary already carried, whatever
the language and however they are phrased: what a user said is never left
to a paraphrase. Only when the section exceeds `user_messages_ratio` of the
usable budget are messages *folded* (left to the rest of the summary, which
was written from the same range): oldest first, and constraint-like ones
last.

Constraint-like is structural first: a short message (at most
`SHORT_TOKENS`) is how users give instructions mid-run in any language, so
it is protected whatever its words; the rule-based tagger of `signals.py`
only adds protection to longer ones. A short message ending on a question
mark (any script) folds before other short ones: it was answered, and the
answer is in the summary. No keyword list decides whether a message
survives: below the ratio every message does, and above it the order is
length, punctuation and age before any word.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.compaction.signals import classify, split_sentences
from app.compaction.summary import TextCounter
from app.conversation import LoggedMessage

SHORT_TOKENS = 80
# A bullet and the line break around each item in the rendered section.
ITEM_OVERHEAD_TOKENS = 2


def range_user_messages(messages: Sequence[LoggedMessage]) -> tuple[str, ...]:
    """The user messages of a compacted range, verbatim, in log order.

    Pinned ones are left out: the `pinned` section already carries them verbatim.
    """
    return tuple(
        m.text
        for m in messages
        if m.role == "user" and m.counts_in_context and not m.pinned and m.text.strip()
    )


def constraint_like(text: str, counter: TextCounter) -> bool:
    if counter.count_text(text) <= SHORT_TOKENS:
        return True
    return any({"constraint", "preference"} & classify(s) for s in split_sentences(text))


def _question(text: str) -> bool:
    """Ends on a question mark (any script): punctuation, not a word list."""
    return text.rstrip().endswith(("?", "？"))


def roll_user_messages(
    previous: Sequence[str],
    new: Sequence[str],
    *,
    max_tokens: int,
    counter: TextCounter,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(kept, folded): `previous` then `new`, folded oldest first, constraint-like last.

    Items are kept verbatim and in order; an exact repeat of an earlier item
    is kept once (its latest position wins, so a repeated instruction counts
    as recent).
    """
    items: list[str] = []
    for text in (*previous, *new):
        if text in items:
            items.remove(text)
        items.append(text)
    costs = [counter.count_text(t) + ITEM_OVERHEAD_TOKENS for t in items]
    total = sum(costs)
    if total <= max_tokens:
        return tuple(items), ()
    # Fold order: long messages, then short questions (answered since, the summary holds
    # the answer), then the other short ones, oldest first within each tier.
    tiers = [
        2 if constraint_like(t, counter) and not _question(t) else int(constraint_like(t, counter))
        for t in items
    ]
    folded: set[int] = set()
    for tier in (0, 1, 2):
        for i in range(len(items)):
            if total <= max_tokens:
                break
            if tiers[i] == tier and i not in folded:
                folded.add(i)
                total -= costs[i]
    kept = tuple(t for i, t in enumerate(items) if i not in folded)
    gone = tuple(t for i, t in enumerate(items) if i in folded)
    return kept, gone
