"""A group's transaction: appends of different sessions written in one transaction.

app/messages/group_commit.py queues them. A group is BEGIN, one statement
(repository.WRITE_GROUP) and COMMIT. An append that must not stand is left out,
the group rolled back and the rest written again; the one left out is appended
alone, which names its problem (docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.db.driver_errors import is_unavailable
from app.messages import repository as repo
from app.messages.write import (
    AppendResult,
    Pending,
    SessionHead,
    admit,
    finish_append,
    transaction,
    write_args,
    write_batch,
)
from app.observability import metrics

if TYPE_CHECKING:
    from app.db.database import Database


class _Refused(Exception):
    """Some appends of a group must not stand: roll back, write the others again."""

    def __init__(self, indexes: list[int]) -> None:
        self.indexes = indexes


class _Alone(Exception):
    """The group's transaction failed before its commit: each append goes alone."""


async def write_group(database: Database, items: list[Pending]) -> list[AppendResult | None]:
    """Write the appends of several sessions in one transaction (app/messages/group_commit.py).

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
    # by a scan of the whole table (`bench/plans.py` (since removed, last at 97ba89a)
    # showed it). Planning it is once per group, a few hundredths of a millisecond per
    # append under load.
    alone = len(items) == 1
    async with (
        database.driver() as conn,
        transaction(conn, repo.BEGIN_GENERIC if alone else "BEGIN"),
    ):
        try:
            if alone:
                by_k = {1: await write_batch(conn, items[0])}
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
                head, acks = admit(row, p)
            except Exception:
                refused.append(k - 1)
                continue
            admitted.append((p, head, acks))
        if refused:
            raise _Refused(refused)
        metrics.RE_READS.inc(sum(int(r["re_reads_in"]) for r in by_k.values() if r is not None))
        results: list[AppendResult | None] = []
        for entry in admitted:
            if entry is None:
                results.append(None)
                continue
            p, head, acks = entry
            results.append(
                await finish_append(
                    conn, p.tenant, p.sid, head, p.batch, p.counts, acks, p.settings
                )
            )
        return results


def _group_args(items: Sequence[Pending]) -> list[Any]:
    """WRITE_GROUP's parameters: each append's WRITE_BATCH arguments, tagged with its k."""
    columns: list[list[Any]] = [[] for _ in range(32)]
    for k, p in enumerate(items, 1):
        args = write_args(p.batch, p.counts, p.ids, p.search, p.settings.tool_preview_tokens)
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
        columns[28].extend(args[22])  # the messages' search vectors
        columns[29].extend(args[23])  # the calls' name-and-arguments digests
        columns[30].extend([k] * len(args[24]))  # the distinct ones, for the re-read check
        columns[31].extend(args[24])
    # The preview limit ($33): one setting for the process.
    return [*columns, items[0].settings.tool_preview_tokens if items else 0]
