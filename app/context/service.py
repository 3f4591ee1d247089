"""Assembling a session's payload: read the window, run the engine, record what was trimmed."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json

from app.context import (
    HISTORY_READ_FACTOR,
    AssemblyRequest,
    SummaryBlock,
    assemble,
    billing,
    formats,
    prefix,
    recall,
    session_read,
    stability,
)
from app.context import repository as repo
from app.context import trim_state_store as layouts
from app.context.caches import Caches
from app.context.params import ContextParams
from app.context.strategies import get_strategy
from app.context.trim_state import Layout, params_key
from app.context.types import DEFAULT_STRATEGY, AssembledContext, TokenCounter
from app.context.validation import validate_strategy
from app.core.budget import budget_of, effective_model, session_compaction
from app.core.conversation import LoggedMessage
from app.core.errors import Conflict, invalid
from app.core.settings import Settings
from app.core.tokens import calibration, get_counter
from app.db.database import Database, Driver
from app.db.models import SessionRow
from app.observability import metrics
from app.observability.events import EventWriter


async def payload(
    database: Database,
    events: EventWriter,
    tenant: str,
    sid: str,
    params: ContextParams,
    settings: Settings,
    caches: Caches,
) -> dict[str, Any]:
    """The payload, read-only, so outside any transaction."""
    async with database.payloads() as db:
        return await build(db, tenant, sid, params, settings, events, caches)


async def payload_json(
    database: Database,
    events: EventWriter,
    tenant: str,
    sid: str,
    params: ContextParams,
    settings: Settings,
    caches: Caches,
) -> bytes:
    """`GET` and `POST /sessions/{id}/context`, whole, once their parameters are read
    (app/context/params.py): the payload as JSON. Its one HTTP entrance is
    app/api/context_lane.py. Encoded once by pydantic-core (the encoder FastAPI's
    response model used, without its validation pass)."""
    return to_json(await payload(database, events, tenant, sid, params, settings, caches))


async def build(
    db: Driver,
    tenant: str,
    sid: str,
    params: ContextParams,
    settings: Settings,
    events: EventWriter,
    caches: Caches,
) -> dict[str, Any]:
    """The payload; an assembly that trimmed anything adds a `context.compressed` event
    to `events` (written in the background)."""
    row, streams = await session_read.payload_session(db, tenant, sid)
    budget, status = await _budget(db, tenant, sid, row, params, settings)
    counter = get_counter(effective_model(row, settings))
    call = _Stream.of(row, params, settings, counter, budget)
    recalls = recall.enabled(params.recall, row.recall)
    stored, replaced = layouts.stored(streams, call.key)
    in_force = stored if stored is not None and stored.holds_for(row) else None
    layout = in_force or Layout.untrimmed(row)
    inner = get_strategy(call.strategy)
    below = _below_tokens(row, call) if inner.backfill else 0
    history, complete_from, missing = await _read_history(
        db, row, layout, call.raw_budget, caches, below
    )
    stable = stability.StableStrategy(
        inner,
        # None: too much of what the layout needs lies beyond the window, trim afresh.
        layout if missing is not None else None,
        row,
        call.raw_budget - call.raw_reserve,
        settings.trim_target_ratio,
    )
    summary = (
        SummaryBlock(row.summary_text, row.last_compaction_seq, row.summary_carries_pinned)
        if row.summary_text
        else None
    )
    result = assemble(
        AssemblyRequest(
            history=history,
            counter=counter,
            budget=call.raw_budget,
            session_id=sid,
            system=params.system if params.system is not None else row.system_prompt,
            tools=_tools(params, row, recalls),
            dynamic_context=params.dynamic_context,
            summary=summary,
            mode=params.mode,
            reserve_output_tokens=call.raw_reserve,
            preview_limit_tokens=call.preview_limit,
            strategy=stable,
            history_from_seq=row.last_compaction_seq + 1,
            history_complete_from=complete_from,
            caches=caches,
        )
    )
    retrimmed = stable.trimmed is not None and (stored is None or stored.id != stable.trimmed.id)
    if retrimmed and stable.trimmed is not None and not params.observe:
        # The only write of a payload call: a trim fixes the stream's new layout.
        await layouts.store(db, row, call.key, stable.trimmed, replaced=layout)
    previous = [x for x in (layout, stored, replaced, Layout.untrimmed(row)) if x is not None]
    shared = _shared_prefix(stable, result, previous, row, counter, params.previous_prefix_id)
    note = _recall_note(stable, result, row, counter) if recalls else None
    body = _body(result, status, shared, call.factor, budget - params.reserve_output_tokens, note)
    billing.bill_call(
        body["usage"], events, tenant, sid, row, params, effective_model(row, settings)
    )
    if not params.observe:
        _record(events, tenant, sid, row, result, budget, retrimmed)
    # The hook where the Chat Completions payload becomes the requested provider format.
    errors = (
        formats.tool_error_flags(history, result.kept_seqs) if params.format == "anthropic" else ()
    )
    return formats.render(body, params.format, tool_errors=errors)


async def _budget(
    db: Driver,
    tenant: str,
    sid: str,
    row: SessionRow,
    params: ContextParams,
    settings: Settings,
) -> tuple[int, str]:
    """The call's input budget and the session's budget status; refuses a `max_tokens`
    over the context limit, and a trimmed payload when compaction is due, failed, and
    may not fail open."""
    compaction = session_compaction(row, settings)
    if params.max_tokens is not None and params.max_tokens > compaction.context_limit:
        raise invalid(
            "max_tokens", f"exceeds the session's context limit ({compaction.context_limit})"
        )
    budget = params.max_tokens or compaction.usable_budget
    status = budget_of(row, settings).status
    if not compaction.fail_open and status == "compact_needed":
        failure = await session_read.last_compaction_failure(db, tenant, sid)
        if failure is not None:
            raise Conflict(
                "compaction_failed",
                f"the session needs compaction and its last one failed ({failure}); with "
                "COMPACTION_FAIL_OPEN false no trimmed payload is served: POST "
                f"/sessions/{sid}/compact to try again",
            )
    return budget, status


@dataclass(frozen=True, slots=True)
class _Stream:
    """The call's selection parameters in the counter's own (uncalibrated) tokens, and
    the payload stream they name."""

    factor: float
    raw_budget: int
    raw_reserve: int
    strategy: str
    preview_limit: int
    key: str

    @classmethod
    def of(
        cls,
        row: SessionRow,
        params: ContextParams,
        settings: Settings,
        counter: TokenCounter,
        budget: int,
    ) -> _Stream:
        # Estimated counts run calibrated: fit the uncalibrated payload to a scaled budget.
        factor = calibration.factor_of(row.token_calibration, counter.mode)
        raw_budget, raw_reserve = calibration.raw_budget(
            budget, params.reserve_output_tokens, factor
        )
        if recall.enabled(params.recall, row.recall):
            raw_reserve += recall.reserve(counter)  # room for the note, kept like output
        strategy_name = validate_strategy(params.strategy or row.strategy or DEFAULT_STRATEGY)
        preview_limit = params.preview_limit_tokens or settings.tool_preview_tokens
        # The payload stream: the parameters that shape the history selection. Not the
        # format: every format renders the same selection, so they share one stream.
        key = params_key(
            strategy=strategy_name,
            budget=raw_budget,
            reserve=raw_reserve,
            mode=params.mode,
            preview=preview_limit,
            tokenizer=counter.name,
        )
        return cls(factor, raw_budget, raw_reserve, strategy_name, preview_limit, key)


def _below_tokens(row: SessionRow, call: _Stream) -> int:
    """How far below the watermark the window reads (app/context/backfill.py): what the
    budget leaves after the effective history, times the factor every window is read
    with (a unit's output may be sent as a preview, smaller than logged); the effective
    history and this together never exceed the read of a session without a summary."""
    if row.last_compaction_seq <= 0 or not row.summary_text:
        return 0
    effective = row.context_tokens - row.watermark_context_tokens
    return HISTORY_READ_FACTOR * max(0, call.raw_budget - call.raw_reserve - effective)


async def _read_history(
    db: Driver,
    row: SessionRow,
    layout: Layout,
    raw_budget: int,
    caches: Caches,
    below_tokens: int = 0,
) -> tuple[Sequence[LoggedMessage], int | None, list[int] | None]:
    """The window of the log, plus what `layout` needs beyond it; the seq from which every
    row was read; and the seqs that were missing from the window (None: too many to
    fetch one by one)."""
    read = repo.LogRead(row, caches.windows)
    await read.window(db, HISTORY_READ_FACTOR * raw_budget, below_tokens)
    history = read.messages()
    missing = stability.missing_seqs(layout, row, history)
    if missing:
        await read.seqs(db, missing)
        history = read.messages()
    read.keep()
    return history, read.complete_from, missing


def _shared_prefix(
    stable: stability.StableStrategy,
    result: AssembledContext,
    previous: list[Layout],
    row: SessionRow,
    counter: TokenCounter,
    echoed: str | None,
) -> prefix.SharedPrefix:
    sent = sum(len(u.messages) for u, _ in stable.units_sent())
    breakdown = result.usage.breakdown
    return prefix.shared_prefix(
        stable=stable,
        previous=previous,
        head=result.messages[: len(result.messages) - sent],
        tools=result.tools,
        tools_tokens=breakdown.tools,
        # The head's messages: system block, dynamic, summary.
        head_tokens=breakdown.system + breakdown.dynamic + breakdown.summary,
        counter=counter,
        last_seq=row.last_seq,
        echoed=echoed,
    )


def _tools(params: ContextParams, row: SessionRow, recalls: bool) -> list[dict[str, Any]]:
    tools = params.tools if params.tools is not None else row.tools
    return recall.with_tool(tools) if recalls else tools


def _recall_note(
    stable: stability.StableStrategy,
    result: AssembledContext,
    row: SessionRow,
    counter: TokenCounter,
) -> Callable[[dict[str, Any]], None]:
    """recall.add_note for this payload: the note goes after the head (the messages
    before the history units sent)."""
    sent = sum(len(u.messages) for u, _ in stable.units_sent())
    head = len(result.messages) - sent
    return functools.partial(
        recall.add_note, result=result, head_messages=head, last_seq=row.last_seq, counter=counter
    )


def _body(
    result: AssembledContext,
    status: str,
    shared: prefix.SharedPrefix,
    factor: float,
    input_limit: int,
    note: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    body = result.to_dict()
    body["usage"]["status"] = status
    body["usage"]["stable_prefix_tokens"] = shared.tokens
    body["usage"]["stable_prefix_messages"] = shared.messages
    body["prefix_id"] = shared.prefix_id
    if note is not None:
        note(body)  # counted before calibration, like every other part
    calibration.calibrate_usage(body["usage"], factor, input_limit)
    return body


def _record(
    events: EventWriter,
    tenant: str,
    sid: str,
    row: SessionRow,
    result: AssembledContext,
    budget: int,
    retrimmed: bool,
) -> None:
    """The call's metrics, and its `context.compressed` event when it trimmed."""
    trimmed = result.dropped_count > 0 or any(
        d.action in ("preview", "cut") for d in result.decisions
    )
    metrics.CONTEXT_ASSEMBLED.labels(result.strategy, str(trimmed).lower()).inc()
    # An event when the selection changed (a trim), not on every call that replays it.
    if trimmed and retrimmed:
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
