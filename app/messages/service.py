"""Appending to the log: seq allocation, idempotent replays, tool-call bookkeeping.

Appenders of one session serialise on that session's row lock, so seqs are
gap-free and strictly increasing across any number of server processes.

An append is one transaction of three round trips, the shape PostgreSQL's own
ceiling is measured with (bench/throughput.py): BEGIN, one statement that updates
the session row and inserts the batch (`repository.WRITE_BATCH`), COMMIT. Tokens
are counted before it, outside the lock, with the tokenizer the session used
last time in this process. What needs the locked row is decided on what that
statement returns, before the commit: the lease (a refused write rolls back), the
tokenizer (counted with the wrong one: roll back and count again), the budget
transition event, and at compact_needed whether a compaction job is active (one
more round trip; the append then only joins it). A batch that did not go in whole
(a replayed message id, a call id used before, an answer to no open call) is rolled
back and appended again the locked way: lock, look up, check, then the same
statement; that path names every problem and answers replays with their original
seqs.

This module is the append's front, what the rest of the app imports of it: the
request (`append_request`), the append, its group commit (`append_groups`), a batch
counted and not stored (`count_batch_for`), and a logged message as clients read it.
The parts behind it: the batch counted before the transaction in counting.py, the
transaction in write.py, the locked way in locked_append.py, group commit in
group_commit.py (the queue) and group_transaction.py (a group's transaction).
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from app.core.budget import effective_model
from app.core.conversation import content_text
from app.core.errors import invalid
from app.core.jsonsafe import storable_problem
from app.core.settings import Settings
from app.core.tokens import TokenCounter, get_counter
from app.db.models import MessageRow, SessionRow
from app.messages import repository as repo
from app.messages.counting import count_tokens, in_context, measure, model_hint
from app.messages.group_commit import GroupCommit
from app.messages.group_transaction import write_group
from app.messages.locked_append import append_locked
from app.messages.validation import Incoming, parse_batch
from app.messages.write import (
    AppendResult,
    LockedAppendNeeded,
    Pending,
    RecountNeeded,
    admit,
    finish_append,
    transaction,
    write_batch,
)
from app.observability import metrics
from app.sessions import repository as sessions
from app.sessions.recount import recount_session

if TYPE_CHECKING:
    from app.db.database import Database, Driver

# What groups a process's appends: made by `append_groups`, taken by `append`.
AppendGroups: TypeAlias = GroupCommit[Pending, AppendResult]


def append_groups(database: Database, max_size: int) -> AppendGroups:
    """Group commit for this process's appends (app/messages/group_commit.py), each group
    written in one transaction (app/messages/group_transaction.py)."""
    return GroupCommit(functools.partial(write_group, database), max_size=max_size)


class CompactionTrigger(Protocol):
    """What an append asks of the compaction runner (app/compaction/runner.py)."""

    async def on_compact_needed(self, tenant: str, sid: str, lock_token: str | None) -> None: ...


async def append_request(
    database: Database,
    settings: Settings,
    groups: AppendGroups | None,
    compactions: CompactionTrigger | None,
    tenant: str,
    sid: str,
    body: dict[str, Any],
) -> tuple[int, bytes]:
    """`POST /sessions/{id}/messages`, whole: the body's fields checked, the batch
    appended, a compaction asked for when the append left the session at
    compact_needed; the answer's status and JSON. Its one HTTP entrance is
    app/api/append_lane.py."""
    lock_token = body.get("lock_token")
    if lock_token is not None and not isinstance(lock_token, str):
        raise invalid("lock_token", "must be a string")
    if isinstance(lock_token, str) and storable_problem(lock_token, "lock_token"):
        raise invalid("lock_token", "must not contain NUL characters or lone surrogates")
    unknown = sorted(set(body) - {"messages", "lock_token"})
    if unknown:
        raise invalid(unknown[0], "is not a field of an append")
    result = await append(database, tenant, sid, body.get("messages"), lock_token, settings, groups)
    if (
        compactions is not None
        and result.created
        and result.auto_compact
        and result.budget.status == "compact_needed"
        and not result.job_active
    ):
        await compactions.on_compact_needed(tenant, sid, lock_token)
    # Plain ints and strings: encoded here, not walked by a response model.
    content = json.dumps({"messages": result.messages, "budget": result.budget.as_dict()})
    return (201 if result.created else 200), content.encode()


async def append(
    database: Database,
    tenant: str,
    sid: str,
    raw: Any,
    lock_token: str | None,
    settings: Settings,
    groups: AppendGroups | None = None,
) -> AppendResult:
    """Append a batch: in a group with other sessions' appends when `groups` is given
    and the batch is consistent in itself, else (or when the group did not take it) in
    a transaction of its own."""
    batch = parse_batch(
        raw,
        max_messages=settings.max_messages_per_append,
        max_message_bytes=settings.max_message_bytes,
    )
    counter = get_counter(model_hint(tenant, sid, settings.default_model))
    counts, search = await measure(counter, batch, tenant, sid)
    locked = not _fits_alone(batch)
    # Ids are made once: a write that does not stand stores none of them.
    ids = [m.id or f"msg_{uuid.uuid4().hex}" for m in batch]
    pending = Pending(tenant, sid, batch, counter, counts, lock_token, settings, ids, search)
    if groups is not None and not locked:
        grouped = await groups.submit((tenant, sid), pending)
        if grouped is not None:
            return grouped
    for _ in range(3):
        try:
            async with database.driver() as conn:
                if not locked:
                    try:
                        async with transaction(conn, repo.BEGIN_GENERIC):
                            return await _optimistic(conn, pending)
                    except LockedAppendNeeded:
                        locked = True
                async with transaction(conn, "BEGIN"):
                    return await append_locked(
                        conn,
                        tenant,
                        sid,
                        batch,
                        pending.counter,
                        pending.counts,
                        pending.search,
                        lock_token,
                        settings,
                    )
        except RecountNeeded as need:
            await _recount(database, tenant, sid, need.counter)
            pending.counter, pending.counts = need.counter, await count_tokens(need.counter, batch)
    raise RuntimeError(f"session {sid!r}: its tokenizer kept changing during the append")


async def _optimistic(conn: Driver, p: Pending) -> AppendResult:
    """The whole batch in one statement; raises `LockedAppendNeeded` when it did not fit."""
    result = await write_batch(conn, p)
    before, acks = admit(result, p)
    metrics.RE_READS.inc(result["re_reads_in"])
    return await finish_append(conn, p.tenant, p.sid, before, p.batch, p.counts, acks, p.settings)


def _fits_alone(batch: Sequence[Incoming]) -> bool:
    """Whether the batch's tool calls are consistent among themselves (then only the
    log can refuse it); the locked way names the problem of a batch that is not."""
    made: set[str] = set()
    answered: set[str] = set()
    for m in batch:
        if m.answers:
            if m.answers in answered:
                return False
            answered.add(m.answers)
        for call_id in m.call_ids:
            if call_id in answered:  # answered before it was made
                return False
            made.add(call_id)
    return True


async def _recount(database: Database, tenant: str, sid: str, counter: TokenCounter) -> None:
    """Recount the log for the session's tokenizer, in a transaction of its own (a model
    switch that app/sessions did not see: the default model changed meanwhile)."""
    async with database.transaction() as db:
        locked = await sessions.get_for_update(db, tenant, sid)
        if locked is not None and locked[0].tokenizer != counter.name:
            await recount_session(db, locked[0], counter)
            await db.flush()


async def count_batch_for(row: SessionRow, raw: Any, settings: Settings) -> int:
    """Tokens these messages would add to the session's context (validated, not stored)."""
    batch = parse_batch(
        raw,
        max_messages=settings.max_messages_per_append,
        max_message_bytes=settings.max_message_bytes,
    )
    counts = await count_tokens(get_counter(effective_model(row, settings)), batch)
    return sum(n for m, n in zip(batch, counts, strict=True) if in_context(m))


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
        if first > len(all_lines):
            # Said plainly: an empty piece answered "lines 50-1 of 1" to a model reading on.
            raise invalid("line_start", f"is past the message's last line ({len(all_lines)})")
        piece = "".join(all_lines[first - 1 : last])
        return piece, {"unit": "line", "start": first, "end": last, "total": len(all_lines)}
    start = char_start or 0
    end = min(char_end if char_end is not None else len(text), len(text))
    if char_end is not None and char_end < start:
        raise invalid("char_end", "must not be before char_start")
    if start > len(text) or (start == len(text) and text):
        raise invalid("char_start", f"is past the message's last character ({len(text)})")
    piece = text[start:end]
    return piece, {"unit": "char", "start": start, "end": max(end, start), "total": len(text)}
