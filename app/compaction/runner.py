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

from app.compaction import reads
from app.compaction import repository as repo
from app.compaction.candidates import flush_candidates
from app.compaction.engine import summarise
from app.compaction.metadata import build_metadata
from app.compaction.metrics import (
    AUTO_SKIPPED,
    COMPACTION_DURATION,
    COMPACTION_JOBS,
    COMPACTION_LAG,
    MODEL_TOKENS,
    TOKENS_FREED,
    count_gate,
)
from app.compaction.model_client import ChatModelClient
from app.compaction.noop_guard import could_free, grown_since_noop_or_revert, noop_state
from app.compaction.service import plan_session
from app.compaction.stored import summary_values
from app.compaction.summary import StructuredSummary
from app.compaction.turns import CompactionPlan, NoopReason
from app.core.budget import budget_of, effective_model, session_compaction
from app.core.conversation import summary_message
from app.core.settings import Settings
from app.core.tokens import get_counter
from app.db.database import Database
from app.db.driver_errors import is_unavailable
from app.db.models import SessionRow
from app.observability.events import record_event

log = structlog.get_logger("contextd.compaction")

MAX_ATTEMPTS = 3
# Messages before the range read for values tools returned there (artifacts.py): the
# newest ones, a bounded read whatever the log's length.
EARLIER_TOOL_TURNS = 200
CLOSING_WRITE_MAX_PAUSE_S = 5.0


class JobTakenOver(Exception):
    """Another runner owns the job now: roll back everything this one was about to write."""


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
                if not could_free(row, self.settings) or not await grown_since_noop_or_revert(
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
            history = await reads.history_after(db, row.tenant_id, row.id, row.last_compaction_seq)
            below = await reads.anchor_below(
                db, row.tenant_id, row.id, row.last_compaction_seq, history
            )
            earlier = await reads.tool_turns_before(
                db, row.tenant_id, row.id, row.last_compaction_seq, EARLIER_TOOL_TURNS
            )
        c = session_compaction(row, self.settings)
        counter = get_counter(effective_model(row, self.settings))
        plan = plan_session(history, row, c, force=job.force, anchor_below=below)
        if isinstance(plan, NoopReason):
            meta = build_metadata(plan, None, triggered_at=job.created_at)
            meta["state"] = noop_state(row)
            await self._finish(job, "noop", meta, reason=plan.code)
            return
        candidates = await flush_candidates(plan, row.id, c)
        previous = StructuredSummary.from_dict(row.summary) if row.summary else None
        outcome = await summarise(
            plan,
            previous,
            [str(a) for a in row.anchors],
            client=self.client,
            settings=c,
            counter=counter,
            system_texts=[row.system_prompt] if row.system_prompt else (),
            earlier=earlier,
        )
        summary_tokens = counter.count_message(summary_message(outcome.rendered_text))
        compacted = row.system_tokens + row.tools_tokens + summary_tokens + plan.preserved_tokens
        meta = build_metadata(
            plan,
            outcome,
            triggered_at=job.created_at,
            compacted_context_tokens=compacted,
            flush_skipped=candidates is None,
        )
        # What the chart of the console needs to redraw this compaction's effect exactly:
        # the turn anchor's tokens stay in the effective history below the new watermark,
        # and what was freed is counted with the summary as the session stores it.
        meta["turn_anchor_tokens"] = plan.anchor_tokens
        meta["summary_message_tokens"] = summary_tokens
        meta["tokens_freed"] = max(plan.range_tokens - summary_tokens, 0)
        MODEL_TOKENS.inc(outcome.prompt_tokens + outcome.completion_tokens)
        count_gate(outcome.gate)
        values = summary_values(row, plan, outcome, meta, summary_tokens, candidates)
        await self._store(job, row, plan, meta, outcome.status, values)

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
            # A degraded job says why on the job itself, as a failed one does.
            why = meta.get("reason") if status == "degraded" else None
            if not await repo.finish_job(
                db, job, self.worker_id, status, meta, why, watermark_after=plan.new_watermark
            ):
                raise JobTakenOver  # rolls the store back with it
            await record_event(db, job.tenant_id, job.session_id, f"compaction.{status}", meta)
        COMPACTION_JOBS.labels(status).inc()
        TOKENS_FREED.inc(int(meta.get("tokens_freed", 0)))
        COMPACTION_LAG.observe(max(time.time() - job.created_at.timestamp(), 0.0))
        log.info(
            "compacted",
            status=status,
            watermark=plan.new_watermark,
            summarized=plan.summarized_count,
            freed=meta.get("tokens_freed"),
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
