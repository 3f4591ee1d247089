"""unindexed messages: a partial index of the messages without a search vector

Revision ID: 0019_unindexed_messages
Revises: 0018_compaction_revert
Create Date: 2026-12-01 18:00:00.000000

Messages stored before 0012 added `messages.search` have none until every command that
migrates indexes them, after the migrations (app/index/unindexed.py). It looks for them
at every start: through this index, which holds no row once they are all indexed (an
append writes its vector with the row), finding none costs one probe, not a read of
every message.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019_unindexed_messages"
down_revision: str | tuple[str, ...] | None = "0018_compaction_revert"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index(
        "ix_messages_unindexed",
        "messages",
        ["tenant_id", "session_id", "seq"],
        unique=False,
        postgresql_where=sa.text("search IS NULL"),
    )


def downgrade() -> None:
    op.drop_index(
        "ix_messages_unindexed", table_name="messages", postgresql_where=sa.text("search IS NULL")
    )
