"""unique message ids: message_id first, so only the primary key leads with the session

Revision ID: 0005_message_id_first
Revises: 0004_api_keys
Create Date: 2026-11-23 09:30:00

Without planner statistics every probe of one session's messages is estimated
at one row through either index that starts with (tenant_id, session_id), and
PostgreSQL chose the one with fewer conditions: a scan of every row of the
session through the message-id index to find a seq range. Leading with
message_id leaves the primary key as the only index a seq range can use.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005_message_id_first"
down_revision: str | None = "0004_api_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_unique_constraint(
        op.f("uq_messages_message_id_tenant_id_session_id"),
        "messages",
        ["message_id", "tenant_id", "session_id"],
    )
    op.drop_constraint(
        op.f("uq_messages_tenant_id_session_id_message_id"), "messages", type_="unique"
    )


def downgrade() -> None:
    op.create_unique_constraint(
        op.f("uq_messages_tenant_id_session_id_message_id"),
        "messages",
        ["tenant_id", "session_id", "message_id"],
    )
    op.drop_constraint(
        op.f("uq_messages_message_id_tenant_id_session_id"), "messages", type_="unique"
    )
