"""positions cut: stored search vectors whose positions PostgreSQL did not all keep get
the lexeme `~cut`

Revision ID: 0015_positions_cut
Revises: 0014_summary_carries_pinned
Create Date: 2026-12-01 16:00:00.000000

Search confirms an identifier's parts found apart against the message's text only in
vectors that carry `~cut` (app/index/lexemes.py POSITIONS_CUT): appends write it
from now on; this marks the vectors stored before. A vector is marked when one of its
lexemes has 256 positions (PostgreSQL keeps no more) or one sits at 16,383 (where it
clamps): a lexeme with exactly 256 is marked too, which only costs its searches a read
of the text.

Rows are read and written in batches by primary key, each batch one statement, so that
no statement holds more than a batch of row locks or builds a large result. Only marked
rows are rewritten (a new row version, and its GIN entries): long tool outputs, a small
share of most logs. The whole migration still runs in Alembic's transaction.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_positions_cut"
down_revision: str | tuple[str, ...] | None = "0014_summary_carries_pinned"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 2000

_NEXT = sa.text(
    "SELECT tenant_id, session_id, seq FROM messages"
    " WHERE (tenant_id, session_id, seq) > (:t, :s, :q)"
    " ORDER BY tenant_id, session_id, seq OFFSET :n LIMIT 1"
)
_MARK = sa.text(
    "UPDATE messages SET search = search || '~cut'::tsvector"
    " WHERE (tenant_id, session_id, seq) > (:t, :s, :q)"
    " AND (CAST(:last_t AS text) IS NULL"
    "  OR (tenant_id, session_id, seq)"
    "  <= (CAST(:last_t AS text), CAST(:last_s AS text), CAST(:last_q AS bigint)))"
    " AND search IS NOT NULL AND NOT search @@ '''~cut'''::tsquery"
    " AND EXISTS (SELECT 1 FROM unnest(search) AS u"
    "  WHERE cardinality(u.positions) >= 256 OR 16383 = ANY(u.positions))"
)


def upgrade() -> None:
    bind = op.get_bind()
    start: tuple[str, str, int] = ("", "", 0)
    while True:
        end = bind.execute(_NEXT, {"t": start[0], "s": start[1], "q": start[2], "n": BATCH - 1})
        last = end.first()
        bind.execute(
            _MARK,
            {
                "t": start[0],
                "s": start[1],
                "q": start[2],
                "last_t": last.tenant_id if last else None,
                "last_s": last.session_id if last else None,
                "last_q": last.seq if last else None,
            },
        )
        if last is None:
            return
        start = (last.tenant_id, last.session_id, last.seq)


def downgrade() -> None:
    op.execute(
        "UPDATE messages SET search = ts_delete(search, '~cut') WHERE search @@ '''~cut'''::tsquery"
    )
