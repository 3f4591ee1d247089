"""The console's reads. Each one is bounded by an index, whatever the data's size:
10,000 sessions page by primary key (or one sort of the tenant's rows), a
100,000-message session is sampled by at most `points` primary-key probes.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, func, or_, select, text
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncSession

from app.compaction.repository import WORKER_STALE_S
from app.core.budget import as_budgeted, budget_of
from app.core.settings import Settings
from app.db.models import CompactionJobRow, MessageRow, SessionRow
from app.db.scope import of_session, of_tenant, same_session, session_sql, tenant_sql

# Outcomes that moved the watermark.
STORED = ("success", "degraded")
# Jobs a session's chart lists: the newest this many, and the newest this many stored.
MAX_JOBS = 1000
RECENT_EVENTS = 50


def raw_tokens(
    s: type[SessionRow] = SessionRow,
) -> ColumnElement[int]:
    """What the session sends now, before calibration: the order of the tokens sort."""
    return (
        s.system_tokens
        + s.tools_tokens
        + s.summary_tokens
        + s.context_tokens
        - s.watermark_context_tokens
    )


def raw_tokens_of(row: SessionRow) -> int:
    return (
        row.system_tokens
        + row.tools_tokens
        + row.summary_tokens
        + row.context_tokens
        - row.watermark_context_tokens
    )


async def session_page(
    db: AsyncSession,
    tenant: str,
    sort: str,
    after: tuple[Any, str] | None,
    prefix: str | None,
    limit: int,
) -> list[SessionRow]:
    stmt = select(SessionRow).where(of_tenant(SessionRow, tenant))
    if prefix:
        # A filter on the primary-key walk (LIKE would need escaping, and neither uses
        # the index outside the C collation): cheap at 10,000 sessions per tenant.
        stmt = stmt.where(func.starts_with(SessionRow.id, prefix))
    if sort in ("tokens", "activity"):
        # Largest first, or the latest write (append, settings, compaction) first.
        key: ColumnElement[Any] = (
            raw_tokens() if sort == "tokens" else SessionRow.updated_at.expression
        )
        if after is not None:
            value, last_id = after
            stmt = stmt.where(or_(key < value, and_(key == value, SessionRow.id > last_id)))
        stmt = stmt.order_by(key.desc(), SessionRow.id)
    else:
        if after is not None:
            stmt = stmt.where(SessionRow.id > after[1])
        stmt = stmt.order_by(SessionRow.id)
    return list((await db.execute(stmt.limit(limit))).scalars())


async def last_jobs(db: AsyncSession, tenant: str, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The latest compaction job of each session: probes of the primary key (tenant, session)."""
    if not ids:
        return {}
    J = CompactionJobRow
    stmt = (
        select(J.session_id, J.status, J.reason, J.created_at, J.finished_at)
        .where(of_tenant(J, tenant), J.session_id.in_(ids))
        .order_by(J.session_id, J.created_at.desc())
        .ext(distinct_on(J.session_id))
    )
    return {
        r.session_id: {
            "status": r.status,
            "reason": r.reason,
            "created_at": r.created_at,
            "finished_at": r.finished_at,
        }
        for r in (await db.execute(stmt)).all()
    }


SAMPLES = text(
    f"""
    SELECT m.seq, m.context_tokens_through AS through, m.created_at
    FROM generate_series(CAST(:lo AS bigint), CAST(:hi AS bigint), CAST(:step AS bigint)) AS g(s)
    CROSS JOIN LATERAL (
        SELECT seq, context_tokens_through, created_at FROM messages
        WHERE {session_sql(tenant=":tenant", sid=":sid")} AND seq >= g.s AND seq <= :hi
        ORDER BY seq LIMIT 1
    ) AS m
    """
)


async def token_series(
    db: AsyncSession, row: SessionRow, points: int, settings: Settings
) -> dict[str, Any]:
    """Effective tokens at (at most `points`) sampled seqs, and the compactions.

    Each sample is one probe of the messages primary key (first seq at or after a
    grid point), so a 100,000-message session costs `points` probes, not a scan.
    The history in effect at a message is what follows the watermark of the last
    compaction stored before the message was written; system and tools are
    today's, the summary that compaction's. Tokens are counted as the budget counts
    them (`budget.as_budgeted`), so the last point is the session's `current_tokens`.
    """
    hi = row.last_seq
    samples = await _samples(db, row, points)
    compactions = await _compactions(db, row)
    base = row.system_tokens + row.tools_tokens
    series = _series(row, samples, compactions, base)
    for p in series:
        p["tokens"] = as_budgeted(row, settings, p["tokens"])[0]
    # Where each compaction shows on the seq axis: the first sample written after it.
    for c in compactions:
        c["at_seq"] = None
        if c["finished_at"] is not None:
            c["at_seq"] = next((p["seq"] for p in series if p["at"] >= c["finished_at"]), hi)
    # Compactions stored after the last message change what the session holds but
    # no message's sample: the series ends on what the session holds now.
    now = budget_of(row, settings).current_tokens
    if series and series[-1]["tokens"] != now:
        series.append({**series[-1], "at": None, "tokens": now, "now": True})
    return {
        "session_id": row.id,
        "last_seq": hi,
        "watermark": row.last_compaction_seq,
        "base_tokens": base,
        "points": series,
        "compactions": compactions,
    }


async def _samples(db: AsyncSession, row: SessionRow, points: int) -> list[Any]:
    """(seq, context_tokens_through, created_at) at most `points` seqs, the last included."""
    key = {"tenant": row.tenant_id, "sid": row.id}
    hi = row.last_seq
    samples: list[Any] = []
    if hi > 0:
        step = max(1, -(-hi // (points - 1)))  # ceil: at most points-1 grid points, plus the last
        samples = list((await db.execute(SAMPLES, {**key, "lo": 1, "hi": hi, "step": step})).all())
        if samples and samples[-1].seq != hi:
            samples += list(
                (await db.execute(SAMPLES, {**key, "lo": hi, "hi": hi, "step": 1})).all()
            )
    return samples


async def _compactions(db: AsyncSession, row: SessionRow) -> list[dict[str, Any]]:
    """The session's newest compaction jobs (at most `MAX_JOBS`) and its newest stored ones
    (as many), oldest first, as chart points.

    The stored ones decide the line: a session that ran more jobs than that (no-ops
    asked again and again) still draws its latest compactions. Of the stored jobs, the
    newest `compaction_count` are in effect; older ones were stored before the log was
    cleared (a clear resets the count) and no longer describe any message.
    """
    J = CompactionJobRow
    through = (
        select(MessageRow.context_tokens_through)
        .where(
            same_session(MessageRow, J),
            MessageRow.seq <= J.watermark_after,
        )
        .order_by(MessageRow.seq.desc())
        .limit(1)
        .scalar_subquery()
    )
    # Each job with the log's tokens through its watermark (a probe each).
    mine = select(J, through).where(of_session(J, row.tenant_id, row.id))
    newest = mine.order_by(J.created_at.desc()).limit(MAX_JOBS)
    stored = newest.where(
        J.status.in_(STORED), J.watermark_after.is_not(None), J.reverted_at.is_(None)
    )
    jobs = {j.id: (j, t) for j, t in (await db.execute(newest)).all()}
    jobs.update({j.id: (j, t) for j, t in (await db.execute(stored)).all()})
    ordered = sorted(jobs.values(), key=lambda jt: jt[0].created_at)
    stored_jobs = [j for j, _ in ordered if _stored(j)]
    count = min(row.compaction_count, len(stored_jobs))
    in_effect = {j.id for j in stored_jobs[len(stored_jobs) - count :]}
    compactions = []
    for j, wm_through in ordered:
        if not _stored(j) or j.id not in in_effect:
            compactions.append(_job_point(j, None, None))
            continue
        result = j.result or {}
        # The summary message as the session stored it (jobs stored before that was kept
        # give the summary's own count, a few tokens less).
        summary_tokens = result.get("summary_message_tokens", result.get("summary_tokens"))
        # The turn anchor stays in the effective history below the watermark.
        history_below = int(wm_through or 0) - int(result.get("turn_anchor_tokens") or 0)
        compactions.append(
            _job_point(j, history_below, int(summary_tokens) if summary_tokens else None)
        )
    return compactions


def _stored(j: CompactionJobRow) -> bool:
    # A reverted job's summary is no longer in effect: it draws as a job that stored nothing.
    return (
        j.status in STORED
        and j.watermark_after is not None
        and j.finished_at is not None
        and j.reverted_at is None
    )


def _series(
    row: SessionRow, samples: list[Any], compactions: list[dict[str, Any]], base: int
) -> list[dict[str, Any]]:
    """The effective tokens at each sample, under the compaction in effect when it was
    written."""
    stored = [c for c in compactions if c["watermark_through"] is not None]
    series = []
    k = -1  # index into `stored` of the compaction in effect
    for seq, through, created_at in samples:
        while k + 1 < len(stored) and stored[k + 1]["finished_at"] <= created_at:
            k += 1
        in_effect = stored[k] if k >= 0 else None
        wm_through = in_effect["watermark_through"] if in_effect else 0
        summary = 0
        if in_effect is not None:
            # The newest compaction's summary is the one the session holds now.
            summary = (
                row.summary_tokens if k == len(stored) - 1 else in_effect["summary_tokens"] or 0
            )
        history = max(int(through) - int(wm_through), 0)
        series.append(
            {
                "seq": seq,
                "at": created_at,
                "log_tokens": int(through),
                "tokens": base + summary + history,
            }
        )
    return series


def _job_point(j: CompactionJobRow, through: int | None, summary: int | None) -> dict[str, Any]:
    result = j.result or {}
    range_tokens = result.get("range_tokens")
    freed = result.get("tokens_freed")  # as the metric counts it (jobs stored since it is kept)
    if freed is None and isinstance(range_tokens, int) and summary is not None:
        freed = max(range_tokens - summary, 0)
    return {
        "job_id": j.id,
        "status": j.status,
        "trigger": j.trigger,
        "reason": j.reason,
        "watermark_before": j.watermark_before,
        "watermark_after": j.watermark_after,
        "reverted_at": j.reverted_at,
        "watermark_through": through,
        "summary_tokens": summary,
        "tokens_freed": freed,
        "created_at": j.created_at,
        "finished_at": j.finished_at,
    }


QUEUE = text(
    f"""
    SELECT status, count(*) AS n, min(created_at) AS oldest
    FROM compaction_jobs
    WHERE {tenant_sql(tenant=":tenant")} AND status IN ('pending', 'running')
    GROUP BY status
    """
)

FINISHED = text(
    f"""
    SELECT status, count(*) AS n FROM compaction_jobs
    WHERE {tenant_sql(tenant=":tenant")} AND finished_at > now() - interval '1 hour'
    GROUP BY status
    """
)

EVENTS = text(
    f"""
    SELECT id, session_id, type, data, created_at FROM events
    WHERE {tenant_sql(tenant=":tenant")}
      AND (type = 'context.compressed' OR type LIKE 'compaction.%')
    ORDER BY id DESC LIMIT :limit
    """
)


LIVE_WORKERS = text(
    "SELECT count(*) FROM compaction_workers"
    " WHERE heartbeat_at > now() - make_interval(secs => :stale)"
)


async def queue_summary(db: AsyncSession, tenant: str) -> dict[str, Any]:
    key = {"tenant": tenant}
    active = {r.status: r for r in (await db.execute(QUEUE, key)).all()}
    finished = {r.status: int(r.n) for r in (await db.execute(FINISHED, key)).all()}
    now = await db.scalar(select(func.now()))
    pending = active.get("pending")
    oldest_age = (now - pending.oldest).total_seconds() if pending and now else None
    done = sum(finished.values())
    events = (await db.execute(EVENTS, {**key, "limit": RECENT_EVENTS})).all()
    # Worker processes are the deployment's, not a tenant's: a count says nothing of another tenant.
    workers = int(await db.scalar(LIVE_WORKERS, {"stale": WORKER_STALE_S}) or 0)
    return {
        "now": now,
        "workers": workers,
        "tenants": [
            {
                "tenant": tenant,
                "pending": int(pending.n) if pending else 0,
                "running": int(active["running"].n) if "running" in active else 0,
                "oldest_pending_age_s": oldest_age,
                "finished_last_hour": finished,
                "failure_rate": (finished.get("failed", 0) / done) if done else None,
            }
        ],
        "events": [
            {
                "id": e.id,
                "session_id": e.session_id,
                "type": e.type,
                "data": e.data,
                "created_at": e.created_at,
            }
            for e in events
        ],
    }
