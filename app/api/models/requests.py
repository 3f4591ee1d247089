"""Pydantic models of the HTTP API's bodies, for its OpenAPI description (issue 10 item 2).

They describe what the handlers accept and answer, so that `/openapi.json` gives
generated clients and schemathesis real shapes instead of untyped objects:

- messages are a discriminated union by `role` (`system`, `user`, `assistant`,
  `tool`), each open (`extra="allow"`): unknown fields are stored verbatim;
- the append, budget-preview and context requests;
- every 2xx answer: sessions, message pages, the context payload, budgets,
  compaction jobs and state, leases, events, token counts;
- the problem+json error (`Problem`).

How they are wired (see `app/api/openapi.py`): request bodies that the handlers
read as plain JSON (append, budget preview, POST context) keep their hand-written
validation — it names the faulty field (`messages[3].tool_call_id`), checks what a
schema cannot (tool-call pairing, sizes, NUL characters) and is the append hot path
— and get these models as their documented `requestBody`. Answers are documented
with `responses={status: {"model": ...}}` rather than as `response_model`: the
handlers' `dict[str, Any]` return annotation stays their response model, so answers
go through the same pydantic-core serialisation as before and nothing is validated
against these models per request. (Not `response_model=None` either: FastAPI then
falls back to the pure-Python `jsonable_encoder`, measurably slower on
`/context`: bench/api_overhead.py, since removed, last at 92f0995.)
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.models.responses import ErrorInfo
from app.core.limits import (
    MESSAGE_ID_MAX,
    PREFIX_ID_MAX,
    PREFIX_ID_PATTERN,
    PREVIEW_TOKENS_MIN,
    STRATEGY_NAME_MAX,
    TOKENS_MAX,
    Format,
    Mode,
)
from app.sessions.schemas import LockToken

ContentPart = dict[str, Any]
MessageContent = str | list[ContentPart]

_OPEN = ConfigDict(extra="allow")


class _Flags(BaseModel):
    """contextd's optional per-message flags, inline in the OpenAI message."""

    model_config = _OPEN

    id: str | None = Field(
        None,
        min_length=1,
        max_length=MESSAGE_ID_MAX,
        description="client-chosen id: a retried append with the same id is stored once",
    )
    name: str | None = None
    pinned: bool | None = Field(None, description="always kept in context")
    include_in_context: bool | None = Field(None, description="false: logged, never sent")
    mode: Mode | None = None
    run_id: str | None = None
    metadata: dict[str, Any] | None = None


class SystemMessage(_Flags):
    role: Literal["system"]
    content: MessageContent


class UserMessage(_Flags):
    role: Literal["user"]
    content: MessageContent


class FunctionCall(BaseModel):
    model_config = _OPEN

    name: str = Field(min_length=1)
    arguments: str = Field(description="the arguments as a JSON string, as the model wrote them")


class ToolCall(BaseModel):
    model_config = _OPEN

    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: FunctionCall


class AssistantMessage(_Flags):
    role: Literal["assistant"]
    content: MessageContent | None = None
    tool_calls: list[ToolCall] | None = None
    refusal: str | None = None
    error: ErrorInfo | None = None


class ToolMessage(_Flags):
    role: Literal["tool"]
    tool_call_id: str = Field(min_length=1)
    content: MessageContent
    error: ErrorInfo | None = None


Message = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]

# What dynamic_context accepts besides strings: no tool results (they need a call).
DynamicMessage = Annotated[
    SystemMessage | UserMessage | AssistantMessage, Field(discriminator="role")
]

APPEND_EXAMPLE: dict[str, Any] = {
    "messages": [
        {"role": "user", "content": "Find the bug in app.py", "id": "m-1"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "app.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "def main(): ..."},
    ]
}


class AppendIn(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [APPEND_EXAMPLE]})

    messages: list[Message] = Field(min_length=1)
    lock_token: LockToken | None = Field(None, description="the live lease's token")


class BudgetPreviewIn(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"messages": [{"role": "user", "content": "hi"}]}]}
    )

    messages: list[Message]


class ContextIn(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "system": "You are a careful coding agent.",
                    "dynamic_context": ["Task: make the failing test in tests/test_app.py pass."],
                    "mode": "agent",
                    "max_tokens": 16000,
                    "strategy": "key_messages",
                    "reserve_output_tokens": 1024,
                }
            ]
        },
    )

    system: str | list[SystemMessage] | None = Field(
        None, description="replaces the session's system prompt for this call"
    )
    tools: list[dict[str, Any]] | None = Field(None, description="replaces the session's tools")
    dynamic_context: list[str | DynamicMessage] | None = Field(
        None, description="after the system block, before the summary and history"
    )
    mode: Mode | None = None
    max_tokens: int | None = Field(None, ge=1, le=TOKENS_MAX)
    strategy: str | None = Field(None, max_length=STRATEGY_NAME_MAX)
    reserve_output_tokens: int | None = Field(None, ge=0, le=TOKENS_MAX)
    preview_limit_tokens: int | None = Field(None, ge=PREVIEW_TOKENS_MIN, le=TOKENS_MAX)
    recall: bool | None = Field(
        None, description="the recall tool and the note on what was left out (default: session)"
    )
    format: Format = "openai"
    previous_prefix_id: str | None = Field(
        None,
        max_length=PREFIX_ID_MAX,
        pattern=PREFIX_ID_PATTERN,
        description="the `prefix_id` of this stream's previous payload (exact prefix stability)",
    )


class ContextQuery(BaseModel):
    """The query of `GET /sessions/{id}/context`: documented by the route, and read
    with this model by its entrance (app/api/context_lane.py). A repeated parameter
    counts once (its last value); an unknown one is a 422 naming it, as an unknown
    field of the POST body is: a misspelt `max_token` would otherwise quietly fit the
    payload to the session's whole budget."""

    max_tokens: int | None = Field(
        None, ge=1, le=TOKENS_MAX, description="the input budget (default: the session's)"
    )
    strategy: str | None = Field(None, max_length=STRATEGY_NAME_MAX)
    mode: Mode | None = None
    reserve_output_tokens: int = Field(0, ge=0, le=TOKENS_MAX)
    preview_limit_tokens: int | None = Field(
        None,
        ge=PREVIEW_TOKENS_MIN,
        le=TOKENS_MAX,
        description=(
            "tool outputs over this many tokens are sent as previews (default: the larger "
            "of CONTEXTD_TOOL_PREVIEW_TOKENS and 1/16 of the input budget)"
        ),
    )
    format: Format = Field(
        "openai",
        description=(
            "openai (default): Chat Completions `messages`; responses: Responses API "
            "`input` items; anthropic: Messages API `system` + `messages` with "
            "cache_control breakpoints"
        ),
    )
    previous_prefix_id: str | None = Field(
        None,
        max_length=PREFIX_ID_MAX,
        pattern=PREFIX_ID_PATTERN,
        description=(
            "the `prefix_id` of this stream's previous payload: makes "
            "`usage.stable_prefix_tokens` exact (without it the previous call is assumed "
            "to lack only the newest step)"
        ),
    )
    recall: bool | None = Field(
        None,
        description=(
            "the recall tool among `tools`, and a system note on what the payload leaves "
            "out (default: the session's `recall` setting)"
        ),
    )
