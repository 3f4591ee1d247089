from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Integer, Text, func, text
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, created_at_column

DEFAULT_TENANT = "default"


class SessionRow(Base):
    """A conversation: its settings, running totals, lease and compaction state.

    The running totals let append and budget status run in constant time: the
    tokens of the effective history are `context_tokens - watermark_context_tokens`.
    """

    __tablename__ = "sessions"
    # Fetch server-side defaults (updated_at) with RETURNING on flush: lazy
    # refreshes are IO in places async code cannot await.
    __mapper_args__ = {"eager_defaults": True}

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)

    model: Mapped[str | None] = mapped_column(Text)
    context_limit: Mapped[int | None] = mapped_column(Integer)
    system_prompt: Mapped[str | None] = mapped_column(Text)
    tools: Mapped[list[Any]] = mapped_column(server_default=text("'[]'::jsonb"))
    strategy: Mapped[str | None] = mapped_column(Text)
    anchors: Mapped[list[Any]] = mapped_column(server_default=text("'[]'::jsonb"))
    auto_compact: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    compaction: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    metadata_: Mapped[dict[str, Any]] = mapped_column(
        "metadata", server_default=text("'{}'::jsonb")
    )
    tokenizer: Mapped[str] = mapped_column(Text)
    # Token counts of the stored system prompt and tools, kept so budget status is arithmetic.
    system_tokens: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    tools_tokens: Mapped[int] = mapped_column(Integer, server_default=text("0"))

    last_seq: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    count_system: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    count_user: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    count_assistant: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    count_tool: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    context_tokens: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))

    last_compaction_seq: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    watermark_context_tokens: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    summary: Mapped[dict[str, Any] | None] = mapped_column()
    summary_text: Mapped[str | None] = mapped_column(Text)
    summary_tokens: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # The summary holds pinned messages or session anchors verbatim: a payload keeps it
    # whatever the budget, as it keeps pinned messages (SPEC §1, §3).
    summary_carries_pinned: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    compaction_metadata: Mapped[dict[str, Any] | None] = mapped_column()
    memory_flush_candidates: Mapped[list[Any]] = mapped_column(server_default=text("'[]'::jsonb"))
    # Effective-history tokens right after the last compaction: the regrowth guard's base.
    compacted_history_tokens: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    compaction_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    # Bumped by every tail delete and clear. A compaction job reads it with the
    # history it summarises, and its store lands only if it is unchanged: a
    # summary of messages deleted meanwhile is never stored (seqs are reused).
    generation: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    # The estimate's calibration from reported provider usage (app/core/tokens/calibration.py).
    token_calibration: Mapped[dict[str, Any]] = mapped_column(server_default=text("'{}'::jsonb"))
    # Payloads offer the recall tool and the note on what was left out (app/context/recall.py).
    recall: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))

    # Tool calls that repeated an earlier call whose result the payload no longer held
    # whole (app/context/rereads.py), counted by the append that made them.
    re_reads: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    # The session's bill (SPEC §4, app/core/bill.py): sums of the payload calls'
    # figures, added in batches by the EventWriter (app/observability/events.py); the
    # summariser's tokens added by each stored compaction; `bill_summariser_*_seen`, the
    # part of those the payload calls have reported already; the last payload call's
    # time (the five-minute cache lifetime).
    bill_calls: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    bill_input_tokens: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    bill_cached_input_tokens: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    bill_full_history_input_tokens: Mapped[int] = mapped_column(
        BigInteger, server_default=text("0")
    )
    bill_reported_calls: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    summariser_input_tokens: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    summariser_output_tokens: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    bill_summariser_input_seen: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    bill_summariser_output_seen: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))
    bill_last_call_at: Mapped[datetime | None] = mapped_column()

    lease_token: Mapped[str | None] = mapped_column(Text)
    lease_owner: Mapped[str | None] = mapped_column(Text)
    lease_expires_at: Mapped[datetime | None] = mapped_column()
    fencing_token: Mapped[int] = mapped_column(BigInteger, server_default=text("0"))

    created_at: Mapped[datetime] = created_at_column()
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now(), onupdate=func.now())
