"""session generation: bumped by tail deletes and clears, checked by the compaction store

Revision ID: 0006_session_generation
Revises: 0005_message_id_first
Create Date: 2026-11-23 09:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_session_generation"
down_revision: str | None = "0005_message_id_first"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "sessions",
        sa.Column("generation", sa.BigInteger(), server_default=sa.text("0"), nullable=False),
    )


def downgrade() -> None:
    op.drop_column("sessions", "generation")
