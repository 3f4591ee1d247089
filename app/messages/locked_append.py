"""The locked append: the session row locked, stored ids and calls looked up, every problem named.

An append takes this way when its batch cannot be checked on what the one write
statement returns (app/messages/write.py): a replayed message id, a call id used
before, an answer to no open call. It is the same statement, after the look-ups."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from app.core.budget import effective_model
from app.core.errors import Conflict, ValidationFailed
from app.core.settings import Settings
from app.core.tokens import TokenCounter, get_counter
from app.db.database import Driver
from app.messages import repository as repo
from app.messages.counting import count_tokens, remember_model
from app.messages.validation import Incoming
from app.messages.write import (
    AppendResult,
    RecountNeeded,
    SessionHead,
    ack,
    finish_append,
    tool_rows,
    write_args,
)
from app.observability import metrics
from app.sessions.lease_rule import check_write


async def append_locked(
    conn: Driver,
    tenant: str,
    sid: str,
    batch: list[Incoming],
    counter: TokenCounter,
    counts: list[int],
    search: list[bytes | None],
    lock_token: str | None,
    settings: Settings,
) -> AppendResult:
    """Lock, look up what the batch refers to, check it, then write what is new."""
    record = await conn.fetchrow(repo.LOCK_SESSION, tenant, sid)
    if record is None:
        tokenizer = get_counter(settings.default_model).name
        await conn.execute(repo.CREATE_SESSION, tenant, sid, tokenizer)
        record = await conn.fetchrow(repo.LOCK_SESSION, tenant, sid)
    head = SessionHead.of(record)
    check_write(head, head.lease_live, lock_token)
    remember_model(tenant, sid, head.model)
    right = get_counter(effective_model(head, settings))
    if head.tokenizer != right.name:
        raise RecountNeeded(right)
    if right.name != counter.name:
        counts = await count_tokens(right, batch)

    stored = await repo.by_message_ids(conn, tenant, sid, [m.id for m in batch if m.id])
    _check_replays([m for m in batch if m.id is not None and m.id in stored], stored)
    fresh = [m for m in batch if m.id is None or m.id not in stored]
    fresh_counts = [counts[m.index] for m in fresh]
    fresh_search = [search[m.index] for m in fresh]
    await _check_tool_calls(conn, tenant, sid, fresh)
    ids = [m.id or f"msg_{uuid.uuid4().hex}" for m in fresh]
    assigned: dict[int, dict[str, Any]] = {}
    if fresh:
        result = await conn.fetchrow(
            repo.WRITE_BATCH,
            tenant,
            sid,
            *write_args(fresh, fresh_counts, ids, fresh_search, settings.tool_preview_tokens),
        )
        metrics.RE_READS.inc(result["re_reads_in"])
        calls, answers = tool_rows(fresh)
        # Checked and locked: anything short of the whole batch is a bug, not a race.
        got = (result["messages_in"], result["calls_in"], result["answers_in"])
        assert got == (len(fresh), len(calls), len(answers)), got
        for k, (m, mid, n) in enumerate(zip(fresh, ids, fresh_counts, strict=True), 1):
            assigned[m.index] = ack(mid, result["base_seq"] + k, n)
    acks = [assigned[m.index] if m.index in assigned else _stored_ack(stored, m) for m in batch]
    return await finish_append(conn, tenant, sid, head, fresh, fresh_counts, acks, settings)


def _stored_ack(stored: dict[str, Any], m: Incoming) -> dict[str, Any]:
    prev = stored[m.id or ""]
    return ack(prev["message_id"], prev["seq"], prev["token_count"])


def _check_replays(replays: list[Incoming], stored: dict[str, Any]) -> None:
    for m in replays:
        assert m.id is not None
        prev = stored[m.id]
        if prev["body"] != m.body or prev["role"] != m.role:
            raise Conflict(
                "idempotency_conflict",
                f"messages[{m.index}].id {m.id!r} was already stored as seq {prev['seq']} "
                "with different content",
                seq=prev["seq"],
            )


async def _check_tool_calls(conn: Driver, tenant: str, sid: str, fresh: Sequence[Incoming]) -> None:
    made = [c for m in fresh for c in m.call_ids]
    answered = [m.answers for m in fresh if m.answers]
    known = await repo.tool_calls(conn, tenant, sid, made + answered)
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
                        "msg": f"call id already used by seq {known[call_id]['seq']}",
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
            elif (prior is not None and prior["answered_seq"] is not None) or ref in batch_answers:
                errors.append(
                    {"loc": f"{loc}.tool_call_id", "msg": f"tool call {ref!r} is already answered"}
                )
            batch_answers[ref] = m.index
    if errors:
        raise ValidationFailed(errors)
