from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKeyConstraint,
    Identity,
    Index,
    Integer,
    PrimaryKeyConstraint,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, created_at_column


class MessageRow(Base):
    """One logged message. `body` is the OpenAI message verbatim, flags live beside it."""

    __tablename__ = "messages"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "session_id"], ["sessions.tenant_id", "sessions.id"], ondelete="CASCADE"
        ),
        # message_id first: then the primary key is the only index that starts with
        # (tenant_id, session_id). Without statistics (a new deployment, autovacuum
        # off) every probe of one session is estimated at one row whichever index
        # serves it, and the planner took the one with fewer conditions to check: a
        # walk of all the session's rows through this index to find a seq range
        # (50 ms at 5k messages, growing with the log). Probes by message id name
        # all three columns and use it as before.
        UniqueConstraint("message_id", "tenant_id", "session_id"),
        # Pinned messages are read on every assembly, however old: keep them one probe away.
        Index(
            "ix_messages_pinned",
            "tenant_id",
            "session_id",
            "seq",
            postgresql_where=text("pinned"),
        ),
        # The latest user message (and the start of any turn) is one probe, however
        # long the agent run since it.
        Index(
            "ix_messages_user",
            "tenant_id",
            "session_id",
            "seq",
            postgresql_where=text("role = 'user'"),
        ),
        # Recall (app/search/): the lexemes of every message. Each message's vector
        # also holds its session's key lexeme (app/index/lexemes.py `session_lexeme`),
        # so a search intersects its terms with the session inside this index
        # (btree_gin would do it by column, but the embedded PostgreSQL lacks it).
        Index("ix_messages_search", "search", postgresql_using="gin"),
        # The messages stored before search, not yet indexed (app/index/unindexed.py):
        # none once they are, so every start finds that out in one probe.
        Index(
            "ix_messages_unindexed",
            "tenant_id",
            "session_id",
            "seq",
            postgresql_where=text("search IS NULL"),
        ),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    message_id: Mapped[str] = mapped_column(Text)
    role: Mapped[str] = mapped_column(Text)
    body: Mapped[dict[str, Any]] = mapped_column()
    token_count: Mapped[int] = mapped_column(Integer)
    # Running sum of in-context tokens through this seq: the tokens of any
    # suffix of the log is one primary-key probe, never a scan.
    context_tokens_through: Mapped[int] = mapped_column(BigInteger)
    pinned: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    include_in_context: Mapped[bool] = mapped_column(Boolean, server_default=text("true"))
    mode: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any] | None] = mapped_column("metadata")
    error: Mapped[dict[str, Any] | None] = mapped_column()
    created_at: Mapped[datetime] = created_at_column()
    # The lexemes search finds the message by (app/index/lexemes.py), written by the
    # append's own statement. Never loaded with the row: only search reads it.
    search: Mapped[str | None] = mapped_column(TSVECTOR, deferred=True, deferred_raiseload=True)


class ToolCallRow(Base):
    """Which assistant message made a tool call, and which tool message answered it."""

    __tablename__ = "tool_calls"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "session_id"], ["sessions.tenant_id", "sessions.id"], ondelete="CASCADE"
        ),
        # The newest earlier call with the same name and arguments: one index probe.
        Index(
            "ix_tool_calls_key",
            "tenant_id",
            "session_id",
            "call_key",
            "seq",
            postgresql_where=text("call_key IS NOT NULL"),
        ),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    call_id: Mapped[str] = mapped_column(Text, primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger)
    answered_seq: Mapped[int | None] = mapped_column(BigInteger)
    # A digest of the call's tool name and arguments (app/messages/rereads.py): the
    # append finds an earlier identical call through ix_tool_calls_key (a re-read).
    call_key: Mapped[str | None] = mapped_column(Text)


class EventRow(Base):
    __tablename__ = "events"
    __table_args__ = (
        PrimaryKeyConstraint("tenant_id", "session_id", "id"),
        ForeignKeyConstraint(
            ["tenant_id", "session_id"], ["sessions.tenant_id", "sessions.id"], ondelete="CASCADE"
        ),
        # A tenant's recent events, newest first (the console's queue page).
        Index("ix_events_tenant_recent", "tenant_id", "id"),
    )

    tenant_id: Mapped[str] = mapped_column(Text)
    session_id: Mapped[str] = mapped_column(Text)
    id: Mapped[int] = mapped_column(BigInteger, Identity())
    type: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any]] = mapped_column()
    created_at: Mapped[datetime] = created_at_column()


__all__ = ["EventRow", "MessageRow", "ToolCallRow"]
