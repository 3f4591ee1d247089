"""Re-reads and the session's bill (SPEC §3, §4): tool_calls.call_key with its index,
and the session's re-read count, bill sums and summariser tokens

Revision ID: 0016_rereads_and_bill
Revises: 0014_summary_carries_pinned
Create Date: 2026-12-01 15:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_rereads_and_bill"
down_revision: str | tuple[str, ...] | None = "0015_positions_cut"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COUNTERS = (
    "re_reads",
    "bill_calls",
    "bill_input_tokens",
    "bill_cached_input_tokens",
    "bill_full_history_input_tokens",
    "bill_reported_calls",
    "summariser_input_tokens",
    "summariser_output_tokens",
    "bill_summariser_input_seen",
    "bill_summariser_output_seen",
)


def upgrade() -> None:
    for name in _COUNTERS:
        op.add_column(
            "sessions",
            sa.Column(name, sa.BigInteger(), server_default=sa.text("0"), nullable=False),
        )
    op.add_column("sessions", sa.Column("bill_last_call_at", sa.DateTime(timezone=True)))
    op.add_column("tool_calls", sa.Column("call_key", sa.Text()))
    op.create_index(
        "ix_tool_calls_key",
        "tool_calls",
        ["tenant_id", "session_id", "call_key", "seq"],
        postgresql_where=sa.text("call_key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_tool_calls_key", table_name="tool_calls")
    op.drop_column("tool_calls", "call_key")
    op.drop_column("sessions", "bill_last_call_at")
    for name in reversed(_COUNTERS):
        op.drop_column("sessions", name)
