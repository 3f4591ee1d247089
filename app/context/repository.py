"""Reads for assembly: only as much of the log as the budget can reach.

Every query walks the `(tenant_id, session_id, seq)` primary key, the
`(tenant_id, session_id, call_id)` key of `tool_calls` or a partial index from
the newest end, so the cost follows the size of the window, never the length
of the log. One round trip for the window, the user messages before it (up to
`EARLIER_USERS`, the first opening its oldest turn) and the pinned messages;
one more only when an edge of the window cuts a tool group. Bodies already
read for the session's previous window are not sent again (`Caches.windows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.context.caches import NOTHING_KNOWN, KnownRows
from app.context.lru import LRU
from app.context.statements import (
    BODIES_SQL,
    LEAD,
    MEMBERS_SQL,
    RECENT,
    WINDOW_SQL,
    fetch,
    seq_runs,
)
from app.core import conversation
from app.core.conversation import LoggedMessage
from app.db.database import Driver
from app.db.models import SessionRow

# Bodies of the windows read last are kept per session (`Caches.windows`): an agent's
# window barely moves between two calls. Rows are immutable once appended except for
# their token counts and flags, which are read every time; a row is known by (seq,
# message id, created_at) within its (tenant, session), so a session deleted and
# created again never finds the old bodies. Bodies are shared between calls: nothing
# may mutate a LoggedMessage.body.
Windows = LRU[tuple[str, str], KnownRows]


class _Reader:
    """One window read: which rows' bodies are already known, and what was read."""

    __slots__ = ("known", "missing", "params", "rows", "start", "windows")

    def __init__(self, session: SessionRow, windows: Windows) -> None:
        self.windows = windows
        known = windows.get((session.tenant_id, session.id)) or NOTHING_KNOWN
        self.known = known.rows
        self.params: dict[str, Any] = {
            "tenant": session.tenant_id,
            "sid": session.id,
            "floor": session.last_compaction_seq,
            "read_floor": session.last_compaction_seq,
            "known_lo": known.lo,
            "known_hi": known.hi,
            "known_extra": known.extra,
        }
        self.rows: dict[int, LoggedMessage] = {}
        self.missing: dict[int, Sequence[Any]] = {}
        # The window's first seq: every row from it to the session's last was read.
        self.start: int | None = None

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
        for seq, body in await fetch(db, BODIES_SQL, params):
            r = self.missing.pop(seq)
            added = self.add((*r[:3], body, *r[4:]))
            if added is not None:
                out.append(added)
        return out

    def keep(self) -> None:
        self.windows.put((self.params["tenant"], self.params["sid"]), KnownRows.of(dict(self.rows)))


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


class LogRead:
    """One payload's reads of a session's log, sharing the bodies of the previous one.

    `window()` first; `seqs()` then adds rows it did not reach (a stream's layout
    keeps units older than the window); `keep()` remembers every row read for the
    session's next call, so neither read sends or decodes those bodies again.
    """

    __slots__ = ("_reader", "_session")

    def __init__(self, session: SessionRow, windows: Windows) -> None:
        self._session = session
        self._reader = _Reader(session, windows)

    def messages(self) -> list[LoggedMessage]:
        rows = self._reader.rows
        return [rows[s] for s in sorted(rows)]

    def keep(self) -> None:
        self._reader.keep()

    @property
    def complete_from(self) -> int | None:
        """The first seq from which every row of the log was read (the window's start);
        None before `window()`, or when the window read nothing."""
        return self._reader.start

    async def window(self, db: Driver, read_tokens: int, below_tokens: int = 0) -> None:
        """The newest `read_tokens` of the effective history; with `below_tokens`, when
        the effective history is shorter, also the compacted messages just below the
        watermark, up to that many tokens (app/context/backfill.py). One round trip."""
        await _read_window(db, self._session, self._reader, read_tokens, below_tokens)

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
        for r in await fetch(db, seq_runs(len(runs)), params):
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


async def _read_window(
    db: Driver, session: SessionRow, reader: _Reader, read_tokens: int, below_tokens: int = 0
) -> None:
    params = reader.params
    threshold = session.context_tokens - read_tokens
    if below_tokens > 0 and threshold < session.watermark_context_tokens:
        # The effective history is read whole: go on below the watermark, by tokens. The
        # lead-in and the tool-group lookups follow the window down (`read_floor`).
        params["read_floor"] = 0
        threshold = session.watermark_context_tokens - below_tokens
    window_params = {
        **params,
        "threshold": threshold,
        "last_seq": session.last_seq,
    }
    lead_in: list[Sequence[Any]] = []
    start: int | None = None
    for r in await fetch(db, WINDOW_SQL, window_params):
        part = r[-1]
        if part == LEAD:
            lead_in.append(r)
            continue
        if part == RECENT and (start is None or r[0] < start):
            start = r[0]
        reader.add(r)
    reader.start = start
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
        fetched = [m for r in await fetch(db, MEMBERS_SQL, params) if (m := reader.add(r))]
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
