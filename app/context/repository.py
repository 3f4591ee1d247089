"""Reads for assembly: only as much of the log as the budget can reach.

Every query walks the `(tenant_id, session_id, seq)` primary key, the
`(tenant_id, session_id, call_id)` key of `tool_calls` or a partial index from
the newest end, so the cost follows the size of the window, never the length
of the log. One round trip for the window, the user messages before it (up to
`EARLIER_USERS`, the first opening its oldest turn) and the pinned messages;
one more only when an edge of the window cuts a tool group. Bodies already
read for the session's previous window are not sent again (see `_windows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Text,
    all_,
    and_,
    any_,
    bindparam,
    case,
    func,
    literal_column,
    null,
    or_,
    select,
    union_all,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, array
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.orm.attributes import instance_state

from app import conversation
from app.context import stability
from app.context.lru import LRU
from app.conversation import LoggedMessage
from app.database import Driver
from app.db import Compiled
from app.errors import NotFound
from app.models import CompactionJobRow, ContextLayoutRow, MessageRow, SessionRow, ToolCallRow
from app.models.job import ACTIVE

# Imported from here before app/conversation.py held it.
to_logged = conversation.to_logged


# Bodies of the windows read last, per session: an agent asks for a payload on
# every model call and its window barely moves between two calls, so most of
# the bytes a read would carry (and decode) are the same as last time. Rows
# are immutable once appended except for their token counts and flags, which
# are read every time; a row is known by (seq, message id, created_at) within
# its (tenant, session), so a session deleted and created again never finds
# the old bodies. Bounded by the tokens held (roughly 4 bytes of text each).
# Bodies are shared between calls: nothing may mutate a LoggedMessage.body.
WINDOW_CACHE_TOKENS = 4_000_000
WINDOW_CACHE_SESSIONS = 1024


@dataclass(frozen=True, slots=True)
class _Known:
    """The rows of a session's last read: every seq in `lo..hi`, plus `extra` (older)."""

    rows: dict[int, LoggedMessage]
    lo: int
    hi: int
    extra: list[int]

    @classmethod
    def of(cls, rows: dict[int, LoggedMessage]) -> _Known:
        if not rows:
            return cls(rows, 0, -1, [])
        hi = lo = max(rows)
        while lo - 1 in rows:
            lo -= 1
        # Older rows come back from the window statement only as user or pinned messages
        # (a layout's other old units are read by seqs, which name the known ones
        # themselves): the array every row of the window is tested against stays short.
        extra = [s for s, m in rows.items() if s < lo and (m.role == "user" or m.pinned)]
        return cls(rows, lo, hi, extra)


_NOTHING_KNOWN = _Known({}, 0, -1, [])
_windows: LRU[tuple[str, str], _Known] = LRU(
    WINDOW_CACHE_SESSIONS,
    max_weight=WINDOW_CACHE_TOKENS,
    weigh=lambda known: sum(m.token_count for m in known.rows.values()) + len(known.rows),
)


def clear_cache() -> None:
    _windows.clear()


# --- running fixed statements on the driver ---------------------------------------------------
# The reads of a payload are fixed Core statements run on every call. Through
# `AsyncSession.execute` each costs ~0.3 ms of CPU beyond asyncpg's own work here
# (cache-key lookup, parameter and result processing, Row objects: a trivial select
# 0.40 ms against 0.07 ms on the driver): ~1 ms per context call. They are compiled
# once and run by asyncpg on the payload pool's connection (`Database.payloads()`,
# which also invalidates it when the database is away); their parameters
# need no conversion (text, integers, arrays of them) and the driver decodes their
# columns (jsonb included: the dialect registers its codecs on every connection).


async def _fetch(db: Driver, stmt: Compiled, params: dict[str, Any]) -> list[Any]:
    rows: list[Any] = await db.fetch(stmt.sql, *stmt.args(params))
    return rows


# --- statements, built once -------------------------------------------------------------------
# Module-level statements with bound parameters: SQLAlchemy memoizes a statement
# object's cache key, so a call pays neither building nor keying the SQL. Lists
# travel as one array parameter, never one parameter per value, so each
# statement stays one prepared statement on the server.

_MSG = MessageRow
# LIMIT 1 written out, not a bound parameter: with an unknown count a generic plan
# assumes a tenth of the rows, costs itself above the custom plans and PostgreSQL
# then plans the statement again on every execution (~0.7 ms here).
_ONE: ColumnElement[int] = literal_column("1")
EARLIER_USERS = 64
_EARLIER_USERS: ColumnElement[int] = literal_column(str(EARLIER_USERS))
_IN_SESSION = (_MSG.tenant_id == bindparam("tenant"), _MSG.session_id == bindparam("sid"))
_SEQS = ARRAY(BigInteger)


def _jsonb_or_null(column: Any) -> Any:
    # The flags columns hold JSON `null` when unset; SQL NULL decodes to the same None
    # without a trip through the JSON decoder for every row.
    return func.nullif(column, literal_column("'null'::jsonb"), type_=JSONB)


# The server leaves out (NULL) the bodies of the rows the last read of this session
# saw; every other column comes every time. `body` itself is never NULL. Those rows
# are one contiguous range and a few older ones: a range test and a short array,
# not `= ANY` over every seq, which would cost rows x window comparisons.
_KNOWN = or_(
    _MSG.seq.between(bindparam("known_lo"), bindparam("known_hi")),
    _MSG.seq == any_(bindparam("known_extra", type_=_SEQS)),
)
_BODY = case((_KNOWN, null()), else_=_MSG.body)
# Plain columns, not ORM entities: assembly never writes these rows back, so the
# identity map, attribute instrumentation and per-row state would be pure overhead.
_COLUMNS = (
    _MSG.seq,
    _MSG.message_id,
    _MSG.role,
    _BODY,
    _MSG.token_count,
    _MSG.pinned,
    _MSG.include_in_context,
    _MSG.mode,
    _MSG.run_id,
    _jsonb_or_null(_MSG.metadata_),
    _jsonb_or_null(_MSG.error),
    _MSG.created_at,
)

# The newest message at or below the threshold marks where the window starts: a
# backward walk of the primary key that stops after the window's rows. Evaluated
# once (a CTE referenced three times is materialized); its value bounds the index
# scans of the window, the user message opening its oldest turn and the older
# pinned messages, all in one round trip.
_BOUNDARY = (
    select(_MSG.seq)
    .where(
        *_IN_SESSION,
        _MSG.seq > bindparam("floor"),
        _MSG.context_tokens_through <= bindparam("threshold"),
    )
    .order_by(_MSG.seq.desc())
    .limit(_ONE)
    .scalar_subquery()
)
_START_CTE = select(
    (func.coalesce(_BOUNDARY, bindparam("floor", type_=BigInteger)) + 1).label("seq")
).cte("window_start")
_START = select(_START_CTE.c.seq).scalar_subquery()
_BEFORE = (_MSG.seq > bindparam("floor"), _MSG.seq < _START)
# When the window opens on tool results, their call is just before it: the rows
# from the nearest message before the start that is not a tool result are read
# along (the lead-in), so the group can be completed without a lookup in
# `tool_calls` in the usual case. Only the rows the group needs are kept.
_TOOL: ColumnElement[str] = literal_column("'tool'")
_LEAD_IN_CTE = select(
    case(
        (
            select(_MSG.role).where(*_IN_SESSION, _MSG.seq == _START).scalar_subquery() == _TOOL,
            func.coalesce(
                select(_MSG.seq)
                .where(*_IN_SESSION, *_BEFORE, _MSG.role != _TOOL)
                .order_by(_MSG.seq.desc())
                .limit(_ONE)
                .scalar_subquery(),
                _START,
            ),
        ),
        else_=_START,
    ).label("seq")
).cte("lead_in")
_LEAD_IN = select(_LEAD_IN_CTE.c.seq).scalar_subquery()


def _part(n: int) -> Any:
    return literal_column(str(n)).label("part")


_RECENT, _OPENER, _PINNED, _LEAD, _ANCHOR = 1, 2, 3, 4, 5
_WINDOW = union_all(
    # Both bounds, although nothing follows `last_seq`: the planner cannot know the
    # start (a subquery), and an open range would be estimated at a third of the
    # session's rows, enough for a sequential scan of a session that fills the
    # table. A closed range with an unknown end is estimated at 0.5% of them, so
    # the primary key is walked whatever the session's share of the table.
    select(*_COLUMNS, _part(_RECENT)).where(
        *_IN_SESSION, _MSG.seq >= _START, _MSG.seq <= bindparam("last_seq")
    ),
    # The user messages before the window, newest first (the first opens its oldest
    # turn): a strategy keeps a user's short mid-run instruction ahead of any tool
    # output (SPEC §3), so it must be offered ones older than the budget reaches.
    # Bounded: `EARLIER_USERS` rows of the partial index on users.
    select(*_COLUMNS, _part(_OPENER))
    # A literal, not a parameter: the partial index on users holds for generic plans too.
    .where(*_IN_SESSION, _MSG.role == literal_column("'user'"), *_BEFORE)
    .order_by(_MSG.seq.desc())
    .limit(_EARLIER_USERS)
    .subquery()
    .select(),
    select(*_COLUMNS, _part(_PINNED)).where(*_IN_SESSION, _MSG.pinned, *_BEFORE),
    select(*_COLUMNS, _part(_LEAD)).where(*_IN_SESSION, _MSG.seq >= _LEAD_IN, _MSG.seq < _START),
    # The turn anchor (SPEC §5): the session's latest user message, whatever the floor.
    # A compaction may move the watermark inside the current turn, past the message
    # that opens it; that message stays in the effective history verbatim. Above the
    # floor it is one of the rows above already (read once: rows are kept by seq).
    select(*_COLUMNS, _part(_ANCHOR))
    .where(*_IN_SESSION, _MSG.role == literal_column("'user'"))
    .order_by(_MSG.seq.desc())
    .limit(_ONE)
    .subquery()
    .select(),
)
# The calls and answers of some call ids that were not read yet: a nested loop from
# the `tool_calls` key to the messages' primary key.
_MEMBERS = (
    select(*_COLUMNS)
    .join_from(
        _MSG,
        ToolCallRow,
        and_(
            ToolCallRow.tenant_id == _MSG.tenant_id,
            ToolCallRow.session_id == _MSG.session_id,
            _MSG.seq == any_(array([ToolCallRow.seq, ToolCallRow.answered_seq])),
        ),
    )
    .where(
        ToolCallRow.tenant_id == bindparam("tenant"),
        ToolCallRow.session_id == bindparam("sid"),
        ToolCallRow.call_id == any_(bindparam("ids", type_=ARRAY(Text))),
        _MSG.seq > bindparam("floor"),
        _MSG.seq != all_(bindparam("have", type_=_SEQS)),
    )
)
_BODIES = select(_MSG.seq, _MSG.body).where(
    *_IN_SESSION, _MSG.seq == any_(bindparam("seqs", type_=_SEQS))
)
_WINDOW_SQL = Compiled(_WINDOW)
_MEMBERS_SQL = Compiled(_MEMBERS)
_BODIES_SQL = Compiled(_BODIES)


class _Reader:
    """One window read: which rows' bodies are already known, and what was read."""

    __slots__ = ("known", "missing", "params", "rows")

    def __init__(self, session: SessionRow) -> None:
        known = _windows.get((session.tenant_id, session.id)) or _NOTHING_KNOWN
        self.known = known.rows
        self.params: dict[str, Any] = {
            "tenant": session.tenant_id,
            "sid": session.id,
            "floor": session.last_compaction_seq,
            "known_lo": known.lo,
            "known_hi": known.hi,
            "known_extra": known.extra,
        }
        self.rows: dict[int, LoggedMessage] = {}
        self.missing: dict[int, Sequence[Any]] = {}

    def add(self, r: Sequence[Any]) -> LoggedMessage | None:
        """Keeps a row read with `_COLUMNS`; None if read already or its body is still due."""
        if r[0] in self.rows:
            return None
        m = self.message(r)
        if m is None:
            self.missing[r[0]] = r  # not the row we saw: a concurrent read replaced it
            return None
        self.rows[m.seq] = m
        return m

    def message(self, r: Sequence[Any]) -> LoggedMessage | None:
        """The message of a row read with `_COLUMNS`; None if its body must be fetched."""
        # By position: a union names its columns after the table's (`metadata`), a
        # plain select after the ORM attributes (`metadata_`).
        (
            seq,
            mid,
            role,
            body,
            tokens,
            pinned,
            include,
            mode,
            run_id,
            metadata,
            error,
            created,
            *_,
        ) = r
        if body is None:
            prev = self.known.get(seq)
            if prev is None or prev.id != mid or prev.created_at != created:
                return None
            if (role, tokens, pinned, include, mode, run_id, metadata, error) == _flags(prev):
                return prev
            body = prev.body  # a recount changed its tokens: same body, new row
        return LoggedMessage(
            seq=seq,
            id=mid,
            role=role,
            body=body,
            token_count=tokens,
            pinned=pinned,
            include_in_context=include,
            mode=mode,
            run_id=run_id,
            metadata=metadata,
            error=error,
            created_at=created,
        )

    async def fetch_missing(self, db: Driver) -> list[LoggedMessage]:
        if not self.missing:
            return []
        params = {**self.params, "seqs": list(self.missing)}
        out = []
        for seq, body in await _fetch(db, _BODIES_SQL, params):
            r = self.missing.pop(seq)
            added = self.add((*r[:3], body, *r[4:]))
            if added is not None:
                out.append(added)
        return out

    def keep(self) -> None:
        _windows.put((self.params["tenant"], self.params["sid"]), _Known.of(dict(self.rows)))


def _flags(m: LoggedMessage) -> tuple[Any, ...]:
    return (
        m.role,
        m.token_count,
        m.pinned,
        m.include_in_context,
        m.mode,
        m.run_id,
        m.metadata,
        m.error,
    )


async def window(db: Driver, session: SessionRow, read_tokens: int) -> list[LoggedMessage]:
    """Effective-history candidates: the newest `read_tokens` worth of messages,
    the `EARLIER_USERS` user messages before them (the first opens the oldest turn
    read), the latest user message (the turn anchor, even when a compaction moved
    the watermark past it),
    every pinned message, and whatever completes the tool groups among them."""
    read = LogRead(session)
    await read.window(db, read_tokens)
    read.keep()
    return read.messages()


class LogRead:
    """One payload's reads of a session's log, sharing the bodies of the previous one.

    `window()` first; `seqs()` then adds rows it did not reach (a stream's layout
    keeps units older than the window); `keep()` remembers every row read for the
    session's next call, so neither read sends or decodes those bodies again.
    """

    __slots__ = ("_reader", "_session")

    def __init__(self, session: SessionRow) -> None:
        self._session = session
        self._reader = _Reader(session)

    def messages(self) -> list[LoggedMessage]:
        rows = self._reader.rows
        return [rows[s] for s in sorted(rows)]

    def keep(self) -> None:
        self._reader.keep()

    async def window(self, db: Driver, read_tokens: int) -> None:
        await _read_window(db, self._session, self._reader, read_tokens)

    async def seqs(self, db: Driver, seqs: Sequence[int]) -> None:
        """Adds the rows of `seqs` (units whole: no group completion), by bounded
        primary-key runs; bodies known from the previous read are not sent again."""
        reader = self._reader
        wanted = sorted({s for s in seqs if s not in reader.rows})
        if not wanted:
            return
        runs = _runs(wanted)
        params: dict[str, Any] = {
            **reader.params,
            "unknown": [s for s in wanted if s not in reader.known],
        }
        for i, run in enumerate(runs):
            params[f"lo{i}"], params[f"hi{i}"], params[f"in{i}"] = run[0], run[-1], run
        for r in await _fetch(db, _seq_runs(len(runs)), params):
            reader.add(r)
        await reader.fetch_missing(db)


def _runs(seqs: Sequence[int], gap: int = 64) -> list[list[int]]:
    """Sorted seqs split where two are more than `gap` apart."""
    runs: list[list[int]] = []
    for s in seqs:
        if runs and s - runs[-1][-1] <= gap:
            runs[-1].append(s)
        else:
            runs.append([s])
    return runs


# One bounded primary-key range per run of nearby seqs, each a UNION part with constant
# bounds. A bare `seq = ANY(...)` on never-analysed tables (autovacuum off, a new
# deployment) is planned as a bitmap scan of the whole session with the list as a
# filter (60-80 ms at 100k messages): without statistics a session is estimated at a
# few rows. So is a join of the messages to an array of runs (`unnest` + LATERAL):
# the planner takes the bounds as a join filter, not an index condition. Built once
# per number of runs; bench/plans.py explains the shape a replay uses.
_SEQ_RUNS: dict[int, Compiled] = {}
_UNKNOWN_BODY = case((_MSG.seq == any_(bindparam("unknown", type_=_SEQS)), _MSG.body), else_=null())


def _seq_runs(n: int) -> Compiled:
    stmt = _SEQ_RUNS.get(n)
    if stmt is None:
        columns = tuple(_UNKNOWN_BODY if c is _BODY else c for c in _COLUMNS)
        parts = [
            select(*columns).where(
                *_IN_SESSION,
                _MSG.seq >= bindparam(f"lo{i}", type_=BigInteger),
                _MSG.seq <= bindparam(f"hi{i}", type_=BigInteger),
                _MSG.seq == any_(bindparam(f"in{i}", type_=_SEQS)),
            )
            for i in range(n)
        ]
        stmt = _SEQ_RUNS[n] = Compiled(parts[0] if n == 1 else union_all(*parts))
    return stmt


async def _read_window(db: Driver, session: SessionRow, reader: _Reader, read_tokens: int) -> None:
    params = reader.params
    window_params = {
        **params,
        "threshold": session.context_tokens - read_tokens,
        "last_seq": session.last_seq,
    }
    lead_in: list[Sequence[Any]] = []
    start: int | None = None
    for r in await _fetch(db, _WINDOW_SQL, window_params):
        part = r[-1]
        if part == _LEAD:
            lead_in.append(r)
            continue
        if part == _RECENT and (start is None or r[0] < start):
            start = r[0]
        reader.add(r)
    await reader.fetch_missing(db)
    await _complete_groups(db, reader, start, lead_in)


async def _complete_groups(
    db: Driver, reader: _Reader, start: int | None, lead_in: list[Sequence[Any]]
) -> None:
    """Add the call or the results missing from any tool group partly read.

    Call ids are unique in a session and answered at most once, and a result
    always comes after its call (the append path enforces all three), so:

    - a call id whose call and answer are both in the rows read needs nothing;
    - a call at or after `start` whose answer was not read has none yet (every
      row from `start` to the session's last seq was read): it is in flight;
    - results at the start of the window whose call is in the lead-in (the rows
      just before `start`): that call and its other results, all in the lead-in
      or the window, complete the group.

    Only the ids left over (a pinned call or result, an interleaved log) are
    looked up in `tool_calls`; a call read only now sends its ids round once more.
    """
    made: set[str] = set()
    answered: set[str] = set()
    conversation.call_ids(reader.rows.values(), made, answered)
    if lead_in and answered - made:
        added = _from_lead_in(reader, lead_in, answered - made)
        conversation.call_ids(added, made, answered)
    in_flight = {
        i
        for s, m in reader.rows.items()
        if start is not None and s >= start
        for i in m.tool_call_ids
    }
    open_ids = (made ^ answered) - in_flight
    asked: set[str] = set()
    while open_ids:
        asked |= open_ids
        params = {**reader.params, "ids": sorted(open_ids), "have": list(reader.rows)}
        fetched = [m for r in await _fetch(db, _MEMBERS_SQL, params) if (m := reader.add(r))]
        fetched += await reader.fetch_missing(db)
        conversation.call_ids(fetched, made, answered)
        open_ids = (made ^ answered) - asked - in_flight


def _from_lead_in(
    reader: _Reader, lead_in: list[Sequence[Any]], wanted: set[str]
) -> list[LoggedMessage]:
    """Adds from the lead-in the calls of the `wanted` ids and all their other results."""
    lead = [m for r in lead_in if r[0] not in reader.rows and (m := reader.message(r))]
    calls: set[str] = set()
    added: list[LoggedMessage] = []
    for m in lead:
        if m.role == "assistant" and not wanted.isdisjoint(m.tool_call_ids):
            calls.update(m.tool_call_ids)
            added.append(m)
    for m in lead:
        if m.role == "tool" and str(m.body.get("tool_call_id")) in calls:
            added.append(m)
    for m in added:
        reader.rows[m.seq] = m
    return added


# Compaction's JSON (the structured summary, up to 20 flush candidates of 2 KB) is
# never part of a payload: not sent, not decoded. Raising, should assembly need it.
_NOT_FOR_PAYLOADS = ("summary", "compaction_metadata", "memory_flush_candidates", "metadata_")
_SESSION_KEYS = tuple(
    a.key for a in sa_inspect(SessionRow).column_attrs if a.key not in _NOT_FOR_PAYLOADS
)
_PAYLOAD_SESSION = Compiled(
    select(*(getattr(SessionRow, k) for k in _SESSION_KEYS), *stability.STREAM_COLUMNS)
    .outerjoin(ContextLayoutRow, stability.STREAM_JOIN)
    .where(SessionRow.tenant_id == bindparam("tenant"), SessionRow.id == bindparam("sid"))
)


def _not_for_payloads(key: str) -> Any:
    def load(state: Any, passive: Any) -> Any:
        raise InvalidRequestError(f"SessionRow.{key} is not read for payloads")

    return load


_RAISE_NOT_READ = {k: _not_for_payloads(k) for k in _NOT_FOR_PAYLOADS}
_NEW_SESSION = sa_inspect(SessionRow).class_manager.new_instance


def _session_of(record: Sequence[Any]) -> SessionRow:
    """A transient `SessionRow` holding the record's columns (in `_SESSION_KEYS` order).

    The ORM's loading of one row through `AsyncSession.execute` cost ~0.1 ms of a
    payload's 1 ms (compiling, the identity map, the row's instance); the payload
    only reads the row, so it is filled as the ORM fills a loaded one. The columns
    it does not read raise as `defer(..., raiseload=True)` made them.
    """
    row: SessionRow = _NEW_SESSION()
    row.__dict__.update(zip(_SESSION_KEYS, record, strict=True))
    instance_state(row).callables = dict(_RAISE_NOT_READ)
    return row


async def payload_session(
    db: Driver, tenant: str, sid: str
) -> tuple[SessionRow, dict[str, Sequence[Any]]]:
    """The session's row and its stored payload streams (params_key -> the rest of
    `stability.STREAM_COLUMNS`), in one round trip; NotFound if there is no such session."""
    rows = await _fetch(db, _PAYLOAD_SESSION, {"tenant": tenant, "sid": sid})
    if not rows:
        raise NotFound(f"session {sid!r} does not exist")
    n = len(_SESSION_KEYS)
    streams: dict[str, Sequence[Any]] = {r[n]: tuple(r[n + 1 :]) for r in rows if r[n] is not None}
    return _session_of(rows[0][:n]), streams


_LAST_FINISHED_JOB = Compiled(
    select(CompactionJobRow.status, CompactionJobRow.reason)
    .where(
        CompactionJobRow.tenant_id == bindparam("tenant"),
        CompactionJobRow.session_id == bindparam("sid"),
        # Literals, not an expanding IN: the statement stays one prepared statement.
        *(CompactionJobRow.status != literal_column(f"'{s}'") for s in ACTIVE),
    )
    .order_by(CompactionJobRow.finished_at.desc())
    .limit(_ONE)
)


async def last_compaction_failure(db: Driver, tenant: str, sid: str) -> str | None:
    """The reason of the session's latest finished compaction job, if that job failed."""
    rows = await _fetch(db, _LAST_FINISHED_JOB, {"tenant": tenant, "sid": sid})
    if not rows or rows[0][0] != "failed":
        return None
    return str(rows[0][1] or "failed")
