"""compaction_jobs.replaced, reverted_at, revert_state: what a stored compaction replaced,
so that it can be reverted (SPEC §2 `POST /sessions/{id}/compaction/{job_id}/revert`)

Revision ID: 0018_compaction_revert
Revises: 0014_summary_carries_pinned
Create Date: 2026-12-01 15:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0018_compaction_revert"
down_revision: str | tuple[str, ...] | None = "0016_rereads_and_bill"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Jobs stored before this have no snapshot: they cannot be reverted (a 409 says so).
    op.add_column("compaction_jobs", sa.Column("replaced", postgresql.JSONB(), nullable=True))
    op.add_column(
        "compaction_jobs", sa.Column("reverted_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("compaction_jobs", sa.Column("revert_state", postgresql.JSONB(), nullable=True))


def downgrade() -> None:
    op.drop_column("compaction_jobs", "revert_state")
    op.drop_column("compaction_jobs", "reverted_at")
    op.drop_column("compaction_jobs", "replaced")
