"""Recount a session when its tokenizer changes (a model switch).

Counts are cached per message, and on the session row for what it stores besides
the log (system prompt, tools, summary), in the session's tokenizer; a switch from
an OpenAI model to another family makes every one of them wrong, and budget status
adds them up. This is the one place the whole log is read, in pages, and it only
runs on that switch.
"""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.conversation import counts_in_context, summary_message
from app.core.tokens import TokenCounter
from app.db.models import MessageRow, SessionRow
from app.db.scope import of_session

PAGE = 2000


async def recount_session(db: AsyncSession, row: SessionRow, counter: TokenCounter) -> None:
    """Every count the session stores, in `counter`'s tokenizer: the log's, its running
    totals and watermark, the system prompt's, the tools', the summary's, and the
    regrowth guard's base."""
    old_history = row.context_tokens - row.watermark_context_tokens
    await _recount_log(db, row, counter)
    row.system_tokens = (
        counter.count_message({"role": "system", "content": row.system_prompt})
        if row.system_prompt
        else 0
    )
    row.tools_tokens = counter.count_tools(row.tools)
    row.summary_tokens = (
        counter.count_message(summary_message(row.summary_text)) if row.summary_text else 0
    )
    # The regrowth guard's base is the history right after the last compaction, whose
    # messages may be gone from view since: scaled as the history was, so a switch alone
    # neither looks like regrowth nor hides any.
    new_history = row.context_tokens - row.watermark_context_tokens
    if row.compacted_history_tokens and old_history > 0:
        row.compacted_history_tokens = round(
            row.compacted_history_tokens * new_history / old_history
        )
    row.tokenizer = counter.name


async def _recount_log(db: AsyncSession, row: SessionRow, counter: TokenCounter) -> None:
    watermark = row.last_compaction_seq
    running = 0
    through_watermark = 0
    old_through_watermark = 0
    # The turn anchor (app/compaction/turns.py): the user message opening the turn a
    # compaction cut inside. It lies at or below the watermark but stays in the effective
    # history, so the watermark's tokens leave it out; it is the last user message there.
    anchor_tokens = 0
    after = 0
    while True:
        stmt = (
            select(
                MessageRow.seq,
                MessageRow.body,
                MessageRow.role,
                MessageRow.include_in_context,
                MessageRow.metadata_,
                MessageRow.context_tokens_through,
            )
            .where(
                of_session(MessageRow, row.tenant_id, row.id),
                MessageRow.seq > after,
            )
            .order_by(MessageRow.seq)
            .limit(PAGE)
        )
        page = (await db.execute(stmt)).all()
        if not page:
            break
        params = []
        for seq, body, role, include, metadata, old_through in page:
            n = counter.count_message(body)
            in_context = counts_in_context(role, include, metadata)
            if in_context:
                running += n
            if seq <= watermark:
                through_watermark = running
                old_through_watermark = old_through
                if role == "user":
                    anchor_tokens = n if in_context else 0
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
    kept_below = old_through_watermark - row.watermark_context_tokens
    row.context_tokens = running
    row.watermark_context_tokens = through_watermark - (anchor_tokens if kept_below > 0 else 0)
