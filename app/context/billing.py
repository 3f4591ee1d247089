"""A payload call's part of the session's bill (SPEC §4): the figures of
app/core/bill.py in its `usage`, and the sums handed to the event writer, which adds
them to the session row in its next batch (app/observability/events.py)."""

from __future__ import annotations

from typing import Any

from app.context.params import ContextParams
from app.core import bill
from app.core.tokens import calibration
from app.db.models import SessionRow
from app.observability import metrics
from app.observability.events import EventWriter


def bill_call(
    usage: dict[str, Any],
    events: EventWriter,
    tenant: str,
    sid: str,
    row: SessionRow,
    params: ContextParams,
    model: str,
) -> None:
    """The call's part of the bill in `usage` (app/core/bill.py), added to the
    session's (an `observe` call is not a call: it reports and adds nothing)."""
    now = events.now()
    recent = events.recent_call(tenant, sid)
    last = row.bill_last_call_at
    seen_in, seen_out = row.bill_summariser_input_seen, row.bill_summariser_output_seen
    if recent is not None:
        last = recent[0] if last is None else max(last, recent[0])
        seen_in, seen_out = max(seen_in, recent[1]), max(seen_out, recent[2])
    provider = bill.provider_of(params.format, model)
    since = (now - last).total_seconds() if last is not None else None
    factor = float(usage.get("calibration_factor") or 1.0)
    breakdown = usage["breakdown"]
    # The whole history instead of the selection: every in-context message of the log,
    # compacted ones included, beside the same system block, tools and dynamic context.
    head = (
        breakdown["system"]
        + breakdown["tools"]
        + breakdown["dynamic"]
        + breakdown.get("reply_priming", 0)
    )
    call = bill.CallBill(
        provider=provider,
        input_tokens=int(usage["input_tokens"]),
        cached_input_tokens=bill.cached_tokens(
            provider, int(usage["stable_prefix_tokens"]), since, model
        ),
        full_history_input_tokens=head + calibration.calibrated(row.context_tokens, factor),
        summariser_input_tokens=max(row.summariser_input_tokens - seen_in, 0),
        summariser_output_tokens=max(row.summariser_output_tokens - seen_out, 0),
    )
    usage.update(call.usage_fields())
    usage["re_reads"] = row.re_reads
    if params.observe:
        return
    events.bill(
        tenant,
        sid,
        input_tokens=call.input_tokens,
        cached_input_tokens=call.cached_input_tokens,
        full_history_input_tokens=call.full_history_input_tokens,
        at=now,
        summariser_seen=(row.summariser_input_tokens, row.summariser_output_tokens),
    )
    metrics.BILL_TOKENS.labels("input").inc(call.input_tokens)
    metrics.BILL_TOKENS.labels("cached_input").inc(call.cached_input_tokens)
    metrics.BILL_TOKENS.labels("full_history_input").inc(call.full_history_input_tokens)
    if call.summariser_input_tokens or call.summariser_output_tokens:
        metrics.BILL_TOKENS.labels("summariser_input").inc(call.summariser_input_tokens)
        metrics.BILL_TOKENS.labels("summariser_output").inc(call.summariser_output_tokens)
