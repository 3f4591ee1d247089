"""Assembling a session's payload: read the window, run the engine, record what was trimmed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.api.deps import Database
from app.context import (
    HISTORY_READ_FACTOR,
    AssemblyRequest,
    SummaryBlock,
    assemble,
    formats,
    memo,
    preview,
    signals,
)
from app.context import repository as repo
from app.context.types import DEFAULT_STRATEGY
from app.errors import Conflict, invalid
from app.events import EventWriter
from app.observability import metrics
from app.sessions.service import budget_of, effective_model, get_session, session_compaction
from app.settings import Settings
from app.tokens import calibration, get_counter


def clear_caches() -> None:
    """Forget every per-process cache of assembly: window rows, per-message results,
    previews and cuts, signals.

    Only benchmarks and tests need this (to measure or check a first call); the
    caches are correct across sessions, tenants and appends without it.
    """
    repo.clear_cache()
    memo.clear_cache()
    preview.clear_cache()
    signals.clear_cache()


@dataclass(frozen=True, slots=True)
class ContextParams:
    """Per-call overrides; None means "the session's own"."""

    max_tokens: int | None = None
    strategy: str | None = None
    mode: str | None = None
    reserve_output_tokens: int = 0
    preview_limit_tokens: int | None = None
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    dynamic_context: list[Any] = field(default_factory=list)
    format: str = formats.DEFAULT_FORMAT


async def payload(
    database: Database,
    events: EventWriter,
    tenant: str,
    sid: str,
    params: ContextParams,
    settings: Settings,
) -> dict[str, Any]:
    """What `GET` and `POST /context` answer: read-only, so outside any transaction."""
    async with database.reading() as db:
        return await build(db, tenant, sid, params, settings, events)


async def build(
    db: AsyncSession,
    tenant: str,
    sid: str,
    params: ContextParams,
    settings: Settings,
    events: EventWriter,
) -> dict[str, Any]:
    """The payload; an assembly that trimmed anything adds a `context.compressed` event
    to `events` (written in the background)."""
    row = await get_session(db, tenant, sid)
    compaction = session_compaction(row, settings)
    if params.max_tokens is not None and params.max_tokens > compaction.context_limit:
        raise invalid(
            "max_tokens", f"exceeds the session's context limit ({compaction.context_limit})"
        )
    budget = params.max_tokens or compaction.usable_budget
    status = budget_of(row, settings).status
    if not compaction.fail_open and status == "compact_needed":
        failure = await repo.last_compaction_failure(db, tenant, sid)
        if failure is not None:
            raise Conflict(
                "compaction_failed",
                f"the session needs compaction and its last one failed ({failure}); with "
                "COMPACTION_FAIL_OPEN false no trimmed payload is served: POST "
                f"/sessions/{sid}/compact to try again",
            )
    counter = get_counter(effective_model(row, settings))
    # Estimated counts run calibrated: fit the uncalibrated payload to a scaled budget.
    factor = calibration.factor_of(row.token_calibration, counter.mode)
    raw_budget, raw_reserve = calibration.raw_budget(budget, params.reserve_output_tokens, factor)
    history = await repo.window(db, row, HISTORY_READ_FACTOR * raw_budget)
    summary = SummaryBlock(row.summary_text, row.last_compaction_seq) if row.summary_text else None
    result = assemble(
        AssemblyRequest(
            history=history,
            counter=counter,
            budget=raw_budget,
            session_id=sid,
            system=params.system if params.system is not None else row.system_prompt,
            tools=params.tools if params.tools is not None else row.tools,
            dynamic_context=params.dynamic_context,
            summary=summary,
            mode=params.mode,
            reserve_output_tokens=raw_reserve,
            preview_limit_tokens=params.preview_limit_tokens or settings.tool_preview_tokens,
            strategy=params.strategy or row.strategy or DEFAULT_STRATEGY,
            history_from_seq=row.last_compaction_seq + 1,
        )
    )
    body = result.to_dict()
    body["usage"]["status"] = status
    calibration.calibrate_usage(body["usage"], factor, budget - params.reserve_output_tokens)
    trimmed = result.dropped_count > 0 or any(
        d.action in ("preview", "cut") for d in result.decisions
    )
    metrics.CONTEXT_ASSEMBLED.labels(result.strategy, str(trimmed).lower()).inc()
    if trimmed:
        metrics.CONTEXT_DROPPED_MESSAGES.inc(result.dropped_count)
        data = {
            "strategy": result.strategy,
            "original_count": row.last_seq - row.last_compaction_seq,
            "kept_count": len(result.kept_seqs),
            "dropped_count": result.dropped_count,
            "previews": sum(1 for d in result.decisions if d.action in ("preview", "cut")),
            "input_tokens": result.usage.input_tokens,
            "budget": budget,
            "over_budget": result.over_budget,
        }
        events.add(tenant, sid, "context.compressed", data)
    # The hook where the Chat Completions payload becomes the requested provider format.
    errors = (
        formats.tool_error_flags(history, result.kept_seqs) if params.format == "anthropic" else ()
    )
    return formats.render(body, params.format, tool_errors=errors)
