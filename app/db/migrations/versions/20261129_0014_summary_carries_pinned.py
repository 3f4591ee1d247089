"""sessions.summary_carries_pinned: the stored summary holds pinned messages or session
anchors verbatim, so a payload may not leave it out (SPEC §1, §3)

Revision ID: 0014_summary_carries_pinned
Revises: 0013_lz4_compression
Create Date: 2026-11-29 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_summary_carries_pinned"
down_revision: str | tuple[str, ...] | None = "0013_lz4_compression"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "sessions",
        sa.Column(
            "summary_carries_pinned", sa.Boolean(), server_default=sa.text("false"), nullable=False
        ),
    )
    # Summaries stored before: the structured summary says what it carries.
    op.execute(
        "UPDATE sessions SET summary_carries_pinned = true WHERE summary IS NOT NULL AND ("
        "jsonb_array_length(COALESCE(summary->'pinned', '[]'::jsonb)) > 0 OR "
        "jsonb_array_length(COALESCE(summary->'carried_anchors', '[]'::jsonb)) > 0)"
    )


def downgrade() -> None:
    op.drop_column("sessions", "summary_carries_pinned")
