"""Typed results of every contextd call (SPEC §2, §9).

Every model accepts fields it does not name (`extra="allow"`): a newer server
adds fields without breaking an older client, and they stay readable through
`model_extra`. Messages keep every field they were stored with.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "AppendResult",
    "AppendedMessage",
    "Budget",
    "BudgetPreview",
    "ClearResult",
    "CompactResult",
    "CompactionState",
    "Context",
    "ContextSummary",
    "ContextUsage",
    "Decision",
    "Event",
    "EventPage",
    "Health",
    "Lease",
    "LeaseHolder",
    "Message",
    "MessagePage",
    "SearchHit",
    "SearchResult",
    "Session",
    "SessionPage",
    "SessionStats",
    "TailDeleteResult",
    "TokenCount",
    "UsageReport",
]

# The fields of a chat message that a model accepts; everything else is contextd's.
CHAT_FIELDS = ("role", "content", "name", "tool_calls", "tool_call_id")


class _Model(BaseModel):
    model_config = ConfigDict(extra="allow", protected_namespaces=(), populate_by_name=True)


class Budget(_Model):
    status: Literal["ok", "warn", "compact_needed"] | str
    current_tokens: int
    usable_budget: int
    warn_threshold: int
    compact_threshold: int
    context_limit: int
    tokenizer_mode: str


class SessionBill(_Model):
    """`stats.bill`: the sums of the session's payload calls (`ContextUsage`'s figures),
    the summariser's tokens of its compactions, and the saving against sending the
    whole history (cached tokens at 0.1 of the input price)."""

    calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    summariser_input_tokens: int = 0
    summariser_output_tokens: int = 0
    full_history_input_tokens: int = 0
    # Calls whose cached figure is the provider's (`report_usage` with the estimate).
    reported_calls: int = 0
    billed_input_equivalent: float = 0.0
    saved_tokens: float = 0.0
    saving_ratio: float = 0.0


class SessionStats(_Model):
    message_counts: dict[str, int] = Field(default_factory=dict)
    last_seq: int = 0
    last_compaction_seq: int = 0
    context_tokens: int = 0
    # The session's token calibration (`factor`, `applied`, `samples`, errors, `last`).
    token_calibration: dict[str, Any] | None = None
    # Tool calls repeating an earlier call whose result the payload no longer held whole.
    re_reads: int = 0
    bill: SessionBill | None = None


class LeaseHolder(_Model):
    owner: str | None = None
    expires_at: datetime | None = None
    fencing_token: int | None = None


class Session(_Model):
    id: str
    model: str | None = None
    effective_model: str | None = None
    context_limit: int | None = None
    system_prompt: str | None = None
    tools: list[dict[str, Any]] | None = None
    strategy: str | None = None
    anchors: list[str] | None = None
    auto_compact: bool | None = None
    recall: bool | None = None
    compaction: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    tokenizer: str | None = None
    stats: SessionStats | None = None
    last_seq: int = 0
    last_compaction_seq: int = 0
    lease: LeaseHolder | None = None
    budget: Budget | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


class SessionPage(_Model):
    sessions: list[Session]
    next_cursor: str | None = None


class Message(_Model):
    """A logged message: the chat message as sent, plus what contextd assigned."""

    role: str
    content: Any = None
    name: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    id: str
    seq: int
    token_count: int | None = None
    created_at: datetime | None = None
    pinned: bool = False
    include_in_context: bool = True
    mode: str | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    range: dict[str, Any] | None = None

    def chat(self) -> dict[str, Any]:
        """The OpenAI chat message alone, as `chat.completions.create` takes it."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        for key in ("name", "tool_calls", "tool_call_id"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


class SearchHit(_Model):
    """One message a search found: where it is and a snippet around the match."""

    seq: int
    role: str
    tool_name: str | None = None
    snippet: str = ""
    line: int | None = None
    path: str = ""
    score: float = 0.0
    compacted: bool = False


class SearchResult(_Model):
    """`GET /sessions/{id}/search`: hits best first, newest first among equals."""

    query: str = ""
    hits: list[SearchHit] = Field(default_factory=list)
    last_seq: int = 0
    last_compaction_seq: int = 0


class MessagePage(_Model):
    """A page of the log: ascending (`next_after_seq`) or tail-first (`next_before_seq`)."""

    messages: list[Message]
    last_seq: int = 0
    next_after_seq: int | None = None
    next_before_seq: int | None = None
    # With `seqs`: what of them the page did not reach, to read on with (`seqs=...`).
    next_seqs: str | None = None


class AppendedMessage(_Model):
    id: str
    seq: int
    token_count: int


class AppendResult(_Model):
    """The stored messages (`id`, `seq`, `token_count`, in the order sent) and the budget.

    `created` is what the answer that arrived says: True (HTTP 201) when it stored at
    least one message, False (HTTP 200) when every id was stored before. It does not
    say whether this call stored them: when an attempt's answer is lost and the retry
    is a replay, the messages were stored by this call, once, and `created` is False;
    it is also False when another call (or process) had sent the same ids first.
    """

    messages: list[AppendedMessage]
    budget: Budget
    created: bool = True


class TailDeleteResult(_Model):
    """What `DELETE /sessions/{id}/messages?from_seq=N` removed, in log order."""

    deleted_count: int
    messages: list[Message] = Field(default_factory=list)
    last_seq: int
    budget: Budget | None = None


class ClearResult(_Model):
    deleted_count: int
    last_seq: int = 0
    budget: Budget | None = None


class ContextUsage(_Model):
    input_tokens: int
    budget: int | None = None
    status: str | None = None
    tokenizer_mode: str | None = None
    breakdown: dict[str, int] = Field(default_factory=dict)
    stable_prefix_tokens: int | None = None
    stable_prefix_messages: int | None = None
    recent_tokens: int | None = None
    # Report it back with the provider's count (`report_usage`) to calibrate estimates.
    uncalibrated_input_tokens: int | None = None
    calibration_factor: float | None = None
    # The call's part of the bill: of input_tokens, what the provider bills at its
    # cached rate (`cache_provider`'s rules over stable_prefix_tokens); what sending the
    # whole history would have cost; the summariser's tokens since the previous call.
    cached_input_tokens: int | None = None
    cache_provider: str | None = None
    full_history_input_tokens: int | None = None
    summariser_input_tokens: int | None = None
    summariser_output_tokens: int | None = None
    # The session's re-reads so far.
    re_reads: int | None = None
    # The server sends `prefix_id` beside `usage`, not in it; `Context` copies it here
    # so both spellings read the same value.
    prefix_id: str | None = None


class Decision(_Model):
    """What the assembly did with one message of the history (`seq`): `action` is
    kept, previewed, cut, dropped or excluded; `rule` names why, when one decided."""

    seq: int
    action: str
    rule: str | None = None


class ContextSummary(_Model):
    included: bool = False
    through_seq: int | None = None


class Context(_Model):
    """An assembled payload in the requested `format`:

    - `openai`: `messages` and `tools` for `chat.completions.create`;
    - `responses`: `input` and `tools` for `responses.create` (no `messages`);
    - `anthropic`: `system`, `messages` and `tools` for `messages.create`.

    `usage` always counts the Chat Completions payload the budget was fitted to.
    """

    format: str = "openai"
    # list[Any]: they go as they are to an SDK whose parameter types are TypedDicts.
    messages: list[Any] = Field(default_factory=list)
    tools: list[Any] = Field(default_factory=list)
    input: list[Any] | None = None
    system: Any = None
    usage: ContextUsage
    kept_seqs: list[int] = Field(default_factory=list)
    dropped_count: int = 0
    summary: ContextSummary = Field(default_factory=ContextSummary)
    strategy: str | None = None
    over_budget: bool = False
    warnings: list[Any] = Field(default_factory=list)
    decisions: list[Decision] = Field(default_factory=list)
    # Names this payload; the clients send it back as the stream's `previous_prefix_id`.
    prefix_id: str | None = None
    # With recall on: `{"left_out_count": n, "left_out": [[first, last], ...]}`.
    recall: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _usage_names_the_prefix(self) -> Context:
        if self.usage.prefix_id is None:
            self.usage.prefix_id = self.prefix_id
        return self


class BudgetPreview(_Model):
    budget: Budget
    current: Budget
    added_tokens: int
    fits: bool


class UsageReport(_Model):
    """The session's calibration after a usage report (`factor`, the last report's
    error before and after, ...)."""

    calibration: dict[str, Any]
    # The provider's cached figure replaced the call's estimate in the session's bill.
    bill_replaced: bool = False


class CompactResult(_Model):
    """202 `{job_id, status}`, or with `wait` the finished job; a dry run's plan."""

    job_id: str | None = None
    status: str | None = None
    compaction_metadata: dict[str, Any] | None = None
    # The quality gate of the finished job: `scores` per probe kind, what it `dropped`
    # and `caught` (the server's guide, "The quality gate").
    gate: dict[str, Any] | None = None
    dry_run: bool = False
    would: str | None = None


class CompactionState(_Model):
    compacted_context: Any = None
    summary: Any = None
    last_compaction_seq: int = 0
    compaction_metadata: dict[str, Any] | None = None
    memory_flush_candidates: list[dict[str, Any]] = Field(default_factory=list)
    jobs: list[dict[str, Any]] = Field(default_factory=list)
    compaction_count: int = 0
    # The job `revert_compaction` would undo now (the latest stored compaction), if any.
    revertable_job_id: str | None = None


class RevertResult(_Model):
    """What `revert_compaction` put back: the watermark restored, and whether a previous
    summary came back (False: the session has none again)."""

    job_id: str
    watermark_restored: int
    watermark_reverted: int
    last_compaction_seq: int
    summary_restored: bool
    compaction_count: int = 0
    cancelled_jobs: list[str] = Field(default_factory=list)
    reverted_at: datetime | None = None


class Event(_Model):
    id: int
    type: str
    data: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime | None = None


class EventPage(_Model):
    events: list[Event]
    next_after_id: int | None = None


class Lease(_Model):
    lock_token: str
    fencing_token: int
    expires_at: datetime
    owner: str | None = None


class TokenCount(_Model):
    model: str
    tokenizer: str
    tokenizer_mode: str
    total: int
    text: int | None = None
    messages: int | None = None
    tools: int | None = None


class Health(_Model):
    status: str
