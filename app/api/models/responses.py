"""Pydantic models of the HTTP API's answers, for its OpenAPI description.

The requests are in app/api/models/requests.py; both
describe what the handlers do and validate nothing per request (schemas.py says
how they are wired).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.models.bill import RE_READS_DESCRIPTION, SessionBill, UsageBill
from app.core.limits import Format, Mode, Role

_OPEN = ConfigDict(extra="allow")


class ErrorInfo(BaseModel):
    """A failed model call (assistant) or tool call (tool)."""

    model_config = _OPEN

    type: str
    message: str


BUDGET: dict[str, Any] = {
    "status": "ok",
    "current_tokens": 36,
    "usable_budget": 124928,
    "warn_threshold": 99942,
    "compact_threshold": 112435,
    "context_limit": 128000,
    "tokenizer_mode": "exact",
}


# --- answers ------------------------------------------------------------------------


class Budget(BaseModel):
    """Budget status of SPEC §4."""

    model_config = ConfigDict(extra="allow", json_schema_extra={"examples": [BUDGET]})

    status: str = Field(description="ok, warn or compact_needed")
    current_tokens: int
    usable_budget: int
    warn_threshold: int
    compact_threshold: int
    context_limit: int
    tokenizer_mode: str = Field(description="exact or estimate")


class StoredRef(BaseModel):
    model_config = _OPEN

    id: str
    seq: int
    token_count: int


class AppendOut(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {"messages": [{"id": "m-1", "seq": 1, "token_count": 6}], "budget": BUDGET}
            ]
        },
    )

    messages: list[StoredRef]
    budget: Budget


class StoredMessage(BaseModel):
    """A logged message: the message as sent (unknown fields included) plus what contextd keeps."""

    model_config = _OPEN

    role: Role
    content: Any = None
    id: str
    seq: int
    token_count: int
    created_at: datetime
    pinned: bool
    include_in_context: bool
    mode: Mode | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None
    error: ErrorInfo | None = None


class TextRange(BaseModel):
    model_config = _OPEN

    unit: Literal["char", "line"]
    start: int
    end: int
    total: int


class MessageOut(StoredMessage):
    range: TextRange | None = Field(
        None,
        description="where `content` sits in the message's text, when it is a part of it "
        "(a char or line range asked, or a cut to a read's `max_chars`)",
    )


class MessagePage(BaseModel):
    model_config = _OPEN

    messages: list[MessageOut]
    next_after_seq: int | None
    next_before_seq: int | None
    next_seqs: str | None = Field(
        None, description="with `seqs`: what of them this page did not reach, to read on with"
    )
    last_seq: int


class DeletedTail(BaseModel):
    model_config = _OPEN

    deleted_count: int
    messages: list[StoredMessage] = Field(description="the deleted messages, in log order")
    last_seq: int
    budget: Budget


class Cleared(BaseModel):
    model_config = _OPEN

    deleted_count: int
    last_seq: int
    budget: Budget


class BudgetPreview(BaseModel):
    model_config = _OPEN

    budget: Budget = Field(description="after appending the messages")
    current: Budget
    added_tokens: int
    fits: bool


class SessionStats(BaseModel):
    model_config = _OPEN

    message_counts: dict[str, int]
    last_seq: int
    last_compaction_seq: int
    context_tokens: int
    token_calibration: dict[str, Any] | None = None
    re_reads: int = Field(0, description=RE_READS_DESCRIPTION)
    bill: SessionBill | None = None


class Lease(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {
                    "lock_token": "zLYVLNERreCRrwXAy3nE6edL-epxC4Q4",
                    "fencing_token": 1,
                    "expires_at": "2026-11-23T11:47:53.726686+00:00",
                    "owner": "agent-1",
                }
            ]
        },
    )

    lock_token: str
    fencing_token: int
    expires_at: datetime
    owner: str


class Session(BaseModel):
    model_config = ConfigDict(extra="allow", protected_namespaces=())

    id: str
    model: str | None
    effective_model: str
    context_limit: int
    system_prompt: str | None
    tools: list[dict[str, Any]]
    strategy: str | None
    anchors: list[str]
    auto_compact: bool
    recall: bool = Field(False, description="payloads carry the recall tool and note")
    compaction: dict[str, Any]
    metadata: dict[str, Any]
    tokenizer: str
    stats: SessionStats
    last_seq: int
    last_compaction_seq: int
    lease: dict[str, Any] | None = Field(description="the live lease (its token is not shown)")
    budget: Budget
    created_at: datetime
    updated_at: datetime


class SessionPage(BaseModel):
    model_config = _OPEN

    sessions: list[Session]
    next_cursor: str | None


class Event(BaseModel):
    model_config = _OPEN

    id: int
    type: str
    data: dict[str, Any] | None
    created_at: datetime


class EventPage(BaseModel):
    model_config = _OPEN

    events: list[Event]
    next_after_id: int | None


class ContextUsage(UsageBill):
    model_config = _OPEN

    input_tokens: int
    budget: int
    tokenizer_mode: str
    breakdown: dict[str, int]
    status: str
    stable_prefix_tokens: int | None = Field(
        None, description="tokens at the start identical to the previous payload (cacheable)"
    )
    stable_prefix_messages: int | None = None
    recent_tokens: int = Field(
        0,
        description="tokens of the newest contiguous run of the history the payload holds "
        "(what the agent just did; a trim keeps it before any older prefix)",
    )
    uncalibrated_input_tokens: int = Field(
        description="input_tokens before the session's calibration: report it back with "
        "the provider's count (POST /sessions/{id}/usage)"
    )
    calibration_factor: float = Field(
        description="the factor the counts were scaled by (1 for exact tokenizers)"
    )


class LeftOut(BaseModel):
    model_config = _OPEN

    left_out_count: int = Field(description="messages of the history the payload leaves out")
    left_out: list[list[int]] = Field(description="their seqs, as [first, last] ranges")


class Decision(BaseModel):
    model_config = _OPEN

    seq: int
    action: str = Field(description="kept, previewed, cut, dropped or excluded")
    rule: str | None = None


class ContextPayload(BaseModel):
    """The budget-fitted payload. `format` decides the provider part: `openai` has
    `messages` (+ `tools`), `responses` has `input` items, `anthropic` has `system`
    blocks and Messages-API `messages`."""

    model_config = _OPEN

    format: Format
    usage: ContextUsage
    kept_seqs: list[int]
    dropped_count: int
    summary: dict[str, Any]
    strategy: str
    over_budget: bool
    warnings: list[Any]
    decisions: list[Decision]
    prefix_id: str | None = Field(None, description="send back as previous_prefix_id")
    recall: LeftOut | None = Field(
        None, description="with recall on: what the payload leaves out, which the note names"
    )
    messages: list[dict[str, Any]] | None = None
    input: list[dict[str, Any]] | None = None
    system: list[dict[str, Any]] | str | None = None
    tools: list[dict[str, Any]] | None = None


class TokenCount(BaseModel):
    model_config = ConfigDict(extra="allow", protected_namespaces=())

    model: str
    tokenizer: str
    tokenizer_mode: str
    text: int | None = None
    messages: int | None = None
    tools: int | None = None
    total: int


class UsageReport(BaseModel):
    model_config = _OPEN

    calibration: dict[str, Any]
    bill_replaced: bool = Field(
        False, description="the provider's cached figure replaced the estimate"
    )
