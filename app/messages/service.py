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
back and appended again the careful way: lock, look up, check, then the same
statement; that path names every problem and answers replays with their original
seqs.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.budget import Budget
from app.compaction import repository as jobs
from app.db import is_unavailable
from app.errors import Conflict, ValidationFailed, invalid
from app.leases.guard import check_write
from app.messages import repository as repo
from app.messages.types import content_text, counts_in_context
from app.messages.validation import Incoming, parse_batch
from app.models import MessageRow, SessionRow
from app.observability import metrics
from app.search.text import message_tsvector, session_lexeme
from app.sessions import repository as sessions
from app.sessions.recount import recount_log
from app.sessions.service import budget_of, effective_model
from app.settings import Settings
from app.tokens import TokenCounter, get_counter

if TYPE_CHECKING:
    from app.api.deps import Database
    from app.messages.groups import Groups

# Tokenising this many bytes in the event loop would stall other requests.
THREAD_THRESHOLD_BYTES = 64 * 1024
# The model each session was last seen with, so that the next append counts with
# the right tokenizer before it reads the row. Only a guess: the write checks it
# against the row it locked. Bounded; forgotten wholesale when full.
_MODEL_HINTS: dict[tuple[str, str], str | None] = {}
_MODEL_HINTS_MAX = 50_000


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
    # pending or running, which this append then only joins (see `_finish`).
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


class _Careful(Exception):
    """The optimistic write did not fit: roll back and append the careful way."""


class _Recount(Exception):
    """The session's stored counts are of another tokenizer: recount, then append."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter


async def append(
    database: Database,
    tenant: str,
    sid: str,
    raw: Any,
    lock_token: str | None,
    settings: Settings,
    groups: Groups[Pending, AppendResult] | None = None,
) -> AppendResult:
    """Append a batch: in a group with other sessions' appends when `groups` is given
    and the batch is consistent in itself, else (or when the group did not take it) in
    a transaction of its own."""
    batch = parse_batch(
        raw,
        max_messages=settings.max_messages_per_append,
        max_message_bytes=settings.max_message_bytes,
    )
    counter = get_counter(_MODEL_HINTS.get((tenant, sid), settings.default_model))
    counts = await _count(counter, batch)
    search = await _vectors(tenant, sid, batch)
    careful = not _fits_alone(batch)
    # Ids are made once: a write that does not stand stores none of them.
    ids = [m.id or f"msg_{uuid.uuid4().hex}" for m in batch]
    pending = Pending(tenant, sid, batch, counter, counts, lock_token, settings, ids, search)
    if groups is not None and not careful:
        grouped = await groups.submit((tenant, sid), pending)
        if grouped is not None:
            return grouped
    for _ in range(3):
        try:
            async with database.driver() as conn:
                if not careful:
                    try:
                        async with _transaction(conn, repo.BEGIN_GENERIC):
                            return await _optimistic(conn, pending)
                    except _Careful:
                        careful = True
                async with _transaction(conn, "BEGIN"):
                    return await _careful(
                        conn,
                        tenant,
                        sid,
                        batch,
                        pending.counter,
                        pending.counts,
                        search,
                        lock_token,
                        settings,
                    )
        except _Recount as need:
            await _recount(database, tenant, sid, need.counter)
            pending.counter, pending.counts = need.counter, await _count(need.counter, batch)
    raise RuntimeError(f"session {sid!r}: its tokenizer kept changing during the append")


@asynccontextmanager
async def _transaction(conn: Any, begin: str) -> AsyncIterator[None]:
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


async def _optimistic(conn: Any, p: Pending) -> AppendResult:
    """The whole batch in one statement; raises `_Careful` when it did not fit."""
    before, acks = _admit(await _write_batch(conn, p), p)
    return await _finish(conn, p.tenant, p.sid, before, p.batch, p.counts, acks, p.settings)


async def _write_batch(conn: Any, p: Pending) -> Any:
    """WRITE_BATCH's row for the append: its session as it was, and what went in."""
    return await conn.fetchrow(
        repo.WRITE_BATCH,
        p.tenant,
        p.sid,
        *_write_args(p.batch, p.counts, p.ids, p.search),
    )


def _admit(result: Any, p: Pending) -> tuple[SessionHead, list[dict[str, Any]]]:
    """What a write statement returned, checked before the commit: the session as it was
    and the acknowledgements. Raises (the caller rolls back) when the write must not stand:
    the lease refuses it, the counts are of another tokenizer, or it did not go in whole."""
    if result is None:  # no such session yet
        raise _Careful()
    before = SessionHead.of(result, context_tokens=result["base_tokens"])
    check_write(before, before.lease_live, p.lock_token)  # raises: rolled back
    _remember(p.tenant, p.sid, before.model)
    right = get_counter(effective_model(before, p.settings))
    if right.name != p.counter.name:
        raise _Careful()  # counted with another tokenizer: count again, under the lock
    if before.tokenizer != right.name:
        raise _Recount(right)
    calls, answers = _tool_rows(p.batch)
    if (result["messages_in"], result["calls_in"], result["answers_in"]) != (
        len(p.batch),
        len(calls),
        len(answers),
    ):
        raise _Careful()
    base = result["base_seq"]
    acks = [
        _ack(mid, base + k, n) for k, (mid, n) in enumerate(zip(p.ids, p.counts, strict=True), 1)
    ]
    return before, acks


@dataclass(slots=True)
class Pending:
    """An append counted and not yet written: in a group (app/messages/groups.py) or in a
    transaction of its own."""

    tenant: str
    sid: str
    batch: list[Incoming]
    counter: TokenCounter
    counts: list[int]
    lock_token: str | None
    settings: Settings
    ids: list[str]
    # Each message's search lexemes as tsvector text, made with the token counts: before
    # the append waits for a group or a connection, not while it holds one.
    search: list[str | None]


class _Refused(Exception):
    """Some appends of a group must not stand: roll back, write the others again."""

    def __init__(self, indexes: list[int]) -> None:
        self.indexes = indexes


class _Alone(Exception):
    """The group's transaction failed before its commit: each append goes alone."""


async def write_group(database: Database, items: list[Pending]) -> list[AppendResult | None]:
    """Write the appends of several sessions in one transaction (app/messages/groups.py).

    None for an append the group did not take: its caller appends it alone, the way
    that names every problem (a refused lease, a replay, a first append that creates
    the session). A session not created yet wrote nothing and is simply left out;
    appends written and then refused are left out and the rest written again, once.
    Errors while the database is away reach every caller, as do errors of the
    COMMIT itself, after which the appends may be stored: writing them again could
    store them twice.
    """
    results: list[AppendResult | None] = [None] * len(items)
    todo = list(range(len(items)))
    for _ in range(2):
        try:
            written = await _write_group_once(database, [items[i] for i in todo])
        except _Refused as refused:
            out = set(refused.indexes)
            todo = [i for j, i in enumerate(todo) if j not in out]
            if not todo:
                break
            continue
        except _Alone:
            break
        for i, result in zip(todo, written, strict=True):
            results[i] = result
        break
    metrics.APPEND_GROUP_SIZE.observe(len(items))
    left_out = results.count(None)
    if left_out:
        metrics.APPENDS_LEFT_OUT.inc(left_out)
    return results


async def _write_group_once(database: Database, items: list[Pending]) -> list[AppendResult | None]:
    # A group of one (an idle server) is WRITE_BATCH on its cached plan, as an append
    # alone. WRITE_GROUP is planned for its parameters every time (the connection's
    # setting): a generic plan made while `sessions` was small joined the group to it
    # by a scan of the whole table (`bench/plans.py --show "locked AS"`). Planning it
    # is once per group, a few hundredths of a millisecond per append under load.
    alone = len(items) == 1
    async with (
        database.driver() as conn,
        _transaction(conn, repo.BEGIN_GENERIC if alone else "BEGIN"),
    ):
        try:
            if alone:
                by_k = {1: await _write_batch(conn, items[0])}
            else:
                rows = await conn.fetch(repo.WRITE_GROUP, *_group_args(items))
                by_k = {row["k"]: row for row in rows}
        except Exception as exc:
            if is_unavailable(exc):
                raise
            raise _Alone() from exc  # e.g. a deadlock with a transaction of another kind
        admitted: list[tuple[Pending, SessionHead, list[dict[str, Any]]] | None] = []
        refused: list[int] = []
        for k, p in enumerate(items, 1):
            row = by_k.get(k)
            if row is None:  # no such session yet: nothing of it was written
                admitted.append(None)
                continue
            try:
                head, acks = _admit(row, p)
            except Exception:
                refused.append(k - 1)
                continue
            admitted.append((p, head, acks))
        if refused:
            raise _Refused(refused)
        results: list[AppendResult | None] = []
        for entry in admitted:
            if entry is None:
                results.append(None)
                continue
            p, head, acks = entry
            results.append(
                await _finish(conn, p.tenant, p.sid, head, p.batch, p.counts, acks, p.settings)
            )
        return results


def _group_args(items: Sequence[Pending]) -> list[Any]:
    """WRITE_GROUP's parameters: each append's WRITE_BATCH arguments, tagged with its k."""
    columns: list[list[Any]] = [[] for _ in range(29)]
    for k, p in enumerate(items, 1):
        args = _write_args(p.batch, p.counts, p.ids, p.search)
        columns[0].append(p.tenant)
        columns[1].append(p.sid)
        for col, value in enumerate(args[:6], 2):  # n, tokens, then the four role counts
            columns[col].append(value)
        columns[8].extend([k] * len(p.batch))
        columns[9].extend(range(1, len(p.batch) + 1))
        for col, values in enumerate(args[6:17], 10):  # the message columns
            columns[col].extend(values)
        columns[21].extend([k] * len(args[17]))
        for col, values in enumerate(args[17:20], 22):  # the calls made
            columns[col].extend(values)
        columns[25].extend([k] * len(args[20]))
        for col, values in enumerate(args[20:22], 26):  # the answers to earlier calls
            columns[col].extend(values)
        columns[28].extend(args[22])  # the messages' search lexemes
    return columns


async def _careful(
    conn: Any,
    tenant: str,
    sid: str,
    batch: list[Incoming],
    counter: TokenCounter,
    counts: list[int],
    search: list[str | None],
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
    _remember(tenant, sid, head.model)
    right = get_counter(effective_model(head, settings))
    if head.tokenizer != right.name:
        raise _Recount(right)
    if right.name != counter.name:
        counts = await _count(right, batch)

    stored = await repo.by_message_ids(conn, tenant, sid, [m.id for m in batch if m.id])
    _check_replays([m for m in batch if m.id is not None and m.id in stored], stored)
    fresh = [m for m in batch if m.id is None or m.id not in stored]
    fresh_counts = [counts[m.index] for m in fresh]
    await _check_tool_calls(conn, tenant, sid, fresh)
    ids = [m.id or f"msg_{uuid.uuid4().hex}" for m in fresh]
    assigned: dict[int, dict[str, Any]] = {}
    if fresh:
        result = await conn.fetchrow(
            repo.WRITE_BATCH,
            tenant,
            sid,
            *_write_args(fresh, fresh_counts, ids, [search[m.index] for m in fresh]),
        )
        calls, answers = _tool_rows(fresh)
        # Checked and locked: anything short of the whole batch is a bug, not a race.
        got = (result["messages_in"], result["calls_in"], result["answers_in"])
        assert got == (len(fresh), len(calls), len(answers)), got
        for k, (m, mid, n) in enumerate(zip(fresh, ids, fresh_counts, strict=True), 1):
            assigned[m.index] = _ack(mid, result["base_seq"] + k, n)
    acks = [assigned[m.index] if m.index in assigned else _stored_ack(stored, m) for m in batch]
    return await _finish(conn, tenant, sid, head, fresh, fresh_counts, acks, settings)


async def _finish(
    conn: Any,
    tenant: str,
    sid: str,
    before: SessionHead,
    fresh: Sequence[Incoming],
    counts: Sequence[int],
    acks: list[dict[str, Any]],
    settings: Settings,
) -> AppendResult:
    """The budget before and after, the transition's event, whether a compaction job is
    active, the metrics."""
    added = sum(n for m, n in zip(fresh, counts, strict=True) if _in_context(m))
    was = budget_of(before, settings)
    before.context_tokens += added
    now = budget_of(before, settings)
    if now.status != was.status and now.status != "ok":
        await conn.execute(
            repo.INSERT_EVENT, tenant, sid, f"budget.{now.status}", json.dumps(now.as_dict())
        )
    # Every append at compact_needed asks the runner for a job (app/messages/lane.py),
    # and while the session's job waits or runs (most of them) the answer is only "join
    # it". Asked here, on this connection and under the session row's lock: a job active
    # now stores after this append commits (its store waits for the lock), so that
    # store and the job's chain see the append, as a join under the runner's lock does.
    joins = (
        bool(fresh)
        and before.auto_compact
        and now.status == "compact_needed"
        and await jobs.has_active_job(conn, tenant, sid)
    )
    if fresh:
        metrics.MESSAGES_APPENDED.inc(len(fresh))
        metrics.TOKENS_APPENDED.inc(sum(counts))
    return AppendResult(bool(fresh), acks, now, was.status, before.auto_compact, joins)


def _write_args(
    batch: Sequence[Incoming],
    counts: Sequence[int],
    ids: Sequence[str],
    search: Sequence[str | None],
) -> list[Any]:
    """WRITE_BATCH's parameters after tenant and session: totals, then one array per column."""
    roles = {"system": 0, "user": 0, "assistant": 0, "tool": 0}
    through: list[int] = []
    running = 0
    for m, n in zip(batch, counts, strict=True):
        roles[m.role] += 1
        if _in_context(m):
            running += n
        through.append(running)
    calls, answers = _tool_rows(batch)
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
        # The search lexemes as tsvector text ($25): the index is written by the same
        # statement, in the same transaction, as the message.
        list(search),
    ]


def _tool_rows(
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


def _fits_alone(batch: Sequence[Incoming]) -> bool:
    """Whether the batch's tool calls are consistent among themselves (then only the
    log can refuse it); the careful path names the problem of a batch that is not."""
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


def _in_context(m: Incoming) -> bool:
    return counts_in_context(m.role, m.include_in_context, m.metadata)


def _remember(tenant: str, sid: str, model: str | None) -> None:
    if len(_MODEL_HINTS) >= _MODEL_HINTS_MAX:
        _MODEL_HINTS.clear()
    _MODEL_HINTS[(tenant, sid)] = model


async def _recount(database: Database, tenant: str, sid: str, counter: TokenCounter) -> None:
    """Recount the log for the session's tokenizer, in a transaction of its own (a model
    switch that app/sessions did not see: the default model changed meanwhile)."""
    async with database.transaction() as db:
        locked = await sessions.get_for_update(db, tenant, sid)
        if locked is not None and locked[0].tokenizer != counter.name:
            await recount_log(db, locked[0], counter)
            await db.flush()


def _ack(mid: str, seq: int, tokens: int) -> dict[str, Any]:
    return {"id": mid, "seq": seq, "token_count": tokens}


def _stored_ack(stored: dict[str, Any], m: Incoming) -> dict[str, Any]:
    prev = stored[m.id or ""]
    return _ack(prev["message_id"], prev["seq"], prev["token_count"])


async def _vectors(tenant: str, sid: str, batch: Sequence[Incoming]) -> list[str | None]:
    """Each message's search lexemes as tsvector text (app/search/text.py)."""
    key = session_lexeme(tenant, sid)

    def run() -> list[str | None]:
        return [message_tsvector(m.body, key) for m in batch]

    return await asyncio.to_thread(run) if _content_bytes(batch) > THREAD_THRESHOLD_BYTES else run()


async def _count(counter: TokenCounter, batch: Sequence[Incoming]) -> list[int]:
    def run() -> list[int]:
        return [counter.count_message(m.body) for m in batch]

    return await asyncio.to_thread(run) if _content_bytes(batch) > THREAD_THRESHOLD_BYTES else run()


def _content_bytes(batch: Sequence[Incoming]) -> int:
    return sum(len(str(m.body.get("content") or "")) for m in batch)


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


async def _check_tool_calls(conn: Any, tenant: str, sid: str, fresh: Sequence[Incoming]) -> None:
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


async def count_batch_for(row: SessionRow, raw: Any, settings: Settings) -> int:
    """Tokens these messages would add to the session's context (validated, not stored)."""
    batch = parse_batch(
        raw,
        max_messages=settings.max_messages_per_append,
        max_message_bytes=settings.max_message_bytes,
    )
    counts = await _count(get_counter(effective_model(row, settings)), batch)
    return sum(n for m, n in zip(batch, counts, strict=True) if _in_context(m))


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
