"""Pure inputs and outputs of context assembly (SPEC §3, §9).

No database or HTTP types: the HTTP layer reads the session and its log,
builds an `AssemblyRequest` (app/context/request.py), calls `assemble()` and renders the returned
`AssembledContext` with `to_dict()`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Action = Literal["kept", "preview", "cut", "dropped", "excluded"]

DEFAULT_STRATEGY = "key_messages"
DEFAULT_PREVIEW_LIMIT_TOKENS = 1024


class TokenCounter(Protocol):
    """The part of `app.core.tokens.TokenCounter` assembly relies on.

    Declared here structurally so that assembly does not import the counter
    implementation (tests pass small doubles). The contract that makes the
    accounting exact: `count_messages(ms) == sum(count_message(m)) + priming`.
    """

    @property
    def mode(self) -> str: ...

    @property
    def name(self) -> str: ...

    def count_message(self, message: Mapping[str, Any]) -> int: ...

    def count_messages(self, messages: Sequence[Mapping[str, Any]]) -> int: ...

    def count_tools(self, tools: Sequence[Mapping[str, Any]]) -> int: ...


@dataclass(frozen=True, slots=True)
class SummaryBlock:
    """The session's compacted summary: represents every seq up to `through_seq`.
    `required`: it carries pinned messages or session anchors verbatim, so it is sent
    whatever the budget (over budget if need be), as pinned messages are."""

    text: str
    through_seq: int
    required: bool = False


# A dynamic-context item: a string becomes one system message; a mapping is an
# OpenAI message of role system, user or assistant (no tool calls), sent as is.
DynamicItem = str | Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Tokens per part; they add up to `Usage.input_tokens`.

    `system` is the system block and the mode banner; `reply_priming` the tokens
    the counter adds once per request for the model's reply (a session with no
    system prompt has `system` 0). The parts sum exactly to what the model is sent.
    """

    system: int = 0
    tools: int = 0
    dynamic: int = 0
    summary: int = 0
    history: int = 0
    reply_priming: int = 0

    @property
    def total(self) -> int:
        return (
            self.system
            + self.tools
            + self.dynamic
            + self.summary
            + self.history
            + self.reply_priming
        )


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int
    budget: int
    tokenizer_mode: str
    breakdown: Breakdown
    # The newest contiguous run of the history the payload holds, as sent (SPEC §3
    # "Recency before stability"): what the agent just did, never traded for the cache.
    recent_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Decision:
    """Why the seqs `seq`..`through` (one seq when `through` is None) are where they are.

    Consecutive seqs with the same action and rule share one entry, which keeps
    the explanation of a long log short.
    """

    seq: int
    action: Action
    rule: str
    through: int | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seq": self.seq, "action": self.action, "rule": self.rule}
        if self.through is not None:
            out["through"] = self.through
        return out


@dataclass(frozen=True, slots=True)
class SummaryState:
    included: bool
    through_seq: int | None


@dataclass(frozen=True, slots=True)
class AssembledContext:
    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    usage: Usage
    kept_seqs: tuple[int, ...]
    dropped_count: int
    summary: SummaryState
    strategy: str
    over_budget: bool
    warnings: tuple[str, ...] = ()
    decisions: tuple[Decision, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The §9 context object (the HTTP layer adds `usage.status`)."""
        b = self.usage.breakdown
        return {
            "messages": list(self.messages),
            "tools": list(self.tools),
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "budget": self.usage.budget,
                "tokenizer_mode": self.usage.tokenizer_mode,
                "recent_tokens": self.usage.recent_tokens,
                "breakdown": {
                    "system": b.system,
                    "tools": b.tools,
                    "dynamic": b.dynamic,
                    "summary": b.summary,
                    "history": b.history,
                    "reply_priming": b.reply_priming,
                },
            },
            "kept_seqs": list(self.kept_seqs),
            "dropped_count": self.dropped_count,
            "summary": {"included": self.summary.included, "through_seq": self.summary.through_seq},
            "strategy": self.strategy,
            "over_budget": self.over_budget,
            "warnings": list(self.warnings),
            "decisions": [d.as_dict() for d in self.decisions],
        }
