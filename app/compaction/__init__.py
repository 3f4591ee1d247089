"""Compaction: fold old turns into a structured rolling summary (SPEC §5).

The pure parts are re-exported here; the job table, runner, fenced store and
HTTP endpoints build on them.
"""

from app.compaction.brief import SummaryOptions, SummarySettings
from app.compaction.candidates import FlushCandidate, extract_candidates
from app.compaction.engine import summarise
from app.compaction.llm import (
    ChatModelClient,
    ChatResult,
    ModelConnectionError,
    ModelError,
    ModelHTTPError,
    ModelProtocolError,
    ModelRefusal,
    ModelTimeout,
)
from app.compaction.metadata import build_metadata
from app.compaction.outcome import SummaryOutcome
from app.compaction.summary import StructuredSummary, SummaryRejected, render_summary
from app.compaction.turns import (
    CompactionPlan,
    NoopReason,
    PlanSettings,
    Turn,
    plan_for_settings,
    plan_range,
    split_turns,
)

__all__ = [
    "ChatModelClient",
    "ChatResult",
    "CompactionPlan",
    "FlushCandidate",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelProtocolError",
    "ModelRefusal",
    "ModelTimeout",
    "NoopReason",
    "PlanSettings",
    "StructuredSummary",
    "SummaryOptions",
    "SummaryOutcome",
    "SummaryRejected",
    "SummarySettings",
    "Turn",
    "build_metadata",
    "extract_candidates",
    "plan_for_settings",
    "plan_range",
    "render_summary",
    "split_turns",
    "summarise",
]
