"""fair claims: per-tenant claim index, compaction worker heartbeats

Revision ID: 0008_fair_claims
Revises: 0007_token_calibration
Create Date: 2026-11-23 11:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_fair_claims"
down_revision: str | None = "0007_token_calibration"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The round-robin key of the fair claim (app/compaction/repository.py::claim_next):
    # max(started_at) of one tenant is a single backward index step.
    op.create_index(
        "ix_compaction_jobs_tenant_started",
        "compaction_jobs",
        ["tenant_id", "started_at"],
        unique=False,
    )
    # Live `contextd worker` processes; a server in "auto" mode defers to them.
    op.create_table(
        "compaction_workers",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column(
            "started_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "heartbeat_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_compaction_workers")),
    )


def downgrade() -> None:
    op.drop_table("compaction_workers")
    op.drop_index("ix_compaction_jobs_tenant_started", table_name="compaction_jobs")
