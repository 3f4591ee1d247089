"""context layouts: what each payload stream's last trim kept (prompt-cache stability)

Revision ID: 0009_context_layouts
Revises: 0008_fair_claims
Create Date: 2026-11-23 11:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0009_context_layouts"
down_revision: str | None = "0008_fair_claims"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "context_layouts",
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("params_key", sa.Text(), nullable=False),
        sa.Column("generation", sa.BigInteger(), nullable=False),
        sa.Column("watermark", sa.BigInteger(), nullable=False),
        sa.Column("through_seq", sa.BigInteger(), nullable=False),
        sa.Column("kept", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("layout_id", sa.Text(), nullable=False),
        sa.Column("replaced", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["tenant_id", "session_id"],
            ["sessions.tenant_id", "sessions.id"],
            name=op.f("fk_context_layouts_tenant_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "tenant_id", "session_id", "params_key", name=op.f("pk_context_layouts")
        ),
    )


def downgrade() -> None:
    op.drop_table("context_layouts")
