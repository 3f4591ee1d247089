"""The session columns a summary sets when the fenced store lands (`repository.store_summary`)."""

from __future__ import annotations

from typing import Any

from app.compaction.candidates import FlushCandidate
from app.compaction.outcome import SummaryOutcome
from app.compaction.turns import CompactionPlan
from app.db.models import SessionRow


def summary_values(
    row: SessionRow,
    plan: CompactionPlan,
    outcome: SummaryOutcome,
    meta: dict[str, Any],
    summary_tokens: int,
    candidates: list[FlushCandidate] | None,
) -> dict[str, Any]:
    """The values `store_summary` writes beside the watermark, for `row`'s session."""
    return {
        "summary": outcome.summary.to_dict(),
        "summary_text": outcome.rendered_text,
        "summary_tokens": summary_tokens,
        "summary_carries_pinned": bool(outcome.summary.pinned or outcome.summary.carried_anchors),
        "compaction_metadata": meta,
        # The session's bill (SPEC §4): the summariser's tokens, as the model
        # reported them (the extractive path calls no model: nothing).
        "summariser_input_tokens": SessionRow.summariser_input_tokens + outcome.prompt_tokens,
        "summariser_output_tokens": SessionRow.summariser_output_tokens + outcome.completion_tokens,
        # A skipped flush leaves the previous candidates in place.
        "memory_flush_candidates": row.memory_flush_candidates
        if candidates is None
        else [cand.to_dict() for cand in candidates],
        "compacted_history_tokens": plan.preserved_tokens,
    }
