"""contextd-client: a typed Python client for contextd, the context service for LLM agents.

    from contextd_client import ContextdClient

    with ContextdClient("http://127.0.0.1:8080") as ctx:
        ctx.append("demo", [{"role": "user", "content": "hi"}])
        payload = ctx.context("demo")   # .messages go to chat.completions.create

Adapters, each an optional extra: `contextd_client.agents` (OpenAI Agents SDK,
`pip install contextd-client[agents]`) and `contextd_client.langchain`
(LangChain v1, `pip install contextd-client[langchain]`).
"""

from contextd_client._api import SessionSettings, new_message_id, with_ids
from contextd_client._async_client import AsyncContextdClient
from contextd_client._client import ContextdClient
from contextd_client._exceptions import (
    APIError,
    ClientClosed,
    Conflict,
    ContextdError,
    FieldError,
    IdempotencyConflict,
    LockHeld,
    LockRequired,
    NotFound,
    PayloadTooLarge,
    ServiceUnavailable,
    StaleLockToken,
    TransportError,
    Unauthorized,
    ValidationFailed,
)
from contextd_client._lease import HeldLease
from contextd_client._models import (
    AppendedMessage,
    AppendResult,
    Budget,
    BudgetPreview,
    ClearResult,
    CompactionState,
    CompactResult,
    Context,
    ContextSummary,
    ContextUsage,
    Decision,
    Event,
    EventPage,
    Health,
    Lease,
    LeaseHolder,
    Message,
    MessagePage,
    RevertResult,
    SearchHit,
    SearchResult,
    Session,
    SessionPage,
    SessionStats,
    TailDeleteResult,
    TokenCount,
    UsageReport,
)
from contextd_client._retry import Retry

__version__ = "0.1.0"

__all__ = [
    "APIError",
    "AppendResult",
    "AppendedMessage",
    "AsyncContextdClient",
    "Budget",
    "BudgetPreview",
    "ClearResult",
    "ClientClosed",
    "CompactResult",
    "CompactionState",
    "Conflict",
    "Context",
    "ContextSummary",
    "ContextUsage",
    "ContextdClient",
    "ContextdError",
    "Decision",
    "Event",
    "EventPage",
    "FieldError",
    "Health",
    "HeldLease",
    "IdempotencyConflict",
    "Lease",
    "LeaseHolder",
    "LockHeld",
    "LockRequired",
    "Message",
    "MessagePage",
    "NotFound",
    "PayloadTooLarge",
    "Retry",
    "RevertResult",
    "SearchHit",
    "SearchResult",
    "ServiceUnavailable",
    "Session",
    "SessionPage",
    "SessionSettings",
    "SessionStats",
    "StaleLockToken",
    "TailDeleteResult",
    "TokenCount",
    "TransportError",
    "Unauthorized",
    "UsageReport",
    "ValidationFailed",
    "new_message_id",
    "with_ids",
]
