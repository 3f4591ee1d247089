"""token calibration

Revision ID: 0007_token_calibration
Revises: 0006_session_generation
Create Date: 2026-11-23 09:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007_token_calibration"
down_revision: str | None = "0006_session_generation"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # The per-session calibration of estimated token counts (app/core/tokens/calibration.py).
    op.add_column(
        "sessions",
        sa.Column(
            "token_calibration",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
    )


def downgrade() -> None:
    op.drop_column("sessions", "token_calibration")
