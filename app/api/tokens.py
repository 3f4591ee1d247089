from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from app.api.deps import DatabaseDep, SessionId, SettingsDep, TenantDep
from app.api.models.responses import TokenCount, UsageReport
from app.api.openapi import answers
from app.core.errors import invalid
from app.core.limits import MODEL_NAME_MAX
from app.core.tokens import REPLY_PRIMING, get_counter
from app.messages.validation import parse_batch
from app.sessions import usage

router = APIRouter(tags=["tokens"])


class CountIn(BaseModel):
    model_config = ConfigDict(extra="forbid", protected_namespaces=())
    model: str | None = Field(None, min_length=1, max_length=MODEL_NAME_MAX)
    text: str | None = None
    messages: list[Any] | None = None
    tools: list[dict[str, Any]] | None = None


@router.post(
    "/tokens/count",
    summary="Count tokens of text, messages and/or tools for a model",
    responses=answers({200: (TokenCount, "the counts, per part and in total")}),
)
async def count_tokens(body: CountIn, settings: SettingsDep) -> dict[str, Any]:
    """`messages` counts include per-message overhead and the reply priming, as a request would."""
    if body.text is None and body.messages is None and body.tools is None:
        raise invalid("text", "give at least one of text, messages, tools")
    model = body.model or settings.default_model
    counter = get_counter(model)
    out: dict[str, Any] = {
        "model": model,
        "tokenizer": counter.name,
        "tokenizer_mode": counter.mode,
    }
    total = 0
    if body.text is not None:
        out["text"] = counter.count_text(body.text)
        total += out["text"]
    if body.messages is not None:
        batch = parse_batch(
            body.messages,
            max_messages=settings.max_messages_per_append,
            max_message_bytes=settings.max_message_bytes,
        )
        out["messages"] = sum(counter.count_message(m.body) for m in batch) + REPLY_PRIMING
        total += out["messages"]
    if body.tools is not None:
        from app.context.validation import as_tools

        as_tools(body.tools)
        out["tools"] = counter.count_tools(body.tools)
        total += out["tools"]
    out["total"] = total
    return out


@router.post(
    "/sessions/{session_id}/usage",
    summary="Report the provider's usage for a payload: calibrates the session's estimate",
    responses=answers({200: (UsageReport, "the session's calibration after the report")}),
)
async def report_usage(
    session_id: SessionId,
    body: usage.UsageIn,
    db: DatabaseDep,
    tenant: TenantDep,
    settings: SettingsDep,
) -> dict[str, Any]:
    """For sessions counted by estimate (`tokenizer_mode: "estimate"`: Claude, Gemini, …)
    each report updates the session's calibration factor, which then scales its
    counts, budget status and the budget payloads are fitted to. Exact-tokenizer
    sessions record the report (the error is shown) and keep factor 1. Fenced by
    the session's lease like any write. Returns the calibration with the last
    report's error before and after. With the provider's cached figure
    (`cached_input_tokens`, or Anthropic's `cache_read_input_tokens`) and the
    `usage.cached_input_tokens` of the payload that was sent
    (`estimated_cached_input_tokens`), the provider's figure replaces the estimate in
    the session's bill (`stats.bill`; `bill_replaced` says so)."""
    async with db.transaction() as s:
        return await usage.report(s, tenant, session_id, body, settings)
