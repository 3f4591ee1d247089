"""What one assembly is asked (pure): the history, the counter, the budget and the rest.

Apart from app/context/types.py because it names a strategy object, whose interface
reads the history view: the view's own types stay below it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.context.types import (
    DEFAULT_PREVIEW_LIMIT_TOKENS,
    DEFAULT_STRATEGY,
    DynamicItem,
    SummaryBlock,
    TokenCounter,
)
from app.core.conversation import LoggedMessage

if TYPE_CHECKING:
    from app.context.caches import Caches
    from app.context.strategies.base import Strategy


@dataclass(frozen=True, slots=True)
class AssemblyRequest:
    """Everything one assembly needs.

    `history` holds the effective-history candidates in seq order: the messages
    with seq > watermark the repository read (a bounded suffix plus pinned
    messages is enough, see `app/context/__init__.py`). `history_from_seq` is the
    first seq of the effective history (watermark + 1); seqs from there that
    are absent from `history` are reported as dropped by budget.

    `system` is the session's system prompt (a string) or per-call system
    messages; `budget` is the input-token ceiling (max_tokens, or the session's
    usable budget) and `reserve_output_tokens` is taken off it on top.
    """

    history: Sequence[LoggedMessage]
    counter: TokenCounter
    budget: int
    session_id: str = ""
    system: str | Sequence[Mapping[str, Any]] | None = None
    tools: Sequence[Mapping[str, Any]] = ()
    dynamic_context: Sequence[DynamicItem] = ()
    summary: SummaryBlock | None = None
    mode: str | None = None
    reserve_output_tokens: int = 0
    preview_limit_tokens: int = DEFAULT_PREVIEW_LIMIT_TOKENS
    strategy: str | Strategy = DEFAULT_STRATEGY
    history_from_seq: int | None = None
    # Every seq from this one on was read (the repository's window): a seq missing from
    # `history` there is a message that is no unit (a system or excluded one), while
    # below it a missing seq may be a unit the read did not reach. None: `history` is
    # every candidate there is.
    history_complete_from: int | None = None
    # What earlier calls worked out (app/context/caches.py); None: nothing kept.
    caches: Caches | None = None

    @property
    def input_limit(self) -> int:
        return self.budget - self.reserve_output_tokens
