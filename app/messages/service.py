"""Appending to the log: seq allocation, idempotent replays, tool-call bookkeeping.

Appenders of one session serialise on that session's row lock, so seqs are
gap-free and strictly increasing across any number of server processes. Token
counting happens before the lock is taken, so a large batch never holds up
other writers while it is being tokenised.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.budget import Budget
from app.errors import Conflict, ValidationFailed, invalid
from app.events import record_event
from app.leases.guard import check_write
from app.messages import repository as repo
from app.messages.validation import Incoming, parse_batch
from app.models import MessageRow, SessionRow
from app.observability import metrics
from app.sessions import repository as sessions
from app.sessions.recount import recount_log
from app.sessions.service import budget_of, effective_model, new_session_values
from app.settings import Settings
from app.tokens import TokenCounter, get_counter

# Tokenising this many bytes in the event loop would stall other requests.
THREAD_THRESHOLD_BYTES = 64 * 1024
# Batches with more text than this are counted before the session lock is taken.
COUNT_UNLOCKED_BYTES = 8 * 1024


class Replayed(Exception):
    """An optimistic append met a stored message id: run it again, not optimistic."""


@dataclass(frozen=True, slots=True)
class AppendResult:
    created: bool
    messages: list[dict[str, Any]]
    budget: Budget
    previous_status: str


async def append(
    db: AsyncSession,
    tenant: str,
    sid: str,
    raw: Any,
    lock_token: str | None,
    settings: Settings,
    *,
    optimistic: bool = False,
) -> AppendResult:
    """Store the batch; with `optimistic`, may raise `Replayed` (nothing is written
    then: roll the transaction back and call again without it)."""
    batch = parse_batch(
        raw,
        max_messages=settings.max_messages_per_append,
        max_message_bytes=settings.max_message_bytes,
    )
    counter: TokenCounter | None = None
    counts: list[int] = []
    if _content_bytes(batch) > COUNT_UNLOCKED_BYTES:
        # Counted before the lock, with the model of an unlocked read, so that other
        # writers of the session do not wait on a large batch being tokenised.
        existing_row = await sessions.get(db, tenant, sid)
        model = effective_model(existing_row, settings) if existing_row else settings.default_model
        counter = get_counter(model)
        counts = await _count(counter, batch)
    # A small batch is counted under the lock (tens of microseconds), which saves the
    # unlocked read: one round trip of the few an append makes.
    locked = await sessions.get_for_update(db, tenant, sid)
    if locked is None:
        await sessions.insert_if_missing(db, new_session_values(tenant, sid, settings))
        locked = await sessions.get_for_update(db, tenant, sid)
    assert locked is not None
    row, lease_live = locked
    check_write(row, lease_live, lock_token)
    if counter is None or get_counter(effective_model(row, settings)).name != counter.name:
        # Counted now, or the model changed between our read and the lock (rarely).
        counter = get_counter(effective_model(row, settings))
        counts = await _count(counter, batch)
    if row.tokenizer != counter.name:
        await recount_log(db, row, counter)

    before = budget_of(row, settings)
    ids = [m.id for m in batch if m.id]
    # Optimistic: most appends carry ids never seen before (a replay is a client's
    # retry), so skip the look-up and let the insert find replays: a message id
    # already stored makes the INSERT ... ON CONFLICT DO NOTHING return fewer rows,
    # and the caller runs the whole append again the careful way (`Replayed`).
    optimistic = optimistic and bool(ids)
    stored = {} if optimistic else await repo.by_message_ids(db, tenant, sid, ids)
    fresh = [m for m in batch if m.id is None or m.id not in stored]
    _check_replays([m for m in batch if m.id is not None and m.id in stored], stored)
    try:
        await _check_tool_calls(db, tenant, sid, fresh)
    except ValidationFailed:
        if optimistic:  # maybe a replay of a tool step: decide with the look-up
            raise Replayed() from None
        raise

    assigned = _assign(row, fresh, counts)
    if fresh:
        inserted = await repo.insert_batch(
            db, *_rows(row, fresh, assigned), skip_stored_ids=optimistic
        )
        if optimistic and inserted < len(fresh):
            raise Replayed()
        await db.flush()
        metrics.MESSAGES_APPENDED.inc(len(fresh))
        metrics.TOKENS_APPENDED.inc(sum(assigned[m.index][1] for m in fresh))

    after = budget_of(row, settings)
    if after.status != before.status and after.status != "ok":
        await record_event(db, tenant, sid, f"budget.{after.status}", after.as_dict())

    out = []
    for m in batch:
        if m.id is not None and m.id in stored:
            out.append(_ack(stored[m.id].message_id, stored[m.id].seq, stored[m.id].token_count))
        else:
            seq, tokens, mid = assigned[m.index]
            out.append(_ack(mid, seq, tokens))
    return AppendResult(bool(fresh), out, after, before.status)


def _ack(mid: str, seq: int, tokens: int) -> dict[str, Any]:
    return {"id": mid, "seq": seq, "token_count": tokens}


async def _count(counter: TokenCounter, batch: Sequence[Incoming]) -> list[int]:
    def run() -> list[int]:
        return [counter.count_message(m.body) for m in batch]

    return await asyncio.to_thread(run) if _content_bytes(batch) > THREAD_THRESHOLD_BYTES else run()


def _content_bytes(batch: Sequence[Incoming]) -> int:
    return sum(len(str(m.body.get("content") or "")) for m in batch)


def _check_replays(replays: list[Incoming], stored: dict[str, MessageRow]) -> None:
    for m in replays:
        assert m.id is not None
        prev = stored[m.id]
        if prev.body != m.body or prev.role != m.role:
            raise Conflict(
                "idempotency_conflict",
                f"messages[{m.index}].id {m.id!r} was already stored as seq {prev.seq} "
                "with different content",
                seq=prev.seq,
            )


async def _check_tool_calls(
    db: AsyncSession, tenant: str, sid: str, fresh: Sequence[Incoming]
) -> None:
    made = [c for m in fresh for c in m.call_ids]
    answered = [m.answers for m in fresh if m.answers]
    known = await repo.tool_calls(db, tenant, sid, made + answered)
    errors: list[dict[str, str]] = []
    batch_calls: dict[str, int] = {}
    batch_answers: dict[str, int] = {}
    for m in fresh:
        loc = f"messages[{m.index}]"
        for j, call_id in enumerate(m.call_ids):
            if call_id in known:
                errors.append(
                    {
                        "loc": f"{loc}.tool_calls[{j}].id",
                        "msg": f"call id already used by seq {known[call_id].seq}",
                    }
                )
            batch_calls[call_id] = m.index
        if m.answers:
            ref = m.answers
            prior = known.get(ref)
            if prior is None and ref not in batch_calls:
                errors.append(
                    {"loc": f"{loc}.tool_call_id", "msg": f"answers no tool call {ref!r}"}
                )
            elif (prior is not None and prior.answered_seq is not None) or ref in batch_answers:
                errors.append(
                    {"loc": f"{loc}.tool_call_id", "msg": f"tool call {ref!r} is already answered"}
                )
            batch_answers[ref] = m.index
    if errors:
        raise ValidationFailed(errors)


def _assign(
    row: SessionRow, fresh: Sequence[Incoming], counts: list[int]
) -> dict[int, tuple[int, int, str]]:
    """Give each new message its seq and id, and advance the row's running totals."""
    assigned: dict[int, tuple[int, int, str]] = {}
    role_counts = {"system": 0, "user": 0, "assistant": 0, "tool": 0}
    for m in fresh:
        row.last_seq += 1
        tokens = counts[m.index]
        if m.include_in_context and m.role != "system":
            row.context_tokens += tokens
        role_counts[m.role] += 1
        assigned[m.index] = (row.last_seq, tokens, m.id or f"msg_{uuid.uuid4().hex}")
    row.count_system += role_counts["system"]
    row.count_user += role_counts["user"]
    row.count_assistant += role_counts["assistant"]
    row.count_tool += role_counts["tool"]
    return assigned


def _rows(
    row: SessionRow, fresh: Sequence[Incoming], assigned: dict[int, tuple[int, int, str]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    key = {"tenant_id": row.tenant_id, "session_id": row.id}
    messages: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    answers: list[dict[str, Any]] = []
    running = row.context_tokens - sum(
        assigned[m.index][1] for m in fresh if m.include_in_context and m.role != "system"
    )
    for m in fresh:
        seq, tokens, mid = assigned[m.index]
        if m.include_in_context and m.role != "system":
            running += tokens
        messages.append(
            {
                **key,
                "seq": seq,
                "message_id": mid,
                "role": m.role,
                "body": m.body,
                "token_count": tokens,
                "context_tokens_through": running,
                **{("metadata_" if k == "metadata" else k): v for k, v in m.flags().items()},
            }
        )
        calls.extend({**key, "call_id": c, "seq": seq} for c in m.call_ids)
        if m.answers:
            answers.append({**key, "call_id": m.answers, "answered_seq": seq})
    return messages, calls, answers


async def count_batch_for(row: SessionRow, raw: Any, settings: Settings) -> int:
    """Tokens these messages would add to the session's context (validated, not stored)."""
    batch = parse_batch(
        raw,
        max_messages=settings.max_messages_per_append,
        max_message_bytes=settings.max_message_bytes,
    )
    counts = await _count(get_counter(effective_model(row, settings)), batch)
    return sum(
        n for m, n in zip(batch, counts, strict=True) if m.include_in_context and m.role != "system"
    )


def message_view(m: MessageRow) -> dict[str, Any]:
    """A logged message as clients sent it, plus what contextd assigned."""
    return {
        **m.body,
        "id": m.message_id,
        "seq": m.seq,
        "token_count": m.token_count,
        "created_at": m.created_at,
        "pinned": m.pinned,
        "include_in_context": m.include_in_context,
        "mode": m.mode,
        "run_id": m.run_id,
        "metadata": m.metadata_,
        "error": m.error,
    }


def slice_text(
    m: MessageRow,
    char_start: int | None,
    char_end: int | None,
    line_start: int | None,
    line_end: int | None,
) -> tuple[str, dict[str, Any]]:
    """A piece of a message's text content and where it sits in the whole."""
    text = content_text(m.body)
    if line_start is not None or line_end is not None:
        all_lines = text.splitlines(keepends=True)
        first = line_start or 1
        last = min(line_end or len(all_lines), len(all_lines))
        if line_end is not None and line_end < first:
            raise invalid("line_end", "must not be before line_start")
        piece = "".join(all_lines[first - 1 : last])
        return piece, {"unit": "line", "start": first, "end": last, "total": len(all_lines)}
    start = char_start or 0
    end = min(char_end if char_end is not None else len(text), len(text))
    if char_end is not None and char_end < start:
        raise invalid("char_end", "must not be before char_start")
    piece = text[start:end]
    return piece, {"unit": "char", "start": start, "end": max(end, start), "total": len(text)}


def content_text(body: dict[str, Any]) -> str:
    content = body.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""
