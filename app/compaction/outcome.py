"""What `summarise` returns: everything the runner stores and reports about one summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from app.compaction.summary import StructuredSummary


@dataclass(frozen=True, slots=True)
class SummaryOutcome:
    """The summary to store and how it came about.

    `input_tokens` is SPEC's `rolling_summary_input_tokens` (range plus previous
    summary); `missing_anchors` were carried verbatim (left out by the model, or
    trimmed by the fit to the cap: `anchor_validation_passed` is about the model's
    answer); `patched_identifiers` were appended to `facts`; `reason` is a stable
    code when not a clean success.
    """

    status: Literal["success", "degraded"]
    summarizer: Literal["model", "extractive"]
    summary: StructuredSummary
    rendered_text: str
    summary_tokens: int
    language: str
    anchor_validation_passed: bool
    anchor_retry_used: bool
    missing_anchors: tuple[str, ...]
    patched_identifiers: tuple[str, ...]
    model_calls: int
    prompt_tokens: int
    completion_tokens: int
    input_tokens: int
    reason: str | None = None
    patched_constraints: tuple[str, ...] = ()
    # Artifacts of the rolled trail left out because the section passed its share.
    artifacts_dropped: int = 0
    # The quality gate's verdict (gate.Verdict.record): stored on the job as `gate`.
    gate: dict[str, Any] | None = None
    # Items of the model's answer dropped as invented or echoed (`gate.citations`).
    invented_dropped: int = 0

    def metadata(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "summarizer": self.summarizer,
            "anchor_validation_passed": self.anchor_validation_passed,
            "anchor_retry_used": self.anchor_retry_used,
            "missing_anchors": list(self.missing_anchors),
            "patched_constraints": list(self.patched_constraints),
            "rolling_summary_input_tokens": self.input_tokens,
            "summary_tokens": self.summary_tokens,
            "model_calls": self.model_calls,
            "model_prompt_tokens": self.prompt_tokens,
            "model_completion_tokens": self.completion_tokens,
            "language": self.language,
            "artifacts": len(self.summary.artifacts),
            "artifacts_dropped": self.artifacts_dropped,
            "reason": self.reason,
            "gate": self.gate,
            "invented_dropped": self.invented_dropped,
        }


@dataclass(slots=True)
class ModelUsage:
    """The model calls one summary took so far, and their tokens (the outcome reports them)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
