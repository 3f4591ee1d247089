"""The answers of the compaction routes, for the OpenAPI description (beside `answers.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

_OPEN = ConfigDict(extra="allow")


class CompactionJob(BaseModel):
    model_config = _OPEN

    job_id: str
    status: str = Field(description="pending, running, success, degraded, noop, failed, ...")
    trigger: str | None = None
    force: bool | None = None
    attempts: int | None = None
    reason: str | None = None
    watermark_before: int | None = None
    watermark_after: int | None = None
    compaction_metadata: dict[str, Any] | None = None
    gate: dict[str, Any] | None = Field(
        None, description="the quality gate (SPEC §5): scores, dropped, caught (guide.md)"
    )
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    reverted_at: datetime | None = Field(
        None, description="when a revert undid this compaction (null: never)"
    )


class CompactionDryRun(BaseModel):
    model_config = _OPEN

    dry_run: Literal[True]
    would: str
    would_compact: bool
    reason: str | None = None


class CompactionSummary(BaseModel):
    model_config = _OPEN

    text: str | None
    structure: dict[str, Any] | None
    tokens: int
    through_seq: int | None


class CompactionState(BaseModel):
    model_config = _OPEN

    compacted_context: Any = None
    summary: CompactionSummary
    last_compaction_seq: int
    compaction_count: int
    compaction_metadata: dict[str, Any] | None
    memory_flush_candidates: list[dict[str, Any]]
    jobs: list[CompactionJob]
    revertable_job_id: str | None = Field(
        None, description="the job a revert would undo now: the latest stored compaction"
    )
