from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKeyConstraint, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db.models.base import Base


class ContextLayoutRow(Base):
    """What the last trim of one payload stream kept (app/context/stability.py).

    One row per (tenant, session, hash of the payload parameters); written only
    when a payload trims, read by every payload call. A stream's next payload is
    this selection plus every message appended after `through_seq`, until that
    no longer fits or the session's watermark or generation moves.
    """

    __tablename__ = "context_layouts"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "session_id"], ["sessions.tenant_id", "sessions.id"], ondelete="CASCADE"
        ),
    )

    tenant_id: Mapped[str] = mapped_column(Text, primary_key=True)
    session_id: Mapped[str] = mapped_column(Text, primary_key=True)
    params_key: Mapped[str] = mapped_column(Text, primary_key=True)
    generation: Mapped[int] = mapped_column(BigInteger)
    watermark: Mapped[int] = mapped_column(BigInteger)
    through_seq: Mapped[int] = mapped_column(BigInteger)
    # [[seqs of one unit], form, rule] per kept unit, in log order.
    kept: Mapped[list[Any]] = mapped_column()
    layout_id: Mapped[str] = mapped_column(Text)
    # The layout this one replaced ({generation, watermark, through_seq, kept}): a
    # client echoing a prefix_id of it still gets an exact shared prefix, from any replica.
    replaced: Mapped[dict[str, Any] | None] = mapped_column()
    updated_at: Mapped[datetime] = mapped_column(server_default=func.now())
