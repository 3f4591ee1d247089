"""The append's transaction: one statement that updates the session row and inserts the batch.

What needs the locked row is decided on what the statement returns, before COMMIT:
the lease, the tokenizer, the budget transition and, at compact_needed, whether a
compaction job is active (app/messages/service.py's docstring tells the whole path).
Every way an append is written (alone, locked, in a group) uses what is here."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from app.core.budget import Budget, budget_of, effective_model
from app.core.settings import Settings
from app.core.tokens import TokenCounter, get_counter
from app.db.database import Driver
from app.messages import repository as repo
from app.messages import rereads
from app.messages.counting import in_context, remember_model
from app.messages.validation import Incoming
from app.observability import metrics
from app.sessions import repository as sessions
from app.sessions.lease_rule import check_write


@dataclass(frozen=True, slots=True)
class AppendResult:
    created: bool
    messages: list[dict[str, Any]]
    budget: Budget
    previous_status: str
    # The session's auto_compact as the append's statement read it: without it an
    # append at compact_needed queues nothing, and need not ask the runner.
    auto_compact: bool = True
    # At compact_needed and auto_compact: whether the session had a compaction job
    # pending or running, which this append then only joins (see `finish_append`).
    job_active: bool = False


@dataclass(slots=True)
class SessionHead:
    """The session row's columns an append decides on (`repository._HEAD`)."""

    model: str | None
    context_limit: int | None
    compaction: dict[str, Any]
    token_calibration: dict[str, Any]
    tokenizer: str
    auto_compact: bool
    system_tokens: int
    tools_tokens: int
    summary_tokens: int
    context_tokens: int
    watermark_context_tokens: int
    last_seq: int
    lease_token: str | None
    lease_owner: str | None
    lease_live: bool

    @classmethod
    def of(cls, record: Any, **changes: Any) -> SessionHead:
        values = {name: record[name] for name in _HEAD_FIELDS}
        values["compaction"] = values["compaction"] or {}
        values["token_calibration"] = values["token_calibration"] or {}
        values.update(changes)
        return cls(**values)


_HEAD_FIELDS = tuple(SessionHead.__dataclass_fields__)


class LockedAppendNeeded(Exception):
    """The optimistic write did not fit: roll back and append the locked way
    (app/messages/locked_append.py)."""


class RecountNeeded(Exception):
    """The session's stored counts are of another tokenizer: recount, then append."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter


@asynccontextmanager
async def transaction(conn: Driver, begin: str) -> AsyncIterator[None]:
    """BEGIN (and what rides along with it in the same round trip), COMMIT or ROLLBACK.
    A rollback that fails leaves the connection in a transaction: Database.driver
    then closes it instead of pooling it."""
    await conn.execute(begin)
    try:
        yield
    except BaseException:
        if not conn.is_closed():
            await conn.execute("ROLLBACK")
        raise
    await conn.execute("COMMIT")


async def write_batch(conn: Driver, p: Pending) -> Any:
    """WRITE_BATCH's row for the append: its session as it was, and what went in."""
    return await conn.fetchrow(
        repo.WRITE_BATCH,
        p.tenant,
        p.sid,
        *write_args(p.batch, p.counts, p.ids, p.search, p.settings.tool_preview_tokens),
    )


def admit(result: Any, p: Pending) -> tuple[SessionHead, list[dict[str, Any]]]:
    """What a write statement returned, checked before the commit: the session as it was
    and the acknowledgements. Raises (the caller rolls back) when the write must not stand:
    the lease refuses it, the counts are of another tokenizer, or it did not go in whole."""
    if result is None:  # no such session yet
        raise LockedAppendNeeded()
    before = SessionHead.of(result, context_tokens=result["base_tokens"])
    check_write(before, before.lease_live, p.lock_token)  # raises: rolled back
    remember_model(p.tenant, p.sid, before.model)
    right = get_counter(effective_model(before, p.settings))
    if right.name != p.counter.name:
        raise LockedAppendNeeded()  # counted with another tokenizer: count again, under the lock
    if before.tokenizer != right.name:
        raise RecountNeeded(right)
    calls, answers = tool_rows(p.batch)
    if (result["messages_in"], result["calls_in"], result["answers_in"]) != (
        len(p.batch),
        len(calls),
        len(answers),
    ):
        raise LockedAppendNeeded()
    base = result["base_seq"]
    acks = [
        ack(mid, base + k, n) for k, (mid, n) in enumerate(zip(p.ids, p.counts, strict=True), 1)
    ]
    return before, acks


@dataclass(slots=True)
class Pending:
    """An append counted and not yet written: in a group (app/messages/group_commit.py) or in a
    transaction of its own."""

    tenant: str
    sid: str
    batch: list[Incoming]
    counter: TokenCounter
    counts: list[int]
    lock_token: str | None
    settings: Settings
    ids: list[str]
    # Each message's search vector (app/index/vector.py), made with the token counts
    # before any connection is held; written by the append's own statement.
    search: list[bytes | None]


async def finish_append(
    conn: Driver,
    tenant: str,
    sid: str,
    before: SessionHead,
    fresh: Sequence[Incoming],
    counts: Sequence[int],
    acks: list[dict[str, Any]],
    settings: Settings,
) -> AppendResult:
    """The append's result once its rows are in: the budget before and after, the
    transition's event, whether a compaction job is active, the metrics."""
    added = sum(n for m, n in zip(fresh, counts, strict=True) if in_context(m))
    # `before` holds watermark_context_tokens as the UPDATE left it (RETURNING sees only
    # the new row): after a batch with a user message, without a turn anchor it gave back
    # (repository._GIVE_BACK). `was` is then the log before the append as counted now,
    # so `was` to `now` still only rises (an append adds tokens): the give-back's own drop
    # emits no event, and a status the stored figure had reached may be announced again.
    was = budget_of(before, settings)
    before.context_tokens += added
    now = budget_of(before, settings)
    if now.status != was.status and now.status != "ok":
        await conn.execute(
            repo.INSERT_EVENT, tenant, sid, f"budget.{now.status}", json.dumps(now.as_dict())
        )
    # Every append at compact_needed asks the runner for a job (messages.service.append_request),
    # and while the session's job waits or runs (most of them) the answer is only "join
    # it". Asked here, on this connection and under the session row's lock: a job active
    # now stores after this append commits (its store waits for the lock), so that
    # store and the job's chain see the append, as a join under the runner's lock does.
    joins = (
        bool(fresh)
        and before.auto_compact
        and now.status == "compact_needed"
        and await sessions.has_active_job(conn, tenant, sid)
    )
    if fresh:
        metrics.MESSAGES_APPENDED.inc(len(fresh))
        metrics.TOKENS_APPENDED.inc(sum(counts))
    return AppendResult(bool(fresh), acks, now, was.status, before.auto_compact, joins)


def write_args(
    batch: Sequence[Incoming],
    counts: Sequence[int],
    ids: Sequence[str],
    search: Sequence[bytes | None],
    preview_limit: int,
) -> list[Any]:
    """WRITE_BATCH's parameters after tenant and session: totals, then one array per column."""
    roles = {"system": 0, "user": 0, "assistant": 0, "tool": 0}
    through: list[int] = []
    running = 0
    for m, n in zip(batch, counts, strict=True):
        roles[m.role] += 1
        if in_context(m):
            running += n
        through.append(running)
    calls, answers = tool_rows(batch)
    keys = _call_keys(batch, calls)
    return [
        len(batch),
        running,
        roles["system"],
        roles["user"],
        roles["assistant"],
        roles["tool"],
        list(ids),
        [m.role for m in batch],
        [json.dumps(m.body, ensure_ascii=False) for m in batch],
        list(counts),
        through,
        [m.pinned for m in batch],
        [m.include_in_context for m in batch],
        [m.mode for m in batch],
        [m.run_id for m in batch],
        # JSON null, not SQL NULL, for unset flags: what every stored row holds.
        [json.dumps(m.metadata, ensure_ascii=False) for m in batch],
        [json.dumps(m.error, ensure_ascii=False) for m in batch],
        [c[0] for c in calls],
        [c[1] for c in calls],
        [c[2] for c in calls],
        [a[0] for a in answers],
        [a[1] for a in answers],
        # The search vectors ($25, binary tsvectors): the index is written by the same
        # statement, in the same transaction, as the message.
        list(search),
        # Each call's name-and-arguments digest ($26, app/messages/rereads.py), the
        # distinct ones the re-read check looks up ($27), and the preview limit ($28).
        keys,
        sorted({k for k in keys if k is not None}),
        preview_limit,
    ]


def _call_keys(
    batch: Sequence[Incoming], calls: Sequence[tuple[str, int, int | None]]
) -> list[str | None]:
    keys: dict[str, str] = {}
    for m in batch:
        keys.update(rereads.keys_of(m))
    return [keys.get(c[0]) for c in calls]


def tool_rows(
    batch: Sequence[Incoming],
) -> tuple[list[tuple[str, int, int | None]], list[tuple[str, int]]]:
    """(call id, ordinal of its message, ordinal of its answer in this batch or None) per
    call made, and (call id, ordinal) per answer to a call made before this batch."""
    made: dict[str, list[Any]] = {}
    answers: list[tuple[str, int]] = []
    for k, m in enumerate(batch, 1):
        for call_id in m.call_ids:
            made[call_id] = [call_id, k, None]
        if m.answers:
            if m.answers in made:
                made[m.answers][2] = k
            else:
                answers.append((m.answers, k))
    return [(c[0], c[1], c[2]) for c in made.values()], answers


def ack(mid: str, seq: int, tokens: int) -> dict[str, Any]:
    """A stored message as the append's answer lists it."""
    return {"id": mid, "seq": seq, "token_count": tokens}
