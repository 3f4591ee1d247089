from __future__ import annotations

from datetime import UTC, datetime

from app.compaction.engine import summarise
from app.compaction.metadata import build_metadata
from app.compaction.turns import CompactionPlan, NoopReason, plan_range
from tests.support.compaction_builders import COUNTER, EngineSettings, chat

AT = datetime(2025, 1, 1, tzinfo=UTC)
SPEC_FIELDS = {
    "schema_version",
    "status",
    "preserved_count",
    "summarized_count",
    "trimmed_count",
    "flush_skipped",
    "anchor_validation_passed",
    "anchor_retry_used",
    "triggered_at",
    "compacted_context_tokens",
    "rolling_summary_input_tokens",
}


async def test_metadata_for_success_noop_and_failure() -> None:
    log = chat([(f"You must keep rule {i}.", "ok") for i in range(4)])
    plan = plan_range(log, watermark=0, min_preserved_turns=1)
    assert isinstance(plan, CompactionPlan)
    outcome = await summarise(
        plan, None, [], client=None, settings=EngineSettings(), counter=COUNTER
    )
    meta = build_metadata(plan, outcome, triggered_at=AT, compacted_context_tokens=123)
    assert SPEC_FIELDS <= set(meta)
    assert meta["schema_version"] == 1 and meta["status"] == "success"
    assert meta["summarized_count"] == 4 and meta["preserved_count"] == 4
    assert meta["summarizer"] == "extractive" and meta["range"] == {"from_seq": 1, "to_seq": 4}
    assert meta["triggered_at"] == "2025-01-01T00:00:00+00:00"

    noop = plan_range(log, watermark=0, min_preserved_turns=9)
    assert isinstance(noop, NoopReason)
    meta = build_metadata(noop, None, triggered_at=AT)
    assert SPEC_FIELDS <= set(meta)
    assert meta["status"] == "noop" and meta["reason"] == "nothing_compressible"

    failed = build_metadata(plan, None, triggered_at=AT, failed_reason="job_timeout")
    assert failed["status"] == "failed" and failed["reason"] == "job_timeout"
