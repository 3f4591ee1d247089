"""count summary-class system messages toward the context tokens

Revision ID: 0011_summary_class_tokens
Revises: 0010_claim_indexes
Create Date: 2026-11-23 15:10:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0011_summary_class_tokens"
down_revision: str | tuple[str, ...] | None = "0010_claim_indexes"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A system message logged with `metadata.kind = "summary"` is sent to the model
# (SPEC §3) but was left out of the running counts, so budget status and
# automatic compaction under-reported such sessions. `counts_in_context`
# (app/core/conversation.py) now counts it; this shifts the stored running sums of
# the sessions that hold one by what it would have added: every message's
# `context_tokens_through` by the summary tokens at or before it, the session's
# total by all of them, its watermark figure by those at or before the watermark
# (the turn anchor's tokens it subtracts are unchanged). Sessions without one
# are not touched.


def summary_class(m: str) -> str:
    """SQL for `is_summary_class` and `include_in_context` over the messages alias `m`."""
    return f"{m}.role = 'system' AND {m}.include_in_context AND {m}.metadata->>'kind' = 'summary'"


def upgrade() -> None:
    op.execute(
        f"""
        UPDATE messages m
           SET context_tokens_through = m.context_tokens_through + s.extra
          FROM (
                SELECT tenant_id, session_id, seq,
                       sum(CASE WHEN {summary_class("x")} THEN token_count ELSE 0 END)
                           OVER (PARTITION BY tenant_id, session_id ORDER BY seq) AS extra
                  FROM messages x
                 WHERE (tenant_id, session_id) IN (
                        SELECT y.tenant_id, y.session_id FROM messages y WHERE {summary_class("y")})
               ) s
         WHERE m.tenant_id = s.tenant_id AND m.session_id = s.session_id
           AND m.seq = s.seq AND s.extra > 0
        """
    )
    op.execute(
        f"""
        UPDATE sessions ss
           SET context_tokens = ss.context_tokens + t.total,
               watermark_context_tokens = ss.watermark_context_tokens + coalesce(t.below, 0)
          FROM (
                SELECT m.tenant_id, m.session_id,
                       sum(m.token_count) AS total,
                       sum(m.token_count) FILTER (WHERE m.seq <= s2.last_compaction_seq) AS below
                  FROM messages m
                  JOIN sessions s2 ON s2.tenant_id = m.tenant_id AND s2.id = m.session_id
                 WHERE {summary_class("m")}
                 GROUP BY m.tenant_id, m.session_id
               ) t
         WHERE ss.tenant_id = t.tenant_id AND ss.id = t.session_id
        """
    )


def downgrade() -> None:
    # The counts before were wrong; going back leaves them counted, which the
    # older code tolerates (it only adds and subtracts running sums).
    pass
