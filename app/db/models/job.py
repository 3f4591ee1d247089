from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKeyConstraint,
    Index,
    Integer,
    Text,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base, created_at_column

ACTIVE = ("pending", "running")


class CompactionJobRow(Base):
    """A compaction request, claimed by a worker under a lease (SKIP LOCKED).

    At most one job per session is active (pending or running): concurrent
    requests insert into the partial unique index and share the winner.
    """

    __tablename__ = "compaction_jobs"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "session_id"], ["sessions.tenant_id", "sessions.id"], ondelete="CASCADE"
        ),
        Index(
            "uq_compaction_jobs_active",
            "tenant_id",
            "session_id",
            unique=True,
            postgresql_where=text("status IN ('pending', 'running')"),
        ),
        Index(
            "ix_compaction_jobs_claimable",
            "created_at",
            postgresql_where=text("status IN ('pending', 'running')"),
        ),
        # The fair claim's round-robin key: a tenant's most recent claim is one
        # backward step on this index (repository.claim_next).
        Index("ix_compaction_jobs_tenant_started", "tenant_id", "started_at"),
        # A tenant's jobs finished lately (the console's failure rate).
        Index(
            "ix_compaction_jobs_finished",
            "tenant_id",
            "finished_at",
            postgresql_where=text("finished_at IS NOT NULL"),
        ),
        # The fair claim's other probes: the tenants with pending jobs and each
        # one's next job (manual first, then oldest), and each one's running count.
        Index(
            "ix_compaction_jobs_pending",
            "tenant_id",
            text("(trigger = 'manual') DESC"),
            "created_at",
            postgresql_where=text("status = 'pending'"),
        ),
        Index(
            "ix_compaction_jobs_running",
            "tenant_id",
            postgresql_where=text("status = 'running'"),
        ),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    status: Mapped[str] = mapped_column(Text, server_default=text("'pending'"))
    trigger: Mapped[str] = mapped_column(Text)
    force: Mapped[bool] = mapped_column(Boolean, server_default=text("false"))
    # The session lease token when the job was requested: the store is fenced on it.
    lock_token: Mapped[str | None] = mapped_column(Text)
    chain: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    attempts: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    worker: Mapped[str | None] = mapped_column(Text)
    lease_expires_at: Mapped[datetime | None] = mapped_column()
    reason: Mapped[str | None] = mapped_column(Text)
    result: Mapped[dict[str, Any] | None] = mapped_column()
    watermark_before: Mapped[int | None] = mapped_column(BigInteger)
    watermark_after: Mapped[int | None] = mapped_column(BigInteger)
    # The session's compaction state this job's store replaced (summary, watermark and
    # the totals beside them), written with the store: a revert puts it back.
    replaced: Mapped[dict[str, Any] | None] = mapped_column()
    reverted_at: Mapped[datetime | None] = mapped_column()
    # The session as the revert left it: automatic compaction leaves that state alone
    # until the log has grown past it (app/compaction/noop_guard.py).
    revert_state: Mapped[dict[str, Any] | None] = mapped_column()
    created_at: Mapped[datetime] = created_at_column()
    started_at: Mapped[datetime | None] = mapped_column()
    finished_at: Mapped[datetime | None] = mapped_column()


class CompactionWorkerRow(Base):
    """A live `contextd worker` process: it heartbeats here every few seconds.

    A server whose `run_compactions_in_process` is "auto" claims no job while a
    worker's heartbeat is fresh, so the two never compete for the queue.
    """

    __tablename__ = "compaction_workers"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    started_at: Mapped[datetime] = created_at_column()
    heartbeat_at: Mapped[datetime] = created_at_column()
