"""The compaction metadata record of SPEC §5 (`schema_version: 1`), stored and emitted as an event.

The runner knows what only it can know (when the job was triggered, the
final context size, whether the memory flush ran); the plan and the engine
outcome supply the rest.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from app.compaction.outcome import SummaryOutcome
from app.compaction.turns import CompactionPlan, NoopReason

SCHEMA_VERSION = 1

Status = Literal["success", "degraded", "failed", "noop"]


def build_metadata(
    plan: CompactionPlan | NoopReason | None,
    outcome: SummaryOutcome | None,
    *,
    triggered_at: datetime,
    compacted_context_tokens: int | None = None,
    flush_skipped: bool = False,
    trimmed_count: int = 0,
    failed_reason: str | None = None,
) -> dict[str, Any]:
    """Metadata for any job end: a plan with its outcome, a noop, or a failure (`failed_reason`)."""
    status: Status
    if failed_reason is not None:
        status = "failed"
    elif isinstance(plan, NoopReason) or plan is None or outcome is None:
        status = "noop"
    else:
        status = outcome.status
    is_plan = isinstance(plan, CompactionPlan)
    meta: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "status": status,
        "preserved_count": plan.preserved_count if isinstance(plan, CompactionPlan) else 0,
        "summarized_count": plan.summarized_count if isinstance(plan, CompactionPlan) else 0,
        "trimmed_count": trimmed_count,
        "flush_skipped": flush_skipped,
        "anchor_validation_passed": outcome.anchor_validation_passed if outcome else None,
        "anchor_retry_used": outcome.anchor_retry_used if outcome else False,
        "triggered_at": triggered_at.isoformat(),
        "compacted_context_tokens": compacted_context_tokens,
        "rolling_summary_input_tokens": outcome.input_tokens if outcome else 0,
    }
    if isinstance(plan, CompactionPlan):
        meta["range"] = {"from_seq": plan.first_seq, "to_seq": plan.new_watermark}
        meta["range_tokens"] = plan.range_tokens
    if isinstance(plan, NoopReason):
        meta["reason"] = plan.code
        meta["detail"] = plan.detail
    if outcome is not None and is_plan:
        extra = outcome.metadata()
        extra.pop("status")
        meta.update(extra)
    if failed_reason is not None:
        meta["reason"] = failed_reason
    return meta
