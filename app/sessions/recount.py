"""Recount a session's log when its tokenizer changes (a model switch).

Counts are cached per message for the session's tokenizer; a switch from an
OpenAI model to another family makes every cached count wrong. This is the one
place the whole log is read, in pages, and it only runs on that switch.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.conversation import counts_in_context
from app.models import MessageRow, SessionRow
from app.tokens import TokenCounter

PAGE = 2000


async def recount_log(db: AsyncSession, row: SessionRow, counter: TokenCounter) -> None:
    running = 0
    watermark_tokens = 0
    after = 0
    while True:
        stmt = (
            select(
                MessageRow.seq,
                MessageRow.body,
                MessageRow.role,
                MessageRow.include_in_context,
                MessageRow.metadata_,
            )
            .where(
                MessageRow.tenant_id == row.tenant_id,
                MessageRow.session_id == row.id,
                MessageRow.seq > after,
            )
            .order_by(MessageRow.seq)
            .limit(PAGE)
        )
        page = (await db.execute(stmt)).all()
        if not page:
            break
        params = []
        for seq, body, role, include, metadata in page:
            n = counter.count_message(body)
            if counts_in_context(role, include, metadata):
                running += n
            if seq <= row.last_compaction_seq:
                watermark_tokens = running
            params.append(
                {
                    "tenant_id": row.tenant_id,
                    "session_id": row.id,
                    "seq": seq,
                    "token_count": n,
                    "context_tokens_through": running,
                }
            )
        await db.execute(update(MessageRow), params)
        after = page[-1][0]
    row.context_tokens = running
    row.watermark_context_tokens = watermark_tokens
    row.tokenizer = counter.name
