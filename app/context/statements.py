"""The payload reads' fixed statements, built and compiled once (run by
app/context/repository.py and app/context/session_read.py)."""

from __future__ import annotations

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
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, array

from app.db.database import Driver
from app.db.engine import Compiled
from app.db.models import MessageRow, ToolCallRow
from app.db.scope import of_session, same_session

# --- running fixed statements on the driver ---------------------------------------------------
# The reads of a payload are fixed Core statements run on every call. Through
# `AsyncSession.execute` each costs ~0.3 ms of CPU beyond asyncpg's own work here
# (cache-key lookup, parameter and result processing, Row objects: a trivial select
# 0.40 ms against 0.07 ms on the driver): ~1 ms per context call. They are compiled
# once and run by asyncpg on the payload pool's connection (`Database.payloads()`,
# which also invalidates it when the database is away); their parameters
# need no conversion (text, integers, arrays of them) and the driver decodes their
# columns (jsonb included: the dialect registers its codecs on every connection).


# --- statements, built once -------------------------------------------------------------------
# Module-level statements with bound parameters: SQLAlchemy memoizes a statement
# object's cache key, so a call pays neither building nor keying the SQL. Lists
# travel as one array parameter, never one parameter per value, so each
# statement stays one prepared statement on the server.


async def fetch(db: Driver, stmt: Compiled, params: dict[str, Any]) -> list[Any]:
    """The rows of one of these statements, run on the driver."""
    rows: list[Any] = await db.fetch(stmt.sql, *stmt.args(params))
    return rows


_MSG = MessageRow


# LIMIT 1 written out, not a bound parameter: with an unknown count a generic plan
# assumes a tenth of the rows, costs itself above the custom plans and PostgreSQL
# then plans the statement again on every execution (~0.7 ms here).
ONE: ColumnElement[int] = literal_column("1")


EARLIER_USERS = 64


_EARLIER_USERS: ColumnElement[int] = literal_column(str(EARLIER_USERS))


_IN_SESSION = of_session(_MSG, bindparam("tenant"), bindparam("sid"))


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
#
# `read_floor` is the watermark, except where the window may also read the compacted
# units just below it (app/context/backfill.py): then 0, and the threshold alone (a
# token count: at most what could fit) bounds the walk. The user messages before the
# window and the pinned ones stay above the watermark (`floor`).
_BOUNDARY = (
    select(_MSG.seq)
    .where(
        _IN_SESSION,
        _MSG.seq > bindparam("read_floor"),
        _MSG.context_tokens_through <= bindparam("threshold"),
    )
    .order_by(_MSG.seq.desc())
    .limit(ONE)
    .scalar_subquery()
)


_START_CTE = select(
    (func.coalesce(_BOUNDARY, bindparam("read_floor", type_=BigInteger)) + 1).label("seq")
).cte("window_start")


_START = select(_START_CTE.c.seq).scalar_subquery()


_BEFORE = (_MSG.seq > bindparam("floor"), _MSG.seq < _START)


_READ_BEFORE = (_MSG.seq > bindparam("read_floor"), _MSG.seq < _START)


# When the window opens on tool results, their call is just before it: the rows
# from the nearest message before the start that is not a tool result are read
# along (the lead-in), so the group can be completed without a lookup in
# `tool_calls` in the usual case. Only the rows the group needs are kept.
_TOOL: ColumnElement[str] = literal_column("'tool'")


_LEAD_IN_CTE = select(
    case(
        (
            select(_MSG.role).where(_IN_SESSION, _MSG.seq == _START).scalar_subquery() == _TOOL,
            func.coalesce(
                select(_MSG.seq)
                .where(_IN_SESSION, *_READ_BEFORE, _MSG.role != _TOOL)
                .order_by(_MSG.seq.desc())
                .limit(ONE)
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


# Which part of the window read a row came from (its `part` column), for its reader.
RECENT, OPENER, PINNED, LEAD, ANCHOR = 1, 2, 3, 4, 5


_WINDOW = union_all(
    # Both bounds, although nothing follows `last_seq`: the planner cannot know the
    # start (a subquery), and an open range would be estimated at a third of the
    # session's rows, enough for a sequential scan of a session that fills the
    # table. A closed range with an unknown end is estimated at 0.5% of them, so
    # the primary key is walked whatever the session's share of the table.
    select(*_COLUMNS, _part(RECENT)).where(
        _IN_SESSION, _MSG.seq >= _START, _MSG.seq <= bindparam("last_seq")
    ),
    # The user messages before the window, newest first (the first opens its oldest
    # turn): a strategy keeps a user's short mid-run instruction ahead of any tool
    # output (SPEC §3), so it must be offered ones older than the budget reaches.
    # Bounded: `EARLIER_USERS` rows of the partial index on users.
    select(*_COLUMNS, _part(OPENER))
    # A literal, not a parameter: the partial index on users holds for generic plans too.
    .where(_IN_SESSION, _MSG.role == literal_column("'user'"), *_BEFORE)
    .order_by(_MSG.seq.desc())
    .limit(_EARLIER_USERS)
    .subquery()
    .select(),
    select(*_COLUMNS, _part(PINNED)).where(_IN_SESSION, _MSG.pinned, *_BEFORE),
    select(*_COLUMNS, _part(LEAD)).where(_IN_SESSION, _MSG.seq >= _LEAD_IN, _MSG.seq < _START),
    # The turn anchor (SPEC §5): the session's latest user message, whatever the floor.
    # A compaction may move the watermark inside the current turn, past the message
    # that opens it; that message stays in the effective history verbatim. Above the
    # floor it is one of the rows above already (read once: rows are kept by seq).
    select(*_COLUMNS, _part(ANCHOR))
    .where(_IN_SESSION, _MSG.role == literal_column("'user'"))
    .order_by(_MSG.seq.desc())
    .limit(ONE)
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
            same_session(ToolCallRow, _MSG),
            _MSG.seq == any_(array([ToolCallRow.seq, ToolCallRow.answered_seq])),
        ),
    )
    .where(
        of_session(ToolCallRow, bindparam("tenant"), bindparam("sid")),
        ToolCallRow.call_id == any_(bindparam("ids", type_=ARRAY(Text))),
        _MSG.seq > bindparam("read_floor"),
        _MSG.seq != all_(bindparam("have", type_=_SEQS)),
    )
)


_BODIES = select(_MSG.seq, _MSG.body).where(
    _IN_SESSION, _MSG.seq == any_(bindparam("seqs", type_=_SEQS))
)


WINDOW_SQL = Compiled(_WINDOW)


MEMBERS_SQL = Compiled(_MEMBERS)


BODIES_SQL = Compiled(_BODIES)


# One bounded primary-key range per run of nearby seqs, each a UNION part with constant
# bounds. A bare `seq = ANY(...)` on never-analysed tables (autovacuum off, a new
# deployment) is planned as a bitmap scan of the whole session with the list as a
# filter (60-80 ms at 100k messages): without statistics a session is estimated at a
# few rows. So is a join of the messages to an array of runs (`unnest` + LATERAL):
# the planner takes the bounds as a join filter, not an index condition. Built once
# per number of runs; tests/db/test_payload_plans.py checks the plan a replay uses.
_SEQ_RUNS: dict[int, Compiled] = {}


_UNKNOWN_BODY = case((_MSG.seq == any_(bindparam("unknown", type_=_SEQS)), _MSG.body), else_=null())


def seq_runs(n: int) -> Compiled:
    """The read of the rows of `n` runs of nearby seqs (the lo/hi/in parameters of each)."""
    stmt = _SEQ_RUNS.get(n)
    if stmt is None:
        columns = tuple(_UNKNOWN_BODY if c is _BODY else c for c in _COLUMNS)
        parts = [
            select(*columns).where(
                _IN_SESSION,
                _MSG.seq >= bindparam(f"lo{i}", type_=BigInteger),
                _MSG.seq <= bindparam(f"hi{i}", type_=BigInteger),
                _MSG.seq == any_(bindparam(f"in{i}", type_=_SEQS)),
            )
            for i in range(n)
        ]
        stmt = _SEQ_RUNS[n] = Compiled(parts[0] if n == 1 else union_all(*parts))
    return stmt
