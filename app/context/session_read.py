"""A payload's session row, read with the driver and filled as the ORM fills a loaded
row; and the last compaction failure (for COMPACTION_FAIL_OPEN false)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    bindparam,
    literal_column,
    select,
)
from sqlalchemy import inspect as sa_inspect
from sqlalchemy.exc import InvalidRequestError
from sqlalchemy.orm.attributes import instance_state

from app.context import trim_state_store as layouts
from app.context.statements import ONE, fetch
from app.core.errors import NotFound
from app.db.database import Driver
from app.db.engine import Compiled
from app.db.models import CompactionJobRow, ContextLayoutRow, SessionRow
from app.db.models.job import ACTIVE
from app.db.scope import of_session

# Compaction's JSON (the structured summary, up to 20 flush candidates of 2 KB) is
# never part of a payload: not sent, not decoded. Raising, should assembly need it.
_NOT_FOR_PAYLOADS = ("summary", "compaction_metadata", "memory_flush_candidates", "metadata_")


_SESSION_KEYS = tuple(
    a.key for a in sa_inspect(SessionRow).column_attrs if a.key not in _NOT_FOR_PAYLOADS
)


_PAYLOAD_SESSION = Compiled(
    select(*(getattr(SessionRow, k) for k in _SESSION_KEYS), *layouts.STREAM_COLUMNS)
    .outerjoin(ContextLayoutRow, layouts.STREAM_JOIN)
    .where(of_session(SessionRow, bindparam("tenant"), bindparam("sid")))
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
    return _filled(dict(zip(_SESSION_KEYS, record, strict=True)))


def _filled(columns: dict[str, Any]) -> SessionRow:
    row: SessionRow = _NEW_SESSION()
    row.__dict__.update(columns)
    instance_state(row).callables = dict(_RAISE_NOT_READ)
    return row


def with_state(row: SessionRow, state: dict[str, Any]) -> SessionRow:
    """A transient copy of a payload's row with some of its columns replaced."""
    return _filled({**{k: row.__dict__[k] for k in _SESSION_KEYS}, **state})


async def payload_session(
    db: Driver, tenant: str, sid: str
) -> tuple[SessionRow, dict[str, Sequence[Any]]]:
    """The session's row and its stored payload streams (params_key -> the rest of
    `layouts.STREAM_COLUMNS`), in one round trip; NotFound if there is no such session."""
    rows = await fetch(db, _PAYLOAD_SESSION, {"tenant": tenant, "sid": sid})
    if not rows:
        raise NotFound(f"session {sid!r} does not exist")
    n = len(_SESSION_KEYS)
    streams: dict[str, Sequence[Any]] = {r[n]: tuple(r[n + 1 :]) for r in rows if r[n] is not None}
    return _session_of(rows[0][:n]), streams


_LAST_FINISHED_JOB = Compiled(
    select(CompactionJobRow.status, CompactionJobRow.reason)
    .where(
        of_session(CompactionJobRow, bindparam("tenant"), bindparam("sid")),
        # Literals, not an expanding IN: the statement stays one prepared statement.
        *(CompactionJobRow.status != literal_column(f"'{s}'") for s in ACTIVE),
    )
    .order_by(CompactionJobRow.finished_at.desc())
    .limit(ONE)
)


async def last_compaction_failure(db: Driver, tenant: str, sid: str) -> str | None:
    """The reason of the session's latest finished compaction job, if that job failed."""
    rows = await fetch(db, _LAST_FINISHED_JOB, {"tenant": tenant, "sid": sid})
    if not rows or rows[0][0] != "failed":
        return None
    return str(rows[0][1] or "failed")
