"""console indexes

Revision ID: 0009_console_indexes
Revises: 0008_fair_claims
Create Date: 2026-11-23 11:40:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009_console_indexes"
down_revision: str | None = "0008_fair_claims"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The console's "recent events of a tenant" walks this backwards (the primary key
    # starts with the session), and its "jobs finished in the last hour" is a range of
    # the second: neither reads more than it shows, however many sessions there are.
    op.create_index("ix_events_tenant_recent", "events", ["tenant_id", "id"])
    op.create_index(
        "ix_compaction_jobs_finished",
        "compaction_jobs",
        ["tenant_id", "finished_at"],
        postgresql_where="finished_at IS NOT NULL",
    )


def downgrade() -> None:
    op.drop_index("ix_compaction_jobs_finished", table_name="compaction_jobs")
    op.drop_index("ix_events_tenant_recent", table_name="events")
