"""compress large values with lz4 where the server has it

Revision ID: 0013_lz4_compression
Revises: 0012_recall
Create Date: 2026-11-28 10:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_lz4_compression"
down_revision: str | tuple[str, ...] | None = "0012_recall"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A row past PostgreSQL's TOAST threshold (about 2 kB) has its large values
# compressed in the backend that writes it, with pglz unless the column says
# otherwise; a long message with its search vector is past it, and pglz there
# was a measurable share of appends' PostgreSQL CPU. lz4 does the same job in a
# fraction of the time (and reads back faster). Only the method for values written from
# now on changes: nothing is rewritten, old values stay readable as they are. A
# server built without lz4 keeps pglz. docs/recall.md has the measurement.
TABLES = ("messages", "events", "context_layouts", "sessions", "compaction_jobs")


def _has_lz4() -> bool:
    return bool(
        op.get_bind().scalar(
            sa.text(
                "SELECT 'lz4' = ANY(enumvals) FROM pg_settings"
                " WHERE name = 'default_toast_compression'"
            )
        )
    )


def _compressible_columns() -> list[tuple[str, str]]:
    # Only types TOAST may compress (storage 'extended' or 'main').
    rows = op.get_bind().execute(
        sa.text(
            "SELECT c.relname, a.attname FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = current_schema() AND c.relname = ANY(:tables)"
            " AND a.attnum > 0 AND NOT a.attisdropped AND a.attstorage IN ('x', 'm')"
            " ORDER BY c.relname, a.attnum"
        ),
        {"tables": list(TABLES)},
    )
    return [(r.relname, r.attname) for r in rows]


def _set(method: str) -> None:
    for table, column in _compressible_columns():
        op.execute(f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION {method}')


def upgrade() -> None:
    if _has_lz4():
        _set("lz4")


def downgrade() -> None:
    _set("default")
