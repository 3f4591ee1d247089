"""Assembling a session's payload: read the window, run the engine, record what was trimmed."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any

from pydantic_core import to_json

from app.context import (
    billing,
    formats,
    making,
    prefix,
    recall,
    session_read,
    stability,
    summary_switch,
)
from app.context import trim_state_store as layouts
from app.context.caches import Caches
from app.context.params import ContextParams
from app.context.strategies import get_strategy
from app.context.strategies.base import NoSelection
from app.context.trim_state import Layout
from app.context.types import AssembledContext, TokenCounter
from app.core.budget import budget_of, effective_model, session_compaction
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
    call = making.Stream.of(row, params, settings, counter, budget)
    recalls = recall.enabled(params.recall, row.recall)
    stored, replaced = layouts.stored(streams, call.key)
    inner = get_strategy(call.strategy)
    made: making.Made | None = None

    async def make(state: SessionRow, layout: Layout, *, replay_only: bool = False) -> making.Made:
        return await making.make(
            db, state, layout, inner, call, counter, params, settings, caches, recalls,
            replay_only=replay_only,
        )  # fmt: skip

    if stored is not None and inner.backfill and summary_switch.may_wait(stored, row):
        # An automatic compaction's summary waits for the stream's next trim.
        earlier = await summary_switch.earlier_row(db, row, stored)
        if earlier is not None:
            # NoSelection: it no longer holds or fits, and the new summary comes now.
            with contextlib.suppress(NoSelection):
                made = await make(earlier, stored, replay_only=True)
    if made is None:
        in_force = stored if stored is not None and stored.holds_for(row) else None
        made = await make(row, in_force or Layout.untrimmed(row))
    # `row` is the state the payload was made from from here on.
    row, layout, stable, history, result = made
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
