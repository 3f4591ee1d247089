"""Runs compaction jobs: claim, plan, summarise, store — in the server or in `contextd worker`.

Jobs live in PostgreSQL. A runner claims one (fairly across tenants, see
`repository.claim_next`) under a lease it renews while it works; a job whose runner died is claimed
again once the lease runs out. The model call happens outside any
transaction; the store is one fenced, monotonic update committed together
with the job's end, so a job that was taken over meanwhile writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.budget import budget_of, effective_model, session_compaction
from app.compaction import (
    ChatModelClient,
    CompactionPlan,
    NoopReason,
    StructuredSummary,
    build_metadata,
    extract_candidates,
    summarise,
)
from app.compaction import repository as repo
from app.compaction.candidates import FlushCandidate
from app.compaction.metrics import (
    AUTO_SKIPPED,
    COMPACTION_DURATION,
    COMPACTION_JOBS,
    COMPACTION_LAG,
    MODEL_TOKENS,
    TOKENS_FREED,
)
from app.compaction.service import plan_session
from app.compaction.summary import summary_token_cap
from app.context import summary_message
from app.database import Database
from app.db import is_unavailable
from app.events import record_event
from app.models import CompactionJobRow, SessionRow
from app.settings import CompactionSettings, Settings
from app.tokens import get_counter

log = structlog.get_logger("contextd.compaction")

MAX_ATTEMPTS = 3
CLOSING_WRITE_MAX_PAUSE_S = 5.0


class JobTakenOver(Exception):
    """Another runner owns the job now: roll back everything this one was about to write."""


async def _flush_candidates(
    plan: CompactionPlan, sid: str, c: CompactionSettings
) -> list[FlushCandidate] | None:
    """Memory-flush candidates of the range, or None when the flush is skipped: it
    took longer than `flush_timeout_s` or failed. The compaction goes on either way
    (`flush_skipped` in its metadata)."""
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(
                extract_candidates,
                plan.range_messages,
                session_id=sid,
                max_candidates=c.max_flush_candidates,
                max_text_bytes=c.max_candidate_text_bytes,
            ),
            c.flush_timeout_s,
        )
    except TimeoutError:
        log.warning("memory flush timed out; skipped", timeout_s=c.flush_timeout_s)
    except Exception:
        log.exception("memory flush failed; skipped")
    return None


def _regrown(row: SessionRow, settings: Settings) -> bool:
    """The regrowth guard on the session row alone, so appends do not queue doomed jobs.

    The job's plan applies the same guard exactly; this only spares the claim,
    the history read and the noop event when the answer is already known.
    """
    if not row.compaction_count:
        return True
    ratio = session_compaction(row, settings).regrowth_ratio
    history = row.context_tokens - row.watermark_context_tokens
    return history >= row.compacted_history_tokens * (1 + ratio)


def could_free(row: SessionRow, settings: Settings) -> bool:
    """Whether a compaction could free anything, from the session row's running totals.

    The preserved tail holds at most `keep_recent_ratio` of the usable budget
    (bar the current turn's last steps), and a plan must free `min_free_ratio`
    of it: an effective history no bigger than both together has nothing worth
    compacting, so no job is queued for it (SPEC §5: no job per append that ends
    as a `noop`). A necessary condition only; the plan decides exactly.
    """
    c = session_compaction(row, settings)
    history = row.context_tokens - row.watermark_context_tokens
    # At least this much lies outside the tail; its summary takes back its share.
    outside = history - int(c.keep_recent_ratio * c.usable_budget)
    if outside <= 0:
        return False
    freed = outside - min(outside, summary_token_cap(outside))
    return freed >= max(1, int(c.min_free_ratio * c.usable_budget)) and _regrown(row, settings)


def noop_state(row: SessionRow) -> dict[str, int]:
    """What an automatic noop is remembered by: the same state never gets another job."""
    return {
        "watermark": row.last_compaction_seq,
        "generation": row.generation,
        "context_tokens": row.context_tokens,
        "history_tokens": row.context_tokens - row.watermark_context_tokens,
    }


async def _after_noop(db: AsyncSession, row: SessionRow, settings: Settings) -> bool:
    """False while the session is in the state (or barely past it) its last noop saw.

    A plan that found nothing to compact finds nothing again until the log has
    grown: by `regrowth_ratio` of the history it saw (at least `min_free_ratio`
    of the usable budget, and at least one token), on the same watermark and
    generation. Read from the session's latest noop job (its primary key prefix).
    """
    last = await db.scalar(
        select(CompactionJobRow.result)
        .where(
            CompactionJobRow.tenant_id == row.tenant_id,
            CompactionJobRow.session_id == row.id,
            CompactionJobRow.status == "noop",
        )
        .order_by(CompactionJobRow.finished_at.desc())
        .limit(1)
    )
    state = (last or {}).get("state")
    if not isinstance(state, dict):
        return True
    if (state.get("watermark"), state.get("generation")) != (
        row.last_compaction_seq,
        row.generation,
    ):
        return True  # compacted, cut or cleared since: a new state
    c = session_compaction(row, settings)
    growth = max(
        1,
        int(c.regrowth_ratio * int(state.get("history_tokens", 0))),
        int(c.min_free_ratio * c.usable_budget),
    )
    return row.context_tokens >= int(state.get("context_tokens", 0)) + growth


class CompactionRunner:
    def __init__(
        self,
        database: Database,
        settings: Settings,
        client: ChatModelClient | None,
        *,
        concurrency: int | None = None,
        poll_s: float = 1.0,
        defer_to_workers: bool = False,
    ) -> None:
        self.database = database
        self.settings = settings
        self.client = client
        self.concurrency = concurrency or settings.compaction_workers
        self.poll_s = poll_s
        # In a server in "auto" mode: claim nothing while a `contextd worker` is alive.
        self.defer_to_workers = defer_to_workers
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    # -- lifecycle -------------------------------------------------------

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._loop(), name=f"compaction-{i}")
            for i in range(self.concurrency)
        ]

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def wake(self) -> None:
        self._wake.set()

    async def on_compact_needed(
        self, tenant: str, sid: str, lock_token: str | None = None, chain: int = 0
    ) -> None:
        """An append left the session at compact_needed: queue a job if auto_compact is on."""
        try:
            async with self.database.transaction() as db:
                # Locked: a job storing its summary meanwhile (it updates this row) is
                # either seen stored here or still active below (then this joins it and
                # its chain decides again); never a decision on the row before it.
                row = await db.get(SessionRow, (tenant, sid), with_for_update=True)
                if row is None or not row.auto_compact:
                    return
                if not could_free(row, self.settings) or not await _after_noop(
                    db, row, self.settings
                ):
                    AUTO_SKIPPED.inc()
                    return
                await repo.request_job(
                    db, tenant, sid, trigger="auto", force=False, lock_token=lock_token, chain=chain
                )
        except Exception as exc:
            # The append is committed and answered; a failed enqueue only delays compaction,
            # and the next append at compact_needed asks again.
            if is_unavailable(exc):  # e.g. the pool is exhausted under load: expected
                log.warning("could not queue compaction", session_id=sid, error=repr(exc))
            else:
                log.exception("could not queue compaction", session_id=sid)
            return
        self.wake()

    async def _loop(self) -> None:
        while not self._stopping:
            try:
                worked = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if is_unavailable(exc):
                    log.warning("compaction loop: database unavailable", error=type(exc).__name__)
                else:
                    log.exception("compaction loop error")
                worked = False
            if not worked:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll_s)
                self._wake.clear()

    # -- one job ---------------------------------------------------------

    async def run_once(self) -> bool:
        """Claim and run one job; False when there was none, or it went back to the queue."""
        lease_s = self.settings.job_lease_s
        async with self.database.transaction() as db:
            job = await repo.claim_next(
                db,
                self.worker_id,
                lease_s,
                tenant_cap=self.settings.compaction_tenant_max_running,
                defer_to_workers=self.defer_to_workers,
            )
        if job is None:
            return False
        structlog.contextvars.bind_contextvars(session_id=job.session_id, job_id=job.id)
        heartbeat = asyncio.create_task(self._heartbeat(job, lease_s))
        start = time.perf_counter()
        gave_back = False
        try:
            if job.attempts > MAX_ATTEMPTS:
                await self._fail(job, f"abandoned after {MAX_ATTEMPTS} attempts")
                return True
            # Two model calls (first try and the anchor retry) and the bookkeeping around them.
            budget_s = self.settings.compaction.compact_timeout_s * 2 + 5
            async with asyncio.timeout(budget_s):
                await self._run(job)
        except JobTakenOver:
            log.warning("compaction job taken over by another worker")
        except TimeoutError:
            await self._fail(job, "compaction timed out")
        except Exception as exc:
            if is_unavailable(exc):
                await self._give_back(job, exc)
                gave_back = True
            else:
                log.exception("compaction job crashed")
                await self._fail(job, f"compaction crashed: {type(exc).__name__}")
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            COMPACTION_DURATION.observe(time.perf_counter() - start)
            structlog.contextvars.unbind_contextvars("job_id")
        # After a give-back, as after an empty claim, the loop waits before claiming again:
        # the database that was busy a moment ago gets the moment.
        return not gave_back

    async def _heartbeat(self, job: repo.Job, lease_s: float) -> None:
        while True:
            await asyncio.sleep(lease_s / 3)
            try:
                async with self.database.transaction() as db:
                    await repo.extend_lease(db, job, self.worker_id, lease_s)
            except Exception:
                log.warning("could not extend compaction lease")

    async def _run(self, job: repo.Job) -> None:
        async with self.database.transaction() as db:
            row = await db.get(SessionRow, (job.tenant_id, job.session_id), populate_existing=True)
            if row is None:
                return  # the session was deleted; its jobs went with it
            history = await repo.history_after(db, row.tenant_id, row.id, row.last_compaction_seq)
        c = session_compaction(row, self.settings)
        counter = get_counter(effective_model(row, self.settings))
        plan = plan_session(history, row, c, force=job.force)
        if isinstance(plan, NoopReason):
            meta = build_metadata(plan, None, triggered_at=job.created_at)
            meta["state"] = noop_state(row)
            await self._finish(job, "noop", meta, reason=plan.code)
            return
        candidates = await _flush_candidates(plan, row.id, c)
        previous = StructuredSummary.from_dict(row.summary) if row.summary else None
        outcome = await summarise(
            plan,
            previous,
            [str(a) for a in row.anchors],
            client=self.client,
            settings=c,
            counter=counter,
            system_texts=[row.system_prompt] if row.system_prompt else (),
        )
        summary_tokens = counter.count_message(
            summary_message(outcome.rendered_text, plan.new_watermark)
        )
        compacted = row.system_tokens + row.tools_tokens + summary_tokens + plan.preserved_tokens
        meta = build_metadata(
            plan,
            outcome,
            triggered_at=job.created_at,
            compacted_context_tokens=compacted,
            flush_skipped=candidates is None,
        )
        MODEL_TOKENS.inc(outcome.prompt_tokens + outcome.completion_tokens)
        await self._store(
            job,
            row,
            plan,
            meta,
            outcome.status,
            {
                "summary": outcome.summary.to_dict(),
                "summary_text": outcome.rendered_text,
                "summary_tokens": summary_tokens,
                "compaction_metadata": meta,
                # A skipped flush leaves the previous candidates in place.
                "memory_flush_candidates": row.memory_flush_candidates
                if candidates is None
                else [cand.to_dict() for cand in candidates],
                "compacted_history_tokens": plan.preserved_tokens,
            },
        )

    async def _store(
        self,
        job: repo.Job,
        row: SessionRow,
        plan: CompactionPlan,
        meta: dict[str, Any],
        status: str,
        values: dict[str, Any],
    ) -> None:
        async with self.database.transaction() as db:
            stored = await repo.store_summary(
                db,
                job,
                new_watermark=plan.new_watermark,
                generation=row.generation,
                values=values,
                kept_below_tokens=plan.anchor_tokens,
            )
            if not stored:
                reason = (
                    "fenced: the lease changed hands, the watermark moved past this range, "
                    "or the log was cut or cleared meanwhile"
                )
                meta = {**meta, "status": "failed", "reason": reason}
                if not await repo.hold_session(db, job):
                    raise JobTakenOver  # the session was deleted and its jobs with it
                if not await repo.finish_job(db, job, self.worker_id, "failed", meta, reason):
                    raise JobTakenOver
                await record_event(db, job.tenant_id, job.session_id, "compaction.failed", meta)
                COMPACTION_JOBS.labels("failed").inc()
                return
            if not await repo.finish_job(
                db, job, self.worker_id, status, meta, watermark_after=plan.new_watermark
            ):
                raise JobTakenOver  # rolls the store back with it
            await record_event(db, job.tenant_id, job.session_id, f"compaction.{status}", meta)
        COMPACTION_JOBS.labels(status).inc()
        TOKENS_FREED.inc(max(plan.range_tokens - int(values["summary_tokens"]), 0))
        COMPACTION_LAG.observe(max(time.time() - job.created_at.timestamp(), 0.0))
        log.info(
            "compacted",
            status=status,
            watermark=plan.new_watermark,
            summarized=plan.summarized_count,
            freed=plan.range_tokens - int(values["summary_tokens"]),
        )
        await self._maybe_chain(job, row)

    async def _maybe_chain(self, job: repo.Job, row: SessionRow) -> None:
        """Still over the threshold after an automatic compaction: go again, within the limit."""
        limit = session_compaction(row, self.settings).max_compactions_per_request
        if job.trigger != "auto" or job.chain + 1 >= limit:
            return
        async with self.database.transaction() as db:
            fresh = await db.get(SessionRow, (row.tenant_id, row.id), populate_existing=True)
            if fresh is None or budget_of(fresh, self.settings).status != "compact_needed":
                return
        await self.on_compact_needed(row.tenant_id, row.id, job.lock_token, chain=job.chain + 1)

    async def _finish(
        self, job: repo.Job, status: str, meta: dict[str, Any], reason: str | None = None
    ) -> None:
        async with self.database.transaction() as db:
            if not await repo.hold_session(db, job):
                raise JobTakenOver  # the session was deleted and its jobs with it
            if not await repo.finish_job(db, job, self.worker_id, status, meta, reason):
                raise JobTakenOver
            await record_event(db, job.tenant_id, job.session_id, f"compaction.{status}", meta)
        COMPACTION_JOBS.labels(status).inc()

    async def _give_back(self, job: repo.Job, exc: Exception) -> None:
        """The database was away or busy (a pool wait timed out under load): not the job's
        fault, and nothing of it was stored. It goes back to the queue; a claim counts an
        attempt, so a database that stays away still ends it after MAX_ATTEMPTS."""
        log.warning(
            "compaction job: database unavailable; back in the queue",
            error=type(exc).__name__,
        )

        async def write() -> None:
            async with self.database.transaction() as db:
                await repo.give_back(db, job, self.worker_id)

        await self._until_written(write, "could not put the compaction job back in the queue")

    async def _fail(self, job: repo.Job, reason: str) -> None:
        meta = build_metadata(None, None, triggered_at=job.created_at, failed_reason=reason)

        async def write() -> None:
            with contextlib.suppress(JobTakenOver):
                await self._finish(job, "failed", meta, reason)

        await self._until_written(write, "could not record compaction failure")
        log.warning("compaction failed", reason=reason)

    async def _until_written(self, write: Callable[[], Awaitable[None]], failed: str) -> None:
        """Run a job's closing write until it lands, backing off while the database is
        unavailable. Until it lands the job is this runner's, and no runner takes over
        its own jobs (a late heartbeat is not a death): with no other process, a job
        whose closing write was lost would stay "running" for good. Gives up on another
        error (logged) or when the runner stops (then the lease runs out and a runner of
        another process, or of this one restarted, takes the job over)."""
        pause = 0.25
        while not self._stopping:
            try:
                await write()
                return
            except Exception as exc:
                if not is_unavailable(exc):
                    log.exception(failed)
                    return
                log.warning(failed + "; retrying", error=type(exc).__name__)
            await asyncio.sleep(pause)
            pause = min(pause * 2, CLOSING_WRITE_MAX_PAUSE_S)
