"""claim indexes: pending jobs by tenant (next job first), running jobs by tenant

Revision ID: 0010_claim_indexes
Revises: 0009_console_indexes, 0009_context_layouts
Create Date: 2026-11-23 11:50:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_claim_indexes"
# Both 0009s revise 0008 (merged in parallel): this one joins them into one head.
down_revision: str | tuple[str, ...] | None = ("0009_console_indexes", "0009_context_layouts")
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The fair claim (app/compaction/repository.py::claim_next) walks the tenants
    # with pending jobs by skipping along this index, and reads each one's next job
    # (manual first, then oldest) as its first entry: a claim costs index probes
    # per waiting tenant, not a scan of the queue.
    op.create_index(
        "ix_compaction_jobs_pending",
        "compaction_jobs",
        ["tenant_id", sa.text("(trigger = 'manual') DESC"), "created_at"],
        unique=False,
        postgresql_where=sa.text("status = 'pending'"),
    )
    # Running jobs per tenant, for the per-tenant cap.
    op.create_index(
        "ix_compaction_jobs_running",
        "compaction_jobs",
        ["tenant_id"],
        unique=False,
        postgresql_where=sa.text("status = 'running'"),
    )


def downgrade() -> None:
    op.drop_index("ix_compaction_jobs_running", table_name="compaction_jobs")
    op.drop_index("ix_compaction_jobs_pending", table_name="compaction_jobs")
