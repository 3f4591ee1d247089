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
only adds protection to longer ones, over other long ones: a long message
that says "must" somewhere (a task description usually does) still folds
before the short ones. A short message ending on a question mark (any
script) folds before other short ones: it was answered, and the answer is
in the summary. No keyword list decides whether a message survives: below
the ratio every message does, and above it the order is length,
punctuation and age before any word.

A message larger than the whole share cannot stay verbatim whatever else
folds, so it folds before anything else: folding the others first, oldest
first, would empty the section and then fold it anyway (an agent run's task
description alone can exceed the share).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.compaction.provenance import cite_seqs, strip_cites
from app.compaction.signals import classify, split_sentences
from app.core.conversation import LoggedMessage
from app.core.tokens.counter import TextCounter

SHORT_TOKENS = 80
# A bullet and the line break around each item in the rendered section.
ITEM_OVERHEAD_TOKENS = 2


def range_user_messages(messages: Sequence[LoggedMessage]) -> tuple[str, ...]:
    """The user messages of a compacted range, verbatim, in log order, each citing its seq.

    Pinned ones are left out: the `pinned` section already carries them verbatim.
    """
    return tuple(
        cite_seqs(m.text.strip(), (m.seq,))
        for m in messages
        if m.role == "user" and m.counts_in_context and not m.pinned and m.text.strip()
    )


def _question(text: str) -> bool:
    """Ends on a question mark (any script): punctuation, not a word list."""
    return strip_cites(text).endswith(("?", "？"))


# Fold order, oldest first within each tier.
_TIERS = (
    "larger than the whole share",  # cannot be kept verbatim in any case
    "long",
    "short question",  # answered since: the summary holds the answer
    "long constraint-like",  # tagged by signals.py: protected over other long ones only
    "short",  # how users give instructions mid-run, in any language
)


def _fold_tier(text: str, cost: int, max_tokens: int) -> int:
    """Index in `_TIERS`; `cost` is the item's tokens in the section."""
    if cost > max_tokens:
        return 0
    if cost - ITEM_OVERHEAD_TOKENS > SHORT_TOKENS:
        tagged = any({"constraint", "preference"} & classify(s) for s in split_sentences(text))
        return 3 if tagged else 1
    return 2 if _question(text) else 4


def roll_user_messages(
    previous: Sequence[str],
    new: Sequence[str],
    *,
    max_tokens: int,
    counter: TextCounter,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(kept, folded): `previous` then `new`, folded oldest first, short ones last.

    Items are kept verbatim and in order; an exact repeat of an earlier item
    is kept once (its latest position wins, so a repeated instruction counts
    as recent).
    """
    items: list[str] = []
    bodies: list[str] = []
    for text in (*previous, *new):
        body = strip_cites(text)
        if body in bodies:
            del items[bodies.index(body)]
            bodies.remove(body)
        items.append(text)
        bodies.append(body)
    costs = [counter.count_text(t) + ITEM_OVERHEAD_TOKENS for t in items]
    total = sum(costs)
    if total <= max_tokens:
        return tuple(items), ()
    tiers = [_fold_tier(t, cost, max_tokens) for t, cost in zip(items, costs, strict=True)]
    folded: set[int] = set()
    for tier in range(len(_TIERS)):
        for i in range(len(items)):
            if total <= max_tokens:
                break
            if tiers[i] == tier and i not in folded:
                folded.add(i)
                total -= costs[i]
    kept = tuple(t for i, t in enumerate(items) if i not in folded)
    gone = tuple(t for i, t in enumerate(items) if i in folded)
    return kept, gone
